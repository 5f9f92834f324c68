"""Code-point sets of single-character regex nodes, and their UTF-8 byte automata.

Why this module exists: the lexer works on bytes, but Python's ``re`` matches characters. Every
single-character node of a pattern (a literal, a class, ``.``, ``\\d``...) is turned into the exact
set of code points ``re`` would accept for it (under the node's flags), and that set into a small
deterministic byte automaton over its UTF-8 encodings. Surrogates (U+D800-DFFF) never occur in
valid UTF-8 and are excluded from every set.

Exactness strategy:
* ``\\d``, ``\\w``, ``\\s`` (Unicode) are read off ``re`` itself by scanning every code point once.
* IGNORECASE: only *cased* code points (whose lower/upper/title/casefold differ from themselves,
  anything those mappings produce, and ``re``'s extra case table) can be affected, so those few
  thousand are tested against the compiled ``re`` node; every other code point matches iff it is in
  the case-sensitive set. This reproduces ``re`` exactly (e.g. ``(?i:k)`` matches U+212A KELVIN
  SIGN, ``(?i:ß)`` does not match "ss").
"""
from __future__ import annotations

import bisect
import re
from functools import lru_cache
from re import _constants as C  # type: ignore[attr-defined]
from typing import Sequence

Intervals = tuple[tuple[int, int], ...]
"""A sorted tuple of disjoint, non-adjacent inclusive ranges ``(lo, hi)`` of code points."""

MAX_CP = 0x10FFFF
UNIVERSE: Intervals = ((0, 0xD7FF), (0xE000, MAX_CP))

FLAG_IGNORECASE = C.SRE_FLAG_IGNORECASE
FLAG_DOTALL = C.SRE_FLAG_DOTALL
FLAG_ASCII = C.SRE_FLAG_ASCII


