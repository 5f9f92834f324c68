"""The order in which the native LR builder works never shows in the table.

``LRTable.build(..., lr0_first=...)`` chooses whether the LR(0) automaton is counted before any
canonical LR(1) attempt (``True``), only for grammars where canonical LR(1) is likely not to fit
(``None``, the default), or not at all (``False``: canonical LR(1) closing every state, then
LALR(1) explored from scratch: the reference). Whatever the order, and whichever of canonical
LR(1) and LALR(1) results, the table is the same: states, numbering, sparse rows, notes, method
and errors. A grid of ``max_states`` values makes every path happen: canonical LR(1) fits, the
LR(0) count alone rules it out, it is tried and does not fit (after or without the count), and
the LALR(1) limit is passed.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from _lr_support import SPARSE, bnf, bnf_file, maskbench_sample, needs_maskbench, schema_grammar
from glrmask.errors import GlrmaskError, GrammarTooComplex
from glrmask.grammar.ir import Grammar
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.lr import LRTable

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {p.stem: p for p in sorted((ROOT / "grammars").glob("*.lark"))}
MAX_STATES = (4, 30, 100, 300, 1_000, 20_000)


def assert_same_table(a: LRTable, b: LRTable) -> None:
    for name in SPARSE:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.start_state, a.final_state, a.method, a.notes) == (b.start_state, b.final_state, b.method, b.notes)
    assert a.terminals == b.terminals and a.nonterminals == b.nonterminals and a.rules == b.rules


def assert_order_invisible(grammar: Grammar, **kw) -> None:
    """The three orders build equal tables, or all raise the same glrmask error."""
    try:
        ref = LRTable.build(grammar, lr0_first=False, **kw)
    except GlrmaskError as e:
        for order in (None, True):
            with pytest.raises(type(e)) as got:
                LRTable.build(grammar, lr0_first=order, **kw)
            assert str(got.value) == str(e)
        return
    for order in (None, True):
        assert_same_table(ref, LRTable.build(grammar, lr0_first=order, **kw))


@lru_cache(maxsize=None)
def _shipped(name: str) -> Grammar:
    return normalize(load_grammar(str(SHIPPED[name])))


@pytest.mark.parametrize("max_states", MAX_STATES)
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_grammars_build_the_same_table_in_every_order(name, max_states):
    assert_order_invisible(_shipped(name), max_states=max_states)


@pytest.mark.parametrize("max_states", (4, 100))
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_unmerged_numbering_is_the_same_in_every_order(name, max_states):
    assert_order_invisible(_shipped(name), max_states=max_states, merge=False)


def test_an_lr0_automaton_that_fits_while_canonical_lr1_does_not_still_falls_back_to_the_same_lalr1():
    g = normalize(bnf_file("c_subset.bnf"))
    lr1 = LRTable.build(g, lr0_first=False)
    lalr = LRTable.build(g, lr0_first=False, max_states=lr1.n_states - 1, merge=False)
    # the LR(0) states are the LALR(1) ones: a limit between them and the canonical count
    between = lalr.n_states
    assert between < LRTable.build(g, lr0_first=False, merge=False).n_states
    assert_order_invisible(g, max_states=between)
    assert LRTable.build(g, lr0_first=True, max_states=between).method == "lalr1"


def test_passing_the_lalr1_limit_is_the_same_error_in_every_order():
    g = normalize(bnf_file("c_subset.bnf"))
    for order in (None, True, False):
        with pytest.raises(GrammarTooComplex, match="max_lalr_states=50"):
            LRTable.build(g, max_states=10, max_lalr_states=50, lr0_first=order)


def test_a_lalr1_limit_below_max_states_builds_the_same_table():
    # then counting LR(0) states first cannot rule canonical LR(1) out: the plain sequence runs
    assert_order_invisible(normalize(bnf_file("c_subset.bnf")), max_states=500, max_lalr_states=400)


def test_grammars_with_empty_rules_and_nullable_suffixes_build_the_same_table():
    # ε-rules reach the closure of many states, and nullable suffixes pass lookaheads on: both
    # are what the propagation equations of the LALR(1) fallback have to get right
    # (not in the normal form: check=False, as the builder itself allows)
    g = bnf("s: a b c | b s c | A\na: A | \nb: B a | a\nc: C | a b\n", terminals=("A", "B", "C"))
    for max_states in (2, 5, 1_000):
        for merge in (True, False):
            assert_order_invisible(g, max_states=max_states, merge=merge, check=False)
            assert_same_table(LRTable.build(g, max_states=max_states, merge=merge, check=False, native=False),
                              LRTable.build(g, max_states=max_states, merge=merge, check=False))


# ---------------------------------------------------------------- JSONSchemaBench
@needs_maskbench
@pytest.mark.parametrize("index", range(50))
def test_jsonschemabench_schemas_build_the_same_table_in_every_order(index):
    # the first five schemas of each split, among them the three largest LR builds of the sample
    # (WashingtonPost[0] and Github_ultra[0] past max_states, JsonSchemaStore[3] just under it)
    sample = maskbench_sample(5)
    g = schema_grammar(sample[index][1])
    assert_order_invisible(g)
    assert_order_invisible(g, max_states=500)


# ---------------------------------------------------------------- budgets and misuse
def test_the_closure_item_limit_is_too_complex_in_every_order():
    from glrmask.budget import activate_budget

    g = normalize(bnf("s: r0\n" + "".join(f"r{i}: r{i + 1} | X r{i + 1}\n" for i in range(200)) + "r200: X"))
    for order in (None, True, False):
        with activate_budget({"lr": {"max_closure_items": 2_000}}):
            with pytest.raises(GrammarTooComplex, match=r"LR table \(closures\).*lr\.max_closure_items"):
                LRTable.build(g, lr0_first=order)


def test_a_passed_deadline_stops_the_lr0_count_and_the_lookahead_propagation():
    from glrmask.budget import activate_budget

    g = normalize(bnf_file("c_subset.bnf"))
    for kw in ({"lr0_first": True}, {"lr0_first": True, "max_states": 10}, {"max_states": 10}):
        with activate_budget({"max_seconds": 1e-9}):
            with pytest.raises(GrammarTooComplex, match=r"LR table.*max_seconds"):
                LRTable.build(g, **kw)


def test_lookaheads_before_an_lr0_automaton_are_refused():
    from glrmask_ext.lr_build import Automaton

    # $START -> S $END, S -> a: terminal a = 0, $END = 1; nonterminal $START = 0, S = 1 (code 2 + 1)
    auto = Automaton(np.array([0, 1], np.int32), np.array([0, 2, 3], np.int32),
                     np.array([2 + 1, 1, 0], np.int32), 2, 2, 1_000, lambda stage: None)
    with pytest.raises(RuntimeError, match="explore_lr0"):
        auto.lalr_from_lr0()
    assert auto.explore_lr0(100) == 4
    auto.lalr_from_lr0()
    with pytest.raises(RuntimeError, match="explore_lr0"):
        auto.lalr_from_lr0()  # the automaton is the LALR(1) one now
    start, final, *arrays = auto.tables(True)
    assert final >= 0
