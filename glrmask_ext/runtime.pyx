# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The native runtime: per-request parser state, ``commit`` and the Parser-DWA mask walk in C.

Why (DESIGN §5). A static mask is cheap only if the runtime around the compiled automaton is:
no Python object per stack node, no allocation per token, no lock shared by requests, the GIL
released. This module owns all of that:

* :class:`Tables` — one compiled grammar × vocabulary as read-only C views of the artifact's
  arrays (dense lexer, LR action/goto tables, Parser DWA, class weights, condition seeds, the
  class → token expansion). Shared by every request and thread; never written after construction
  except for the expansion cache, whose slots are taken with a non-blocking atomic try-lock (a
  busy slot is simply bypassed, so no thread ever waits for another).
* :class:`Family` — the memory of one request and its forks: hash-consed GSS nodes
  ``(LR state, parent)`` in a flat arena, immutable configuration snapshots, a persistent history
  (record → previous record), and scratch buffers. A per-family lock guards appends (a fork used
  from another thread must not see a reallocation half-way); requests never share a family.
  Everything is freed when the last state of the family dies.
* :class:`NativeState` — a (family, history record) pair: ``fork()`` is O(1), ``rollback(n)``
  follows ``n`` links.

A configuration snapshot is a list of *lanes* ``(lexer state | BOUNDARY, pending conditions,
frontier)`` in one ``int32`` run: ``[n_lanes, (lex, n_conds, conds…, n_nodes, nodes…)…]``,
lanes sorted by ``(lex, conds)``, conditions and nodes ascending. ``commit`` is the reference
recognizer's byte step (:mod:`glrmask.reference.recognizer`, ``restrict_lexer=False``) over these lanes;
``fill`` walks every frontier node top-down through the Parser DWA with ``uint64`` class bitsets.
A lane whose lexer state has no Parser-DWA root, or a condition with no failure seed (only bytes
committed mid-token can produce them), is reported back (``NEEDS_FALLBACK``) so the caller can
answer it with the reference masker.
"""
import numpy as np
cimport numpy as cnp

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_WRITABLE
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_acquire_lock, PyThread_release_lock, WAIT_LOCK)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memset, memcpy, memcmp

cnp.import_array()

cdef extern from *:
    """
    static inline int glr_trylock(int *flag) {
        int expected = 0;
        return __atomic_compare_exchange_n(flag, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    static inline void glr_unlock(int *flag) { __atomic_store_n(flag, 0, __ATOMIC_RELEASE); }
    static inline int glr_popcount64(unsigned long long x) { return __builtin_popcountll(x); }
    static inline int glr_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    """
    int glr_trylock(int *flag) nogil
    void glr_unlock(int *flag) nogil
    int glr_popcount64(unsigned long long x) nogil
    int glr_ctz64(unsigned long long x) nogil

DEF BOUNDARY = -2
DEF DEAD = -1
DEF C_TRUE = 0
DEF C_FALSE = 1
DEF N_CACHE_SLOTS = 256

# return codes of the nogil entry points
OK = 0
REJECTED = 1
NEEDS_FALLBACK = 2
OUT_OF_MEMORY = 3
TOO_MANY_STACKS = 4
DEF R_OK = 0
DEF R_REJECTED = 1
DEF R_FALLBACK = 2
DEF R_NOMEM = 3
DEF R_TOOBIG = 4
DEF TOOBIG = -2  # internal return value: a step exceeded max_stacks

DEFAULT_MAX_STACKS = 100_000
"""Stack tops (over all lanes) one step may produce: an ambiguous grammar whose parses multiply
ends that request with a clear error instead of filling memory (``limits["runtime"]``)."""

# token kinds
DEF K_TEXT = 0
DEF K_NONE = 1
DEF K_EOS = 2


# ------------------------------------------------------------------------------------ vectors
ctypedef struct IVec:
    int32_t* d
    Py_ssize_t n
    Py_ssize_t cap

cdef inline int iv_reserve(IVec* v, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap
    cdef int32_t* p
    if need <= v.cap:
        return 0
    cap = v.cap * 2 if v.cap else 64
    while cap < need:
        cap *= 2
    p = <int32_t*>realloc(v.d, cap * sizeof(int32_t))
    if p == NULL:
        return -1
    v.d = p
    v.cap = cap
    return 0

cdef inline int iv_push(IVec* v, int32_t x) noexcept nogil:
    if v.n >= v.cap and iv_reserve(v, v.n + 1):
        return -1
    v.d[v.n] = x
    v.n += 1
    return 0

cdef inline void iv_free(IVec* v) noexcept nogil:
    free(v.d)
    v.d = NULL
    v.n = 0
    v.cap = 0


# ------------------------------------------------------------------------------------ tables
ctypedef struct CTables:
    # dense lexer
    int32_t lex_n
    int32_t lex_init
    int32_t lex_nterm
    int32_t fut_words
    const int32_t* lex_trans
    const int32_t* ev_ptr
    const int32_t* ev_term
    const int32_t* ev_cond
    const uint64_t* futures
    int32_t n_conds
    const int32_t* cond_trans
    const uint8_t* cond_at_end
    const uint8_t* cond_sat
    const int32_t* lr_of_lex
    const uint8_t* lex_ignored
    # LR
    int32_t lr_n
    int32_t lr_nterm
    int32_t lr_nnt
    int32_t end_id
    int32_t lr_start
    const int32_t* shift
    const int32_t* goto_
    const int32_t* red_off
    const int32_t* red_rules
    const int32_t* rule_len
    const int32_t* rule_lhs
    # Parser DWA
    const int32_t* root_of_lex
    const int32_t* start_accept
    const int32_t* start_state
    const int32_t* e_ptr
    const int32_t* e_label
    const int32_t* e_target
    const int32_t* e_accept
    const int32_t* d_target
    const int32_t* d_accept
    const uint64_t* weights
    int32_t cw
    int64_t max_stacks
    const int32_t* cond_fail
    # expansion classes -> original ids
    int32_t n_classes
    int32_t n_words
    const int32_t* cls_ptr
    const int32_t* cls_ids
    const int32_t* cls_dense
    const uint32_t* dense_rows
    const int32_t* cls_cost
    int64_t cost_direct
    # tokens
    int32_t vocab_size
    const uint8_t* tok_bytes
    const int64_t* tok_off
    const uint8_t* tok_kind
    const int32_t* eos
    int32_t n_eos
    # expansion cache
    int* slot_flag
    uint64_t* slot_hash
    uint64_t* slot_key
    uint32_t* slot_words
    uint8_t* slot_used


cdef void _raise(int code, str what, int64_t max_stacks) except *:
    """The error of a failed native step: out of memory, or more parser stacks than allowed."""
    if code == R_TOOBIG:
        from glrmask.errors import GrammarTooComplex

        raise GrammarTooComplex(
            f"runtime ({what}): one step would keep more than {max_stacks} parser stacks (an ambiguous "
            f"grammar whose parses multiply; limit max_stacks, limits={{'runtime': {{'max_stacks': N}}}})")
    raise MemoryError(f"glrmask runtime: out of memory in {what}")


cdef int64_t _scalar(object a) except? -1:
    return int(np.asarray(a).reshape(-1)[0])


cdef inline const int32_t* _i32(object a):
    return <const int32_t*>cnp.PyArray_DATA(a)


cdef class Tables:
    """Read-only C views of one compiled mask's arrays (kept alive by this object). See
    :func:`glrmask.runtime.tables.native_tables` for how the arrays are assembled and checked."""

    cdef CTables t
    cdef dict _keep
    cdef readonly int n_words
    cdef readonly int n_classes
    cdef readonly int class_words

    def __cinit__(self):
        memset(&self.t, 0, sizeof(CTables))

    def __init__(self, dict a):
        cdef CTables* t
        self._keep = {}
        for k_name, arr in a.items():
            self._keep[k_name] = np.ascontiguousarray(arr)
        g = self._keep
        t = &self.t
        t.lex_n = <int32_t>g["lex_trans"].shape[0]
        t.lex_init = <int32_t>_scalar(g["lex_initial"])
        t.lex_nterm = <int32_t>g["lr_of_lex"].shape[0]
        t.fut_words = <int32_t>g["futures"].shape[1]
        t.lex_trans = _i32(g["lex_trans"])
        t.ev_ptr = _i32(g["ev_ptr"])
        t.ev_term = _i32(g["ev_term"])
        t.ev_cond = _i32(g["ev_cond"])
        t.futures = <const uint64_t*>cnp.PyArray_DATA(g["futures"])
        t.n_conds = <int32_t>g["cond_trans"].shape[0]
        t.cond_trans = _i32(g["cond_trans"])
        t.cond_at_end = <const uint8_t*>cnp.PyArray_DATA(g["cond_at_end"])
        t.cond_sat = <const uint8_t*>cnp.PyArray_DATA(g["cond_sat"])
        t.lr_of_lex = _i32(g["lr_of_lex"])
        t.lex_ignored = <const uint8_t*>cnp.PyArray_DATA(g["lex_ignored"])
        t.lr_n = <int32_t>g["shift"].shape[0]
        t.lr_nterm = <int32_t>g["shift"].shape[1]
        t.lr_nnt = <int32_t>g["goto"].shape[1]
        t.end_id = <int32_t>_scalar(g["end_id"])
        t.lr_start = <int32_t>_scalar(g["lr_start"])
        t.shift = _i32(g["shift"])
        t.goto_ = _i32(g["goto"])
        t.red_off = _i32(g["red_off"])
        t.red_rules = _i32(g["red_rules"])
        t.rule_len = _i32(g["rule_len"])
        t.rule_lhs = _i32(g["rule_lhs"])
        t.root_of_lex = _i32(g["root_of_lex"])
        t.start_accept = _i32(g["start_accept"])
        t.start_state = _i32(g["start_state"])
        t.e_ptr = _i32(g["edge_ptr"])
        t.e_label = _i32(g["edge_label"])
        t.e_target = _i32(g["edge_target"])
        t.e_accept = _i32(g["edge_accept"])
        t.d_target = _i32(g["default_target"])
        t.d_accept = _i32(g["default_accept"])
        t.weights = <const uint64_t*>cnp.PyArray_DATA(g["weights"])
        t.cw = <int32_t>g["weights"].shape[1]
        t.cond_fail = _i32(g["cond_fail"])
        t.n_classes = <int32_t>(g["cls_ptr"].shape[0] - 1)
        t.n_words = <int32_t>_scalar(g["n_words"])
        t.cls_ptr = _i32(g["cls_ptr"])
        t.cls_ids = _i32(g["cls_ids"])
        t.cls_dense = _i32(g["cls_dense"])
        t.dense_rows = <const uint32_t*>cnp.PyArray_DATA(g["dense_rows"])
        t.cls_cost = _i32(g["cls_cost"])
        t.cost_direct = <int64_t>(t.n_words // 4 + 16)
        t.max_stacks = <int64_t>_scalar(g["max_stacks"]) if "max_stacks" in g else DEFAULT_MAX_STACKS
        t.vocab_size = <int32_t>g["tok_kind"].shape[0]
        t.tok_bytes = <const uint8_t*>cnp.PyArray_DATA(g["tok_bytes"])
        t.tok_off = <const int64_t*>cnp.PyArray_DATA(g["tok_off"])
        t.tok_kind = <const uint8_t*>cnp.PyArray_DATA(g["tok_kind"])
        t.eos = _i32(g["eos"])
        t.n_eos = <int32_t>g["eos"].shape[0]
        self.n_words = t.n_words
        self.n_classes = t.n_classes
        self.class_words = t.cw
        t.slot_flag = <int*>calloc(N_CACHE_SLOTS, sizeof(int))
        t.slot_hash = <uint64_t*>calloc(N_CACHE_SLOTS, sizeof(uint64_t))
        t.slot_used = <uint8_t*>calloc(N_CACHE_SLOTS, sizeof(uint8_t))
        t.slot_key = <uint64_t*>calloc(N_CACHE_SLOTS * t.cw, sizeof(uint64_t))
        t.slot_words = <uint32_t*>malloc(N_CACHE_SLOTS * t.n_words * sizeof(uint32_t) + 4)
        if (t.slot_flag == NULL or t.slot_hash == NULL or t.slot_used == NULL or t.slot_key == NULL
                or t.slot_words == NULL):
            raise MemoryError("glrmask runtime: cannot allocate the expansion cache")

    def __dealloc__(self):
        free(self.t.slot_flag)
        free(self.t.slot_hash)
        free(self.t.slot_used)
        free(self.t.slot_key)
        free(self.t.slot_words)

    @property
    def vocab_size(self) -> int:
        return self.t.vocab_size

    def new_state(self):
        """A fresh request: its own family, one record holding the initial configuration."""
        return _new_state(self)


# ------------------------------------------------------------------------------------ family
DEF F_TERMINATED = 1
DEF F_ACC_KNOWN = 2
DEF F_ACC_TRUE = 4

ctypedef struct CFamily:
    # GSS arena: node i = (node_state[i], node_parent[i]); hash-consed through an open table
    IVec node_state
    IVec node_parent
    int64_t* htab          # key = (state << 32) | (parent + 1), value index in hval
    int32_t* hval
    Py_ssize_t hcap
    Py_ssize_t hcount
    # snapshots and history
    IVec pool
    IVec rec_snap          # offset into pool
    IVec rec_prev
    IVec rec_depth
    IVec rec_flags
    # scratch (reused across calls; grows, never shrinks)
    IVec s_lanes           # current lanes being stepped
    IVec s_out             # proto-lane entries [lex, nc, conds..., node]
    IVec s_idx             # offsets of proto entries
    IVec s_tmp             # merge-sort buffer
    IVec s_next            # next snapshot being built
    IVec s_conds
    IVec s_clo_state       # reduce closure items (state, parent)
    IVec s_clo_parent
    IVec s_front
    uint64_t* s_bits       # class bitsets: acc, seed, lane (3 * cw)
    int32_t cw


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x ^= x >> 33
    x *= <uint64_t>0xff51afd7ed558ccd
    x ^= x >> 33
    x *= <uint64_t>0xc4ceb9fe1a85ec53
    x ^= x >> 33
    return x


cdef int _h_grow(CFamily* f) noexcept nogil:
    cdef Py_ssize_t ncap = f.hcap * 2 if f.hcap else 256
    cdef int64_t* nt = <int64_t*>malloc(ncap * sizeof(int64_t))
    cdef int32_t* nv = <int32_t*>malloc(ncap * sizeof(int32_t))
    cdef Py_ssize_t i, j
    cdef int64_t key
    if nt == NULL or nv == NULL:
        free(nt)
        free(nv)
        return -1
    for i in range(ncap):
        nt[i] = -1
    for i in range(f.hcap):
        key = f.htab[i]
        if key >= 0:
            j = <Py_ssize_t>(_mix(<uint64_t>key) & <uint64_t>(ncap - 1))
            while nt[j] >= 0:
                j = (j + 1) & (ncap - 1)
            nt[j] = key
            nv[j] = f.hval[i]
    free(f.htab)
    free(f.hval)
    f.htab = nt
    f.hval = nv
    f.hcap = ncap
    return 0


cdef int32_t _intern(CFamily* f, int32_t state, int32_t parent) noexcept nogil:
    """The node ``(state, parent)``, created on first use; -1 when out of memory."""
    cdef int64_t key = (<int64_t>state << 32) | <int64_t>(<uint32_t>(parent + 1))
    cdef Py_ssize_t j
    cdef int32_t idx
    if (f.hcount + 1) * 2 > f.hcap and _h_grow(f):
        return -1
    j = <Py_ssize_t>(_mix(<uint64_t>key) & <uint64_t>(f.hcap - 1))
    while f.htab[j] >= 0:
        if f.htab[j] == key:
            return f.hval[j]
        j = (j + 1) & (f.hcap - 1)
    idx = <int32_t>f.node_state.n
    if iv_push(&f.node_state, state) or iv_push(&f.node_parent, parent):
        return -1
    f.htab[j] = key
    f.hval[j] = idx
    f.hcount += 1
    return idx


cdef class Family:
    """The arena of one request and its forks (see the module docstring)."""

    cdef CFamily f
    cdef Tables tables
    cdef PyThread_type_lock lock

    def __cinit__(self, Tables tables):
        memset(&self.f, 0, sizeof(CFamily))
        self.tables = tables
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("glrmask runtime: cannot allocate a lock")
        self.f.cw = tables.t.cw
        self.f.s_bits = <uint64_t*>calloc(3 * tables.t.cw + 1, sizeof(uint64_t))
        if self.f.s_bits == NULL:
            raise MemoryError("glrmask runtime: out of memory")

    def __dealloc__(self):
        cdef CFamily* f = &self.f
        iv_free(&f.node_state); iv_free(&f.node_parent)
        free(f.htab); free(f.hval)
        iv_free(&f.pool); iv_free(&f.rec_snap); iv_free(&f.rec_prev); iv_free(&f.rec_depth)
        iv_free(&f.rec_flags)
        iv_free(&f.s_lanes); iv_free(&f.s_out); iv_free(&f.s_idx); iv_free(&f.s_tmp)
        iv_free(&f.s_next); iv_free(&f.s_conds); iv_free(&f.s_clo_state); iv_free(&f.s_clo_parent)
        iv_free(&f.s_front)
        free(f.s_bits)
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef int init_root(self) noexcept:
        cdef CFamily* f = &self.f
        cdef int32_t node = _intern(f, self.tables.t.lr_start, -1)
        if node < 0:
            return -1
        # snapshot: one lane (BOUNDARY, no conds, [node])
        cdef int32_t off = <int32_t>f.pool.n
        if (iv_push(&f.pool, 1) or iv_push(&f.pool, BOUNDARY) or iv_push(&f.pool, 0)
                or iv_push(&f.pool, 1) or iv_push(&f.pool, node)):
            return -1
        return _push_record(f, off, -1, 0, 0)

    @property
    def n_nodes(self) -> int:
        return self.f.node_state.n

    @property
    def n_records(self) -> int:
        return self.f.rec_snap.n

    @property
    def nbytes(self) -> int:
        cdef CFamily* f = &self.f
        return 4 * (f.node_state.cap + f.node_parent.cap + f.pool.cap + 4 * f.rec_snap.cap) + 12 * f.hcap


cdef int _push_record(CFamily* f, int32_t snap, int32_t prev, int32_t depth, int32_t flags) noexcept nogil:
    if (iv_push(&f.rec_snap, snap) or iv_push(&f.rec_prev, prev) or iv_push(&f.rec_depth, depth)
            or iv_push(&f.rec_flags, flags)):
        return -1
    return 0


# ------------------------------------------------------------------------------------ GLR
cdef int _closure(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front,
                  int32_t term) noexcept nogil:
    """Reduce closure of ``front`` on lookahead ``term`` into ``s_clo_state/s_clo_parent``:
    the frontier nodes themselves, then every (goto state, revealed node) reachable by
    reductions (a virtual node: only shifted nodes are interned). Returns -1 on OOM."""
    cdef IVec* cs = &f.s_clo_state
    cdef IVec* cp = &f.s_clo_parent
    cdef Py_ssize_t i = 0, j, k
    cdef int32_t st, par, r, p, L, g, node, m
    cdef int dup
    cs.n = 0
    cp.n = 0
    for k in range(n_front):
        node = front[k]
        if iv_push(cs, f.node_state.d[node]) or iv_push(cp, f.node_parent.d[node]):
            return -1
    while i < cs.n:
        st = cs.d[i]
        par = cp.d[i]
        i += 1
        k = <Py_ssize_t>st * t.lr_nterm + term
        for j in range(t.red_off[k], t.red_off[k + 1]):
            r = t.red_rules[j]
            L = t.rule_len[r]
            # the item is (st, par): popping 1 reveals par, further pops follow parents
            if L == 0:
                # an empty rule (normalized grammars keep at most the nullable start): it pops
                # nothing, so the item itself is revealed and must become a real node
                p = _intern(f, st, par)
                if p < 0:
                    return -1
            else:
                p = par
                m = 1
                while m < L and p >= 0:
                    p = f.node_parent.d[p]
                    m += 1
                if p < 0:
                    continue  # pops below the bottom: an invalid path (never for valid tables)
            g = t.goto_[<Py_ssize_t>f.node_state.d[p] * t.lr_nnt + t.rule_lhs[r]]
            if g < 0:
                continue
            dup = 0
            for m in range(cs.n):
                if cs.d[m] == g and cp.d[m] == p:
                    dup = 1
                    break
            if not dup:
                if iv_push(cs, g) or iv_push(cp, p):
                    return -1
    return 0


cdef int _can_shift(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front,
                    int32_t term) noexcept nogil:
    """1 if some stack of ``front`` can shift ``term`` after reductions, 0 if not, -1 on OOM."""
    cdef Py_ssize_t k
    cdef int32_t st
    cdef int any_action = 0
    # fast path: no stack has any action on term
    for k in range(n_front):
        st = f.node_state.d[front[k]]
        if t.shift[<Py_ssize_t>st * t.lr_nterm + term] >= 0:
            return 1
        if t.red_off[<Py_ssize_t>st * t.lr_nterm + term] != t.red_off[<Py_ssize_t>st * t.lr_nterm + term + 1]:
            any_action = 1
    if not any_action:
        return 0
    if _closure(t, f, front, n_front, term):
        return -1
    for k in range(f.s_clo_state.n):
        if t.shift[<Py_ssize_t>f.s_clo_state.d[k] * t.lr_nterm + term] >= 0:
            return 1
    return 0


cdef int _feed(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front, int32_t term,
               IVec* out) noexcept nogil:
    """Shift ``term`` on every stack of ``front`` (all reduce alternatives): the new top nodes,
    appended unsorted to ``out``. Returns -1 on OOM."""
    cdef Py_ssize_t k
    cdef int32_t sh, item, node
    if _closure(t, f, front, n_front, term):
        return -1
    for k in range(f.s_clo_state.n):
        sh = t.shift[<Py_ssize_t>f.s_clo_state.d[k] * t.lr_nterm + term]
        if sh >= 0:
            item = _intern(f, f.s_clo_state.d[k], f.s_clo_parent.d[k])
            if item < 0:
                return -1
            node = _intern(f, sh, item)
            if node < 0 or iv_push(out, node):
                return -1
    return 0


# ------------------------------------------------------------------------------------ lanes
cdef inline int _lane_survives(const CTables* t, CFamily* f, int32_t q2, const int32_t* front,
                               int32_t n_front) noexcept nogil:
    """A mid-lexeme lane in lexer state ``q2`` lives iff one of its future terminals is ignored
    or shiftable by its frontier (the reference recognizer with ``restrict_lexer=False``)."""
    cdef const uint64_t* fut = t.futures + <Py_ssize_t>q2 * t.fut_words
    cdef int32_t w, term, lr
    cdef uint64_t word
    cdef int r
    for w in range(t.fut_words):
        word = fut[w]
        while word:
            term = w * 64 + glr_ctz64(word)
            word &= word - 1
            if t.lex_ignored[term]:
                return 1
            lr = t.lr_of_lex[term]
            if lr >= 0:
                r = _can_shift(t, f, front, n_front, lr)
                if r != 0:
                    return r
    return 0


cdef inline int _emit(CFamily* f, int32_t lex, const int32_t* conds, int32_t nc, int32_t node) noexcept nogil:
    """Append a proto-lane entry ``[lex, nc, conds…, node]`` (conds sorted, unique)."""
    cdef IVec* o = &f.s_out
    cdef int32_t k
    if iv_push(&f.s_idx, <int32_t>o.n):
        return -1
    if iv_reserve(o, o.n + nc + 3):
        return -1
    o.d[o.n] = lex
    o.d[o.n + 1] = nc
    for k in range(nc):
        o.d[o.n + 2 + k] = conds[k]
    o.d[o.n + 2 + nc] = node
    o.n += nc + 3
    return 0


cdef inline int _cmp_entry(const int32_t* d, int32_t a, int32_t b) noexcept nogil:
    """Order proto entries by (lex, nc, conds, node)."""
    cdef int32_t k, na, nb
    if d[a] != d[b]:
        return -1 if d[a] < d[b] else 1
    na = d[a + 1]
    nb = d[b + 1]
    if na != nb:
        return -1 if na < nb else 1
    for k in range(na + 1):
        if d[a + 2 + k] != d[b + 2 + k]:
            return -1 if d[a + 2 + k] < d[b + 2 + k] else 1
    return 0


cdef int _sort_entries(CFamily* f) noexcept nogil:
    """Bottom-up merge sort of ``s_idx`` by :func:`_cmp_entry` (stable, O(n log n))."""
    cdef Py_ssize_t n = f.s_idx.n, width = 1, lo, mid, hi, i, j, k
    cdef int32_t* a
    cdef int32_t* b
    cdef int32_t* tmp
    cdef const int32_t* d = f.s_out.d
    if n < 2:
        return 0
    if iv_reserve(&f.s_tmp, n):
        return -1
    a = f.s_idx.d
    b = f.s_tmp.d
    if n <= 8:
        for i in range(1, n):
            j = i
            while j > 0 and _cmp_entry(d, a[j - 1], a[j]) > 0:
                a[j - 1], a[j] = a[j], a[j - 1]
                j -= 1
        return 0
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width
            if mid > n:
                mid = n
            hi = lo + 2 * width
            if hi > n:
                hi = n
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _cmp_entry(d, a[i], a[j]) <= 0:
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
                k += 1
            while i < mid:
                b[k] = a[i]
                i += 1
                k += 1
            while j < hi:
                b[k] = a[j]
                j += 1
                k += 1
            lo = hi
        tmp = a
        a = b
        b = tmp
        width *= 2
    if a != f.s_idx.d:
        memcpy(f.s_idx.d, a, n * sizeof(int32_t))
    return 0


cdef int _build_lanes(CFamily* f, IVec* dst) noexcept nogil:
    """Group the sorted proto entries into a snapshot ``[n_lanes, lanes…]`` appended to ``dst``
    (duplicates dropped). Returns the number of lanes, or -1 on OOM."""
    cdef const int32_t* d
    cdef Py_ssize_t i = 0, n, head, cnt_pos, j
    cdef int32_t e, nc, k, n_lanes = 0, prev_node
    cdef Py_ssize_t base
    if _sort_entries(f):
        return -1
    n = f.s_idx.n
    base = dst.n
    if iv_push(dst, 0):
        return -1
    while i < n:
        e = f.s_idx.d[i]
        d = f.s_out.d
        nc = d[e + 1]
        if iv_reserve(dst, dst.n + nc + 3):
            return -1
        dst.d[dst.n] = d[e]
        dst.d[dst.n + 1] = nc
        for k in range(nc):
            dst.d[dst.n + 2 + k] = d[e + 2 + k]
        dst.n += nc + 2
        cnt_pos = dst.n
        if iv_push(dst, 0):
            return -1
        prev_node = -1
        head = e
        while i < n:
            e = f.s_idx.d[i]
            d = f.s_out.d
            if d[e] != d[head] or d[e + 1] != nc:
                break
            if memcmp(&d[e + 2], &d[head + 2], nc * sizeof(int32_t)) != 0:
                break
            if d[e + 2 + nc] != prev_node:
                prev_node = d[e + 2 + nc]
                if iv_push(dst, prev_node):
                    return -1
                dst.d[cnt_pos] += 1
            i += 1
        n_lanes += 1
    dst.d[base] = n_lanes
    return n_lanes


cdef int _step_byte(const CTables* t, CFamily* f, const int32_t* lanes, int32_t b,
                    IVec* dst) noexcept nogil:
    """One byte over the snapshot ``lanes``; the next snapshot is appended to ``dst``. Returns
    its number of lanes (0: the byte kills every lane) or -1 on OOM."""
    cdef int32_t n_lanes = lanes[0], li, lex, nc, nn, k, c, c2, q, q2, term, cond, lr
    cdef const int32_t* p = lanes + 1
    cdef const int32_t* conds
    cdef const int32_t* front
    cdef Py_ssize_t e, base_n, m, z
    cdef int dead, r
    cdef IVec* cv = &f.s_conds
    f.s_out.n = 0
    f.s_idx.n = 0
    for li in range(n_lanes):
        lex = p[0]
        nc = p[1]
        conds = p + 2
        nn = p[2 + nc]
        front = p + 3 + nc
        p = front + nn
        # settle pending conditions on this byte
        cv.n = 0
        dead = 0
        for k in range(nc):
            c2 = t.cond_trans[<Py_ssize_t>conds[k] * 256 + b]
            if c2 == C_FALSE:
                dead = 1
                break
            if c2 != C_TRUE:
                if iv_push(cv, c2):
                    return -1
        if dead:
            continue
        # sort + unique the surviving conditions (few)
        for k in range(1, cv.n):
            c = cv.d[k]
            m = k
            while m > 0 and cv.d[m - 1] > c:
                cv.d[m] = cv.d[m - 1]
                m -= 1
            cv.d[m] = c
        m = 0
        for k in range(cv.n):
            if m == 0 or cv.d[m - 1] != cv.d[k]:
                cv.d[m] = cv.d[k]
                m += 1
        cv.n = m
        base_n = cv.n
        q = t.lex_init if lex == BOUNDARY else lex
        q2 = t.lex_trans[<Py_ssize_t>q * 256 + b]
        if q2 != DEAD:
            r = _lane_survives(t, f, q2, front, nn)
            if r < 0:
                return -1
            if r:
                for k in range(nn):
                    if _emit(f, q2, cv.d, <int32_t>base_n, front[k]):
                        return -1
        z = <Py_ssize_t>q * 256 + b
        for e in range(t.ev_ptr[z], t.ev_ptr[z + 1]):
            term = t.ev_term[e]
            cond = t.ev_cond[e]
            if cond == C_FALSE or (cond != C_TRUE and not t.cond_sat[cond]):
                continue
            # conditions after this event: base ∪ {cond}
            cv.n = base_n
            if cond != C_TRUE:
                m = 0
                while m < base_n and cv.d[m] < cond:
                    m += 1
                if m == base_n or cv.d[m] != cond:
                    if iv_push(cv, 0):
                        return -1
                    k = <int32_t>base_n
                    while k > m:
                        cv.d[k] = cv.d[k - 1]
                        k -= 1
                    cv.d[m] = cond
            if t.lex_ignored[term]:
                for k in range(nn):
                    if _emit(f, BOUNDARY, cv.d, <int32_t>cv.n, front[k]):
                        return -1
            lr = t.lr_of_lex[term]
            if lr >= 0:
                f.s_front.n = 0
                if _feed(t, f, front, nn, lr, &f.s_front):
                    return -1
                for m in range(f.s_front.n):
                    if _emit(f, BOUNDARY, cv.d, <int32_t>cv.n, f.s_front.d[m]):
                        return -1
            # restore the base condition list (an insertion may have shifted it)
            if cond != C_TRUE and cv.n != base_n:
                k = 0
                for m in range(cv.n):
                    if cv.d[m] != cond:
                        cv.d[k] = cv.d[m]
                        k += 1
                cv.n = k
    if f.s_idx.n == 0:
        return 0
    if f.s_idx.n > t.max_stacks:
        return TOOBIG
    return _build_lanes(f, dst)


cdef int _step_bytes(const CTables* t, CFamily* f, const int32_t* snap, const uint8_t* data,
                     Py_ssize_t n) noexcept nogil:
    """Step ``snap`` over ``data``; the result is left in ``f.s_next`` (from offset 0). Returns
    the number of lanes (0 = rejected) or -1 on OOM."""
    cdef Py_ssize_t i, ln
    cdef int r = 0
    cdef IVec tmp
    cdef const int32_t* cur = snap
    if n == 0:
        # copy the snapshot as is
        ln = _snap_len(snap)
        f.s_next.n = 0
        if iv_reserve(&f.s_next, ln):
            return -1
        memcpy(f.s_next.d, snap, ln * sizeof(int32_t))
        f.s_next.n = ln
        return snap[0]
    for i in range(n):
        f.s_next.n = 0
        r = _step_byte(t, f, cur, data[i], &f.s_next)
        if r <= 0:
            return r
        # swap s_next into s_lanes so the next byte reads a stable buffer
        tmp = f.s_lanes
        f.s_lanes = f.s_next
        f.s_next = tmp
        cur = f.s_lanes.d
    # the result sits in s_lanes: swap back so callers find it in s_next
    tmp = f.s_lanes
    f.s_lanes = f.s_next
    f.s_next = tmp
    return r


cdef inline Py_ssize_t _snap_len(const int32_t* s) noexcept nogil:
    cdef int32_t n = s[0], i
    cdef Py_ssize_t k = 1
    for i in range(n):
        k += 2 + s[k + 1]
        k += 1 + s[k]
    return k


cdef int _accepting(const CTables* t, CFamily* f, const int32_t* snap) noexcept nogil:
    """Some lane sits at a boundary, its conditions hold at the end of the document, and its
    frontier can shift ``$END``. 1/0, -1 on OOM."""
    cdef int32_t n = snap[0], i, nc, nn, k
    cdef const int32_t* p = snap + 1
    cdef int ok, r
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        if p[0] == BOUNDARY:
            ok = 1
            for k in range(nc):
                if not t.cond_at_end[p[2 + k]]:
                    ok = 0
                    break
            if ok:
                r = _can_shift(t, f, p + 3 + nc, nn, t.end_id)
                if r != 0:
                    return r
        p = p + 3 + nc + nn
    return 0


cdef int _rec_accepting(const CTables* t, CFamily* f, int32_t rec) noexcept nogil:
    cdef int32_t fl = f.rec_flags.d[rec]
    cdef int r
    if fl & F_TERMINATED:
        return 1
    if fl & F_ACC_KNOWN:
        return 1 if fl & F_ACC_TRUE else 0
    r = _accepting(t, f, f.pool.d + f.rec_snap.d[rec])
    if r < 0:
        return r
    f.rec_flags.d[rec] = fl | F_ACC_KNOWN | (F_ACC_TRUE if r else 0)
    return r


cdef int _commit(const CTables* t, CFamily* f, int32_t rec, const uint8_t* data, Py_ssize_t n,
                 int as_token_eos, int32_t* new_rec) noexcept nogil:
    """Append the record after ``data`` (or after an end token) to the history of ``rec``."""
    cdef int r
    cdef int32_t off
    if f.rec_flags.d[rec] & F_TERMINATED:
        return R_REJECTED
    if as_token_eos:
        r = _rec_accepting(t, f, rec)
        if r < 0:
            return R_NOMEM
        if not r:
            return R_REJECTED
        if _push_record(f, f.rec_snap.d[rec], rec, f.rec_depth.d[rec] + 1, F_TERMINATED):
            return R_NOMEM
        new_rec[0] = <int32_t>(f.rec_snap.n - 1)
        return R_OK
    r = _step_bytes(t, f, f.pool.d + f.rec_snap.d[rec], data, n)
    if r == TOOBIG:
        return R_TOOBIG
    if r < 0:
        return R_NOMEM
    if r == 0:
        return R_REJECTED
    off = <int32_t>f.pool.n
    if iv_reserve(&f.pool, f.pool.n + f.s_next.n):
        return R_NOMEM
    memcpy(f.pool.d + off, f.s_next.d, f.s_next.n * sizeof(int32_t))
    f.pool.n += f.s_next.n
    if _push_record(f, off, rec, f.rec_depth.d[rec] + 1, 0):
        return R_NOMEM
    new_rec[0] = <int32_t>(f.rec_snap.n - 1)
    return R_OK


cdef int _commit_token(const CTables* t, CFamily* f, int32_t rec, int64_t token,
                       int32_t* new_rec) noexcept nogil:
    cdef uint8_t kind
    if token < 0 or token >= t.vocab_size:
        return R_REJECTED
    kind = t.tok_kind[token]
    if kind == K_NONE:
        return R_REJECTED
    if kind == K_EOS:
        return _commit(t, f, rec, NULL, 0, 1, new_rec)
    return _commit(t, f, rec, t.tok_bytes + t.tok_off[token], t.tok_off[token + 1] - t.tok_off[token],
                   0, new_rec)


# ------------------------------------------------------------------------------------ masks
cdef inline int32_t _pd_step(const CTables* t, int32_t x, int32_t s, int32_t* acc) noexcept nogil:
    """Read LR state ``s`` in Parser-DWA state ``x``: the next state (-1 stops) and, in ``acc``,
    the weight accepted on the way (-1 none). Explicit labels are ascending: binary search."""
    cdef int32_t lo = t.e_ptr[x], hi = t.e_ptr[x + 1], mid, lab
    while lo < hi:
        mid = (lo + hi) >> 1
        lab = t.e_label[mid]
        if lab == s:
            acc[0] = t.e_accept[mid]
            return t.e_target[mid]
        if lab < s:
            lo = mid + 1
        else:
            hi = mid
    acc[0] = t.d_accept[x]
    return t.d_target[x]


cdef inline void _or_weight(const CTables* t, uint64_t* dst, int32_t w) noexcept nogil:
    cdef const uint64_t* src = t.weights + <Py_ssize_t>w * t.cw
    cdef int32_t k
    for k in range(t.cw):
        dst[k] |= src[k]


cdef int _class_bits(const CTables* t, CFamily* f, const int32_t* snap, uint64_t* acc) noexcept nogil:
    """The allowed classes of a snapshot into ``acc`` (cw words). R_FALLBACK when a lane has no
    Parser-DWA root or a condition no failure seed."""
    cdef int32_t n = snap[0], i, nc, nn, k, q, root, x, w, node, x0
    cdef const int32_t* p = snap + 1
    cdef uint64_t* seed = f.s_bits + t.cw
    cdef uint64_t* lane = f.s_bits + 2 * t.cw
    cdef uint64_t any_new
    cdef int32_t c
    memset(acc, 0, t.cw * sizeof(uint64_t))
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        q = t.lex_init if p[0] == BOUNDARY else p[0]
        root = t.root_of_lex[q]
        if root < 0:
            return R_FALLBACK
        for k in range(t.cw):
            seed[k] = ~(<uint64_t>0)
        for k in range(nc):
            w = t.cond_fail[p[2 + k]]
            if w == -2:
                return R_FALLBACK
            if w >= 0:
                for c in range(t.cw):
                    seed[c] &= ~t.weights[<Py_ssize_t>w * t.cw + c]
        any_new = 0
        for k in range(t.cw):
            any_new |= seed[k] & ~acc[k]
        if any_new:
            memset(lane, 0, t.cw * sizeof(uint64_t))
            if t.start_accept[root] >= 0:
                _or_weight(t, lane, t.start_accept[root])
            x0 = t.start_state[root]
            for k in range(nn):
                node = p[3 + nc + k]
                x = x0
                while x >= 0 and node >= 0:
                    x = _pd_step(t, x, f.node_state.d[node], &w)
                    if w >= 0:
                        _or_weight(t, lane, w)
                    node = f.node_parent.d[node]
            for k in range(t.cw):
                acc[k] |= seed[k] & lane[k]
        p = p + 3 + nc + nn
    return R_OK


cdef void _expand_direct(const CTables* t, const uint64_t* bits, uint32_t* out, int complement) noexcept nogil:
    """OR the tokens of the classes in ``bits`` (or of those NOT in ``bits`` when
    ``complement``) into ``out``."""
    cdef int32_t w, c, k, row
    cdef uint64_t word
    cdef const uint32_t* src
    cdef int32_t j, nwords = t.n_words
    for w in range(t.cw):
        word = ~bits[w] if complement else bits[w]
        if w == t.cw - 1 and (t.n_classes & 63):
            word &= (<uint64_t>1 << (t.n_classes & 63)) - 1
        while word:
            c = w * 64 + glr_ctz64(word)
            word &= word - 1
            row = t.cls_dense[c]
            if row >= 0:
                src = t.dense_rows + <Py_ssize_t>row * nwords
                for j in range(nwords):
                    out[j] |= src[j]
            else:
                for k in range(t.cls_ptr[c], t.cls_ptr[c + 1]):
                    j = t.cls_ids[k]
                    out[j >> 5] |= (<uint32_t>1) << (j & 31)


cdef void _expand(const CTables* t, const uint64_t* bits, uint32_t* out) noexcept nogil:
    """Packed original-id words of a class bitset: the cheaper of the classes in it or the
    classes out of it (then complemented against the union of all classes, its own dense row
    ``n_classes``), with a bounded cache of recent results for the expensive ones."""
    cdef int64_t cost_in = 0, cost_out = 0
    cdef int32_t w, c, slot, j
    cdef uint64_t word, h = 0x9E3779B97F4A7C15
    cdef int complement
    cdef const uint32_t* all_row
    for w in range(t.cw):
        word = bits[w]
        h = _mix(h ^ word)
        while word:
            c = w * 64 + glr_ctz64(word)
            word &= word - 1
            cost_in += t.cls_cost[c]
    cost_out = t.cls_cost[t.n_classes] - cost_in  # the total cost minus the part in `bits`
    complement = cost_out < cost_in
    if (cost_out if complement else cost_in) > t.cost_direct:
        slot = <int32_t>(h % N_CACHE_SLOTS)
        if glr_trylock(&t.slot_flag[slot]):
            if (t.slot_used[slot] and t.slot_hash[slot] == h
                    and memcmp(t.slot_key + <Py_ssize_t>slot * t.cw, bits, t.cw * sizeof(uint64_t)) == 0):
                memcpy(out, t.slot_words + <Py_ssize_t>slot * t.n_words, t.n_words * sizeof(uint32_t))
                glr_unlock(&t.slot_flag[slot])
                return
            _expand_into(t, bits, out, complement)
            memcpy(t.slot_words + <Py_ssize_t>slot * t.n_words, out, t.n_words * sizeof(uint32_t))
            memcpy(t.slot_key + <Py_ssize_t>slot * t.cw, bits, t.cw * sizeof(uint64_t))
            t.slot_hash[slot] = h
            t.slot_used[slot] = 1
            glr_unlock(&t.slot_flag[slot])
            return
    _expand_into(t, bits, out, complement)


cdef void _expand_into(const CTables* t, const uint64_t* bits, uint32_t* out, int complement) noexcept nogil:
    cdef int32_t j
    cdef const uint32_t* all_row
    if complement:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        _expand_direct(t, bits, out, 1)
        all_row = t.dense_rows + <Py_ssize_t>t.cls_dense[t.n_classes] * t.n_words
        for j in range(t.n_words):
            out[j] = all_row[j] & ~out[j]
    else:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        _expand_direct(t, bits, out, 0)


cdef int _fill(const CTables* t, CFamily* f, int32_t rec, uint32_t* out) noexcept nogil:
    """The mask of record ``rec`` into ``out`` (``n_words`` words)."""
    cdef uint64_t* acc = f.s_bits
    cdef int r, k
    cdef int32_t e
    if f.rec_flags.d[rec] & F_TERMINATED:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        return R_OK
    r = _class_bits(t, f, f.pool.d + f.rec_snap.d[rec], acc)
    if r != R_OK:
        return r
    _expand(t, acc, out)
    if t.n_eos:
        r = _rec_accepting(t, f, rec)
        if r < 0:
            return R_NOMEM
        if r:
            for k in range(t.n_eos):
                e = t.eos[k]
                out[e >> 5] |= (<uint32_t>1) << (e & 31)
    return R_OK


# ------------------------------------------------------------------------------------ states
cdef class NativeState:
    """One request's position: a history record in its family. Immutable tables, own memory."""

    cdef Family fam
    cdef int32_t head

    def fork(self) -> "NativeState":
        cdef NativeState st = NativeState.__new__(NativeState)
        st.fam = self.fam
        st.head = self.head
        return st

    @property
    def depth(self) -> int:
        return self.fam.f.rec_depth.d[self.head]

    @property
    def terminated(self) -> bool:
        return bool(self.fam.f.rec_flags.d[self.head] & F_TERMINATED)

    @property
    def tables(self) -> Tables:
        return self.fam.tables

    @property
    def family(self) -> Family:
        return self.fam

    def rollback(self, int n) -> None:
        cdef CFamily* f = &self.fam.f
        cdef int32_t h = self.head
        if n < 0 or n > f.rec_depth.d[h]:
            raise ValueError(f"cannot roll back {n} steps: only {f.rec_depth.d[h]} were committed")
        while n > 0:
            h = f.rec_prev.d[h]
            n -= 1
        self.head = h

    cdef bint _advance(self, int64_t token, const uint8_t* p, Py_ssize_t n) except -1:
        """Commit ``token`` (``token >= 0``) or the raw bytes ``p[:n]`` as one history step."""
        cdef Family fam = self.fam
        cdef int r
        cdef int32_t nr = -1, head = self.head
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)
            if token >= 0:
                r = _commit_token(t, f, head, token, &nr)
            else:
                r = _commit(t, f, head, p, n, 0, &nr)
            PyThread_release_lock(lock)
        if r == R_NOMEM or r == R_TOOBIG:
            _raise(r, "commit", t.max_stacks)
        if r == R_OK:
            self.head = nr
            return True
        return False

    cpdef bint commit(self, int64_t token) except -1:
        """Advance by one token id (``0 <= token < vocab size``; checked by the caller)."""
        if token < 0:
            return False
        return self._advance(token, NULL, 0)

    def commit_bytes(self, const uint8_t[::1] data) -> bool:
        """Advance by raw bytes (one history step)."""
        cdef Py_ssize_t n = data.shape[0]
        return self._advance(-1, &data[0] if n else NULL, n)

    def probe_bytes(self, const uint8_t[::1] data) -> bool:
        """Whether ``data`` can follow (nothing is committed)."""
        cdef Family fam = self.fam
        cdef int r
        cdef Py_ssize_t n = data.shape[0]
        cdef const uint8_t* p = &data[0] if n else NULL
        cdef CFamily* f = &fam.f
        cdef const CTables* t = &fam.tables.t
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)
            if f.rec_flags.d[head] & F_TERMINATED:
                r = 0
            else:
                r = _step_bytes(t, f, f.pool.d + f.rec_snap.d[head], p, n)
            PyThread_release_lock(lock)
        if r < 0:
            _raise(R_TOOBIG if r == TOOBIG else R_NOMEM, "commit_bytes", t.max_stacks)
        return r > 0

    def is_accepting(self) -> bool:
        cdef Family fam = self.fam
        cdef int r
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)
            r = _rec_accepting(t, f, head)
            PyThread_release_lock(lock)
        if r < 0:
            raise MemoryError("glrmask runtime: out of memory")
        return r == 1

    cpdef int fill(self, uint32_t[::1] out) except -1:
        """Write the mask into ``out`` (``n_words`` uint32 words): OK or NEEDS_FALLBACK."""
        cdef Family fam = self.fam
        cdef int r
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        if out.shape[0] < t.n_words:
            raise ValueError(f"mask buffer holds {out.shape[0]} words, need {t.n_words}")
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)
            r = _fill(t, f, head, &out[0])
            PyThread_release_lock(lock)
        if r == R_NOMEM:
            raise MemoryError("glrmask runtime: out of memory in get_mask")
        return r

    def configuration(self) -> tuple:
        """The lanes as a hashable, sorted tuple (see ``glrmask.State.configuration``)."""
        return tuple(sorted((lex, conds, tuple(sorted(stacks))) for lex, conds, stacks in self.lanes()))

    cpdef int fill_into(self, object out, Py_ssize_t row) except -1:
        """Write the mask into row ``row`` of ``out``, any writable C-contiguous buffer of int32
        (1-D: the row is the buffer; 2-D ``(batch, >= n_words)``), through the buffer protocol:
        no allocation, GIL released while walking. Words past ``n_words`` are zeroed. Returns OK
        or NEEDS_FALLBACK (then the row is zeroed)."""
        cdef Py_buffer view
        cdef Family fam = self.fam
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        cdef Py_ssize_t words, rows
        cdef uint32_t* dst
        cdef int r
        PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
        try:
            fmt = view.format if view.format != NULL else b"B"
            if view.itemsize != 4 or fmt not in (b"i", b"=i", b"<i", b"l" if sizeof(long) == 4 else b"i"):
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words})")
            if view.ndim == 1:
                rows, words = 1, view.shape[0]
            elif view.ndim == 2:
                rows, words = view.shape[0], view.shape[1]
            else:
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words})")
            if words < t.n_words:
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words}), "
                                 f"got {words} words per row")
            if row < 0 or row >= rows:
                raise ValueError(f"row {row} is outside the {rows} rows of out")
            dst = (<uint32_t*>view.buf) + row * words
            with nogil:
                PyThread_acquire_lock(lock, WAIT_LOCK)
                r = _fill(t, f, head, dst)
                PyThread_release_lock(lock)
                if r != R_OK:
                    memset(dst, 0, words * sizeof(uint32_t))
                elif words > t.n_words:
                    memset(dst + t.n_words, 0, (words - t.n_words) * sizeof(uint32_t))
        finally:
            PyBuffer_Release(&view)
        if r == R_NOMEM:
            raise MemoryError("glrmask runtime: out of memory in get_mask")
        return r

    def lanes(self) -> list:
        """The configuration as Python data ``[(lex, (conds…), (stack…), …)…]`` where each stack is
        a tuple of LR states, bottom first (for the reference fallback and for tests)."""
        cdef CFamily* f = &self.fam.f
        cdef const int32_t* s = f.pool.d + f.rec_snap.d[self.head]
        cdef int32_t n = s[0], i, nc, nn, k, node
        cdef const int32_t* p = s + 1
        out = []
        for i in range(n):
            nc = p[1]
            nn = p[2 + nc]
            conds = tuple(p[2 + k] for k in range(nc))
            stacks = []
            for k in range(nn):
                node = p[3 + nc + k]
                st = []
                while node >= 0:
                    st.append(f.node_state.d[node])
                    node = f.node_parent.d[node]
                stacks.append(tuple(reversed(st)))
            out.append((p[0], conds, tuple(stacks)))
            p = p + 3 + nc + nn
        return out


