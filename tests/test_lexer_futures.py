"""``futures`` and ``cond_satisfiable`` are exact: checked against ``re`` by bounded search."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lexer_patterns import ALPHABET, ReTooSlow, full, nested, plain, re_end, texts  # noqa: E402

from glrmask.errors import RegexError  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402

SEARCH_CHARS = ALPHABET + ["d", "x", "9", "Z", "-", "\\"]


def _compile(pattern: str):
    for p in (pattern, f"(?:{pattern})a"):
        try:
            return p, Lexer([("T", p)])
        except RegexError:
            continue
    assume(False)


def _re_extends(pattern: str, prefix: str, depth: int) -> str | None:
    """A suffix (up to ``depth`` chars) after which re.match ends beyond ``prefix``."""
    for n in range(1, depth + 1):
        for tail in itertools.product(SEARCH_CHARS, repeat=n):
            s = "".join(tail)
            try:
                end = re_end(pattern, prefix + s)
            except ReTooSlow:
                assume(False)
            if end is not None and end > len(prefix.encode()):
                return s
    return None


def _lexer_witness(lx: Lexer, state: int, depth: int) -> str | None:
    """Search over characters for an event whose condition some short suffix (or the end of the
    document) makes TRUE; returns the whole continuation (event bytes + condition suffix)."""
    frontier = [(state, "")]
    for _ in range(depth):
        nxt = []
        for st_, w in frontier:
            for ch in SEARCH_CHARS:
                s2, events = lx.scan(st_, ch.encode())
                for _, _, c in events:
                    sfx = _cond_witness(lx, c, depth)
                    if sfx is not None:
                        return w + ch + sfx
                if s2 >= 0:
                    nxt.append((s2, w + ch))
        frontier = nxt
    return None


def _cond_witness(lx: Lexer, c: int, depth: int) -> str | None:
    frontier = [(c, "")]
    for _ in range(depth + 1):
        nxt = []
        for cc, w in frontier:
            if cc == lx.TRUE or (cc != lx.FALSE and lx.cond_at_end(cc)):
                return w
            if cc == lx.FALSE:
                continue
            for ch in SEARCH_CHARS:
                d = cc
                for b in ch.encode():
                    d = lx.cond_step(d, b)
                nxt.append((d, w + ch))
        frontier = nxt
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(plain, full, nested), texts)
def test_futures_matches_bounded_search_with_re(pattern, prefix):
    pattern, lx = _compile(pattern)
    state, _ = lx.scan(lx.initial, prefix.encode())
    assume(state >= 0)
    in_futures = 0 in lx.futures(state)
    brute = _re_extends(pattern, prefix, 2)
    if brute is not None:
        assert in_futures, f"re extends the match with {brute!r} but futures says no"
    if in_futures and brute is None:
        witness = _lexer_witness(lx, state, 3)
        if witness is not None:  # verified independently
            try:
                end = re_end(pattern, prefix + witness)
            except ReTooSlow:
                assume(False)
            assert end is not None and end > len(prefix.encode()), witness


def test_satisfiable_condition_for_pending_lookahead():
    lx = Lexer([("T", r"a(?=bc)")])
    _, events = lx.scan(lx.initial, b"a")
    ((_, _, c),) = events
    assert lx.cond_satisfiable(c)
    assert not lx.cond_satisfiable(lx.cond_step(c, ord("x")))
    assert not lx.cond_at_end(c)


def test_condition_satisfiable_only_at_end_of_document():
    lx = Lexer([("T", r"a(?![\s\S])")])
    _, events = lx.scan(lx.initial, b"a")
    ((_, _, c),) = events
    assert lx.cond_satisfiable(c) and lx.cond_at_end(c)
    assert lx.cond_step(c, ord("x")) == lx.FALSE


def test_futures_empty_once_match_cannot_grow():
    lx = Lexer([("T", r"ab?")])
    s, _ = lx.scan(lx.initial, b"ab")
    assert s == lx.DEAD and lx.futures(s) == frozenset()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(plain, texts)
def test_every_live_lane_of_a_lookaround_free_terminal_has_a_future(pattern, prefix):
    """Without lookarounds every live lane can still end a match (futures answers without a
    search): a witness continuation exists and ``re.match`` agrees with it."""
    assume(not any(a in pattern for a in ("(?=", "(?!", "(?<", "\\b", "\\B")))
    pattern, lx = _compile(pattern)
    state, _ = lx.scan(lx.initial, prefix.encode())
    assume(state >= 0)
    assert 0 in lx.futures(state)
    witness = _shortest_event(lx, state)
    assert witness is not None
    try:
        end = re_end(pattern, prefix + witness)
    except ReTooSlow:
        assume(False)
    assert end is not None and end > len(prefix.encode()), witness


def _shortest_event(lx: Lexer, state: int) -> str | None:
    """A shortest continuation over ``SEARCH_CHARS`` that ends a match (an event whose condition
    holds at the end of the text), by breadth-first search over the lexer states it reaches (each
    visited once, so long literals and counted repeats are no harder than short ones)."""
    seen = {state}
    frontier = [(state, "")]
    while frontier:
        nxt = []
        for st_, w in frontier:
            for ch in SEARCH_CHARS:
                s2, events = lx.scan(st_, ch.encode())
                if any(c == lx.TRUE or (c != lx.FALSE and lx.cond_at_end(c)) for _, _, c in events):
                    return w + ch
                if s2 >= 0 and s2 not in seen:
                    seen.add(s2)
                    nxt.append((s2, w + ch))
        frontier = nxt
    return None


def test_the_future_search_backs_up_from_a_branch_that_cannot_match():
    """``q(?:b(?=x)y|c)``: after ``qb`` the lookahead wants ``x`` where the pattern wants ``y``, so
    ``re.match`` never ends there; after ``q`` the ``c`` branch still does. The search descends
    into the ``b`` branch first (its byte group comes first), finds nothing and backs up — the
    verdicts are the same in either order of asking."""
    pattern = r"q(?:b(?=x)y|c)"
    for qb_first in (True, False):
        lexer = Lexer([("T", pattern)])
        q, _ = lexer.step(lexer.initial, ord("q"))
        qb, _ = lexer.step(q, ord("b"))
        asked = [(qb, False), (q, True)] if qb_first else [(q, True), (qb, False)]
        for state, expected in asked:
            assert lexer.has_future(state, 0) is expected