def normalize(ranges: Sequence[tuple[int, int]]) -> Intervals:
    """Sort, merge overlapping/adjacent ranges, and clip to the valid (non-surrogate) universe."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return intersect(tuple((a, b) for a, b in out), UNIVERSE) if out else ()


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two normalized interval sets."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def complement(a: Intervals) -> Intervals:
    """Complement within the non-surrogate universe."""
    out = []
    prev = 0
    for lo, hi in a:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return intersect(tuple(out), UNIVERSE)


def union(*sets: Intervals) -> Intervals:
    return normalize([r for s in sets for r in s])


def subtract(a: Intervals, b: Intervals) -> Intervals:
    return intersect(a, complement(b))


def contains(a: Intervals, cp: int) -> bool:
    i = bisect.bisect_right(a, (cp, MAX_CP + 1)) - 1
    return i >= 0 and a[i][0] <= cp <= a[i][1]


def from_codepoints(cps) -> Intervals:
    return normalize([(c, c) for c in cps])


# ---------------------------------------------------------------------------------------------
# Unicode tables (computed once per process, from Python's own `re` / str methods)


@lru_cache(maxsize=None)
def _all_chars() -> str:
    return "".join(map(chr, range(MAX_CP + 1)))


def _runs_of(pattern: str, flags: int = 0) -> Intervals:
    """Code points matched by a single-character pattern, found by scanning every code point."""
    rx = re.compile(f"(?:{pattern})+", flags)
    return normalize([(m.start(), m.end() - 1) for m in rx.finditer(_all_chars())])


_CATEGORY_SRC = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}
_ASCII_POSITIVE = {
    C.CATEGORY_DIGIT: ((0x30, 0x39),),
    C.CATEGORY_SPACE: ((0x09, 0x0D), (0x20, 0x20)),
    C.CATEGORY_WORD: ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
}
_NEGATION = {
    C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT,
    C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
    C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
}


@lru_cache(maxsize=None)
def category_set(category, ascii_only: bool) -> Intervals:
    """Code points of ``\\d \\D \\s \\S \\w \\W`` as ``re`` defines them for str patterns."""
    if category in _NEGATION:
        return complement(category_set(_NEGATION[category], ascii_only))
    if category not in _CATEGORY_SRC:
        raise KeyError(category)
    if ascii_only:
        return _ASCII_POSITIVE[category]
    return _runs_of(_CATEGORY_SRC[category])


@lru_cache(maxsize=None)
def cased_codepoints() -> tuple[Intervals, str]:
    """Every code point that IGNORECASE could possibly affect, as intervals and as one string."""
    cps: set[int] = set()
    allc = _all_chars()
    for start in range(0, MAX_CP + 1, 256):
        block = allc[start : start + 256]
        if (
            block.lower() == block
            and block.upper() == block
            and block.casefold() == block
            and block.swapcase() == block
        ):
            continue  # no character of this block changes under any case mapping
        for cp in range(start, start + len(block)):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            ch = chr(cp)
            images = (ch.lower(), ch.upper(), ch.casefold(), ch.title(), ch.swapcase())
            if any(x != ch for x in images):
                cps.add(cp)
                for x in images:
                    if len(x) == 1:
                        cps.add(ord(x))
    from re import _casefix  # type: ignore[attr-defined]

    for k, vs in _casefix._EXTRA_CASES.items():
        cps.add(k)
        cps.update(vs)
    cps = {c for c in cps if not 0xD800 <= c <= 0xDFFF}
    return from_codepoints(cps), "".join(chr(c) for c in sorted(cps))


# ---------------------------------------------------------------------------------------------
# Single-character nodes of sre_parse -> code point sets


def _esc(cp: int) -> str:
    return "\\U%08x" % cp


def _node_source(op, av) -> str:
    """Regex source for one single-character sre_parse node (used to ask `re` about case folding)."""
    if op is C.LITERAL:
        return _esc(av)
    if op is C.NOT_LITERAL:
        return "[^" + _esc(av) + "]"
    if op is C.IN:
        parts = []
        for iop, iav in av:
            if iop is C.NEGATE:
                parts.insert(0, "^")
            elif iop is C.LITERAL:
                parts.append(_esc(iav))
            elif iop is C.RANGE:
                parts.append(_esc(iav[0]) + "-" + _esc(iav[1]))
            elif iop is C.CATEGORY:
                parts.append(_CATEGORY_SRC[iav])
            else:  # pragma: no cover - sre_parse emits nothing else inside a class
                raise ValueError(f"unexpected class item {iop}")
        return "[" + "".join(parts) + "]"
    raise ValueError(f"not a single-character node: {op}")  # pragma: no cover


def _raw_set(op, av, flags: int) -> Intervals:
    ascii_only = bool(flags & FLAG_ASCII)
    if op is C.LITERAL:
        return normalize([(av, av)])
    if op is C.NOT_LITERAL:
        return complement(normalize([(av, av)]))
    if op is C.ANY:
        return UNIVERSE if flags & FLAG_DOTALL else complement(((10, 10),))
    if op is C.IN:
        negate = False
        parts: list[Intervals] = []
        for iop, iav in av:
            if iop is C.NEGATE:
                negate = True
            elif iop is C.LITERAL:
                parts.append(normalize([(iav, iav)]))
            elif iop is C.RANGE:
                parts.append(normalize([iav]))
            elif iop is C.CATEGORY:
                parts.append(category_set(iav, ascii_only))
            else:  # pragma: no cover
                raise ValueError(f"unexpected class item {iop}")
        s = union(*parts)
        return complement(s) if negate else s
    raise ValueError(f"not a single-character node: {op}")  # pragma: no cover


def _freeze(av):
    if isinstance(av, list):
        return tuple(_freeze(x) for x in av)
    if isinstance(av, tuple):
        return tuple(_freeze(x) for x in av)
    return av


_NODE_CACHE: dict = {}


def _node_key(op, av, rel: int):
    """The cache key of a node: cheap for the common shapes (a literal's ``av`` is an int, a
    class's a list of ``(op, int | (lo, hi) | category)`` pairs, already hashable as a tuple),
    :func:`_freeze` for anything else."""
    if op is C.LITERAL or op is C.NOT_LITERAL or op is C.ANY:
        return (op, av, rel)
    if op is C.IN:
        key = (op, tuple(av), rel)
        try:
            hash(key)
            return key
        except TypeError:
            pass
    return (op, _freeze(av), rel)


def node_set(op, av, flags: int) -> Intervals:
    """The exact code points ``re`` accepts for a single-character node under ``flags``."""
    rel = flags & (FLAG_IGNORECASE | FLAG_DOTALL | FLAG_ASCII)
    key = _node_key(op, av, rel)
    hit = _NODE_CACHE.get(key)
    if hit is not None:
        return hit
    raw = _raw_set(op, av, rel)
    if rel & FLAG_IGNORECASE and op is not C.ANY:
        cased_iv, cased_str = cased_codepoints()
        rx_flags = re.IGNORECASE | (re.ASCII if rel & FLAG_ASCII else 0)
        rx = re.compile(_node_source(op, av), rx_flags)
        extra = from_codepoints(ord(ch) for ch in rx.findall(cased_str))
        raw = union(subtract(raw, cased_iv), extra)
    _NODE_CACHE[key] = raw
    return raw


# ---------------------------------------------------------------------------------------------
# UTF-8 byte automaton of a code point set

DEAD = -1
FINAL = -2


class ByteClass:
    """Deterministic automaton over the UTF-8 encodings of a code point set.

    State 0 is the start (before a character's first byte); ``step`` returns ``FINAL`` when a whole
    character of the set has been read, ``DEAD`` when no character of the set continues this way,
    or an intermediate state id. States are built lazily; each is ``(k, subset)``: ``k`` more
    continuation bytes to read and the set of 6k-bit suffix values still accepted.
    """

    __slots__ = ("cps", "_keys", "_ids", "_trans", "_cont_keys", "_signature", "_rows", "_edges")

    def __init__(self, cps: Intervals):
        self.cps = cps
        self._keys: list[tuple[int, Intervals]] = [(-1, cps)]
        self._ids: dict[tuple[int, Intervals], int] = {}
        self._trans: list[dict[int, int]] = [{}]
        self._cont_keys: tuple | None = None
        self._signature = None
        self._rows: dict[bool, tuple[int, ...]] = {}
        self._edges: tuple[int, ...] | None = None

    def ascii_edges(self) -> tuple[int, ...]:
        """The ASCII bytes where membership in the set changes, scanning up from byte 0 (the
        first byte of each ASCII run of the set, and the byte after it when that is still
        ASCII): the set's ASCII part as toggle points, from which
        :meth:`Program.byte_groups` finds the ASCII groups of many classes with a sweep over
        the points instead of a pass over 128 bytes per class. Cached."""
        edges = self._edges
        if edges is None:
            out: list[int] = []
            for lo, hi in self.cps:
                if lo >= 0x80:
                    break
                out.append(lo)
                if hi < 0x7F:
                    out.append(hi + 1)
            edges = self._edges = tuple(out)
        return edges

    def byte_signature(self):
        """``int64[256]``: equal entries for two bytes iff the class never tells them apart
        (:meth:`Program.byte_groups`): ASCII bytes by membership, continuation bytes by
        :meth:`continuation_keys`, other bytes by the state they lead to from the start — each
        kind in its own range of values. Cached (classes are shared process-wide)."""
        if self._signature is None:
            import numpy as np

            sig = np.zeros(256, dtype=np.int64)
            for lo, hi in self.cps:  # ASCII membership straight from the intervals
                if lo < 0x80:
                    sig[lo:min(hi, 0x7F) + 1] = 1
            if not self.cps or self.cps[-1][1] < 0x80:  # ASCII only: every other byte dies
                sig[0x80:0xC0] = 2
                sig[0xC0:] = 2 + 64 + 3 + DEAD
                sig.setflags(write=False)
                self._signature = sig
                return sig
            ids: dict = {}
            for i, k in enumerate(self.continuation_keys()):
                sig[0x80 + i] = 2 + ids.setdefault(k, len(ids))
            base = 2 + 64
            for b in range(0xC0, 0x100):
                sig[b] = base + 3 + self.step(0, b)  # DEAD -1, FINAL -2 or a state id >= 1
            sig.setflags(write=False)
            self._signature = sig
        return self._signature

    def signature_row(self, ascii_only: bool) -> tuple[int, ...]:
        """:meth:`byte_signature` as a tuple of ints (``ascii_only``: its 128 ASCII entries
        only, for a set of classes none of which holds a non-ASCII code point, where every
        other byte dies everywhere). Cached: byte groups are computed for every new set of
        classes, and reading a numpy row back into Python ints each time costs more than the
        grouping itself."""
        row = self._rows.get(ascii_only)
        if row is None:
            sig = self.byte_signature().tolist()
            row = self._rows[ascii_only] = tuple(sig[:0x80] if ascii_only else sig)
        return row

    def continuation_keys(self) -> tuple:
        """For each continuation byte ``0x80 + i``, a value equal for two such bytes iff the
        class steps them to the same result from every mid-character state it can reach (from
        the start state every continuation byte is DEAD): the exact test for "this class never
        tells the two bytes apart" (:meth:`Program.byte_groups`). Mid states are compared by
        their ``(bytes left, suffix set)`` keys, so the answer does not depend on the order in
        which states happen to have been interned."""
        if self._cont_keys is None:
            seen = {0}
            order = [0]
            i = 0
            lead, cont = range(0xC2, 0xF5), range(0x80, 0xC0)  # the only bytes that do not die
            while i < len(order):  # every reachable state (the automaton is acyclic and small)
                s = order[i]
                i += 1
                for b in (lead if s == 0 else cont):
                    r = self.step(s, b)
                    if r >= 0 and r not in seen:
                        seen.add(r)
                        order.append(r)
            mids = sorted(order[1:], key=lambda s: self._keys[s])

            def key(r: int):
                return r if r < 0 else self._keys[r]

            self._cont_keys = tuple(
                tuple(key(self.step(m, b)) for m in mids) for b in range(0x80, 0xC0))
        return self._cont_keys

    def _intern(self, k: int, sub: Intervals) -> int:
        key = (k, sub)
        sid = self._ids.get(key)
        if sid is None:
            sid = len(self._keys)
            self._ids[key] = sid
            self._keys.append(key)
            self._trans.append({})
        return sid

    def step(self, state: int, byte: int) -> int:
        memo = self._trans[state]
        r = memo.get(byte)
        if r is None:
            r = self._compute(state, byte)
            memo[byte] = r
        return r

    def _compute(self, state: int, b: int) -> int:
        k, cps = self._keys[state]
        if k == -1:
            if b < 0x80:
                return FINAL if contains(cps, b) else DEAD
            if 0xC2 <= b <= 0xDF:
                lo, hi, k2 = (b & 0x1F) << 6, ((b & 0x1F) << 6) | 0x3F, 1
            elif 0xE0 <= b <= 0xEF:
                lo = (b & 0x0F) << 12
                hi, k2 = lo | 0xFFF, 2
                lo = max(lo, 0x800)
            elif 0xF0 <= b <= 0xF4:
                lo = (b & 0x07) << 18
                hi, k2 = min(lo | 0x3FFFF, MAX_CP), 3
                lo = max(lo, 0x10000)
            else:
                return DEAD
            base = (b & (0x1F if k2 == 1 else 0x0F if k2 == 2 else 0x07)) << (6 * k2)
            sub = intersect(cps, ((lo, hi),))
            if not sub:
                return DEAD
            return self._intern(k2, tuple((a - base, z - base) for a, z in sub))
        if not 0x80 <= b <= 0xBF:
            return DEAD
        span = 1 << (6 * (k - 1))
        lo = (b & 0x3F) * span
        sub = intersect(cps, ((lo, lo + span - 1),))
        if not sub:
            return DEAD
        if k == 1:
            return FINAL
        return self._intern(k - 1, tuple((a - lo, z - lo) for a, z in sub))

    def first_bytes(self) -> list[int]:
        """Bytes on which the start state does not die (used by tests and analyses)."""
        return [b for b in range(256) if self.step(0, b) != DEAD]


_BYTECLASS_CACHE: dict[Intervals, ByteClass] = {}


def byte_class(cps: Intervals) -> ByteClass:
    """Shared (process-wide) automaton for a code point set."""
    bc = _BYTECLASS_CACHE.get(cps)
    if bc is None:
        bc = _BYTECLASS_CACHE[cps] = ByteClass(cps)
    return bc


_NODE_CLASS_CACHE: dict = {}


def node_class(op, av, flags: int) -> ByteClass:
    """``byte_class(node_set(op, av, flags))`` in one lookup: a compile asks it of every
    single-character node, and most nodes (literals above all) recur across patterns."""
    rel = flags & _NODE_FLAGS
    if op is _IN:  # the common shape inline (a compile asks once per class node it meets)
        key = (op, tuple(av), rel)
        try:
            bc = _NODE_CLASS_CACHE.get(key)
        except TypeError:  # an item that is not hashable as it stands: _node_key freezes it
            key = _node_key(op, av, rel)
            bc = _NODE_CLASS_CACHE.get(key)
    else:
        key = _node_key(op, av, rel)
        bc = _NODE_CLASS_CACHE.get(key)
    if bc is None:
        bc = _NODE_CLASS_CACHE[key] = byte_class(node_set(op, av, flags))
    return bc


_NODE_FLAGS = FLAG_IGNORECASE | FLAG_DOTALL | FLAG_ASCII
_IN = C.IN
