# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Packed token bitmasks: bit ``id % 32`` of int32 word ``id // 32`` (the xgrammar/llguidance layout).

These loops sit on the decode path (masks are combined, cleared and counted per token), so they
run without the GIL and without per-element Python objects. Inputs are 1-D C-contiguous arrays;
``glrmask.bitmask`` is the typed, validating Python face of this module.
"""
import numpy as np

from libc.stdint cimport int32_t, int64_t, uint32_t


cdef inline int _popcount32(uint32_t x) noexcept nogil:
    # SWAR popcount: portable (no compiler builtin needed) and branch-free.
    x = x - ((x >> 1) & 0x55555555u)
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u)
    x = (x + (x >> 4)) & 0x0F0F0F0Fu
    return <int>((x * 0x01010101u) >> 24)


def n_words(int64_t n):
    """Words needed for ``n`` bits: ceil(n / 32)."""
    if n < 0:
        raise ValueError(f"bit count must be >= 0, got {n}")
    return (n + 31) >> 5


def mask_from_ids(const int64_t[::1] ids, int64_t n):
    """A fresh mask of ``ceil(n/32)`` words with exactly the bits of ``ids`` set (ids in [0, n))."""
    if n < 0:
        raise ValueError(f"bit count must be >= 0, got {n}")
    cdef Py_ssize_t k, m = ids.shape[0]
    cdef int64_t i, bad = -1
    out = np.zeros((n + 31) >> 5, dtype=np.int32)
    cdef int32_t[::1] w = out
    with nogil:
        for k in range(m):
            i = ids[k]
            if i < 0 or i >= n:
                bad = k
                break
            w[i >> 5] |= <int32_t>(<uint32_t>1 << (i & 31))
    if bad >= 0:
        raise IndexError(f"id {ids[bad]} is outside [0, {n})")
    return out


def ids_from_mask(const int32_t[::1] words):
    """The set bits' ids, ascending, as int64."""
    cdef Py_ssize_t nw = words.shape[0], j, k = 0
    cdef int64_t total = 0
    cdef uint32_t x
    with nogil:
        for j in range(nw):
            total += _popcount32(<uint32_t>words[j])
    out = np.empty(total, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef int b
    with nogil:
        for j in range(nw):
            x = <uint32_t>words[j]
            while x:
                b = _popcount32((x & (~x + 1u)) - 1u)  # index of the lowest set bit
                o[k] = (<int64_t>j << 5) + b
                k += 1
                x &= x - 1u
    return out


def count(const int32_t[::1] words):
    """Number of set bits."""
    cdef Py_ssize_t j, nw = words.shape[0]
    cdef int64_t total = 0
    with nogil:
        for j in range(nw):
            total += _popcount32(<uint32_t>words[j])
    return total


def and_into(int32_t[::1] dst, const int32_t[::1] src):
    """dst &= src (same length)."""
    cdef Py_ssize_t j, nw = dst.shape[0]
    if src.shape[0] != nw:
        raise ValueError(f"mask lengths differ: {nw} and {src.shape[0]} words")
    with nogil:
        for j in range(nw):
            dst[j] &= src[j]


def or_into(int32_t[::1] dst, const int32_t[::1] src):
    """dst |= src (same length)."""
    cdef Py_ssize_t j, nw = dst.shape[0]
    if src.shape[0] != nw:
        raise ValueError(f"mask lengths differ: {nw} and {src.shape[0]} words")
    with nogil:
        for j in range(nw):
            dst[j] |= src[j]


def clear_ids(int32_t[::1] words, const int64_t[::1] ids):
    """Clear the bits of ``ids``; returns how many were set before (repeated ids count once).

    All ids are range-checked before any bit changes, so an error leaves ``words`` untouched."""
    cdef Py_ssize_t k, m = ids.shape[0]
    cdef int64_t i, n = (<int64_t>words.shape[0]) << 5, cleared = 0, bad = -1
    cdef uint32_t bit
    with nogil:
        for k in range(m):
            i = ids[k]
            if i < 0 or i >= n:
                bad = k
                break
    if bad >= 0:
        raise IndexError(f"id {ids[bad]} is outside the mask's {n} bits")
    with nogil:
        for k in range(m):
            i = ids[k]
            bit = (<uint32_t>1) << (i & 31)
            if (<uint32_t>words[i >> 5]) & bit:
                cleared += 1
                words[i >> 5] = <int32_t>((<uint32_t>words[i >> 5]) & ~bit)
    return cleared


def is_set(const int32_t[::1] words, int64_t i):
    """Whether bit ``i`` is set."""
    if i < 0 or i >= (<int64_t>words.shape[0]) << 5:
        raise IndexError(f"id {i} is outside the mask's {words.shape[0] * 32} bits")
    return bool((<uint32_t>words[i >> 5] >> (i & 31)) & 1u)
