"""Regex front-end: the language is exactly what ``re.fullmatch`` accepts."""
from __future__ import annotations

import re

import pytest

from glrmask.errors import GrammarError, RegexError
from glrmask.grammar.regex_frontend import REGEX_TERMINAL, grammar_from_regex

from _grammar_judge import accepts, judge_ir, random_strings


def test_whole_output_is_one_terminal():
    g = grammar_from_regex("[a-z]+")
    assert [r.rhs for r in g.rules] == [(REGEX_TERMINAL,)]
    assert list(g.terminals) == [REGEX_TERMINAL]


def test_nullable_regex_gets_an_epsilon_alternative():
    g = grammar_from_regex("a*")
    assert sorted(r.rhs for r in g.rules) == [(), (REGEX_TERMINAL,)]
    assert re.match(g.terminals[REGEX_TERMINAL].pattern, "") is None


def test_invalid_regex_is_rejected_with_a_grammar_error():
    with pytest.raises(RegexError, match="invalid regex"):
        grammar_from_regex("(a")
    assert issubclass(RegexError, GrammarError)


@pytest.mark.parametrize(
    "pattern,alphabet",
    [
        ("a|ab", "ab"),  # leftmost-first alone would never accept "ab"
        ("(?:a|b)*?c", "abc"),
        ("[0-9]*", "01a"),
        ("(?i)ab+", "abAB"),
        ("(?x) a  b? # comment", "ab "),
        ("x(?=y)y|xz", "xyz"),
    ],
)
def test_language_is_fullmatch(pattern, alphabet):
    parser = judge_ir(grammar_from_regex(pattern))
    for s in random_strings(alphabet, 150, 6, seed=len(pattern)):
        assert accepts(parser, s) == (re.fullmatch(pattern, s) is not None), repr(s)
