"""A single regular expression → grammar IR (``start: REGEX``).

The constraint a user means by a regex is *the whole output matches it* (``re.fullmatch``). A lone
terminal, though, matches like ``re.match`` at the start (DESIGN §2): for ``a|ab`` that is ``a``,
so ``ab`` would be rejected. The terminal therefore carries a trailing ``(?![\\s\\S])`` — "nothing
follows" — which makes ``re`` backtrack into the longer alternatives exactly as ``fullmatch`` does
and which the lexer resolves at the end of the document. A regex that accepts the empty string gets
an ε alternative for it, and its terminal becomes ``(?=(?:P)(?![\\s\\S]))[\\s\\S]+`` — "the rest of
the document, at least one character, and the rest fullmatches P" — because a terminal must not be
able to match the empty string, not even structurally (lark's dynamic lexer refuses such terminals).
"""
from __future__ import annotations

import re

from glrmask.errors import RegexError
from glrmask.grammar.ir import Grammar, Rule, TerminalDef

__all__ = ["grammar_from_regex", "REGEX_TERMINAL"]

REGEX_TERMINAL = "REGEX"
_AT_END = r"(?![\s\S])"
_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))+")


def grammar_from_regex(pattern: str, *, source_name: str = "<regex>") -> Grammar:
    """Grammar whose language is the strings ``re.fullmatch(pattern, s)`` accepts.

    Raises :class:`RegexError` if ``pattern`` does not compile with Python's ``re``.
    """
    if not isinstance(pattern, str):
        raise RegexError(f"{source_name}: the regex must be a str, not {type(pattern).__name__}")
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise RegexError(f"{source_name}: invalid regex {pattern!r}: {e}") from None

    m = _GLOBAL_FLAGS.match(pattern)
    flags, body = (m.group(), pattern[m.end():]) if m else ("", pattern)
    if compiled.flags & re.VERBOSE:
        body += "\n"  # a trailing comment must not swallow our closing parenthesis
    nullable = compiled.fullmatch("") is not None
    if nullable:
        full = f"{flags}(?=(?:{body}){_AT_END})[\\s\\S]+"
    else:
        full = f"{flags}(?:{body}){_AT_END}"
    rules = [Rule("start", (REGEX_TERMINAL,))]
    if nullable:
        rules.append(Rule("start", ()))
    return Grammar(
        rules=rules,
        terminals={REGEX_TERMINAL: TerminalDef(REGEX_TERMINAL, full)},
        start="start",
        source_name=source_name,
    )
