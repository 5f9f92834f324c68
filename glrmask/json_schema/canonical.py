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
another object while it is remembered.
"""
from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["canonical_text", "memoized_texts"]

_MEMO: contextvars.ContextVar[dict[int, tuple[Any, str]] | None] = contextvars.ContextVar(
    "glrmask_canonical_texts", default=None)

_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps uses with ensure_ascii
_INF = float("inf")


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
    return _text(v, memo, set())


def _text(v: Any, memo: dict[int, tuple[Any, str]], open_: set[int]) -> str:
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is dict or t is list or t is tuple:
        i = id(v)
        got = memo.get(i)
        if got is not None and got[0] is v:
            return got[1]
        if i in open_:
            raise ValueError("Circular reference detected")
        open_.add(i)
        try:
            if t is dict:
                if not all(type(k) is str for k in v):
                    s = _dumps(v)  # other keys: json's own conversions and errors
                elif v:
                    # (unique keys: json.dumps's sort of the (key, value) items orders by key alone)
                    s = '{' + ','.join([_encode_str(k) + ':' + _text(v[k], memo, open_) for k in sorted(v)]) + '}'
                else:
                    s = '{}'
            else:
                s = '[' + ','.join([_text(x, memo, open_) for x in v]) + ']'
        finally:
            open_.discard(i)
        memo[i] = (v, s)
        return s
    if v is None:
        return 'null'
    if v is True:
        return 'true'
    if v is False:
        return 'false'
    if t is int:
        return int.__repr__(v)
    if t is float:
        if v != v:
            return 'NaN'
        if v == _INF:
            return 'Infinity'
        if v == -_INF:
            return '-Infinity'
        return float.__repr__(v)
    return _dumps(v)  # subclasses, Decimal, anything else: exactly as json.dumps writes it
