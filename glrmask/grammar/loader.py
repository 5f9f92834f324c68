"""One entry point from "a grammar the user gave us" to the IR: picks the front-end.

``source`` is either grammar text or the path of a grammar file. A ``str`` is taken as a path when
it names an existing file (grammar text practically never does); a :class:`os.PathLike` is always a
path and must exist. A ``str`` that names no file but cannot be grammar text either — one line,
no blanks, no ``:`` (every Lark rule and GBNF rule has one) — is a mistyped path: it fails as a
missing file, not with a parse error at line 1 of text nobody meant as a grammar.
"""
from __future__ import annotations

import difflib
import os
import re
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
    text, path = _read(source, fmt)
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


def _read(source: str | os.PathLike[str], fmt: str) -> tuple[str, Path | None]:
    if isinstance(source, os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise GrammarError(_not_found(path))
    elif isinstance(source, str):
        path = Path(source) if _could_be_path(source) and os.path.isfile(source) else None
        if path is None:
            if fmt != "regex" and _is_mistyped_path(source):
                raise GrammarError(_not_found(Path(source)))
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


_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def _is_mistyped_path(s: str) -> bool:
    """One line without blanks and without a ``:`` outside a Windows drive prefix: no Lark or
    GBNF grammar looks like that (a regex might, so callers skip this for ``format="regex"``)."""
    return bool(s) and not any(c.isspace() for c in s) and ":" not in _DRIVE.sub("", s)


def _not_found(path: Path) -> str:
    """"grammar file not found", naming the closest existing grammar file beside it if any."""
    msg = f"grammar file not found: {path}"
    if not path.suffix and len(path.parts) == 1:
        msg += " (and as grammar text it defines no rule)"
    directory = path.parent if str(path.parent) else Path(".")
    try:
        names = [n for n in os.listdir(directory) if Path(n).suffix.lower() in _BY_EXTENSION]
    except OSError:
        if not directory.is_dir():
            return f"{msg} (no directory {directory})"
        return msg
    close = difflib.get_close_matches(path.name, names, n=1)
    if close:
        msg += f" (did you mean {directory / close[0]}?)"
    return msg
