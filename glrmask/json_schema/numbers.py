"""Exact regexes for JSON numbers under `minimum`/`maximum`/exclusive bounds and `multipleOf`.

Integer ranges are split by digit count and then by common prefix (the classic range-to-regex
construction), so the regex matches exactly the canonical decimal spellings in range. Bounded
*numbers* compare integer part and fraction digit-wise; the two one-sided conditions are intersected
with a lookahead. Every number regex ends with a guard ``(?![0-9.eE+-])`` so that ``re.match`` can
never stop inside a longer number (``12`` is never ``1`` then ``2``).

Deviations (documented in the support matrix): bounded or `multipleOf`-constrained numbers are
written without an exponent; integers are written without a fraction (``1.0`` is rejected).
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import lru_cache
from fractions import Fraction

GUARD = '(?![0-9.eE+\\-])'
UINT = '(?:0|[1-9][0-9]*)'
FRAC = '(?:\\.[0-9]+)'
EXP = '(?:[eE][+\\-]?[0-9]+)'
INTEGER = '\\-?' + UINT + GUARD
NUMBER = '\\-?' + UINT + FRAC + '?' + EXP + '?' + GUARD

MAX_DIGITS = 400


class NumberTooComplex(ValueError):
    """Bounds too large to spell as a regex within budget."""


def _digit_class(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if lo == 0 and hi == 9:
        return '[0-9]'
    return '[%d-%d]' % (lo, hi)


def _same_len(lo: str, hi: str) -> list[str]:
    """Alternatives for digit strings of len(lo) with lo <= value <= hi (lexicographic = numeric)."""
    if not lo:
        return ['']
    n = len(lo) - 1
    if lo[0] == hi[0]:
        return [lo[0] + s for s in _same_len(lo[1:], hi[1:])]
    out = []
    start, end = int(lo[0]), int(hi[0])
    if lo[1:] != '0' * n:
        out += [lo[0] + s for s in _same_len(lo[1:], '9' * n)]
        start += 1
    tail = []
    if hi[1:] != '9' * n:
        tail = [hi[0] + s for s in _same_len('0' * n, hi[1:])]
        end -= 1
    if start <= end:
        rest = '' if n == 0 else ('[0-9]' if n == 1 else '[0-9]{%d}' % n)
        out.append(_digit_class(start, end) + rest)
    return out + tail


def uint_range_alts(lo: int, hi: int | None) -> list[str]:
    """Alternatives for canonical unsigned integers in [lo, hi] (hi None = unbounded); lo >= 0."""
    if hi is not None and hi < lo:
        return []
    if len(str(lo)) > MAX_DIGITS or (hi is not None and len(str(hi)) > MAX_DIGITS):
        raise NumberTooComplex("integer bound with more than %d digits" % MAX_DIGITS)
    out: list[str] = []
    lo_len = len(str(lo))
    top_len = len(str(hi)) if hi is not None else lo_len
    for L in range(lo_len, top_len + 1):
        a = max(lo, 10 ** (L - 1) if L > 1 else 0)
        b = 10 ** L - 1 if hi is None else min(hi, 10 ** L - 1)
        if a <= b:
            out += _same_len(str(a).zfill(L), str(b).zfill(L))
    if hi is None:
        out.append('[1-9][0-9]{%d,}' % lo_len)
    return out


def _alt(parts: list[str]) -> str:
    if not parts:
        return '(?!)'
    return parts[0] if len(parts) == 1 else '(?:' + '|'.join(parts) + ')'


@lru_cache(maxsize=4096, typed=True)
def int_range_regex(lo: int | None, hi: int | None) -> str | None:
    """Regex (with guard) for JSON integers n with lo <= n <= hi; None when the range is empty.
    (Memoized: every ``integer`` of every schema asks for a range, most often the same few.)"""
    if lo is not None and hi is not None and lo > hi:
        return None
    alts: list[str] = []
    # non-negative part
    if hi is None or hi >= 0:
        alts += uint_range_alts(max(lo, 0) if lo is not None else 0, hi)
    # negative part: -m with m in [max(1,-hi), -lo]
    if lo is None or lo < 0:
        m_lo = max(1, -hi) if hi is not None else 1
        m_hi = -lo if lo is not None else None
        neg = uint_range_alts(m_lo, m_hi)
        if neg:
            alts.append('\\-' + _alt(neg))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        alts.append('\\-0')
    if not alts:
        return None
    return _alt(alts) + GUARD


# ------------------------------------------------------------------ bounded decimals (no exponent)


def _split(d: Decimal) -> tuple[int, str]:
    """|d| as (integer part, fraction digits without trailing zeros)."""
    d = abs(d)
    s = format(d, 'f')
    if '.' in s:
        ip, fp = s.split('.')
        fp = fp.rstrip('0')
    else:
        ip, fp = s, ''
    return int(ip), fp


def _frac_cmp(d: str, op: str) -> str:
    """Regex for an optional fraction part ``(\\.F)?`` whose zero-padded digits compare `op` d."""
    alts = []
    n = len(d)
    if op in ('>=', '>'):
        for j in range(n):
            if d[j] != '9':
                alts.append('\\.' + d[:j] + _digit_class(int(d[j]) + 1, 9) + '[0-9]*')
        if op == '>=':
            if n == 0:
                return '(?:\\.[0-9]+)?'
            alts.append('\\.' + d + '[0-9]*')
        else:
            alts.append('\\.' + d + '0*[1-9][0-9]*')
        return _alt(alts)
    # <= or <
    for j in range(n):
        if d[j] != '0':
            alts.append('\\.' + d[:j] + _digit_class(0, int(d[j]) - 1) + '[0-9]*')
    for j in range(1, n):
        alts.append('\\.' + d[:j] + '0*')
    if op == '<=':
        alts.append('\\.' + d + '0*' if n else '\\.0+')
        return '(?:' + _alt(alts) + ')?'
    if n == 0:
        return '(?!)'
    return '(?:' + _alt(alts) + ')?' if alts else ''


def _abs_ge(a: Decimal, strict: bool) -> str:
    ai, af = _split(a)
    alts = []
    higher = uint_range_alts(ai + 1, None)
    alts.append(_alt(higher) + FRAC + '?')
    eq = _frac_cmp(af, '>' if strict else '>=')
    if eq != '(?!)':
        alts.append(str(ai) + eq)
    return _alt(alts)


def _abs_le(b: Decimal, strict: bool) -> str:
    bi, bf = _split(b)
    alts = []
    if bi > 0:
        alts.append(_alt(uint_range_alts(0, bi - 1)) + FRAC + '?')
    eq = _frac_cmp(bf, '<' if strict else '<=')
    if eq != '(?!)':
        alts.append(str(bi) + eq)
    return _alt(alts) if alts else '(?!)'


UNUMBER = UINT + FRAC + '?'


def _ge(a: Decimal, strict: bool) -> str:
    if a > 0 or (a == 0 and strict):
        return _abs_ge(a, strict)
    # a <= 0: any non-negative, or negative with |x| <= |a| (< when strict)
    return '(?:' + UNUMBER + '|\\-' + _abs_le(-a, strict) + ')'


def _le(b: Decimal, strict: bool) -> str:
    if b < 0 or (b == 0 and strict):
        return '\\-' + _abs_ge(-b, strict)
    return '(?:\\-' + UNUMBER + '|' + _abs_le(b, strict) + ')'


def to_decimal(x: object) -> Decimal:
    try:
        return Decimal(str(x)) if not isinstance(x, Decimal) else x
    except InvalidOperation as e:  # pragma: no cover - schema validated before
        raise NumberTooComplex(f"bad numeric bound {x!r}") from e


def number_range_regex(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool,
                       frac_digits: int | None = None) -> str | None:
    """Regex for JSON numbers (no exponent) within the bounds; optional max fraction digits."""
    for v in (lo, hi):
        if v is not None and (abs(v.adjusted()) > MAX_DIGITS):
            raise NumberTooComplex("numeric bound too large")
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_strict or hi_strict))):
        return None
    parts = []
    if lo is not None:
        parts.append('(?=' + _ge(lo, lo_strict) + GUARD + ')')
    if hi is not None:
        parts.append('(?=' + _le(hi, hi_strict) + GUARD + ')')
    if frac_digits is None:
        body = '\\-?' + UNUMBER
    elif frac_digits == 0:
        body = '\\-?' + UINT + '(?:\\.0+)?'
    else:
        body = '\\-?' + UINT + '(?:\\.[0-9]{1,%d}0*)?' % frac_digits
    return ''.join(parts) + body + GUARD


def decimal_places_of_power_of_ten(m: Decimal) -> int | None:
    """k if m == 10**-k (k >= 0), else None."""
    f = Fraction(m)
    if f <= 0:
        return None
    k = 0
    while f < 1:
        f *= 10
        k += 1
    return k if f == 1 else None


def int_multiple_regex(k: int, lo: int | None, hi: int | None, budget: int) -> str | None:
    """Integers that are multiples of k within [lo, hi]: regular spellings for 10**j, 2, 5, 25,
    or an explicit list when the range is small. Raises NumberTooComplex otherwise."""
    k = abs(k)
    if k == 1:
        return int_range_regex(lo, hi)
    base = int_range_regex(lo, hi)
    if base is None:
        return None
    s = str(k)
    suffix = None
    if s == '1' + '0' * (len(s) - 1):
        suffix = '(?:0|[1-9][0-9]*' + '0' * (len(s) - 1) + ')'
    elif k == 2:
        suffix = '(?:[0-9]*[02468])'
    elif k == 5:
        suffix = '(?:[0-9]*[05])'
    elif k == 25:
        suffix = '(?:0|[0-9]*(?:00|25|50|75))'
    if suffix is not None:
        return '(?=\\-?' + suffix + GUARD + ')' + base
    if lo is not None and hi is not None:
        first = -(-lo // k) * k
        count = (hi - first) // k + 1 if hi >= first else 0
        if count == 0:
            return None
        if count <= budget:
            vals = [str(v) for v in range(first, hi + 1, k)]
            if first <= 0 <= hi:
                vals.append('-0')
            return '(?:' + '|'.join(v.replace('-', '\\-') for v in sorted(vals, key=len, reverse=True)) + ')' + GUARD
    raise NumberTooComplex(f"multipleOf {k} over an unbounded or large range")
