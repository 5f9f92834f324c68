# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: language = c++
"""Native construction of the LR(1) table (semantics and reference: :mod:`glrmask.lr.table`).

Why native. The table is the largest part of the time to the first mask for a new grammar: a
JSON Schema of a few hundred terminals has tens of thousands of canonical LR(1) item sets (and
past ``max_states`` the whole exploration is redone as LALR(1)), and the Python builder spends
microseconds per item on dictionaries and integer bitsets. Here a lookahead set is a fixed-width
``uint64`` bitset of ``ceil(T / 64)`` words interned once in a hash-consed pool, so an item is a
pair of machine integers ``(core, set id)``; kernels, transitions and reduce lists live in flat
arrays with open-addressing hash tables, and no Python object exists per item or per state.

Identical output. Everything is visited in the order of the Python builder
(:class:`glrmask.lr.table._Builder`), which stays the test oracle: closures of a nonterminal are
explored with the same work queue (items in first-insertion order), a kernel's closure lists the
kernel items then the closure items in first-insertion order, successors are taken in order of
their symbol's first appearance, and states are numbered breadth-first, with LALR(1) re-queueing
a state whose lookaheads grew exactly as the Python work queue does. The minimization computes the
same partition (the coarsest one stable under the transitions, which is unique) and numbers its
classes breadth-first from the start over the symbols in ascending order, as
:func:`glrmask.lr.table._minimize` does.

What differs from the Python builder is only what is not observable: transitions and (in
canonical mode) reduce lists are recorded while exploring instead of recomputing every closure in
a second pass (a state's successor cores, hence its targets, never change, even when LALR(1) grows
its lookaheads), and the action rows and dense views are left to :class:`glrmask.lr.table.LRTable`.

Less work, same automaton. Three shortcuts leave every state, number and row as they were
(``tests/test_lr_build_order.py`` compares them with the plain sequence on every path):
:meth:`Automaton.explore_lr0` counts the LR(0) states, which are the LALR(1) ones, so a canonical
attempt that cannot fit is not made, and :meth:`Automaton.lalr_from_lr0` then solves the LALR(1)
lookahead equations once per state instead of re-closing states until nothing grows; states whose
closure is "the kernel, then one nonterminal's closure items" reuse that nonterminal's successor
groups (``pg_*``) instead of closing and grouping again (:meth:`Automaton._lr0_step`,
:meth:`Automaton._lr1_step`); and LALR(1) reduces come from the kernel where no ε-rule is in the
closure. Besides, FIRST sets are solved by a work queue over the graph of nullable prefixes, and
the row merging leaves alone the states whose initial class has no other member (they can never
be merged); neither changes a set or a class.

Budgets. The deadline (``check``, the compile budget's :meth:`~glrmask.budget.CompileBudget.check`)
is called after every few thousand item operations (:data:`CHECK_WORK`), so one huge closure
cannot outlast it; the closure-item limit is counted exactly as in Python.
"""
cimport cython
import numpy as np
cimport numpy as cnp

from cpython.dict cimport PyDict_GetItem
from cpython.exc cimport PyErr_CheckSignals
from cpython.long cimport PyLong_AsLong
from cpython.object cimport PyObject
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport sort, unique
from libcpp.vector cimport vector

from glrmask.errors import GrammarTooComplex

cnp.import_array()

__all__ = ["Automaton", "CHECK_WORK", "encode_rules"]

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil

cdef enum:
    _CHECK_WORK = 4096

CHECK_WORK = _CHECK_WORK
"""Item operations between two calls of the deadline check (a call costs about a microsecond)."""


# --------------------------------------------------------------------------- hashing
cdef inline uint64_t _mix(uint64_t h) noexcept nogil:
    """splitmix64's finalizer: a fixed, seedless mix (the build must not depend on any seed)."""
    h ^= h >> 30
    h *= 0xbf58476d1ce4e5b9ULL
    h ^= h >> 27
    h *= 0x94d049bb133111ebULL
    h ^= h >> 31
    return h


cdef inline uint64_t _hash_words(const uint64_t* p, int64_t n) noexcept nogil:
    """Four independent lanes over long keys (a row signature can be hundreds of words; one
    chain of dependent multiplies was most of the row merging), one over short ones."""
    cdef uint64_t h = 0x243f6a8885a308d3ULL ^ <uint64_t>n
    cdef uint64_t h1 = 0x13198a2e03707344ULL, h2 = 0xa4093822299f31d0ULL, h3 = 0x082efa98ec4e6c89ULL
    cdef int64_t i = 0
    if n >= 8:
        while i + 4 <= n:
            h = (h ^ p[i]) * 0x9e3779b97f4a7c15ULL
            h1 = (h1 ^ p[i + 1]) * 0xc2b2ae3d27d4eb4fULL
            h2 = (h2 ^ p[i + 2]) * 0x165667b19e3779f9ULL
            h3 = (h3 ^ p[i + 3]) * 0x85ebca77c2b2ae63ULL
            h ^= h >> 29
            h1 ^= h1 >> 31
            h2 ^= h2 >> 27
            h3 ^= h3 >> 33
            i += 4
        h ^= _mix(h1) + 3 * _mix(h2) + 5 * _mix(h3)
    while i < n:
        h = (h ^ p[i]) * 0x9e3779b97f4a7c15ULL
        h ^= h >> 29
        i += 1
    return _mix(h)


cdef inline bint _same(const uint64_t* a, const uint64_t* b, int64_t n) noexcept nogil:
    """Keys are a few words: a loop beats a call to memcmp."""
    cdef int64_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


@cython.final
def encode_rules(list rules, dict terminal_index):
    """The numbering of :class:`glrmask.lr.table._Symbols` for ``rules`` (a list of
    :class:`~glrmask.grammar.ir.Rule`, the augmented rule first) and the terminal ids
    ``terminal_index``, in the form :class:`Automaton` takes. Returns ``(nonterminals,
    nonterminal_index, rule_lhs, rhs_off, rhs, unknown)``: the nonterminals in the order their
    first rule appears (a list) and their ids (a dict), then int32 arrays, ``rule_lhs[i]`` the id
    of ``rules[i].lhs`` and ``rhs[rhs_off[i]:rhs_off[i + 1]]`` the codes of ``rules[i].rhs`` (a
    terminal's id, else ``T`` + a nonterminal's id), and ``unknown``, the first symbol that is
    neither (its codes are then meaningless; the caller raises) or None.

    Why here: the Python numbering took 3-4 ms of the LR build of a large JSON Schema (10,000
    rules, 40,000 symbols), in comprehensions over names and lists of Python ints built only to be
    copied into arrays; here one dictionary lookup per symbol writes the array."""
    cdef Py_ssize_t n = len(rules), i, total = 0, k = 0
    cdef int32_t T = <int32_t>len(terminal_index)
    cdef object r, x, rhs, c, unknown = None
    cdef list nonterminals = []
    cdef dict nt_index = {}
    cdef dict codes = dict(terminal_index)  # a terminal's code wins over a nonterminal's of that name
    cdef PyObject* hit
    cdef list rhs_of = [None] * n
    cdef cnp.ndarray[int32_t, ndim=1] lhs = np.empty(n, dtype=np.int32)
    cdef cnp.ndarray[int32_t, ndim=1] off = np.empty(n + 1, dtype=np.int32)
    for i in range(n):
        r = rules[i]
        x = r.lhs
        c = nt_index.get(x)
        if c is None:
            c = nt_index[x] = len(nonterminals)
            nonterminals.append(x)
            if x not in codes:
                codes[x] = T + <int32_t>c
        lhs[i] = <int32_t>c
        rhs = r.rhs
        if type(rhs) is not tuple:
            rhs = tuple(rhs)
        rhs_of[i] = rhs
        off[i] = <int32_t>total
        total += len(<tuple>rhs)
    off[n] = <int32_t>total
    cdef cnp.ndarray[int32_t, ndim=1] out = np.empty(total, dtype=np.int32)
    for i in range(n):
        for x in <tuple>rhs_of[i]:
            hit = PyDict_GetItem(codes, x)  # borrowed; NULL when absent (names are str: no errors)
            if hit is not NULL:
                out[k] = <int32_t>PyLong_AsLong(<object>hit)
            else:
                if unknown is None:
                    unknown = x
                out[k] = -1
            k += 1
    return nonterminals, nt_index, lhs, off, out, unknown


cdef class _KeySet:
    """Interned ``uint64`` strings of any length, numbered by first insertion (an
    open-addressing table of ids over one arena). Used for the lookahead-set pool, the kernel
    index and the row signatures of the minimization."""

    cdef vector[uint64_t] words
    cdef vector[int64_t] offs
    cdef vector[uint64_t] hashes
    cdef vector[int32_t] table
    cdef int64_t mask
    cdef int64_t slot

    def __cinit__(self):
        self.reset(16)

    cdef void reset(self, int64_t hint):
        """Forget every key; the table is sized for about ``hint`` keys (cost: that size)."""
        cdef int64_t size = 16
        while size < 2 * hint:
            size *= 2
        self.words.clear()
        self.offs.clear()
        self.offs.push_back(0)
        self.hashes.clear()
        self.table.assign(size, -1)
        self.mask = size - 1

    cdef inline int64_t size(self) noexcept:
        return <int64_t>self.hashes.size()

    cdef inline const uint64_t* key(self, int32_t i) noexcept:
        """Key ``i`` (valid until the next :meth:`add`)."""
        return self.words.data() + self.offs[i]

    cdef inline int64_t key_len(self, int32_t i) noexcept:
        return self.offs[i + 1] - self.offs[i]

    cdef inline int32_t find(self, const uint64_t* k, int64_t n, uint64_t h) noexcept:
        """The id of key ``k`` or -1 (then :meth:`add` may insert it at the probed slot)."""
        cdef int64_t j = <int64_t>(h & <uint64_t>self.mask)
        cdef int32_t e
        while True:
            e = self.table[j]
            if e < 0:
                self.slot = j
                return -1
            if self.hashes[e] == h and self.offs[e + 1] - self.offs[e] == n and _same(
                    self.words.data() + self.offs[e], k, n):
                return e
            j = (j + 1) & self.mask

    cdef int32_t add(self, const uint64_t* k, int64_t n, uint64_t h) except -1:
        """Insert key ``k`` after a :meth:`find` that missed it (``k`` must not point into the
        arena)."""
        cdef int32_t e = <int32_t>self.hashes.size()
        cdef int64_t i, j, size
        if e == 0x7fffffff:
            raise MemoryError("LR table: more than 2**31 interned keys")
        for i in range(n):
            self.words.push_back(k[i])
        self.offs.push_back(<int64_t>self.words.size())
        self.hashes.push_back(h)
        self.table[self.slot] = e
        if 2 * (<int64_t>e + 1) > self.mask + 1:
            size = 2 * (self.mask + 1)
            self.table.assign(size, -1)
            self.mask = size - 1
            for i in range(e + 1):
                j = <int64_t>(self.hashes[i] & <uint64_t>self.mask)
                while self.table[j] >= 0:
                    j = (j + 1) & self.mask
                self.table[j] = <int32_t>i
        return e

    cdef inline int32_t insert(self, const uint64_t* k, int64_t n, uint64_t h) except -1:
        """Add key ``k`` (hash ``h``), known to be absent, whatever was probed since: the probe
        slot of an earlier :meth:`find` may be stale by now."""
        self.find(k, n, h)
        return self.add(k, n, h)

    cdef inline int32_t intern(self, const uint64_t* k, int64_t n) except -1:
        cdef uint64_t h = _hash_words(k, n)
        cdef int32_t e = self.find(k, n, h)
        if e >= 0:
            return e
        return self.add(k, n, h)


