"""ECMA-262 `pattern` → Python regex over the JSON-encoded string content.

JSON Schema's `pattern` is an ECMA-262 regex that *searches* the decoded string. We parse it into a
small AST of character sets, sequences, alternations, repetitions, lookaheads and anchors, then emit a
Python regex in which every character set is replaced by all of its JSON encodings
(:func:`.charset.encode_class`). Because only the *language* matters (does some match exist?), lazy
vs greedy and capture groups are irrelevant; anything whose language we cannot reproduce exactly
(backreferences, lookbehinds, word boundaries, anchors in the middle of a branch) raises
:class:`PatternUnsupported`.

Positions in the emitted regex always fall on encoded-character boundaries and no encoding contains
a raw ``"``, so ``$`` becomes ``(?=\\x22)`` (the closing quote follows) exactly.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

from . import charset as cs
from .unicode_props import UnknownProperty, property_intervals


class PatternUnsupported(ValueError):
    """The ECMA pattern uses a construct that cannot be translated exactly."""


@dataclass(frozen=True)
class CSet:
    ivs: cs.Intervals


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    branches: tuple


@dataclass(frozen=True)
class Rep:
    node: object
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Look:
    node: object
    positive: bool


@dataclass(frozen=True)
class Anchor:
    kind: str  # "^" or "$"


Node = Union[CSet, Seq, Alt, Rep, Look, Anchor]

_CLASS_ESCAPES = {'d': cs.DIGIT, 'w': cs.WORD, 's': cs.SPACE}
# ECMA-262 (`u` flag) allows identity escapes only of syntax characters and '/'; we also accept the
# Annex B escapes of other ASCII punctuation (``\-``, ``\"``, ``\'``...), which every dialect reads
# as the character itself. An escaped letter or digit we do not know is refused, never guessed.
_SYNTAX_OR_PUNCT = frozenset('^$\\.*+?()[]{}|/-!"#%&\',:;<=>@_`~ ')
_CONTROL_ESCAPES = {'t': 9, 'n': 10, 'v': 11, 'f': 12, 'r': 13}


class _Parser:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0

    def error(self, msg: str) -> PatternUnsupported:
        return PatternUnsupported(f"{msg} at offset {self.i} in pattern {self.s!r}")

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def parse(self) -> Node:
        node = self.alternation()
        if self.i != len(self.s):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self.peek() == '|':
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def sequence(self) -> Node:
        items: list = []
        while self.peek() is not None and self.peek() not in '|)':
            atom = self.atom()
            atom = self.quantifiers(atom)
            items.append(atom)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def quantifiers(self, atom: Node) -> Node:
        while True:
            c = self.peek()
            if c in ('*', '+', '?'):
                self.i += 1
                lo, hi = {'*': (0, None), '+': (1, None), '?': (0, 1)}[c]
            elif c == '{':
                q = self._brace_quantifier()
                if q is None:
                    return atom
                lo, hi = q
            else:
                return atom
            if isinstance(atom, (Anchor, Look)):
                raise self.error("quantified assertion")
            if self.peek() == '?':  # lazy: same language
                self.i += 1
            if hi is not None and hi < lo:
                raise self.error("quantifier range out of order")
            atom = Rep(atom, lo, hi)

    def _brace_quantifier(self) -> tuple[int, int | None] | None:
        j = self.i + 1
        k = j
        while k < len(self.s) and self.s[k].isdigit():
            k += 1
        if k == j:
            return None  # Annex B: a literal '{'
        lo = int(self.s[j:k])
        hi: int | None = lo
        if k < len(self.s) and self.s[k] == ',':
            m = k + 1
            while m < len(self.s) and self.s[m].isdigit():
                m += 1
            hi = int(self.s[k + 1:m]) if m > k + 1 else None
            k = m
        if k < len(self.s) and self.s[k] == '}':
            self.i = k + 1
            return lo, hi
        return None

    def atom(self) -> Node:
        c = self.s[self.i]
        if c == '(':
            return self.group()
        if c == '[':
            return CSet(self.char_class())
        if c == '.':
            self.i += 1
            return CSet(cs.DOT)
        if c == '^':
            self.i += 1
            return Anchor('^')
        if c == '$':
            self.i += 1
            return Anchor('$')
        if c == '\\':
            return self.escape()
        if c in '*+?':
            raise self.error("nothing to repeat")
        if c == '{' and self._brace_quantifier() is not None:
            raise self.error("nothing to repeat")
        self.i += 1
        return CSet(((ord(c), ord(c)),))

    def group(self) -> Node:
        self.i += 1
        look = None
        if self.s.startswith('?:', self.i):
            self.i += 2
        elif self.s.startswith('?=', self.i):
            self.i += 2
            look = True
        elif self.s.startswith('?!', self.i):
            self.i += 2
            look = False
        elif self.s.startswith('?<=', self.i) or self.s.startswith('?<!', self.i):
            raise self.error("lookbehind")
        elif self.s.startswith('?<', self.i):
            end = self.s.find('>', self.i)
            if end < 0:
                raise self.error("bad group name")
            self.i = end + 1
        elif self.peek() == '?':
            raise self.error("unknown group syntax")
        node = self.alternation()
        if self.peek() != ')':
            raise self.error("missing ')'")
        self.i += 1
        if look is not None:
            return Look(node, look)
        return node

    def escape(self) -> Node:
        self.i += 1
        if self.i >= len(self.s):
            raise self.error("trailing backslash")
        c = self.s[self.i]
        self.i += 1
        if c in _CLASS_ESCAPES:
            return CSet(_CLASS_ESCAPES[c])
        if c.lower() in _CLASS_ESCAPES:
            return CSet(cs.complement(_CLASS_ESCAPES[c.lower()]))
        if c in 'pP':
            return CSet(self.property_escape(c))
        if c in 'bB':
            raise self.error("word boundary")
        if c.isdigit() and c != '0':
            raise self.error("backreference")
        if c == 'k' and self.peek() == '<':
            raise self.error("named backreference")
        self.i -= 1
        cp = self.char_escape()
        return CSet(((cp, cp),))

    def property_escape(self, c: str) -> cs.Intervals:
        """``\\p{…}`` / ``\\P{…}`` (self.i just after the letter)."""
        if self.peek() != '{':
            raise self.error(f"\\{c} without {{…}}")
        end = self.s.find('}', self.i)
        if end < 0:
            raise self.error(f"unterminated \\{c}{{")
        body = self.s[self.i + 1:end]
        try:
            ivs = cs.normalize(property_intervals(body))
        except UnknownProperty as e:
            raise self.error(str(e)) from None
        self.i = end + 1
        return cs.complement(ivs) if c == 'P' else ivs

    def char_escape(self) -> int:
        """An escape that denotes one character (self.i just after the backslash)."""
        c = self.s[self.i]
        self.i += 1
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c == '0' and not (self.peek() or '').isdigit():
            return 0
        if c == 'c' and self.peek() is not None and self.peek().isascii() and self.peek().isalpha():
            v = ord(self.s[self.i]) % 32
            self.i += 1
            return v
        if c == 'x':
            h = self.s[self.i:self.i + 2]
            if len(h) == 2 and all(ch in '0123456789abcdefABCDEF' for ch in h):
                self.i += 2
                return int(h, 16)
            raise self.error("\\x without two hex digits")
        if c == 'u':
            if self.peek() == '{':
                end = self.s.find('}', self.i)
                digits = self.s[self.i + 1:end] if end > 0 else ''
                if digits and all(ch in '0123456789abcdefABCDEF' for ch in digits) and int(digits, 16) <= cs.MAX_CP:
                    v = int(digits, 16)
                    self.i = end + 1
                    if 0xD800 <= v <= 0xDFFF:
                        raise self.error("lone surrogate")
                    return v
                raise self.error("malformed \\u{…}")
            h = self.s[self.i:self.i + 4]
            if len(h) == 4 and all(ch in '0123456789abcdefABCDEF' for ch in h):
                self.i += 4
                v = int(h, 16)
                if 0xD800 <= v <= 0xDBFF and self.s.startswith('\\u', self.i):
                    h2 = self.s[self.i + 2:self.i + 6]
                    if len(h2) == 4 and all(ch in '0123456789abcdefABCDEF' for ch in h2) \
                            and 0xDC00 <= int(h2, 16) <= 0xDFFF:
                        self.i += 6
                        return 0x10000 + ((v - 0xD800) << 10) + (int(h2, 16) - 0xDC00)
                if 0xD800 <= v <= 0xDFFF:
                    raise self.error("lone surrogate")
                return v
            raise self.error("\\u without four hex digits")
        if c.isdigit():
            raise self.error("octal escape")
        if c == 'c':
            raise self.error("\\c without a control letter")
        if c in _SYNTAX_OR_PUNCT:
            return ord(c)  # identity escape
        raise self.error(f"unsupported escape \\{c}")

    def char_class(self) -> cs.Intervals:
        self.i += 1
        negate = False
        if self.peek() == '^':
            negate = True
            self.i += 1
        ivs: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if c is None:
                raise self.error("unterminated character class")
            if c == ']':
                self.i += 1
                break
            lo_set = self.class_atom()
            if self.peek() == '-' and self.i + 1 < len(self.s) and self.s[self.i + 1] != ']':
                save = self.i
                self.i += 1
                hi_set = self.class_atom()
                if isinstance(lo_set, int) and isinstance(hi_set, int):
                    if hi_set < lo_set:
                        raise self.error("class range out of order")
                    ivs.append((lo_set, hi_set))
                    continue
                # Annex B: a class escape next to '-' makes '-' literal
                self.i = save
            if isinstance(lo_set, int):
                ivs.append((lo_set, lo_set))
            else:
                ivs.extend(lo_set)
        result = cs.normalize(ivs)
        return cs.complement(result) if negate else result

    def class_atom(self) -> int | cs.Intervals:
        c = self.s[self.i]
        if c != '\\':
            self.i += 1
            return ord(c)
        self.i += 1
        if self.i >= len(self.s):
            raise self.error("trailing backslash")
        e = self.s[self.i]
        if e in _CLASS_ESCAPES:
            self.i += 1
            return _CLASS_ESCAPES[e]
        if e.lower() in _CLASS_ESCAPES:
            self.i += 1
            return cs.complement(_CLASS_ESCAPES[e.lower()])
        if e in 'pP':
            self.i += 1
            return self.property_escape(e)
        if e == 'b':
            self.i += 1
            return 8
        if e == '-':
            self.i += 1
            return ord('-')
        return self.char_escape()


def parse(pattern: str) -> Node:
    """Parse an ECMA-262 pattern (no flags) into the AST.

    Memoized per pattern (the AST is immutable): the lowering reads the same pattern several
    times — its content regex, and its fixed prefix once per other pattern it is tested against
    for overlap — and a schema's dozens of patternProperties made that a quadratic number of
    parses. A refusal is remembered too and raised anew, with the same message, each time."""
    got = _parse_memo(pattern)
    if type(got) is _Refusal:
        raise PatternUnsupported(*got.args)
    return got


class _Refusal:
    """The arguments of the :class:`PatternUnsupported` a pattern's parse raised."""

    __slots__ = ("args",)

    def __init__(self, args: tuple) -> None:
        self.args = args


