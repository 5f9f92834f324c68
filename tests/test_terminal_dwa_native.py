"""The Terminal DWA's native branch model (``TerminalDWA.build(..., native=True)``, the default over
a dense lexer) against the Python description of the same semantics (``native=False``: the
builder steps branches, finds looping bytes and class representatives in ``terminal_dwa``).

Specification: both build the *same arrays* — the same boundary states, nodes in the same
order, the same weights, condition seeds and roots — over byte-level vocabularies (lexer-state
classes on), small vocabularies (classes off) and real tokenizers, for every shipped grammar and
for real JSON schemas. The automaton's meaning is pinned separately (tests/test_terminal_dwa.py
against a brute-force scan); identity here carries it over to the native path.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import glrmask
from glrmask.compiler.terminal_dwa import CLOSED, TerminalDWA, terminal_labels

from _maskbench import MASKBENCH, first_schemas
from conftest import byte_vocab, shipped_tokenizer, tiny_vocab

GRAMMARS = sorted((Path(__file__).resolve().parents[1] / "grammars").glob("*.lark"))


def _both(mask) -> tuple[TerminalDWA, TerminalDWA]:
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    kw = dict(ignored=ignored, label_of=label_of)
    return (TerminalDWA.build(mask.lexer, mask.trie, native=True, **kw),
            TerminalDWA.build(mask.lexer, mask.trie, native=False, **kw))


def _assert_same(native: TerminalDWA, python: TerminalDWA) -> None:
    a, b = native.arrays(), python.arrays()
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def qwen3() -> glrmask.Vocab:
    return glrmask.Vocab.from_tokenizer_json(shipped_tokenizer("qwen3"))


@pytest.mark.parametrize("path", GRAMMARS, ids=lambda p: p.stem)
def test_native_equals_python_over_bytes(path):
    _assert_same(*_both(glrmask.compile(str(path), byte_vocab(), mode="static")))


@pytest.mark.parametrize("path", [p for p in GRAMMARS if p.stem in ("json", "csv", "arithmetic")],
                         ids=lambda p: p.stem)
def test_native_equals_python_over_a_real_tokenizer(path, qwen3):
    _assert_same(*_both(glrmask.compile(str(path), qwen3, mode="static")))


@pytest.mark.parametrize("grammar, pieces", [
    ('start: X+\nX: "x"\nCOMMENT: /#[a-z]*;/\n%ignore COMMENT', ("#", "ab", ";", "x", "#a", "a;", "x#", "#;x")),
    ('start: stmt+\nstmt: "if" NAME | NAME "=" NAME\nNAME: /[a-z]+/\n%ignore " "',
     ("if", "i", "f", " ", "=", "x", "if ", "x=", "fi")),
    ('start: A B?\nA: /a+(?!b)/\nB: "ab"', ("a", "b", "aa", "ab", "ba")),
    ('start: Y "b" | "y" "c"\nY: /y(?=b)(?=c)/', ("y", "b", "c", "yb", "yc")),
], ids=["ignored_comment", "keywords", "lookahead", "contradictory_lookahead"])
def test_native_equals_python_with_conditions_and_ignored_terminals(grammar, pieces):
    _assert_same(*_both(glrmask.compile(grammar, tiny_vocab(list(pieces)), format="lark", mode="static")))


def _small_schemas(per_split: int = 3, max_chars: int = 1500) -> list:
    """The first few schemas of each split whose JSON text is short (small grammars keep the
    Python path's build quick)."""
    return [pytest.param(n, s, id=n, marks=[pytest.mark.slow] if n in _SLOW else [])
            for n, s in first_schemas(per_split) if len(json.dumps(s)) <= max_chars]


_SLOW = {"Github_easy[1]", "Github_easy[2]", "Github_medium[0]"}  # bounded strings: ~10-20 s in Python


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="JSONSchemaBench data not present")
@pytest.mark.parametrize("name, schema", _small_schemas() if MASKBENCH.is_dir() else [])
def test_native_equals_python_on_json_schemas(name, schema, qwen3):
    _assert_same(*_both(glrmask.compile_json_schema(schema, qwen3, mode="static")))


def test_a_long_token_whose_branches_split_at_every_byte_is_walked_in_linear_steps():
    # 60 spaces of an ignored WS: after each space the lane goes on inside WS and WS also closes,
    # and the two branches meet again at the next byte. The token's 59 inner trie nodes have one
    # child and no token; walked once per path instead of once per (node, branch), they would
    # take 2^59 steps.
    grammar = 'start: X+\nX: "x"\nWS: / +/\n%ignore WS'
    mask = glrmask.compile(grammar, tiny_vocab(["x", " " * 60, "x" + " " * 60]), format="lark")
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    dwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of, max_walk_steps=5_000)
    assert dwa.stats["walk_steps"] < 5_000
    spaces = mask.trie.orig_to_internal[1]
    assert dwa.token_outcomes(mask.lexer.initial, int(spaces)) == frozenset({((), CLOSED)})