ctypedef struct Job:
    const CTables* t
    CFamily* f
    PyThread_type_lock lock
    int32_t head
    int code


cdef Job* _jobs(list states, Py_ssize_t words) except NULL:
    cdef Py_ssize_t n = len(states), i
    cdef NativeState st
    cdef Job* jobs = <Job*>malloc((n + 1) * sizeof(Job))
    if jobs == NULL:
        raise MemoryError
    for i in range(n):
        st = states[i]
        if words >= 0 and words < st.fam.tables.t.n_words:
            free(jobs)
            raise ValueError(f"out has {words} words per row, a state needs {st.fam.tables.t.n_words}")
        jobs[i].t = &st.fam.tables.t
        jobs[i].f = &st.fam.f
        jobs[i].lock = st.fam.lock
        jobs[i].head = st.head
        jobs[i].code = R_OK
    return jobs


cdef inline void _fill_one(Job* j, uint32_t* row, Py_ssize_t words) noexcept nogil:
    PyThread_acquire_lock(j.lock, WAIT_LOCK)
    j.code = _fill(j.t, j.f, j.head, row)
    PyThread_release_lock(j.lock)
    if j.code != R_OK:
        memset(row, 0, words * sizeof(uint32_t))
    elif words > j.t.n_words:
        memset(row + j.t.n_words, 0, (words - j.t.n_words) * sizeof(uint32_t))


