"""Single-character nodes compile to exactly the code points `re` accepts, and their UTF-8
automata accept exactly those characters' encodings."""
from __future__ import annotations

import re
from re import _parser as sre_parse

import pytest
from hypothesis import given, settings, strategies as st

from glrmask.lexer import charsets

CLASS_SOURCES = [
    r"k", r"(?i)k", r"(?i)s", r"(?i)ß", r"(?i)ǅ", r"(?i)[^k]", r"(?i)[a-z]", r"(?ai)[a-z]",
    r"(?ai)k", r"\w", r"(?a)\w", r"\d", r"\s", r"(?i)[^\W\d]", r"[^\s]", r".", r"(?s).",
    r"(?i)[é-ǅ]", r"(?i)\S", r"[^\x00-\x7f]", r"(?i)İ", r"(?i)i", r"(?i)σ",
]


def _node(src: str):
    parsed = sre_parse.parse(src)
    ((op, av),) = parsed.data
    return op, av, parsed.state.flags


def _brute(src: str) -> charsets.Intervals:
    rx = re.compile(src)
    return charsets.normalize(
        [(cp, cp) for cp in range(charsets.MAX_CP + 1)
         if not 0xD800 <= cp <= 0xDFFF and rx.fullmatch(chr(cp))]
    )


@pytest.mark.parametrize("src", CLASS_SOURCES)
def test_node_set_equals_re_on_every_code_point(src):
    op, av, flags = _node(src)
    assert charsets.node_set(op, av, flags) == _brute_fast(src)


def _brute_fast(src: str) -> charsets.Intervals:
    """Every code point tested with `re` (one scan of a string holding all of them)."""
    return charsets._runs_of(f"(?:{src})") if not src.startswith("(?") else _flagged_runs(src)


def _flagged_runs(src: str) -> charsets.Intervals:
    end = src.index(")")
    flags_txt, body = src[2:end], src[end + 1:]
    return charsets._runs_of(f"(?{flags_txt}:{body})")


def test_brute_helper_agrees_with_per_code_point_fullmatch_on_a_sample():
    assert _brute_fast(r"(?i)k") == _brute(r"(?i)k")


def test_kelvin_sign_is_in_ignorecase_k():
    op, av, flags = _node(r"(?i)k")
    assert charsets.contains(charsets.node_set(op, av, flags), 0x212A)


def test_surrogates_are_never_in_a_set():
    op, av, flags = _node(r"[^a]")
    s = charsets.node_set(op, av, flags)
    assert not any(charsets.contains(s, cp) for cp in (0xD800, 0xDBFF, 0xDFFF))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 300)), min_size=1, max_size=4),
       st.integers(0, 0x10FFFF))
def test_byte_class_accepts_exactly_the_utf8_of_its_members(ranges, probe):
    cps = charsets.normalize([(lo, min(lo + w, charsets.MAX_CP)) for lo, w in ranges])
    bc = charsets.ByteClass(cps)
    samples = [probe] + [lo for lo, _ in cps] + [hi for _, hi in cps] + [hi + 1 for _, hi in cps]
    for cp in samples:
        if cp > charsets.MAX_CP or 0xD800 <= cp <= 0xDFFF:
            continue
        state = 0
        enc = chr(cp).encode()
        for i, b in enumerate(enc):
            state = bc.step(state, b)
            if state in (charsets.DEAD, charsets.FINAL):
                break
        accepted = state == charsets.FINAL and i == len(enc) - 1
        assert accepted == charsets.contains(cps, cp), hex(cp)


def test_byte_class_rejects_overlong_encodings():
    bc = charsets.ByteClass(charsets.UNIVERSE)
    assert bc.step(0, 0xC0) == charsets.DEAD and bc.step(0, 0xC1) == charsets.DEAD
    s = bc.step(0, 0xE0)
    assert bc.step(s, 0x80) == charsets.DEAD  # E0 80..9F would encode < U+0800
    s = bc.step(0, 0xF0)
    assert bc.step(s, 0x80) == charsets.DEAD  # F0 80..8F would encode < U+10000
