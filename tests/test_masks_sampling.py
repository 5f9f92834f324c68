"""Every output sampled under the masks (uniform over allowed tokens, until the end token) is a
sentence of the grammar according to lark (DESIGN §11, judge 4)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

import glrmask
from _engine_support import LarkJudge, allowed, output_bytes
from _grammars import CASES
from conftest import tiny_vocab

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"


def sample(mask, vocab, rng: random.Random, max_tokens: int):
    state, out = mask.start(), []
    for _ in range(max_tokens):
        ids = sorted(allowed(mask.get_mask(state)))
        if not ids:
            return None
        tok = rng.choice(ids)
        assert state.commit(tok)
        if state.is_terminated():
            return out
        out.append(tok)
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sampled_outputs_parse_with_lark_tiny_vocab(case):
    vocab = tiny_vocab(list(case.pieces))
    mask = glrmask.compile(case.grammar, vocab, format="lark")
    judge = LarkJudge(case.grammar)
    rng = random.Random(case.name)
    done = 0
    for _ in range(30):
        toks = sample(mask, vocab, rng, 40)
        if toks is None:
            continue
        text = output_bytes(vocab, toks)
        assert judge.accepts(text), (case.name, text)
        done += 1
    assert done > 0


@pytest.mark.parametrize("grammar", ["json.lark", "arithmetic.lark", "csv.lark", "sql.lark", "tinylang.lark"])
def test_sampled_outputs_parse_with_lark_gpt2(grammar, gpt2):
    path = GRAMMARS / grammar
    mask = glrmask.compile(path, gpt2)
    judge = LarkJudge(path.read_text())
    rng = random.Random(grammar)
    done = 0
    for _ in range(4):
        toks = sample(mask, gpt2, rng, 60)
        if toks is None:
            continue
        text = output_bytes(gpt2, toks)
        assert judge.accepts(text), (grammar, text)
        done += 1
    assert done > 0 or grammar != "json.lark"
