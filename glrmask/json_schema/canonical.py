"""Canonical JSON text of schema values: the lowering's test for "the same schema".

The lowering memoizes the rule of every schema it builds (by merging allOf parts, an anyOf branch
with its siblings, a negation) under ``json.dumps(v, sort_keys=True, separators=(',', ':'),
default=repr)``, and compares schemas that way in ``allOf`` shortcuts and enum intersections. On
large schemas those texts run to kilobytes and nest — a merged schema shares the schemas below it
with the ones it was merged from — so encoding each from scratch was a fifth of the lowering.

:func:`canonical_text` writes exactly the text ``json.dumps`` writes (same escapes, key order,
number spellings, the same ``ValueError`` on a cycle), built from the texts of the parts; inside
:func:`memoized_texts` (one lowering) the text of every dict, list and tuple is remembered by
identity. That is sound because the lowering never changes a schema value once it is built (it
copies before it rewrites), and the memo holds each value, so an ``id`` is never reused for
another object while it is remembered. The texts are built natively
(:func:`glrmask_ext.ir_rules.canonical_text_memo`), the recursion counted against Python's limit
as the Python construction's frames were.
"""
from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from typing import Any, Iterator

from glrmask_ext.ir_rules import canonical_text_memo

__all__ = ["canonical_text", "memoized_texts"]

_MEMO: contextvars.ContextVar[dict[int, tuple[Any, str]] | None] = contextvars.ContextVar(
    "glrmask_canonical_texts", default=None)

_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps uses with ensure_ascii


def _dumps(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(',', ':'), default=repr)


@contextmanager
def memoized_texts() -> Iterator[None]:
    """Remember the text of every container :func:`canonical_text` meets until the block ends
    (the values must not change meanwhile; see the module docstring)."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def canonical_text(v: Any) -> str:
    """``json.dumps(v, sort_keys=True, separators=(',', ':'), default=repr)``."""
    memo = _MEMO.get()
    if memo is None:
        return _dumps(v)
    return canonical_text_memo(v, memo, _encode_str, _dumps)
