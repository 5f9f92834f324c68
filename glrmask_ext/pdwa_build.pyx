# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Native determinization of the Parser DWA (compile time; semantics in
:mod:`glrmask.compiler.parser_dwa`).

Why native. The native runtime needs the *complete* determinized automaton, and its construction —
memoized closures of settled product states ``(TDWA node, pending writes)`` and a subset
construction over read states with residual class sets — runs millions of small set operations
(C-subset × GPT-2: 51k states, 772k closures). Here every set is a fixed-width ``uint64`` bitset of
``ceil(n_classes / 64)`` words, interned once in a hash-consed pool so that a closure's reads and a
state's members are ``(read state, bitset id)`` pairs of machine integers; closures, states and
rows live in flat growable arrays with open-addressing hash tables; no Python object exists per
product state and the GIL is released while building.

Identical output. The construction visits everything in the order of the Python construction it
replaces (kept as the test oracle, ``tests/_parser_dwa_reference.py``): roots in
``boundary_states`` order, then states breadth-first, each state's DEFAULT edge first and its
explicit labels ascending, closures depth-first in TDWA-edge order. States are therefore numbered
exactly alike, and weights are numbered by first appearance in the exported rows.

Encodings. A read state ``(terminal t, effect state e, next TDWA node d)`` is one ``uint64``:
``g << 32 | (d + 1)`` with ``g`` the *global* effect state (``base[t] + e``; automata are
concatenated in terminal order, so ``g`` orders like ``(t, e)`` and the key orders like the tuple);
``d = -1`` is OPEN (the read state of an open final). Bitset id 0 is the empty set.

Two shortcuts that change nothing observable. A state's row steps, per label, only the members
whose effect state names the label (their explicit edges are bucketed by label once per state;
every other member keeps its DEFAULT step, and the members whose DEFAULT dies are never visited).
A closure's walks all start at their automaton's start state with the same top pending write, so
the start states' steps are one table by LR state then automaton (when it fits in 64 MiB): a
walk that dies at once costs one load. Github_ultra #0 (1.46M states): 19 -> 14 s CPU.

Resumable. :meth:`Builder.run` may stop on a state budget or a deadline and be called again: a
closure enters its memo only when finished and a state's row only when all its edges are, so a
stopped run leaves only finished entries, and redoing the interrupted state re-interns the same
states under the same numbers.
"""
cimport cython
import numpy as np
cimport numpy as cnp

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cnp.import_array()

__all__ = ["Builder", "COMPLETE", "STOPPED", "MAX_STATES", "MAX_CLOSURES"]

# statuses of Builder.run
COMPLETE = 0
"""Every reachable state is determinized."""
STOPPED = 1
"""The run stopped on its ``max_states`` or its time; calling again continues."""
MAX_STATES = 2
"""The ``max_states`` budget of the builder is exceeded (final: later runs report it again)."""
MAX_CLOSURES = 3
"""The ``max_closures`` budget of the builder is exceeded (final)."""

# internal return codes of the nogil functions
DEF OK = 0
DEF E_MEM = 1
DEF E_STATES = 2
DEF E_CLOSURES = 3
DEF E_TIME = 4
DEF E_LIMIT = 5
DEF E_PAUSE = 6

DEF OPEN = -1
DEF SLICE = 0.05  # seconds between returns to the interpreter (signals, e.g. Ctrl-C)


# --------------------------------------------------------------------------- growable arrays
cdef struct I32Vec:
    int32_t* p
    int64_t n
    int64_t cap

cdef struct I64Vec:
    int64_t* p
    int64_t n
    int64_t cap

cdef struct U64Vec:
    uint64_t* p
    int64_t n
    int64_t cap


cdef int _grow(void** p, int64_t* cap, int64_t need, size_t item) noexcept nogil:
    """Make room for ``need`` items (amortized doubling)."""
    cdef int64_t c = cap[0]
    cdef void* q
    if need <= c:
        return OK
    if c < 16:
        c = 16
    while c < need:
        c *= 2
    q = realloc(p[0], <size_t>c * item)
    if q == NULL:
        return E_MEM
    p[0] = q
    cap[0] = c
    return OK


cdef inline int i32_reserve(I32Vec* v, int64_t need) noexcept nogil:
    return _grow(<void**>&v.p, &v.cap, need, sizeof(int32_t))

cdef inline int i64_reserve(I64Vec* v, int64_t need) noexcept nogil:
    return _grow(<void**>&v.p, &v.cap, need, sizeof(int64_t))

cdef inline int u64_reserve(U64Vec* v, int64_t need) noexcept nogil:
    return _grow(<void**>&v.p, &v.cap, need, sizeof(uint64_t))

cdef inline int i32_push(I32Vec* v, int32_t x) noexcept nogil:
    if v.n == v.cap and i32_reserve(v, v.n + 1):
        return E_MEM
    v.p[v.n] = x
    v.n += 1
    return OK

cdef inline int i64_push(I64Vec* v, int64_t x) noexcept nogil:
    if v.n == v.cap and i64_reserve(v, v.n + 1):
        return E_MEM
    v.p[v.n] = x
    v.n += 1
    return OK

cdef inline int u64_push(U64Vec* v, uint64_t x) noexcept nogil:
    if v.n == v.cap and u64_reserve(v, v.n + 1):
        return E_MEM
    v.p[v.n] = x
    v.n += 1
    return OK


# --------------------------------------------------------------------------- hashing
cdef inline uint64_t _mix(uint64_t h) noexcept nogil:
    """splitmix64's finalizer: a fixed, seedless mix (the build must not depend on any seed)."""
    h ^= h >> 30
    h *= 0xbf58476d1ce4e5b9ULL
    h ^= h >> 27
    h *= 0x94d049bb133111ebULL
    h ^= h >> 31
    return h

cdef inline uint64_t _fold(uint64_t h, uint64_t x) noexcept nogil:
    h = (h ^ x) * 0x9e3779b97f4a7c15ULL
    return h ^ (h >> 29)


cdef int _new_table(int32_t** table, int64_t size) noexcept nogil:
    """A hash table of ``size`` (a power of two) empty slots (``-1``)."""
    cdef int32_t* t = <int32_t*>malloc(<size_t>size * sizeof(int32_t))
    if t == NULL:
        return E_MEM
    memset(t, 0xff, <size_t>size * sizeof(int32_t))
    free(table[0])
    table[0] = t
    return OK


cdef int _rehash(int32_t** table, int64_t* mask, const uint64_t* hashes, int64_t n) noexcept nogil:
    """Double a table whose entry ``i`` has hash ``hashes[i]`` (ids ``0 .. n-1``)."""
    cdef int64_t size = (mask[0] + 1) * 2, m = size - 1, i, j
    cdef int32_t* t = NULL
    if _new_table(&t, size):
        return E_MEM
    for i in range(n):
        j = <int64_t>(hashes[i] & <uint64_t>m)
        while t[j] >= 0:
            j = (j + 1) & m
        t[j] = <int32_t>i
    free(table[0])
    table[0] = t
    mask[0] = m
    return OK


cdef inline void _place(int32_t* table, int64_t mask, uint64_t h, int32_t id) noexcept nogil:
    cdef int64_t j = <int64_t>(h & <uint64_t>mask)
    while table[j] >= 0:
        j = (j + 1) & mask
    table[j] = id


# --------------------------------------------------------------------------- interned int32 sequences
cdef struct SeqTab:  # exact interning of int32 sequences, each with an int32 value
    U64Vec hash
    I64Vec off
    I32Vec n
    I32Vec arena
    I32Vec val
    int32_t* table
    int64_t mask


cdef int seq_find(SeqTab* T, const int32_t* a, int32_t n, uint64_t* h_out, int32_t* out) noexcept nogil:
    """``out``: the id of sequence ``a[:n]``, or ``-1`` (then ``h_out`` is its hash, for :func:`seq_add`)."""
    cdef uint64_t h = 0x3243f6a8885a308dULL
    cdef int64_t j, i
    cdef int32_t e
    for i in range(n):
        h = _fold(h, <uint64_t><uint32_t>a[i])
    h = _mix(h ^ <uint64_t>n)
    h_out[0] = h
    j = <int64_t>(h & <uint64_t>T.mask)
    while True:
        e = T.table[j]
        if e < 0:
            break
        if T.hash.p[e] == h and T.n.p[e] == n and memcmp(T.arena.p + T.off.p[e], a, <size_t>n * 4) == 0:
            out[0] = e
            return OK
        j = (j + 1) & T.mask
    out[0] = -1
    return OK


cdef int seq_add(SeqTab* T, const int32_t* a, int32_t n, uint64_t h, int32_t val, int32_t* out) noexcept nogil:
    """Enter sequence ``a[:n]`` (not present; ``h`` from :func:`seq_find`) with value ``val``."""
    cdef int32_t e = <int32_t>T.n.n
    if u64_push(&T.hash, h) or i64_push(&T.off, T.arena.n) or i32_push(&T.n, n) or i32_push(&T.val, val) or \
            i32_reserve(&T.arena, T.arena.n + n):
        return E_MEM
    memcpy(T.arena.p + T.arena.n, a, <size_t>n * 4)
    T.arena.n += n
    _place(T.table, T.mask, h, e)
    if T.n.n * 2 > T.mask + 1 and _rehash(&T.table, &T.mask, T.hash.p, T.n.n):
        return E_MEM
    out[0] = e
    return OK


