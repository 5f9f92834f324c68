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
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
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
    cdef uint64_t h = 0x243f6a8885a308d3ULL ^ <uint64_t>n
    cdef int64_t i
    for i in range(n):
        h = (h ^ p[i]) * 0x9e3779b97f4a7c15ULL
        h ^= h >> 29
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

    cdef inline void or_set(self, int32_t i, const uint64_t* b, int32_t bid) noexcept:
        """``la[i] |= b`` where ``b`` is pool set ``bid`` (not 0). While every set or'ed into an
        item is the same one, its id is known and the successor step need not intern it."""
        _or(self.la.data() + <int64_t>i * self.W, b, self.W)
        if self.lid[i] == 0:
            self.lid[i] = bid
        elif self.lid[i] != bid:
            self.lid[i] = -1

    cdef inline uint64_t* row(self, int32_t i) noexcept:
        """Item ``i``'s lookahead (valid until the next :meth:`add`)."""
        return self.la.data() + <int64_t>i * self.W


cdef inline void _or(uint64_t* dst, const uint64_t* src, int64_t W) noexcept nogil:
    cdef int64_t k
    for k in range(W):
        dst[k] |= src[k]


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
    cdef vector[int32_t] beta_id
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
        self.beta_null.assign(self.n_cores, 0)
        self.pre_off.assign(n_nt, -1)
        self.pre_len.assign(n_nt, 0)
        self.pre_work = _Items(self.n_cores, self.W)
        self.clo = _Items(self.n_cores, self.W)
        self.index = _KeySet()
        self.sym_stamp.assign(self.n_syms, 0)
        self.sym_idx.assign(self.n_syms, 0)
        self.kpos.assign(self.n_cores, 0)
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

    # ----------------------------------------------------------------------- FIRST sets
    cdef int _first_sets(self, const int32_t[::1] rule_lhs) except -1:
        """Least fixed point of FIRST and nullable, rule by rule until nothing changes (as
        :meth:`glrmask.lr.table._Builder._first_sets`)."""
        cdef int64_t W = self.W, T = self.T, i, k, a, n, c
        cdef bint changed = True, all_null
        cdef uint64_t* fa
        cdef uint64_t* fn
        cdef uint64_t bit, old
        self.first.assign(self.n_nt * W, 0)
        self.nullable.assign(self.n_nt, 0)
        while changed:
            self.check("LR table (FIRST sets)")
            changed = False
            for i in range(self.n_rules):
                a = rule_lhs[i]
                fa = self.first.data() + a * W
                all_null = True
                c = self.rule_off[i]
                while self.core_next[c] >= 0:
                    n = self.core_next[c]
                    if n < T:
                        bit = (<uint64_t>1) << (n & 63)
                        if not fa[n >> 6] & bit:
                            fa[n >> 6] |= bit
                            changed = True
                        all_null = False
                        break
                    n -= T
                    if n != a:
                        fn = self.first.data() + n * W
                        for k in range(W):
                            old = fa[k]
                            fa[k] = old | fn[k]
                            if fa[k] != old:
                                changed = True
                    if not self.nullable[n]:
                        all_null = False
                        break
                    c += 1
                if all_null and not self.nullable[a]:
                    self.nullable[a] = 1
                    changed = True
        return 0

    cdef int _beta(self, int32_t c) except -1:
        """FIRST and nullability of what follows the symbol after the dot of core ``c`` (cached
        as a pool id in ``beta_id[c]``)."""
        cdef int64_t W = self.W, T = self.T, k = c + 1, n
        cdef uint64_t* f = self.tmp.data()
        cdef bint nul = True
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
        cdef int64_t W = self.W, T = self.T, head = 0, r, nxt, j
        cdef int32_t c, c2, i, i2, sm
        cdef bint inh, add_inh, grew
        cdef uint64_t* m
        cdef uint64_t* dst
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
            if self.beta_id[c] < 0:
                self._beta(c)
            i = it.get(c)
            inh = it.inh[i]
            m = it.row(i)
            # add_m = beta_first | (m if beta nullable), built in lbuf (rows move when items are added)
            memcpy(add_m, self.pool.key(self.beta_id[c]), <size_t>W * 8)
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
                    dst = it.row(i2)
                    grew = False
                    for j in range(W):
                        if add_m[j] & ~dst[j]:
                            grew = True
                        dst[j] |= add_m[j]
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
        cdef int64_t W = self.W, T = self.T, k, lo = self.k_off[s], hi = self.k_off[s + 1], p, plo, phi
        cdef int64_t nxt, b
        cdef int32_t c, c2, i, code
        cdef int32_t l_id, sm, la
        cdef uint64_t* L = self.lbuf.data()
        it.clear()
        for k in range(lo, hi):
            i = it.get(self.k_core[k])
            if i < 0:
                i = it.add(self.k_core[k])
            if self.k_la[k]:
                it.or_set(i, self.pool.key(self.k_la[k]), self.k_la[k])
        for k in range(lo, hi):
            c = self.k_core[k]
            nxt = self.core_next[c]
            if nxt < T:
                continue
            b = nxt - T
            if self.pre_off[b] < 0:
                self._pre_of(b)
            if self.beta_id[c] < 0:
                self._beta(c)
            # L = beta_first | (la if beta nullable), as a pool set
            la = self.k_la[k]
            l_id = self.beta_id[c]
            if self.beta_null[c] and la and la != l_id:
                if l_id == 0:
                    l_id = la
                else:
                    memcpy(L, self.pool.key(l_id), <size_t>W * 8)
                    _or(L, self.pool.key(la), W)
                    l_id = self.pool.intern(L, W)
            plo = self.pre_off[b]
            phi = plo + 2 * <int64_t>self.pre_len[b]
            self._tick("LR table (item sets)", self.pre_len[b])
            p = plo
            while p < phi:
                c2 = self.pre_items[p]
                code = self.pre_items[p + 1]
                p += 2
                i = it.get(c2)
                if i < 0:
                    i = it.add(c2)
                sm = code >> 1
                if sm:
                    it.or_set(i, self.pool.key(sm), sm)
                if code & 1 and l_id:
                    it.or_set(i, self.pool.key(l_id), l_id)
        return 0

    # ----------------------------------------------------------------------- item sets
    cdef int32_t _new_state(self, const uint64_t* key, int64_t n, uint64_t h, int64_t gfirst,
                            int64_t glast) except -1:
        """Add the kernel of successor group ``gfirst:glast`` (items ``grp_items``, lookaheads
        ``succ_la``) as a new state under ``key``."""
        cdef int64_t g
        cdef int32_t t = <int32_t>(self.k_off.size() - 1)
        self.index.add(key, n, h)
        for g in range(gfirst, glast):
            self.k_core.push_back(self.clo.core[self.grp_items[g]] + 1)
            self.k_la.push_back(self.succ_la[g])
        self.k_off.push_back(<int64_t>self.k_core.size())
        return t

    def explore(self, bint lalr, int64_t limit) -> bool:
        """Build the item sets reachable from the start breadth-first: canonical LR(1) keys states
        by their ``(core, lookahead)`` pairs, LALR(1) by their cores (lookaheads merged and
        propagated to a fixed point). False when more than ``limit`` states would be needed.
        Records every state's transitions (and, canonical, its reduces) on its first visit."""
        cdef _Items it = self.clo
        cdef int64_t W = self.W, head = 0, n_done = 0, i, g, gi, n_items, n_grp, x, klen
        cdef int64_t lo, hi, j, tlo
        cdef int32_t s, t, c, la, old, u
        cdef uint64_t h, bits
        cdef bint first_visit, grew
        cdef vector[int32_t] work
        cdef vector[uint8_t] queued
        cdef uint64_t* a
        cdef const uint64_t* o
        self.check("LR table (item sets)")
        self.lalr = lalr
        self.explored = False
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
        # the start state: {$START -> . start $END} with the empty lookahead
        self.keybuf.clear()
        self.keybuf.push_back((<uint64_t>self.rule_off[0]) << 32 if not lalr else <uint64_t>self.rule_off[0])
        h = _hash_words(self.keybuf.data(), 1)
        self.index.find(self.keybuf.data(), 1, h)
        self.index.add(self.keybuf.data(), 1, h)
        self.k_core.push_back(self.rule_off[0])
        self.k_la.push_back(0)
        self.k_off.push_back(1)
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
            self._closure(s)
            n_items = <int64_t>it.core.size()
            self._tick("LR table (item sets)", n_items)
            # successors: group items by the symbol after the dot, in first-appearance order
            self.sgen += 1
            if self.sgen == 0:
                self.sym_stamp.assign(self.sym_stamp.size(), 0)
                self.sgen = 1
            self.sym_order.clear()
            self.grp_off.clear()
            for i in range(n_items):
                x = self.core_next[it.core[i]]
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
            self.succ_la.assign(j, 0)
            for i in range(n_items):
                x = self.core_next[it.core[i]]
                if x < 0:
                    continue
                g = self.sym_idx[x]
                self.grp_items[self.grp_cur[g]] = <int32_t>i
                self.grp_cur[g] += 1
            for i in range(j):
                u = it.lid[self.grp_items[i]]
                self.succ_la[i] = u if u >= 0 else self.pool.intern(it.row(self.grp_items[i]), W)
            for g in range(n_grp):
                lo = self.grp_off[g]
                hi = self.grp_off[g + 1]
                self.keybuf.clear()
                for gi in range(lo, hi):
                    c = it.core[self.grp_items[gi]] + 1
                    if lalr:
                        self.keybuf.push_back(<uint64_t>c)
                    else:
                        self.keybuf.push_back((<uint64_t>c) << 32 | <uint64_t>self.succ_la[gi])
                sort(self.keybuf.begin(), self.keybuf.end())
                klen = hi - lo
                h = _hash_words(self.keybuf.data(), klen)
                t = self.index.find(self.keybuf.data(), klen, h)
                if t < 0:
                    if <int64_t>self.k_off.size() - 1 >= limit:
                        return False
                    t = self._new_state(self.keybuf.data(), klen, h, lo, hi)
                    work.push_back(t)
                    queued.push_back(1)
                elif lalr:
                    for j in range(self.k_off[t], self.k_off[t + 1]):  # same cores as the successor
                        self.kpos[self.k_core[j]] = <int32_t>j
                    grew = False
                    for gi in range(lo, hi):
                        c = it.core[self.grp_items[gi]] + 1
                        la = self.succ_la[gi]
                        j = self.kpos[c]
                        old = self.k_la[j]
                        if la == old or la == 0:
                            continue
                        a = self.tmp.data()
                        memcpy(a, self.pool.key(old), <size_t>W * 8)
                        o = self.pool.key(la)
                        bits = 0
                        for x in range(W):
                            bits |= o[x] & ~a[x]
                            a[x] |= o[x]
                        if bits:
                            self.k_la[j] = self.pool.intern(a, W)
                            grew = True
                    if grew and not queued[t]:
                        work.push_back(t)
                        queued[t] = 1
                if first_visit:
                    self.tr.push_back((<uint64_t>self.sym_order[g]) << 32 | <uint64_t>t)
            if first_visit:
                tlo = self.tr_off[self.tr_off.size() - 1]
                sort(self.tr.begin() + tlo, self.tr.end())
                self.tr_off.push_back(<int64_t>self.tr.size())
                if not lalr:
                    self._record_reduces()
        self.explored = True
        return True

    cdef int _record_reduces(self) except -1:
        """Append the reduce pairs of the closure in ``clo`` (complete items except rule 0), sorted
        and unique, as the next state's reduce list."""
        cdef _Items it = self.clo
        cdef int64_t W = self.W, i, k, lo = <int64_t>self.rd.size()
        cdef int32_t c, r
        cdef uint64_t w
        cdef uint64_t* row
        for i in range(<int64_t>it.core.size()):
            c = it.core[i]
            if self.core_next[c] != -1:
                continue
            r = self.core_rule[c]
            if r == 0:
                continue  # $START -> start $END . : the final state, nothing to reduce
            row = it.row(<int32_t>i)
            for k in range(W):
                w = row[k]
                while w:
                    self.rd.push_back((<uint64_t>(k * 64 + __builtin_ctzll(w))) << 32 | <uint64_t>r)
                    w &= w - 1
        if <int64_t>self.rd.size() - lo > 1:
            sort(self.rd.begin() + lo, self.rd.end())
            self.rd.erase(unique(self.rd.begin() + lo, self.rd.end()), self.rd.end())
        self.rd_off.push_back(<int64_t>self.rd.size())
        return 0

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
                self._closure(s)
                self._tick("LR table (rows)", <int64_t>self.clo.core.size())
                self._record_reduces()
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
        # initial classes: identical reduce lists and identical symbols
        sig.reset(n)
        cls.resize(n)
        for s in range(n):
            self.keybuf.clear()
            self.keybuf.push_back(<uint64_t>(self.rd_off[s + 1] - self.rd_off[s]))
            for k in range(self.rd_off[s], self.rd_off[s + 1]):
                self.keybuf.push_back(self.rd[k])
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                self.keybuf.push_back(self.tr[k] >> 32)
            e = sig.intern(self.keybuf.data(), <int64_t>self.keybuf.size())
            cls[s] = e
            if e == <int32_t>size.size():
                size.push_back(0)
            size[e] += 1
        n_cls = <int32_t>size.size()
        # predecessors
        pred_off.assign(n + 1, 0)
        for k in range(<int64_t>self.tr.size()):
            pred_off[<int64_t>(self.tr[k] & 0xffffffffULL) + 1] += 1
        for s in range(n):
            pred_off[s + 1] += pred_off[s]
        preds.assign(pred_off[n], 0)
        grp.assign(n, 0)  # fill cursors
        for s in range(n):
            for k in range(self.tr_off[s], self.tr_off[s + 1]):
                i = <int64_t>(self.tr[k] & 0xffffffffULL)
                preds[pred_off[i] + grp[i]] = <int32_t>s
                grp[i] += 1
        cand.resize(n)
        for s in range(n):
            cand[s] = <int32_t>s
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
                    if c_stamp[preds[k]] != rounds:
                        c_stamp[preds[k]] = rounds
                        cand.push_back(preds[k])
            sort(cand.begin(), cand.end())
        return n_cls
