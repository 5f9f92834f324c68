"""The native LR build numbers symbols and rules exactly as the Python reference builder does
(:func:`glrmask_ext.lr_build.encode_rules` against ``_Symbols``' comprehensions), on the corner cases
the whole-table comparisons of ``test_lr_native_build.py`` do not reach: a name that is both a
terminal and a left-hand side, symbols met before their rules, and the errors for an unknown symbol
and a start symbol without rules, in the same order."""
from __future__ import annotations

import numpy as np
import pytest

from glrmask.errors import GrammarError
from glrmask.grammar.ir import Grammar, Rule, TerminalDef
from glrmask.lr import LRTable


def _terms(*names: str) -> dict[str, TerminalDef]:
    return {n: TerminalDef(n, n.lower()) for n in names}


def _both(grammar: Grammar) -> tuple[LRTable, LRTable]:
    return LRTable.build(grammar, check=False, native=False), LRTable.build(grammar, check=False, native=True)


def _assert_same_numbering(ref: LRTable, new: LRTable) -> None:
    assert (ref.terminals, ref.terminal_index) == (new.terminals, new.terminal_index)
    assert (ref.nonterminals, ref.nonterminal_index) == (new.nonterminals, new.nonterminal_index)
    assert (ref.rules, ref.rule_lhs, ref.rule_len) == (new.rules, new.rule_lhs, new.rule_len)
    assert all(type(x) is list for x in (new.terminals, new.nonterminals, new.rule_lhs, new.rule_len))
    a, b = ref.to_arrays(), new.to_arrays()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_nonterminals_are_numbered_by_their_first_rule_even_when_used_earlier():
    g = Grammar([Rule("s", ("a", "b")), Rule("b", ("B",)), Rule("a", ("A", "b")), Rule("a", ())],
                _terms("A", "B"), "s")
    ref, new = _both(g)
    _assert_same_numbering(ref, new)
    assert new.nonterminals == ["$START", "s", "b", "a"]


def test_a_name_that_is_a_terminal_and_a_left_hand_side_reads_as_the_terminal_on_right_hand_sides():
    g = Grammar([Rule("s", ("A", "A")), Rule("A", ("B",))], _terms("A", "B"), "s")
    _assert_same_numbering(*_both(g))


def test_an_unknown_symbol_is_the_same_error_for_both_builders():
    g = Grammar([Rule("s", ("A", "first")), Rule("s", ("second",))], _terms("A"), "s")
    messages = []
    for native in (False, True):
        with pytest.raises(GrammarError) as e:
            LRTable.build(g, check=False, native=native)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "'first'" in messages[0]


def test_a_start_symbol_without_rules_is_reported_before_unknown_symbols():
    g = Grammar([Rule("s", ("nowhere",))], _terms("A"), "A")
    for native in (False, True):
        with pytest.raises(GrammarError, match="start symbol 'A' has no rules"):
            LRTable.build(g, check=False, native=native)
