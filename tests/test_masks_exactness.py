"""Exactness of dynamic masks against independent judges (DESIGN §11).

* mask ⇔ commit on every state of random walks, every token of tiny vocabularies;
* a brute-force completion oracle built from lark alone (no glrmask lexer or parser);
* co-accessibility: every reachable state can still reach an accepting one.
"""
from __future__ import annotations

import random
from functools import lru_cache

import pytest

import glrmask
from _engine_support import LarkJudge, allowed, output_bytes, random_walk
from _grammars import CASES
from conftest import tiny_vocab


@lru_cache(maxsize=None)
def compiled(name: str):
    case = next(c for c in CASES if c.name == name)
    vocab = tiny_vocab(list(case.pieces))
    return case, vocab, glrmask.compile(case.grammar, vocab, format="lark")


def walk_states(name: str, n_walks: int = 6, steps: int = 8):
    case, vocab, mask = compiled(name)
    rng = random.Random(name)
    for _ in range(n_walks):
        for state, ids in random_walk(mask, rng, steps):
            yield state.fork(), ids


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_mask_equals_commit_on_every_token(name):
    case, vocab, mask = compiled(name)
    for state, ids in walk_states(name):
        for tok in range(vocab.size):
            assert (tok in ids) == state.fork().commit(tok), (name, tok)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.slack])
def test_mask_matches_bruteforce_completion_oracle(name):
    case, vocab, mask = compiled(name)
    judge = LarkJudge(case.grammar)
    alphabet = bytes(sorted({b for t in range(vocab.size) for b in vocab.token_bytes(t)}))
    max_len = 1
    while len(alphabet) ** (max_len + 1) <= 6_000:
        max_len += 1
    prefixes = judge.language_prefixes(alphabet, max_len)
    end = vocab.size - 1
    rng = random.Random(1)
    for _ in range(8):
        state, history = mask.start(), []
        for _ in range(6):
            ids = allowed(mask.get_mask(state))
            u = output_bytes(vocab, history)
            for tok in range(end):
                ub = u + vocab.token_bytes(tok)
                if ub in prefixes:  # a short completion exists -> must be allowed
                    assert tok in ids, (name, ub)
                if tok in ids and len(ub) + case.slack <= max_len:
                    assert ub in prefixes, (name, ub)  # allowed -> a completion exists
            assert (end in ids) == judge.accepts(u), (name, u)
            if len(u) >= max_len:
                break
            choices = sorted(t for t in ids if t != end)
            if not choices:
                break
            tok = rng.choice(choices)
            state.commit(tok)
            history.append(tok)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_every_reachable_state_can_still_accept(name):
    case, vocab, mask = compiled(name)
    for state, ids in walk_states(name, n_walks=4, steps=6):
        if state.is_terminated():
            continue
        assert _can_accept(mask, state, depth=8), (name, state)


def _can_accept(mask, state, depth: int) -> bool:
    """Bounded breadth-first search over the next bytes (public API: ``commit_bytes`` on forks)
    for a continuation that makes the state accepting."""
    frontier = {state.configuration(): state}
    for _ in range(depth + 1):
        if any(s.is_accepting() for s in frontier.values()):
            return True
        nxt = {}
        for s in frontier.values():
            for b in range(256):
                f = s.fork()
                if f.commit_bytes(bytes((b,))):
                    nxt.setdefault(f.configuration(), f)
            if len(nxt) > 2000:
                break
        frontier = nxt
    return False


REAL_GRAMMARS = ["json.lark", "arithmetic.lark", "csv.lark", "tinylang.lark", "sql.lark"]


@pytest.mark.parametrize("vocab_name", ["gpt2", "qwen3", "mistral"])
def test_mask_equals_commit_on_sampled_tokens_with_real_vocabularies(vocab_name, request):
    """mask ⇔ commit with real tokenizers: on states of random walks over the shipped grammars and
    the test grammars, a sample of allowed and of refused tokens is committed on a fork."""
    from pathlib import Path

    vocab = request.getfixturevalue(vocab_name)
    root = Path(__file__).resolve().parents[1] / "grammars"
    sources = [(root / g, "auto") for g in REAL_GRAMMARS] + [(c.grammar, "lark") for c in CASES]
    rng = random.Random(vocab_name)
    for source, fmt in sources:
        # the reference engine; static ≡ dynamic is tested on its own (test_static_equivalence.py)
        mask = glrmask.compile(source, vocab, format=fmt, mode="dynamic")
        for state, ids in random_walk(mask, rng, 12):
            allowed_ids = sorted(ids)
            picks = rng.sample(allowed_ids, min(20, len(allowed_ids)))
            picks += [rng.randrange(vocab.n_logits) for _ in range(40)]
            for tok in picks:
                assert (tok in ids) == state.fork().commit(tok), (source, tok, vocab.token_bytes(tok))