@lru_cache(maxsize=4096)
def _parse_memo(pattern: str) -> "Node | _Refusal":
    try:
        return _Parser(pattern).parse()
    except PatternUnsupported as e:
        return _Refusal(e.args)


# ---------------------------------------------------------------------------------------------
# Emission


def _strip_start(node: Node) -> tuple[Node | None, bool]:
    """Remove a leading ``^`` from every branch; (node, anchored). Mixed anchoring → unsupported."""
    if isinstance(node, Anchor) and node.kind == '^':
        return None, True
    if isinstance(node, Seq):
        if not node.items:
            return node, False
        head, anchored = _strip_start(node.items[0])
        if not anchored:
            return node, False
        rest = tuple(x for x in (head,) + node.items[1:] if x is not None)
        if not rest:
            return None, True
        return (rest[0] if len(rest) == 1 else Seq(rest)), True
    if isinstance(node, Alt):
        stripped = [_strip_start(b) for b in node.branches]
        flags = {a for _, a in stripped}
        if flags == {True}:
            branches = tuple(b if b is not None else Seq(()) for b, _ in stripped)
            return Alt(branches), True
        return node, False
    return node, False


def _emit(node: Node | None) -> str:
    if node is None:
        return ''
    if isinstance(node, CSet):
        r = cs.encode_class(node.ivs)
        return r if r is not None else '(?!)'
    if isinstance(node, Seq):
        return ''.join(_emit(x) for x in node.items)
    if isinstance(node, Alt):
        return '(?:' + '|'.join(_emit(b) for b in node.branches) + ')'
    if isinstance(node, Rep):
        inner = _emit(node.node)
        if inner == '':
            return ''
        q = {(0, None): '*', (1, None): '+', (0, 1): '?'}.get((node.lo, node.hi))
        if q is None:
            q = '{%d}' % node.lo if node.lo == node.hi else '{%d,%s}' % (node.lo, '' if node.hi is None else node.hi)
        return '(?:' + inner + ')' + q
    if isinstance(node, Look):
        return ('(?=' if node.positive else '(?!') + _emit(node.node) + ')'
    if isinstance(node, Anchor):
        if node.kind == '$':
            return '(?=\\x22)'
        raise PatternUnsupported("'^' that is not at the start of a branch")
    raise TypeError(node)


