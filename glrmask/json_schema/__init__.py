"""JSON Schema front-end: lower a schema to Lark grammar text (start rule ``start``).

See :mod:`.lowering` for the construction and ``docs/json_schema_support.md`` for the support
matrix and the documented deviations.
"""
from __future__ import annotations

from typing import Any

from .lowering import DEFAULT_MAX_WHITESPACE, Options, load_schema, lower

__all__ = ['json_schema_to_grammar', 'lower_json_schema', 'DEFAULT_MAX_WHITESPACE']


def lower_json_schema(schema: Any, *, whitespace: str = 'flexible',
                      max_whitespace: int = DEFAULT_MAX_WHITESPACE, indent: int | None = None,
                      property_order: str = 'schema', lenient: bool = False) -> tuple[str, list[str]]:
    """Lower `schema` to ``(lark_grammar_text, warnings)``.

    `schema` is a dict/bool, a :class:`pathlib.Path`, or a str (JSON text if it parses as JSON,
    else a path to an existing file). `whitespace` is ``"flexible"`` (0..`max_whitespace` of
    space/tab/newline/CR at every gap between tokens) or ``"compact"`` (none); `indent=N` instead
    requires exactly ``json.dumps(value, indent=N)`` layout. `property_order` is ``"schema"``
    (declared properties in schema order, other keys after them) or ``"any"`` (any order, objects
    with at most 8 declared properties). Unsupported keywords raise
    :class:`glrmask.errors.UnsupportedSchema` listing each with its JSON pointer, unless `lenient`,
    which ignores them and reports them in the warnings. Budgets raise
    :class:`glrmask.errors.GrammarTooComplex`.
    """
    opts = Options(whitespace=whitespace, max_whitespace=max_whitespace, indent=indent,
                   property_order=property_order, lenient=lenient)
    return lower(load_schema(schema), opts)


def json_schema_to_grammar(schema: Any, *, whitespace: str = 'flexible',
                           max_whitespace: int = DEFAULT_MAX_WHITESPACE, indent: int | None = None,
                           property_order: str = 'schema', lenient: bool = False) -> str:
    """Lark grammar text (start rule ``start``) for `schema`; see :func:`lower_json_schema`."""
    return lower_json_schema(schema, whitespace=whitespace, max_whitespace=max_whitespace, indent=indent,
                             property_order=property_order, lenient=lenient)[0]
