"""Access to one packed int32 mask row (bit ``id % 32`` of word ``id // 32``) as uint32 words.

Guards clear bits in the same rows the grammar fills, so they accept what a grammar mask is stored
in: a 1-D numpy int32/uint32 array, or a CPU torch tensor (viewed through ``.numpy()``, which shares
memory). A view as uint32 makes bit 31 an ordinary bit instead of the sign.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_ALL_BITS = 0xFFFFFFFF


def as_word_row(out_words: Any) -> np.ndarray:
    """Return a writable uint32 view of ``out_words`` (one mask row) without copying."""
    arr = out_words
    if not isinstance(arr, np.ndarray):
        to_numpy = getattr(arr, "numpy", None)
        if to_numpy is None:
            raise TypeError(
                f"mask row must be a numpy array or a CPU torch tensor, got {type(out_words).__name__}"
            )
        try:
            arr = to_numpy()
        except (RuntimeError, TypeError) as exc:  # e.g. a CUDA tensor
            raise TypeError(f"mask row must live in CPU memory: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"mask row must be 1-D (one row of packed words), got shape {arr.shape}")
    if arr.dtype not in (np.int32, np.uint32):
        raise TypeError(f"mask row must have dtype int32 (or uint32), got {arr.dtype}")
    if not arr.flags.writeable:
        raise ValueError("mask row is read-only")
    return arr.view(np.uint32)


def clear_bits(row: np.ndarray, token_ids: Any) -> list[int]:
    """Clear the bits of ``token_ids`` that are set in ``row``; return the ids actually cleared.

    Ids past the row's width are ignored: they are disallowed already.
    """
    cleared: list[int] = []
    width = row.shape[0]
    for tok in token_ids:
        word = tok >> 5
        if word >= width or tok < 0:
            continue
        bit = 1 << (tok & 31)
        value = int(row[word])
        if value & bit:
            row[word] = value & (_ALL_BITS ^ bit)
            cleared.append(tok)
    return cleared


def set_bits(row: np.ndarray, token_ids: list[int]) -> None:
    """Set the bits of ``token_ids`` (all inside the row); undoes :func:`clear_bits`."""
    for tok in token_ids:
        word = tok >> 5
        row[word] = int(row[word]) | (1 << (tok & 31))