@lru_cache(maxsize=4096)
def content_regex(pattern: str) -> str:
    """Regex for the encoded content (between the quotes) of strings the pattern *searches* into.

    The result must be followed by the closing quote; it includes the implicit ``.*`` on either
    side unless the pattern is anchored. (Memoized: a pure function of the pattern.)
    """
    node = parse(pattern)
    branches = node.branches if isinstance(node, Alt) else (node,)
    any_units = '(?:' + cs.ANY_CHAR + ')*'
    alts = []
    for b in branches:
        body, anchored = _strip_start(b)
        prefix = '' if anchored else '(?:' + cs.ANY_CHAR + ')*?'
        alts.append(prefix + _emit(body) + any_units)
    return alts[0] if len(alts) == 1 else '(?:' + '|'.join(alts) + ')'


# ---------------------------------------------------------------------------------------------
# Testing a given string


def searches_into(pattern: str, text: str) -> bool:
    """Does the pattern *search* into `text`, exactly as ``content_regex(pattern)`` followed by the
    closing quote fullmatches ``json.dumps(text)[1:-1] + '"'``?

    The lowering asks this for every declared property name against every ``patternProperties``
    pattern. Compiling the content regex (every class spelled as all its JSON encodings, kilobytes
    per pattern) cost milliseconds per pattern in Python's ``re`` compiler, a sixth of the lowering
    of the large schemas; the same question is answered on the decoded string with a regex whose
    classes are plain code-point ranges. Equivalent because JSON's encoding of a string is one
    encoded character per code point and the content regex reads it back uniquely (a backslash
    only starts an escape, a ``\\u`` escape names one code point, an astral character is one
    surrogate-pair escape), with one exception it mirrors: a lone surrogate is not a character of
    the content regex, so a text holding one matches no pattern. Raises
    :class:`PatternUnsupported` where :func:`content_regex` does."""
    decoded = json_read_back(text)
    if has_lone_surrogate(decoded):
        _decoded_regex(pattern)  # (unsupported patterns raise all the same)
        return False
    return _decoded_regex(pattern).fullmatch(decoded) is not None


