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

_SIGNS = st.sampled_from(["(?=", "(?!"])


def _lookahead(t: tuple[str, str]) -> str:
    return f"{t[0]}{t[1]})"


def _extend_nested(children):
    part = children | st.tuples(_SIGNS, children).map(_lookahead)
    return st.one_of(
        st.tuples(_SIGNS, st.lists(part, min_size=1, max_size=3).map("".join)).map(_lookahead),
        st.lists(part, min_size=2, max_size=3).map("".join),
        st.lists(part | st.just(""), min_size=2, max_size=3).map(
            lambda xs: "(?:" + "|".join(xs) + ")"
        ),
        st.tuples(part, quantifiers).map(lambda t: _quant(*t)),
        part.map(lambda x: f"(?i:{x})"),
    )


NEST_ALPHABET = ["a", "b", "c", " ", "é", "K", "\u212a"]
"""A small alphabet for nested lookaheads, so that random texts often match and their lookaheads
often decide both ways."""

_nest_chars = st.one_of(
    st.sampled_from(NEST_ALPHABET[:5]).map(_lit),
    st.sampled_from([r"[ab]", r"[^a]", r"\w", r".", r"(?i:k)", r"[^\w]", r"[bc]"]),
)
_nest_atoms = st.one_of(
    _nest_chars,
    _nest_chars,
    st.tuples(_nest_chars, st.sampled_from([r"(?<=a)", r"(?<!b)", r"\b", r"\B"])).map(
        lambda t: f"(?:{t[0]}{t[1]})"
    ),
)

_nest_part = st.recursive(_nest_atoms, _extend_nested, max_leaves=4)
_small = st.just("") | _nest_atoms | st.tuples(_nest_atoms, quantifiers).map(lambda t: _quant(*t))

nested = st.tuples(_small, _SIGNS, _nest_part, _SIGNS, _nest_part, _small, _small).map(
    lambda t: f"{t[0]}{t[1]}{t[2]}{t[3]}{t[4]}){t[5]}){t[6]}"
)
"""Patterns with a lookahead nested in a lookahead body (at least depth 2, deeper at times), with
text consumed before, inside and after them, e.g. ``(?!sel(?!\\w))\\w`` (the body ends in the
inner lookahead) or ``a(?=b(?!c)d)``; some characters are followed by a lookbehind or \\b/\\B
looking back at them, also inside the lookahead bodies."""

_after_char = st.tuples(
    atoms,
    st.sampled_from(["(?<=a)", "(?<!a)", "(?<=[ab])", "(?<!\\\\)", "(?<=\\w)", "(?<!\\d)",
                     "\\b", "\\B", "(?<=é)", "(?<=\\W)"]),
).map(lambda t: f"(?:{t[0]}{t[1]})")
"""A character followed by an assertion looking back at it: always inside the lexeme."""


def _extend_full(ch):
    return st.one_of(
        st.lists(ch, min_size=2, max_size=3).map("".join),
        st.lists(ch | st.just(""), min_size=2, max_size=3).map(
            lambda xs: "(?:" + "|".join(xs) + ")"
        ),
        st.tuples(ch, quantifiers).map(lambda t: _quant(*t)),
        ch.map(lambda x: f"(?i:{x})"),
        st.tuples(_SIGNS, ch).map(_lookahead),
    )


full = st.recursive(st.one_of(atoms, _after_char), _extend_full, max_leaves=6)
"""Patterns that may also contain lookbehinds and \\b/\\B after a consumed character, also inside
(nested) lookahead bodies."""

texts = st.lists(st.sampled_from(ALPHABET), max_size=8).map("".join)
nest_texts = st.lists(st.sampled_from(NEST_ALPHABET), max_size=8).map("".join)


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


def sample_texts(pattern: str, rnd, n: int, alphabet=NEST_ALPHABET) -> list[str]:
    """Texts likely to match ``pattern`` and to decide its lookaheads both ways: random walks
    through its parse tree (a lookahead sometimes contributes its own body's text and ends the
    walk there), then sometimes a character is changed or random characters are appended."""
    from re import _constants as C
    from re import _parser as P

    singles: dict = {}

    def one_char(op, av) -> str:
        key = (op, repr(av))
        options = singles.get(key)
        if options is None:
            sub = P.SubPattern(P.State(), [(op, av)])
            rx = re._compiler.compile(sub, 0)
            options = [c for c in alphabet if rx.fullmatch(c)] or list(alphabet)
            singles[key] = options
        return rnd.choice(options)

    class Stop(Exception):
        pass

    def walk(items, out: list[str]) -> None:
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op in (C.NOT_LITERAL, C.ANY, C.IN):
                out.append(one_char(op, av))
            elif op is C.SUBPATTERN:
                walk(av[-1], out)
            elif op is C.BRANCH:
                walk(rnd.choice(av[1]), out)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, body = av
                for _ in range(rnd.randint(lo, min(hi, lo + 2))):
                    walk(body, out)
            elif op in (C.ASSERT, C.ASSERT_NOT) and av[0] == 1 and rnd.random() < 0.3:
                walk(av[1].data, out)
                raise Stop

    parsed = P.parse(pattern)
    out_texts = []
    for _ in range(n):
        out: list[str] = []
        try:
            walk(parsed.data, out)
        except Stop:
            pass
        if out and rnd.random() < 0.3:
            out[rnd.randrange(len(out))] = rnd.choice(alphabet)
        if rnd.random() < 0.5:
            out.extend(rnd.choice(alphabet) for _ in range(rnd.randint(1, 3)))
        out_texts.append("".join(out))
    return out_texts
