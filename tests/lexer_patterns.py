"""Hypothesis strategies: random regexes of the lexer's supported subset, and texts for them."""
from __future__ import annotations

import re

from hypothesis import strategies as st

# characters chosen to exercise UTF-8 widths 1-4 and case folding (Kelvin sign, long s, ß, ǅ)
ALPHABET = ["a", "b", "c", "k", "K", "s", "é", "É", "ß", "ǅ", "ǆ", "\u212a", "\u017f",
            "中", "😀", " ", "1", "_", "\n", "."]

_CLASSES = [r"[ab]", r"[^a]", r"[a-c]", r"\d", r"\w", r"\s", r"\W", r".", r"[é-ǅ]", r"[^\w]",
            r"[kK]", r"[^\n ]", r"[中-😀]", r"\S", r"[s-z]", r"(?i:[a-k])"]


def _lit(ch: str) -> str:
    return re.escape(ch)


atoms = st.one_of(
    st.sampled_from(ALPHABET).map(_lit),
    st.sampled_from(_CLASSES),
)


def _quant(inner: str, q: str) -> str:
    return f"(?:{inner}){q}"


quantifiers = st.sampled_from(["*", "+", "?", "*?", "+?", "??", "{2}", "{0,2}", "{1,3}?", "{2,}"])


def _extend(children):
    return st.one_of(
        st.lists(children, min_size=2, max_size=3).map("".join),  # concatenation
        st.lists(children | st.just(""), min_size=2, max_size=3).map(
            lambda xs: "(?:" + "|".join(xs) + ")"
        ),
        st.tuples(children, quantifiers).map(lambda t: _quant(*t)),
        children.map(lambda x: f"({x})"),
        children.map(lambda x: f"(?i:{x})"),
        children.map(lambda x: f"(?s:{x})"),
        children.map(lambda x: f"(?-i:{x})"),
        children.map(lambda x: f"(?a:{x})"),
        st.tuples(st.sampled_from(["(?=", "(?!"]), children).map(lambda t: f"{t[0]}{t[1]})"),
    )


plain = st.recursive(atoms, _extend, max_leaves=6)
"""Patterns without lookbehinds or word boundaries (may contain lookaheads)."""

_after_char = st.tuples(
    atoms,
    st.sampled_from(["(?<=a)", "(?<!a)", "(?<=[ab])", "(?<!\\\\)", "(?<=\\w)", "(?<!\\d)",
                     "\\b", "\\B", "(?<=é)", "(?<=\\W)"]),
).map(lambda t: f"(?:{t[0]}{t[1]})")
"""A character followed by an assertion looking back at it: always inside the lexeme."""


def _no_lookarounds(p: str) -> bool:
    return "(?=" not in p and "(?!" not in p


full = st.recursive(
    st.one_of(atoms, _after_char),
    lambda ch: st.one_of(
        st.lists(ch, min_size=2, max_size=3).map("".join),
        st.lists(ch | st.just(""), min_size=2, max_size=3).map(
            lambda xs: "(?:" + "|".join(xs) + ")"
        ),
        st.tuples(ch, quantifiers).map(lambda t: _quant(*t)),
        ch.map(lambda x: f"(?i:{x})"),
        st.tuples(st.sampled_from(["(?=", "(?!"]), plain.filter(_no_lookarounds)).map(
            lambda t: f"{t[0]}{t[1]})"
        ),
    ),
    max_leaves=6,
)
"""Patterns that may also contain lookbehinds and \\b/\\B after a consumed character."""

texts = st.lists(st.sampled_from(ALPHABET), max_size=8).map("".join)


class ReTooSlow(Exception):
    """Python's backtracking `re` itself blew up on a generated pattern (nested nullable repeats
    backtrack exponentially); such examples are discarded, not failed."""


def re_end(pattern: str, text: str, limit_s: float = 0.5) -> int | None:
    """Byte length of ``re.match(pattern, text)`` (None if no match), under a time limit."""
    import signal

    def _alarm(*_):
        raise ReTooSlow(pattern)

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        m = re.match(pattern, text)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None if m is None else len(text[: m.end()].encode())
