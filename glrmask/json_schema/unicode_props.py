"""Unicode property escapes of ECMA-262 patterns (``\\p{…}`` / ``\\P{…}``, `u` flag) as code-point sets.

General categories come from :mod:`unicodedata` (the Unicode version of the running Python, e.g.
14.0 for Python 3.11), by every spelling ECMA-262 accepts: ``\\p{Lu}``, ``\\p{Uppercase_Letter}``,
``\\p{gc=Lu}``, ``\\p{General_Category=Uppercase_Letter}``, and the groups ``L``, ``LC``, ``M``,
``N``, ``P``, ``S``, ``Z``, ``C``; also the binary properties ``Any``, ``ASCII`` and ``Assigned``.
Anything else (scripts, other binary properties) is :class:`UnknownProperty`: unicodedata has no
script data, and a property we cannot spell exactly must be refused, never approximated.
"""
from __future__ import annotations

import sys
import unicodedata
from functools import lru_cache

Intervals = tuple[tuple[int, int], ...]


class UnknownProperty(ValueError):
    """A property name or value this module cannot turn into an exact code-point set."""


CATEGORY_NAMES = {
    'Cased_Letter': 'LC', 'Close_Punctuation': 'Pe', 'Connector_Punctuation': 'Pc', 'Control': 'Cc',
    'cntrl': 'Cc', 'Currency_Symbol': 'Sc', 'Dash_Punctuation': 'Pd', 'Decimal_Number': 'Nd', 'digit': 'Nd',
    'Enclosing_Mark': 'Me', 'Final_Punctuation': 'Pf', 'Format': 'Cf', 'Initial_Punctuation': 'Pi',
    'Letter': 'L', 'Letter_Number': 'Nl', 'Line_Separator': 'Zl', 'Lowercase_Letter': 'Ll', 'Mark': 'M',
    'Combining_Mark': 'M', 'Math_Symbol': 'Sm', 'Modifier_Letter': 'Lm', 'Modifier_Symbol': 'Sk',
    'Nonspacing_Mark': 'Mn', 'Number': 'N', 'Open_Punctuation': 'Ps', 'Other': 'C', 'Other_Letter': 'Lo',
    'Other_Number': 'No', 'Other_Punctuation': 'Po', 'Other_Symbol': 'So', 'Paragraph_Separator': 'Zp',
    'Private_Use': 'Co', 'Punctuation': 'P', 'punct': 'P', 'Separator': 'Z', 'Space_Separator': 'Zs',
    'Spacing_Mark': 'Mc', 'Surrogate': 'Cs', 'Symbol': 'S', 'Titlecase_Letter': 'Lt', 'Unassigned': 'Cn',
    'Uppercase_Letter': 'Lu',
}
GROUPS = {'L': ('Lu', 'Ll', 'Lt', 'Lm', 'Lo'), 'LC': ('Lu', 'Ll', 'Lt'), 'M': ('Mn', 'Mc', 'Me'),
          'N': ('Nd', 'Nl', 'No'), 'P': ('Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po'), 'S': ('Sm', 'Sc', 'Sk', 'So'),
          'Z': ('Zs', 'Zl', 'Zp'), 'C': ('Cc', 'Cf', 'Cs', 'Co', 'Cn')}


@lru_cache(maxsize=1)
def _category_table() -> dict[str, Intervals]:
    """Every two-letter general category as intervals (one pass over the code space, cached)."""
    runs: dict[str, list[tuple[int, int]]] = {}
    prev, start = None, 0
    cat = unicodedata.category
    for cp in range(sys.maxunicode + 1):
        c = cat(chr(cp))
        if c != prev:
            if prev is not None:
                runs.setdefault(prev, []).append((start, cp - 1))
            prev, start = c, cp
    runs.setdefault(prev, []).append((start, sys.maxunicode))
    return {k: tuple(v) for k, v in runs.items()}


def _category(value: str) -> Intervals:
    short = CATEGORY_NAMES.get(value, value)
    table = _category_table()
    if short in GROUPS:
        return tuple(sorted(iv for c in GROUPS[short] for iv in table.get(c, ())))
    if len(short) == 2 and short in {c for cs in GROUPS.values() for c in cs}:
        return table.get(short, ())
    raise UnknownProperty(f"unknown general category {value!r}")


def property_intervals(body: str) -> Intervals:
    """Code points of ``\\p{body}`` (sorted, possibly adjacent intervals)."""
    if '=' in body:
        name, value = body.split('=', 1)
        if name in ('General_Category', 'gc'):
            return _category(value)
        if name in ('Script', 'sc', 'Script_Extensions', 'scx'):
            raise UnknownProperty(f"Unicode script property \\p{{{body}}} is not supported "
                                  "(no script data in unicodedata)")
        raise UnknownProperty(f"unknown Unicode property {name!r}")
    if body == 'Any':
        return ((0, sys.maxunicode),)
    if body == 'ASCII':
        return ((0, 0x7F),)
    if body == 'Assigned':
        unassigned = _category('Cn')
        out, prev = [], 0
        for lo, hi in unassigned:
            if lo > prev:
                out.append((prev, lo - 1))
            prev = hi + 1
        if prev <= sys.maxunicode:
            out.append((prev, sys.maxunicode))
        return tuple(out)
    try:
        return _category(body)
    except UnknownProperty:
        raise UnknownProperty(f"Unicode property \\p{{{body}}} is not supported "
                              "(general categories, Any, ASCII and Assigned are)") from None
