"""Packed token bitmasks, the layout shared with xgrammar, llguidance and outlines-core.

A mask over ``n`` token ids is an int32 array of ``ceil(n/32)`` words; token ``id`` is allowed when
bit ``id % 32`` of word ``id // 32`` is set. Keeping the field's layout lets engine adapters hand
our masks to existing kernels unchanged. A batch is a ``(batch, words)`` array, one row per request.

The loops live in the Cython module ``glrmask_ext.bitset`` (GIL released); this module converts and
checks arguments so that misuse fails with a clear error instead of touching the wrong memory.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

try:
    from glrmask_ext import bitset as _ext
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "glrmask's Cython extension glrmask_ext.bitset is not built; run "
        "`python3 setup.py build_ext --inplace` in the source tree or install the package"
    ) from exc

__all__ = [
    "n_words",
    "allocate_token_bitmask",
    "mask_from_ids",
    "ids_from_mask",
    "count",
    "and_into",
    "or_into",
    "clear_ids",
    "is_set",
]


def n_words(n: int) -> int:
    """Number of int32 words that hold ``n`` bits: ``ceil(n / 32)``."""
    n = _as_count(n, "bit count")
    return (n + 31) // 32


def allocate_token_bitmask(batch: int, n_logits: int) -> np.ndarray:
    """A ``(batch, ceil(n_logits/32))`` int32 array with every bit set (everything allowed), the
    neutral starting point before masks are filled in."""
    batch = _as_count(batch, "batch size")
    return np.full((batch, n_words(n_logits)), -1, dtype=np.int32)


def mask_from_ids(ids: Iterable[int] | np.ndarray, n: int) -> np.ndarray:
    """A new ``ceil(n/32)``-word mask with exactly ``ids`` set. IndexError if an id is outside
    ``[0, n)``."""
    return _ext.mask_from_ids(_ids(ids), _as_count(n, "bit count"))


def ids_from_mask(words: np.ndarray) -> np.ndarray:
    """The set ids of a 1-D mask, ascending (int64)."""
    return _ext.ids_from_mask(_words(words, "words", writable=False))


def count(words: np.ndarray) -> int:
    """Number of set bits (for a batch: over all rows)."""
    return int(_ext.count(_words(words, "words", writable=False, flatten=True)))


def and_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst &= src`` in place; both the same shape."""
    d, s = _pair(dst, src)
    _ext.and_into(d, s)


def or_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst |= src`` in place; both the same shape."""
    d, s = _pair(dst, src)
    _ext.or_into(d, s)


def clear_ids(words: np.ndarray, ids: Iterable[int] | np.ndarray) -> int:
    """Clear the bits of ``ids`` in a 1-D mask, in place; returns how many of them were set
    (an id given twice counts once). IndexError, and no change, if an id is past the mask."""
    return int(_ext.clear_ids(_words(words, "words", writable=True), _ids(ids)))


def is_set(words: np.ndarray, i: int) -> bool:
    """Whether token ``i`` is allowed by a 1-D mask."""
    return bool(_ext.is_set(_words(words, "words", writable=False), int(i)))


# ---- argument checking -----------------------------------------------------------------------


def _as_count(n: object, what: str) -> int:
    try:
        value = int(n)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an integer, got {n!r}") from None
    if value != n or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {n!r}")
    return value


def _ids(ids: Iterable[int] | np.ndarray) -> np.ndarray:
    arr = ids if isinstance(ids, np.ndarray) else np.fromiter(ids, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _words(words: np.ndarray, what: str, *, writable: bool, flatten: bool = False) -> np.ndarray:
    if not isinstance(words, np.ndarray):
        raise TypeError(f"{what} must be a numpy int32 array, got {type(words).__name__}")
    if words.dtype != np.int32:
        raise TypeError(f"{what} must have dtype int32, got {words.dtype}")
    if flatten:
        words = words.reshape(-1)
    elif words.ndim != 1:
        raise ValueError(f"{what} must be a 1-D mask (one row), got shape {words.shape}")
    if writable:
        if not words.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous to be modified in place")
        if not words.flags.writeable:
            raise ValueError(f"{what} is read-only")
        return words
    return np.ascontiguousarray(words)


def _pair(dst: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both operands of an in-place operation as flat views (batches are combined row for row)."""
    for arr, what in ((dst, "dst"), (src, "src")):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.int32:
            raise TypeError(f"{what} must be a numpy int32 array")
    if dst.shape != src.shape:
        raise ValueError(f"mask shapes differ: dst {dst.shape}, src {src.shape}")
    if not dst.flags.c_contiguous or not dst.flags.writeable:
        raise ValueError("dst must be a writable C-contiguous array")
    return dst.reshape(-1), np.ascontiguousarray(src).reshape(-1)