cdef void seq_free(SeqTab* T) noexcept nogil:
    free(T.hash.p); free(T.off.p); free(T.n.p); free(T.arena.p); free(T.val.p); free(T.table)


# --------------------------------------------------------------------------- the bitset pool
cdef struct Pool:
    int64_t W          # words per bitset
    U64Vec words       # bitset i is words[i*W : (i+1)*W]
    U64Vec hashes
    int32_t* table
    int64_t mask


cdef inline uint64_t _bits_hash(const uint64_t* b, int64_t W) noexcept nogil:
    """Four independent lanes (a bitset is tens of words: one serial chain of multiplies would
    be the cost of interning), folded together at the end."""
    cdef uint64_t h0 = 0x243f6a8885a308d3ULL, h1 = 0x13198a2e03707344ULL
    cdef uint64_t h2 = 0xa4093822299f31d0ULL, h3 = 0x082efa98ec4e6c89ULL
    cdef int64_t j = 0
    while j + 4 <= W:
        h0 = _fold(h0, b[j])
        h1 = _fold(h1, b[j + 1])
        h2 = _fold(h2, b[j + 2])
        h3 = _fold(h3, b[j + 3])
        j += 4
    while j < W:
        h0 = _fold(h0, b[j])
        j += 1
    return _mix(_fold(_fold(_fold(h0, h1), h2), h3))


cdef int pool_intern(Pool* P, const uint64_t* b, int32_t* out) noexcept nogil:
    """The id of bitset ``b`` (added when new). ``b`` must not point into the pool."""
    cdef int64_t W = P.W, n = P.hashes.n, j
    cdef uint64_t h, any_ = 0
    cdef int32_t id
    for j in range(W):
        any_ |= b[j]
    if not any_ and n > 0:  # the empty set is id 0 (interned first)
        out[0] = 0
        return OK
    h = _bits_hash(b, W)
    j = <int64_t>(h & <uint64_t>P.mask)
    while True:
        id = P.table[j]
        if id < 0:
            break
        if P.hashes.p[id] == h and memcmp(P.words.p + <int64_t>id * W, b, <size_t>W * 8) == 0:
            out[0] = id
            return OK
        j = (j + 1) & P.mask
    if n >= 0x7fffffff or u64_reserve(&P.words, (n + 1) * W) or u64_push(&P.hashes, h):
        return E_MEM
    memcpy(P.words.p + n * W, b, <size_t>W * 8)
    P.words.n = (n + 1) * W
    P.table[j] = <int32_t>n
    out[0] = <int32_t>n
    if (n + 1) * 2 > P.mask + 1:
        return _rehash(&P.table, &P.mask, P.hashes.p, n + 1)
    return OK


cdef inline const uint64_t* pool_row(Pool* P, int32_t id) noexcept nogil:
    """Bitset ``id`` (valid until the next :func:`pool_intern`)."""
    return P.words.p + <int64_t>id * P.W


# --------------------------------------------------------------------------- accumulators
cdef struct Acc:  # a map read state -> bitset (OR-accumulated), in insertion order
    int64_t W
    U64Vec keys
    U64Vec bits        # entry i: bits[i*W : (i+1)*W]
    I64Vec slots       # entry i sits in table slot slots[i] (cleared without probing)
    I32Vec ids         # entry i is pool bitset ids[i] (-1: unknown), so interning can be skipped
    int32_t* table
    int64_t mask
    int64_t n


cdef int acc_init(Acc* A, int64_t W) noexcept nogil:
    memset(A, 0, sizeof(Acc))
    A.W = W
    A.mask = 63
    return _new_table(&A.table, 64)


cdef void acc_free(Acc* A) noexcept nogil:
    free(A.keys.p)
    free(A.bits.p)
    free(A.slots.p)
    free(A.ids.p)
    free(A.table)


cdef inline void acc_clear(Acc* A) noexcept nogil:
    cdef int64_t i
    for i in range(A.n):
        A.table[A.slots.p[i]] = -1
    A.n = 0
    A.keys.n = 0
    A.bits.n = 0
    A.slots.n = 0
    A.ids.n = 0


cdef int acc_grow(Acc* A) noexcept nogil:
    cdef int64_t size = (A.mask + 1) * 2, m = size - 1, i, j
    cdef int32_t* t = NULL
    if _new_table(&t, size):
        return E_MEM
    for i in range(A.n):
        j = <int64_t>(_mix(A.keys.p[i]) & <uint64_t>m)
        while t[j] >= 0:
            j = (j + 1) & m
        t[j] = <int32_t>i
        A.slots.p[i] = j
    free(A.table)
    A.table = t
    A.mask = m
    return OK


cdef int acc_or(Acc* A, uint64_t key, const uint64_t* b, int32_t bid) noexcept nogil:
    """``A[key] |= b`` (``b`` must not point into ``A``); ``bid``: the pool id of ``b``, or -1."""
    cdef int64_t W = A.W, j, n = A.n, k
    cdef int32_t e
    cdef uint64_t* row
    j = <int64_t>(_mix(key) & <uint64_t>A.mask)
    while True:
        e = A.table[j]
        if e < 0:
            break
        if A.keys.p[e] == key:
            row = A.bits.p + <int64_t>e * W
            for k in range(W):
                row[k] |= b[k]
            if A.ids.p[e] != bid:
                A.ids.p[e] = -1
            return OK
        j = (j + 1) & A.mask
    if u64_push(&A.keys, key) or i64_push(&A.slots, j) or i32_push(&A.ids, bid) or \
            u64_reserve(&A.bits, (n + 1) * W):
        return E_MEM
    memcpy(A.bits.p + n * W, b, <size_t>W * 8)
    A.bits.n = (n + 1) * W
    A.table[j] = <int32_t>n
    A.n = n + 1
    if A.n * 2 > A.mask + 1:
        return acc_grow(A)
    return OK


cdef struct Level:  # the scratch of one closure (or delta) frame: its accepted bits and its reads
    Acc reads
    uint64_t* acc


cdef struct IMap:  # uint64 key -> int32 value, open addressing
    U64Vec keys
    I32Vec vals
    int32_t* table
    int64_t mask


cdef inline int32_t imap_get(IMap* M, uint64_t key) noexcept nogil:
    cdef int64_t j = <int64_t>(_mix(key) & <uint64_t>M.mask)
    cdef int32_t e
    while True:
        e = M.table[j]
        if e < 0:
            return -1
        if M.keys.p[e] == key:
            return M.vals.p[e]
        j = (j + 1) & M.mask


cdef int imap_put(IMap* M, uint64_t key, int32_t val) noexcept nogil:
    """Add ``key`` (absent) with ``val``."""
    cdef int64_t n = M.keys.n, size, m, i, j
    cdef int32_t* t = NULL
    if u64_push(&M.keys, key) or i32_push(&M.vals, val):
        return E_MEM
    _place(M.table, M.mask, _mix(key), <int32_t>n)
    if (n + 1) * 2 > M.mask + 1:
        size = (M.mask + 1) * 2
        m = size - 1
        if _new_table(&t, size):
            return E_MEM
        for i in range(n + 1):
            j = <int64_t>(_mix(M.keys.p[i]) & <uint64_t>m)
            while t[j] >= 0:
                j = (j + 1) & m
            t[j] = <int32_t>i
        free(M.table)
        M.table = t
        M.mask = m
    return OK


cdef struct Member:
    uint64_t rs
    int32_t w


cdef int _cmp_member(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const Member*>a).rs, y = (<const Member*>b).rs
    return (x > y) - (x < y)


cdef inline void _sort_members(Member* a, int64_t n) noexcept nogil:
    """Ascending by read state (insertion sort for the usual few members)."""
    cdef int64_t i, j
    cdef Member t
    if n > 24:
        qsort(a, <size_t>n, sizeof(Member), _cmp_member)
        return
    for i in range(1, n):
        t = a[i]
        j = i - 1
        while j >= 0 and a[j].rs > t.rs:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = t


cdef struct Event:  # member ``key & 0xffffffff`` reads label ``key >> 32`` explicitly, to ``target``
    uint64_t key
    int32_t target


cdef int _cmp_i32(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*>a)[0], y = (<const int32_t*>b)[0]
    return (x > y) - (x < y)


cdef inline void _sort_i32(int32_t* a, int64_t n) noexcept nogil:
    """Ascending (insertion sort for the usual few labels)."""
    cdef int64_t i, j
    cdef int32_t t
    if n > 32:
        qsort(a, <size_t>n, sizeof(int32_t), _cmp_i32)
        return
    for i in range(1, n):
        t = a[i]
        j = i - 1
        while j >= 0 and a[j] > t:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = t


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef inline void _or_into(uint64_t* dst, const uint64_t* src, int64_t W) noexcept nogil:
    cdef int64_t j
    for j in range(W):
        dst[j] |= src[j]


cdef object _view_i32(int32_t* p, int64_t n):
    """A copy of ``p[:n]`` as a numpy array (``p`` may be NULL when ``n`` is 0)."""
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    return np.asarray(<int32_t[:n]>p).copy()