@cython.final
cdef class _Items:
    """An ordered map core -> (lookahead bitset, inherits flag) in first-insertion order, cleared
    in O(1) by a generation stamp per core: the working set of one closure."""

    cdef int64_t W
    cdef vector[int32_t] slot
    cdef vector[uint32_t] stamp
    cdef uint32_t gen
    cdef vector[int32_t] core
    cdef vector[uint64_t] la
    cdef vector[int32_t] lid  # the pool id of la while one set made it (0: empty), else -1
    cdef vector[uint8_t] inh

    def __cinit__(self, int64_t n_cores, int64_t W):
        self.W = W
        self.slot.assign(n_cores, 0)
        self.stamp.assign(n_cores, 0)
        self.gen = 0

    cdef inline void clear(self) noexcept:
        self.gen += 1
        if self.gen == 0:  # wrapped: no stale stamp may equal the new generation
            self.stamp.assign(self.stamp.size(), 0)
            self.gen = 1
        self.core.clear()
        self.la.clear()
        self.lid.clear()
        self.inh.clear()

    cdef inline int32_t get(self, int32_t c) noexcept:
        return self.slot[c] if self.stamp[c] == self.gen else -1

    cdef inline int32_t add(self, int32_t c) except -1:
        """A new item ``c`` with an empty lookahead (``c`` must be absent)."""
        cdef int32_t i = <int32_t>self.core.size()
        self.stamp[c] = self.gen
        self.slot[c] = i
        self.core.push_back(c)
        self.la.resize(self.la.size() + self.W, 0)
        self.lid.push_back(0)
        self.inh.push_back(0)
        return i

    cdef inline int32_t get_or_add(self, int32_t c) except -1:
        """Item ``c``'s index, added with an empty lookahead when absent."""
        cdef int32_t i = self.get(c)
        if i < 0:
            i = self.add(c)
        return i

    cdef inline void or_set(self, int32_t i, const uint64_t* b, int32_t bid) noexcept:
        """``la[i] |= b`` where ``b`` is pool set ``bid`` (not 0). While every set or'ed into an
        item is the same one, its id is known and the successor step need not intern it."""
        _or(self.la.data() + <int64_t>i * self.W, b, self.W)
        self.lid[i] = _one_set_id(self.lid[i], bid)

    cdef inline uint64_t* row(self, int32_t i) noexcept:
        """Item ``i``'s lookahead (valid until the next :meth:`add`)."""
        return self.la.data() + <int64_t>i * self.W


cdef inline void _or(uint64_t* dst, const uint64_t* src, int64_t W) noexcept nogil:
    cdef int64_t k
    for k in range(W):
        dst[k] |= src[k]


cdef inline int32_t _one_set_id(int32_t l_id, int32_t e) noexcept nogil:
    """The pool id of a union while one set makes it up, after or'ing in pool set ``e``: ``l_id``
    is 0 while nothing (or only the empty set) was or'ed, the one set's id, or -1 once two
    differ. Known, it spares interning the union."""
    if e == 0 or l_id == e:
        return l_id
    if l_id == 0:
        return e
    return -1


cdef inline bint _or_grew(uint64_t* dst, const uint64_t* src, int64_t W) noexcept nogil:
    """``dst |= src``, and whether ``dst`` grew: the step of every fixed point here (FIRST sets,
    closures, LALR(1) lookaheads), which re-queues what grew."""
    cdef uint64_t bits = 0, v
    cdef int64_t k
    for k in range(W):
        v = src[k] & ~dst[k]
        bits |= v
        dst[k] |= v
    return bits != 0


cdef cnp.ndarray _array(vector[int32_t]& v):
    """A new int32 numpy array holding ``v``."""
    cdef cnp.ndarray a = np.empty(<Py_ssize_t>v.size(), dtype=np.int32)
    if v.size():
        memcpy(cnp.PyArray_DATA(a), v.data(), v.size() * sizeof(int32_t))
    return a


