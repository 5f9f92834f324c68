# cython: language_level=3, wraparound=False, boundscheck=False, cdivision=True
# distutils: language = c++
"""Native core of :mod:`glrmask.compiler.lexer_classes`: the byte groups of a dense lexer and the
Moore refinement levels of its states (lexer-state classes by behaviour within ``h`` bytes).

Why native: both are column and row comparisons over the lexer's transition and event tables —
numpy needs several full-table copies per refinement level (tens of ms on a median schema, a
fifth of its Terminal DWA), C needs one pass. The partitions are the same as the numpy
description's (the tests compare them); classes are represented by their smallest member, so
no label numbering shows."""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libcpp.vector cimport vector
from libcpp.algorithm cimport sort as cpp_sort

import numpy as np

__all__ = ["byte_groups", "column_labels", "event_keys", "refinement_levels"]


cdef extern from *:
    """
    #include <vector>
    #include <algorithm>
    #include <cstdint>
    #include <cstring>
    static inline uint64_t sc_mix(uint64_t h, uint64_t x) {
        x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
        h ^= x; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 29;
        return h;
    }
    static inline bool sc_rows_equal(const int64_t* rows, int64_t width, int32_t a, int32_t b) {
        return std::memcmp(rows + (int64_t)a * width, rows + (int64_t)b * width, width * sizeof(int64_t)) == 0;
    }
    """
    uint64_t sc_mix(uint64_t h, uint64_t x) nogil
    bint sc_rows_equal(const int64_t* rows, int64_t width, int32_t a, int32_t b) nogil


cdef void _group_rows(const int64_t* rows, int64_t n, int64_t width, int32_t* label) noexcept nogil:
    """Label ``n`` rows of ``width`` int64s: equal iff the rows are equal, numbered by first row.
    Rows in order, each looked up among the first rows of the labels so far (open addressing by
    row hash): a row is compared in full only with a first row of equal hash, so a run of equal
    rows costs one comparison each (sorting them compared equal rows over and over, a 16 KiB
    ``memcmp`` each for the 256 columns of a lexer with a thousand states)."""
    cdef vector[uint64_t] h
    cdef vector[int32_t] table  # slot -> first row of a label, -1: empty
    cdef int64_t i, j, cap = 16, slot
    cdef uint64_t x
    cdef int32_t next_label = 0, rep
    while cap < 2 * n + 2:
        cap *= 2
    h.resize(n)
    table.assign(cap, -1)
    for i in range(n):
        x = 0x9e3779b97f4a7c15ULL
        for j in range(width):
            x = sc_mix(x, <uint64_t>rows[i * width + j])
        h[i] = x
        slot = <int64_t>(x & <uint64_t>(cap - 1))
        while True:
            rep = table[slot]
            if rep < 0:
                table[slot] = <int32_t>i
                label[i] = next_label
                next_label += 1
                break
            if h[rep] == x and sc_rows_equal(rows, width, rep, <int32_t>i):
                label[i] = label[rep]
                break
            slot = (slot + 1) & (cap - 1)


