"""JSON Schema front-end: lower a schema to the grammar IR (start rule ``start``).

:func:`lower_json_schema_ir` is the front-end proper: it builds the IR directly, without printing
Lark text for the Lark front-end to parse again (that reparse cost up to a second on large
schemas). :func:`lower_json_schema` and :func:`json_schema_to_grammar` print that IR as Lark text,
for inspection and for lark, the tests' judge of the language.

See :mod:`.lowering` for the construction and ``docs/json_schema_support.md`` for the support
matrix and the documented deviations.
"""
from __future__ import annotations

from typing import Any

from ..grammar.gc_pause import cyclic_gc_paused
from ..grammar.ir import Grammar
from .printer import grammar_to_ascii_lark
from .lowering import DEFAULT_MAX_INDENT, DEFAULT_MAX_WHITESPACE, Options, load_schema, lower

__all__ = ['json_schema_to_grammar', 'lower_json_schema', 'lower_json_schema_ir', 'DEFAULT_MAX_WHITESPACE',
           'DEFAULT_MAX_INDENT']


def lower_json_schema_ir(schema: Any, *, whitespace: str = 'flexible',
                         max_whitespace: int = DEFAULT_MAX_WHITESPACE, max_indent: int = DEFAULT_MAX_INDENT,
                         indent: int | None = None, property_order: str = 'schema', lenient: bool = False,
                         format_mode: str = 'assert') -> tuple[Grammar, list[str]]:
    """Lower `schema` to ``(grammar_ir, warnings)``; the IR's start rule is ``start``, its
    ``source_name`` ``"<json-schema>"``, and its own ``warnings`` list is left empty.

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
    :class:`glrmask.errors.GrammarTooComplex` (the lowering's own, and the compile's
    ``grammar.max_symbols``).
    """
    opts = _options(whitespace, max_whitespace, max_indent, indent, property_order, lenient, format_mode)
    with cyclic_gc_paused():  # a large schema's lowering allocates tens of thousands of cycle-free objects
        return lower(load_schema(schema), opts)


def _options(whitespace: Any, max_whitespace: Any, max_indent: Any, indent: Any, property_order: Any, lenient: Any,
             format_mode: Any) -> Options:
    """The (frozen) :class:`Options` of these arguments: the same few for every request, and the
    dataclass's ``__init__`` stores each field through ``object.__setattr__``. Memoized only
    where every argument is of a plain hashable kind (the lowering validates the values)."""
    key = (whitespace, max_whitespace, max_indent, indent, property_order, lenient, format_mode)
    if all(type(v) in _PLAIN for v in key):
        key += tuple(type(v) for v in key)  # (True and 1 are one key otherwise)
        opts = _OPTIONS.get(key)
        if opts is None:
            opts = Options(*key[:7])
            if len(_OPTIONS) < 256:
                _OPTIONS[key] = opts
        return opts
    return Options(whitespace=whitespace, max_whitespace=max_whitespace, max_indent=max_indent, indent=indent,
                   property_order=property_order, lenient=lenient, format_mode=format_mode)


_PLAIN = frozenset({str, int, bool, type(None)})
_OPTIONS: dict[tuple, Options] = {}


def lower_json_schema(schema: Any, *, whitespace: str = 'flexible',
                      max_whitespace: int = DEFAULT_MAX_WHITESPACE, max_indent: int = DEFAULT_MAX_INDENT,
                      indent: int | None = None, property_order: str = 'schema', lenient: bool = False,
                      format_mode: str = 'assert') -> tuple[str, list[str]]:
    """``(lark_grammar_text, warnings)``: :func:`lower_json_schema_ir`'s IR printed as ASCII Lark
    text (start rule ``start``), which lark reads back as the same IR; options and errors as
    :func:`lower_json_schema_ir`."""
    grammar, warnings = lower_json_schema_ir(
        schema, whitespace=whitespace, max_whitespace=max_whitespace, max_indent=max_indent, indent=indent,
        property_order=property_order, lenient=lenient, format_mode=format_mode)
    return grammar_to_ascii_lark(grammar), warnings


def json_schema_to_grammar(schema: Any, **options: Any) -> str:
    """Lark grammar text (start rule ``start``) for `schema`; options as :func:`lower_json_schema_ir`."""
    return lower_json_schema(schema, **options)[0]
