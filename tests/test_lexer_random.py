"""Random patterns of the supported subset against Python's `re` (the ground truth, DESIGN §2).

For every pattern and text, the match end the lexer settles must equal ``re.match``'s — at the end
of the document, and when more text follows (fed in random chunks; every decision taken before
the end must already be the final one)."""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lexer_patterns import (  # noqa: E402
    ALPHABET, ReTooSlow, full, nest_texts, nested, plain, sample_texts, texts,
)
from lexer_patterns import re_end as _re_end  # noqa: E402

from glrmask.errors import RegexError  # noqa: E402
from glrmask.lexer import Lexer, Settler  # noqa: E402

EXAMPLES = int(os.environ.get("GLRMASK_LEXER_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
NESTED_SETTINGS = settings(SETTINGS, max_examples=max(1, EXAMPLES // 2))
SEEDS = st.integers(0, 2**32 - 1)
"""Seeds for a plain ``random.Random`` (chunk sizes, sampled texts): much cheaper than drawing
every choice through hypothesis."""


def re_end(pattern: str, text: str) -> int | None:
    try:
        return _re_end(pattern, text)
    except ReTooSlow:
        assume(False)


def build(pattern: str) -> tuple[str, Lexer]:
    """Compile, making a pattern that can match the empty string non-nullable first."""
    try:
        return pattern, Lexer([("T", pattern)])
    except RegexError as e:
        if "empty string" not in str(e):
            assume(False)  # e.g. a lookbehind that is legitimately rejected
    pattern = f"(?:{pattern})a"
    try:
        return pattern, Lexer([("T", pattern)])
    except RegexError:
        assume(False)
        raise


def check_text(lx: Lexer, pattern: str, text: str, rnd) -> None:
    s = Settler(lx, 0)
    s.feed(text.encode())
    assert s.finish().end == re_end(pattern, text)


def check_continued(lx: Lexer, pattern: str, prefix: str, more: str, rnd) -> None:
    whole = prefix + more
    expected = re_end(pattern, whole)
    data = whole.encode()
    s = Settler(lx, 0)
    i = 0
    while i < len(data):
        j = i + rnd.randint(1, 5)
        s.feed(data[i:j])
        i = j
        out = s.outcome()
        if out.decided:
            assert out.end == expected, f"decided {out.end} after {i} bytes, re says {expected}"
    assert s.finish().end == expected


@SETTINGS
@given(plain, texts, texts, SEEDS)
def test_lookahead_patterns_match_like_re(pattern, prefix, more, seed):
    pattern, lx = build(pattern)
    rnd = random.Random(seed)
    check_text(lx, pattern, prefix, rnd)
    check_continued(lx, pattern, prefix, more, rnd)


@SETTINGS
@given(full, texts, texts, SEEDS)
def test_lookbehind_and_boundary_patterns_match_like_re(pattern, prefix, more, seed):
    pattern, lx = build(pattern)
    rnd = random.Random(seed)
    check_text(lx, pattern, prefix, rnd)
    check_continued(lx, pattern, prefix, more, rnd)


@NESTED_SETTINGS
@given(nested, nest_texts, nest_texts, SEEDS)
def test_nested_lookahead_patterns_match_like_re(pattern, prefix, more, seed):
    pattern, lx = build(pattern)
    rnd = random.Random(seed)
    check_text(lx, pattern, prefix, rnd)
    check_continued(lx, pattern, prefix, more, rnd)


@NESTED_SETTINGS
@given(nested, SEEDS)
def test_texts_sampled_from_nested_lookahead_patterns_match_like_re(pattern, seed):
    """Texts walked through the pattern itself, so that lookaheads at every depth pass and fail."""
    pattern, lx = build(pattern)
    rnd = random.Random(seed)
    for text in sample_texts(pattern, rnd, 6):
        check_text(lx, pattern, text, rnd)
        cut = rnd.randint(0, len(text))
        check_continued(lx, pattern, text[:cut], text[cut:], rnd)


def _strings_from(pattern: str, rnd, n: int) -> list[str]:
    """Texts likely to match: random walks over the pattern's own characters."""
    chars = [c for c in ALPHABET if c in pattern] or ALPHABET
    return ["".join(rnd.choice(chars + ALPHABET[:3]) for _ in range(rnd.randint(0, 10)))
            for _ in range(n)]


@SETTINGS
@given(full, SEEDS)
def test_texts_built_from_the_pattern_match_like_re(pattern, seed):
    pattern, lx = build(pattern)
    rnd = random.Random(seed)
    for text in _strings_from(pattern, rnd, 8):
        check_text(lx, pattern, text, rnd)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(plain, nested), min_size=2, max_size=3), st.one_of(texts, nest_texts))
def test_joint_lexer_matches_each_terminal_independently(patterns, text):
    fixed = []
    for p in patterns:
        fixed.append(build(p)[0])
    lx = Lexer([(f"T{i}", p) for i, p in enumerate(fixed)])
    for t, p in enumerate(fixed):
        s = Settler(lx, t)
        s.feed(text.encode())
        assert s.finish().end == re_end(p, text)
