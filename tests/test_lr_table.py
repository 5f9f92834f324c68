"""The LR(1) table (DESIGN §4.4): canonical LR(1) with all conflicting actions kept, identical rows
merged, LALR(1) as the fallback, and a dense layout that agrees with the object view."""
from __future__ import annotations

import numpy as np
import pytest

from _lr_support import bnf, bnf_file, corpus_grammar
from glrmask.errors import GrammarError
from glrmask.grammar.ir import TerminalDef
from glrmask.grammar.normalize import NormalFormViolation, normalize
from glrmask.lr import AUG_START, END, Action, LRTable


def table(name: str, **kw) -> LRTable:
    return LRTable.build(normalize(corpus_grammar(name)), **kw)


def _cells(t: LRTable, term: str):
    tid = t.terminal_index[term]
    return [t.action(s, tid) for s in range(t.n_states)]


def test_terminal_ids_list_grammar_terminals_then_end():
    g = bnf("s: A s | B", terminals=("C",))
    t = LRTable.build(normalize(g))
    assert t.terminals == ["A", "B", "C", END]
    assert t.terminal_index == {"A": 0, "B": 1, "C": 2, END: 3}
    assert t.end_id == 3


def test_rule_zero_is_the_augmented_start_rule():
    t = table("expressions")
    assert t.rules[0].lhs == AUG_START and t.rules[0].rhs == ("expr", END)
    assert t.nonterminals[t.rule_lhs[0]] == AUG_START
    assert all(t.rule_len[i] == len(r.rhs) for i, r in enumerate(t.rules))


def test_lr1_grammar_that_is_not_lalr_has_no_conflicts_in_canonical_mode():
    t = table("not_lalr")
    assert t.method == "lr1" and t.conflicts() == []


def test_lalr_fallback_is_logged_and_keeps_the_merge_conflicts():
    t = table("not_lalr", max_states=3)
    assert t.method == "lalr1"
    assert any("LALR" in n for n in t.notes)
    rr = [a for _, _, a in t.conflicts() if len(a.reduces) == 2]
    assert rr, "merging the e/f reduce states must create a kept reduce/reduce conflict"


def test_shift_reduce_conflict_keeps_both_actions():
    # LR(2): after A Z with lookahead B, either reduce a -> A Z or shift B
    t = LRTable.build(normalize(bnf("s: a B C | A Z B D\na: A Z")))
    cells = [a for a in _cells(t, "B") if a.is_conflict]
    assert len(cells) == 1
    assert cells[0].shift is not None and [str(t.rules[r]) for r in cells[0].reduces] == ["a -> A Z"]


def test_dangling_else_keeps_its_ambiguity_as_conflicts_after_normalization():
    assert table("dangling_else").conflicts()


def test_reduce_reduce_conflict_keeps_every_rule():
    t = table("reduce_reduce")
    rules = {str(t.rules[r]) for a in _cells(t, "X") if len(a.reduces) > 1 for r in a.reduces}
    assert rules == {"a -> A Z", "b -> A Z"}


def test_ambiguous_grammar_keeps_conflicts():
    assert table("ambiguous_sum").conflicts()


def test_accept_is_the_end_shift_into_the_final_state():
    t = table("json_like")
    acc = [(s, a) for s, a in enumerate(_cells(t, END)) if a.accept]
    assert acc and all(a.shift == t.final_state for _, a in acc)
    assert all(not a for a in t.rows[t.final_state])
    assert not any(a.accept for s in range(t.n_states) for a in t.rows[s][: t.end_id])


def test_dense_arrays_agree_with_actions_and_gotos():
    t = table("nullable_mixed")
    T = t.n_terminals
    assert t.shift_table.shape == (t.n_states, T)
    assert t.goto_table.shape == (t.n_states, len(t.nonterminals))
    for s in range(t.n_states):
        for tid in range(T):
            a = t.action(s, tid)
            assert t.shift_table[s, tid] == (-1 if a.shift is None else a.shift)
            k = s * T + tid
            lo, hi = t.reduce_offsets[k], t.reduce_offsets[k + 1]
            assert tuple(t.reduce_rules[lo:hi].tolist()) == a.reduces
        for nt, name in enumerate(t.nonterminals):
            g = t.goto(s, name)
            assert g == t.goto(s, nt) == (None if t.goto_table[s, nt] < 0 else t.goto_table[s, nt])


def test_states_with_identical_rows_are_merged():
    t = table("nullable_mixed")
    rows = set()
    for s in range(t.n_states):
        key = (tuple(t.rows[s]), tuple(t.goto_table[s].tolist()))
        assert key not in rows
        rows.add(key)


def test_merging_never_grows_the_table():
    raw = table("nullable_mixed", merge=False)
    assert table("nullable_mixed").n_states <= raw.n_states


def test_start_state_is_zero():
    assert table("palindromes").start_state == 0


def test_empty_action_is_falsy_and_not_a_conflict():
    assert not Action() and not Action().is_conflict
    assert Action(shift=3) and Action(reduces=(1, 2)).is_conflict


def test_build_rejects_grammars_not_in_normal_form():
    with pytest.raises(NormalFormViolation):
        LRTable.build(bnf("s: A s | B"))


def test_reserved_end_terminal_name_is_rejected():
    g = normalize(bnf("s: A"))
    g.terminals[END] = TerminalDef(END, "x")
    with pytest.raises(GrammarError, match="reserved"):
        LRTable.build(g)


def test_nullable_start_reduces_epsilon_only_on_end_at_the_bottom():
    t = LRTable.build(normalize(bnf("s: A s |")))
    eps = [i for i, r in enumerate(t.rules) if not r.rhs]
    cells = [(s, tid) for s in range(t.n_states) for tid in range(t.n_terminals)
             if set(t.action(s, tid).reduces) & set(eps)]
    assert cells == [(t.start_state, t.end_id)]


def test_c_sized_grammar_builds():
    g = normalize(bnf_file("c_subset.bnf"))
    assert len(g.rules) > 150 and len(g.terminals) > 80
    t = LRTable.build(g)
    assert t.method == "lr1"
    assert 500 < t.n_states < 20_000
    assert t.conflicts()  # dangling else at least


def test_c_sized_grammar_builds_as_lalr_too():
    t = LRTable.build(normalize(bnf_file("c_subset.bnf")), max_states=100)
    assert t.method == "lalr1" and t.n_states < 1000


def test_ignored_terminals_are_listed_and_have_no_actions():
    g = bnf("s: A s | B", terminals=("WS",))
    g.ignore = ("WS",)
    t = LRTable.build(normalize(g))
    ws = t.terminal_index["WS"]
    assert t.ignored_terminals == frozenset({ws})
    assert not any(t.action(s, ws) for s in range(t.n_states))


def test_a_table_pickles_without_its_caches_and_reads_back_the_same():
    import pickle

    from glrmask.grammar.lark_frontend import grammar_from_lark

    t = LRTable.build(normalize(grammar_from_lark('start: "a" start | "b"')))
    _ = t.shift_table  # a dense view computed before pickling is not carried
    copy = pickle.loads(pickle.dumps(t))
    assert copy.dense_views_nbytes == 0
    for name in ("act_ptr", "act_term", "act_shift", "goto_tgt", "reduce_rules"):
        assert np.array_equal(getattr(copy, name), getattr(t, name))
    assert np.array_equal(copy.shift_table, t.shift_table)
