# cython: language_level=3
"""One packed int32 mask row (bit ``id % 32`` of word ``id // 32``) as the guards write it from C.

Guards clear bits in the same rows the grammar fills, so they accept what a grammar mask is stored
in: a 1-D numpy int32/uint32 array (any stride), or a CPU torch tensor (viewed through ``.numpy()``,
which shares memory). Validation reads the array header through the numpy C API (no attribute
lookups), then every bit operation runs on raw words without the GIL. Words are read as uint32 so
bit 31 is an ordinary bit instead of the sign.
"""
cimport numpy as cnp
from libc.stdint cimport int64_t, uint32_t


cdef struct WordRow:
    char* data
    Py_ssize_t stride
    Py_ssize_t n_words


cdef inline object acquire_word_row(object out_words, WordRow* row):
    """Check ``out_words`` is one writable packed row and describe it in ``row``.

    Returns the numpy array that owns the words; the caller keeps it alive while it uses ``row``.
    """
    cdef object arr = out_words
    if not cnp.PyArray_Check(arr):
        to_numpy = getattr(arr, "numpy", None)
        if to_numpy is None:
            raise TypeError(
                f"mask row must be a numpy array or a CPU torch tensor, got {type(out_words).__name__}"
            )
        try:
            arr = to_numpy()
        except (RuntimeError, TypeError) as exc:  # e.g. a CUDA tensor
            raise TypeError(f"mask row must live in CPU memory: {exc}") from exc
        if not cnp.PyArray_Check(arr):
            raise TypeError(f"mask row's numpy() gave {type(arr).__name__}, not a numpy array")
    cdef cnp.ndarray a = <cnp.ndarray>arr
    if cnp.PyArray_NDIM(a) != 1:
        raise ValueError(f"mask row must be 1-D (one row of packed words), got shape {arr.shape}")
    cdef int t = cnp.PyArray_TYPE(a)
    if (t != cnp.NPY_INT32 and t != cnp.NPY_UINT32) or not cnp.PyArray_ISNOTSWAPPED(a):
        raise TypeError(f"mask row must have dtype int32 (or uint32), got {arr.dtype}")
    if not cnp.PyArray_ISWRITEABLE(a):
        raise ValueError("mask row is read-only")
    row.data = cnp.PyArray_BYTES(a)
    row.stride = cnp.PyArray_STRIDE(a, 0)
    row.n_words = cnp.PyArray_DIM(a, 0)
    return a


cdef inline uint32_t* word_at(const WordRow* row, Py_ssize_t k) noexcept nogil:
    return <uint32_t*>(row.data + k * row.stride)


cdef inline Py_ssize_t clear_ids(
    const WordRow* row, const int64_t* ids, Py_ssize_t n, int64_t* cleared
) noexcept nogil:
    """Clear the bits of ``ids`` that are set; write those ids to ``cleared`` and return how many.

    Ids outside the row (negative or past its width) are skipped: they are disallowed already. A
    repeated id is cleared (and counted) once.
    """
    cdef Py_ssize_t k, m = 0
    cdef int64_t tok, word
    cdef uint32_t bit
    cdef uint32_t* w
    for k in range(n):
        tok = ids[k]
        if tok < 0:
            continue
        word = tok >> 5
        if word >= row.n_words:
            continue
        w = word_at(row, word)
        bit = (<uint32_t>1) << (tok & 31)
        if w[0] & bit:
            w[0] &= ~bit
            cleared[m] = tok
            m += 1
    return m


cdef inline void set_ids(const WordRow* row, const int64_t* ids, Py_ssize_t n) noexcept nogil:
    """Set the bits of ``ids`` (all inside the row): undoes :func:`clear_ids`."""
    cdef Py_ssize_t k
    cdef int64_t tok
    for k in range(n):
        tok = ids[k]
        word_at(row, tok >> 5)[0] |= (<uint32_t>1) << (tok & 31)


cdef inline bint row_is_empty(const WordRow* row) noexcept nogil:
    """True when no bit is set (stops at the first non-zero word, so a live row costs O(1))."""
    cdef Py_ssize_t k
    for k in range(row.n_words):
        if word_at(row, k)[0]:
            return False
    return True