cdef inline void _commit_one(Job* j, int64_t token) noexcept nogil:
    cdef int32_t nr = -1
    PyThread_acquire_lock(j.lock, WAIT_LOCK)
    j.code = _commit_token(j.t, j.f, j.head, token, &nr)
    PyThread_release_lock(j.lock)
    if j.code == R_OK:
        j.head = nr


def _new_state(Tables tables):
    cdef Family fam = Family(tables)
    if fam.init_root() != 0:
        raise MemoryError("glrmask runtime: out of memory")
    cdef NativeState st = NativeState.__new__(NativeState)
    st.fam = fam
    st.head = 0
    return st


def expansion_tables(const int32_t[::1] class_of_orig, int n_classes, int64_t n_logits, int64_t dense_min):
    """Class -> original ids (CSR, ids ascending), dense packed rows for the classes with at least
    ``dense_min`` tokens plus one row for the union of all classes (row ``cls_dense[n_classes]``),
    and each class's cost in the expansion's cost model (entry ``n_classes`` is the total). One
    counting pass in C: ``Mask.load`` must not spend milliseconds here. ``class_of_orig`` values
    must lie in ``[-1, n_classes)`` (checked by the caller)."""
    cdef Py_ssize_t n = class_of_orig.shape[0], j, r
    cdef int64_t n_words = (n_logits + 31) // 32
    cdef int32_t c
    cls_ptr = np.zeros(n_classes + 1, dtype=np.int32)
    cdef int32_t[::1] ptr = cls_ptr
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            ptr[c + 1] += 1
    counts = cls_ptr[1:].astype(np.int64)  # before the prefix sum: ptr[c + 1] is class c's size
    for c in range(n_classes):
        ptr[c + 1] += ptr[c]
    cls_ids = np.empty(ptr[n_classes], dtype=np.int32)
    cdef int32_t[::1] ids = cls_ids
    fill = np.array(cls_ptr[:n_classes], dtype=np.int32) if n_classes else np.zeros(0, dtype=np.int32)
    cdef int32_t[::1] at = fill
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            ids[at[c]] = <int32_t>j
            at[c] += 1
    big = np.flatnonzero(counts >= max(dense_min, n_words // 8)).astype(np.int32)
    cls_dense = np.full(n_classes + 1, -1, dtype=np.int32)
    cls_dense[big] = np.arange(len(big), dtype=np.int32)
    cls_dense[n_classes] = len(big)
    rows = np.zeros((len(big) + 1, n_words), dtype=np.uint32)
    cdef uint32_t[:, ::1] rv = rows
    cdef int32_t[::1] dense = cls_dense
    cdef int32_t all_row = <int32_t>len(big)
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            rv[all_row, j >> 5] |= (<uint32_t>1) << (j & 31)
            r = dense[c]
            if r >= 0:
                rv[r, j >> 5] |= (<uint32_t>1) << (j & 31)
    cost = counts.copy()
    cost[big] = max(1, n_words // 8)
    cls_cost = np.zeros(n_classes + 1, dtype=np.int32)
    cls_cost[:n_classes] = cost
    cls_cost[n_classes] = int(cost.sum())
    return {"cls_ptr": cls_ptr, "cls_ids": cls_ids, "cls_dense": cls_dense, "dense_rows": rows,
            "cls_cost": cls_cost, "n_words": np.int64(n_words)}


cdef class _Batch:
    """One batch of native states: :meth:`run` works on a range of rows with the GIL released, so
    several Python threads can share one batch (each state's family lock keeps a state and its
    forks consistent; different requests never wait for each other)."""

    cdef Job* jobs
    cdef Py_ssize_t n
    cdef object _keep

    cdef void _init(self, list states, Py_ssize_t words, object keep) except *:
        self.n = len(states)
        self.jobs = _jobs(states, words)
        self._keep = keep

    def __dealloc__(self):
        free(self.jobs)

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        pass

    def run(self, Py_ssize_t lo, Py_ssize_t hi) -> None:
        if lo < 0 or hi > self.n or lo > hi:
            raise ValueError("row range out of bounds")
        with nogil:
            self._rows(lo, hi)

    cdef void _check(self, str what) except *:
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.jobs[i].code == R_NOMEM or self.jobs[i].code == R_TOOBIG:
                _raise(self.jobs[i].code, what, self.jobs[i].t.max_stacks)


cdef class FillBatch(_Batch):
    """Row ``i`` of ``out`` <- the mask of ``states[i]``; :meth:`finish` reports the rows that need
    the reference fallback (left zeroed)."""

    cdef Py_ssize_t words
    cdef uint32_t* base

    def __cinit__(self, list states, uint32_t[:, ::1] out):
        if out.shape[0] < len(states):
            raise ValueError(f"out has {out.shape[0]} rows for {len(states)} states")
        self.words = out.shape[1]
        self._init(states, self.words, (states, out))
        self.base = &out[0, 0] if self.n else NULL

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(lo, hi):
            _fill_one(&self.jobs[i], self.base + i * self.words, self.words)

    def finish(self) -> list:
        self._check("fill_masks")
        return [i for i in range(self.n) if self.jobs[i].code == R_FALLBACK]


cdef class CommitBatch(_Batch):
    """``states[i].commit(tokens[i])`` (tokens checked by the caller); :meth:`finish` moves the
    states and returns the results (uint8: 1 committed, 0 refused)."""

    cdef const int64_t* tokens

    def __cinit__(self, list states, const int64_t[::1] tokens):
        if tokens.shape[0] != len(states):
            raise ValueError(f"{len(states)} states but {tokens.shape[0]} tokens")
        self._init(states, -1, (states, tokens))
        self.tokens = &tokens[0] if self.n else NULL

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(lo, hi):
            _commit_one(&self.jobs[i], self.tokens[i])

    def finish(self):
        cdef Py_ssize_t i
        self._check("commit_many")
        res = np.zeros(self.n, dtype=np.uint8)
        cdef uint8_t[::1] rv = res
        states = self._keep[0]
        for i in range(self.n):
            if self.jobs[i].code == R_OK:
                (<NativeState>states[i]).head = self.jobs[i].head
                rv[i] = 1
        return res
