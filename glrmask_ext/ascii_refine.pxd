# cython: language_level=3
"""Refining a labelling of the ASCII bytes by one character class's membership — the step both
byte-group computations share (``glrmask_ext.byte_groups.ascii_groups`` for the lexer's global
groups, ``glrmask_ext.lexer_compile``'s per-terminal byte partitions)."""


cdef inline int refine_ascii_labels(int* label, int n_labels, object pts) except -1:
    """Split the labels ``label[0..127]`` (``n_labels`` of them, numbered by smallest byte) by
    membership in a class whose ASCII toggle points are ``pts`` (increasing bytes < 128 where
    membership flips, starting outside); returns the new number of labels, again numbered by
    smallest byte. A class with no toggle point splits nothing."""
    cdef int member[128]
    cdef int remap[258]
    cdef int b, k, nxt, pos = 0, key, count = 0
    cdef bint inside = False
    cdef object p
    if not pts:
        return n_labels
    for p in pts:
        nxt = p
        for b in range(pos, nxt):
            member[b] = inside
        inside = not inside
        pos = nxt
    for b in range(pos, 128):
        member[b] = inside
    for k in range(2 * n_labels):
        remap[k] = -1
    for b in range(128):
        key = 2 * label[b] + member[b]
        if remap[key] < 0:
            remap[key] = count
            count += 1
        label[b] = remap[key]
    return count