def event_keys(const int64_t[::1] ev_ptr, const int32_t[::1] ev_term, const int32_t[::1] ev_cond,
               Py_ssize_t n_states):
    """``int64[n_states, 256]``: 0 for a transition without events, else the id of its event
    list (``(term, cond)`` pairs), equal iff the lists are equal, numbered 1, 2, … by first
    appearance in (state, byte) order. Lists are interned by content: a hash table of the first
    cell with each list, every hit compared in full."""
    out = np.zeros((n_states, 256), dtype=np.int64)
    cdef int64_t[:, ::1] o = out
    cdef int64_t cells = n_states * 256, c, lo, hi, len_c, cap = 64, slot, prev
    cdef int64_t next_id = 1, i
    cdef uint64_t h
    cdef vector[int64_t] tab_cell, tab_id
    cdef bint same
    cdef int64_t busy = 0
    for c in range(cells):
        if ev_ptr[c + 1] != ev_ptr[c]:
            busy += 1
    while cap < 2 * busy + 2:
        cap *= 2
    with nogil:
        tab_cell.assign(cap, -1)
        tab_id.assign(cap, 0)
        for c in range(cells):
            lo = ev_ptr[c]
            hi = ev_ptr[c + 1]
            if hi == lo:
                continue
            h = 0x9e3779b97f4a7c15ULL + <uint64_t>(hi - lo)
            for i in range(lo, hi):
                h = sc_mix(h, (<uint64_t><uint32_t>ev_term[i]) << 32 | <uint32_t>ev_cond[i])
            slot = <int64_t>(h & <uint64_t>(cap - 1))
            while True:
                prev = tab_cell[slot]
                if prev < 0:
                    tab_cell[slot] = c
                    tab_id[slot] = next_id
                    o[c // 256, c % 256] = next_id
                    next_id += 1
                    break
                len_c = ev_ptr[prev + 1] - ev_ptr[prev]
                same = len_c == hi - lo
                i = 0
                while same and i < len_c:
                    if ev_term[ev_ptr[prev] + i] != ev_term[lo + i] or ev_cond[ev_ptr[prev] + i] != ev_cond[lo + i]:
                        same = False
                    i += 1
                if same:
                    o[c // 256, c % 256] = tab_id[slot]
                    break
                slot = (slot + 1) & (cap - 1)
    return out


def byte_groups(const int32_t[:, ::1] trans, const int64_t[:, ::1] ev, const int32_t[:, ::1] ctrans):
    """The bytes every state steps alike (same target in ``trans``, same event key in ``ev``) and
    every condition too (same successor in ``ctrans``), as groups ordered by their smallest byte,
    each ascending. Everything is read row by row, in memory order: the 256 column hashes are
    folded a row at a time, each byte's column is then checked against the first byte of equal
    hash in one more pass over the rows, and a byte whose check fails (a hash collision) is
    compared with every group's first byte."""
    cdef int64_t n = trans.shape[0], m = ctrans.shape[0], b, s, r
    cdef uint64_t h[256]
    cdef int32_t label[256]
    cdef int32_t cand[256]   # the first byte with b's hash (b itself when none comes before)
    cdef char ok[256]        # b's column equals cand[b]'s
    cdef int32_t first[256]  # the first byte of each group
    cdef int32_t n_groups = 0, g
    cdef bint same
    with nogil:
        for b in range(256):
            h[b] = 0x9e3779b97f4a7c15ULL
        for s in range(n):
            for b in range(256):
                h[b] = sc_mix(h[b], <uint64_t>trans[s, b])
        for s in range(n):
            for b in range(256):
                h[b] = sc_mix(h[b], <uint64_t>ev[s, b])
        for s in range(m):
            for b in range(256):
                h[b] = sc_mix(h[b], <uint64_t>ctrans[s, b])
        for b in range(256):
            cand[b] = <int32_t>b
            ok[b] = 1
            for r in range(b):
                if cand[r] == r and h[r] == h[b]:
                    cand[b] = <int32_t>r
                    break
        for s in range(n):
            for b in range(256):
                if trans[s, b] != trans[s, cand[b]] or ev[s, b] != ev[s, cand[b]]:
                    ok[b] = 0
        for s in range(m):
            for b in range(256):
                if ctrans[s, b] != ctrans[s, cand[b]]:
                    ok[b] = 0
        for b in range(256):
            label[b] = -1
            if cand[b] != b and ok[b] and label[cand[b]] >= 0 and first[label[cand[b]]] == cand[b]:
                label[b] = label[cand[b]]
                continue
            for g in range(n_groups):  # (a collision: exact comparisons)
                r = first[g]
                same = True
                s = 0
                while same and s < n:
                    same = trans[s, b] == trans[s, r] and ev[s, b] == ev[s, r]
                    s += 1
                s = 0
                while same and s < m:
                    same = ctrans[s, b] == ctrans[s, r]
                    s += 1
                if same:
                    label[b] = g
                    break
            if label[b] < 0:
                first[n_groups] = <int32_t>b
                label[b] = n_groups
                n_groups += 1
    groups: list = [[] for _ in range(n_groups)]
    for b in range(256):
        groups[label[b]].append(<int>b)
    return tuple(tuple(g) for g in groups)


def column_labels(const int64_t[:, ::1] cols):
    """``int32[n_columns]``: per column, a label equal iff the columns are equal, numbered by
    first column."""
    cdef int64_t r = cols.shape[0], nc = cols.shape[1], i, j
    cdef vector[int64_t] rows
    out = np.empty(nc, dtype=np.int32)
    cdef int32_t[::1] o = out
    rows.resize(nc * r)
    with nogil:
        for i in range(r):  # (row-major reads: the columns are far apart in memory)
            for j in range(nc):
                rows[j * r + i] = cols[i, j]
        _group_rows(rows.data(), nc, r, &o[0])
    return out


def refinement_levels(const int32_t[:, ::1] trans, const int64_t[:, ::1] observed, long max_h):
    """Moore's refinement of the states of ``trans`` (``int32[n, k]``, -1 = DEAD) from the
    partition by equal ``observed`` rows: level ``h + 1`` splits each class of level ``h`` by the
    level-``h`` classes of the targets (DEAD only to DEAD); only classes with several members can
    split. Stops after ``max_h`` levels, when a level changes nothing, or when every state is
    alone. Returns the levels as ``int32[n]`` arrays of each state's smallest class member."""
    cdef int64_t n = trans.shape[0], k = trans.shape[1], w = observed.shape[1] if observed.shape[0] else 0
    cdef vector[int32_t] lab, new_lab, act
    cdef vector[int64_t] sig
    cdef vector[int32_t] count, sub
    cdef int64_t i, j, h = 0, n_cls, m, a, t
    levels = []
    if n == 0:
        return [np.zeros(0, dtype=np.int32)]
    lab.resize(n)
    with nogil:
        _group_rows(&observed[0, 0], n, w, lab.data())
    n_cls = 0
    for i in range(n):
        if lab[i] + 1 > n_cls:
            n_cls = lab[i] + 1
    levels.append(_smallest(lab, n))
    while h < max_h and n_cls < n:
        with nogil:
            count.assign(n_cls, 0)
            for i in range(n):
                count[lab[i]] += 1
            act.clear()
            for i in range(n):
                if count[lab[i]] > 1:
                    act.push_back(<int32_t>i)
            a = act.size()
            sig.resize(a * (k + 1))
            for i in range(a):
                sig[i * (k + 1)] = lab[act[i]]
                for j in range(k):
                    t = trans[act[i], j]
                    sig[i * (k + 1) + 1 + j] = -1 if t < 0 else lab[t]
            sub.resize(a)
            if a:
                _group_rows(sig.data(), a, k + 1, sub.data())
            # new classes: lone states keep theirs, active ones take n_cls + their sub-group;
            # renumbered densely (any numbering: levels are stored as smallest members)
            new_lab.assign(lab.begin(), lab.end())
            for i in range(a):
                new_lab[act[i]] = <int32_t>(n_cls + sub[i])
            m = _renumber(new_lab, n)
        if m == n_cls:
            break
        lab.swap(new_lab)
        n_cls = m
        levels.append(_smallest(lab, n))
        h += 1
    return levels


cdef int64_t _renumber(vector[int32_t]& lab, int64_t n) noexcept nogil:
    """Relabel densely in order of first appearance; the number of classes."""
    cdef int32_t top = 0
    cdef int64_t i
    for i in range(n):
        if lab[i] > top:
            top = lab[i]
    cdef vector[int32_t] name
    name.assign(top + 1, -1)
    cdef int32_t next_label = 0
    for i in range(n):
        if name[lab[i]] < 0:
            name[lab[i]] = next_label
            next_label += 1
        lab[i] = name[lab[i]]
    return next_label


cdef object _smallest(vector[int32_t]& lab, int64_t n):
    """Per state, the smallest state of its class."""
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef vector[int32_t] first
    cdef int64_t i
    cdef int32_t top = 0
    for i in range(n):
        if lab[i] > top:
            top = lab[i]
    first.assign(top + 1, -1)
    for i in range(n):
        if first[lab[i]] < 0:
            first[lab[i]] = <int32_t>i
        o[i] = first[lab[i]]
    return out
