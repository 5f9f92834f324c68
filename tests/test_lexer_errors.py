"""Unsupported constructs are rejected with RegexError naming the terminal and the construct;
budgets end in GrammarTooComplex."""
from __future__ import annotations

import pytest

from glrmask.errors import GrammarTooComplex, GlrmaskError, RegexError
from glrmask.lexer import Lexer


@pytest.mark.parametrize(
    "pattern, construct",
    [
        (r"(a)\1", "backreference"),
        (r"(a)?(?(1)b|c)", "conditional group"),
        (r"(?>ab)c", "atomic group"),
        (r"a*+b", "possessive quantifier"),
        (r"a++", "possessive quantifier"),
        (r"^a", "'^' anchor"),
        (r"a$", "'$' anchor"),
        (r"\Aa", "'\\A' anchor"),
        (r"a\Z", "'\\Z' anchor"),
        (r"(?<=a)b", "lookbehind (?<=...)"),  # would read before the lexeme
        (r"a(?<!ab)c", "lookbehind (?<!...)"),  # width 2, only 1 char before it
        (r"\ba", "word boundary \\b"),
        (r"\Ba", "non-boundary \\B"),
        (r"ab(?<=(?=b)b)", "nested lookaround: lookahead (?=...) inside a lookbehind"),
        (r"ab(?<!(?<=a)b)", "nested lookaround: lookbehind (?<=...) inside a lookbehind"),
        (r"ab(?<=b\b)", "word boundary \\b inside a lookbehind"),
        (r"a(?=(?<=ab)c)", "lookbehind (?<=...)"),  # inside a lookahead: still only 1 char before
        (r"(?=\ba)a", "word boundary \\b"),  # at the lexeme start, inside a lookahead
        (r"a(?=b(?!(?<!xab)c))", "lookbehind (?<!...)"),  # nested two deep, reaches before
        (r"a*", "empty string"),
        (r"(?=a)", "empty string"),  # empty match when its lookahead holds
        (r"a|", "empty string"),
        (r"(", "invalid regex"),
    ],
)
def test_rejected_construct_names_terminal_and_construct(pattern, construct):
    with pytest.raises(RegexError) as exc:
        Lexer([("OK", r"x"), ("BAD_TERM", pattern)])
    msg = str(exc.value)
    assert "BAD_TERM" in msg and construct in msg


def test_regex_error_is_a_glrmask_error():
    with pytest.raises(GlrmaskError):
        Lexer([("T", r"(a)\1")])


def test_lookbehind_after_enough_characters_is_accepted():
    Lexer([("T", r"ab(?<=ab)c"), ("U", r"a+(?<!b)"), ("V", r"a\b")])


def test_nested_lookarounds_inside_lookaheads_are_accepted():
    Lexer([("T", r"a(?=b(?=c))"), ("U", r"a(?=(?<=a)b)"), ("V", r"a(?!b\b)"),
           ("W", r"a(?=b(?!(?<!ab)c))"), ("X", r"a(?=(?!(?=b)))")])


def test_nfa_budget_raises_grammar_too_complex_naming_terminal():
    with pytest.raises(GrammarTooComplex) as exc:
        Lexer([("BIG", r"(?:a{1,100}b){1,100}")], max_nfa_nodes=5_000)
    assert "BIG" in str(exc.value) and "5000" in str(exc.value)


def test_lookahead_nesting_depth_budget_raises_grammar_too_complex():
    deep = "a" + "(?=a" * 40 + ")" * 40
    with pytest.raises(GrammarTooComplex) as exc:
        Lexer([("DEEP", deep)])
    assert "DEEP" in str(exc.value) and "32" in str(exc.value)
    Lexer([("OK", "a" + "(?!a" * 30 + ")" * 30)])  # within the budget


def test_state_budget_raises_grammar_too_complex():
    # /(a|b)*a(a|b){12}/ needs exponentially many lane states to scan
    lx = Lexer([("T", r"[ab]*a[ab]{12}c")], max_states=500)
    with pytest.raises(GrammarTooComplex) as exc:
        import random

        rnd = random.Random(0)
        lx.scan(lx.initial, bytes(rnd.choice(b"ab") for _ in range(5000)))
    assert "500" in str(exc.value)


def test_duplicate_terminal_names_are_rejected():
    with pytest.raises(RegexError):
        Lexer([("A", "a"), ("A", "b")])



@pytest.mark.parametrize("group", ["(?:", "(?:a|", "("])
def test_groups_nested_past_the_quick_parsers_depth_still_compile(group):
    pattern = group * 250 + "b" + ")" * 250  # the quick parser stops at 200 levels; re parses it
    lx = Lexer([("T", pattern)])
    assert lx.initial >= 0


@pytest.mark.parametrize("group", ["(?:", "(?:a|", "("])
def test_groups_nested_100000_deep_are_a_regex_error_not_a_crash(group):
    """The quick parser bounds its own depth (its C frames are large, and the interpreter's
    recursion limit does not bound the C stack); re then refuses the pattern, worded as a
    RegexError naming the terminal."""
    with pytest.raises(RegexError, match="'T'"):
        Lexer([("T", group * 100_000 + "b" + ")" * 100_000)])
