"""Lark front-end: lark compiles the grammar, we read rules/terminals/ignore back exactly."""
from __future__ import annotations

import re

import pytest

from glrmask.errors import GrammarError
from glrmask.grammar.lark_frontend import grammar_from_lark

from _grammar_judge import accepts, judge, judge_ir, random_strings

RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*\Z")
TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*\Z")


def test_literal_terminal_keeps_string_and_escaped_pattern():
    g = grammar_from_lark('start: "a+b"\n')
    (t,) = g.terminals.values()
    assert t.literal == "a+b"
    assert t.pattern == re.escape("a+b")


def test_case_insensitive_literal_has_inline_flag():
    g = grammar_from_lark('start: "if"i\n')
    (t,) = g.terminals.values()
    assert t.literal == "if"
    assert t.pattern == "(?i:if)"


def test_regex_terminal_flags_are_inlined():
    g = grammar_from_lark("start: A\nA: /a.b/s\n")
    assert g.terminals["A"].pattern == "(?s:a.b)"
    assert g.terminals["A"].literal is None


def test_rules_are_plain_bnf_for_ebnf_operators():
    g = grammar_from_lark('start: "a"* "b"+ "c"? ["d"] ("e" | "f")~2\n')
    for r in g.rules:
        for sym in r.rhs:
            assert sym in g.terminals or sym in g.nonterminals


def test_ignore_list_is_read():
    g = grammar_from_lark('start: "a" "b"\n%import common.WS\n%ignore WS\n')
    assert g.ignore == ("WS",)
    assert "WS" in g.terminals


def test_anonymous_ignore_terminal_gets_a_valid_name():
    g = grammar_from_lark('start: "a"\n%ignore " "\n')
    (name,) = g.ignore
    assert TERMINAL_NAME.match(name)


def test_generated_and_template_names_are_valid_lark_names():
    g = grammar_from_lark(
        '_sep{x, s}: x (s x)*\nstart: _sep{item, ","} "é"\nitem: "a"+\n'
    )
    assert all(RULE_NAME.match(n) for n in g.nonterminals)
    assert all(TERMINAL_NAME.match(n) for n in g.terminals)
    assert len(set(g.nonterminals) | set(g.terminals)) == len(g.nonterminals) + len(g.terminals)


def test_start_rule_is_first_and_default_is_start():
    g = grammar_from_lark('x: "x"\nstart: x\n')
    assert g.start == "start"
    assert g.rules[0].lhs == "start"


def test_start_picks_one_of_several_rules():
    g = grammar_from_lark('a: "x" b\nb: "y"\n', start="a")
    assert g.start == "a"
    assert {r.lhs for r in g.rules} == {"a", "b"}


def test_unused_rules_are_dropped():
    g = grammar_from_lark('start: "x"\nunused: "y"\n')
    assert g.nonterminals == ["start"]


def test_priorities_are_accepted_and_ignored():
    g = grammar_from_lark('start: A | B\nA.2: "a"\nB.-1: /b/\nr.3: "c"\n')
    assert set(g.terminals) == {"A", "B"}


def test_optional_brackets_keep_the_language_with_or_without_placeholders():
    g = grammar_from_lark('start: "a" ["b"] "c"\n')
    p = judge_ir(g)
    assert [accepts(p, s) for s in ["ac", "abc", "abbc", "a"]] == [True, True, False, False]


def test_common_import_works_through_lark():
    g = grammar_from_lark("start: NUMBER\n%import common.NUMBER\n")
    assert "NUMBER" in g.terminals


def test_import_paths_resolve_user_grammars(tmp_path):
    (tmp_path / "lib.lark").write_text('WORD: /[a-z]+/\n')
    g = grammar_from_lark("start: WORD\n%import lib.WORD\n", import_paths=[tmp_path])
    assert g.terminals["WORD"].pattern == "[a-z]+"


def test_source_name_is_recorded():
    assert grammar_from_lark('start: "a"\n', source_name="x.lark").source_name == "x.lark"


SMALL_GRAMMARS = [
    ('start: "a"* "b"+ "c"? ["d"] ("e" | "f")~2\n', "abcdef"),
    ('start: x+\nx: "a" | "b" "a"\n%ignore " "\n', "ab "),
    ('?start: sum\n?sum: NUM | sum "+" NUM\nNUM: /[0-9]+/\n', "12+"),
    ('start: A B\nA: /a+/\nB: /a?b/\n', "ab"),
    ('start: W (" " W)*\nW: "x"i | /y+/\n', "xXy "),
    ('_l{x}: "[" [x ("," x)*] "]"\nstart: _l{_l{"a"}}\n', "[a],"),
]


@pytest.mark.parametrize("text,alphabet", SMALL_GRAMMARS)
def test_to_lark_accepts_the_same_strings_as_the_original(text, alphabet):
    original = judge(text)
    converted = judge_ir(grammar_from_lark(text))
    for s in random_strings(alphabet, 300, 7, seed=len(text)):
        assert accepts(converted, s) == accepts(original, s), repr(s)


def test_unknown_start_lists_the_available_rules():
    with pytest.raises(GrammarError, match=r"unknown start rule 'nope'; available rules: a, b"):
        grammar_from_lark('a: "x"\nb: "y"\n', start="nope")


def test_declared_terminals_are_rejected_by_name():
    with pytest.raises(GrammarError, match="_INDENT"):
        grammar_from_lark('start: "a" _INDENT\n%declare _INDENT\n')
