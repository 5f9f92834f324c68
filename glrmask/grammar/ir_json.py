"""Exact JSON form of the grammar IR (:class:`~glrmask.grammar.ir.Grammar`).

Why: a compiled artifact must record the grammar it was built from (to rebuild the lexer or the
LR table, or to show it) without pickle, which runs code on load. The format is plain JSON::

    {"format": "glrmask.grammar", "version": 1,
     "start": str, "source_name": str,
     "rules": [[lhs, [rhs symbol, ...]], ...],
     "terminals": [{"name": str, "pattern": str, "literal": str | null}, ...],
     "ignore": [name, ...], "warnings": [str, ...]}

Lists keep the IR's order (rule order and terminal order fix LR ids), and strings are written
ASCII-escaped, so every string (even one with a lone surrogate) reads back identical:
``Grammar.from_json(g.to_json()) == g``.
"""
from __future__ import annotations

import json
from typing import Any

from glrmask.errors import ArtifactError

from .ir import Grammar, Rule, TerminalDef

__all__ = ["FORMAT", "VERSION", "grammar_from_json", "grammar_to_json", "grammar_from_obj", "grammar_to_obj"]

FORMAT = "glrmask.grammar"
VERSION = 1


def grammar_to_obj(grammar: Grammar) -> dict[str, Any]:
    """The JSON-ready dict of ``grammar`` (see the module docstring)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "start": grammar.start,
        "source_name": grammar.source_name,
        "rules": [[r.lhs, list(r.rhs)] for r in grammar.rules],
        "terminals": [
            {"name": t.name, "pattern": t.pattern, "literal": t.literal}
            for t in grammar.terminals.values()
        ],
        "ignore": list(grammar.ignore),
        "warnings": list(grammar.warnings),
    }


def grammar_to_json(grammar: Grammar) -> str:
    """``grammar`` as JSON text (ASCII only, compact, deterministic)."""
    return json.dumps(grammar_to_obj(grammar), ensure_ascii=True, separators=(",", ":"))


def grammar_from_json(text: str | bytes) -> Grammar:
    """Inverse of :func:`grammar_to_json`; :class:`ArtifactError` when the text is not valid JSON
    of this format."""
    try:
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"grammar JSON: not valid JSON ({exc})") from None
    return grammar_from_obj(obj)


def grammar_from_obj(obj: Any) -> Grammar:
    """Inverse of :func:`grammar_to_obj`, validating every field."""
    if not isinstance(obj, dict):
        raise ArtifactError("grammar JSON: the top level must be an object")
    if obj.get("format") != FORMAT or obj.get("version") != VERSION:
        raise ArtifactError(
            f"grammar JSON: expected format {FORMAT!r} version {VERSION}, "
            f"got {obj.get('format')!r} version {obj.get('version')!r}"
        )
    start = _str(obj, "start")
    source_name = _str(obj, "source_name")
    rules = []
    for r in _list(obj, "rules"):
        if not (isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and _strs(r[1])):
            raise ArtifactError(f"grammar JSON: malformed rule {r!r} (expected [lhs, [symbols]])")
        rules.append(Rule(r[0], tuple(r[1])))
    terminals: dict[str, TerminalDef] = {}
    for t in _list(obj, "terminals"):
        if not (isinstance(t, dict) and set(t) == {"name", "pattern", "literal"}
                and isinstance(t["name"], str) and isinstance(t["pattern"], str)
                and (t["literal"] is None or isinstance(t["literal"], str))):
            raise ArtifactError(f"grammar JSON: malformed terminal {t!r}")
        if t["name"] in terminals:
            raise ArtifactError(f"grammar JSON: terminal {t['name']!r} defined twice")
        terminals[t["name"]] = TerminalDef(t["name"], t["pattern"], t["literal"])
    ignore = _list(obj, "ignore")
    warnings = _list(obj, "warnings")
    if not _strs(ignore) or not _strs(warnings):
        raise ArtifactError("grammar JSON: 'ignore' and 'warnings' must be lists of strings")
    return Grammar(rules=rules, terminals=terminals, start=start, ignore=tuple(ignore),
                   source_name=source_name, warnings=list(warnings))


def _str(obj: dict, key: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str):
        raise ArtifactError(f"grammar JSON: {key!r} must be a string")
    return v


def _list(obj: dict, key: str) -> list:
    v = obj.get(key)
    if not isinstance(v, list):
        raise ArtifactError(f"grammar JSON: {key!r} must be a list")
    return v


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)
