"""The native dense-lexer export (glrmask_ext.lexer_dfa) gives exactly what the Python reference
export gives: the same arrays, id for id (the lazy-id maps included), the same errors, and the
lexer it explored left with the same interned states — on the shipped grammars, the test grammars,
random lexers and real JSON Schemas."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from _grammars import CASES
from _maskbench import MASKBENCH, first_schemas
from glrmask.errors import GrammarTooComplex, RegexError
from glrmask.grammar.lark_frontend import grammar_from_lark
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema
from glrmask.lexer import Lexer, LexerDFA
from lexer_patterns import full, nested

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_FILES = sorted((ROOT / "grammars").glob("*.lark")) + sorted((ROOT / "tests" / "data" / "grammars").glob("*/grammar.lark"))

SMALL_SCHEMAS = {"Github_trivial[0]", "Github_hard[2]", "Glaiveai2K[0]", "JsonSchemaStore[1]", "Kubernetes[1]",
                 "WashingtonPost[1]"}
"""Real schemas cheap enough for every run; the slow test covers the first three of every split."""


def terminals_of_grammar(source: str) -> list[tuple[str, str]]:
    g = normalize(load_grammar(source))
    return [(t.name, t.pattern) for t in g.terminals.values()]


def terminals_of_schema(schema) -> list[tuple[str, str]]:
    text, _ = lower_json_schema(schema)
    g = normalize(grammar_from_lark(text, source_name="<json-schema>"))
    return [(t.name, t.pattern) for t in g.terminals.values()]


def export_both(make: Callable[[], Lexer], **kw) -> tuple[tuple[Lexer, LexerDFA], tuple[Lexer, LexerDFA]]:
    """The same lexer built twice, one exported natively and one by the Python reference."""
    out = []
    for native in (True, False):
        lexer = make()
        out.append((lexer, LexerDFA.explore(lexer, native=native, **kw)))
    return out[0], out[1]


def assert_same_export(make: Callable[[], Lexer], **kw) -> LexerDFA:
    (lx_n, dfa_n), (lx_p, dfa_p) = export_both(make, **kw)
    got, want = dfa_n.arrays(), dfa_p.arrays()
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert np.array_equal(got[name], want[name]), name
    assert dfa_n.initial == dfa_p.initial
    # the lazy lexers interned the same states and conditions (the lazy-id maps above name them)
    assert (lx_n.n_states, lx_n.n_lane_states, lx_n.n_conds) == (lx_p.n_states, lx_p.n_lane_states, lx_p.n_conds)
    for q in range(lx_p.n_states):
        assert lx_n.alive_terminals(q) == lx_p.alive_terminals(q)
    return dfa_n


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_grammars_export_identically(path):
    terms = terminals_of_grammar(str(path))
    assert_same_export(lambda: Lexer(terms))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_test_grammars_export_identically(case):
    terms = terminals_of_grammar(case.grammar)
    assert_same_export(lambda: Lexer(terms))


def test_restricted_start_states_export_identically():
    terms = terminals_of_grammar(str(ROOT / "grammars" / "json.lark"))

    def starts(lexer: Lexer) -> list[int]:
        return [lexer.restrict(lexer.initial, [t]) for t in range(0, len(terms), 2)]

    (lx_n, dfa_n), (lx_p, dfa_p) = (
        (lx, LexerDFA.explore(lx, starts(lx), native=native)) for native, lx in
        ((True, Lexer(terms)), (False, Lexer(terms)))
    )
    for name, want in dfa_p.arrays().items():
        assert np.array_equal(dfa_n.arrays()[name], want), name
    assert [dfa_n.state_id(q) for q in starts(lx_n)] == [dfa_p.state_id(q) for q in starts(lx_p)]


def test_a_lexer_explored_before_exports_identically():
    """States the lazy lexer interned before the export (a scan) keep their ids either way."""
    terms = terminals_of_grammar(str(ROOT / "grammars" / "sql.lark"))

    def scanned() -> Lexer:
        lexer = Lexer(terms)
        lexer.scan(lexer.initial, b"SELECT a FROM t WHERE b >= 'x' -- c\n")
        return lexer

    assert_same_export(scanned)


def test_a_lexer_without_terminals_exports_identically():
    dfa = assert_same_export(lambda: Lexer([]))
    assert dfa.step(dfa.initial, ord("a")) == (LexerDFA.DEAD, ())


def test_too_many_states_is_the_same_error():
    terms = terminals_of_grammar(str(ROOT / "grammars" / "json.lark"))
    messages = []
    for native in (True, False):
        with pytest.raises(GrammarTooComplex) as e:
            LexerDFA.explore(Lexer(terms), max_states=5, native=native)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def _lexer_or_skip(patterns: list[str]) -> list[tuple[str, str]]:
    terms = [(f"T{i}", p if i % 2 else f"(?:{p})a") for i, p in enumerate(patterns)]
    try:
        Lexer(terms)
    except RegexError:
        assume(False)
    return terms


@settings(max_examples=60)
@given(st.lists(full | nested, min_size=1, max_size=4))
def test_random_lexers_export_identically(patterns):
    terms = _lexer_or_skip(patterns)
    try:
        assert_same_export(lambda: Lexer(terms), max_states=3000)
    except GrammarTooComplex:
        assume(False)


def _schemas(per_split: int, names: set[str] | None = None):
    if not MASKBENCH.is_dir():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"no JSONSchemaBench data at {MASKBENCH}"))]
    return [pytest.param(name, schema, id=name) for name, schema in first_schemas(per_split)
            if names is None or name in names]


def _assert_schema_exports_identically(schema) -> None:
    try:
        terms = terminals_of_schema(schema)
        Lexer(terms)
    except GrammarTooComplex:  # the lexer itself is refused (a huge counted repeat): no export
        return
    try:
        assert_same_export(lambda: Lexer(terms))
    except GrammarTooComplex:  # refused by the export's limits: the same refusal either way
        messages = []
        for native in (True, False):
            with pytest.raises(GrammarTooComplex) as e:
                LexerDFA.explore(Lexer(terms), native=native)
            messages.append(str(e.value))
        assert messages[0] == messages[1]


@pytest.mark.parametrize("name,schema", _schemas(3, SMALL_SCHEMAS))
def test_small_json_schemas_export_identically(name, schema):
    _assert_schema_exports_identically(schema)


@pytest.mark.slow
@pytest.mark.parametrize("name,schema", _schemas(3))
def test_json_schemas_export_identically(name, schema):
    _assert_schema_exports_identically(schema)
