"""Lark grammar text → grammar IR.

Lark itself parses the grammar and expands its EBNF sugar (``?rule``, ``*``, ``+``, ``[]``, ``~n..m``,
templates, ``%import``, ``%override``/``%extend``, aliases), so the language we compile is by
construction the one lark's Earley parser — the tests' judge — accepts. This module only reads the
compiled rules and terminals back, renames lark's internal symbols (``__start_star_0``,
``__ANON_1``, template instances such as ``_sep{item,COMMA}``) to names that are valid in Lark
syntax, so :meth:`Grammar.to_lark` re-parses, and translates lark's errors into ours with a
position.

Priorities (of rules and terminals) are accepted and ignored: under the matching semantics of
DESIGN §2 every terminal that matches survives and the parser decides, so they cannot change the
language. Aliases and tree-shaping options are dropped for the same reason.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

from lark import load_grammar as _lark_load_grammar
from lark.exceptions import LarkError
from lark.grammar import NonTerminal
from lark.grammar import Terminal as _LarkTerminal
from lark.lexer import PatternStr

from glrmask.budget import current_budget
from glrmask.errors import GrammarError, RegexError
from glrmask.grammar.ir import Grammar, Rule, TerminalDef

__all__ = ["grammar_from_lark"]

_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*\Z")
_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*\Z")
_LINE_COL = re.compile(r"line (\d+),? col(?:umn)? (\d+)")


def grammar_from_lark(
    text: str,
    *,
    start: str | None = None,
    source_name: str = "<grammar>",
    import_paths: Sequence[str | os.PathLike[str]] = (),
) -> Grammar:
    """Convert Lark grammar ``text`` into the IR, with ``start`` (default ``"start"``) as start rule.

    ``import_paths`` are searched by ``%import`` besides lark's bundled grammars (``common``, …).
    Raises :class:`GrammarError` (with ``source_name``, line and column where lark or we can tell
    them) for syntax errors, undefined symbols, an unknown start rule, ``%declare``'d symbols (they
    need a post-lexer, which has no place in a mask) and terminals whose regex does not compile.
    """
    start = "start" if start is None else start
    paths = [os.fspath(p) for p in import_paths]
    budget = current_budget()
    budget.check("front-end (lark)")
    try:
        lark_grammar, _files = _lark_load_grammar.load_grammar(text, source_name, paths, False)
    except LarkError as e:
        raise _wrap(e, text, source_name) from None
    except OSError as e:  # %import of a file that does not exist
        raise GrammarError(f"{source_name}: cannot import grammar: {e}") from None
    except RecursionError:
        raise _too_deep(text, source_name) from None

    available = [name for name, params, _tree, _opts in lark_grammar.rule_defs if not params]
    if start not in available:
        raise GrammarError(
            f"{source_name}: unknown start rule {start!r}; available rules: "
            + ", ".join(sorted(available))
        )
    budget.check("front-end (lark)")
    try:
        lark_terminals, lark_rules, ignore = lark_grammar.compile([start], ())
    except LarkError as e:
        raise _wrap(e, text, source_name) from None
    except RecursionError:
        raise _too_deep(text, source_name) from None
    budget.check("front-end (lark)")
    budget.check_size("front-end (lark)", len(lark_rules) + sum(len(r.expansion) for r in lark_rules),
                      "grammar", "max_symbols", "rules and right-hand-side symbols after EBNF expansion")

    defined = {t.name for t in lark_terminals}
    declared = sorted(
        {s.name for r in lark_rules for s in r.expansion if isinstance(s, _LarkTerminal)} - defined
        | (set(ignore) - defined)
    )
    if declared:
        raise GrammarError(
            f"{source_name}: terminals declared with %declare are not supported (they need a "
            f"post-lexer): {', '.join(declared)}"
        )

    names = _Renamer()
    start_name = names.rule(start)
    terminals: dict[str, TerminalDef] = {}
    for t in lark_terminals:
        name = names.terminal(t.name)
        pattern = t.pattern.to_regexp()
        try:
            re.compile(pattern)
        except re.error as e:
            raise RegexError(
                f"{source_name}{_where(text, t.name)}: terminal {t.name} has an invalid regex "
                f"/{t.pattern.value}/: {e}"
            ) from None
        literal = t.pattern.value if isinstance(t.pattern, PatternStr) else None
        terminals[name] = TerminalDef(name=name, pattern=pattern, literal=literal)

    rules: list[Rule] = []
    seen: set[Rule] = set()
    for r in _start_first(lark_rules, start):
        rhs = tuple(
            names.rule(s.name) if isinstance(s, NonTerminal) else names.terminal(s.name)
            for s in r.expansion
        )
        rule = Rule(names.rule(r.origin.name), rhs)
        if rule not in seen:  # aliases/optional expansions may produce the same BNF rule twice
            seen.add(rule)
            rules.append(rule)

    return Grammar(
        rules=rules,
        terminals=terminals,
        start=start_name,
        ignore=tuple(dict.fromkeys(names.terminal(n) for n in ignore)),
        source_name=source_name,
    )


def _start_first(rules: Iterable, start: str) -> list:
    """Rules with the start rule's alternatives first (stable otherwise), for readable dumps."""
    rules = list(rules)
    return [r for r in rules if r.origin.name == start] + [
        r for r in rules if r.origin.name != start
    ]


