"""The shipped Lark grammars (via the Lark front-end) normalize, build, and the GLR recognizer
agrees with an independent Earley recognizer on the ORIGINAL grammar's terminal sequences."""
from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from _lr_support import Earley, earley_accepts, random_sentence, sentences_and_near_misses
from glrmask.grammar import lark_frontend
from glrmask.grammar.normalize import check_normalized, normalize
from glrmask.lr import LRTable
from glrmask.reference import GLR, recognize

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
NAMES = sorted(p.stem for p in GRAMMARS.glob("*.lark"))


def _load(name: str):
    return lark_frontend.grammar_from_lark((GRAMMARS / f"{name}.lark").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_shipped_grammar_glr_agrees_with_earley_on_terminal_sequences(name):
    original = _load(name)
    normalized = normalize(original)
    check_normalized(normalized)
    glr, earley = GLR(LRTable.build(normalized)), Earley(original)
    cases = sentences_and_near_misses(
        original, seed=zlib.crc32(name.encode()), n=12, max_depth=9, max_len=30
    )
    assert any(earley_accepts(earley, s) for s in cases)
    for seq in cases:
        assert recognize(glr.table, seq, glr) == earley_accepts(earley, seq), seq


@pytest.mark.parametrize("name", NAMES)
def test_shipped_grammar_viable_prefixes_agree_with_earley(name):
    original = _load(name)
    glr, earley = GLR(LRTable.build(normalize(original))), Earley(original)
    rng = random.Random(zlib.crc32(name.encode()) + 1)
    names = glr.table.terminals
    for _ in range(3):
        s = random_sentence(original, rng, max_depth=9, max_len=20) or []
        for i in range(len(s) + 1):
            f = glr.feed_names(glr.initial(), s[:i])
            assert {names[t] for t in glr.acceptable(f)} == earley.expected(s[:i]), s[:i]
