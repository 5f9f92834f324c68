"""The JSON Schema grammar IR printed as ASCII Lark text.

:meth:`Grammar.to_lark` writes characters outside ASCII as they are; the lowering's patterns hold
lone surrogates (each half of an escaped astral character in a JSON string is matched on its own)
and characters of every script, which would make the text unprintable to an ASCII terminal and
unwritable as UTF-8. Lark evaluates ``\\uHHHH``/``\\UHHHHHHHH`` inside its regex literals, so
writing each such character as its escape reads back as exactly the same pattern.
"""
from __future__ import annotations

import re

from ..grammar.ir import Grammar

__all__ = ['grammar_to_ascii_lark']

# a non-ASCII character with the run of backslashes before it: an even run is pairs of escaped
# backslashes; an odd run ends in a backslash that escapes the character itself
_NON_ASCII = re.compile(r'(?<!\\)((?:\\\\)*)(\\?)([^\x00-\x7f])')


def _escape(m: re.Match[str]) -> str:
    cp = ord(m.group(3))
    # ``\é`` and ``é`` mean the same character to ``re``, and lark's ``\\uHHHH`` is the character
    return m.group(1) + ('\\u%04x' % cp if cp <= 0xFFFF else '\\U%08x' % cp)


def grammar_to_ascii_lark(grammar: Grammar) -> str:
    """`grammar` as Lark text using only ASCII; lark reads it back as `grammar` (for the lowering's
    IR, pattern for pattern; in general, patterns that ``re`` reads alike)."""
    return _NON_ASCII.sub(_escape, grammar.to_lark())
