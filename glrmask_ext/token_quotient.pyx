# cython: language_level=3, wraparound=False, boundscheck=False, cdivision=True
# distutils: language = c++
"""Native core of :meth:`glrmask.compiler.token_classes.TokenClasses.from_weights` (the token
quotient, DESIGN §4.9): segment signatures, classes by signature, each class's intervals, the
exact verification and every weight's class set.

Why native: a Terminal DWA over a bounded string has tens of thousands of segments and weights
made of thousands of intervals; the Python loops over them took up to a second of a compile.
Same numbering and the same verification as the description in ``token_classes``.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint64_t
from libcpp.vector cimport vector

import numpy as np

__all__ = ["quotient", "class_of_tokens"]


def quotient(const int64_t[::1] wp, const int64_t[::1] seg_lo, const int64_t[::1] seg_hi,
             const int64_t[::1] cuts, const int64_t[:, ::1] keys):
    """Classes of the segments ``cuts[s]..cuts[s+1]`` (``s < len(cuts) - 1``) over the weights
    whose ``k``-th interval covers segments ``seg_lo[k] .. seg_hi[k] - 1`` (weight ``w`` owns
    intervals ``wp[w] // 2 .. wp[w+1] // 2``). A segment's signature is the XOR of two random
    keys (``keys[0, w]``, ``keys[1, w]``) of every weight covering it; covered segments with equal
    signatures are one class, numbered by first segment. Returns ``(class_ptr, class_bounds,
    sets)``: each class's tokens as flat ``lo, hi`` bounds, and per weight its classes as a
    Python int bitset. Raises ``AssertionError`` if a class straddles a weight (a 128-bit hash
    collision: the verification is exact)."""
    cdef Py_ssize_t n_seg = cuts.shape[0] - 1
    cdef Py_ssize_t n_weights = wp.shape[0] - 1
    cdef vector[uint64_t] d0, d1
    cdef vector[int64_t] cover
    cdef vector[int32_t] seg_class
    cdef Py_ssize_t w, k, s, i
    cdef uint64_t a0, a1, h
    cdef int64_t c_run
    d0.assign(n_seg + 1, 0)
    d1.assign(n_seg + 1, 0)
    cover.assign(n_seg + 1, 0)
    with nogil:
        for w in range(n_weights):
            for k in range(wp[w] // 2, wp[w + 1] // 2):
                d0[seg_lo[k]] ^= <uint64_t>keys[0, w]
                d0[seg_hi[k]] ^= <uint64_t>keys[0, w]
                d1[seg_lo[k]] ^= <uint64_t>keys[1, w]
                d1[seg_hi[k]] ^= <uint64_t>keys[1, w]
                cover[seg_lo[k]] += 1
                cover[seg_hi[k]] -= 1
    # classes by signature (open addressing over (sig0, sig1)), numbered by first segment
    cdef size_t cap = 16
    while cap < <size_t>(2 * n_seg + 2):
        cap *= 2
    cdef vector[uint64_t] t0, t1
    cdef vector[int32_t] tid
    t0.assign(cap, 0)
    t1.assign(cap, 0)
    tid.assign(cap, -1)
    seg_class.assign(n_seg, -1)
    cdef int32_t n_classes = 0
    cdef size_t slot
    a0 = 0
    a1 = 0
    c_run = 0
    with nogil:
        for s in range(n_seg):
            a0 ^= d0[s]
            a1 ^= d1[s]
            c_run += cover[s]
            if c_run <= 0:
                continue
            h = a0 * 0x9E3779B97F4A7C15ULL ^ a1
            h ^= h >> 29
            slot = h & (cap - 1)
            while tid[slot] >= 0 and (t0[slot] != a0 or t1[slot] != a1):
                slot = (slot + 1) & (cap - 1)
            if tid[slot] < 0:
                tid[slot] = n_classes
                t0[slot] = a0
                t1[slot] = a1
                n_classes += 1
            seg_class[s] = tid[slot]
    # each class's intervals: consecutive segments of one class merge
    cdef vector[int64_t] last_hi, n_iv, size
    cdef vector[int32_t] ptr
    last_hi.assign(n_classes, -1)
    n_iv.assign(n_classes, 0)
    size.assign(n_classes, 0)
    cdef int32_t c
    for s in range(n_seg):
        c = seg_class[s]
        if c < 0:
            continue
        if last_hi[c] != cuts[s]:
            n_iv[c] += 1
        last_hi[c] = cuts[s + 1]
        size[c] += cuts[s + 1] - cuts[s]
    ptr_arr = np.zeros(n_classes + 1, dtype=np.int32)
    cdef int32_t[::1] ptr_v = ptr_arr
    for c in range(n_classes):
        ptr_v[c + 1] = ptr_v[c] + <int32_t>(2 * n_iv[c])
    bounds_arr = np.zeros(ptr_v[n_classes], dtype=np.int32)
    cdef int32_t[::1] bounds = bounds_arr
    cdef vector[int32_t] fill
    fill.assign(n_classes, 0)
    last_hi.assign(n_classes, -1)
    for s in range(n_seg):
        c = seg_class[s]
        if c < 0:
            continue
        if last_hi[c] == cuts[s]:
            bounds[ptr_v[c] + fill[c] - 1] = <int32_t>cuts[s + 1]
        else:
            bounds[ptr_v[c] + fill[c]] = <int32_t>cuts[s]
            bounds[ptr_v[c] + fill[c] + 1] = <int32_t>cuts[s + 1]
            fill[c] += 2
        last_hi[c] = cuts[s + 1]
    # verification and class sets: a weight is the union of its segments' classes, token count
    # for token count
    cdef Py_ssize_t n_words = max(1, (n_classes + 63) // 64)
    words_arr = np.zeros(n_words, dtype=np.uint64)
    cdef uint64_t[::1] words = words_arr
    cdef vector[int32_t] stamp
    stamp.assign(n_classes, -1)
    cdef int64_t n_tok, got
    sets = []
    for w in range(n_weights):
        for i in range(n_words):
            words[i] = 0
        n_tok = 0
        got = 0
        for k in range(wp[w] // 2, wp[w + 1] // 2):
            n_tok += cuts[seg_hi[k]] - cuts[seg_lo[k]]
            for s in range(seg_lo[k], seg_hi[k]):
                c = seg_class[s]
                if stamp[c] != w:
                    stamp[c] = <int32_t>w
                    got += size[c]
                    words[c >> 6] |= (<uint64_t>1) << (c & 63)
        if got != n_tok:  # pragma: no cover - a 128-bit hash collision
            raise AssertionError("token quotient: a class straddles a weight (hash collision)")
        sets.append(int.from_bytes(words_arr.tobytes(), "little"))
    return ptr_arr, bounds_arr, sets


def class_of_tokens(const int32_t[::1] class_ptr, const int32_t[::1] class_bounds, Py_ssize_t n_internal):
    """``int32[n_internal]``: the class of each internal token, ``-1`` when it has none."""
    out_arr = np.full(n_internal, -1, dtype=np.int32)
    cdef int32_t[::1] out = out_arr
    cdef Py_ssize_t c, k, t
    with nogil:
        for c in range(class_ptr.shape[0] - 1):
            k = class_ptr[c]
            while k < class_ptr[c + 1]:
                for t in range(class_bounds[k], class_bounds[k + 1]):
                    out[t] = <int32_t>c
                k += 2
    return out_arr
