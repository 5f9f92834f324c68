"""Normalization (DESIGN §4.2): language-preserving, and the result satisfies the post-condition
that bounds the reductions one terminal can trigger."""
from __future__ import annotations

import zlib

import pytest

from _lr_support import (
    CORPUS,
    bnf,
    bnf_file,
    corpus_grammar,
    lark_judge,
    sentences_and_near_misses,
)
from glrmask.errors import GlrmaskError, GrammarError, GrammarTooComplex
from glrmask.grammar.ir import Grammar, Rule, TerminalDef
from glrmask.grammar.normalize import NormalFormViolation, check_normalized, normalize


def _right_end_edges(g: Grammar) -> set[tuple[str, str]]:
    return {(r.rhs[-1], r.lhs) for r in g.rules if r.rhs and not g.is_terminal(r.rhs[-1])}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_normalized_grammar_accepts_exactly_the_original_language(name):
    original = corpus_grammar(name)
    normalized = normalize(original)
    judge_orig, judge_norm = lark_judge(original), lark_judge(normalized)
    cases = sentences_and_near_misses(original, seed=zlib.crc32(name.encode()), n=30)
    for seq in cases:
        assert judge_orig(seq) == judge_norm(seq), (name, seq)
    assert any(judge_orig(s) for s in cases)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_normalized_grammar_satisfies_the_post_condition(name):
    g = normalize(corpus_grammar(name))
    check_normalized(g)
    eps = [r for r in g.rules if not r.rhs]
    assert all(r.lhs == g.start for r in eps)
    assert all(g.start not in r.rhs for r in g.rules) or not eps


def test_c_subset_grammar_normalizes_equivalently_without_blow_up():
    original = bnf_file("c_subset.bnf")
    normalized = normalize(original)
    check_normalized(normalized)
    assert len(normalized.rules) < 2 * len(original.rules)
    judge_orig, judge_norm = lark_judge(original), lark_judge(normalized)
    cases = sentences_and_near_misses(original, seed=7, n=15, max_depth=7, max_len=30)
    assert any(judge_orig(s) for s in cases)
    for seq in cases:
        assert judge_orig(seq) == judge_norm(seq), seq


def test_empty_language_is_a_grammar_error():
    with pytest.raises(GrammarError, match="empty"):
        normalize(bnf("s: A s"))


def test_language_containing_empty_string_gets_a_fresh_nullable_start():
    g = normalize(bnf("s: A s |"))
    assert g.start != "s"
    assert sorted(r.rhs for r in g.rules if r.lhs == g.start) == [(), ("s",)]
    assert all(r.rhs for r in g.rules if r.lhs != g.start)


def test_language_of_only_the_empty_string_is_a_single_epsilon_rule():
    g = normalize(bnf("s: b b\nb:"))
    assert g.rules == [Rule(g.start, ())]


def test_start_without_empty_string_keeps_its_name():
    assert normalize(bnf("s: A s | B")).start == "s"


def test_long_nullable_run_grows_linearly_not_exponentially():
    n = 24
    g = bnf("s: " + " ".join(["b"] * n) + " X\nb: B |")
    out = normalize(g)
    assert len(out.rules) < 10 * n
    judge = lark_judge(out)
    assert judge(["X"]) and judge(["B"] * n + ["X"]) and not judge(["B"] * (n + 1) + ["X"])


def test_distinct_nullables_in_a_long_rule_stay_linear():
    names = [f"n{i}" for i in range(16)]
    text = "s: " + " ".join(names) + "\n" + "\n".join(f"{x}: {x.upper()} |" for x in names)
    out = normalize(bnf(text))
    assert len(out.rules) < 10 * len(names)
    judge = lark_judge(out)
    assert judge([]) and judge(["N3", "N9"]) and not judge(["N9", "N3"])


def test_unit_cycle_collapses_and_self_unit_rule_disappears():
    g = normalize(bnf("s: a | X\na: b | Y\nb: s | Z | b"))
    assert all(r.rhs != (r.lhs,) for r in g.rules)
    assert {r.lhs for r in g.rules} == {"s"}


def test_direct_right_recursion_becomes_left_recursion():
    g = normalize(bnf("s: A s | B"))
    assert not any(r.rhs[-1] == r.lhs for r in g.rules)
    assert any(r.rhs and r.rhs[0] == r.lhs for r in g.rules)


