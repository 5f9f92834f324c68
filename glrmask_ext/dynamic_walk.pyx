# cython: language_level=3
"""Pre-order walk of the vocabulary trie over a memoized transition table (dynamic masks).

The table ``int32[n_sets, 256]`` maps (configuration-set id, byte) to the next id (-2 dead,
-1 not computed yet). Cached transitions cost one array read; a miss calls back into the Python
recognizer (``rec.fill``), which may grow the table, so the view is re-read after each callback.
"""
import numpy as np
cimport numpy as cnp

cnp.import_array()


def walk_trie(object rec, int root, const int[::1] depth, const unsigned char[::1] byte_,
              const int[::1] internal, const int[::1] subtree_end, int max_depth,
              unsigned char[::1] allowed):
    """Set ``allowed[t] = 1`` for every internal token ``t`` whose bytes lead from set ``root`` to a
    live set. Returns the number of trie nodes visited."""
    cdef int[:, ::1] table = rec.table
    cdef cnp.ndarray stack_arr = np.empty(max_depth + 1, dtype=np.int32)
    cdef int[::1] stack = stack_arr
    cdef Py_ssize_t i = 1, n = depth.shape[0], visited = 0
    cdef int d, p, nxt, t
    stack[0] = root
    while i < n:
        d = depth[i]
        p = stack[d - 1]
        nxt = table[p, byte_[i]]
        if nxt == -1:
            nxt = rec.fill(p, byte_[i])
            table = rec.table
        visited += 1
        if nxt == -2:
            i = subtree_end[i]
            continue
        stack[d] = nxt
        t = internal[i]
        if t >= 0:
            allowed[t] = 1
        i += 1
    return visited
