"""Lookarounds nested inside lookahead bodies behave exactly as in Python's `re` (DESIGN §2).

A lookahead body is matched the way `re` matches an assertion: it holds iff some path through it
matches with all of its own nested lookarounds holding at their positions."""
from __future__ import annotations

import re

import pytest

from glrmask.lexer import Lexer, Settler, match_end

SQL_KEYWORDS = "select|from|where|as|and|or|not"
SQL_NAME = rf"(?i:(?!(?:{SQL_KEYWORDS})(?![A-Za-z0-9_]))[A-Za-z_][A-Za-z0-9_]*)"
"""grammars/sql.lark's identifier: a negative lookahead whose body ends in another one."""


def lex(pattern: str) -> Lexer:
    return Lexer([("T", pattern)])


def re_end(pattern: str, text: str) -> int | None:
    m = re.match(pattern, text)
    return None if m is None else len(text[: m.end()].encode())


def settled(lx: Lexer, text: str, at_end: bool) -> int | None:
    return match_end(lx, "T", text.encode(), at_end=at_end)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("selectx", "selectx"),  # a keyword prefix is an identifier
        ("select", None),  # the keyword itself is not
        ("select_1", "select_1"),
        ("FROM", None),  # case-insensitive keyword
        ("fromage", "fromage"),
        ("Select x", None),
        ("selectx y", "selectx"),
        ("from(", None),
        ("fromage(", "fromage"),
        ("as1", "as1"),
        ("_", "_"),
    ],
)
def test_sql_identifier_excludes_keywords_like_re(text, expected):
    want = None if expected is None else len(expected.encode())
    assert re_end(SQL_NAME, text) == want
    assert settled(lex(SQL_NAME), text, at_end=True) == want


@pytest.mark.parametrize("text, after", [
    ("select", " "), ("select", "x"), ("select", "_"), ("FROM", "("), ("fromage", ","), ("as", "1"),
])
def test_sql_identifier_followed_by_more_text_like_re(text, after):
    lx = lex(SQL_NAME)
    s = Settler(lx, "T")
    s.feed(text.encode())
    assert not s.outcome().decided or s.outcome().end is None  # a keyword waits for the next byte
    s.feed(after.encode())
    assert s.finish().end == re_end(SQL_NAME, text + after)


def test_sql_keyword_candidate_is_unsatisfiable_and_the_identifier_continues():
    # after "select" the candidate "select" can never be the answer: a word char makes the match
    # longer, anything else (or the end) makes it the keyword. The lane itself still has a future.
    lx = lex(SQL_NAME)
    state, events = lx.scan(lx.initial, b"select")
    last = [c for end, _, c in events if end == 6]
    assert last and all(not lx.cond_satisfiable(c) and not lx.cond_at_end(c) for c in last)
    assert lx.futures(state) == {0}


def test_sql_keyword_prefix_candidate_is_decided_by_the_next_byte():
    lx = lex(SQL_NAME)
    _, events = lx.scan(lx.initial, b"sel")
    (cond,) = [c for end, _, c in events if end == 3]
    assert lx.cond_step(cond, ord(" ")) == lx.TRUE  # "sel" is not a keyword
    assert lx.cond_step(cond, ord("x")) == lx.FALSE  # a longer identifier wins


@pytest.mark.parametrize(
    "pattern, cases",
    [
        # positive inside positive
        (r"a(?=b(?=c))", {"abc": 1, "abd": None, "ab": None, "a": None}),
        # negative inside positive, deciding past the match end
        (r"a(?=b(?!c))", {"abd": 1, "abc": None, "ab": 1, "a": None}),
        # three levels: the innermost lookahead fails at the end of the document
        (r"a(?=b(?!c(?=d)))", {"abcd": None, "abce": 1, "abc": 1, "ab": 1, "ac": None}),
        # a nested lookahead ahead of a repeat inside the body
        (r"x(?=(?:a(?!b))+c)\w*", {"xaac": 4, "xabc": None, "xac!": 3, "xa": None}),
        # a failing nested condition makes re fall back to a shorter match of the outer pattern
        (r"a+(?!b(?=c))", {"aabc": 1, "aabd": 2, "aab": 2, "abc": None}),
    ],
)
def test_nested_lookaheads_match_like_re(pattern, cases):
    lx = lex(pattern)
    for text, expected in cases.items():
        assert re_end(pattern, text) == expected, text
        assert settled(lx, text, at_end=True) == expected, text
        for tail in ("b", "c", "d", " "):
            assert settled(lx, text + tail, at_end=True) == re_end(pattern, text + tail), text + tail


@pytest.mark.parametrize(
    "pattern, cases",
    [
        # a lookbehind inside a lookahead, within the lexeme
        (r"[ab](?=(?<=a)c)", {"ac": 1, "bc": None}),
        # a lookbehind inside a lookahead, looking at text past the match end
        (r"a(?=\w+(?<=z))", {"abz": 1, "abzq": 1, "abqq": None, "a": None}),
        (r"a(?=b(?<!ab)|c)", {"ab": None, "ac": 1}),
        # \b and \B inside a lookahead, also two levels deep
        (r"a(?!b\b)\w*", {"ab ": None, "ab": None, "abc": 3, "a": 1}),
        (r"a(?=\w\B)", {"abc": 1, "ab": None, "ab-": None}),
        (r"a(?=b(?!c\b))", {"abc": None, "abcd": 1, "abd": 1}),
    ],
)
def test_lookbehinds_and_boundaries_inside_lookaheads_match_like_re(pattern, cases):
    lx = lex(pattern)
    for text, expected in cases.items():
        assert re_end(pattern, text) == expected, text
        assert settled(lx, text, at_end=True) == expected, text


def test_identical_nested_lookaheads_share_condition_states():
    # the keyword test of every identifier start is one condition, whatever came before
    lx = Lexer([("NAME", SQL_NAME), ("WS", r"\s+")])
    s1, e1 = lx.scan(lx.initial, b"s")
    s2, e2 = lx.scan(lx.initial, b"s")
    assert s1 == s2 and e1 == e2