_LONE_SURROGATE = re.compile('[\ud800-\udfff]')


def json_read_back(text: str) -> str:
    """``json.loads(json.dumps(text))``: `text` itself unless it holds surrogate code points (JSON
    writes each as an escape, and reads a pair of them back as one character). The lowering asks
    this of every property name and enum string; encoding and decoding each was most of the cost
    of checking large enums."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return json.loads(json.dumps(text))


def has_lone_surrogate(decoded: str) -> bool:
    """Does `decoded` (a string as ``json.loads`` reads it back) hold a surrogate code point (one
    no pair absorbed)?"""
    return _LONE_SURROGATE.search(decoded) is not None


@lru_cache(maxsize=4096)
def _decoded_regex(pattern: str) -> "re.Pattern[str]":
    """:func:`content_regex` over decoded code points (see :func:`searches_into`)."""
    node = parse(pattern)
    branches = node.branches if isinstance(node, Alt) else (node,)
    alts = []
    for b in branches:
        body, anchored = _strip_start(b)
        alts.append(('' if anchored else '.*?') + _emit_decoded(body) + '.*')
    return re.compile(alts[0] if len(alts) == 1 else '(?:' + '|'.join(alts) + ')', re.DOTALL)


def _emit_decoded(node: Node | None) -> str:
    """:func:`_emit` with each class as its code points (surrogates are no characters there)."""
    if node is None:
        return ''
    if isinstance(node, CSet):
        ivs = cs.intersect(node.ivs, _NON_SURROGATES)
        if not ivs:
            return '(?!)'
        if len(ivs) == 1 and ivs[0][0] == ivs[0][1]:
            return '\\U%08x' % ivs[0][0]
        # the same set as a negated class where that is shorter (re compiles a class that spans
        # most of Unicode slowly)
        rest = cs.complement(ivs)
        if len(rest) < len(ivs):
            return '[^' + ''.join(_decoded_range(lo, hi) for lo, hi in rest) + ']'
        return '[' + ''.join(_decoded_range(lo, hi) for lo, hi in ivs) + ']'
    if isinstance(node, Seq):
        return ''.join(_emit_decoded(x) for x in node.items)
    if isinstance(node, Alt):
        return '(?:' + '|'.join(_emit_decoded(b) for b in node.branches) + ')'
    if isinstance(node, Rep):
        inner = _emit_decoded(node.node)
        if inner == '':
            return ''
        hi = '' if node.hi is None else node.hi
        return '(?:' + inner + ')' + ('{%d}' % node.lo if node.lo == node.hi else '{%d,%s}' % (node.lo, hi))
    if isinstance(node, Look):
        return ('(?=' if node.positive else '(?!') + _emit_decoded(node.node) + ')'
    if isinstance(node, Anchor):
        if node.kind == '$':
            return '\\Z'
        raise PatternUnsupported("'^' that is not at the start of a branch")
    raise TypeError(node)


_NON_SURROGATES: cs.Intervals = ((0, cs.SURR_LO - 1), (cs.SURR_HI + 1, cs.MAX_CP))


def _decoded_range(lo: int, hi: int) -> str:
    return '\\U%08x' % lo if lo == hi else '\\U%08x-\\U%08x' % (lo, hi)


def fixed_prefix(pattern: str) -> tuple[list[cs.Intervals], bool]:
    """What every string the pattern matches starts with: one character set per position, and whether
    the pattern matches only strings of exactly that length. Unanchored patterns start with anything
    (``([], False)``). Used to prove two patterns disjoint: some position has disjoint sets, or both
    are exact with different lengths."""
    node = parse(pattern)
    body, anchored = _strip_start(node) if not isinstance(node, Alt) else (node, False)
    if not anchored:
        return [], False
    items = body.items if isinstance(body, Seq) else (() if body is None else (body,))
    sets: list[cs.Intervals] = []
    for k, it in enumerate(items):
        if isinstance(it, CSet):
            sets.append(it.ivs)
        elif isinstance(it, Rep) and isinstance(it.node, CSet) and it.lo == it.hi and it.lo <= 64:
            sets += [it.node.ivs] * it.lo
        elif isinstance(it, Anchor) and it.kind == '$' and k == len(items) - 1:
            return sets, True
        else:
            return sets, False
    return sets, False


def provably_disjoint(a: str, b: str) -> bool:
    """No string matches both ECMA patterns (a sufficient test on their fixed prefixes)."""
    try:
        pa, ea = fixed_prefix(a)
        pb, eb = fixed_prefix(b)
    except PatternUnsupported:
        return False
    if ea and eb and len(pa) != len(pb):
        return True
    if (ea and len(pb) > len(pa)) or (eb and len(pa) > len(pb)):
        return True
    from glrmask.lexer.charsets import intersect
    return any(not intersect(x, y) for x, y in zip(pa, pb))
