"""The native stack-effect builder gives the Python builder's automata, array for array.

``StackEffects.build(table)`` builds natively (``glrmask_ext.stack_effects_build``);
``native=False`` runs the Python construction, the reference. On every shipped grammar, the grammar
corpus, small conflict-heavy grammars, random grammars and JSONSchemaBench schemas the eight arrays
of every terminal's automaton are equal (values and dtype), and both builders fail the same way
on the same budgets. That the automata are *right* is tests/test_stack_effects.py's judgement
(against the reference GLR recognizer); this file pins the two constructions to each other.
"""
from __future__ import annotations

import random
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _maskbench import MASKBENCH, first_schemas  # noqa: E402

from glrmask.budget import activate_budget  # noqa: E402
from glrmask.compiler import EffectAutomaton, StackEffects  # noqa: E402
from glrmask.errors import GrammarError, GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.grammar.ir import Grammar, Rule, TerminalDef  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lr import LRTable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("edge_ptr", "edge_label", "edge_target", "default_target", "final_ptr", "final_writes", "write_ptr",
          "write_states")
# the Python reference takes more than a few seconds on these (tables of thousands of states)
SLOW_PYTHON = {"sql", "go_subset", "hcl", "pyexpr", "sqlite"}
TABLE_TOO_SLOW = {"java_subset"}  # building the LR(1) table alone takes minutes

SMALL = {
    "ambiguous": 'start: e\ne: e "+" e | "a"',
    "ambiguous_prec": 'start: e\ne: e "+" e | e "*" e | "(" e ")" | "a"',
    "non_lalr": 'start: "a" e "c" | "a" f "d" | "b" e "d" | "b" f "c"\ne: "x"\nf: "x"',
    "reduce_reduce": 'start: a "x" | b "x" "x"\na: "y"\nb: "y"',
    "reduce_reduce_deep": 'start: a "x" | b "x" | c "x"\na: "y" "y"\nb: "y" "y"\nc: d "y"\nd: "y"',
    "nullable_heavy": 'start: x x x x "!"\nx: "a"? | "b"',
    "empty_sentence": 'start: "a"*',
    "long_rule": 'start: s+\ns: "a" "b" "c" "d" "e" "f" | "a" "b" "c" "d" "e" "g"',
    "ignored_ws": 'start: "(" NAME ")"\nNAME: /[a-z]+/\n%ignore " "',
}


def _grammar_files() -> dict[str, Path]:
    out = {p.stem: p for p in sorted((ROOT / "grammars").glob("*.lark"))}
    for p in sorted((ROOT / "tests" / "data" / "grammars").glob("*/grammar.lark")):
        if p.parent.name not in TABLE_TOO_SLOW:
            out[f"corpus/{p.parent.name}"] = p
    return out


FILES = _grammar_files()


def assert_same(native: StackEffects, python: StackEffects) -> None:
    assert native.ignored == python.ignored
    assert len(native.automata) == len(python.automata)
    for t, (a, b) in enumerate(zip(native.automata, python.automata)):
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            assert x.dtype == y.dtype == np.int32, (native.table.terminals[t], f)
            assert np.array_equal(x, y), (native.table.terminals[t], f)


def assert_builders_agree(grammar: Grammar, **kw) -> None:
    table = LRTable.build(grammar)
    native = StackEffects.build(table, ignore=grammar.ignore, native=True, **kw)
    assert_same(native, StackEffects.build(table, ignore=grammar.ignore, native=False, **kw))


@lru_cache(maxsize=None)
def small(name: str) -> Grammar:
    return normalize(load_grammar(SMALL[name], format="lark"))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_conflict_grammars_build_alike(name):
    assert_builders_agree(small(name))


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n.split("/")[-1] in SLOW_PYTHON else n for n in FILES])
def test_shipped_and_corpus_grammars_build_alike(name):
    assert_builders_agree(normalize(load_grammar(FILES[name])))


TERMS = ("A", "B", "C")
NONTERMS = ("s", "x", "y", "z", "w")


