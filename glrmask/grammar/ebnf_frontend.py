"""llama.cpp GBNF (``root ::= ...``) → grammar IR.

GBNF is scannerless: it describes characters, not tokens, and has no ``%ignore``. To keep its
language exact under our lexing semantics (DESIGN §2/§4.1) every string literal and every character
class becomes its own terminal — a literal matches exactly its text and a class exactly one
character, so no terminal can swallow text that the grammar assigns elsewhere. Identical literals
and classes share one terminal.

Repetition becomes BNF: ``X*`` and ``X+`` left-recursive rules (cheap for LR), ``X?`` an ε
alternative, and ``X{m,n}`` ``m`` copies of ``X`` followed by a chain ``O_k → ε | X O_{k-1}`` of
``n-m`` optional copies — linear in ``n`` and unambiguous (nesting optionals ``(X (X)?)?`` would be
as well, but sharing ``O_k`` between uses keeps the grammar small).

Accepted syntax (a superset of llama.cpp's): rules ``name ::= body`` where a body runs until the
next ``name ::=`` (so rules may span lines freely); names of letters, digits, ``-`` and ``_``;
``"..."`` literals with escapes ``\\n \\r \\t \\\\ \\" \\' \\[ \\] \\- \\^ \\xNN \\uNNNN
\\UNNNNNNNN``; classes ``[a-z_]``/``[^...]``; ``.`` (any character, newline included); groups;
``|``; postfix ``* + ? {m} {m,} {m,n}``; ``#`` comments.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Union

from glrmask.budget import current_budget
from glrmask.errors import GrammarError
from glrmask.grammar.ir import Grammar, Rule, TerminalDef

__all__ = ["grammar_from_gbnf", "grammar_from_ebnf"]


# ------------------------------------------------------------------------------------------------
# AST

@dataclass(frozen=True)
class _Lit:
    text: str


@dataclass(frozen=True)
class _Class:
    pattern: str


@dataclass(frozen=True)
class _Ref:
    name: str
    pos: int


@dataclass(frozen=True)
class _Alt:
    seqs: tuple[tuple["_Node", ...], ...]


@dataclass(frozen=True)
class _Rep:
    node: "_Node"
    lo: int
    hi: int | None  # None = unbounded


_Node = Union[_Lit, _Class, _Ref, _Alt, _Rep]

_NAME_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_RULE_HEAD = re.compile(r"[A-Za-z0-9_-]+[ \t]*::=")
_SIMPLE_ESCAPES = {
    "n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'",
    "[": "[", "]": "]", "-": "-", "^": "^",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_ANY_CHAR = "(?s:.)"
# Upper bound on the size of an expanded {m,n}: repetition counts beyond this are almost surely a
# typo and would produce a huge grammar.
MAX_REPEAT = 100_000


# ------------------------------------------------------------------------------------------------
# Parser

class _Parser:
    def __init__(self, text: str, source_name: str) -> None:
        self.text = text
        self.pos = 0
        self.source_name = source_name

    def error(self, msg: str, pos: int | None = None) -> GrammarError:
        return GrammarError(f"{self.source_name}:{_line_col(self.text, self.pos if pos is None else pos)}: {msg}")

    # -- lexical helpers --
    def skip_space(self) -> None:
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                nl = t.find("\n", self.pos)
                self.pos = len(t) if nl < 0 else nl + 1
            else:
                break

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def at_rule_head(self) -> bool:
        return _RULE_HEAD.match(self.text, self.pos) is not None

    # -- grammar --
    def parse(self) -> list[tuple[str, int, _Node]]:
        rules: list[tuple[str, int, _Node]] = []
        while True:
            self.skip_space()
            if self.pos >= len(self.text):
                return rules
            m = _NAME_CHARS.match(self.text, self.pos)
            if not m:
                raise self.error(f"expected a rule name, found {self.peek()!r}")
            name_pos = self.pos
            self.pos = m.end()
            while self.peek() in (" ", "\t"):
                self.pos += 1
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name {m.group()!r}")
            self.pos += 3
            body = self.parse_alternatives(nested=False)
            if self.peek() == ")":
                raise self.error("unbalanced ')'")
            rules.append((m.group(), name_pos, body))

    def parse_alternatives(self, *, nested: bool) -> _Node:
        seqs = [self.parse_sequence(nested=nested)]
        while self.peek() == "|":
            self.pos += 1
            seqs.append(self.parse_sequence(nested=nested))
        return _Alt(tuple(seqs))

    def parse_sequence(self, *, nested: bool) -> tuple[_Node, ...]:
        items: list[_Node] = []
        while True:
            self.skip_space()
            c = self.peek()
            if c in ("", "|", ")"):
                break
            if self.at_rule_head():
                if nested:
                    raise self.error("expected ')' before the next rule")
                break
            item = self.parse_primary()
            items.append(self.parse_postfix(item))
        return tuple(items)

    def parse_primary(self) -> _Node:
        c = self.peek()
        start = self.pos
        if c == '"':
            return _Lit(self.parse_string())
        if c == "[":
            return _Class(self.parse_class())
        if c == ".":
            self.pos += 1
            return _Class(_ANY_CHAR)
        if c == "(":
            self.pos += 1
            node = self.parse_alternatives(nested=True)
            self.skip_space()
            if self.peek() != ")":
                raise self.error("expected ')' to close the group opened", start)
            self.pos += 1
            return node
        m = _NAME_CHARS.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return _Ref(m.group(), start)
        raise self.error(f"unexpected character {c!r}")

    def parse_postfix(self, item: _Node) -> _Node:
        while True:
            save = self.pos
            while self.peek() in (" ", "\t"):
                self.pos += 1
            c = self.peek()
            if c == "*":
                item, self.pos = _Rep(item, 0, None), self.pos + 1
            elif c == "+":
                item, self.pos = _Rep(item, 1, None), self.pos + 1
            elif c == "?":
                item, self.pos = _Rep(item, 0, 1), self.pos + 1
            elif c == "{":
                item = self.parse_braces(item)
            else:
                self.pos = save
                return item

    def parse_braces(self, item: _Node) -> _Node:
        start = self.pos
        m = re.compile(r"\{[ \t]*(\d+)[ \t]*(?:(,)[ \t]*(\d*)[ \t]*)?\}").match(self.text, self.pos)
        if not m:
            raise self.error("malformed repetition; expected {m}, {m,} or {m,n}", start)
        lo = int(m.group(1))
        hi = lo if not m.group(2) else (int(m.group(3)) if m.group(3) else None)
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has max < min", start)
        if max(lo, hi or 0) > MAX_REPEAT:
            raise self.error(f"repetition count above {MAX_REPEAT}", start)
        self.pos = m.end()
        return _Rep(item, lo, hi)

    def parse_char(self, *, closing: str) -> str:
        """One (possibly escaped) character inside a literal or class."""
        t = self.text
        c = self.peek()
        if c == "":
            what = "string" if closing == '"' else "character class"
            raise self.error(f"unterminated {what}")
        if c == "\n" and closing == '"':
            raise self.error("unterminated string (newline inside a literal)")
        if c != "\\":
            self.pos += 1
            return c
        esc_pos = self.pos
        e = t[self.pos + 1] if self.pos + 1 < len(t) else ""
        if e in _SIMPLE_ESCAPES:
            self.pos += 2
            return _SIMPLE_ESCAPES[e]
        if e in _HEX_ESCAPES:
            k = _HEX_ESCAPES[e]
            digits = t[self.pos + 2:self.pos + 2 + k]
            if not re.fullmatch(f"[0-9a-fA-F]{{{k}}}", digits):
                raise self.error(f"escape \\{e} needs {k} hex digits", esc_pos)
            cp = int(digits, 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise self.error(f"escape \\{e}{digits} is not a valid code point", esc_pos)
            self.pos += 2 + k
            return chr(cp)
        raise self.error(f"unknown escape sequence \\{e}", esc_pos)

    def parse_string(self) -> str:
        self.pos += 1  # opening quote
        out: list[str] = []
        while self.peek() != '"':
            out.append(self.parse_char(closing='"'))
        self.pos += 1
        return "".join(out)

    def parse_class(self) -> str:
        start = self.pos
        self.pos += 1  # [
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[str, str]] = []
        while self.peek() != "]":
            lo_pos = self.pos
            lo = self.parse_char(closing="]")
            hi = lo
            if self.peek() == "-" and self.text[self.pos + 1:self.pos + 2] not in ("]", ""):
                self.pos += 1
                hi = self.parse_char(closing="]")
                if hi < lo:
                    raise self.error(f"character range {lo!r}-{hi!r} is reversed", lo_pos)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges:
            if negated:
                return _ANY_CHAR  # [^] excludes nothing
            raise self.error("empty character class", start)
        body = "".join(_class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}"
                       for lo, hi in ranges)
        return f"[{'^' if negated else ''}{body}]"


def _class_char(c: str) -> str:
    o = ord(c)
    if c.isascii() and c.isalnum():
        return c
    if 0x20 <= o < 0x7F:
        return "\\" + c
    if o <= 0xFF:
        return f"\\x{o:02x}"
    if o <= 0xFFFF:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def _line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{line}:{col}"


# ------------------------------------------------------------------------------------------------
# Lowering to BNF

class _Lowering:
    def __init__(self, user_rules: list[tuple[str, int, _Node]], parser: _Parser) -> None:
        self.parser = parser
        self.rules: list[Rule] = []
        self._rule_set: set[Rule] = set()
        self.size = 0
        self.budget = current_budget()
        self.terminals: dict[str, TerminalDef] = {}
        self._term_by_pattern: dict[str, str] = {}
        self._memo: dict[tuple, str] = {}
        self._used: set[str] = set()
        self.rule_names: dict[str, str] = {}
        self.rule_pos: dict[str, int] = {}
        for name, pos, _body in user_rules:
            if name in self.rule_names:
                first = _line_col(parser.text, self.rule_pos[name])
                raise parser.error(f"rule {name!r} is defined twice (first at {first})", pos)
            self.rule_pos[name] = pos
            self.rule_names[name] = self._fresh(_rule_base(name))

    def _fresh(self, base: str) -> str:
        new, i = base, 1
        while new in self._used:
            new = f"{base}_{i}"
            i += 1
        self._used.add(new)
        return new

    def lower(self, user_rules: list[tuple[str, int, _Node]]) -> None:
        for name, _pos, body in user_rules:
            lhs = self.rule_names[name]
            self.context = lhs
            assert isinstance(body, _Alt)
            for seq in body.seqs:
                self.add_rule(lhs, self.expand_seq(seq))

    def add_rule(self, lhs: str, rhs: list[str]) -> None:
        rule = Rule(lhs, tuple(rhs))
        if rule not in self._rule_set:
            self._grow(1 + len(rhs))
            self._rule_set.add(rule)
            self.rules.append(rule)

    def _grow(self, n: int) -> None:
        """Account ``n`` more rules/symbols against the compile budget: repetition counts expand
        into that many copies, so ``"a"{100000}`` is checked before it is built."""
        self.size += n
        self.budget.check_size("front-end (GBNF repetition expansion)", self.size, "grammar",
                               "max_symbols", "rules and right-hand-side symbols")
        self.budget.tick("front-end (GBNF repetition expansion)", len(self.rules))

    # -- expansion into symbol lists --
    def expand_seq(self, seq: tuple[_Node, ...]) -> list[str]:
        out: list[str] = []
        for item in seq:
            out.extend(self.expand(item))
        return out

    def expand(self, node: _Node) -> list[str]:
        if isinstance(node, _Lit):
            return [self.terminal(node.text, re.escape(node.text))] if node.text else []
        if isinstance(node, _Class):
            return [self.terminal(None, node.pattern)]
        if isinstance(node, _Ref):
            if node.name not in self.rule_names:
                raise self.parser.error(f"rule {node.name!r} is used but not defined", node.pos)
            return [self.rule_names[node.name]]
        if isinstance(node, _Alt):
            if len(node.seqs) == 1:
                return self.expand_seq(node.seqs[0])
            return [self.group(node)]
        assert isinstance(node, _Rep)
        return self.repeat(node)

    def symbol(self, node: _Node) -> str | None:
        """A single symbol deriving exactly ``node`` (None if ``node`` derives only ε)."""
        syms = self.expand(node)
        if not syms:
            return None
        if len(syms) == 1:
            return syms[0]
        return self.memo_rule(("seq", tuple(syms)), "group", [syms])

    def group(self, node: _Alt) -> str:
        alts = [tuple(self.expand_seq(seq)) for seq in node.seqs]
        alts = list(dict.fromkeys(alts))
        return self.memo_rule(("alt", tuple(alts)), "group", [list(a) for a in alts])

    def repeat(self, node: _Rep) -> list[str]:
        x = self.symbol(node.node)
        if x is None:
            return []
        self._grow(node.lo)
        out = [x] * node.lo
        if node.hi is None:
            if node.lo >= 1:
                # X{m,} = X{m-1} X+ — reuses the X+ rule, the commonest form
                out[-1] = self.plus(x)
            else:
                out.append(self.star(x))
        elif node.hi > node.lo:
            out.append(self.up_to(x, node.hi - node.lo))
        return out

    def star(self, x: str) -> str:
        key = ("star", x)
        if key not in self._memo:
            name = self._new_rule_name(x, "star")
            self._memo[key] = name
            self.add_rule(name, [])
            self.add_rule(name, [name, x])
        return self._memo[key]

    def plus(self, x: str) -> str:
        key = ("plus", x)
        if key not in self._memo:
            name = self._new_rule_name(x, "plus")
            self._memo[key] = name
            self.add_rule(name, [x])
            self.add_rule(name, [name, x])
        return self._memo[key]

    def up_to(self, x: str, k: int) -> str:
        """Rule deriving 0..k copies of x: O_k → ε | x O_{k-1}, O_1 → ε | x."""
        prev: str | None = None
        for i in range(1, k + 1):
            key = ("upto", x, i)
            if key not in self._memo:
                name = self._new_rule_name(x, "opt" if i == 1 else f"upto{i}")
                self._memo[key] = name
                self.add_rule(name, [])
                self.add_rule(name, [x] + ([prev] if prev else []))
            prev = self._memo[key]
        assert prev is not None
        return prev

    def memo_rule(self, key: tuple, kind: str, alts: list[list[str]]) -> str:
        if key not in self._memo:
            name = self._fresh(f"{self.context}_{kind}")
            self._memo[key] = name
            for alt in alts:
                self.add_rule(name, alt)
        return self._memo[key]

    def _new_rule_name(self, x: str, kind: str) -> str:
        base = x.lower() if x in self.terminals else x
        return self._fresh(f"{base}_{kind}")

    def terminal(self, literal: str | None, pattern: str) -> str:
        if pattern in self._term_by_pattern:
            return self._term_by_pattern[pattern]
        name = self._fresh(_terminal_base(literal, pattern, len(self.terminals)))
        self.terminals[name] = TerminalDef(name=name, pattern=pattern, literal=literal)
        self._term_by_pattern[pattern] = name
        return name


def _rule_base(name: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not base:
        return "rule"
    return base if base[0].isalpha() else f"r_{base}"


def _terminal_base(literal: str | None, pattern: str, n: int) -> str:
    if pattern == _ANY_CHAR:
        return "ANY_CHAR"
    if literal is None:
        return f"CLASS_{n}"
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,23}", literal):
        return f"KW_{literal.upper()}"
    if len(literal) == 1:
        try:
            uname = unicodedata.name(literal)
        except ValueError:
            return f"LIT_{n}"
        return re.sub(r"[^A-Z0-9]+", "_", uname.upper()).strip("_")
    return f"LIT_{n}"


# ------------------------------------------------------------------------------------------------
# Entry points

def grammar_from_gbnf(text: str, *, start: str = "root", source_name: str = "<gbnf>") -> Grammar:
    """Convert llama.cpp GBNF ``text`` into the IR with ``start`` (default ``"root"``) as start rule.

    Raises :class:`GrammarError` with ``source_name:line:col`` on syntax errors, undefined or twice
    defined rules, and an unknown start rule.
    """
    parser = _Parser(text, source_name)
    try:
        user_rules = parser.parse()
    except RecursionError:
        raise parser.error("groups nested too deeply; split the expression into named rules") from None
    low = _Lowering(user_rules, parser)
    if start not in low.rule_names:
        available = ", ".join(sorted(low.rule_names)) or "(none)"
        raise GrammarError(f"{source_name}: start rule {start!r} is not defined; rules: {available}")
    # start rule's alternatives first, so dumps read top-down
    ordered = sorted(user_rules, key=lambda r: r[0] != start)
    try:
        low.lower(ordered)
    except RecursionError:
        raise GrammarError(
            f"{source_name}: groups nested too deeply; split the expression into named rules") from None
    return Grammar(
        rules=low.rules,
        terminals=low.terminals,
        start=low.rule_names[start],
        source_name=source_name,
    )


grammar_from_ebnf = grammar_from_gbnf
