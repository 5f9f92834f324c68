"""One entry point from "a grammar the user gave us" to the IR: picks the front-end.

``source`` is either grammar text or the path of a grammar file. A ``str`` is taken as a path only
when it names an existing file (grammar text practically never does); a :class:`os.PathLike` is
always a path and must exist.
"""
from __future__ import annotations

import os
from pathlib import Path
from glrmask.errors import GrammarError
from glrmask.grammar.ebnf_frontend import grammar_from_gbnf
from glrmask.grammar.ir import Grammar
from glrmask.grammar.lark_frontend import grammar_from_lark
from glrmask.grammar.regex_frontend import grammar_from_regex

__all__ = ["load_grammar", "detect_format", "FORMATS"]

FORMATS: tuple[str, ...] = ("auto", "lark", "gbnf", "ebnf", "regex")
_BY_EXTENSION = {".lark": "lark", ".gbnf": "gbnf", ".ebnf": "gbnf"}


def load_grammar(
    source: str | os.PathLike[str], *, format: str = "auto", start: str | None = None
) -> Grammar:
    """Parse ``source`` (text or file path) in ``format`` into the grammar IR.

    ``format="auto"`` decides by the file extension (``.lark``, ``.gbnf``, ``.ebnf``), else by
    content (a line containing ``::=`` means GBNF, anything else Lark); a regex is never guessed.
    ``start`` defaults to ``"start"`` for Lark and ``"root"`` for GBNF; a regex has no rules to
    choose from, so ``start`` must be None for it.
    """
    fmt = format.lower() if isinstance(format, str) else format
    if fmt not in FORMATS:
        raise GrammarError(
            f"unknown grammar format {format!r}; expected one of: {', '.join(FORMATS)}"
        )
    text, path = _read(source)
    source_name = str(path) if path is not None else f"<{fmt if fmt != 'auto' else 'grammar'}>"
    if fmt == "auto":
        fmt = detect_format(text, path)
    if fmt == "ebnf":
        fmt = "gbnf"

    if fmt == "lark":
        imports = [str(path.parent)] if path is not None else []
        return grammar_from_lark(text, start=start, source_name=source_name, import_paths=imports)
    if fmt == "gbnf":
        return grammar_from_gbnf(text, start=start or "root", source_name=source_name)
    if start is not None:
        raise GrammarError("a regex grammar has a single rule; `start` cannot be chosen")
    return grammar_from_regex(text, source_name=source_name)


def detect_format(text: str, path: Path | None = None) -> str:
    """``"lark"`` or ``"gbnf"`` for a grammar, by ``path``'s extension or else by ``text``."""
    if path is not None and path.suffix.lower() in _BY_EXTENSION:
        return _BY_EXTENSION[path.suffix.lower()]
    return "gbnf" if any("::=" in line for line in text.splitlines()) else "lark"


def _read(source: str | os.PathLike[str]) -> tuple[str, Path | None]:
    if isinstance(source, os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise GrammarError(f"grammar file not found: {path}")
    elif isinstance(source, str):
        path = Path(source) if _could_be_path(source) and os.path.isfile(source) else None
        if path is None:
            return source, None
    else:
        raise GrammarError(
            f"grammar source must be text or a path, not {type(source).__name__}"
        )
    try:
        return path.read_text(encoding="utf-8"), path
    except (OSError, UnicodeDecodeError) as e:
        raise GrammarError(f"cannot read grammar file {path}: {e}") from None


def _could_be_path(s: str) -> bool:
    return 0 < len(s) < 4096 and "\n" not in s and "\0" not in s