def random_grammar(rng: random.Random, n_nonterms: int, max_alternatives: int) -> Grammar:
    rules = []
    for lhs in NONTERMS[:n_nonterms]:
        for _ in range(rng.randint(1, max_alternatives)):
            rhs = tuple(rng.choice(TERMS + NONTERMS[:n_nonterms])
                        for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 3))))
            rules.append(Rule(lhs, rhs))
    return Grammar(rules, {t: TerminalDef(t, t.lower(), t.lower()) for t in TERMS}, "s")


@pytest.mark.parametrize("seed", range(120))
def test_random_grammars_build_alike(seed):
    rng = random.Random(seed)
    try:
        grammar = normalize(random_grammar(rng, rng.choice((3, 4)), 3))
    except GrammarError:
        pytest.skip("the random grammar derives no sentence")
    assert_builders_agree(grammar)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(80))
def test_larger_random_grammars_build_alike(seed):
    # five nonterminals with up to four alternatives: more conflicts, automata of thousands of states
    rng = random.Random(10_000 + seed)
    try:
        grammar = normalize(random_grammar(rng, 5, 4))
    except GrammarError:
        pytest.skip("the random grammar derives no sentence")
    assert_builders_agree(grammar)


# -- JSONSchemaBench ----------------------------------------------------------------------------
def _schemas(per_split: int, skip_splits: frozenset = frozenset()):
    if not MASKBENCH.is_dir():
        pytest.skip(f"no JSONSchemaBench data at {MASKBENCH}")
    for name, schema in first_schemas(per_split):
        if name.split("[")[0] in skip_splits:
            continue
        try:
            grammar, _ = lower_json_schema_ir(schema)
            yield name, normalize(grammar)
        except (UnsupportedSchema, GrammarTooComplex):
            continue


def test_first_schema_of_the_smaller_maskbench_splits_build_alike():
    # the splits whose first schema has an LR table of thousands of states are in the slow test
    built = 0
    for name, grammar in _schemas(1, frozenset({"Github_ultra", "WashingtonPost"})):
        assert_builders_agree(grammar)
        built += 1
    assert built >= 6


@pytest.mark.slow
def test_first_three_schemas_of_every_maskbench_split_build_alike():
    built = 0
    for name, grammar in _schemas(3):
        assert_builders_agree(grammar)
        built += 1
    assert built >= 25


# -- budgets -------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_states", [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233])
def test_both_builders_fail_alike_on_a_small_state_budget(max_states):
    grammar = normalize(load_grammar(FILES["json"]))
    table = LRTable.build(grammar)
    outcomes = []
    for native in (True, False):
        try:
            StackEffects.build(table, ignore=grammar.ignore, max_states=max_states, native=native)
            outcomes.append("built")
        except GrammarTooComplex as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]


def test_a_state_budget_error_names_the_terminal_and_the_limit():
    table = LRTable.build(normalize(load_grammar(FILES["json"])))
    with pytest.raises(GrammarTooComplex) as info:
        StackEffects.build(table, max_states=3)
    msg = str(info.value)
    assert "max_states=3" in msg and any(repr(t) in msg for t in table.terminals)


def test_no_time_left_says_so():
    table = LRTable.build(small("ambiguous"))
    with pytest.raises(GrammarTooComplex) as info:
        StackEffects.build(table, max_seconds=0.0)
    msg = str(info.value)
    assert "no time was left" in msg and "max_seconds" in msg and "0 s" not in msg


def test_a_spent_compile_budget_stops_the_build_with_the_compile_budget_message():
    table = LRTable.build(small("ambiguous"))
    with activate_budget({"max_seconds": 1e-9}):
        with pytest.raises(GrammarTooComplex) as info:
            StackEffects.build(table)
    assert "stack effects" in str(info.value) and "max_seconds" in str(info.value)


# -- the write-sequence numbering ------------------------------------------------------------------
def test_write_sequences_of_one_final_are_numbered_in_ascending_order():
    aut = EffectAutomaton.from_lists([[]], [-1], [{(5, 2), (3, 9, 1), (3, 9)}])
    assert [aut.writes(w) for w in range(aut.n_writes)] == [(3, 9), (3, 9, 1), (5, 2)]
