# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Native kernels of the vocabulary trie (glrmask.trie): expanding internal-id masks to original ids.

Why it is native: the last step of every mask call turns a bitmap over internal (trie-ordered)
token ids into the packed bitmap over the model's original ids. In numpy that is an unpack, a
gather over every original id and a pack (a few hundred microseconds for a 150k vocabulary);
here it is one pass, and a sparse pass when few tokens are allowed.

Both kernels produce bit ``j % 32`` of word ``j // 32`` for original id ``j``, as int32 words.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memset

import numpy as np


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define GLRMASK_POPCOUNT64(x) __builtin_popcountll(x)
    #define GLRMASK_CTZ64(x) __builtin_ctzll(x)
    #else
    static inline int GLRMASK_POPCOUNT64(unsigned long long x) {
        int c = 0; while (x) { x &= x - 1; c++; } return c; }
    static inline int GLRMASK_CTZ64(unsigned long long x) {
        int c = 0; while (!(x & 1ULL)) { x >>= 1; c++; } return c; }
    #endif
    """
    int GLRMASK_POPCOUNT64(unsigned long long x) nogil
    int GLRMASK_CTZ64(unsigned long long x) nogil


def count_bits(const uint64_t[::1] bits, Py_ssize_t n_bits):
    """Number of set bits among the first ``n_bits`` bits."""
    cdef Py_ssize_t w, full = n_bits >> 6
    cdef int64_t total = 0
    with nogil:
        for w in range(full):
            total += GLRMASK_POPCOUNT64(bits[w])
        if n_bits & 63:
            total += GLRMASK_POPCOUNT64(bits[full] & ((<uint64_t>1 << (n_bits & 63)) - 1))
    return total


def expand_dense(const uint64_t[::1] bits, const int32_t[::1] orig_to_internal, int32_t[::1] out):
    """Gather: for every original id, test its internal id's bit. Cost ~ vocabulary size.

    ``out`` must have ``ceil(n_logits/32)`` words; ids past ``len(orig_to_internal)`` (padding)
    come out zero. ``bits`` must cover every internal id present in ``orig_to_internal``.
    """
    cdef Py_ssize_t size = orig_to_internal.shape[0]
    cdef Py_ssize_t n_words = out.shape[0]
    cdef Py_ssize_t w, j, lo, hi
    cdef int32_t i, safe
    cdef uint32_t acc
    with nogil:
        for w in range(n_words):
            acc = 0
            lo = w * 32
            hi = lo + 32
            if hi > size:
                hi = size
            for j in range(lo, hi):
                # Branch-free: masks of mixed density would mispredict on every other id.
                i = orig_to_internal[j]
                safe = i if i >= 0 else 0
                acc |= <uint32_t>(((bits[safe >> 6] >> (safe & 63)) & 1) & (i >= 0)) << (j - lo)
            out[w] = <int32_t>acc


def expand_sparse(const uint64_t[::1] bits, Py_ssize_t n_internal, const int32_t[::1] i2o_ptr,
                  const int32_t[::1] i2o_ids, int32_t[::1] out):
    """Scatter: for every set internal bit, set the bits of its original ids. Cost ~ set bits."""
    cdef Py_ssize_t n_in = (n_internal + 63) >> 6
    cdef Py_ssize_t w, k
    cdef uint64_t word
    cdef int64_t i
    cdef int32_t j
    cdef uint32_t* dst = <uint32_t*>&out[0] if out.shape[0] else NULL
    with nogil:
        if out.shape[0]:
            memset(dst, 0, out.shape[0] * sizeof(uint32_t))
        for w in range(n_in):
            word = bits[w]
            if w == n_in - 1 and (n_internal & 63):
                word &= ((<uint64_t>1) << (n_internal & 63)) - 1
            while word:
                i = (w << 6) + GLRMASK_CTZ64(word)
                word &= word - 1
                for k in range(i2o_ptr[i], i2o_ptr[i + 1]):
                    j = i2o_ids[k]
                    dst[j >> 5] |= (<uint32_t>1) << (j & 31)


cdef inline void _set_range(uint64_t[::1] out, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Set bits ``lo .. hi-1`` of a uint64 bitmap."""
    cdef Py_ssize_t wl = lo >> 6, wh = (hi - 1) >> 6, w
    cdef uint64_t first = ~<uint64_t>0 << (lo & 63)
    cdef uint64_t last = ~<uint64_t>0 >> (63 - ((hi - 1) & 63))
    if wl == wh:
        out[wl] |= first & last
        return
    out[wl] |= first
    for w in range(wl + 1, wh):
        out[w] = ~<uint64_t>0
    out[wh] |= last


def expand_classes(const uint64_t[::1] class_bits, const int32_t[::1] class_ptr,
                   const int32_t[::1] class_bounds, uint64_t[::1] out):
    """OR into ``out`` (a bitmap over internal ids) the token intervals of every class set in
    ``class_bits`` (the internal token quotient, glrmask.compiler.token_classes): one pass over the
    set classes, each a few interval fills."""
    cdef Py_ssize_t n_classes = class_ptr.shape[0] - 1
    cdef Py_ssize_t w, c, k
    cdef uint64_t word
    with nogil:
        for w in range(class_bits.shape[0]):
            word = class_bits[w]
            while word:
                c = (w << 6) + GLRMASK_CTZ64(word)
                word &= word - 1
                if c >= n_classes:
                    break
                for k in range(class_ptr[c], class_ptr[c + 1], 2):
                    if class_bounds[k + 1] > class_bounds[k]:
                        _set_range(out, class_bounds[k], class_bounds[k + 1])


def subtree_byte_sets(const int32_t[::1] child_ptr, const unsigned char[::1] child_byte,
                      const int32_t[::1] child_node):
    """``uint64[n_nodes, 4]``: the set of bytes spelled anywhere below each trie node (children
    have higher ids than their parent, so one reverse pass suffices)."""
    cdef Py_ssize_t n = child_ptr.shape[0] - 1
    out_arr = np.zeros((max(n, 1), 4), dtype=np.uint64)
    cdef uint64_t[:, ::1] out = out_arr
    cdef Py_ssize_t node, j, c, k
    cdef long byte
    with nogil:
        for node in range(n - 1, -1, -1):
            for j in range(child_ptr[node], child_ptr[node + 1]):
                c = child_node[j]
                byte = child_byte[j]
                out[node, byte >> 6] |= (<uint64_t>1) << (byte & 63)
                for k in range(4):
                    out[node, k] |= out[c, k]
    return out_arr