cdef void _copy_i32(cnp.ndarray dst, const int32_t* p, int64_t n):
    """``dst[:n] = p[:n]`` (``dst`` a fresh contiguous int32 array of ``n`` items)."""
    if n > 0:
        with nogil:
            memcpy(cnp.PyArray_DATA(dst), p, n * sizeof(int32_t))


cdef inline cnp.ndarray _i32(object a):
    return np.ascontiguousarray(a, dtype=np.int32)


cdef class Builder:
    """The Parser DWA under construction: see the module docstring.

    ``Builder(tdwa, automata, class_bits, max_states, max_closures)``: ``tdwa`` has the Terminal-DWA
    arrays (:mod:`glrmask.compiler.terminal_dwa`), ``automata`` the stack-effect automata in
    terminal order (:mod:`glrmask.compiler.stack_effects`), ``class_bits`` is
    ``uint64[n_tdwa_weights, n_words]`` (the class set of every Terminal-DWA weight)."""

    cdef Pool pool
    cdef int64_t W
    cdef list _keep
    cdef tuple _tdwa_labels
    # Terminal DWA (weights as pool ids)
    cdef int32_t n_nodes, n_roots
    cdef int32_t* t_final
    cdef int32_t* t_open_ptr
    cdef int32_t* t_open_label
    cdef int32_t* t_open_w
    cdef int32_t* t_edge_ptr
    cdef int32_t* t_edge_label
    cdef int32_t* t_edge_target
    cdef int32_t* t_edge_w
    cdef int32_t* t_roots
    # effect automata, concatenated (global state ids)
    cdef int32_t* g_base
    cdef int32_t* e_ptr
    cdef int32_t* e_label
    cdef int32_t* e_target
    cdef int32_t* e_dflt
    cdef uint8_t* e_moves
    cdef int32_t* f_ptr
    cdef int32_t* f_ws
    cdef int32_t* w_ptr
    cdef int32_t* w_states
    cdef int64_t n_labels
    cdef int32_t* first_step   # [s * n_first + t]: automaton t's start state reads LR state s (NULL: too large)
    cdef int64_t n_first       # automata (columns of first_step)
    cdef uint8_t* first_final  # automaton t's start state is final (a walk from it is never shortcut)
    # closures
    cdef int32_t* ctab
    cdef int64_t cmask
    cdef I32Vec c_d, c_klen, c_acc, c_rn
    cdef I64Vec c_koff, c_roff
    cdef U64Vec c_hash
    cdef I32Vec karena
    cdef U64Vec r_rs
    cdef I32Vec r_w
    # states
    cdef int32_t* stab
    cdef int64_t smask
    cdef I64Vec s_off
    cdef I32Vec s_n
    cdef U64Vec s_hash
    cdef I32Vec s_tag           # per state: the start class it starts (only its labels are read), or -1
    cdef U64Vec m_rs
    cdef I32Vec m_w
    # rows of finished states
    cdef I32Vec row_ptr, r_label, r_target, r_acc, d_target, d_acc
    cdef I32Vec st_acc, st_ptr, st_cls, st_proj
    cdef int32_t* t_of_g        # global effect state -> its terminal
    cdef int32_t* tc_ptr        # CSR: terminal t -> the start classes it is live in (ascending)
    cdef int32_t* tc_cls
    cdef int32_t n_start_classes, n_terms
    cdef int32_t* ct_ptr        # CSR: start class -> its terminals (ascending)
    cdef int32_t* ct_terms
    cdef int32_t* lab_cls       # per label (LR state) < n_labels: its start class (-1: none)
    cdef int32_t cur_tag        # the start class of the start state being interned (-1: not a start)
    cdef SeqTab tgroups         # a root's reads of one terminal, as (rs >> 32, rs, bitset id) triples
    cdef SeqTab starts_memo     # (closure accept, terminal groups...) -> the state of those reads
    cdef uint32_t* t_stamp      # per terminal: == gen when the current root reads it
    cdef int32_t* t_group       # per terminal: its group in the current root
    cdef uint32_t* c_stamp      # per start class: == gen when touched by the current root
    cdef uint32_t gen
    cdef I32Vec present, touched, kbuf
    cdef bint starts_done
    cdef int64_t next_x
    # scratch
    cdef Level** levels
    cdef int64_t n_levels, depth
    cdef I32Vec kstack, dflt_m, dflt_e, live_m, live_e, names
    cdef uint32_t* stamp   # per LR state: == stamp_gen when the state is a label of the current row
    cdef uint32_t stamp_gen
    cdef int32_t* slot     # per LR state: event count, then the next event slot, of the current row
    cdef Event* ev
    cdef int64_t ev_cap
    cdef IMap top  # (TDWA node << 32 | write sequence) -> closure id: the closures a delta asks for
    cdef IMap root_of_closure  # a root's closure id -> the first root with that closure (same entries)
    cdef uint64_t* tmp
    cdef Member* mt
    cdef int64_t mt_cap
    # budgets
    cdef int64_t max_states, max_closures
    cdef double deadline, slice_end
    cdef int64_t opened  # closures opened since the last deadline check (every stop resets it)
    cdef int failed
    cdef bint busy

    def __cinit__(self):
        self.ctab = NULL
        self.stab = NULL
        self.levels = NULL
        self.tmp = NULL
        self.mt = NULL
        self.ev = NULL
        self.stamp = NULL
        self.slot = NULL
        self.first_step = NULL
        self.first_final = NULL
        self.pool.table = NULL
        self.tgroups.table = NULL
        self.starts_memo.table = NULL
        self.t_stamp = NULL
        self.t_group = NULL
        self.c_stamp = NULL

    def __init__(self, tdwa, automata, class_bits, long long max_states, long long max_closures,
                 term_class_ptr, term_class, class_term_ptr, class_term, long n_start_classes, label_class):
        cdef cnp.ndarray cb = np.ascontiguousarray(class_bits, dtype=np.uint64)
        cdef int32_t zero_id
        if cb.ndim != 2 or cb.shape[1] < 1:
            raise ValueError("class_bits must be a 2-d uint64 array with at least one word per set")
        if max_states < 0 or max_closures < 0:
            raise ValueError("budgets must be non-negative")
        self.W = cb.shape[1]
        self.max_states = max_states
        self.max_closures = max_closures
        self._keep = []
        memset(&self.pool, 0, sizeof(Pool))
        self.pool.W = self.W
        self.pool.mask = 1023
        if _new_table(&self.pool.table, 1024):
            raise MemoryError
        self.tmp = <uint64_t*>malloc(<size_t>self.W * 8)
        if self.tmp == NULL:
            raise MemoryError
        memset(self.tmp, 0, <size_t>self.W * 8)
        if pool_intern(&self.pool, self.tmp, &zero_id):
            raise MemoryError
        self._load_tdwa(tdwa, cb)
        self._load_effects(automata)
        if n_start_classes < 0:
            raise ValueError("n_start_classes must be non-negative")
        self.n_start_classes = <int32_t>n_start_classes
        n_t = len(automata)
        self.n_terms = <int32_t>n_t
        self._csr_ok(term_class_ptr, n_t, len(term_class), "term_class_ptr")
        self.tc_ptr = self._arr(term_class_ptr, "term_class_ptr", 0, len(term_class) + 1, n_t + 1)
        self.tc_cls = self._arr(term_class, "term_class", 0, max(n_start_classes, 1), len(term_class))
        self._csr_ok(class_term_ptr, n_start_classes, len(class_term), "class_term_ptr")
        self.ct_ptr = self._arr(class_term_ptr, "class_term_ptr", 0, len(class_term) + 1, n_start_classes + 1)
        self.ct_terms = self._arr(class_term, "class_term", 0, max(n_t, 1), len(class_term))
        lc = np.full(max(self.n_labels, len(label_class)), -1, dtype=np.int32)
        lc[:len(label_class)] = np.asarray(label_class, dtype=np.int32)
        self.lab_cls = self._arr(lc, "label_class", -1, max(n_start_classes, 1))
        self.cur_tag = -1
        self.tgroups.mask = 1023
        self.starts_memo.mask = 1023
        if _new_table(&self.tgroups.table, 1024) or _new_table(&self.starts_memo.table, 1024):
            raise MemoryError
        self.t_stamp = <uint32_t*>calloc(max(n_t, 1), sizeof(uint32_t))
        self.t_group = <int32_t*>calloc(max(n_t, 1), sizeof(int32_t))
        self.c_stamp = <uint32_t*>calloc(max(n_start_classes, 1), sizeof(uint32_t))
        if self.t_stamp == NULL or self.t_group == NULL or self.c_stamp == NULL:
            raise MemoryError
        self.cmask = 1023
        self.smask = 1023
        self.top.mask = 1023
        self.root_of_closure.mask = 1023
        if _new_table(&self.ctab, 1024) or _new_table(&self.stab, 1024) or _new_table(&self.top.table, 1024) or \
                _new_table(&self.root_of_closure.table, 1024) or \
                i32_push(&self.row_ptr, 0):
            raise MemoryError
        self.stamp = <uint32_t*>malloc(<size_t>max(self.n_labels, 1) * sizeof(uint32_t))
        self.slot = <int32_t*>malloc(<size_t>max(self.n_labels, 1) * sizeof(int32_t))
        if self.stamp == NULL or self.slot == NULL:
            raise MemoryError
        memset(self.stamp, 0, <size_t>max(self.n_labels, 1) * sizeof(uint32_t))
        self.deadline = -1.0

    # ---------------------------------------------------------------- input
    cdef int32_t* _arr(self, object a, str name, long lo, long hi, long length=-1) except? NULL:
        """A kept contiguous int32 copy of ``a``, every value in ``[lo, hi)`` (the loops index
        without bounds checks, so a malformed input must be refused here)."""
        cdef cnp.ndarray x = _i32(a)
        if x.ndim != 1 or (length >= 0 and x.shape[0] != length):
            raise ValueError(f"parser DWA input {name!r}: wrong shape")
        if x.shape[0] and (int(x.min()) < lo or int(x.max()) >= hi):
            raise ValueError(f"parser DWA input {name!r}: value outside [{lo}, {hi})")
        self._keep.append(x)
        return <int32_t*>cnp.PyArray_DATA(x)

    @cython.wraparound(True)
    @cython.boundscheck(True)
    cdef int _csr_ok(self, object ptr, long n_rows, long n_items, str name) except -1:
        p = np.asarray(ptr, dtype=np.int64)
        if p.shape != (n_rows + 1,) or int(p[0]) != 0 or int(p[-1]) != n_items or bool((np.diff(p) < 0).any()):
            raise ValueError(f"parser DWA input {name!r}: not a CSR pointer over {n_items} items")
        return 0

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def _load_tdwa(self, tdwa, cnp.ndarray cb):
        cdef long n_w = cb.shape[0], i
        cdef int32_t pid
        cdef cnp.ndarray pid_of = np.zeros(n_w + 1, dtype=np.int32)  # TDWA weight w -> pool id at w + 1
        cdef int32_t* pof = <int32_t*>cnp.PyArray_DATA(pid_of)
        cdef uint64_t* rows = <uint64_t*>cnp.PyArray_DATA(cb)
        for i in range(n_w):
            memcpy(self.tmp, rows + i * self.W, <size_t>self.W * 8)
            if pool_intern(&self.pool, self.tmp, &pid):
                raise MemoryError
            pof[i + 1] = pid
        memset(self.tmp, 0, <size_t>self.W * 8)
        n = int(len(tdwa.final_weight))
        self.n_nodes = n
        pw = lambda w: pid_of[_i32(w) + 1]  # noqa: E731  (-1, no weight -> the empty set)
        for name, w in (("final_weight", tdwa.final_weight), ("open_weight", tdwa.open_weight),
                        ("edge_weight", tdwa.edge_weight)):
            w = _i32(w)
            if w.size and (int(w.min()) < -1 or int(w.max()) >= n_w):
                raise ValueError(f"parser DWA input {name!r}: weight outside the class sets")
        n_open = int(len(tdwa.open_label))
        n_edge = int(len(tdwa.edge_label))
        self._csr_ok(tdwa.open_ptr, n, n_open, "open_ptr")
        self._csr_ok(tdwa.edge_ptr, n, n_edge, "edge_ptr")
        self.t_final = self._arr(pw(tdwa.final_weight), "final_weight", 0, self.pool.hashes.n, n)
        self.t_open_ptr = self._arr(tdwa.open_ptr, "open_ptr", 0, n_open + 1, n + 1)
        self.t_open_label = self._arr(tdwa.open_label, "open_label", 0, 1 << 30, n_open)
        self.t_open_w = self._arr(pw(tdwa.open_weight), "open_weight", 0, self.pool.hashes.n, n_open)
        self.t_edge_ptr = self._arr(tdwa.edge_ptr, "edge_ptr", 0, n_edge + 1, n + 1)
        self.t_edge_label = self._arr(tdwa.edge_label, "edge_label", 0, 1 << 30, n_edge)
        self.t_edge_target = self._arr(tdwa.edge_target, "edge_target", 0, n, n_edge)
        self.t_edge_w = self._arr(pw(tdwa.edge_weight), "edge_weight", 0, self.pool.hashes.n, n_edge)
        src = np.repeat(np.arange(n), np.diff(np.asarray(tdwa.edge_ptr, dtype=np.int64)))
        if n_edge and bool((_i32(tdwa.edge_target) <= src).any()):
            raise ValueError("parser DWA input: Terminal-DWA edges must go to higher node ids")
        self.n_roots = int(len(tdwa.roots))
        self.t_roots = self._arr(tdwa.roots, "roots", 0, n, self.n_roots)
        self._tdwa_labels = (_i32(tdwa.open_label), _i32(tdwa.edge_label))

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def _load_effects(self, automata):
        base, eptr, elab, etgt, dflt, fptr, fws, wptr, wst = [], [0], [], [], [], [0], [], [0], []
        n_g = n_e = n_f = n_ws = n_wst = 0
        for a in automata:
            ns = int(a.n_states)
            ep = np.asarray(a.edge_ptr, dtype=np.int64)
            fp = np.asarray(a.final_ptr, dtype=np.int64)
            wp = np.asarray(a.write_ptr, dtype=np.int64)
            nw = len(wp) - 1
            self._csr_ok(ep, ns, len(a.edge_label), "effect edge_ptr")
            self._csr_ok(fp, ns, len(a.final_writes), "effect final_ptr")
            self._csr_ok(wp, nw, len(a.write_states), "effect write_ptr")
            tg = _i32(a.edge_target)
            df = _i32(a.default_target)
            fw = _i32(a.final_writes)
            if ns < 1 or len(df) != ns:
                raise ValueError("parser DWA input: an effect automaton without states")
            src = np.repeat(np.arange(ns), np.diff(ep))
            if (tg.size and bool(((tg >= 0) & (tg <= src)).any() or (tg < -1).any() or (tg >= ns).any())) or \
                    bool(((df >= 0) & (df <= np.arange(ns))).any() or (df < -1).any() or (df >= ns).any()):
                raise ValueError("parser DWA input: effect automaton edges must go to higher state ids")
            lab = _i32(a.edge_label)
            if len(lab) > 1 and bool(((src[1:] == src[:-1]) & (lab[1:] <= lab[:-1])).any()):
                raise ValueError("parser DWA input: effect edge labels must ascend within a state")
            if fw.size and (int(fw.min()) < 0 or int(fw.max()) >= nw):
                raise ValueError("parser DWA input: effect final names no write sequence")
            base.append(n_g)
            eptr.extend((ep[1:] + n_e).tolist())
            elab.append(_i32(a.edge_label))
            etgt.append(np.where(tg >= 0, tg + n_g, -1).astype(np.int32))
            dflt.append(np.where(df >= 0, df + n_g, -1).astype(np.int32))
            fptr.extend((fp[1:] + n_f).tolist())
            fws.append(fw + n_ws)
            wptr.extend((wp[1:] + n_wst).tolist())
            wst.append(_i32(a.write_states))
            n_g += ns
            n_e += len(a.edge_label)
            n_f += len(fw)
            n_ws += nw
            n_wst += len(a.write_states)
        cat = lambda parts: np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)  # noqa: E731
        elab_a, wst_a = cat(elab), cat(wst)
        open_l, edge_l = self._tdwa_labels
        for lab in (open_l, edge_l):
            if lab.size and int(lab.max()) >= len(base):
                raise ValueError("parser DWA input: a Terminal-DWA label names no effect automaton")
        self.n_labels = 1 + max(int(elab_a.max()) if elab_a.size else 0, int(wst_a.max()) if wst_a.size else 0)
        self.g_base = self._arr(base, "base", 0, max(n_g, 1), len(base))
        self.t_of_g = self._arr(np.repeat(np.arange(len(base)), np.diff(np.asarray(base + [n_g], dtype=np.int64))),
                                "t_of_g", 0, max(len(base), 1), n_g)
        self.e_ptr = self._arr(eptr, "edge_ptr", 0, n_e + 1, n_g + 1)
        self.e_label = self._arr(elab_a, "edge_label", 0, self.n_labels, n_e)
        self.e_target = self._arr(cat(etgt), "edge_target", -1, n_g, n_e)
        self.e_dflt = self._arr(cat(dflt), "default_target", -1, n_g, n_g)
        self.f_ptr = self._arr(fptr, "final_ptr", 0, n_f + 1, n_g + 1)
        self.f_ws = self._arr(cat(fws), "final_writes", 0, max(n_ws, 1), n_f)
        self.w_ptr = self._arr(wptr, "write_ptr", 0, n_wst + 1, n_ws + 1)
        self.w_states = self._arr(wst_a, "write_states", 0, self.n_labels, n_wst)
        moves = cat(dflt) >= 0  # a state moves when some read can continue
        tg_all = cat(etgt)
        if tg_all.size:
            src = np.repeat(np.arange(n_g), np.diff(np.asarray(eptr, dtype=np.int64)))
            moves[src[tg_all >= 0]] = True
        moves = np.ascontiguousarray(moves, dtype=np.uint8)
        self._keep.append(moves)
        self.e_moves = <uint8_t*>cnp.PyArray_DATA(moves)
        self._load_first_reads(len(base), n_e)

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def _load_first_reads(self, long n_t, long n_e):
        """Every automaton's first step, as a table by LR state then automaton: a closure walks
        every Terminal-DWA edge's automaton over the pending writes from the top, so for one
        closure the first reads share the LR state and hit one row; most walks die there
        (Github_ultra #2: 28.7M of 29.3M), and the rest start one step in without a binary
        search over the start state's labels (thousands: every state the terminal acts in).
        Left out past 64 MiB (the walks then start at the start state)."""
        cdef long n_l = self.n_labels, t, g, lo, hi
        if n_t == 0 or n_t * n_l > (64 << 20) // 4:
            return
        cols = np.empty((n_t, n_l), dtype=np.int32)
        final = np.zeros(n_t, dtype=np.uint8)
        lab_all = np.asarray(<int32_t[:max(n_e, 1)]>self.e_label)
        tgt_all = np.asarray(<int32_t[:max(n_e, 1)]>self.e_target)
        for t in range(n_t):
            g = self.g_base[t]
            final[t] = self.f_ptr[g + 1] > self.f_ptr[g]
            cols[t] = self.e_dflt[g]
            lo, hi = self.e_ptr[g], self.e_ptr[g + 1]
            if hi > lo:
                cols[t, lab_all[lo:hi]] = tgt_all[lo:hi]
        table = np.ascontiguousarray(cols.T)
        self._keep.append(table)
        self._keep.append(final)
        self.first_step = <int32_t*>cnp.PyArray_DATA(table)
        self.first_final = <uint8_t*>cnp.PyArray_DATA(final)
        self.n_first = n_t

    def __dealloc__(self):
        cdef int64_t i
        free(self.pool.words.p); free(self.pool.hashes.p); free(self.pool.table)
        free(self.ctab); free(self.stab)
        free(self.c_d.p); free(self.c_klen.p); free(self.c_acc.p); free(self.c_rn.p)
        free(self.c_koff.p); free(self.c_roff.p); free(self.c_hash.p); free(self.karena.p)
        free(self.r_rs.p); free(self.r_w.p)
        free(self.s_off.p); free(self.s_n.p); free(self.s_hash.p); free(self.s_tag.p); free(self.m_rs.p); free(self.m_w.p)
        free(self.row_ptr.p); free(self.r_label.p); free(self.r_target.p); free(self.r_acc.p)
        free(self.d_target.p); free(self.d_acc.p); free(self.st_acc.p); free(self.st_ptr.p)
        free(self.st_cls.p); free(self.st_proj.p)
        seq_free(&self.tgroups); seq_free(&self.starts_memo)
        free(self.t_stamp); free(self.t_group); free(self.c_stamp)
        free(self.present.p); free(self.touched.p); free(self.kbuf.p)
        free(self.kstack.p); free(self.dflt_m.p); free(self.dflt_e.p); free(self.live_m.p); free(self.live_e.p)
        free(self.ev); free(self.names.p)
        free(self.top.keys.p); free(self.top.vals.p); free(self.top.table)
        free(self.root_of_closure.keys.p); free(self.root_of_closure.vals.p); free(self.root_of_closure.table)
        free(self.tmp); free(self.mt); free(self.stamp); free(self.slot)
        if self.levels != NULL:
            for i in range(self.n_levels):
                acc_free(&self.levels[i].reads)
                free(self.levels[i].acc)
                free(self.levels[i])
            free(self.levels)

    # ---------------------------------------------------------------- sizes
    @property
    def n_states(self) -> int:
        """Determinized states interned so far."""
        return self.s_n.n

    @property
    def n_closures(self) -> int:
        """Finished closures of settled product states."""
        return self.c_d.n

    @property
    def n_words(self) -> int:
        return self.W

    @property
    def complete(self) -> bool:
        return self.starts_done and self.next_x == self.s_n.n

    # ---------------------------------------------------------------- scratch
    cdef Level* _level(self, int64_t depth) noexcept nogil:
        """The scratch of frame ``depth`` (created on first use; ``NULL``: out of memory)."""
        cdef Level** lv
        cdef Level* L
        cdef int64_t c
        if depth < self.n_levels:
            return self.levels[depth]
        c = self.n_levels * 2 if self.n_levels else 16
        while c <= depth:
            c *= 2
        lv = <Level**>realloc(self.levels, <size_t>c * sizeof(Level*))
        if lv == NULL:
            return NULL
        self.levels = lv
        while self.n_levels <= depth:
            L = <Level*>malloc(sizeof(Level))
            if L == NULL:
                return NULL
            L.acc = <uint64_t*>malloc(<size_t>self.W * 8)
            if L.acc == NULL or acc_init(&L.reads, self.W):
                free(L.acc)
                free(L)
                return NULL
            self.levels[self.n_levels] = L
            self.n_levels += 1
        return self.levels[depth]

    cdef inline int32_t _step(self, int32_t g, int32_t s) noexcept nogil:
        """Effect state ``g`` reads LR state ``s``: the explicit edge if any, else DEFAULT."""
        cdef int32_t lo = self.e_ptr[g], hi = self.e_ptr[g + 1], mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.e_label[mid] < s:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.e_ptr[g + 1] and self.e_label[lo] == s:
            return self.e_target[lo]
        return self.e_dflt[g]

    cdef int _check(self) noexcept nogil:
        cdef double now
        if self.deadline < 0:
            return OK
        now = _now()
        return E_TIME if now > self.deadline else OK

    cdef int _push_writes(self, int32_t ws, int64_t* off, int32_t* length) noexcept nogil:
        """Push write sequence ``ws`` on the key stack (a pending tuple for a closure)."""
        cdef int32_t lo = self.w_ptr[ws], wl = self.w_ptr[ws + 1] - lo
        off[0] = self.kstack.n
        if i32_reserve(&self.kstack, self.kstack.n + wl):
            return E_MEM
        memcpy(self.kstack.p + self.kstack.n, self.w_states + lo, <size_t>wl * 4)
        self.kstack.n += wl
        length[0] = wl
        return OK

    cdef int _absorb(self, Level* L, int32_t wid, int32_t c) noexcept nogil:
        """``acc |= w & acc(c)``; ``reads[rs] |= w & w2`` for every read ``(rs, w2)`` of closure ``c``."""
        cdef int64_t W = self.W, j, r, r_end
        cdef const uint64_t* w = pool_row(&self.pool, wid)
        cdef const uint64_t* a2 = pool_row(&self.pool, self.c_acc.p[c])
        cdef const uint64_t* w2
        cdef uint64_t any_, x
        cdef uint64_t* tmp = self.tmp
        cdef bint same
        if self.c_acc.p[c] != 0:
            for j in range(W):
                L.acc[j] |= w[j] & a2[j]
        r = self.c_roff.p[c]
        r_end = r + self.c_rn.p[c]
        while r < r_end:
            w2 = pool_row(&self.pool, self.r_w.p[r])
            any_ = 0
            same = True
            for j in range(W):
                x = w[j] & w2[j]
                tmp[j] = x
                any_ |= x
                same = same and x == w[j]
            if any_ and acc_or(&L.reads, self.r_rs.p[r], tmp, wid if same else -1):
                return E_MEM
            r += 1
        return OK

    # ---------------------------------------------------------------- composition
    cdef int _closure(self, int32_t d, int64_t poff, int32_t plen, int32_t* out) noexcept nogil:
        """Settled state ``(d, kstack[poff : poff + plen])``: its closure id (computed when new).
        The key stack may grow (and move) inside: ``pending`` is addressed by offset."""
        cdef uint64_t h = 0x452821e638d01377ULL
        cdef int64_t j, i
        cdef int32_t c, rc, acc_id, wid
        cdef Level* L
        h = _fold(h, <uint64_t><uint32_t>d)
        for i in range(plen):
            h = _fold(h, <uint64_t><uint32_t>self.kstack.p[poff + i])
        h = _mix(h ^ <uint64_t>plen)
        j = <int64_t>(h & <uint64_t>self.cmask)
        while True:
            c = self.ctab[j]
            if c < 0:
                break
            if self.c_hash.p[c] == h and self.c_d.p[c] == d and self.c_klen.p[c] == plen and memcmp(
                    self.karena.p + self.c_koff.p[c], self.kstack.p + poff, <size_t>plen * 4) == 0:
                out[0] = c
                return OK
            j = (j + 1) & self.cmask
        if self.c_d.n >= self.max_closures:
            return E_CLOSURES
        self.opened += 1
        if self.opened >= 1024:  # counted per run, not by memo size: a stop must not recur at once
            self.opened = 0
            rc = self._check()
            if rc:
                return rc
        L = self._level(self.depth + 1)
        if L == NULL:
            return E_MEM
        self.depth += 1
        rc = self._closure_body(d, poff, plen, L)
        self.depth -= 1
        if rc:
            return rc
        # finished: intern the weights, record the reads, enter the memo
        if pool_intern(&self.pool, L.acc, &acc_id):
            return E_MEM
        c = <int32_t>self.c_d.n
        if i64_push(&self.c_roff, self.r_rs.n) or i32_push(&self.c_rn, <int32_t>L.reads.n):
            return E_MEM
        for i in range(L.reads.n):
            if pool_intern(&self.pool, L.reads.bits.p + i * self.W, &wid):
                return E_MEM
            if u64_push(&self.r_rs, L.reads.keys.p[i]) or i32_push(&self.r_w, wid):
                return E_MEM
        if i64_push(&self.c_koff, self.karena.n) or i32_reserve(&self.karena, self.karena.n + plen):
            return E_MEM
        memcpy(self.karena.p + self.karena.n, self.kstack.p + poff, <size_t>plen * 4)
        self.karena.n += plen
        if i32_push(&self.c_d, d) or i32_push(&self.c_klen, plen) or i32_push(&self.c_acc, acc_id) or \
                u64_push(&self.c_hash, h):
            return E_MEM
        _place(self.ctab, self.cmask, h, c)
        if self.c_d.n * 2 > self.cmask + 1 and _rehash(&self.ctab, &self.cmask, self.c_hash.p, self.c_d.n):
            return E_MEM
        out[0] = c
        return OK

    cdef int _closure_body(self, int32_t d, int64_t poff, int32_t plen, Level* L) noexcept nogil:
        cdef int64_t k, noff, f
        cdef int32_t t, g, i, d2, wbid, c2, rc, wl
        acc_clear(&L.reads)
        memcpy(L.acc, pool_row(&self.pool, self.t_final[d]), <size_t>self.W * 8)
        for k in range(self.t_open_ptr[d], self.t_open_ptr[d + 1]):
            t = self.t_open_label[k]
            wbid = self.t_open_w[k]
            g = self.g_base[t]
            i = plen
            if plen and self.first_step != NULL and not self.first_final[t]:
                # the walk's first turn, from the table (the start state accepts nothing)
                g = self.first_step[<int64_t>self.kstack.p[poff + plen - 1] * self.n_first + t]
                if g < 0:
                    continue
                i = plen - 1
            while True:
                if self.f_ptr[g + 1] > self.f_ptr[g]:  # t is shifted: the open lexeme can be accepted
                    _or_into(L.acc, pool_row(&self.pool, wbid), self.W)
                    break
                if i == 0:
                    if self.e_moves[g] and acc_or(&L.reads, (<uint64_t>g << 32) | <uint64_t>(OPEN + 1),
                                                  pool_row(&self.pool, wbid), wbid):
                        return E_MEM
                    break
                i -= 1
                g = self._step(g, self.kstack.p[poff + i])
                if g < 0:
                    break
        for k in range(self.t_edge_ptr[d], self.t_edge_ptr[d + 1]):
            t = self.t_edge_label[k]
            d2 = self.t_edge_target[k]
            wbid = self.t_edge_w[k]
            g = self.g_base[t]
            i = plen
            if plen and self.first_step != NULL and not self.first_final[t]:
                g = self.first_step[<int64_t>self.kstack.p[poff + plen - 1] * self.n_first + t]
                if g < 0:
                    continue
                i = plen - 1
            while True:
                for f in range(self.f_ptr[g], self.f_ptr[g + 1]):
                    # pending[:i] + ws
                    wl = self.w_ptr[self.f_ws[f] + 1] - self.w_ptr[self.f_ws[f]]
                    noff = self.kstack.n
                    if i32_reserve(&self.kstack, noff + i + wl):
                        return E_MEM
                    memcpy(self.kstack.p + noff, self.kstack.p + poff, <size_t>i * 4)
                    memcpy(self.kstack.p + noff + i, self.w_states + self.w_ptr[self.f_ws[f]], <size_t>wl * 4)
                    self.kstack.n = noff + i + wl
                    rc = self._closure(d2, noff, i + wl, &c2)
                    self.kstack.n = noff
                    if rc or self._absorb(L, wbid, c2):
                        return rc if rc else E_MEM
                if i == 0:
                    if self.e_moves[g] and acc_or(&L.reads, (<uint64_t>g << 32) | <uint64_t>(d2 + 1),
                                                  pool_row(&self.pool, wbid), wbid):
                        return E_MEM
                    break
                i -= 1
                g = self._step(g, self.kstack.p[poff + i])
                if g < 0:
                    break
        return OK

    # ---------------------------------------------------------------- determinization
    cdef int _state(self, Level* L, int32_t* out) noexcept nogil:
        """Intern the residual set of ``L.reads`` minus ``L.acc``; ``-1`` when nothing is left."""
        cdef int64_t W = self.W, e, j, n = 0, off, x
        cdef uint64_t any_, v, h, cut
        cdef const uint64_t* b
        cdef int32_t id, s
        cdef Member* mt
        if L.reads.n > self.mt_cap:
            mt = <Member*>realloc(self.mt, <size_t>L.reads.n * sizeof(Member))
            if mt == NULL:
                return E_MEM
            self.mt = mt
            self.mt_cap = L.reads.n
        for e in range(L.reads.n):
            b = L.reads.bits.p + e * W
            any_ = 0
            cut = 0
            for j in range(W):
                v = b[j] & ~L.acc[j]
                self.tmp[j] = v
                any_ |= v
                cut |= b[j] & L.acc[j]
            if any_:
                id = L.reads.ids.p[e]
                if (cut or id < 0) and pool_intern(&self.pool, self.tmp, &id):
                    return E_MEM
                self.mt[n].rs = L.reads.keys.p[e]
                self.mt[n].w = id
                n += 1
        if n == 0:
            out[0] = -1
            return OK
        _sort_members(self.mt, n)
        h = 0x13198a2e03707344ULL
        for e in range(n):
            h = _fold(_fold(h, self.mt[e].rs), <uint64_t><uint32_t>self.mt[e].w)
        h = _mix(_fold(h, <uint64_t><uint32_t>self.cur_tag) ^ <uint64_t>n)
        j = <int64_t>(h & <uint64_t>self.smask)
        while True:
            s = self.stab[j]
            if s < 0:
                break
            if self.s_hash.p[s] == h and self.s_n.p[s] == n and self.s_tag.p[s] == self.cur_tag:
                off = self.s_off.p[s]
                for e in range(n):
                    if self.m_rs.p[off + e] != self.mt[e].rs or self.m_w.p[off + e] != self.mt[e].w:
                        break
                else:
                    out[0] = s
                    return OK
            j = (j + 1) & self.smask
        x = self.s_n.n
        if x >= self.max_states:
            return E_STATES
        if u64_reserve(&self.m_rs, self.m_rs.n + n) or i32_reserve(&self.m_w, self.m_w.n + n) or \
                i64_push(&self.s_off, self.m_rs.n) or u64_push(&self.s_hash, h) or i32_push(&self.s_n, <int32_t>n) or \
                i32_push(&self.s_tag, self.cur_tag):
            return E_MEM
        for e in range(n):
            self.m_rs.p[self.m_rs.n + e] = self.mt[e].rs
            self.m_w.p[self.m_w.n + e] = self.mt[e].w
        self.m_rs.n += n
        self.m_w.n += n
        self.stab[j] = <int32_t>x
        if self.s_n.n * 2 > self.smask + 1 and _rehash(&self.stab, &self.smask, self.s_hash.p, self.s_n.n):
            return E_MEM
        out[0] = <int32_t>x
        return OK

    cdef int _delta(self, int64_t x, int32_t* target, int32_t* accept) noexcept nogil:
        """State ``x`` reads one LR state, the live members ``live_m[q]`` (ascending) stepping to
        effect states ``live_e[q]`` (every other member dies): target state and accept weight."""
        cdef Level* L = self._level(0)
        cdef int64_t m, off, q, f, koff
        cdef uint64_t rs
        cdef int32_t d2, e2, wid, c2, rc, klen
        if L == NULL:
            return E_MEM
        acc_clear(&L.reads)
        memset(L.acc, 0, <size_t>self.W * 8)
        self.depth = 0
        off = self.s_off.p[x]
        for q in range(self.live_m.n):
            m = self.live_m.p[q]
            e2 = self.live_e.p[q]
            rs = self.m_rs.p[off + m]
            wid = self.m_w.p[off + m]
            d2 = <int32_t>(rs & 0xffffffffULL) - 1
            if d2 == OPEN and self.f_ptr[e2 + 1] > self.f_ptr[e2]:
                _or_into(L.acc, pool_row(&self.pool, wid), self.W)
                continue
            for f in range(self.f_ptr[e2], self.f_ptr[e2 + 1]):
                c2 = imap_get(&self.top, (<uint64_t>d2 << 32) | <uint64_t>self.f_ws[f])
                if c2 < 0:
                    if self._push_writes(self.f_ws[f], &koff, &klen):
                        return E_MEM
                    rc = self._closure(d2, koff, klen, &c2)
                    self.kstack.n = koff
                    if rc:
                        return rc
                    if imap_put(&self.top, (<uint64_t>d2 << 32) | <uint64_t>self.f_ws[f], c2):
                        return E_MEM
                if (self.c_acc.p[c2] != 0 or self.c_rn.p[c2] != 0) and self._absorb(L, wid, c2):
                    return E_MEM
            if self.e_moves[e2] and acc_or(&L.reads, (<uint64_t>e2 << 32) | (rs & 0xffffffffULL),
                                           pool_row(&self.pool, wid), wid):
                return E_MEM
        if pool_intern(&self.pool, L.acc, accept):
            return E_MEM
        return self._state(L, target)

    cdef int _process(self, int64_t x) noexcept nogil:
        """Every edge of state ``x``: DEFAULT first, then the explicit labels ascending; explicit
        edges equal to DEFAULT are left out. The row is committed only when complete.

        A label changes the step of only the members whose effect state names it (a couple among
        tens or hundreds: most members' DEFAULT dies), so the members' explicit edges are sorted
        once into per-label *events* and each label's live list is the DEFAULT live list with its
        events merged in, instead of stepping every member for every label."""
        cdef int64_t m, off, n, k, i, j, q, ne, r0 = self.r_label.n
        cdef int32_t g, s, dt, da, t, a, rc, e2
        cdef int32_t tag = self.s_tag.p[x]  # a start state: only its class's labels are ever read
        cdef Event* ev
        off = self.s_off.p[x]
        n = self.s_n.p[x]
        self.dflt_m.n = 0
        self.dflt_e.n = 0
        ne = 0
        for m in range(n):
            g = <int32_t>(self.m_rs.p[off + m] >> 32)
            ne += self.e_ptr[g + 1] - self.e_ptr[g]
        if ne > self.ev_cap:
            ev = <Event*>realloc(self.ev, <size_t>ne * sizeof(Event))
            if ev == NULL:
                return E_MEM
            self.ev = ev
            self.ev_cap = ne
        ev = self.ev
        # bucket the events by label (labels ascending, members ascending within a label): count
        # per label, the distinct labels sorted, then place in member order
        self.stamp_gen += 1
        if self.stamp_gen == 0:  # wrapped: forget every mark
            memset(self.stamp, 0, <size_t>max(self.n_labels, 1) * sizeof(uint32_t))
            self.stamp_gen = 1
        self.names.n = 0
        for m in range(n):
            g = <int32_t>(self.m_rs.p[off + m] >> 32)
            if self.e_dflt[g] >= 0 and (i32_push(&self.dflt_m, <int32_t>m) or i32_push(&self.dflt_e, self.e_dflt[g])):
                return E_MEM
            for k in range(self.e_ptr[g], self.e_ptr[g + 1]):
                s = self.e_label[k]
                if tag >= 0 and self.lab_cls[s] != tag:
                    continue
                if self.stamp[s] != self.stamp_gen:
                    self.stamp[s] = self.stamp_gen
                    self.slot[s] = 0
                    if i32_push(&self.names, s):
                        return E_MEM
                self.slot[s] += 1
        _sort_i32(self.names.p, self.names.n)
        i = 0
        for k in range(self.names.n):
            s = self.names.p[k]
            j = self.slot[s]
            self.slot[s] = <int32_t>i
            i += j
        ne = i  # the events kept (a start state's: those of its class's labels)
        for m in range(n):
            g = <int32_t>(self.m_rs.p[off + m] >> 32)
            for k in range(self.e_ptr[g], self.e_ptr[g + 1]):
                s = self.e_label[k]
                if tag >= 0 and self.lab_cls[s] != tag:
                    continue
                i = self.slot[s]
                self.slot[s] = <int32_t>(i + 1)
                ev[i].key = (<uint64_t><uint32_t>s << 32) | <uint64_t>m
                ev[i].target = self.e_target[k]
        # DEFAULT: the live list is the members whose DEFAULT continues
        self.live_m.n = 0
        self.live_e.n = 0
        if i32_reserve(&self.live_m, n) or i32_reserve(&self.live_e, n):
            return E_MEM
        for q in range(self.dflt_m.n):
            self.live_m.p[q] = self.dflt_m.p[q]
            self.live_e.p[q] = self.dflt_e.p[q]
        self.live_m.n = self.live_e.n = self.dflt_m.n
        rc = self._delta(x, &dt, &da)
        if rc:
            return rc
        i = 0
        while i < ne:
            s = <int32_t>(ev[i].key >> 32)
            j = i
            while j < ne and <int32_t>(ev[j].key >> 32) == s:
                j += 1
            # merge: DEFAULT live members (ascending) with this label's events (ascending member)
            self.live_m.n = 0
            self.live_e.n = 0
            q = 0
            k = i
            while q < self.dflt_m.n or k < j:
                if k < j and (q >= self.dflt_m.n or <int64_t>(ev[k].key & 0xffffffffULL) <= self.dflt_m.p[q]):
                    m = <int64_t>(ev[k].key & 0xffffffffULL)
                    e2 = ev[k].target
                    if q < self.dflt_m.n and self.dflt_m.p[q] == m:
                        q += 1  # the explicit edge shadows this member's DEFAULT
                    k += 1
                else:
                    m = self.dflt_m.p[q]
                    e2 = self.dflt_e.p[q]
                    q += 1
                if e2 >= 0:
                    self.live_m.p[self.live_m.n] = <int32_t>m
                    self.live_e.p[self.live_e.n] = e2
                    self.live_m.n += 1
                    self.live_e.n += 1
            rc = self._delta(x, &t, &a)
            if rc:
                self.r_label.n = self.r_target.n = self.r_acc.n = r0
                return rc
            if t != dt or a != da:
                if i32_push(&self.r_label, s) or i32_push(&self.r_target, t) or i32_push(&self.r_acc, a):
                    self.r_label.n = self.r_target.n = self.r_acc.n = r0
                    return E_MEM
            i = j
        if i32_push(&self.d_target, dt) or i32_push(&self.d_acc, da) or i32_push(&self.row_ptr, <int32_t>self.r_label.n):
            self.r_label.n = self.r_target.n = self.r_acc.n = r0
            self.d_target.n = self.d_acc.n = x
            self.row_ptr.n = x + 1
            return E_MEM
        return OK

    cdef int _starts(self) noexcept nogil:
        """The start of every root, in ``boundary_states`` order: per start class (ascending) in
        which some read state of the root's closure is live, the state of those read states alone
        (see :mod:`glrmask.compiler.parser_dwa`, *Start rows by label class*).

        A class's state depends only on the root's reads of the class's terminals (and on what the
        closure accepts at once, which every residual loses), so a root's reads are interned per
        terminal and each class's state is memoized on (accept, those groups): a JSON string's
        ~1,000 classes over ~8,000 roots are mostly lookups.

        Resumable like the rows: a root's entries are committed when all are made (a stop inside
        a closure drops the root's partial entries; redoing it re-interns the same states)."""
        cdef int64_t i
        cdef int rc
        if self.st_ptr.n == 0 and i32_push(&self.st_ptr, 0):
            return E_MEM
        for i in range(self.st_acc.n, self.n_roots):
            rc = self._start_root(i)
            if rc:
                self.st_cls.n = self.st_proj.n = self.st_ptr.p[i]
                return rc
        self.starts_done = True
        return OK

    cdef int _start_root(self, int64_t i) noexcept nogil:
        """Root ``i``'s start entries and accept weight (see :meth:`_starts`)."""
        cdef int64_t r, r0, n, k, j, e, off
        cdef int32_t c, rc, x, t, g, cls, tg, gn, m
        cdef uint64_t h
        cdef bint odd
        cdef Level* L = self._level(0)
        if L == NULL:
            return E_MEM
        self.depth = 0
        self.kstack.n = 0
        rc = self._closure(self.t_roots[i], 0, 0, &c)
        if rc:
            return rc
        j = imap_get(&self.root_of_closure, <uint64_t>c)
        if j >= 0:  # the entries depend on the closure alone: a root's twin copies them
            for k in range(self.st_ptr.p[j], self.st_ptr.p[j + 1]):
                if i32_push(&self.st_cls, self.st_cls.p[k]) or i32_push(&self.st_proj, self.st_proj.p[k]):
                    return E_MEM
            return self._root_done(c)
        r0 = self.c_roff.p[c]
        n = self.c_rn.p[c]
        if n > self.mt_cap:
            self.mt = <Member*>realloc(self.mt, <size_t>n * sizeof(Member))
            if self.mt == NULL:
                self.mt_cap = 0
                return E_MEM
            self.mt_cap = n
        for r in range(n):
            self.mt[r].rs = self.r_rs.p[r0 + r]
            self.mt[r].w = self.r_w.p[r0 + r]
        _sort_members(self.mt, n)  # by read state: by global effect state, so by terminal
        self.gen += 1
        if self.gen == 0:
            memset(self.t_stamp, 0, <size_t>max(self.n_terms, 1) * sizeof(uint32_t))
            memset(self.c_stamp, 0, <size_t>max(self.n_start_classes, 1) * sizeof(uint32_t))
            self.gen = 1
        self.present.n = 0
        odd = False  # a read past its automaton's start (none today): it may live anywhere
        k = 0
        while k < n:
            t = self.t_of_g[<int32_t>(self.mt[k].rs >> 32)]
            self.kbuf.n = 0
            j = k
            while j < n and self.t_of_g[<int32_t>(self.mt[j].rs >> 32)] == t:
                g = <int32_t>(self.mt[j].rs >> 32)
                odd = odd or g != self.g_base[t]
                if i32_push(&self.kbuf, g) or i32_push(&self.kbuf, <int32_t>(self.mt[j].rs & 0xffffffffULL)) or \
                        i32_push(&self.kbuf, self.mt[j].w):
                    return E_MEM
                j += 1
            if seq_find(&self.tgroups, self.kbuf.p, <int32_t>self.kbuf.n, &h, &tg):
                return E_MEM
            if tg < 0 and seq_add(&self.tgroups, self.kbuf.p, <int32_t>self.kbuf.n, h, t, &tg):
                return E_MEM
            self.t_stamp[t] = self.gen
            self.t_group[t] = tg
            if i32_push(&self.present, t):
                return E_MEM
            k = j
        self.touched.n = 0
        if odd:
            for cls in range(self.n_start_classes):
                if i32_push(&self.touched, cls):
                    return E_MEM
        else:
            for k in range(self.present.n):
                t = self.present.p[k]
                for e in range(self.tc_ptr[t], self.tc_ptr[t + 1]):
                    cls = self.tc_cls[e]
                    if self.c_stamp[cls] != self.gen:
                        self.c_stamp[cls] = self.gen
                        if i32_push(&self.touched, cls):
                            return E_MEM
            if self.touched.n * 16 < self.n_start_classes:
                _sort_i32(self.touched.p, self.touched.n)
            else:  # most classes: one pass over the stamps is cheaper than sorting them
                self.touched.n = 0
                for cls in range(self.n_start_classes):
                    if self.c_stamp[cls] == self.gen:
                        self.touched.p[self.touched.n] = cls
                        self.touched.n += 1
        for k in range(self.touched.n):
            cls = self.touched.p[k]
            self.kbuf.n = 0
            if i32_push(&self.kbuf, cls) or i32_push(&self.kbuf, self.c_acc.p[c]):
                return E_MEM
            if odd:
                for e in range(self.present.n):
                    if i32_push(&self.kbuf, self.t_group[self.present.p[e]]):
                        return E_MEM
            else:
                for e in range(self.ct_ptr[cls], self.ct_ptr[cls + 1]):
                    t = self.ct_terms[e]
                    if self.t_stamp[t] == self.gen and i32_push(&self.kbuf, self.t_group[t]):
                        return E_MEM
            if seq_find(&self.starts_memo, self.kbuf.p, <int32_t>self.kbuf.n, &h, &m):
                return E_MEM
            if m >= 0:
                x = self.starts_memo.val.p[m]
            else:
                acc_clear(&L.reads)
                memcpy(L.acc, pool_row(&self.pool, self.c_acc.p[c]), <size_t>self.W * 8)
                for e in range(2, self.kbuf.n):
                    tg = self.kbuf.p[e]
                    off = self.tgroups.off.p[tg]
                    gn = self.tgroups.n.p[tg]
                    for j in range(0, gn, 3):
                        if acc_or(&L.reads, (<uint64_t><uint32_t>self.tgroups.arena.p[off + j] << 32) |
                                  <uint64_t><uint32_t>self.tgroups.arena.p[off + j + 1],
                                  pool_row(&self.pool, self.tgroups.arena.p[off + j + 2]),
                                  self.tgroups.arena.p[off + j + 2]):
                            return E_MEM
                self.cur_tag = cls  # a start state reads only its class's labels: its own state
                rc = self._state(L, &x)
                self.cur_tag = -1
                if rc:
                    return rc
                if seq_add(&self.starts_memo, self.kbuf.p, <int32_t>self.kbuf.n, h, x, &m):
                    return E_MEM
            if x >= 0 and (i32_push(&self.st_cls, cls) or i32_push(&self.st_proj, x)):
                return E_MEM
        if imap_put(&self.root_of_closure, <uint64_t>c, <int32_t>self.st_acc.n):
            return E_MEM
        return self._root_done(c)

    cdef int _root_done(self, int32_t c) noexcept nogil:
        """Commit the current root (closure ``c``): its accept weight, after its entries."""
        if i32_reserve(&self.st_acc, self.st_acc.n + 1) or i32_push(&self.st_ptr, <int32_t>self.st_cls.n):
            return E_MEM
        self.st_acc.p[self.st_acc.n] = self.c_acc.p[c]  # last: the root is done
        self.st_acc.n += 1
        return OK

    cdef int _run(self, int64_t max_states) noexcept nogil:
        cdef int rc
        cdef int64_t count = 0
        if not self.starts_done:
            rc = self._starts()
            if rc:
                return rc
        while self.next_x < self.s_n.n:
            if max_states >= 0 and self.s_n.n > max_states:
                return E_LIMIT
            count += 1
            if (count & 63) == 0:
                if self.deadline >= 0 and _now() > self.deadline:
                    return E_TIME
                if _now() > self.slice_end:
                    return E_PAUSE
            self.kstack.n = 0
            rc = self._process(self.next_x)
            if rc:
                return rc
            self.next_x += 1
        return OK

    def run(self, max_states=None, max_seconds=None) -> int:
        """Determinize breadth-first until complete (:data:`COMPLETE`), until more than
        ``max_states`` states exist or ``max_seconds`` have passed (:data:`STOPPED`; a later call
        continues), or until a budget of the builder is exceeded (:data:`MAX_STATES`,
        :data:`MAX_CLOSURES`). The GIL is released; signals are checked every few milliseconds."""
        cdef int64_t ms = -1 if max_states is None else max(0, int(max_states))
        cdef int rc
        if self.busy:
            raise RuntimeError("parser DWA: determinization already running on another thread")
        if self.failed:
            return self.failed
        self.deadline = -1.0 if max_seconds is None else _now() + max(0.0, float(max_seconds))
        self.busy = True
        try:
            while True:
                self.slice_end = _now() + SLICE
                with nogil:
                    rc = self._run(ms)
                if rc != E_PAUSE:
                    break
                PyErr_CheckSignals()
        finally:
            self.busy = False
            self.deadline = -1.0
        if rc == OK:
            return COMPLETE
        if rc == E_TIME or rc == E_LIMIT:
            return STOPPED
        if rc == E_STATES:
            self.failed = MAX_STATES
        elif rc == E_CLOSURES:
            self.failed = MAX_CLOSURES
        else:
            raise MemoryError("parser DWA: out of memory during determinization")
        return self.failed

    # ---------------------------------------------------------------- export
    def arrays(self) -> dict:
        """The flat layout of the complete automaton (see :mod:`glrmask.compiler.parser_dwa`),
        less ``boundary_states``; weights numbered by first appearance (rows in state order, each
        row's explicit edges then its DEFAULT, then the starts)."""
        cdef int64_t n_pool = self.pool.hashes.n, n_x = self.s_n.n, n_e = self.r_label.n, x, k
        cdef int64_t n_roots = self.st_acc.n, n_st = self.st_cls.n
        cdef cnp.ndarray wmap_a = np.full(n_pool, -1, dtype=np.int32)
        cdef int32_t* wmap = <int32_t*>cnp.PyArray_DATA(wmap_a)
        cdef cnp.ndarray order_a = np.empty(n_pool, dtype=np.int32)
        cdef int32_t* order = <int32_t*>cnp.PyArray_DATA(order_a)
        cdef int32_t nw = 0
        out = {name: np.empty(size, dtype=np.int32) for name, size in (
            ("start_accept", n_roots), ("start_ptr", n_roots + 1), ("start_class_of", n_st), ("start_target", n_st),
            ("edge_ptr", n_x + 1), ("edge_label", n_e),
            ("edge_target", n_e), ("edge_accept", n_e), ("default_target", n_x), ("default_accept", n_x))}
        cdef int32_t* e_acc = <int32_t*>cnp.PyArray_DATA(out["edge_accept"])
        cdef int32_t* d_acc = <int32_t*>cnp.PyArray_DATA(out["default_accept"])
        cdef int32_t* s_acc = <int32_t*>cnp.PyArray_DATA(out["start_accept"])
        cdef int32_t a
        if not self.complete:
            raise RuntimeError("parser DWA: arrays() needs a complete determinization (run() first)")
        with nogil:
            for x in range(n_x):
                for k in range(self.row_ptr.p[x], self.row_ptr.p[x + 1]):
                    a = self.r_acc.p[k]
                    if a != 0 and wmap[a] < 0:
                        wmap[a] = nw
                        order[nw] = a
                        nw += 1
                    e_acc[k] = wmap[a] if a != 0 else -1
                a = self.d_acc.p[x]
                if a != 0 and wmap[a] < 0:
                    wmap[a] = nw
                    order[nw] = a
                    nw += 1
                d_acc[x] = wmap[a] if a != 0 else -1
            for x in range(n_roots):
                a = self.st_acc.p[x]
                if a != 0 and wmap[a] < 0:
                    wmap[a] = nw
                    order[nw] = a
                    nw += 1
                s_acc[x] = wmap[a] if a != 0 else -1
        # straight into the output (a large grammar's edges are 100+ MB: no temporary copy,
        # whose fresh pages alone cost the kernel hundreds of ms to clear)
        _copy_i32(out["start_ptr"], self.st_ptr.p, n_roots + 1)
        _copy_i32(out["start_class_of"], self.st_cls.p, n_st)
        _copy_i32(out["start_target"], self.st_proj.p, n_st)
        _copy_i32(out["edge_ptr"], self.row_ptr.p, n_x + 1)
        _copy_i32(out["edge_label"], self.r_label.p, n_e)
        _copy_i32(out["edge_target"], self.r_target.p, n_e)
        _copy_i32(out["default_target"], self.d_target.p, n_x)
        pool = np.asarray(<uint64_t[:max(n_pool, 1) * self.W]>self.pool.words.p).reshape(-1, self.W)
        out["weights"] = np.ascontiguousarray(pool[order_a[:nw]], dtype=np.uint64).reshape(nw, self.W)
        return out