class _Renamer:
    """Maps lark's symbol names to valid, unique Lark rule / terminal names (stable per name)."""

    def __init__(self) -> None:
        self._map: dict[tuple[bool, str], str] = {}
        self._used: set[str] = set()

    def rule(self, name: str) -> str:
        return self._name(False, name)

    def terminal(self, name: str) -> str:
        return self._name(True, name)

    def _name(self, is_term: bool, name: str) -> str:
        key = (is_term, name)
        if key in self._map:
            return self._map[key]
        valid = _TERMINAL_NAME if is_term else _RULE_NAME
        if valid.match(name) and name not in self._used:
            new = name
        else:
            base = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
            base = base.upper() if is_term else base.lower()
            if not base:
                base = "ANON" if is_term else "anon"
            elif not base[0].isalpha():
                base = ("T_" if is_term else "r_") + base
            new, i = base, 1
            while new in self._used:
                new = f"{base}_{i}"
                i += 1
        self._map[key] = new
        self._used.add(new)
        return new


def _too_deep(text: str, source_name: str) -> GrammarError:
    """Lark parses and transforms grammars recursively, so deep nesting exhausts Python's stack;
    report where the nesting is deepest instead of a RecursionError."""
    depth = best = pos = 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
            if depth > best:
                best, pos = depth, i
        elif c in ")]":
            depth = max(0, depth - 1)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return GrammarError(
        f"{source_name}:{line}:{col}: grammar nested too deeply for lark to parse ({best} levels of "
        "parentheses/brackets here); split the expression into named rules")


def _wrap(e: Exception, text: str, source_name: str) -> GrammarError:
    """Our error for a lark error: lark's message, prefixed with the file and a line:column."""
    msg = str(e).strip()
    m = _LINE_COL.search(msg)
    if m:
        where = f":{m.group(1)}:{m.group(2)}"
    else:
        where = ""
        undefined = re.search(r"'([A-Za-z_][A-Za-z_0-9]*)' used but not defined", msg)
        if undefined:
            where = _where(text, undefined.group(1), definition=False)
    return GrammarError(f"{source_name}{where}: {msg}")


def _where(text: str, name: str, *, definition: bool = True) -> str:
    """``:line:col`` of the definition (or the first use) of ``name`` in ``text``, or ``""``."""
    word = rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])"
    pat = re.compile(rf"^[ \t]*[!?]?{word}[ \t]*(?:\.\s*-?\d+\s*)?:" if definition else word, re.M)
    for m in pat.finditer(text):
        pos = m.start() if not definition else m.start() + len(m.group()) - len(m.group().lstrip(" \t!?"))
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        return f":{line}:{col}"
    return ""
