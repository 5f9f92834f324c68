"""The lexer's match semantics on named examples (DESIGN §2) and its state/condition protocol."""
from __future__ import annotations

import re

import pytest

from glrmask.lexer import Lexer, Settler, match_end, settle

ESCAPED_STRING = r'".*?(?<!\\)(\\\\)*?"'
NUMBER = r"[0-9]+(\.[0-9]+)?"


def lex(pattern: str) -> Lexer:
    return Lexer([("T", pattern)])


def re_end(pattern: str, text: str) -> int | None:
    m = re.match(pattern, text)
    return None if m is None else len(text[: m.end()].encode())


@pytest.mark.parametrize(
    "pattern, text, expected",
    [
        (r"a+(?:ab)*", "aab!", "aa"),  # not maximal munch
        (r"a+(?!b)", "aab", "a"),  # failed lookahead falls back to a shorter match
        (r"a|ab", "ab", "a"),  # ordered alternation
        (r"ab|a", "ab", "ab"),
        (r"x.*?y", "xayby", "xay"),  # lazy
        (r"x.*y", "xayby", "xayby"),  # greedy
        (ESCAPED_STRING, r'"ab\"c" rest"', r'"ab\"c"'),  # stops at the first unescaped quote
        (ESCAPED_STRING, r'"ab\\" rest"', r'"ab\\"'),  # escaped backslash, then the quote closes
        (NUMBER, "1.x", "1"),
        (NUMBER, "12.50!", "12.50"),
        (r"(?i:k)", "\u212a", "\u212a"),  # Kelvin sign folds to k
        (r"\w+\b", "héllo wörld", "héllo"),
        (r"(?:|a)*b", "aab", "aab"),  # sre's empty-iteration rule inside a repeat
    ],
)
def test_settled_match_equals_re_match(pattern, text, expected):
    assert match_end(lex(pattern), "T", text.encode(), at_end=True) == len(expected.encode())
    assert re_end(pattern, text) == len(expected.encode())


def test_lookahead_at_end_of_document_fails():
    assert match_end(lex(r"a(?=b)"), "T", b"a", at_end=True) is None


def test_casefolding_does_not_expand_sharp_s():
    assert match_end(lex(r"(?i:ß)"), "T", b"ss", at_end=True) is None


def test_number_decision_waits_for_the_byte_after_the_dot():
    lx = lex(NUMBER)
    state, events = lx.scan(lx.initial, b"1")
    ((_, end, cond),) = [(None, e, c) for e, _, c in events]
    assert end == 1 and cond not in (lx.TRUE, lx.FALSE)  # depends on "\.[0-9]+" failing
    c_dot = lx.cond_step(cond, ord("."))
    assert c_dot not in (lx.TRUE, lx.FALSE)  # "1." is not yet decided
    assert lx.cond_step(c_dot, ord("x")) == lx.TRUE
    assert lx.cond_step(c_dot, ord("5")) == lx.FALSE
    assert lx.cond_at_end(c_dot) is True  # "1." at end of document: NUMBER is "1"


def test_undecided_prefix_reports_undecided():
    out = settle(lex(NUMBER), "T", b"1.", at_end=False)
    assert not out.decided


def test_unconditional_match_is_decided_without_more_bytes():
    out = settle(lex(r"ab|a"), "T", b"ab", at_end=False)
    assert out.decided and out.end == 2


def test_lower_priority_candidate_waits_for_higher_thread():
    lx = lex(r"ab|a")
    _, events = lx.step(lx.initial, ord("a"))
    ((t, cond),) = events
    assert lx.cond_step(cond, ord("b")) == lx.FALSE
    assert lx.cond_step(cond, ord("c")) == lx.TRUE
    assert lx.cond_at_end(cond) is True


def test_conditional_candidate_does_not_cut_lower_entries():
    lx = lex(r"a(?=b)|a")
    _, events = lx.step(lx.initial, ord("a"))
    assert len(events) == 2
    (_, c_look), (_, c_plain) = events
    assert lx.cond_step(c_look, ord("b")) == lx.TRUE
    assert lx.cond_step(c_plain, ord("b")) == lx.FALSE
    assert lx.cond_step(c_plain, ord("c")) == lx.TRUE
    assert lx.cond_at_end(c_look) is False and lx.cond_at_end(c_plain) is True