def test_indirect_right_recursion_is_broken():
    g = normalize(corpus_grammar("indirect_right_recursion"))
    edges = _right_end_edges(g)
    assert ("a", "b") not in edges or ("b", "a") not in edges
    check_normalized(g)


def test_left_recursion_is_left_alone():
    original = bnf("e: e PLUS t | t\nt: N | LP e RP")
    assert normalize(original).rules == original.rules


def test_terminals_ignore_and_metadata_pass_through_unchanged():
    g = bnf("s: A s | B", terminals=("UNUSED",))
    g.terminals["WS"] = TerminalDef("WS", r"\s+")
    g.ignore = ("WS",)
    g.source_name = "x.lark"
    g.warnings.append("w")
    out = normalize(g)
    assert out.terminals == g.terminals and out.ignore == ("WS",)
    assert out.source_name == "x.lark" and out.warnings == ["w"]


def test_unreachable_and_unproductive_symbols_are_dropped():
    g = normalize(corpus_grammar("unreachable_and_unproductive"))
    assert not {"dead", "u"} & {r.lhs for r in g.rules}


def test_duplicate_rules_are_removed():
    g = normalize(bnf("s: A | A | B"))
    assert len(g.rules) == len(set(g.rules)) == 2


def test_rule_budget_is_enforced_naming_the_step():
    text = "s: " + " ".join(["b"] * 12) + "\nb: B |"
    with pytest.raises(GrammarTooComplex, match="ε-elimination.*max_rules=5"):
        normalize(bnf(text), max_rules=5)


def test_normalize_is_idempotent():
    g = normalize(corpus_grammar("nullable_mixed"))
    assert normalize(g).rules == g.rules


@pytest.mark.parametrize(
    "text, why",
    [
        ("s: A b\nb: B |", "ε-rule"),
        ("s: A s | B", "cycle"),
        ("s: a | B\na: s | C", "cycle"),
        ("s: A c", "neither"),
    ],
)
def test_check_normalized_rejects_violations(text, why):
    with pytest.raises(NormalFormViolation, match=why):
        check_normalized(bnf(text))


def test_check_normalized_rejects_epsilon_start_used_on_a_right_hand_side():
    with pytest.raises(NormalFormViolation):
        check_normalized(bnf("s: A s |"))


def test_normal_form_violation_is_a_glrmask_error():
    assert issubclass(NormalFormViolation, GlrmaskError)


def test_right_recursion_budget_names_its_step():
    # five right-recursive alternatives through a hub: breaking them needs more than 8 rules
    text = "s: A s | B s | C s | D s | E s | F"
    with pytest.raises(GrammarTooComplex, match="right-recursion elimination"):
        normalize(bnf(text), max_rules=8)


def test_a_nonterminal_whose_only_rule_is_one_terminal_is_replaced_by_it():
    g = normalize(bnf("s: LB w items w RB | LB RB\nitems: N | items w N\nw: WS"))
    assert "w" not in {r.lhs for r in g.rules}
    assert Rule("s", ("LB", "WS", "items", "WS", "RB")) in g.rules


def test_aliases_of_aliases_resolve_to_the_terminal():
    g = normalize(bnf("s: a B | B a\na: b\nb: C"))
    assert {r.lhs for r in g.rules} == {"s"}
    assert set(g.rules) == {Rule("s", ("C", "B")), Rule("s", ("B", "C"))}


def test_the_start_symbol_is_never_inlined():
    g = normalize(bnf("s: A"))
    assert g.rules == [Rule("s", ("A",))]


def test_after_inlined_whitespace_the_lr_state_knows_its_context():
    """The reason for inlining: under LALR(1) the one state ``w -> WS .`` of a ``w`` used before
    every token reduces on the lookaheads of every context, so a stack topped by it says little
    about which terminal comes next. With ``WS`` in place, the state after it acts only on what
    can follow it where it was shifted."""
    from glrmask.lr import LRTable

    g = bnf("s: LB w k w C w v w RB | LB k C v RB | LB w k C v RB\nk: K1 | K2\nv: N | S\nw: WS")
    t = LRTable.build(normalize(g), max_states=2)
    ws = t.terminal_index["WS"]
    after_ws = {a.shift for s in range(t.n_states) if (a := t.action(s, ws)).shift is not None}
    acting = [sum(1 for x in range(t.n_terminals) if (b := t.action(u, x)).shift is not None or b.reduces)
              for u in after_ws]
    assert t.method == "lalr1" and max(acting) == 2  # K1 K2 | C | N S | RB
