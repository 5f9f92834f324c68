"""JSON Schema front-end: lower a schema to Lark grammar text (start rule ``start``).

See :mod:`.lowering` for the construction and ``docs/json_schema_support.md`` for the support
matrix and the documented deviations.
"""
from __future__ import annotations

from typing import Any

from .lowering import DEFAULT_MAX_INDENT, DEFAULT_MAX_WHITESPACE, Options, load_schema, lower

__all__ = ['json_schema_to_grammar', 'lower_json_schema', 'DEFAULT_MAX_WHITESPACE', 'DEFAULT_MAX_INDENT']


def lower_json_schema(schema: Any, *, whitespace: str = 'flexible',
                      max_whitespace: int = DEFAULT_MAX_WHITESPACE, max_indent: int = DEFAULT_MAX_INDENT,
                      indent: int | None = None, property_order: str = 'schema', lenient: bool = False,
                      format_mode: str = 'assert') -> tuple[str, list[str]]:
    """Lower `schema` to ``(lark_grammar_text, warnings)``.

    `schema` is a dict/bool, a :class:`pathlib.Path`, or a str (JSON text if it parses as JSON,
    else a path to an existing file).

    `whitespace` is ``"flexible"`` or ``"compact"`` (none). Flexible gaps between tokens hold at
    most `max_whitespace` spaces/tabs, optionally followed by one line break (``\\n``, ``\\r\\n``
    or ``\\r``) and at most `max_indent` spaces/tabs: exactly what ``json.dumps(indent=N)`` writes
    up to ``max_indent // N`` levels, while a model cannot run away in whitespace. `indent=N`
    instead requires exactly ``json.dumps(value, indent=N)`` layout.

    `property_order` is ``"schema"`` (declared properties in schema order, other keys after them)
    or ``"any"`` (any order, objects with at most 8 declared properties). `format_mode` is
    ``"assert"`` (the formats listed in the support matrix are enforced) or ``"annotation"``
    (the specification's default: `format` constrains nothing).

    Unsupported keywords raise :class:`glrmask.errors.UnsupportedSchema` listing each with its JSON
    pointer, unless `lenient`, which ignores them and reports them in the warnings. Malformed
    schemas (a keyword value of the wrong kind) raise it in both modes. Budgets raise
    :class:`glrmask.errors.GrammarTooComplex`.
    """
    opts = Options(whitespace=whitespace, max_whitespace=max_whitespace, max_indent=max_indent, indent=indent,
                   property_order=property_order, lenient=lenient, format_mode=format_mode)
    return lower(load_schema(schema), opts)


def json_schema_to_grammar(schema: Any, **options: Any) -> str:
    """Lark grammar text (start rule ``start``) for `schema`; options as :func:`lower_json_schema`."""
    return lower_json_schema(schema, **options)[0]