def test_terminals_have_independent_lanes():
    lx = Lexer([("A", r"a+"), ("AB", r"ab"), ("B", r"b")])
    state, events = lx.step(lx.initial, ord("a"))
    assert lx.alive_terminals(state) == {0, 1}
    assert [t for t, _ in events] == [0]
    state, events = lx.step(state, ord("b"))
    assert [(t, c) for t, c in events] == [(1, lx.TRUE)]
    assert state == lx.DEAD


def test_restrict_drops_other_terminals_and_dies_when_empty():
    lx = Lexer([("A", r"a"), ("B", r"b")])
    only_b = lx.restrict(lx.initial, frozenset({1}))
    assert lx.alive_terminals(only_b) == {1}
    assert lx.step(only_b, ord("a")) == (lx.DEAD, ())
    assert lx.restrict(lx.initial, frozenset()) == lx.DEAD


def test_dead_state_stays_dead():
    lx = lex("a")
    assert lx.step(lx.DEAD, ord("a")) == (lx.DEAD, ())
    assert lx.futures(lx.DEAD) == frozenset()
    assert lx.alive_terminals(lx.DEAD) == frozenset()


def test_steps_are_memoized_to_the_same_ids():
    lx = lex(ESCAPED_STRING)
    s1, _ = lx.scan(lx.initial, b'"abc')
    n = lx.n_states
    s2, _ = lx.scan(lx.initial, b'"abc')
    assert s1 == s2 and lx.n_states == n


def test_state_ids_persist_across_chunk_boundaries():
    lx = lex(ESCAPED_STRING)
    whole = Settler(lx, 0)
    whole.feed(b'"a\\"b" x')
    split = Settler(lx, 0)
    for chunk in (b'"a', b"\\", b'"b', b'"', b" x"):
        split.feed(chunk)
    assert whole.outcome() == split.outcome() and split.outcome().end == 6


def test_futures_excludes_a_finished_terminal_and_includes_a_growing_one():
    lx = Lexer([("INT", r"[0-9]+"), ("KW", r"if")])
    s, _ = lx.scan(lx.initial, b"1")
    assert lx.futures(s) == {0}
    s, _ = lx.scan(lx.initial, b"i")
    assert lx.futures(s) == {1}


def test_futures_excludes_terminal_whose_only_continuation_loses():
    # after "a", /a|ab/ can never report another candidate (the "a" candidate cut everything)
    lx = lex(r"a|ab")
    s, _ = lx.scan(lx.initial, b"a")
    assert lx.futures(s) == frozenset()


def test_futures_of_lookahead_only_satisfiable_before_end():
    lx = lex(r"ab(?=c)")
    s, _ = lx.scan(lx.initial, b"a")
    assert lx.futures(s) == {0}


def test_unsatisfiable_condition_is_reported_unsatisfiable():
    lx = lex(r"a(?=b)(?!b)|c")
    s, events = lx.scan(lx.initial, b"a")
    assert all(not lx.cond_satisfiable(c) for _, _, c in events)
    assert lx.futures(lx.initial) == {0}  # via "c"
    assert lx.futures(lx.restrict(lx.initial, {0})) == {0}


def test_word_boundary_becomes_lookahead_on_next_char():
    lx = lex(r"ab\b")
    assert match_end(lx, "T", b"ab c", at_end=True) == 2
    assert match_end(lx, "T", b"abc", at_end=True) is None
    assert match_end(lx, "T", b"ab", at_end=True) == 2


def test_lookbehind_inside_lexeme():
    lx = lex(r"[ab]+(?<=b)c")
    assert match_end(lx, "T", b"abc", at_end=True) == 3
    assert match_end(lx, "T", b"bac", at_end=True) is None


def test_multibyte_and_emoji_classes():
    lx = lex(r"[^\x00-\x7f]+")
    assert match_end(lx, "T", "é中😀a".encode(), at_end=True) == len("é中😀".encode())


def test_invalid_utf8_bytes_never_match_a_class():
    lx = lex(r"[^a]")
    assert match_end(lx, "T", b"\xff", at_end=True) is None
    assert match_end(lx, "T", b"\xed\xa0\x80", at_end=True) is None  # encoded surrogate


def test_scan_reports_offsets():
    lx = Lexer([("A", r"a"), ("AA", r"aa")])
    state, events = lx.scan(lx.initial, b"aa")
    assert [(e, t, c) for e, t, c in events] == [(1, 0, lx.TRUE), (2, 1, lx.TRUE)]
    assert state == lx.DEAD
