"""The ASCII half of ``glrmask.lexer.program._byte_groups`` in C.

Why: a new JSON Schema's lexer computes the byte groups of every terminal's class set (hundreds
of sets, a few dozen classes each) before its first mask; the Python sweep costs some 20 us per
set, this some 1 us. Same answer as the Python sweep (tests compare them): bytes 0..127 grouped
by their membership in each class, groups numbered by their smallest byte.
"""
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF


def ascii_groups(list edges):
    """``edges``: per class, its ASCII toggle points (``ByteClass.ascii_edges``: increasing
    bytes < 128 where membership flips, starting outside). Returns ``(groups, group_of)``: the
    groups of bytes 0..127, each a tuple of increasing bytes, ordered by smallest byte, and the
    group of each of the 128 bytes (a list)."""
    cdef int label[128]
    cdef int member[128]
    cdef int remap[258]
    cdef int n_labels = 1
    cdef int b, k, nxt, pos, key, count
    cdef bint inside
    cdef tuple pts
    cdef object p
    for b in range(128):
        label[b] = 0
    for pts in edges:
        if not pts:
            continue  # membership constant over ASCII: splits nothing
        # membership of each byte, from the toggle points
        inside = False
        pos = 0
        for p in pts:
            nxt = p
            for b in range(pos, nxt):
                member[b] = inside
            inside = not inside
            pos = nxt
        for b in range(pos, 128):
            member[b] = inside
        # refine: (old label, membership) -> new label, numbered in byte order
        for k in range(2 * n_labels):
            remap[k] = -1
        count = 0
        for b in range(128):
            key = 2 * label[b] + member[b]
            if remap[key] < 0:
                remap[key] = count
                count += 1
            label[b] = remap[key]
        n_labels = count
    cdef list buckets = [[] for _ in range(n_labels)]
    cdef list group_of = [0] * 128
    for b in range(128):
        (<list>buckets[label[b]]).append(b)
        group_of[b] = label[b]
    cdef tuple groups = PyTuple_New(n_labels)
    cdef object g
    for k in range(n_labels):
        g = tuple(buckets[k])
        Py_INCREF(g)
        PyTuple_SET_ITEM(groups, k, g)
    return groups, group_of
