"""Code-point sets and their JSON-string encodings as Python regexes.

A JSON Schema constrains the *decoded* string, but the grammar matches the *encoded* text. Every
character class of a pattern therefore becomes the alternation of all ways JSON may write one of its
characters: the raw character (where JSON allows it unescaped), the short escapes ``\\" \\\\ \\/ \\b
\\f \\n \\r \\t`` and ``\\uXXXX`` in either hex case (surrogate pairs for astral characters).

All regexes produced here are written in ASCII with a restricted escape vocabulary (``\\\\``,
``\\x22`` for the quote, ``\\uXXXX``/``\\UXXXXXXXX`` for non-printables, ``\\`` + punctuation), so
they survive Lark's grammar-literal unescaping unchanged in meaning (see :mod:`.lark_text`).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from glrmask.lexer.charsets import intersect  # same interval algebra; no universe clipping involved

MAX_CP = 0x10FFFF
SURR_LO, SURR_HI = 0xD800, 0xDFFF

Intervals = tuple[tuple[int, int], ...]


def normalize(ivs: Iterable[tuple[int, int]]) -> Intervals:
    """Sort and merge (inclusive) intervals."""
    out: list[list[int]] = []
    for lo, hi in sorted(ivs):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def complement(ivs: Intervals) -> Intervals:
    out, prev = [], 0
    for lo, hi in ivs:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return tuple(out)


def union(*sets: Intervals) -> Intervals:
    return normalize(iv for s in sets for iv in s)


def contains(ivs: Intervals, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ivs)


ANY: Intervals = ((0, MAX_CP),)
DIGIT: Intervals = ((0x30, 0x39),)
WORD: Intervals = normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
# ECMA-262 WhiteSpace + LineTerminator
SPACE: Intervals = normalize([(9, 13), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                              (0xFEFF, 0xFEFF)])
LINE_TERMINATORS: Intervals = normalize([(10, 10), (13, 13), (0x2028, 0x2029)])
DOT: Intervals = complement(LINE_TERMINATORS)

# What JSON text may contain unescaped inside a string (valid UTF-8 excludes surrogates).
RAW_OK: Intervals = normalize([(0x20, 0x21), (0x23, 0x5B), (0x5D, SURR_LO - 1), (SURR_HI + 1, MAX_CP)])
SHORT_ESCAPES = {0x22: '\\x22', 0x5C: '\\\\', 0x2F: '\\/', 0x08: 'b', 0x0C: 'f', 0x0A: 'n', 0x0D: 'r', 0x09: 't'}


def char_regex(cp: int, in_class: bool = False) -> str:
    """One code point as a regex atom in the restricted escape vocabulary."""
    c = chr(cp)
    if cp == 0x22:
        return '\\x22'
    if c.isascii() and c.isalnum():
        return c
    if 0x20 <= cp < 0x7F:
        if c == ' ':
            return ' '
        return '\\' + c
    if cp <= 0xFFFF:
        return '\\u%04x' % cp
    return '\\U%08x' % cp


def class_regex(ivs: Intervals) -> str:
    """A regex character class (or single atom) for a non-empty interval set."""
    assert ivs
    if len(ivs) == 1 and ivs[0][0] == ivs[0][1]:
        return char_regex(ivs[0][0])
    parts = []
    for lo, hi in ivs:
        if lo == hi:
            parts.append(char_regex(lo, True))
        elif hi == lo + 1:
            parts.append(char_regex(lo, True) + char_regex(hi, True))
        else:
            parts.append(char_regex(lo, True) + '-' + char_regex(hi, True))
    return '[' + ''.join(parts) + ']'


def _hexdigit_class(lo: int, hi: int) -> str:
    """Hex digits with values lo..hi, both letter cases."""
    chars = []
    for v in range(lo, hi + 1):
        d = '%x' % v
        chars.append(d)
        if d.isalpha():
            chars.append(d.upper())
    if len(chars) == 1:
        return chars[0]
    s = ''.join(sorted(chars))
    # compress runs for readability
    out, i = [], 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and ord(s[j + 1]) == ord(s[j]) + 1:
            j += 1
        out.append(s[i] if j == i else (s[i] + s[j] if j == i + 1 else s[i] + '-' + s[j]))
        i = j + 1
    return '[' + ''.join(out) + ']'


def _fixed_width_range(lo: int, hi: int, width: int) -> list[str]:
    """Alternatives matching exactly the `width`-digit hex strings with value in [lo, hi]."""
    if width == 0:
        return ['']
    unit = 16 ** (width - 1)
    lo_d, lo_r = divmod(lo, unit)
    hi_d, hi_r = divmod(hi, unit)
    if lo_d == hi_d:
        return [_hexdigit_class(lo_d, lo_d) + s for s in _fixed_width_range(lo_r, hi_r, width - 1)]
    out = []
    start, end = lo_d, hi_d
    if lo_r != 0:
        out += [_hexdigit_class(lo_d, lo_d) + s for s in _fixed_width_range(lo_r, unit - 1, width - 1)]
        start += 1
    tail = []
    if hi_r != unit - 1:
        tail = [_hexdigit_class(hi_d, hi_d) + s for s in _fixed_width_range(0, hi_r, width - 1)]
        end -= 1
    if start <= end:
        rest = '' if width == 1 else ('[0-9a-fA-F]' if width == 2 else '[0-9a-fA-F]{%d}' % (width - 1))
        out.append(_hexdigit_class(start, end) + rest)
    return out + tail


def _alt(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else '(?:' + '|'.join(parts) + ')'


@lru_cache(maxsize=4096)
def encode_class(ivs: Intervals) -> str | None:
    """Regex over JSON string *content* matching exactly one encoded character of `ivs`.

    Returns None for the empty set. Lone surrogates are not characters here (a ``\\uD8xx`` must
    pair with a following ``\\uDCxx``), so each alternative denotes exactly one code point.
    """
    ivs = normalize(ivs)
    if not ivs:
        return None
    alts: list[str] = []
    raw = intersect(ivs, RAW_OK)
    if raw:
        alts.append(class_regex(raw))
    esc_alts: list[str] = []
    shorts = [SHORT_ESCAPES[cp] for cp in sorted(SHORT_ESCAPES) if contains(ivs, cp)]
    letters = ''.join(s for s in shorts if len(s) == 1)
    others = [s for s in shorts if len(s) > 1]
    if len(letters) == 1:
        others.append(letters)
    elif letters:
        others.append('[' + letters + ']')
    esc_alts += others
    bmp = intersect(ivs, ((0, SURR_LO - 1), (SURR_HI + 1, 0xFFFF)))
    u_alts = []
    for lo, hi in bmp:
        u_alts += _fixed_width_range(lo, hi, 4)
    if u_alts:
        esc_alts.append('u' + _alt(u_alts))
    astral = intersect(ivs, ((0x10000, MAX_CP),))
    for lo, hi in astral:
        for pair in _surrogate_pairs(lo, hi):
            esc_alts.append(pair)
    if esc_alts:
        alts.append('\\\\' + _alt(esc_alts))
    if not alts:  # only lone surrogates: no character here
        return None
    return _alt(alts)


def _surrogate_pairs(lo: int, hi: int) -> list[str]:
    """`u<high>\\\\u<low>` alternatives (after a leading backslash) for astral code points lo..hi."""
    out = []
    a, b = lo - 0x10000, hi - 0x10000
    ha, la = divmod(a, 0x400)
    hb, lb = divmod(b, 0x400)

    def pair(h1: int, h2: int, l1: int, l2: int) -> str:
        hs = _alt(_fixed_width_range(0xD800 + h1, 0xD800 + h2, 4))
        ls = _alt(_fixed_width_range(0xDC00 + l1, 0xDC00 + l2, 4))
        return 'u' + hs + '\\\\u' + ls

    if ha == hb:
        return [pair(ha, ha, la, lb)]
    if la != 0:
        out.append(pair(ha, ha, la, 0x3FF))
        ha += 1
    tail = []
    if lb != 0x3FF:
        tail.append(pair(hb, hb, 0, lb))
        hb -= 1
    if ha <= hb:
        out.append(pair(ha, hb, 0, 0x3FF))
    return out + tail


ANY_CHAR = encode_class(ANY)


@lru_cache(maxsize=8192)
def encode_string_literal(s: str) -> str:
    """Regex for the encoded content of exactly the decoded string `s` (every JSON spelling).
    Cached: a schema spells the same property names and enum values many times (and each
    character's regex once: :func:`encode_class` of one code point)."""
    out = []
    for c in s:
        r = _CHAR_REGEX.get(c, _UNSEEN)
        if r is _UNSEEN:
            r = _CHAR_REGEX[c] = encode_class(((ord(c), ord(c)),))
        if r is None:  # a lone surrogate has no spelling here: no JSON text decodes to `s`
            return _NOTHING
        out.append(r)
    return ''.join(out)


_NOTHING = '(?!)'
"""A regex matching no text (the spelling of a string that has none)."""


_CHAR_REGEX: dict[str, str | None] = {}
_UNSEEN = object()
