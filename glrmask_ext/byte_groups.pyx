"""The ASCII half of ``glrmask.lexer.program._byte_groups`` in C.

Why: a new JSON Schema's lexer computes the byte groups of every terminal's class set (hundreds
of sets, a few dozen classes each) before its first mask; the Python sweep costs some 20 us per
set, this some 1 us. Same answer as the Python sweep (tests compare them): bytes 0..127 grouped
by their membership in each class, groups numbered by their smallest byte.
"""
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF

from glrmask_ext.ascii_refine cimport refine_ascii_labels


def ascii_groups(list edges):
    """``edges``: per class, its ASCII toggle points (``ByteClass.ascii_edges``: increasing
    bytes < 128 where membership flips, starting outside). Returns ``(groups, group_of)``: the
    groups of bytes 0..127, each a tuple of increasing bytes, ordered by smallest byte, and the
    group of each of the 128 bytes (a list)."""
    cdef int label[128]
    cdef int n_labels = 1
    cdef int b, k
    cdef tuple pts
    for b in range(128):
        label[b] = 0
    for pts in edges:
        n_labels = refine_ascii_labels(label, n_labels, pts)
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


def joint_classes(list rows):
    """The bytes every row steps alike: ``rows`` are byte -> group maps (sequences of 256 small
    ints, one per live terminal of a lexer state). Returns ``(cls, reps)``: the class of each byte
    (a list) and each class's smallest byte (a tuple), classes numbered by that byte — the
    partition ``glrmask.lexer.lexer.Lexer._partition_of`` builds by hashing each byte's column
    of groups, here refined row by row in C (a large schema's key state has hundreds of rows:
    ~1.4 ms a state in Python)."""
    cdef int label[256]
    cdef int nxt[256]
    cdef int slot_key[512]
    cdef int slot_val[512]
    cdef int n_new, b, g, key, h
    cdef object row
    for b in range(256):
        label[b] = 0
    for row in rows:
        if len(row) != 256:
            raise ValueError("joint_classes: every row maps 256 bytes")
        for h in range(512):
            slot_key[h] = -1
        n_new = 0
        for b in range(256):
            g = row[b]
            if g < 0 or g > 0xFFFF:
                raise ValueError("joint_classes: group ids must be in 0..65535")
            key = (label[b] << 16) | g
            h = (<unsigned int>key * 2654435761u) >> 23  # 9 bits: 512 slots for at most 256 keys
            while slot_key[h] != -1 and slot_key[h] != key:
                h = (h + 1) & 511
            if slot_key[h] == -1:
                slot_key[h] = key
                slot_val[h] = n_new
                n_new += 1
            nxt[b] = slot_val[h]
        for b in range(256):
            label[b] = nxt[b]

    # renumber by smallest byte (first occurrence)
    for h in range(256):
        slot_val[h] = -1
    cdef list cls = [0] * 256
    cdef list reps = []
    n_new = 0
    for b in range(256):
        g = label[b]
        if slot_val[g] < 0:
            slot_val[g] = n_new
            n_new += 1
            reps.append(b)
        cls[b] = slot_val[g]
    return cls, tuple(reps)