# --------------------------------------------------------------------------- the automaton
@cython.final
cdef class Automaton:
    """The LR(1) item-set automaton of one grammar, in the numbering of
    :class:`glrmask.lr.table._Symbols`: terminal ``t`` is symbol code ``t`` (``$END`` is the last,
    ``T - 1``), nonterminal ``n`` is code ``T + n`` (``$START`` is 0), rule ``i`` has left-hand side
    ``rule_lhs[i]`` and right-hand side ``rhs[rhs_off[i]:rhs_off[i + 1]]`` (rule 0 is
    ``$START -> start $END``).

    Construction computes FIRST sets. :meth:`explore` builds the item sets (canonical LR(1) or
    LALR(1)); :meth:`tables` merges identical rows and exports the sparse rows. ``check`` is
    called with a stage name every :data:`CHECK_WORK` item operations and raises to stop;
    ``max_closure_items`` bounds the precomputed closure items (:class:`GrammarTooComplex`)."""

    cdef int64_t T, W, n_nt, n_rules, n_cores, n_syms
    cdef vector[int32_t] core_rule, core_next, rule_off, ro_off, ro_list
    cdef vector[uint64_t] first
    cdef vector[uint8_t] nullable
    cdef vector[uint8_t] dot0  # per core: at the start of its rule
    cdef vector[int32_t] beta_id, sym_set  # sym_set[x]: the pool id of FIRST(x) (-1: not yet)
    cdef vector[uint8_t] beta_null
    cdef _KeySet pool
    # closures of nonterminals (symbolic lookaheads), computed on first use
    cdef vector[int64_t] pre_off
    cdef vector[int32_t] pre_len
    cdef vector[int32_t] pre_items  # pairs (core, spontaneous set id << 1 | inherits)
    cdef int64_t pre_total, max_pre, pre_count
    cdef _Items pre_work, clo
    cdef vector[int32_t] queue
    cdef vector[uint64_t] tmp, lbuf
    # item sets
    cdef bint lalr, explored
    cdef vector[int64_t] k_off
    cdef vector[int32_t] k_core, k_la
    cdef _KeySet index
    cdef vector[int64_t] tr_off, rd_off
    cdef vector[uint64_t] tr, rd  # (symbol << 32 | target), (terminal << 32 | rule); sorted per state
    # scratch of the successor step
    cdef vector[uint32_t] sym_stamp
    cdef vector[int32_t] sym_idx, kpos
    cdef uint32_t sgen
    cdef vector[int32_t] sym_order, grp_off, grp_cur, grp_items
    cdef vector[uint64_t] keybuf
    cdef vector[int32_t] succ_la
    cdef object check
    cdef int64_t work
    # the LR(0) automaton of :meth:`explore_lr0`, kept aside while a canonical exploration runs
    cdef int64_t lr0_n
    cdef vector[int64_t] z_k_off, z_tr_off
    cdef vector[int32_t] z_k_core
    cdef vector[uint64_t] z_tr
    cdef vector[uint32_t] cstamp
    cdef uint32_t cgen
    cdef vector[int32_t] ccores
    cdef vector[int8_t] pre_cmpl  # per nonterminal: its closure holds a complete item (-1: unknown)
    # the closure items of a nonterminal grouped by the symbol after their dot (complete ones left
    # out), groups in first-appearance order: groups pg_first[b]:pg_first[b + 1] when computed
    # (pg_first[b] = -1 before); group g is symbol pg_sym[g], pre items pg_items[pg_lo[g]:pg_lo[g + 1]]
    # (indices into the nonterminal's closure list), and pg_t[g] the LR(0) state of its cores (-1)
    cdef vector[int64_t] pg_first, pg_lo, pg_ilo  # pg_inh[pg_ilo[g]:pg_ilo[g + 1]]: the inheriting ones
    cdef vector[int32_t] pg_inh
    cdef vector[int32_t] pg_sym, pg_items, pg_t, pg_n
    cdef vector[int32_t] kg_pre, ordbuf, ordla, pg_b, bs, src_head, src_tail, src_n, src_g, src_next
    cdef vector[int32_t] src_b, l_of, cpos
    cdef vector[int32_t] single_t  # per core: the LR(0) state whose kernel is that core alone (-1)
    cdef vector[uint64_t] la_rows  # after lalr_from_lr0: kernel item j's lookahead, W words at j * W
    cdef bint has_rows
    cdef _KeySet memo  # (group of pg_*, inherited lookahead id) -> memo_t: canonical successor states
    cdef vector[int32_t] memo_t
    cdef vector[int32_t] pg_last_l, pg_last_t  # per group of pg_*: the last (L_b, state) of memo
    cdef _KeySet lr0_memo  # sorted groups of pg_* -> lr0_memo_t: the LR(0) state of their union
    cdef vector[int32_t] lr0_memo_t
    cdef vector[uint64_t] mkey

    def __cinit__(self, const int32_t[::1] rule_lhs not None, const int32_t[::1] rhs_off not None,
                  const int32_t[::1] rhs not None, int64_t T, int64_t n_nt, int64_t max_closure_items,
                  object check not None):
        cdef int64_t i, d, n
        cdef int32_t x
        if (T < 1 or n_nt < 1 or rule_lhs.shape[0] < 1 or rhs_off.shape[0] != rule_lhs.shape[0] + 1
                or rhs_off[0] != 0 or rhs_off[rule_lhs.shape[0]] > rhs.shape[0]):
            raise ValueError("Automaton: inconsistent grammar arrays")
        self.T = T
        self.W = (T + 63) // 64
        self.n_nt = n_nt
        self.n_rules = rule_lhs.shape[0]
        self.n_syms = T + n_nt
        self.check = check
        self.max_pre = max_closure_items
        for i in range(self.n_rules):
            if not 0 <= rule_lhs[i] < n_nt or rhs_off[i + 1] < rhs_off[i]:
                raise ValueError("Automaton: inconsistent grammar arrays")
            self.rule_off.push_back(<int32_t>self.core_rule.size())
            for d in range(rhs_off[i], rhs_off[i + 1] + 1):
                self.core_rule.push_back(<int32_t>i)
                if d < rhs_off[i + 1]:
                    x = rhs[d]
                    if not 0 <= x < self.n_syms:
                        raise ValueError("Automaton: symbol code out of range")
                    self.core_next.push_back(x)
                else:
                    self.core_next.push_back(-1)
        self.n_cores = <int64_t>self.core_rule.size()
        self.dot0.assign(self.n_cores, 0)
        for i in range(self.n_rules):
            self.dot0[self.rule_off[i]] = 1
        # rules by left-hand side, in rule order
        self.ro_off.assign(n_nt + 1, 0)
        for i in range(self.n_rules):
            self.ro_off[rule_lhs[i] + 1] += 1
        for i in range(n_nt):
            self.ro_off[i + 1] += self.ro_off[i]
        self.ro_list.assign(self.n_rules, 0)
        self.tmp.assign(n_nt, 0)  # fill positions
        for i in range(self.n_rules):
            n = rule_lhs[i]
            self.ro_list[self.ro_off[n] + <int64_t>self.tmp[n]] = <int32_t>i
            self.tmp[n] += 1
        self.pool = _KeySet()
        self.tmp.assign(self.W, 0)
        self.lbuf.assign(self.W, 0)
        self.pool.intern(self.tmp.data(), self.W)  # the empty set is id 0
        self.beta_id.assign(self.n_cores, -1)
        self.sym_set.assign(self.n_syms, -1)
        self.beta_null.assign(self.n_cores, 0)
        self.pre_off.assign(n_nt, -1)
        self.pre_len.assign(n_nt, 0)
        self.pre_work = _Items(self.n_cores, self.W)
        self.clo = _Items(self.n_cores, self.W)
        self.index = _KeySet()
        self.memo = _KeySet()
        self.lr0_memo = _KeySet()
        self.sym_stamp.assign(self.n_syms, 0)
        self.sym_idx.assign(self.n_syms, 0)
        self.kpos.assign(self.n_cores, 0)
        self.cstamp.assign(self.n_cores, 0)
        self.cpos.assign(self.n_cores, 0)
        self.pre_cmpl.assign(n_nt, -1)
        self.pg_first.assign(n_nt, -1)
        self.pg_n.assign(n_nt, 0)
        self.pg_lo.push_back(0)
        self.pg_ilo.push_back(0)
        self.lr0_n = -1
        self._first_sets(rule_lhs)

    cdef int _tick(self, str stage, int64_t amount) except -1:
        self.work += amount
        if self.work >= _CHECK_WORK:
            self.work = 0
            with nogil:  # let other threads (a server's decode loop) take the GIL in between
                pass
            PyErr_CheckSignals()  # Ctrl-C stops a long build as it would the Python builder
            self.check(stage)
        return 0

    # ----------------------------------------------------------------------- shared steps
    cdef inline void _next_symbol_generation(self) noexcept:
        """A new generation of ``sym_stamp``: a symbol is marked in it when its stamp is ``sgen``,
        so the marks of the last step are dropped in O(1)."""
        self.sgen += 1
        if self.sgen == 0:  # wrapped: no stale stamp may equal the new generation
            self.sym_stamp.assign(self.sym_stamp.size(), 0)
            self.sgen = 1

    cdef inline void _next_core_generation(self) noexcept:
        """:meth:`_next_symbol_generation` for the cores' marks ``cstamp`` / ``cgen``."""
        self.cgen += 1
        if self.cgen == 0:
            self.cstamp.assign(self.cstamp.size(), 0)
            self.cgen = 1

    cdef inline bint _mark_core(self, int32_t c) noexcept:
        """Mark core ``c`` in the current generation of ``cstamp``; whether it was unmarked (a
        core listed once, at its first place)."""
        if self.cstamp[c] == self.cgen:
            return False
        self.cstamp[c] = self.cgen
        return True

    cdef inline int _ensure_closure_list(self, int64_t b) except -1:
        """Nonterminal ``b``'s closure items (``pre_*``), computed on first use."""
        if self.pre_off[b] < 0:
            self._pre_of(b)
        return 0

    cdef inline int _ensure_groups(self, int64_t b) except -1:
        """Nonterminal ``b``'s closure items and their groups by symbol (``pg_*``), computed on
        first use."""
        if self.pre_off[b] < 0:
            self._pre_of(b)
        if self.pg_first[b] < 0:
            self._pre_groups(b)
        return 0

    cdef inline int32_t _beta_set(self, int32_t c) except -1:
        """The pool id of FIRST of what follows the symbol after core ``c``'s dot (:meth:`_beta`,
        computed on first use; its nullability is then ``beta_null[c]``)."""
        if self.beta_id[c] < 0:
            self._beta(c)
        return self.beta_id[c]

    cdef int32_t _union(self, int32_t x, int32_t y) except -1:
        """The pool id of the union of pool sets ``x`` and ``y``, interned (in ``tmp``) only when
        it is neither of them by id: the pool numbers a set once, so a union equal to ``x`` gets
        ``x``'s id either way."""
        cdef uint64_t* a
        if x == y or y == 0:
            return x
        if x == 0:
            return y
        a = self.tmp.data()
        memcpy(a, self.pool.key(x), <size_t>self.W * 8)
        _or(a, self.pool.key(y), self.W)
        return self.pool.intern(a, self.W)

    cdef bint _closure_has_complete_item(self, int64_t b) except -1:
        """Whether nonterminal ``b``'s closure holds a complete item (an ε-rule's; cached in
        ``pre_cmpl``): then a state with ``b`` after a kernel dot has reduces (and, canonical,
        lookaheads) that only its closure gives, and the kernel-only shortcuts do not apply."""
        cdef int64_t p, phi
        cdef int8_t f = self.pre_cmpl[b]
        if f < 0:
            self._ensure_closure_list(b)
            f = 0
            p = self.pre_off[b]
            phi = p + 2 * <int64_t>self.pre_len[b]
            while p < phi:
                if self.core_next[self.pre_items[p]] < 0:
                    f = 1
                    break
                p += 2
            self.pre_cmpl[b] = f
        return f != 0

    cdef inline int _add_transition(self, int64_t x, int32_t t) except -1:
        """Record the transition of the state being visited on symbol ``x`` to state ``t``."""
        self.tr.push_back((<uint64_t>x) << 32 | <uint64_t>t)
        return 0

    cdef inline int _end_transitions(self, int64_t tlo) except -1:
        """Close the transitions of the state being visited (those from ``tr[tlo]`` on): sorted by
        symbol, terminals first, so that :meth:`_export` merges them with the reduces in one pass."""
        sort(self.tr.begin() + tlo, self.tr.end())
        self.tr_off.push_back(<int64_t>self.tr.size())
        return 0

    cdef inline int32_t _reduce_rule(self, int32_t c) noexcept:
        """The rule that item core ``c`` reduces by, or -1: not complete, or rule 0's final item
        ``$START -> start $END .`` (the final state, nothing to reduce)."""
        cdef int32_t r
        if self.core_next[c] != -1:
            return -1
        r = self.core_rule[c]
        if r == 0:
            return -1
        return r

    cdef inline int _add_reduces(self, const uint64_t* row, int32_t r) except -1:
        """The reduce pairs ``(terminal, r)`` of the terminals in lookahead bitset ``row``."""
        cdef int64_t k
        cdef uint64_t w
        for k in range(self.W):
            w = row[k]
            while w:
                self.rd.push_back((<uint64_t>(k * 64 + __builtin_ctzll(w))) << 32 | <uint64_t>r)
                w &= w - 1
        return 0

    cdef int _end_reduces(self, int64_t lo) except -1:
        """Close the reduce list of the state being visited (the pairs from ``rd[lo]`` on): sorted
        and unique (two items may reduce by one rule on one terminal)."""
        if <int64_t>self.rd.size() - lo > 1:
            sort(self.rd.begin() + lo, self.rd.end())
            self.rd.erase(unique(self.rd.begin() + lo, self.rd.end()), self.rd.end())
        self.rd_off.push_back(<int64_t>self.rd.size())
        return 0

    # ----------------------------------------------------------------------- FIRST sets
    cdef int _first_sets(self, const int32_t[::1] rule_lhs) except -1:
        """Least fixed point of FIRST and nullable (the sets of
        :meth:`glrmask.lr.table._Builder._first_sets`, which are unique).

        Nullable first, rule by rule until nothing changes (one or two rounds for a normalized
        grammar, whose only ε-rule is the start's). Then FIRST as a graph: a rule ``A -> X1 X2
        ...`` puts the terminal ending its nullable prefix into FIRST(A) and an edge ``Xi -> A``
        for each nonterminal of the prefix, and a work queue or's sets along the edges until
        nothing grows. Re-sweeping all rules until nothing changed took one sweep per level of
        nesting (a fifth of the table's set-up on large JSON Schemas)."""
        cdef int64_t W = self.W, T = self.T, i, a, n, c
        cdef int64_t n_nt = self.n_nt
        cdef bint changed = True, all_null
        cdef uint64_t* fa
        cdef vector[int32_t] e_src, e_dst
        self.first.assign(self.n_nt * W, 0)
        self.nullable.assign(self.n_nt, 0)
        while changed:
            self.check("LR table (FIRST sets)")
            changed = False
            for i in range(self.n_rules):
                a = rule_lhs[i]
                if self.nullable[a]:
                    continue
                all_null = True
                c = self.rule_off[i]
                while self.core_next[c] >= 0:
                    n = self.core_next[c]
                    if n < T or not self.nullable[n - T]:
                        all_null = False
                        break
                    c += 1
                if all_null:
                    self.nullable[a] = 1
                    changed = True
        for i in range(self.n_rules):
            a = rule_lhs[i]
            fa = self.first.data() + a * W
            c = self.rule_off[i]
            while self.core_next[c] >= 0:
                n = self.core_next[c]
                if n < T:
                    fa[n >> 6] |= (<uint64_t>1) << (n & 63)
                    break
                n -= T
                if n != a:
                    e_src.push_back(<int32_t>n)
                    e_dst.push_back(<int32_t>a)
                if not self.nullable[n]:
                    break
                c += 1
        self.check("LR table (FIRST sets)")
        return self._propagate(self.first.data(), n_nt, e_src, e_dst, "LR table (FIRST sets)")

    cdef int _propagate(self, uint64_t* rows, int64_t n, vector[int32_t]& e_src, vector[int32_t]& e_dst,
                        str stage) except -1:
        """The least fixed point of ``rows[d] ⊇ rows[s]`` for the edges ``e_src[i] -> e_dst[i]``
        between ``n`` bitset rows of ``W`` words (FIRST sets along the nullable prefixes, LALR(1)
        lookaheads along the propagation edges): the edges sorted by source (a counting sort;
        ``e_src`` and ``e_dst`` are cleared), then a work queue that or's a row into its edges'
        targets and queues those that grew, a ring of ``n`` slots holding every row at first, in
        order, and each at most once at a time. The queue runs without the GIL between two calls
        of the deadline check (``stage``)."""
        cdef int64_t W = self.W, e, i, d, head = 0, tail = 0, count = n, steps
        cdef vector[int32_t] e_off, e_to, q
        cdef vector[uint8_t] inq
        cdef const int32_t* eo
        cdef const int32_t* et
        cdef int32_t* qq
        cdef uint8_t* iq
        cdef uint64_t* sp
        e_off.assign(n + 1, 0)
        for e in range(<int64_t>e_src.size()):
            e_off[e_src[e] + 1] += 1
        for i in range(n):
            e_off[i + 1] += e_off[i]
        e_to.assign(e_src.size(), 0)
        q.assign(e_off.begin(), e_off.end() - 1)  # fill cursors
        for e in range(<int64_t>e_src.size()):
            i = e_src[e]
            e_to[q[i]] = e_dst[e]
            q[i] += 1
        e_src.clear()
        e_dst.clear()
        for i in range(n):
            q[i] = <int32_t>i
        inq.assign(n, 1)
        eo = e_off.data()
        et = e_to.data()
        qq = q.data()
        iq = inq.data()
        while count:
            with nogil:
                steps = 0
                while count and steps < _CHECK_WORK:
                    i = qq[head]
                    head += 1
                    if head == n:
                        head = 0
                    count -= 1
                    iq[i] = 0
                    sp = rows + i * W
                    steps += 1 + eo[i + 1] - eo[i]
                    for e in range(eo[i], eo[i + 1]):
                        d = et[e]
                        if _or_grew(rows + d * W, sp, W) and not iq[d]:
                            iq[d] = 1
                            qq[tail] = <int32_t>d
                            tail += 1
                            if tail == n:
                                tail = 0
                            count += 1
            self._tick(stage, steps)
        return 0

    cdef int _beta(self, int32_t c) except -1:
        """FIRST and nullability of what follows the symbol after the dot of core ``c`` (cached
        as a pool id in ``beta_id[c]``)."""
        cdef int64_t W = self.W, T = self.T, k = c + 1, n
        cdef uint64_t* f = self.tmp.data()
        cdef bint nul = True
        cdef int32_t e
        # the common suffixes without hashing: empty, a terminal first, a non-nullable
        # nonterminal first (the sets are cached per symbol)
        n = self.core_next[k]
        if n < 0:
            self.beta_id[c] = 0
            self.beta_null[c] = True
            return 0
        if n < T or not self.nullable[n - T]:
            e = self.sym_set[n]
            if e < 0:
                memset(f, 0, <size_t>W * 8)
                if n < T:
                    f[n >> 6] |= (<uint64_t>1) << (n & 63)
                else:
                    _or(f, self.first.data() + (n - T) * W, W)
                e = self.sym_set[n] = self.pool.intern(f, W)
            self.beta_id[c] = e
            self.beta_null[c] = False
            return 0
        memset(f, 0, <size_t>W * 8)
        while self.core_next[k] >= 0:
            n = self.core_next[k]
            if n < T:
                f[n >> 6] |= (<uint64_t>1) << (n & 63)
                nul = False
                break
            n -= T
            _or(f, self.first.data() + n * W, W)
            if not self.nullable[n]:
                nul = False
                break
            k += 1
        self.beta_id[c] = self.pool.intern(f, W)
        self.beta_null[c] = nul
        return 0

    # ----------------------------------------------------------------------- closures
    cdef int _pre_of(self, int64_t b) except -1:
        """The closure items of nonterminal ``b`` as ``(core, spontaneous, inherits)``: the
        item's lookahead is ``spontaneous | (L if inherits)`` for ``L`` the lookahead of ``b``.
        Same work queue and insertion order as :meth:`glrmask.lr.table._Builder._pre_of`."""
        cdef _Items it = self.pre_work
        cdef int64_t W = self.W, T = self.T, head = 0, r, nxt
        cdef int32_t c, c2, i, i2, sm
        cdef bint inh, add_inh, grew
        cdef uint64_t* m
        cdef uint64_t* add_m = self.lbuf.data()
        self._tick("LR table (closures)", 1)
        it.clear()
        self.queue.clear()
        for r in range(self.ro_off[b], self.ro_off[b + 1]):
            c = self.rule_off[self.ro_list[r]]
            i = it.add(c)
            it.inh[i] = 1
            self.queue.push_back(c)
        while head < <int64_t>self.queue.size():
            c = self.queue[head]
            head += 1
            nxt = self.core_next[c]
            if nxt < T:
                continue
            self._tick("LR table (closures)", self.ro_off[nxt - T + 1] - self.ro_off[nxt - T])
            i = it.get(c)
            inh = it.inh[i]
            m = it.row(i)
            # add_m = beta_first | (m if beta nullable), built in lbuf (rows move when items are added)
            memcpy(add_m, self.pool.key(self._beta_set(c)), <size_t>W * 8)
            if self.beta_null[c]:
                _or(add_m, m, W)
            add_inh = inh and self.beta_null[c]
            for r in range(self.ro_off[nxt - T], self.ro_off[nxt - T + 1]):
                c2 = self.rule_off[self.ro_list[r]]
                i2 = it.get(c2)
                if i2 < 0:
                    i2 = it.add(c2)
                    memcpy(it.row(i2), add_m, <size_t>W * 8)
                    it.inh[i2] = add_inh
                    self.queue.push_back(c2)
                else:
                    grew = _or_grew(it.row(i2), add_m, W)
                    if add_inh and not it.inh[i2]:
                        it.inh[i2] = 1
                        grew = True
                    if grew:
                        self.queue.push_back(c2)
        self.pre_total += <int64_t>it.core.size()
        if self.pre_total > self.max_pre:
            raise GrammarTooComplex(
                f"LR table (closures): more than {self.max_pre} closure items for "
                f"{self.pre_count + 1} nonterminals (limit lr.max_closure_items)")
        self.pre_off[b] = <int64_t>self.pre_items.size()
        self.pre_len[b] = <int32_t>it.core.size()
        for i in range(<int32_t>it.core.size()):
            sm = self.pool.intern(it.row(i), W)
            if sm >= 1 << 30:
                raise MemoryError("LR table: more than 2**30 lookahead sets")
            self.pre_items.push_back(it.core[i])
            self.pre_items.push_back(sm << 1 | it.inh[i])
        self.pre_count += 1
        return 0

    cdef int _closure(self, int64_t s) except -1:
        """The closure of state ``s``'s kernel into ``clo``: the kernel items in kernel order,
        then closure items in first-insertion order (as :meth:`glrmask.lr.table._Builder.closure`)."""
        cdef _Items it = self.clo
        cdef int64_t T = self.T, k, lo = self.k_off[s], hi = self.k_off[s + 1], p, phi
        cdef int64_t nxt, b
        cdef int32_t c, i, code
        cdef int32_t l_id, sm
        it.clear()
        for k in range(lo, hi):
            i = it.get_or_add(self.k_core[k])
            if self.k_la[k]:
                it.or_set(i, self.pool.key(self.k_la[k]), self.k_la[k])
        for k in range(lo, hi):
            c = self.k_core[k]
            nxt = self.core_next[c]
            if nxt < T:
                continue
            b = nxt - T
            self._ensure_closure_list(b)
            # L = beta_first | (la if beta nullable), as a pool set
            l_id = self._beta_set(c)
            if self.beta_null[c]:
                l_id = self._union(l_id, self.k_la[k])
            p = self.pre_off[b]
            phi = p + 2 * <int64_t>self.pre_len[b]
            self._tick("LR table (item sets)", self.pre_len[b])
            while p < phi:
                i = it.get_or_add(self.pre_items[p])
                code = self.pre_items[p + 1]
                p += 2
                sm = code >> 1
                if sm:
                    it.or_set(i, self.pool.key(sm), sm)
                if code & 1 and l_id:
                    it.or_set(i, self.pool.key(l_id), l_id)
        return 0

    # ----------------------------------------------------------------------- item sets
    cdef int _begin_exploration(self, bint lookahead_keys) except -1:
        """Forget the item sets, transitions and reduces of an earlier exploration and add state 0,
        ``{$START -> . start $END}`` with the empty lookahead, keyed by its core, or by its
        ``(core, lookahead)`` pair when ``lookahead_keys`` (canonical LR(1)); the LR(0)
        exploration never reads its lookahead."""
        self.explored = False
        self.has_rows = False
        self.la_rows.clear()
        self.k_off.clear()
        self.k_off.push_back(0)
        self.k_core.clear()
        self.k_la.clear()
        self.tr_off.clear()
        self.tr_off.push_back(0)
        self.tr.clear()
        self.rd_off.clear()
        self.rd_off.push_back(0)
        self.rd.clear()
        self.index.reset(1024)
        self.keybuf.clear()
        if lookahead_keys:  # (an if, not a conditional expression: Cython 3.3.1 miscompiles one passed by reference)
            self.keybuf.push_back((<uint64_t>self.rule_off[0]) << 32)
        else:
            self.keybuf.push_back(<uint64_t>self.rule_off[0])
        self.index.insert(self.keybuf.data(), 1, _hash_words(self.keybuf.data(), 1))
        self.k_core.push_back(self.rule_off[0])
        self.k_la.push_back(0)
        self.k_off.push_back(1)
        return 0

    def explore(self, bint lalr, int64_t limit, bint shortcut=True) -> bool:
        """Build the item sets reachable from the start breadth-first: canonical LR(1) keys states
        by their ``(core, lookahead)`` pairs, LALR(1) by their cores (lookaheads merged and
        propagated to a fixed point). False when more than ``limit`` states would be needed.
        Records every state's transitions (and, canonical, its reduces) on its first visit.

        ``shortcut`` (canonical only) visits the states :meth:`_lr1_step` can without their
        closure; ``False`` closes every state (the same automaton, the reference)."""
        cdef _Items it = self.clo
        cdef int64_t W = self.W, head = 0, n_done = 0, i, g, gi, n_items, n_grp, n_known, j
        cdef int32_t s, t, la, old, u
        cdef bint first_visit, grew
        cdef vector[int32_t] work
        cdef vector[uint8_t] queued
        cdef uint64_t* a
        self.check("LR table (item sets)")
        self.lalr = lalr
        self._begin_exploration(not lalr)
        self.memo.reset(1024)
        self.memo_t.clear()
        self.pg_last_l.assign(self.pg_t.size(), -1)
        self.pg_last_t.assign(self.pg_t.size(), -1)
        work.push_back(0)
        queued.push_back(1)
        while head < <int64_t>work.size():
            s = work[head]
            head += 1
            if head >= 4096 and 2 * head >= <int64_t>work.size():
                work.erase(work.begin(), work.begin() + head)
                head = 0
            queued[s] = 0
            first_visit = s == n_done
            if first_visit:
                n_done += 1
            if shortcut and not lalr:
                j = <int64_t>self.k_off.size() - 1
                u = self._lr1_step(s, limit)
                if u < 0:
                    return False
                if u:
                    for t in range(j, <int32_t>(self.k_off.size() - 1)):  # in creation order
                        work.push_back(t)
                        queued.push_back(1)
                    continue
            self._closure(s)
            n_items = <int64_t>it.core.size()
            self._tick("LR table (item sets)", n_items)
            # successors: group items by the symbol after the dot, in first-appearance order
            n_grp = self._group_by_next_symbol(it.core.data(), n_items, 1, 0)
            j = self.grp_off[n_grp]
            self.succ_la.assign(j, 0)
            for i in range(j):
                u = it.lid[self.grp_items[i]]
                if u < 0:  # (an if: Cython 3.3.1 miscompiles a conditional expression stored in a vector)
                    u = self.pool.intern(it.row(self.grp_items[i]), W)
                self.succ_la[i] = u
            for g in range(n_grp):
                self.ordbuf.clear()
                self.ordla.clear()
                for gi in range(self.grp_off[g], self.grp_off[g + 1]):
                    self.ordbuf.push_back(it.core[self.grp_items[gi]] + 1)
                    self.ordla.push_back(self.succ_la[gi])
                n_known = <int64_t>self.k_off.size() - 1
                t = self._kernel_target(limit, not lalr, True)
                if t < 0:
                    return False
                if t == n_known:
                    work.push_back(t)
                    queued.push_back(1)
                elif lalr:
                    for j in range(self.k_off[t], self.k_off[t + 1]):  # same cores as the successor
                        self.kpos[self.k_core[j]] = <int32_t>j
                    grew = False
                    for i in range(<int64_t>self.ordbuf.size()):
                        la = self.ordla[i]
                        j = self.kpos[self.ordbuf[i]]
                        old = self.k_la[j]
                        if la == old or la == 0:
                            continue
                        a = self.tmp.data()
                        memcpy(a, self.pool.key(old), <size_t>W * 8)
                        if _or_grew(a, self.pool.key(la), W):
                            self.k_la[j] = self.pool.intern(a, W)
                            grew = True
                    if grew and not queued[t]:
                        work.push_back(t)
                        queued[t] = 1
                if first_visit:
                    self._add_transition(self.sym_order[g], t)
            if first_visit:
                self._end_transitions(self.tr_off[self.tr_off.size() - 1])
                if not lalr:
                    self._record_reduces()
        self.explored = True
        return True

    # ----------------------------------------------------------------------- LR(0) and LALR(1) by propagation
    cdef int _closure_cores(self, int64_t s) except -1:
        """The cores of state ``s``'s closure into ``ccores``, in the order of :meth:`_closure`
        (the kernel, then the closure items of each kernel nonterminal in first-insertion order),
        without lookaheads."""
        cdef int64_t T = self.T, k, lo = self.k_off[s], hi = self.k_off[s + 1], p, phi, nxt, b
        cdef int32_t c
        self._next_core_generation()
        self.ccores.clear()
        for k in range(lo, hi):
            c = self.k_core[k]
            if self._mark_core(c):
                self.ccores.push_back(c)
        for k in range(lo, hi):
            nxt = self.core_next[self.k_core[k]]
            if nxt < T:
                continue
            b = nxt - T
            self._ensure_closure_list(b)
            p = self.pre_off[b]
            phi = p + 2 * <int64_t>self.pre_len[b]
            self._tick("LR table (item sets)", self.pre_len[b])
            while p < phi:
                c = self.pre_items[p]
                p += 2
                if self._mark_core(c):
                    self.ccores.push_back(c)
        return 0

    def explore_lr0(self, int64_t limit) -> int:
        """Build the LR(0) automaton (item sets keyed by their cores, no lookaheads) breadth-first
        and keep it aside for :meth:`lalr_from_lr0`; returns its number of states, or -1 when
        more than ``limit`` would be needed.

        Why: its states, numbering and transitions are exactly those of ``explore(True, ...)``
        (lookaheads never change a state's successor cores, and that exploration numbers states
        as they are discovered on first visits, in number order, through the same closure order),
        and canonical LR(1) has at least as many states (each one's cores are an LR(0) state). So
        when this count exceeds ``max_states`` the canonical attempt is known to fail and need not
        be made, and LALR(1) needs only the lookaheads. Costs a fraction of a canonical attempt:
        no lookahead sets are or'ed, interned or compared."""
        cdef int64_t head = 0, n
        self.check("LR table (item sets)")
        self.lr0_n = -1
        self.pg_t.assign(self.pg_t.size(), -1)  # states of an earlier exploration
        self.single_t.assign(self.n_cores, -1)
        self.lr0_memo.reset(1024)
        self.lr0_memo_t.clear()
        self._begin_exploration(False)
        while head < <int64_t>self.k_off.size() - 1:  # no revisits: states in number order
            if self._lr0_step(head, limit) < 0:
                return -1
            head += 1
        n = <int64_t>self.k_off.size() - 1
        self.z_k_off.swap(self.k_off)
        self.z_k_core.swap(self.k_core)
        self.z_tr_off.swap(self.tr_off)
        self.z_tr.swap(self.tr)
        self.lr0_n = n
        return n


    cdef int _pre_groups(self, int64_t b) except -1:
        """Group the closure items of nonterminal ``b`` (computed) by the symbol after their dot,
        into ``pg_*`` (see the attributes). It groups through :meth:`_group_by_next_symbol`, so
        the scratch ``sym_order`` / ``grp_*`` of a caller's own grouping is overwritten: callers
        group their items after making sure of their nonterminals' groups."""
        cdef int64_t p = self.pre_off[b], g, g0 = <int64_t>self.pg_sym.size(), n_g, i
        cdef int64_t lo = <int64_t>self.pg_items.size()
        n_g = self._group_by_next_symbol(self.pre_items.data() + p, self.pre_len[b], 2, 0)
        for g in range(n_g):
            self.pg_sym.push_back(self.sym_order[g])
            self.pg_t.push_back(-1)
            self.pg_b.push_back(<int32_t>b)
            self.pg_lo.push_back(lo + self.grp_off[g + 1])
        for i in range(self.grp_off[n_g]):
            self.pg_items.push_back(self.grp_items[i])
        for g in range(g0, g0 + n_g):
            for i in range(self.pg_lo[g], self.pg_lo[g + 1]):
                if self.pre_items[p + 2 * <int64_t>self.pg_items[i] + 1] & 1:
                    self.pg_inh.push_back(self.pg_items[i])
            self.pg_ilo.push_back(<int64_t>self.pg_inh.size())
        self.pg_first[b] = g0
        self.pg_n[b] = <int32_t>n_g
        return 0

    cdef int64_t _group_by_next_symbol(self, const int32_t* cores, int64_t n, int64_t stride,
                                       int64_t base) except -1:
        """Group the items ``cores[i * stride]`` (``i < n``) by the symbol after their dot,
        complete items left out, groups in order of first appearance (the order of the Python
        builder's successors): group ``g`` is symbol ``sym_order[g]`` and the positions
        ``base + i`` of its items, in item order, are ``grp_items[grp_off[g]:grp_off[g + 1]]``.
        The symbols stay marked in a new generation of ``sym_stamp`` (``sym_idx``: their group),
        for the caller to add groups of other symbols after them. Returns the number of groups.

        Why one routine: a state's closure (:meth:`explore`), its kernel (:meth:`_lr0_step`,
        :meth:`_lr1_step`), its closure's cores (:meth:`_lr0_groups_of_closure`) and a
        nonterminal's closure list (:meth:`_pre_groups`, stride 2) are grouped alike, and the
        shortcuts rely on every one of them giving the closure path's order."""
        cdef int64_t i, g, x, j, n_grp
        self._next_symbol_generation()
        self.sym_order.clear()
        self.grp_off.clear()
        for i in range(n):
            x = self.core_next[cores[i * stride]]
            if x < 0:
                continue
            if self.sym_stamp[x] != self.sgen:
                self.sym_stamp[x] = self.sgen
                self.sym_idx[x] = <int32_t>self.sym_order.size()
                self.sym_order.push_back(<int32_t>x)
                self.grp_off.push_back(0)
            self.grp_off[self.sym_idx[x]] += 1
        n_grp = <int64_t>self.sym_order.size()
        self.grp_off.push_back(0)
        j = 0
        for g in range(n_grp + 1):  # counts -> start offsets; grp_cur: the fill cursors
            x = self.grp_off[g]
            self.grp_off[g] = <int32_t>j
            j += x
        self.grp_cur.assign(self.grp_off.begin(), self.grp_off.end())
        self.grp_items.assign(j, 0)
        for i in range(n):
            x = self.core_next[cores[i * stride]]
            if x < 0:
                continue
            g = self.sym_idx[x]
            self.grp_items[self.grp_cur[g]] = <int32_t>(base + i)
            self.grp_cur[g] += 1
        return n_grp

    cdef inline int _group_cores(self, int64_t g, const int32_t* cores) except -1:
        """Append the shifted cores of group ``g`` of :meth:`_group_by_next_symbol` to ``ordbuf``
        (``cores``: what was grouped, indexed by the positions it recorded)."""
        cdef int64_t i
        for i in range(self.grp_off[g], self.grp_off[g + 1]):
            self.ordbuf.push_back(cores[self.grp_items[i]] + 1)
        return 0

    cdef bint _kernel_nonterminals(self, int64_t lo, int64_t hi) except -1:
        """The distinct nonterminals ``b1, b2, ...`` after the dots of kernel items ``lo:hi`` into
        ``bs`` (as nonterminal ids), in first-appearance order; False when an item is at the start
        of its rule (the start state), whose closure may hold a kernel core again, so that the
        kernel-only steps (:meth:`_lr0_step`, :meth:`_lr1_step`) do not apply."""
        cdef int64_t T = self.T, j, x
        cdef int32_t c
        self._next_symbol_generation()
        self.bs.clear()
        for j in range(lo, hi):
            c = self.k_core[j]
            if self.dot0[c]:
                return False
            x = self.core_next[c]
            if x >= T and self.sym_stamp[x] != self.sgen:
                self.sym_stamp[x] = self.sgen
                self.bs.push_back(<int32_t>(x - T))
        return True

    cdef int64_t _link_group_sources(self, int64_t n_grp) except -1:
        """After the kernel's ``n_grp`` groups (:meth:`_group_by_next_symbol`, symbols marked),
        the groups of each ``b`` of ``bs`` in order: a symbol not marked yet starts a new
        successor ``gi`` (``sym_order``), and each group of a ``b`` is linked into the list of
        sources of its symbol's successor, in ``b`` order: ``src_head[gi]``, then ``src_next``,
        source ``r`` being group ``src_g[r]`` of ``pg_*`` and ``src_b[r]`` its ``b``'s index in
        ``bs``, and ``src_n[gi]`` their count. Returns the number of groups linked."""
        cdef int64_t i, b, g, x, gi, r, q = 0
        self.src_head.assign(n_grp, -1)
        self.src_tail.assign(n_grp, -1)
        self.src_n.assign(n_grp, 0)
        self.src_g.clear()
        self.src_b.clear()
        self.src_next.clear()
        for i in range(<int64_t>self.bs.size()):
            b = self.bs[i]
            for g in range(self.pg_first[b], self.pg_first[b] + self.pg_n[b]):
                x = self.pg_sym[g]
                q += 1
                if self.sym_stamp[x] != self.sgen:
                    self.sym_stamp[x] = self.sgen
                    self.sym_idx[x] = <int32_t>self.sym_order.size()
                    self.sym_order.push_back(<int32_t>x)
                    self.src_head.push_back(-1)
                    self.src_tail.push_back(-1)
                    self.src_n.push_back(0)
                gi = self.sym_idx[x]
                r = <int64_t>self.src_g.size()
                self.src_g.push_back(<int32_t>g)
                self.src_b.push_back(<int32_t>i)
                self.src_next.push_back(-1)
                if self.src_tail[gi] < 0:
                    self.src_head[gi] = <int32_t>r
                else:
                    self.src_next[self.src_tail[gi]] = <int32_t>r
                self.src_tail[gi] = <int32_t>r
                self.src_n[gi] += 1
        return q

    cdef int32_t _lr0_target(self, int64_t limit) except -2:
        """The LR(0) state whose kernel is ``ordbuf`` (cores in kernel order), added when new;
        -1 when that would be state number ``limit``."""
        cdef int32_t t
        cdef bint single = self.ordbuf.size() == 1
        if single and self.single_t[self.ordbuf[0]] >= 0:  # the commonest kernel: one item
            return self.single_t[self.ordbuf[0]]
        t = self._kernel_target(limit, False, False)
        if single and t >= 0:
            self.single_t[self.ordbuf[0]] = t
        return t

    cdef int32_t _kernel_target(self, int64_t limit, bint lookahead_keys, bint lookaheads) except -2:
        """The state whose kernel is ``ordbuf`` (cores, in kernel order), added when new, keyed
        by its sorted cores, or by its sorted ``(core, lookahead)`` pairs when ``lookahead_keys``
        (canonical LR(1); the lookaheads are the pool ids ``ordla``). A new state keeps the
        lookaheads ``ordla`` as its kernel's when ``lookaheads`` (the LR(0) states have none,
        LALR(1) merges them into a known state's). -1 when it would be state number ``limit``."""
        cdef int64_t klen = <int64_t>self.ordbuf.size(), i
        cdef int32_t t
        cdef uint64_t h
        self.keybuf.resize(klen)
        if lookahead_keys:
            for i in range(klen):
                self.keybuf[i] = (<uint64_t>self.ordbuf[i]) << 32 | <uint64_t>self.ordla[i]
        else:
            for i in range(klen):
                self.keybuf[i] = <uint64_t>self.ordbuf[i]
        sort(self.keybuf.begin(), self.keybuf.end())
        h = _hash_words(self.keybuf.data(), klen)
        t = self.index.find(self.keybuf.data(), klen, h)
        if t < 0:
            if <int64_t>self.k_off.size() - 1 >= limit:
                return -1
            t = <int32_t>(self.k_off.size() - 1)
            self.index.add(self.keybuf.data(), klen, h)
            for i in range(klen):
                self.k_core.push_back(self.ordbuf[i])
            if lookaheads:
                for i in range(klen):
                    self.k_la.push_back(self.ordla[i])
            self.k_off.push_back(<int64_t>self.k_core.size())
        return t

    cdef int _lr0_step(self, int64_t s, int64_t limit) except -2:
        """Visit LR(0) state ``s``: record its transitions (sorted by symbol), adding the
        successor states in the order of their symbols' first appearance in the closure (as
        :meth:`explore`). -1 when more than ``limit`` states would be needed.

        Without closing the state: when no kernel item is at the start of its rule, the closure
        is the kernel, then the closure items of each nonterminal ``b1, b2, ...`` after a kernel
        dot (first-appearance order) not listed before. So the successors, by first appearance,
        are the kernel's symbol groups, then ``b1``'s groups (``pg_*``) of new symbols, then
        ``b2``'s, ...; a group's items are the kernel's, then ``b1``'s, then ``b2``'s not yet
        present. A group that only one ``b`` contributes to has the same cores, hence the same
        state, in every state: it is looked up once per group of ``b`` (``pg_t``), and one that
        several ``b``'s groups make up once per set of those groups (``lr0_memo``). Most groups of
        the large JSON Schema grammars are of these kinds."""
        cdef int64_t lo = self.k_off[s], hi = self.k_off[s + 1]
        cdef int64_t i, gi, n_grp, q, r, tlo = <int64_t>self.tr.size(), n_b
        cdef int32_t t, e
        cdef uint64_t h = 0
        if not self._kernel_nonterminals(lo, hi):
            # an item at the start of its rule (the start state): the closure may hold it again
            self._closure_cores(s)
            return self._lr0_groups_of_closure(s, limit)
        n_b = <int64_t>self.bs.size()
        for i in range(n_b):
            self._ensure_groups(self.bs[i])
        # the kernel's groups, then each b's groups of new symbols (sources: linked lists)
        n_grp = self._group_by_next_symbol(self.k_core.data() + lo, hi - lo, 1, lo)
        if n_b == 1:
            return self._lr0_one_b(s, limit, n_grp, tlo)
        q = self._link_group_sources(n_grp)
        self._tick("LR table (item sets)", hi - lo + q)
        for gi in range(<int64_t>self.sym_order.size()):
            r = self.src_head[gi]
            if gi >= n_grp and self.src_n[gi] == 1:  # one b's group alone: the same state everywhere
                t = self._lr0_group_target(self.src_g[r], limit)
                if t < 0:
                    return -1
            else:
                if gi >= n_grp:  # several b's groups alone: the state of that set of groups
                    self.mkey.clear()
                    while r >= 0:
                        self.mkey.push_back(<uint64_t>self.src_g[r])
                        r = self.src_next[r]
                    sort(self.mkey.begin(), self.mkey.end())
                    h = _hash_words(self.mkey.data(), <int64_t>self.mkey.size())
                    e = self.lr0_memo.find(self.mkey.data(), <int64_t>self.mkey.size(), h)
                    if e >= 0:
                        self._add_transition(self.sym_order[gi], self.lr0_memo_t[e])
                        continue
                    r = self.src_head[gi]
                self.ordbuf.clear()
                if gi < n_grp:
                    self._group_cores(gi, self.k_core.data())
                if self.src_n[gi] > 1:  # items of several b's: each core once, first place
                    self._next_core_generation()
                while r >= 0:
                    if self.src_n[gi] > 1:
                        self._pg_cores_new(self.src_g[r])
                    else:
                        self._pg_cores(self.src_g[r])
                    r = self.src_next[r]
                t = self._lr0_target(limit)
                if t < 0:
                    return -1
                if gi >= n_grp:
                    self.lr0_memo.insert(self.mkey.data(), <int64_t>self.mkey.size(), h)
                    self.lr0_memo_t.push_back(t)
            self._add_transition(self.sym_order[gi], t)
        return self._end_transitions(tlo)

    cdef int32_t _lr0_group_target(self, int64_t g, int64_t limit) except -2:
        """The LR(0) state whose kernel is group ``g`` of ``pg_*`` shifted, when that group alone
        makes a successor: the same state wherever it does, so it is looked up once (``pg_t``).
        -1 when it would be state number ``limit``."""
        cdef int32_t t = self.pg_t[g]
        if t < 0:
            self.ordbuf.clear()
            self._pg_cores(g)
            t = self._lr0_target(limit)
            if t < 0:
                return -1
            self.pg_t[g] = t
        return t

    cdef int _lr0_one_b(self, int64_t s, int64_t limit, int64_t n_grp, int64_t tlo) except -2:
        """The rest of :meth:`_lr0_step` when one nonterminal ``b`` follows the kernel dots (the
        commonest case), without the source lists: the kernel's groups (in ``grp_*``, their
        symbols stamped) take ``b``'s group of their symbol, then ``b``'s other groups follow."""
        cdef int64_t b = self.bs[0], g, g0 = self.pg_first[b], g1 = g0 + self.pg_n[b], q
        cdef int32_t t
        self._tick("LR table (item sets)", self.k_off[s + 1] - self.k_off[s] + g1 - g0)
        self.kg_pre.assign(n_grp, -1)
        for g in range(g0, g1):
            if self.sym_stamp[self.pg_sym[g]] == self.sgen:
                self.kg_pre[self.sym_idx[self.pg_sym[g]]] = <int32_t>g
        for g in range(n_grp):
            self.ordbuf.clear()
            self._group_cores(g, self.k_core.data())
            q = self.kg_pre[g]
            if q >= 0:
                self._pg_cores(q)
            t = self._lr0_target(limit)
            if t < 0:
                return -1
            self._add_transition(self.sym_order[g], t)
        for g in range(g0, g1):
            if self.sym_stamp[self.pg_sym[g]] == self.sgen:
                continue
            t = self._lr0_group_target(g, limit)
            if t < 0:
                return -1
            self._add_transition(self.pg_sym[g], t)
        return self._end_transitions(tlo)

    cdef inline void _pg_cores(self, int64_t g) noexcept:
        """Append the shifted cores of group ``g`` (of ``pg_*``) to ``ordbuf``."""
        cdef int64_t i, pb = self.pre_off[self.pg_b[g]]
        for i in range(self.pg_lo[g], self.pg_lo[g + 1]):
            self.ordbuf.push_back(self.pre_items[pb + 2 * <int64_t>self.pg_items[i]] + 1)

    cdef inline void _pg_cores_new(self, int64_t g) noexcept:
        """:meth:`_pg_cores` skipping cores stamped in this generation of ``cstamp`` (and
        stamping the others)."""
        cdef int64_t i, pb = self.pre_off[self.pg_b[g]]
        cdef int32_t c
        for i in range(self.pg_lo[g], self.pg_lo[g + 1]):
            c = self.pre_items[pb + 2 * <int64_t>self.pg_items[i]] + 1
            if self._mark_core(c):
                self.ordbuf.push_back(c)

    cdef int _lr0_groups_of_closure(self, int64_t s, int64_t limit) except -2:
        """:meth:`_lr0_step` for a state closed into ``ccores``: group by symbol, look up."""
        cdef int64_t g, n_grp, tlo = <int64_t>self.tr.size()
        cdef int32_t t
        self._tick("LR table (item sets)", <int64_t>self.ccores.size())
        n_grp = self._group_by_next_symbol(self.ccores.data(), <int64_t>self.ccores.size(), 1, 0)
        for g in range(n_grp):
            self.ordbuf.clear()
            self._group_cores(g, self.ccores.data())
            t = self._lr0_target(limit)
            if t < 0:
                return -1
            self._add_transition(self.sym_order[g], t)
        return self._end_transitions(tlo)

    cdef int32_t _pre_la(self, int32_t code, int32_t l_id) except -1:
        """The pool id of a closure item's lookahead ``spontaneous | (L if inherits)`` for its
        closure-list code and ``L`` = pool set ``l_id``."""
        if not (code & 1):
            return code >> 1
        return self._union(code >> 1, l_id)

    cdef inline void _remember(self, int64_t gi, int32_t t) noexcept:
        """Record ``t`` as the state of successor ``gi`` of the current :meth:`_lr1_step` (one
        group of one ``b`` with its ``L_b``) in ``pg_last_*``."""
        cdef int64_t r = self.src_head[gi], g = self.src_g[r]
        if <int64_t>self.pg_last_l.size() < <int64_t>self.pg_t.size():
            self.pg_last_l.resize(self.pg_t.size(), -1)
            self.pg_last_t.resize(self.pg_t.size(), -1)
        self.pg_last_l[g] = self.l_of[self.src_b[r]]
        self.pg_last_t[g] = t

    cdef int _lr1_step(self, int64_t s, int64_t limit) except -2:
        """Visit canonical state ``s`` without its closure when no kernel item is at the start of
        its rule and no closure of a nonterminal ``b1, b2, ...`` after a kernel dot has a complete
        item; 0 (nothing done) otherwise, -1 past ``limit``.

        Then the closure is the kernel followed by each ``b``'s closure items not listed before,
        an item of ``b`` with lookahead ``spontaneous | (L_b if inherits)`` for ``L_b`` the union
        of what the kernel items before ``b`` pass on (or'ed over the ``b``'s that share it). So,
        as in :meth:`_lr0_step`, the successors are the kernel's symbol groups (with the ``b``'s
        items of the symbol appended), then each ``b``'s groups of new symbols; a successor that
        only ``b``'s groups make up depends on those groups and their ``L_b`` only, and is looked
        up once per such combination (``memo``). Successors are added in the order, kernel order
        and numbering of :meth:`explore`'s closure path, and the reduces are the complete kernel
        items' (the closure adds none)."""
        cdef int64_t T = self.T, W = self.W, lo = self.k_off[s], hi = self.k_off[s + 1], j, b
        cdef int64_t i, g, gi, n_grp, n_b, r, p, phi, tlo = <int64_t>self.tr.size(), pos
        cdef int32_t c, t, la, e, l_id
        cdef uint64_t* L = self.lbuf.data()
        cdef uint64_t h = 0
        cdef bint multi
        if not self._kernel_nonterminals(lo, hi):
            return 0
        n_b = <int64_t>self.bs.size()
        self.l_of.resize(n_b)
        for i in range(n_b):
            b = self.bs[i]
            if self._closure_has_complete_item(b):
                return 0
            self._ensure_groups(b)
            # L_b: what the kernel items before b pass on to b's closure items; its pool id
            # directly while a single set makes it up (one kernel item, a suffix not nullable)
            memset(L, 0, <size_t>W * 8)
            l_id = 0
            for j in range(lo, hi):
                c = self.k_core[j]
                if self.core_next[c] != T + b:
                    continue
                e = self._beta_set(c)
                _or(L, self.pool.key(e), W)
                l_id = _one_set_id(l_id, e)
                if self.beta_null[c] and self.k_la[j]:
                    e = self.k_la[j]
                    _or(L, self.pool.key(e), W)
                    l_id = _one_set_id(l_id, e)
            if l_id < 0:
                l_id = self.pool.intern(L, W)
            self.l_of[i] = l_id
        # the kernel's groups, by first appearance, then each b's groups of new symbols; sources
        # (group of b, index of b) as linked lists
        n_grp = self._group_by_next_symbol(self.k_core.data() + lo, hi - lo, 1, lo)
        self._tick("LR table (item sets)", hi - lo + self._link_group_sources(n_grp))
        for gi in range(<int64_t>self.sym_order.size()):
            multi = self.src_n[gi] > 1
            if gi >= n_grp:  # b's groups alone: the state of those groups and their L_b
                if not multi:  # the last L_b seen with this group, the commonest hit
                    r = self.src_head[gi]
                    g = self.src_g[r]
                    if g < <int64_t>self.pg_last_l.size() and self.pg_last_l[g] == self.l_of[self.src_b[r]]:
                        self._add_transition(self.sym_order[gi], self.pg_last_t[g])
                        continue
                self.mkey.clear()
                r = self.src_head[gi]
                while r >= 0:
                    self.mkey.push_back((<uint64_t>self.src_g[r]) << 32 | <uint64_t>self.l_of[self.src_b[r]])
                    r = self.src_next[r]
                if multi:
                    sort(self.mkey.begin(), self.mkey.end())
                h = _hash_words(self.mkey.data(), <int64_t>self.mkey.size())
                e = self.memo.find(self.mkey.data(), <int64_t>self.mkey.size(), h)
                if e >= 0:
                    if not multi:
                        self._remember(gi, self.memo_t[e])
                    self._add_transition(self.sym_order[gi], self.memo_t[e])
                    continue
            self.ordbuf.clear()
            self.ordla.clear()
            if gi < n_grp:
                for i in range(self.grp_off[gi], self.grp_off[gi + 1]):
                    j = self.grp_items[i]
                    self.ordbuf.push_back(self.k_core[j] + 1)
                    self.ordla.push_back(self.k_la[j])
            if multi:  # items of several b's: each core once, at its first place, lookaheads or'ed
                self._next_core_generation()
            r = self.src_head[gi]
            while r >= 0:
                g = self.src_g[r]
                l_id = self.l_of[self.src_b[r]]
                p = self.pre_off[self.pg_b[g]]
                for i in range(self.pg_lo[g], self.pg_lo[g + 1]):
                    phi = p + 2 * <int64_t>self.pg_items[i]
                    c = self.pre_items[phi] + 1
                    la = self._pre_la(self.pre_items[phi + 1], l_id)
                    if multi:
                        if not self._mark_core(c):
                            pos = self.cpos[c]
                            self.ordla[pos] = self._union(self.ordla[pos], la)
                            continue
                        self.cpos[c] = <int32_t>self.ordbuf.size()
                    self.ordbuf.push_back(c)
                    self.ordla.push_back(la)
                r = self.src_next[r]
            t = self._kernel_target(limit, True, True)
            if t < 0:
                return -1
            if gi >= n_grp:
                self.memo.insert(self.mkey.data(), <int64_t>self.mkey.size(), h)
                self.memo_t.push_back(t)
                if not multi:
                    self._remember(gi, t)
            self._add_transition(self.sym_order[gi], t)
        self._end_transitions(tlo)
        self._record_kernel_reduces(s)
        return 1

    def lalr_from_lr0(self) -> None:
        """Make the automaton of the last :meth:`explore_lr0` the LALR(1) automaton, as a
        successful ``explore(True, ...)`` leaves it: the same states and transitions, and kernel
        lookaheads the least fixed point of the LALR(1) equations, which that exploration's work
        queue also reaches (the least fixed point is unique, so the order of propagation does not
        show).

        The equations are set up once per state instead of once per visit: a kernel item's
        closure gives every successor kernel item a *spontaneous* set (the closure items'
        FIRST-derived lookaheads) and *propagation* edges (from the kernel item to the successor
        items that inherit its lookahead: its own shifted item, and closure items reached through
        nullable suffixes). A closure group whose successor is the state of its cores alone
        (``pg_t``) gives each of its many predecessors the same spontaneous sets: they are or'ed
        in once, and only the inheriting items are visited per predecessor. The fixed point then
        or's bitsets along edges, without the GIL."""
        cdef int64_t W = self.W, T = self.T, n, K, s, k, j, p, b, x, d, i
        cdef int32_t c, c2, code, sm, bf, t
        cdef bint bn
        cdef vector[uint64_t] la
        cdef vector[int32_t] e_src, e_dst
        cdef vector[uint8_t] g_done
        cdef int64_t pb, g
        cdef uint64_t* L
        if self.lr0_n < 0:
            raise RuntimeError("Automaton.lalr_from_lr0 before a successful explore_lr0")
        self.check("LR table (item sets)")
        n = self.lr0_n
        self.k_off.swap(self.z_k_off)
        self.k_core.swap(self.z_k_core)
        self.tr_off.swap(self.z_tr_off)
        self.tr.swap(self.z_tr)
        self.lr0_n = -1
        self.z_k_off.clear()
        self.z_k_core.clear()
        self.z_tr_off.clear()
        self.z_tr.clear()
        K = <int64_t>self.k_core.size()
        self.k_la.assign(K, 0)
        self.rd_off.clear()
        self.rd_off.push_back(0)
        self.rd.clear()
        la.assign(K * W, 0)
        g_done.assign(self.pg_t.size(), 0)
        for s in range(n):
            for j in range(self.k_off[s], self.k_off[s + 1]):  # (first: they use sym_idx)
                x = self.core_next[self.k_core[j]]
                if x >= T:
                    self._ensure_groups(x - T)
            # the successor kernels' positions by core (a core determines the symbol before its
            # dot, so the successors of one state have disjoint cores), and targets by symbol
            # (every symbol after a dot in the closure has one)
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                t = <int32_t>(self.tr[k] & 0xffffffffULL)
                self.sym_idx[<int64_t>(self.tr[k] >> 32)] = t
                for j in range(self.k_off[t], self.k_off[t + 1]):
                    self.kpos[self.k_core[j]] = <int32_t>j
            for j in range(self.k_off[s], self.k_off[s + 1]):
                c = self.k_core[j]
                x = self.core_next[c]
                if x < 0:
                    continue
                e_src.push_back(<int32_t>j)
                e_dst.push_back(self.kpos[c + 1])
                if x < T:
                    continue
                b = x - T
                bf = self._beta_set(c)
                bn = self.beta_null[c]
                if <int64_t>g_done.size() < <int64_t>self.pg_t.size():
                    g_done.resize(self.pg_t.size(), 0)
                pb = self.pre_off[b]
                # b's closure items by group: a group whose target is the state of its cores
                # alone gives every predecessor the same spontaneous sets, or'ed in once
                for g in range(self.pg_first[b], self.pg_first[b] + self.pg_n[b]):
                    t = self.sym_idx[self.pg_sym[g]]
                    if t == self.pg_t[g] and g_done[g]:
                        self._tick("LR table (lookaheads)", self.pg_ilo[g + 1] - self.pg_ilo[g])
                        for i in range(self.pg_ilo[g], self.pg_ilo[g + 1]):
                            p = pb + 2 * <int64_t>self.pg_inh[i]
                            d = self.kpos[self.pre_items[p] + 1]
                            if bf:
                                _or(la.data() + d * W, self.pool.key(bf), W)
                            if bn:
                                e_src.push_back(<int32_t>j)
                                e_dst.push_back(<int32_t>d)
                        continue
                    if t == self.pg_t[g]:
                        g_done[g] = 1
                    self._tick("LR table (lookaheads)", self.pg_lo[g + 1] - self.pg_lo[g])
                    for i in range(self.pg_lo[g], self.pg_lo[g + 1]):
                        p = pb + 2 * <int64_t>self.pg_items[i]
                        c2 = self.pre_items[p]
                        code = self.pre_items[p + 1]
                        d = self.kpos[c2 + 1]
                        L = la.data() + d * W
                        sm = code >> 1
                        if sm:
                            _or(L, self.pool.key(sm), W)
                        if code & 1:
                            if bf:
                                _or(L, self.pool.key(bf), W)
                            if bn:
                                e_src.push_back(<int32_t>j)
                                e_dst.push_back(<int32_t>d)
        self._propagate(la.data(), K, e_src, e_dst, "LR table (lookaheads)")
        # the lookaheads stay rows (tables() reads a kernel's reduces from them); only the
        # states whose reduces need a closure have them interned (_intern_kernel)
        self.k_la.assign(K, -1)
        self.la_rows.swap(la)
        self.has_rows = True
        self.lalr = True
        self.explored = True

    cdef int _intern_kernel(self, int64_t s) except -1:
        """Intern the lookahead rows of state ``s``'s kernel items into ``k_la`` (after
        :meth:`lalr_from_lr0`, which leaves them as rows)."""
        cdef int64_t j
        for j in range(self.k_off[s], self.k_off[s + 1]):
            if self.k_la[j] < 0:
                self.k_la[j] = self.pool.intern(self.la_rows.data() + j * self.W, self.W)
        return 0

    cdef bint _closure_reduces(self, int64_t s) except -1:
        """Whether state ``s``'s closure adds a complete item (an ε-rule's) to its kernel, so
        that its reduces need the closure; otherwise they are its complete kernel items'."""
        cdef int64_t T = self.T, j, x
        for j in range(self.k_off[s], self.k_off[s + 1]):
            x = self.core_next[self.k_core[j]]
            if x >= T and self._closure_has_complete_item(x - T):
                return True
        return False

    cdef int _record_kernel_reduces(self, int64_t s) except -1:
        """:meth:`_record_reduces` of state ``s`` when its closure adds no complete item
        (:meth:`_closure_reduces`): the complete kernel items' lookaheads are the closure's."""
        cdef int64_t j, lo = <int64_t>self.rd.size()
        cdef int32_t r
        for j in range(self.k_off[s], self.k_off[s + 1]):
            r = self._reduce_rule(self.k_core[j])
            if r < 0:
                continue
            if self.has_rows:
                self._add_reduces(self.la_rows.data() + j * self.W, r)
            else:
                self._add_reduces(self.pool.key(self.k_la[j]), r)
        return self._end_reduces(lo)

    cdef int _record_reduces(self) except -1:
        """Append the reduce pairs of the closure in ``clo`` (complete items except rule 0), sorted
        and unique, as the next state's reduce list."""
        cdef _Items it = self.clo
        cdef int64_t i, lo = <int64_t>self.rd.size()
        cdef int32_t r
        for i in range(<int64_t>it.core.size()):
            r = self._reduce_rule(it.core[i])
            if r >= 0:
                self._add_reduces(it.row(<int32_t>i), r)
        return self._end_reduces(lo)

    @property
    def n_states(self) -> int:
        """States of the last exploration."""
        return <int64_t>self.k_off.size() - 1

    # ----------------------------------------------------------------------- rows and merging
    def tables(self, bint merge):
        """``(start, final)`` and the sparse rows of :meth:`_export` of the last
        successful :meth:`explore`, identical rows merged when ``merge`` (as
        :func:`glrmask.lr.table._minimize`), states renumbered breadth-first from the start.
        ``final`` is -1 when no state (or more than one) is the target of the ``$END`` shift: the
        grammar derives no sentence."""
        cdef int64_t n = self.n_states, s, k, final = -1, end = self.T - 1, tgt
        cdef int64_t i
        cdef vector[int32_t] cls, rep, order, by_order
        cdef int32_t n_cls
        if not self.explored:
            raise RuntimeError("Automaton.tables before a successful explore")
        if self.lalr and <int64_t>self.rd_off.size() == 1:
            for s in range(n):
                if self._closure_reduces(s):
                    if self.has_rows:
                        self._intern_kernel(s)
                    self._closure(s)
                    self._tick("LR table (rows)", <int64_t>self.clo.core.size())
                    self._record_reduces()
                else:
                    self._tick("LR table (rows)", self.k_off[s + 1] - self.k_off[s])
                    self._record_kernel_reduces(s)
        for s in range(n):
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                if <int64_t>(self.tr[k] >> 32) == end:
                    tgt = <int64_t>(self.tr[k] & 0xffffffffULL)
                    if final == -1:
                        final = tgt
                    elif final != tgt:
                        final = -2
        if final < 0:
            return 0, -1, None, None, None, None, None, None, None, None
        if not merge:  # the exploration's own numbering
            cls.resize(n)
            for s in range(n):
                cls[s] = <int32_t>s
            by_order.assign(cls.begin(), cls.end())
            return (0, final) + self._export(n, by_order, cls, cls, cls)
        n_cls = self._partition(cls)
        # representatives (the first state of each class), classes numbered breadth-first
        rep.assign(n_cls, -1)
        for s in range(n):
            if rep[cls[s]] < 0:
                rep[cls[s]] = <int32_t>s
        order.assign(n_cls, -1)
        order[cls[0]] = 0
        by_order.push_back(cls[0])
        i = 0
        while i < <int64_t>by_order.size():
            s = rep[by_order[i]]
            i += 1
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                tgt = cls[<int64_t>(self.tr[k] & 0xffffffffULL)]
                if order[tgt] < 0:
                    order[tgt] = <int32_t>by_order.size()
                    by_order.push_back(<int32_t>tgt)
        return (0, order[cls[final]]) + self._export(<int64_t>by_order.size(), by_order, rep, cls, order)

    cdef tuple _export(self, int64_t n_out, vector[int32_t]& by_order, vector[int32_t]& rep,
                       vector[int32_t]& cls, vector[int32_t]& order):
        """The sparse rows (:class:`glrmask.lr.table.LRTable`) of the states ``rep[by_order[i]]`` as
        rows ``i``, targets through ``order[cls[...]]``: ``(act_ptr, act_term, act_shift, act_roff,
        reduce_rules, goto_ptr, goto_nt, goto_tgt)``. A state's transitions are sorted by symbol
        code (terminals first) and its reduce pairs by terminal, so each action row is one merge of
        the two; nothing is written per empty cell (dense tables were hundreds of MB on the largest
        schemas, most of the build)."""
        cdef int64_t T = self.T, i, s, k, kend, r, rend, x, xs, xr, t
        cdef int64_t NONE = 0x7fffffffffffffff
        cdef const uint64_t* tr = self.tr.data()
        cdef const uint64_t* rd = self.rd.data()
        cdef const int64_t* tr_off = self.tr_off.data()
        cdef const int64_t* rd_off = self.rd_off.data()
        cdef const int32_t* rp = rep.data()
        cdef const int32_t* bo = by_order.data()
        cdef const int32_t* cl = cls.data()
        cdef const int32_t* od = order.data()
        cdef vector[int32_t] aptr, aterm, ashift, aroff, flat, gptr, gnt, gtgt
        aptr.reserve(n_out + 1)
        gptr.reserve(n_out + 1)
        aptr.push_back(0)
        aroff.push_back(0)
        gptr.push_back(0)
        for i in range(n_out):
            s = rp[bo[i]]
            k = tr_off[s]
            kend = tr_off[s + 1]
            r = rd_off[s]
            rend = rd_off[s + 1]
            while True:
                xs = <int64_t>(tr[k] >> 32) if k < kend else NONE
                if xs >= T:
                    xs = NONE  # the gotos follow the terminals
                xr = <int64_t>(rd[r] >> 32) if r < rend else NONE
                t = xs if xs < xr else xr
                if t == NONE:
                    break
                aterm.push_back(<int32_t>t)
                if xs == t:
                    ashift.push_back(od[cl[<int64_t>(tr[k] & 0xffffffffULL)]])
                    k += 1
                else:
                    ashift.push_back(-1)
                while r < rend and <int64_t>(rd[r] >> 32) == t:
                    flat.push_back(<int32_t>(rd[r] & 0xffffffffULL))
                    r += 1
                aroff.push_back(<int32_t>flat.size())
            aptr.push_back(<int32_t>aterm.size())
            while k < kend:
                x = <int64_t>(tr[k] >> 32)
                gnt.push_back(<int32_t>(x - T))
                gtgt.push_back(od[cl[<int64_t>(tr[k] & 0xffffffffULL)]])
                k += 1
            gptr.push_back(<int32_t>gnt.size())
            if <int64_t>aterm.size() > 0x7ffffffe or <int64_t>flat.size() > 0x7ffffffe:
                raise GrammarTooComplex("LR table: the action table exceeds 2**31 entries (int32 offsets)")
        return (_array(aptr), _array(aterm), _array(ashift), _array(aroff), _array(flat), _array(gptr),
                _array(gnt), _array(gtgt))

    cdef bint _same_signature(self, int64_t a, int64_t b) noexcept:
        """Whether states ``a`` and ``b`` have the same reduce list and the same symbols."""
        cdef int64_t i, n = self.rd_off[a + 1] - self.rd_off[a], m = self.tr_off[a + 1] - self.tr_off[a]
        if n != self.rd_off[b + 1] - self.rd_off[b] or m != self.tr_off[b + 1] - self.tr_off[b]:
            return False
        if not _same(self.rd.data() + self.rd_off[a], self.rd.data() + self.rd_off[b], n):
            return False
        for i in range(m):
            if (self.tr[self.tr_off[a] + i] >> 32) != (self.tr[self.tr_off[b] + i] >> 32):
                return False
        return True

    cdef int32_t _partition(self, vector[int32_t]& cls) except -1:
        """The coarsest partition of the states that refines "same reduces and same symbols" and
        is stable under the transitions (Moore's refinement, incrementally: after the first round
        only predecessors of states that changed class are regrouped, as
        :func:`glrmask.lr.table._refine_rows`). Returns the number of classes."""
        cdef int64_t n = self.n_states, s, k, i, g, b, n_grp, rounds = 0
        cdef int32_t n_cls, e
        cdef _KeySet sig = _KeySet()
        cdef vector[int32_t] size, pred_off, preds, cand, grp, g_block, g_size, g_new, changed
        cdef vector[int64_t] b_stamp
        cdef vector[int32_t] b_total, b_ngroups, b_best
        cdef vector[int64_t] c_stamp
        cdef vector[int32_t] slots
        cdef vector[uint64_t] hs
        cdef uint64_t h
        cdef int64_t mask
        # initial classes: identical reduce lists and identical symbols, hashed and compared in
        # place (an open-addressing table of each class's first state)
        cls.resize(n)
        k = 16
        while k < 2 * n:
            k *= 2
        slots.assign(k, -1)
        mask = k - 1
        hs.resize(n)
        for s in range(n):
            h = _hash_words(self.rd.data() + self.rd_off[s], self.rd_off[s + 1] - self.rd_off[s])
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                h = (h ^ (self.tr[k] >> 32)) * 0x9e3779b97f4a7c15ULL
                h ^= h >> 29
            h = _mix(h + <uint64_t>(self.tr_off[s + 1] - self.tr_off[s]))
            hs[s] = h
            i = <int64_t>(h & <uint64_t>mask)
            while True:
                e = slots[i]
                if e < 0:
                    slots[i] = <int32_t>s
                    cls[s] = <int32_t>size.size()
                    size.push_back(0)
                    break
                if hs[e] == h and self._same_signature(e, s):
                    cls[s] = cls[e]
                    break
                i = (i + 1) & mask
            size[cls[s]] += 1
        n_cls = <int32_t>size.size()
        # A state alone in its initial class stays alone: it is never regrouped, so it is neither
        # a candidate nor recorded as a predecessor (most states of large JSON Schema grammars).
        # predecessors (in a shared class)
        pred_off.assign(n + 1, 0)
        for s in range(n):
            if size[cls[s]] > 1:
                for k in range(self.tr_off[s], self.tr_off[s + 1]):
                    pred_off[<int64_t>(self.tr[k] & 0xffffffffULL) + 1] += 1
        for s in range(n):
            pred_off[s + 1] += pred_off[s]
        preds.assign(pred_off[n], 0)
        grp.assign(n, 0)  # fill cursors
        for s in range(n):
            if size[cls[s]] > 1:
                for k in range(self.tr_off[s], self.tr_off[s + 1]):
                    i = <int64_t>(self.tr[k] & 0xffffffffULL)
                    preds[pred_off[i] + grp[i]] = <int32_t>s
                    grp[i] += 1
        cand.clear()
        for s in range(n):
            if size[cls[s]] > 1:
                cand.push_back(<int32_t>s)
        b_stamp.assign(n, 0)
        b_total.assign(n, 0)
        b_ngroups.assign(n, 0)
        b_best.assign(n, 0)
        c_stamp.assign(n, 0)
        while cand.size():
            rounds += 1
            self._tick("LR table (merging identical rows)", <int64_t>cand.size())
            sig.reset(<int64_t>cand.size())
            grp.resize(cand.size())
            g_block.clear()
            g_size.clear()
            for i in range(<int64_t>cand.size()):
                s = cand[i]
                self.keybuf.clear()
                self.keybuf.push_back(<uint64_t>cls[s])
                for k in range(self.tr_off[s], self.tr_off[s + 1]):
                    self.keybuf.push_back(<uint64_t>cls[<int64_t>(self.tr[k] & 0xffffffffULL)])
                e = sig.intern(self.keybuf.data(), <int64_t>self.keybuf.size())
                grp[i] = e
                if e == <int32_t>g_block.size():
                    g_block.push_back(cls[s])
                    g_size.push_back(0)
                g_size[e] += 1
            n_grp = <int64_t>g_block.size()
            for g in range(n_grp):
                b = g_block[g]
                if b_stamp[b] != rounds:
                    b_stamp[b] = rounds
                    b_total[b] = 0
                    b_ngroups[b] = 0
                    b_best[b] = <int32_t>g
                b_total[b] += g_size[g]
                b_ngroups[b] += 1
                if g_size[g] > g_size[b_best[b]]:
                    b_best[b] = <int32_t>g
            g_new.assign(n_grp, -1)
            for g in range(n_grp):
                b = g_block[g]
                if b_total[b] == size[b]:
                    if b_ngroups[b] == 1 or b_best[b] == g:
                        continue  # the block is unchanged, or this part keeps its id
                g_new[g] = n_cls
                n_cls += 1
            for g in range(n_grp):  # sizes only now: the decisions above compare the old ones
                if g_new[g] >= 0:
                    size.push_back(g_size[g])
                    size[g_block[g]] -= g_size[g]
            if n_cls > n:  # classes are never empty; the arrays below are sized by n
                raise AssertionError("LR table: the partition refinement emptied a class")
            changed.clear()
            for i in range(<int64_t>cand.size()):
                e = g_new[grp[i]]
                if e >= 0:
                    cls[cand[i]] = e
                    changed.push_back(cand[i])
            if not changed.size():
                break
            cand.clear()
            for i in range(<int64_t>changed.size()):
                s = changed[i]
                for k in range(pred_off[s], pred_off[s + 1]):
                    if c_stamp[preds[k]] != rounds and size[cls[preds[k]]] > 1:
                        c_stamp[preds[k]] = rounds
                        cand.push_back(preds[k])
            sort(cand.begin(), cand.end())
        return n_cls
