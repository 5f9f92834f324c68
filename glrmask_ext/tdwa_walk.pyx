# cython: language_level=3, wraparound=False, boundscheck=False, cdivision=True
# distutils: language = c++
"""Native core of :class:`glrmask.compiler.terminal_dwa.TerminalDWA` construction: the hash-consed
DAG of weighted label trees (:class:`Dag`) and the memoized trie walk (:class:`Walker`).

Why native. The build is tens of millions of tiny operations — a memo lookup per (trie node,
branch) pair, a step-table read per trie edge, an interval merge or a node lookup per union — and
with Python dicts and tuples each cost about a microsecond: most of a static compile. Here every
table is a C array or an open-addressing hash map over C integers, and a frame of the walk is a
few integers on a C stack; Python is entered only to *fill* a cache the first time it is missed
(a lexer step of a branch over one byte group, the looping bytes of a branch at a trie height, a
branch's class representative, a branch's end labels), which the builder in ``terminal_dwa``
computes with the lexer — the lexer semantics stay in one place.

Order. Nodes and weights are interned in exactly the order of the walk (children before parents,
a union's operands before its result), so the output does not depend on hash-map iteration and is
the same from run to run.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint64_t, uint32_t
from libc.string cimport memcpy, memcmp
from libcpp.vector cimport vector
from libcpp.algorithm cimport sort as cpp_sort

import numpy as np

from glrmask.errors import GrammarTooComplex


cdef extern from *:
    """
    #include <vector>
    #include <unordered_map>
    #include <cstdint>
    #include <cstring>

    /* Open-addressing map from non-negative int64 keys to int32 values (-1 = absent). */
    struct GmI64Map {
        std::vector<int64_t> keys;
        std::vector<int32_t> vals;
        size_t count = 0, mask = 0;
        GmI64Map() { reset(16); }
        void reset(size_t cap) {
            keys.assign(cap, -1); vals.assign(cap, -1); count = 0; mask = cap - 1;
        }
        static inline uint64_t mix(uint64_t k) {
            k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL;
            k ^= k >> 33; return k;
        }
        inline int32_t get(int64_t k) const {
            size_t i = mix((uint64_t)k) & mask;
            while (true) {
                int64_t kk = keys[i];
                if (kk == k) return vals[i];
                if (kk < 0) return -1;
                i = (i + 1) & mask;
            }
        }
        void grow() {
            std::vector<int64_t> ok; std::vector<int32_t> ov;
            ok.swap(keys); ov.swap(vals);
            reset(ok.size() * 2);
            for (size_t i = 0; i < ok.size(); i++) if (ok[i] >= 0) put(ok[i], ov[i]);
        }
        inline void put(int64_t k, int32_t v) {
            if (2 * (count + 1) > keys.size()) grow();
            size_t i = mix((uint64_t)k) & mask;
            while (true) {
                int64_t kk = keys[i];
                if (kk == k) { vals[i] = v; return; }
                if (kk < 0) { keys[i] = k; vals[i] = v; count++; return; }
                i = (i + 1) & mask;
            }
        }
        size_t size() const { return count; }
        void clear() { reset(16); }
        /* Start loading the slots a lookup of ``k`` reads first (a hint; changes nothing). */
        inline void prefetch(int64_t k) const {
            size_t i = mix((uint64_t)k) & mask;
            __builtin_prefetch(&keys[i]);
            __builtin_prefetch(&vals[i]);
        }
    };

    /* Interned int32 sequences: id i is data[ptr[i]:ptr[i+1]]. An open-addressing table whose
       slots hold an id beside the high half of its 64-bit hash (empty: all ones), so a probe
       reads one slot and compares sequences only on equal tags: the DAG's node table holds
       hundreds of thousands of ids, and reading each probed id's hash elsewhere was a cache miss
       per probe (most lookups of a build are misses that probe two or three slots). */
    struct GmSeqSet {
        std::vector<int32_t> data;
        std::vector<int64_t> ptr;
        std::vector<uint64_t> hashes;
        std::vector<uint64_t> table;
        size_t mask = 0;
        static constexpr uint64_t EMPTY = ~0ULL;
        GmSeqSet() { ptr.push_back(0); table.assign(64, EMPTY); mask = 63; }
        static inline uint64_t hash(const int32_t* p, size_t n) {
            uint64_t h = 0x9e3779b97f4a7c15ULL + n;
            for (size_t i = 0; i < n; i++) {
                uint64_t k = (uint32_t)p[i];
                k *= 0xff51afd7ed558ccdULL; k ^= k >> 32;
                h = (h ^ k) * 0xc4ceb9fe1a85ec53ULL; h ^= h >> 29;
            }
            return h;
        }
        static inline uint64_t tag(uint64_t h) { return h & 0xFFFFFFFF00000000ULL; }
        inline int32_t find(const int32_t* p, size_t n, uint64_t h) const {
            size_t i = h & mask;
            const uint64_t t = tag(h);
            while (true) {
                uint64_t slot = table[i];
                if (slot == EMPTY) return -1;
                if (tag(slot) == t) {
                    int32_t id = (int32_t)(uint32_t)slot;
                    if ((size_t)(ptr[id + 1] - ptr[id]) == n
                            && (n == 0 || std::memcmp(&data[ptr[id]], p, n * sizeof(int32_t)) == 0))
                        return id;
                }
                i = (i + 1) & mask;
            }
        }
        int32_t insert(const int32_t* p, size_t n, uint64_t h) {
            int32_t id = (int32_t)hashes.size();
            data.insert(data.end(), p, p + n);
            ptr.push_back((int64_t)data.size());
            hashes.push_back(h);
            if (2 * hashes.size() > table.size()) {
                table.assign(table.size() * 2, EMPTY); mask = table.size() - 1;
                for (int32_t j = 0; j < id; j++) place(j);
            }
            place(id);
            return id;
        }
        inline void place(int32_t id) {
            size_t i = hashes[id] & mask;
            while (table[i] != EMPTY) i = (i + 1) & mask;
            table[i] = tag(hashes[id]) | (uint32_t)id;
        }
        size_t size() const { return hashes.size(); }
    };
    /* A map from int32 sequences to int32 values. */
    struct GmSeqMap {
        GmSeqSet keys;
        std::vector<int32_t> vals;
        inline int32_t get(const std::vector<int32_t>& k) const {
            return get_h(k, GmSeqSet::hash(k.data(), k.size()));
        }
        inline void put_new(const std::vector<int32_t>& k, int32_t v) {
            put_new_h(k, GmSeqSet::hash(k.data(), k.size()), v);
        }
        /* The same with the key's hash computed once by the caller (a miss is followed by an insert). */
        inline int32_t get_h(const std::vector<int32_t>& k, uint64_t h) const {
            int32_t id = keys.find(k.data(), k.size(), h);
            return id < 0 ? -1 : vals[id];
        }
        inline void put_new_h(const std::vector<int32_t>& k, uint64_t h, int32_t v) {
            keys.insert(k.data(), k.size(), h);
            vals.push_back(v);
        }
    };

    /* The scratch vectors of one level of a (recursive) union, reused from call to call. */
    struct GmUnionScratch {
        std::vector<int32_t> ns, finals, olabs, elabs, opens, edges, oslot, eslot;
        std::vector<std::vector<int32_t>> ows, ecs;
    };

    /* (lo, hi) pairs, sorted by lo then hi */
    struct GmPair { int64_t a, b; bool operator<(const GmPair& o) const { return a < o.a || (a == o.a && b < o.b); } };
    """
    cdef cppclass GmI64Map:
        int32_t get(int64_t k)
        void put(int64_t k, int32_t v)
        size_t size()
        void clear()
        void prefetch(int64_t k)
    cdef cppclass GmSeqSet:
        vector[int32_t] data
        vector[int64_t] ptr
        @staticmethod
        uint64_t hash(const int32_t* p, size_t n)
        int32_t find(const int32_t* p, size_t n, uint64_t h)
        int32_t insert(const int32_t* p, size_t n, uint64_t h)
        size_t size()
    cdef cppclass GmSeqMap:
        int32_t get(const vector[int32_t]& k)
        void put_new(const vector[int32_t]& k, int32_t v)
        int32_t get_h(const vector[int32_t]& k, uint64_t h)
        void put_new_h(const vector[int32_t]& k, uint64_t h, int32_t v)
    cdef cppclass GmPair:
        int64_t a, b
    cdef cppclass GmUnionScratch:
        vector[int32_t] ns, finals, olabs, elabs, opens, edges, oslot, eslot
        vector[vector[int32_t]] ows, ecs


cdef inline int64_t _pair_key(int64_t a, int64_t b) noexcept nogil:
    return (a << 32 | b) if a < b else (b << 32 | a)


cdef void _sorted_distinct(vector[int32_t]& ids, Py_ssize_t begin, vector[int32_t]& out) noexcept:
    """The distinct non-negative ids of ``ids[begin:]``, ascending, into ``out``."""
    out.clear()
    cdef Py_ssize_t i
    for i in range(begin, <Py_ssize_t>ids.size()):
        if ids[i] >= 0:
            out.push_back(ids[i])
    if out.size() > 1:
        cpp_sort(out.begin(), out.end())
        j = 0
        for i in range(1, <Py_ssize_t>out.size()):
            if out[i] != out[j]:
                j += 1
                out[j] = out[i]
        out.resize(j + 1)


cdef size_t _CHUNKED = 32  # a union of this many nodes or more goes through content-defined chunks


cdef inline bint _chunk_ends(int32_t n) noexcept:
    """Whether a chunk of a large union ends after node ``n`` (about one node in 16, chosen by a hash
    of the id alone, so two unions that share most nodes share most chunks)."""
    cdef uint64_t k = <uint32_t>n
    k *= 0x9e3779b97f4a7c15ULL
    return (k >> 60) == 0


cdef class Dag:
    """Hash-consed weighted label trees. A node is ``(final weight, ((open label, weight), ...),
    ((label, child), ...))`` with sorted labels and children interned before their parent, so
    equal denotations are the same id; weights are interned sorted disjoint half-open interval
    lists (``-1`` = the empty set). Unions are memoized. ``support[n]`` is the union of every
    weight in ``n``'s subtree: the tokens with some outcome through ``n``. During the walk an open
    label may stand for a set of labels (:meth:`label_set`), so two ids may then denote the same
    outcomes (a lost share, never a wrong one); the layout writes the sets out and interns the
    result, so the nodes it lays out are canonical again."""
    cdef long max_nodes, max_weights
    # weights
    cdef GmSeqSet ws  # interned weights: ws.data[ws.ptr[w]:ws.ptr[w+1]]
    cdef GmI64Map w_union
    # nodes
    cdef vector[int32_t] n_final, n_support, n_open_ptr, n_open, n_edge_ptr, n_edge
    cdef GmI64Map n0, n1, n1_set, u_pair, u_prefix
    cdef GmSeqMap n_index, u_many, wa_memo  # wa_memo: wunion_all by its distinct weights
    cdef vector[int32_t] key_scratch
    # scratch reused across calls (no allocation per union): wunion, wunion_all, prefix, and one
    # level per recursion depth of union / union_all
    cdef vector[int32_t] wu_out, wa_ws, wa_out, pf_none, pf_edge
    cdef vector[GmPair] wa_pairs
    cdef vector[GmUnionScratch*] u_pool, ua_pool
    cdef size_t u_depth, ua_depth
    # label sets: an open label ``-2 - i`` stands for every label of set ``i`` (real ones are >= 0)
    cdef GmSeqSet label_sets
    cdef GmI64Map expanded

    def __dealloc__(self):
        cdef size_t i
        for i in range(self.u_pool.size()):
            del self.u_pool[i]
        for i in range(self.ua_pool.size()):
            del self.ua_pool[i]

    def __cinit__(self, long max_nodes, long max_weights):
        self.max_nodes = max_nodes
        self.max_weights = max_weights
        self.n_open_ptr.push_back(0)
        self.n_edge_ptr.push_back(0)

    # ------------------------------------------------------------------ weights
    cdef int32_t weight_of(self, vector[int32_t]& ivs) except -2:
        """Intern the interval list ``ivs`` (flat lo, hi pairs; empty: -1)."""
        return self.weight_at(ivs.data(), ivs.size())

    cdef int32_t weight_at(self, const int32_t* p, size_t n) except -2:
        cdef int32_t w
        cdef uint64_t h
        if n == 0:
            return -1
        h = GmSeqSet.hash(p, n)
        w = self.ws.find(p, n, h)
        if w >= 0:
            return w
        if <long>self.ws.size() >= self.max_weights:
            raise GrammarTooComplex(
                f"terminal DWA (weights): more than {self.max_weights} distinct token sets "
                "(limit max_weights)")
        return self.ws.insert(p, n, h)

    def weight(self, ivs) -> int:
        """Intern a flat interval list given from Python (condition seeds)."""
        cdef vector[int32_t] v
        for x in ivs:
            v.push_back(<int32_t>x)
        return self.weight_of(v)

    cdef int32_t wunion(self, int32_t a, int32_t b) except -2:
        cdef int64_t key
        cdef int32_t w, t
        cdef int32_t lo_a, hi_a, lo_b, hi_b, i, j, na, nb
        cdef int32_t lo, hi
        cdef vector[int32_t]* outp = &self.wu_out
        if a < 0 or a == b:
            return b
        if b < 0:
            return a
        key = _pair_key(a, b)
        w = self.w_union.get(key)
        if w >= 0:
            return w
        outp.clear()
        lo_a = self.ws.ptr[a]; hi_a = self.ws.ptr[a + 1]
        lo_b = self.ws.ptr[b]; hi_b = self.ws.ptr[b + 1]
        if self.ws.data[lo_a] > self.ws.data[lo_b]:
            t = lo_a; lo_a = lo_b; lo_b = t
            t = hi_a; hi_a = hi_b; hi_b = t
        if self.ws.data[hi_a - 1] < self.ws.data[lo_b]:
            outp.reserve(hi_a - lo_a + hi_b - lo_b)
            for i in range(lo_a, hi_a):
                outp.push_back(self.ws.data[i])
            for i in range(lo_b, hi_b):
                outp.push_back(self.ws.data[i])
        elif self.ws.data[hi_a - 1] == self.ws.data[lo_b]:
            for i in range(lo_a, hi_a - 1):
                outp.push_back(self.ws.data[i])
            for i in range(lo_b + 1, hi_b):
                outp.push_back(self.ws.data[i])
        else:
            i = lo_a
            j = lo_b
            while i < hi_a or j < hi_b:
                if j >= hi_b or (i < hi_a and self.ws.data[i] <= self.ws.data[j]):
                    lo = self.ws.data[i]; hi = self.ws.data[i + 1]
                    i += 2
                else:
                    lo = self.ws.data[j]; hi = self.ws.data[j + 1]
                    j += 2
                if outp.size() and lo <= outp.back():
                    if hi > outp.back():
                        outp[0][outp.size() - 1] = hi
                else:
                    outp.push_back(lo)
                    outp.push_back(hi)
        w = self.weight_of(outp[0])
        self.w_union.put(key, w)
        return w

    cdef int32_t wunion_all(self, vector[int32_t]& ws0) except -2:
        """Union of many weights at once (one interval merge instead of a chain of unions)."""
        cdef vector[int32_t]* wsp = &self.wa_ws
        cdef vector[GmPair]* pairs = &self.wa_pairs
        cdef vector[int32_t]* out = &self.wa_out
        cdef GmPair p
        cdef size_t k
        cdef int32_t w, i
        _sorted_distinct(ws0, 0, wsp[0])
        if wsp.size() <= 2:
            if wsp.size() == 2:
                return self.wunion(wsp[0][0], wsp[0][1])
            if wsp.size() == 1:
                return wsp[0][0]
            return -1
        w = self.wa_memo.get(wsp[0])
        if w >= 0:
            return w
        pairs.clear()
        out.clear()
        for k in range(wsp.size()):
            w = wsp[0][k]
            i = self.ws.ptr[w]
            while i < self.ws.ptr[w + 1]:
                p.a = self.ws.data[i]
                p.b = self.ws.data[i + 1]
                pairs.push_back(p)
                i += 2
        cpp_sort(pairs.begin(), pairs.end())
        for k in range(pairs.size()):
            if out.size() and pairs[0][k].a <= out.back():
                if pairs[0][k].b > out.back():
                    out[0][out.size() - 1] = <int32_t>pairs[0][k].b
            else:
                out.push_back(<int32_t>pairs[0][k].a)
                out.push_back(<int32_t>pairs[0][k].b)
        w = self.weight_of(out[0])
        self.wa_memo.put_new(wsp[0], w)
        return w

    # ------------------------------------------------------------------ nodes
    cdef int32_t node(self, int32_t final, vector[int32_t]& opens, vector[int32_t]& edges) except -2:
        """Intern a node; ``opens`` / ``edges`` are flat sorted (label, weight) / (label, child)
        pairs. The two commonest shapes (one token set, closed or open in one terminal) have int
        keys of their own; every node of such a shape goes through them, so ids stay unique."""
        cdef int32_t n
        cdef int64_t ikey
        cdef uint64_t h
        cdef size_t i
        if final < 0 and opens.size() == 0 and edges.size() == 0:
            return -1
        if edges.size() == 0:
            if opens.size() == 0:
                n = self.n0.get(final)
                if n < 0:
                    n = self.new_node(final, opens, edges)
                    self.n0.put(final, n)
                return n
            if final < 0 and opens.size() == 2:  # (the maps take non-negative keys: a set label its own)
                if opens[0] >= 0:
                    ikey = (<int64_t>opens[0]) << 32 | opens[1]
                    n = self.n1.get(ikey)
                else:
                    ikey = (<int64_t>(-2 - opens[0])) << 32 | opens[1]
                    n = self.n1_set.get(ikey)
                if n < 0:
                    n = self.new_node(final, opens, edges)
                    if opens[0] >= 0:
                        self.n1.put(ikey, n)
                    else:
                        self.n1_set.put(ikey, n)
                return n
        self.key_scratch.clear()
        self.key_scratch.push_back(final)
        self.key_scratch.push_back(<int32_t>opens.size())
        for i in range(opens.size()):
            self.key_scratch.push_back(opens[i])
        for i in range(edges.size()):
            self.key_scratch.push_back(edges[i])
        h = GmSeqSet.hash(self.key_scratch.data(), self.key_scratch.size())
        n = self.n_index.get_h(self.key_scratch, h)
        if n < 0:
            n = self.new_node(final, opens, edges)  # (it does not touch key_scratch)
            self.n_index.put_new_h(self.key_scratch, h, n)
        return n

    cdef int32_t new_node(self, int32_t final, vector[int32_t]& opens, vector[int32_t]& edges) except -2:
        cdef int32_t sup = final, n
        cdef size_t i
        if <long>self.n_final.size() >= self.max_nodes:
            raise GrammarTooComplex(
                f"terminal DWA (nodes): more than {self.max_nodes} automaton nodes (limit max_nodes)")
        i = 0
        while i < opens.size():
            sup = self.wunion(sup, opens[i + 1])
            i += 2
        i = 0
        while i < edges.size():
            sup = self.wunion(sup, self.n_support[edges[i + 1]])
            i += 2
        n = <int32_t>self.n_final.size()
        self.n_final.push_back(final)
        self.n_support.push_back(sup)
        for i in range(opens.size()):
            self.n_open.push_back(opens[i])
        self.n_open_ptr.push_back(<int32_t>self.n_open.size())
        for i in range(edges.size()):
            self.n_edge.push_back(edges[i])
        self.n_edge_ptr.push_back(<int32_t>self.n_edge.size())
        return n

    cdef int32_t prefix(self, int32_t lab, int32_t n) except -2:
        """The node whose only outcome is ``lab`` followed by ``n``'s (``lab < 0``: ``n``)."""
        cdef int64_t key
        cdef int32_t r
        if lab < 0 or n < 0:
            return n
        key = (<int64_t>lab) << 32 | n
        r = self.u_prefix.get(key)
        if r >= 0:
            return r
        self.pf_edge.clear()
        self.pf_edge.push_back(lab)
        self.pf_edge.push_back(n)
        r = self.node(-1, self.pf_none, self.pf_edge)
        self.u_prefix.put(key, r)
        return r

    cdef int32_t union(self, int32_t a, int32_t b) except -2:
        cdef int64_t key
        cdef int32_t res, final, t
        cdef int32_t oa0, oa1, ob0, ob1, ea0, ea1, eb0, eb1, i, j
        cdef bint same
        cdef GmUnionScratch* S
        if a < 0 or a == b:
            return b
        if b < 0:
            return a
        key = _pair_key(a, b)
        res = self.u_pair.get(key)
        if res >= 0:
            return res
        if self.u_depth == self.u_pool.size():
            self.u_pool.push_back(new GmUnionScratch())
        S = self.u_pool[self.u_depth]
        self.u_depth += 1
        res = self.union_at(a, b, S)
        self.u_depth -= 1
        self.u_pair.put(key, res)
        return res

    cdef int32_t union_at(self, int32_t a, int32_t b, GmUnionScratch* S) except -2:
        cdef int32_t res, final, t
        cdef int32_t oa0, oa1, ob0, ob1, ea0, ea1, eb0, eb1, i, j
        cdef bint same
        cdef vector[int32_t]* opens = &S.opens
        cdef vector[int32_t]* edges = &S.edges
        opens.clear()
        edges.clear()
        final = self.wunion(self.n_final[a], self.n_final[b])
        oa0 = self.n_open_ptr[a]; oa1 = self.n_open_ptr[a + 1]
        ob0 = self.n_open_ptr[b]; ob1 = self.n_open_ptr[b + 1]
        ea0 = self.n_edge_ptr[a]; ea1 = self.n_edge_ptr[a + 1]
        eb0 = self.n_edge_ptr[b]; eb1 = self.n_edge_ptr[b + 1]
        same = ea0 == ea1 and eb0 == eb1 and oa1 - oa0 == ob1 - ob0
        if same:
            i = 0
            while i < oa1 - oa0:
                if self.n_open[oa0 + i] != self.n_open[ob0 + i]:
                    same = False
                    break
                i += 2
        if same:
            i = 0
            while i < oa1 - oa0:
                opens.push_back(self.n_open[oa0 + i])
                opens.push_back(self.wunion(self.n_open[oa0 + i + 1], self.n_open[ob0 + i + 1]))
                i += 2
            return self.node(final, opens[0], edges[0])
        # opens / edges: a's in order, b's merged in (in b's order, as a dict update does), sorted
        self.merge_pairs(opens, False, oa0, oa1, ob0, ob1)
        self.merge_pairs(edges, True, ea0, ea1, eb0, eb1)
        return self.node(final, opens[0], edges[0])

    cdef int merge_pairs(self, vector[int32_t]* out, bint children, int32_t a0, int32_t a1,
                         int32_t b0, int32_t b1) except -1:
        """``out`` = the flat (label, value) pairs ``[a0, a1)`` with each pair of ``[b0, b1)``
        merged in — the values of a label in both united — sorted by label: of ``n_edge`` (nodes)
        when ``children``, else of ``n_open`` (weights). Indices, not pointers: a union may grow
        the node arrays."""
        cdef vector[int32_t]* src = &self.n_open
        cdef int32_t i, j, t, v
        if children:
            src = &self.n_edge
        out.clear()
        for i in range(a0, a1):
            out.push_back(src[0][i])
        j = b0
        while j < b1:
            t = src[0][j]
            v = src[0][j + 1]
            i = 0
            while i < <int32_t>out.size() and out[0][i] != t:
                i += 2
            if i < <int32_t>out.size():
                if children:
                    v = self.union(out[0][i + 1], v)
                else:
                    v = self.wunion(out[0][i + 1], v)
                out[0][i + 1] = v
            else:
                out.push_back(t)
                out.push_back(v)
            j += 2
        _sort_pairs(out[0])
        return 0

    cdef int32_t union_all(self, vector[int32_t]& ids, Py_ssize_t begin) except -2:
        """Union of the nodes ``ids[begin:]`` at once: one new node, not one per pairwise step
        (the walk unions all children of a trie node; pairwise unions would intern every partial
        result). Labels are grouped in order of first appearance, as the results are interned."""
        cdef GmUnionScratch* S
        cdef int32_t res
        if self.ua_depth == self.ua_pool.size():
            self.ua_pool.push_back(new GmUnionScratch())
        S = self.ua_pool[self.ua_depth]
        self.ua_depth += 1
        res = self.union_all_at(ids, begin, S)
        self.ua_depth -= 1
        return res

    cdef int32_t union_all_at(self, vector[int32_t]& ids, Py_ssize_t begin, GmUnionScratch* S) except -2:
        cdef vector[int32_t]* ns = &S.ns
        cdef int32_t res, n, final
        cdef size_t m, n_og = 0, n_eg = 0
        _sorted_distinct(ids, begin, ns[0])
        if ns.size() <= 2:
            if ns.size() == 2:
                return self.union(ns[0][0], ns[0][1])
            if ns.size() == 1:
                return ns[0][0]
            return -1
        res = self.u_many.get(ns[0])
        if res >= 0:
            return res
        if ns.size() >= _CHUNKED:
            return self.union_chunked(ns[0])
        S.finals.clear()
        S.olabs.clear()
        S.elabs.clear()
        for m in range(ns.size()):
            n = ns[0][m]
            if self.n_final[n] >= 0:
                S.finals.push_back(self.n_final[n])
            _group_by_label(self.n_open, self.n_open_ptr[n], self.n_open_ptr[n + 1], S.olabs, S.ows, S.oslot)
            _group_by_label(self.n_edge, self.n_edge_ptr[n], self.n_edge_ptr[n + 1], S.elabs, S.ecs, S.eslot)
        final = self.wunion_all(S.finals)
        S.opens.clear()
        for m in range(S.olabs.size()):
            S.opens.push_back(S.olabs[m])
            S.opens.push_back(self.wunion_all(S.ows[m]))
        _sort_pairs(S.opens)
        S.edges.clear()
        for m in range(S.elabs.size()):
            S.edges.push_back(S.elabs[m])
            S.edges.push_back(self.union_all(S.ecs[m], 0))
        _sort_pairs(S.edges)
        res = self.node(final, S.opens, S.edges)
        self.u_many.put_new(ns[0], res)
        return res

    cdef int32_t union_chunked(self, vector[int32_t]& ids) except -2:
        """The union of many nodes (distinct, ascending) as the union of its chunks' unions, each
        memoized. The boundary lexer states of one key prefix trie, say, union the results of ~250
        first bytes each, nearly all alike from state to state: whole, each union grouped and
        merged every child again per state; in chunks, a state re-merges only the chunks that hold
        its own children. Nodes are interned by content, so the result is the same node."""
        cdef vector[int32_t] all_ids = ids  # (``ids`` is scratch a nested union reuses)
        cdef vector[int32_t] chunk, parts
        cdef size_t m
        cdef int32_t r
        for m in range(all_ids.size()):
            chunk.push_back(all_ids[m])
            if (chunk.size() >= 2 and _chunk_ends(all_ids[m])) or chunk.size() == _CHUNKED // 2 \
                    or m + 1 == all_ids.size():  # (a chunk is never the whole union)
                r = self.union_all(chunk, 0)
                if r >= 0:
                    parts.push_back(r)
                chunk.clear()
        r = self.union_all(parts, 0)
        self.u_many.put_new(all_ids, r)
        return r

    # ------------------------------------------------------------------ label sets
    # A token that ends inside a JSON key of fifteen objects with pattern properties is open in
    # every one of their ~23 key terminals, with one and the same token set. Written out, each
    # such outcome is a node of 23 (label, weight) pairs: hashed and compared in full when it is
    # interned, and merged label by label in every union above it — most of such a schema's
    # build. During the walk it is one pair instead, whose label stands for the whole set
    # (:meth:`label_set`); unions merge it like any label. The layout writes the sets out
    # (:meth:`expand`), for the nodes it keeps only, into the nodes the labels denote.
    cdef int32_t label_set(self, const int32_t* labels, size_t n) except 0:
        """The open label standing for the sorted distinct ``labels``."""
        cdef uint64_t h = GmSeqSet.hash(labels, n)
        cdef int32_t i = self.label_sets.find(labels, n, h)
        if i < 0:
            i = self.label_sets.insert(labels, n, h)
        return -2 - i

    cdef int32_t expand(self, int32_t n) except -2:
        """The node ``n`` denotes with every set label written out (``n`` itself when none is
        reachable from it): a set label's weight joins each of its labels' (united with the
        weight a label has of its own)."""
        cdef int32_t r, lab, c, c2, w, s0, s1, j
        cdef int32_t k, k0, k1
        cdef bint changed = False
        cdef vector[int32_t] opens, edges
        cdef vector[int64_t] pairs
        cdef size_t i
        if n < 0:
            return n
        r = self.expanded.get(n)
        if r >= 0:
            return r
        k0 = self.n_edge_ptr[n]
        k1 = self.n_edge_ptr[n + 1]
        for k in range(k0, k1, 2):
            c = self.n_edge[k + 1]
            c2 = self.expand(c)
            changed = changed or c2 != c
            edges.push_back(self.n_edge[k])
            edges.push_back(c2)
        k0 = self.n_open_ptr[n]
        k1 = self.n_open_ptr[n + 1]
        for k in range(k0, k1, 2):
            lab = self.n_open[k]
            w = self.n_open[k + 1]
            if lab >= 0:
                pairs.push_back((<int64_t>lab) << 32 | <uint32_t>w)
                continue
            changed = True
            s0 = <int32_t>self.label_sets.ptr[-2 - lab]
            s1 = <int32_t>self.label_sets.ptr[-1 - lab]
            for j in range(s0, s1):
                pairs.push_back((<int64_t>self.label_sets.data[j]) << 32 | <uint32_t>w)
        if not changed:
            self.expanded.put(n, n)
            return n
        cpp_sort(pairs.begin(), pairs.end())
        i = 0
        while i < pairs.size():
            lab = <int32_t>(pairs[i] >> 32)
            w = <int32_t>(pairs[i] & 0xFFFFFFFF)
            i += 1
            while i < pairs.size() and <int32_t>(pairs[i] >> 32) == lab:
                w = self.wunion(w, <int32_t>(pairs[i] & 0xFFFFFFFF))
                i += 1
            opens.push_back(lab)
            opens.push_back(w)
        r = self.node(self.n_final[n], opens, edges)
        self.expanded.put(n, r)
        return r

    # ------------------------------------------------------------------ layout
    def n_nodes(self) -> int:
        return self.n_final.size()

    def layout(self, roots, seeds, long n_tokens):
        """The flat arrays of the nodes reachable from ``roots`` (see ``terminal_dwa``): nodes
        renumbered parents first (old ids descending: a child is interned before its parent, so
        every edge goes to a higher new id), weights renumbered in order of first use, roots of
        boundary states where every token dies (``-1``) sharing one empty node. ``seeds``: the
        condition seeds as ``{cond: weight}``."""
        cdef Py_ssize_t n_all = self.n_final.size()
        cdef vector[int32_t] stack, new_id, wmap, order
        cdef vector[char] reach
        cdef int32_t n, c, k, d, w, empty = -1
        cdef Py_ssize_t i
        roots = [self.expand(<int32_t>r) for r in roots]
        n_all = self.n_final.size()
        reach.assign(n_all + 1, 0)
        for r in roots:
            if r >= 0:
                stack.push_back(<int32_t>r)
            else:
                empty = <int32_t>n_all
        while stack.size():
            n = stack.back()
            stack.pop_back()
            if n == n_all or reach[n]:
                continue
            reach[n] = 1
            k = self.n_edge_ptr[n]
            while k < self.n_edge_ptr[n + 1]:
                c = self.n_edge[k + 1]
                if not reach[c]:
                    stack.push_back(c)
                k += 2
        if empty >= 0:
            reach[n_all] = 1
        new_id.assign(n_all + 1, -1)
        for i in range(n_all, -1, -1):
            if reach[i]:
                new_id[i] = <int32_t>order.size()
                order.push_back(<int32_t>i)
        cdef Py_ssize_t n_nodes = order.size()
        wmap.assign(self.ws.size(), -1)
        cdef vector[int32_t] wlist
        cdef vector[int32_t] edge_ptr, edge_label, edge_target, edge_weight
        cdef vector[int32_t] open_ptr, open_label, open_weight, final_weight
        edge_ptr.push_back(0)
        open_ptr.push_back(0)
        for i in range(n_nodes):
            d = order[i]
            if d == n_all:  # the empty node
                final_weight.push_back(-1)
                open_ptr.push_back(<int32_t>open_label.size())
                edge_ptr.push_back(<int32_t>edge_label.size())
                continue
            final_weight.push_back(_renumber(wmap, wlist, self.n_final[d]))
            k = self.n_open_ptr[d]
            while k < self.n_open_ptr[d + 1]:
                open_label.push_back(self.n_open[k])
                open_weight.push_back(_renumber(wmap, wlist, self.n_open[k + 1]))
                k += 2
            open_ptr.push_back(<int32_t>open_label.size())
            k = self.n_edge_ptr[d]
            while k < self.n_edge_ptr[d + 1]:
                c = self.n_edge[k + 1]
                edge_label.push_back(self.n_edge[k])
                edge_weight.push_back(_renumber(wmap, wlist, self.n_support[c]))
                edge_target.push_back(new_id[c])
                k += 2
            edge_ptr.push_back(<int32_t>edge_label.size())
        conds = sorted(seeds)
        fail = [_renumber(wmap, wlist, <int32_t>seeds[c]) for c in conds]
        cdef vector[int32_t] weight_ptr, bounds
        weight_ptr.push_back(0)
        for i in range(<Py_ssize_t>wlist.size()):
            w = wlist[i]
            for k in range(self.ws.ptr[w], self.ws.ptr[w + 1]):
                bounds.push_back(self.ws.data[k])
            weight_ptr.push_back(<int32_t>bounds.size())
        root_ids = [new_id[r] if r >= 0 else new_id[n_all] for r in roots]
        return {
            "roots": np.asarray(root_ids, dtype=np.int32),
            "edge_ptr": _arr(edge_ptr), "edge_label": _arr(edge_label),
            "edge_target": _arr(edge_target), "edge_weight": _arr(edge_weight),
            "final_weight": _arr(final_weight),
            "open_ptr": _arr(open_ptr), "open_label": _arr(open_label), "open_weight": _arr(open_weight),
            "weight_ptr": _arr(weight_ptr), "weight_bounds": _arr(bounds),
            "cond_ids": np.asarray(conds, dtype=np.int32), "fail_seed": np.asarray(fail, dtype=np.int32),
        }


cdef void _group_by_label(vector[int32_t]& pairs, int32_t k0, int32_t k1, vector[int32_t]& labels,
                          vector[vector[int32_t]]& groups, vector[int32_t]& slot) noexcept:
    """Append the values of the flat (label, value) pairs ``pairs[k0:k1]`` to their label's group,
    labels in order of first appearance (a new label's group is cleared before use: the groups
    are reused from call to call). ``slot[label]`` remembers a label's group — a hint, trusted
    only when that group holds the label, so it is never cleared (a many-way union of a large
    grammar's nodes has hundreds of labels: no linear search per pair)."""
    cdef int32_t k = k0, g, lab
    while k < k1:
        lab = pairs[k]
        if lab < 0:  # (a set label, ``Dag.label_set``: few per union, searched, not indexed)
            g = 0
            while <size_t>g < labels.size() and labels[g] != lab:
                g += 1
        else:
            if <size_t>lab >= slot.size():
                slot.resize(2 * <size_t>lab + 64, -1)
            g = slot[lab]
            if g < 0 or <size_t>g >= labels.size() or labels[g] != lab:
                g = <int32_t>labels.size()
        if <size_t>g == labels.size():
            labels.push_back(lab)
            if lab >= 0:
                slot[lab] = g
            if groups.size() <= <size_t>g:
                groups.resize(g + 1)
            groups[g].clear()
        groups[g].push_back(pairs[k + 1])
        k += 2


cdef void _sort_pairs(vector[int32_t]& flat) noexcept:
    """Sort flat (label, value) pairs by label (labels are distinct): insertion for the usual
    few, one packed sort for the hundreds a many-way union of a large grammar's nodes has."""
    cdef size_t i, j
    cdef int32_t a, b
    cdef vector[int64_t] packed
    if flat.size() > 64:
        packed.reserve(flat.size() // 2)
        i = 0
        while i < flat.size():
            packed.push_back((<int64_t>flat[i]) << 32 | <uint32_t>flat[i + 1])
            i += 2
        cpp_sort(packed.begin(), packed.end())
        for j in range(packed.size()):
            flat[2 * j] = <int32_t>(packed[j] >> 32)
            flat[2 * j + 1] = <int32_t>(packed[j] & 0xFFFFFFFF)
        return
    i = 2
    while i < flat.size():
        a = flat[i]
        b = flat[i + 1]
        j = i
        while j >= 2 and flat[j - 2] > a:
            flat[j] = flat[j - 2]
            flat[j + 1] = flat[j - 1]
            j -= 2
        flat[j] = a
        flat[j + 1] = b
        i += 2


cdef inline int32_t _renumber(vector[int32_t]& wmap, vector[int32_t]& wlist, int32_t w) noexcept:
    if w < 0:
        return -1
    if wmap[w] < 0:
        wmap[w] = <int32_t>wlist.size()
        wlist.push_back(w)
    return wmap[w]


cdef object _arr(vector[int32_t]& v):
    out = np.empty(v.size(), dtype=np.int32)
    cdef int32_t[::1] view = out
    if v.size():
        memcpy(&view[0], v.data(), v.size() * sizeof(int32_t))
    return out


# ----------------------------------------------------------------------------------------------


cdef size_t _LINEAR_KEYS = 16  # distinct (label, branch) keys of one node searched linearly
cdef int32_t _FLAT_SLOTS = 4  # the most slots of a flat result (each holds its own copy of its weight)


cdef struct Item:
    int32_t child   # trie node, or -1: leaves collapsed into one item (bounds below)
    int32_t lab     # LR terminal, or -1: none
    int32_t cid     # the branch after the item's byte
    int32_t n_pairs # (trie node, branch) pairs the item stands for (walk budget)
    int32_t b_off, b_len


cdef struct Frame:
    int64_t key
    int32_t items_begin, items_end, idx, subs_begin, bounds_begin


cdef class Walker:
    """The memoized trie walk of one Terminal DWA build: ``walk_from(lex, conds)`` is the DAG
    node (-1: nothing) of the outcomes of every token scanned from the branch ``(lex, conds)``
    (``lex`` a lexer state or -2 at a lexeme boundary, ``conds`` pending conditions).

    Two sources of branch semantics, the same outcomes:

    * **native** (a dense lexer, ``lexer.dfa`` has the arrays): branches are interned here and
      stepped on the DFA arrays — transitions, events, condition steps, futures bitsets and the
      lexer-state classes' representatives (``classes``) — with no Python call per branch;
    * **builder** (any lexer): branches are the builder's (``terminal_dwa._Builder``: ``_cfgs``,
      ``_step``, ``neutral_bytes``, ``canonical``, ``open_labels``), called on each cache miss.
      This is the description the native model is tested against.

    Caches: per branch and byte the step result (an interned list of ``(label, branch')``), per
    branch (and trie height) the looping bytes, per branch and height the class representative,
    per branch its end labels. The memo, keyed by ``branch * n_trie_nodes + node``, is shared by
    all roots of the build. Lexer states and conditions that some token ends in are recorded
    (``end_states`` / ``end_conds``): they become boundary roots and condition seeds."""
    cdef object b
    cdef public Dag dag
    cdef const int32_t[::1] child_ptr, child_node, node_internal, sub_lo, sub_hi, heights
    cdef const unsigned char[::1] child_byte
    cdef const uint64_t[:, ::1] sub_bytes
    cdef bint classes, native
    cdef int64_t nn, max_height
    cdef public long steps
    cdef long max_steps
    # step results: rows[cid * 256 + byte] -> result id r = pairs results.data[ptr[r]:ptr[r+1]]
    cdef vector[int32_t] rows
    cdef GmSeqSet results
    cdef GmI64Map loop_index, canon, memo, leaf_slot
    cdef vector[uint64_t] loop_words  # 4 words per loop_index entry
    # end labels per branch: end_kind[cid] -3 unknown, -2 boundary, 1 closed among them, else 0
    cdef vector[int32_t] end_kind, end_ptr, end_len, end_labels, end_set  # end_set: 0 not yet
    cdef vector[char] end_state_seen, end_cond_seen
    cdef vector[int32_t] end_state_list, end_cond_list
    # walk stacks
    cdef vector[Item] items
    cdef vector[Frame] frames
    cdef vector[int32_t] subs, bounds, scratch, out_pairs, kept, after, own_opens, no_edges
    cdef vector[int64_t] leaf_keys
    # edge-less results, not interned (see ``flat``): records in ``fl``, merge scratch
    cdef vector[int32_t] fl, fl_labels, fl_out, fl_lists
    cdef vector[GmPair] fl_pairs
    cdef int64_t max_flat
    cdef vector[vector[int32_t]] leaf_runs
    # byte groups: bytes every branch steps alike (group_ptr/group_bytes, in order of smallest byte)
    cdef vector[int32_t] group_of, group_ptr, group_bytes
    # native branch model (dense lexer arrays)
    cdef GmSeqSet branches  # branch id -> (lex, conds...)
    cdef const int32_t[:, ::1] trans, cond_trans, reps
    cdef const int64_t[::1] ev_ptr
    cdef const int32_t[::1] ev_term, ev_cond
    cdef const uint64_t[:, ::1] futures
    cdef vector[char] satisfiable, ignored_t, alive
    cdef vector[int32_t] label_of
    cdef vector[uint64_t] relevant
    cdef int32_t initial, stable_from

    def __init__(self, b, Dag dag, trie, subtree_bytes, heights, long max_height, groups, *,
                 dense=None, classes=None):
        self.b = b
        self.dag = dag
        self.child_ptr = np.ascontiguousarray(trie.child_ptr, dtype=np.int32)
        self.child_node = np.ascontiguousarray(trie.child_node, dtype=np.int32)
        self.child_byte = np.ascontiguousarray(trie.child_byte, dtype=np.uint8)
        self.node_internal = np.ascontiguousarray(trie.node_internal, dtype=np.int32)
        self.sub_lo = np.ascontiguousarray(trie.node_subtree_lo, dtype=np.int32)
        self.sub_hi = np.ascontiguousarray(trie.node_subtree_hi, dtype=np.int32)
        self.sub_bytes = subtree_bytes
        self.classes = heights is not None
        self.heights = np.ascontiguousarray(heights if heights is not None else [0], dtype=np.int32)
        self.nn = self.child_ptr.shape[0] - 1
        self.max_height = max_height
        self.steps = 0
        self.max_steps = b.max_walk_steps
        self.max_flat = 0x7ffffff0  # int32 offsets (the compile's memory budget stops it long before)
        self.group_of.assign(256, -1)
        self.group_ptr.push_back(0)
        for g in groups:
            for x in g:
                self.group_of[<int>x] = <int32_t>(self.group_ptr.size() - 1)
                self.group_bytes.push_back(<int32_t>x)
            self.group_ptr.push_back(<int32_t>self.group_bytes.size())
        self.native = dense is not None
        if self.native:
            self._init_native(dense, classes)

    def _init_native(self, lexer, classes):
        """Read the dense lexer's arrays (and the classes' representatives per level)."""
        dfa = lexer.dfa
        self.trans = np.ascontiguousarray(dfa.trans, dtype=np.int32)
        self.cond_trans = np.ascontiguousarray(dfa.cond_trans, dtype=np.int32).reshape(-1, 256)
        self.ev_ptr = np.ascontiguousarray(dfa.ev_ptr, dtype=np.int64)
        self.ev_term = np.ascontiguousarray(dfa.ev_term, dtype=np.int32)
        self.ev_cond = np.ascontiguousarray(dfa.ev_cond, dtype=np.int32)
        self.futures = np.ascontiguousarray(dfa.futures, dtype=np.uint64).reshape(dfa.trans.shape[0], -1)
        self.initial = lexer.initial
        n_conds = int(self.cond_trans.shape[0])
        cdef char sat  # (a conditional expression handed to push_back miscompiles in Cython 3.3)
        for c in range(n_conds):
            sat = 0
            if lexer.cond_satisfiable(c):
                sat = 1
            self.satisfiable.push_back(sat)
        n_terms = len(lexer.terminal_names)
        n_words = int(self.futures.shape[1])
        self.label_of.assign(n_terms, -1)
        self.ignored_t.assign(n_terms, 0)
        self.relevant.assign(max(n_words, 1), 0)
        for t, lab in self.b.label_of.items():
            self.label_of[<int>t] = <int32_t>lab
            self.relevant[<int>t >> 6] |= (<uint64_t>1) << (<int>t & 63)
        for t in self.b.ignored:
            self.ignored_t[<int>t] = 1
            self.relevant[<int>t >> 6] |= (<uint64_t>1) << (<int>t & 63)
        self.alive.assign(self.trans.shape[0], -1)
        if classes is not None:
            self.reps = classes.levels_array()
            self.stable_from = classes.stable_from
        else:
            self.reps = np.zeros((1, 1), dtype=np.int32)
            self.stable_from = 0

    def memo_size(self) -> int:
        return self.memo.size()

    def flat_entries(self) -> int:
        """Entries of the flat results kept so far (int32s; freed by :meth:`clear_memo`)."""
        return self.fl.size()

    def clear_memo(self) -> None:
        self.memo.clear()
        self.fl.clear()
        self.fl.shrink_to_fit()

    def end_states(self, Py_ssize_t start=0) -> list:
        """Lexer states some token ended in (mid-lexeme), in order of first sight, from the
        ``start``-th on (a caller polling after each root asks only for the new ones)."""
        return [self.end_state_list[i] for i in range(start, self.end_state_list.size())]

    def end_conds(self) -> list:
        """Conditions still pending at the end of some token, in order of first sight."""
        return [self.end_cond_list[i] for i in range(self.end_cond_list.size())]

    def fail_seed(self, int32_t cond):
        """(Flat intervals of the tokens whose bytes, stepped from pending condition ``cond``,
        reach FALSE; the conditions it is still pending as at the end of some token), on the dense
        lexer's condition table: a depth-first walk of the trie in token order, a FALSE cutting
        off the node's whole subtree, a TRUE the walk below it."""
        cdef vector[int32_t] out, pending, stack  # stack: (node, cond) pairs
        cdef vector[char] seen
        cdef int32_t node, c, c2, lo, hi, j
        if not self.native:
            raise TypeError("fail_seed needs the native branch model")
        j = self.child_ptr[1] - 1
        while j >= self.child_ptr[0]:
            stack.push_back(j)  # a trie edge: the child and its byte
            stack.push_back(cond)
            j -= 1
        seen.assign(self.cond_trans.shape[0], 0)
        while stack.size():
            c = stack.back()
            stack.pop_back()
            j = stack.back()
            stack.pop_back()
            node = self.child_node[j]
            c2 = self.cond_trans[c, self.child_byte[j]]
            if c2 == 1:  # FALSE
                lo = self.sub_lo[node]
                hi = self.sub_hi[node]
                if out.size() and out.back() == lo:
                    out[out.size() - 1] = hi
                else:
                    out.push_back(lo)
                    out.push_back(hi)
                continue
            if c2 == 0:  # TRUE
                continue
            if self.node_internal[node] >= 0 and not seen[c2]:
                seen[c2] = 1
                pending.push_back(c2)
            j = self.child_ptr[node + 1] - 1
            while j >= self.child_ptr[node]:
                stack.push_back(j)
                stack.push_back(c2)
                j -= 1
        return ([out[i] for i in range(out.size())], [pending[i] for i in range(pending.size())])

    # ------------------------------------------------------------------ native branch model
    cdef int32_t branch_id(self, int32_t lex, vector[int32_t]& conds) except -2:
        """Intern the branch ``(lex, conds)`` (``conds`` sorted, distinct)."""
        cdef uint64_t h
        cdef int32_t cid
        self.scratch.clear()
        self.scratch.push_back(lex)
        self.scratch.insert(self.scratch.end(), conds.begin(), conds.end())
        h = GmSeqSet.hash(self.scratch.data(), self.scratch.size())
        cid = self.branches.find(self.scratch.data(), self.scratch.size(), h)
        if cid < 0:
            cid = self.branches.insert(self.scratch.data(), self.scratch.size(), h)
        return cid

    cdef bint lane_alive(self, int32_t q) noexcept:
        """Whether a lane in lexer state ``q`` can still report an ignored or labelled terminal."""
        cdef size_t w
        cdef char a = self.alive[q]
        if a < 0:
            a = 0
            for w in range(self.relevant.size()):
                if self.futures[q, w] & self.relevant[w]:
                    a = 1
                    break
            self.alive[q] = a
        return a == 1

    cdef int32_t native_step(self, int32_t cid, int byte) except -2:
        """The recognizer's step of branch ``cid`` over ``byte`` (``terminal_dwa._Builder._step``):
        pending conditions stepped (FALSE kills the branch, TRUE is dropped), the lexer stepped
        from the branch's state (``initial`` at a boundary), the lane kept while it can still
        match, and each satisfiable event restarting at a boundary with its condition added —
        unlabelled when the terminal is ignored, labelled when it is used (both when both)."""
        cdef int64_t p0 = self.branches.ptr[cid], p1 = self.branches.ptr[cid + 1]
        cdef int32_t lex = self.branches.data[p0], q, q2, c2, term, cond, lab, bid, base_id = -1
        cdef int64_t k, e0, e1
        cdef size_t i, j
        cdef bint dead = False
        self.kept.clear()
        self.out_pairs.clear()
        for k in range(p0 + 1, p1):
            c2 = self.cond_trans[self.branches.data[k], byte]
            if c2 == 1:  # FALSE
                dead = True
                break
            if c2 != 0:
                self.kept.push_back(c2)
        if not dead:
            _sort_unique(self.kept)
            q = self.initial if lex == -2 else lex
            q2 = self.trans[q, byte]
            if q2 >= 0 and self.lane_alive(q2):
                _push_pair(self.out_pairs, -1, self.branch_id(q2, self.kept))
            e0 = self.ev_ptr[<int64_t>q * 256 + byte]
            e1 = self.ev_ptr[<int64_t>q * 256 + byte + 1]
            for k in range(e0, e1):
                term = self.ev_term[k]
                cond = self.ev_cond[k]
                if cond == 1 or (cond != 0 and not self.satisfiable[cond]):
                    continue
                if cond == 0:
                    if base_id < 0:
                        base_id = self.branch_id(-2, self.kept)
                    bid = base_id
                else:
                    self.after.assign(self.kept.begin(), self.kept.end())
                    self.after.push_back(cond)
                    _sort_unique(self.after)
                    bid = self.branch_id(-2, self.after)
                if self.ignored_t[term]:
                    _push_pair(self.out_pairs, -1, bid)
                lab = self.label_of[term]
                if lab >= 0:
                    _push_pair(self.out_pairs, lab, bid)
        return self.intern_result(self.out_pairs)

    cdef int32_t intern_result(self, vector[int32_t]& pairs) except -2:
        cdef uint64_t h = GmSeqSet.hash(pairs.data(), pairs.size())
        cdef int32_t r = self.results.find(pairs.data(), pairs.size(), h)
        if r < 0:
            r = self.results.insert(pairs.data(), pairs.size(), h)
        return r

    cdef inline bint result_empty(self, int32_t r) noexcept:
        return self.results.ptr[r + 1] == self.results.ptr[r]

    cdef int32_t native_canonical(self, int32_t cid, int32_t h) except -2:
        """The branch keying ``cid``'s walk below a node of height ``h``: the lexer state replaced
        by its class representative, the pending conditions kept."""
        cdef int64_t p0 = self.branches.ptr[cid], p1 = self.branches.ptr[cid + 1]
        cdef int32_t lex = self.branches.data[p0], r
        cdef vector[int32_t] conds
        if lex < 0:
            return cid
        r = self.reps[min(h, self.stable_from), lex]
        if r == lex:
            return cid
        conds.assign(&self.branches.data[0] + p0 + 1, &self.branches.data[0] + p1)
        return self.branch_id(r, conds)

    cdef int32_t native_loop(self, int32_t cid, int32_t node, int64_t key) except -2:
        """``terminal_dwa._Builder.neutral_bytes`` on the native model: the largest set of bytes
        whose (class-normalized) step result keeps ``cid`` in place, provided every other branch
        of that result dies on each of them; stored as 4 words at the returned index."""
        cdef int32_t h = -1, lower = 0, home, r, g, lab, c2, best = -1
        cdef size_t gi, m, k, bi
        cdef vector[int32_t] raw_ids        # distinct raw results, in order of first appearance
        cdef vector[vector[int32_t]] raw_bytes
        cdef vector[vector[int32_t]] norms  # distinct normalized results keeping cid home
        cdef vector[vector[int32_t]] norm_bytes
        cdef vector[int32_t] norm
        cdef uint64_t words[4]
        cdef bint ok, has_home
        cdef int32_t li
        if self.classes:
            h = self.heights[node]
            lower = h - 1 if h > 0 else 0
            home = self.canonical_h(cid, lower)
        else:
            home = cid
        for gi in range(self.group_ptr.size() - 1):
            r = self.step(cid, self.group_bytes[self.group_ptr[gi]])
            for m in range(raw_ids.size()):
                if raw_ids[m] == r:
                    break
            else:
                m = raw_ids.size()
                raw_ids.push_back(r)
                raw_bytes.push_back(vector[int32_t]())
            for k in range(self.group_ptr[gi], self.group_ptr[gi + 1]):
                raw_bytes[m].push_back(self.group_bytes[k])
        for m in range(raw_ids.size()):
            r = raw_ids[m]
            norm.clear()
            has_home = False
            k = self.results.ptr[r]
            while k < <size_t>self.results.ptr[r + 1]:
                lab = self.results.data[k]
                c2 = self.results.data[k + 1]
                if self.classes:
                    c2 = self.canonical_h(c2, lower)
                norm.push_back(lab)
                norm.push_back(c2)
                if lab == -1 and c2 == home:
                    has_home = True
                k += 2
            if not has_home:
                continue
            for bi in range(norms.size()):
                if norms[bi] == norm:
                    break
            else:
                bi = norms.size()
                norms.push_back(norm)
                norm_bytes.push_back(vector[int32_t]())
            norm_bytes[bi].insert(norm_bytes[bi].end(), raw_bytes[m].begin(), raw_bytes[m].end())
        words[0] = words[1] = words[2] = words[3] = 0
        for bi in range(norms.size()):
            if best < 0 or norm_bytes[bi].size() > norm_bytes[best].size():
                best = <int32_t>bi
        if best >= 0:
            ok = True
            k = 0
            while ok and k < norms[best].size():
                lab = norms[best][k]
                c2 = norms[best][k + 1]
                k += 2
                if lab == -1 and c2 == home:
                    continue
                self.ensure_cid(c2)
                for bi in range(norm_bytes[best].size()):
                    if not self.result_empty(self.step(c2, norm_bytes[best][bi])):
                        ok = False
                        break
            if ok:
                for bi in range(norm_bytes[best].size()):
                    g = norm_bytes[best][bi]
                    words[g >> 6] |= (<uint64_t>1) << (g & 63)
        li = <int32_t>(self.loop_words.size() // 4)
        for k in range(4):
            self.loop_words.push_back(words[k])
        self.loop_index.put(key, li)
        return li

    # ------------------------------------------------------------------ cache fills
    cdef int ensure_cid(self, int32_t cid) except -1:
        cdef size_t need = (<size_t>cid + 1) * 256
        cdef size_t n
        if self.rows.size() < need:
            n = self.rows.size() * 2
            self.rows.resize(need if need > n else n, -1)
        if self.end_kind.size() <= <size_t>cid:
            n = self.end_kind.size() * 2
            if n < <size_t>cid + 1:
                n = <size_t>cid + 1
            self.end_kind.resize(n, -3)
            self.end_ptr.resize(n, 0)
            self.end_len.resize(n, 0)
            self.end_set.resize(n, 0)
        return 0

    cdef int32_t step(self, int32_t cid, int byte) except -2:
        """The step result id of branch ``cid`` over ``byte`` (filled for the byte's whole group)."""
        cdef int32_t r, g
        cdef size_t k
        self.ensure_cid(cid)
        r = self.rows[<size_t>cid * 256 + byte]
        if r >= 0:
            return r
        if self.native:
            r = self.native_step(cid, byte)
        else:
            self.out_pairs.clear()
            for lab, c2 in self.b._step(cid, byte):
                _push_pair(self.out_pairs, -1 if lab is None else <int32_t>lab, <int32_t>c2)
            r = self.intern_result(self.out_pairs)
        g = self.group_of[byte]
        for k in range(self.group_ptr[g], self.group_ptr[g + 1]):
            self.rows[<size_t>cid * 256 + self.group_bytes[k]] = r
        return r

    cdef int32_t loop_of(self, int32_t cid, int32_t node) except -2:
        """Index (into ``loop_words``, 4 words each) of ``cid``'s looping bytes at ``node``."""
        cdef int64_t key = cid
        cdef int32_t li
        if self.classes:
            key = cid * self.max_height + self.heights[node]
        li = self.loop_index.get(key)
        if li >= 0:
            return li
        if self.native:
            return self.native_loop(cid, node, key)
        words, _res = self.b.neutral_bytes(cid, node)
        li = <int32_t>(self.loop_words.size() // 4)
        for x in words:
            self.loop_words.push_back(<uint64_t>x)
        self.loop_index.put(key, li)
        return li

    cdef int32_t canonical_h(self, int32_t cid, int32_t h) except -2:
        cdef int64_t key
        cdef int32_t r
        if not self.classes:
            return cid
        key = cid * self.max_height + h
        r = self.canon.get(key)
        if r < 0:
            if self.native:
                r = self.native_canonical(cid, h)
            else:
                r = <int32_t>self.b.canonical(cid, h)
            self.canon.put(key, r)
        return r

    cdef inline int32_t canonical(self, int32_t cid, int32_t node) except -2:
        if not self.classes:
            return cid
        if self.native and self.branches.data[self.branches.ptr[cid]] < 0:
            return cid  # at a boundary: no lexer state to replace
        return self.canonical_h(cid, self.heights[node])

    cdef int end_info(self, int32_t cid) except -1:
        """Fill the end labels of ``cid`` (the first time it ends a token) and record its
        pending conditions and its lexer state."""
        cdef int32_t lex, kind = 0, t, lab
        cdef int64_t k, p0, p1
        cdef size_t w
        cdef uint64_t word
        cdef vector[int32_t] conds, labels
        if self.native:
            p0 = self.branches.ptr[cid]
            p1 = self.branches.ptr[cid + 1]
            lex = self.branches.data[p0]
            for k in range(p0 + 1, p1):
                conds.push_back(self.branches.data[k])
        else:
            lex_o, conds_o = self.b._cfgs[cid]
            lex = lex_o
            for c in conds_o:
                conds.push_back(<int32_t>c)
        for w in range(conds.size()):
            _record(self.end_cond_seen, self.end_cond_list, conds[w])
        if lex == -2:
            self.end_kind[cid] = -2
            return 0
        _record(self.end_state_seen, self.end_state_list, lex)
        if self.native:
            for w in range(<size_t>self.futures.shape[1]):
                word = self.futures[lex, w]
                while word:
                    t = <int32_t>(w * 64 + _ctz(word))
                    word &= word - 1
                    if self.ignored_t[t]:
                        kind = 1
                    lab = self.label_of[t]
                    if lab >= 0:
                        labels.push_back(lab)
            _sort_unique(labels)
        else:
            for t_o in self.b.open_labels(lex):
                if t_o == -1:  # CLOSED
                    kind = 1
                else:
                    labels.push_back(<int32_t>t_o)
        self.end_kind[cid] = kind
        self.end_ptr[cid] = <int32_t>self.end_labels.size()
        self.end_labels.insert(self.end_labels.end(), labels.begin(), labels.end())
        self.end_len[cid] = <int32_t>labels.size()
        return 0

    # ------------------------------------------------------------------ outcomes
    cdef int32_t own_tokens(self, const int32_t* bnd, int32_t blen, int32_t cid) except? -2:
        """The (flat) result of the tokens ``bnd`` (flat sorted intervals) all ending in branch
        ``cid``: one result for all of them, as their union would be."""
        cdef int32_t k, n_slots, kind, o
        self.ensure_cid(cid)
        if self.end_kind[cid] == -3:
            self.end_info(cid)
        kind = self.end_kind[cid]
        n_slots = 1 if kind == -2 else self.end_len[cid] + (1 if kind == 1 else 0)
        if n_slots == 0 or blen == 0:
            return -1
        if n_slots > _FLAT_SLOTS:
            return self.own_node(bnd, blen, cid)
        o = self.flat_begin(n_slots)
        if kind == -2 or kind == 1:
            self.fl.push_back(-1)
            self.fl.push_back(blen)
        if kind != -2:
            for k in range(self.end_len[cid]):
                self.fl.push_back(self.end_labels[self.end_ptr[cid] + k])
                self.fl.push_back(blen if k == 0 and kind == 0 else -1)
        self.fl.insert(self.fl.end(), bnd, bnd + blen)
        return -2 - o

    cdef int32_t own_node(self, const int32_t* bnd, int32_t blen, int32_t cid) except -2:
        """:meth:`own_tokens` as a DAG node (branches ending in many terminals: a flat record
        would copy the token set once per terminal), open in the set label of the branch's end
        labels (:meth:`Dag.label_set`): one pair, whatever their number."""
        cdef int32_t w, final = -1
        cdef vector[int32_t]* opens = &self.own_opens
        w = self.dag.weight_at(bnd, blen)
        opens.clear()
        if self.end_kind[cid] == -2:
            return self.dag.node(w, opens[0], self.no_edges)
        if self.end_set[cid] == 0:  # (set labels are <= -2)
            self.end_set[cid] = self.dag.label_set(&self.end_labels[self.end_ptr[cid]], self.end_len[cid])
        opens.push_back(self.end_set[cid])
        opens.push_back(w)
        if self.end_kind[cid] == 1:
            final = w
        return self.dag.node(final, opens[0], self.no_edges)

    # ------------------------------------------------------------------ flat results
    # A walk result is a DAG node (>= 0), nothing (-1) or, when it has no label edge, a *flat*
    # record ``-2 - o`` of ``fl[o:]``: ``n`` slots ``(label, length)`` — label -1 (the final
    # weight) first, then open labels ascending — followed by each slot's weight as flat sorted
    # intervals. Most (trie node, branch) pairs of a walk denote such label-free outcomes (a
    # string's tokens staying inside it), each with its own token set: interning each one as a
    # weight and a node, only to be unioned into its parent's, was most of the build (hash-table
    # probes that miss the cache). A flat result becomes a node only where a label edge or a
    # root needs one, as the node its outcomes denote — the same automaton.
    cdef int32_t flat_begin(self, int32_t n_slots) except -2:
        cdef int64_t o = self.fl.size()
        if o > self.max_flat or o > 0x7ffffff0:
            raise GrammarTooComplex(
                f"terminal DWA (nodes): more than {self.max_flat} intermediate outcome entries")
        self.fl.push_back(n_slots)
        return <int32_t>o

    cdef int32_t node_of(self, int32_t r) except -2:
        """The DAG node of result ``r`` (interning a flat record's weights and node)."""
        cdef int32_t o, n_slots, k, lab, ln, w, final = -1
        cdef int64_t p
        cdef vector[int32_t]* opens = &self.own_opens
        if r >= -1:
            return r
        o = -2 - r
        n_slots = self.fl[o]
        p = o + 1 + 2 * n_slots
        opens.clear()
        for k in range(n_slots):
            lab = self.fl[o + 1 + 2 * k]
            ln = self.fl[o + 2 + 2 * k]
            if ln >= 0:  # (-1: the previous slot's weight)
                w = self.dag.weight_at(&self.fl[p], ln)
                p += ln
            if lab < 0:
                final = w
            else:
                opens.push_back(lab)
                opens.push_back(w)
        return self.dag.node(final, opens[0], self.no_edges)

    cdef int32_t prefix_r(self, int32_t lab, int32_t r) except? -2:
        if lab < 0 or r == -1:
            return r
        return self.dag.prefix(lab, self.node_of(r))

    cdef int32_t union_as_nodes(self, vector[int32_t]& subs, Py_ssize_t begin) except? -2:
        """The DAG union of ``subs[begin:]``, each flat result made a node first."""
        cdef Py_ssize_t i
        for i in range(begin, <Py_ssize_t>subs.size()):
            if subs[i] <= -2:
                subs[i] = self.node_of(subs[i])
        return self.dag.union_all(subs, begin)

    cdef int32_t combine(self, vector[int32_t]& subs, Py_ssize_t begin) except? -2:
        """The union of the results ``subs[begin:]``: flat when they all are (slot by slot,
        intervals merged), else the DAG union of their nodes."""
        cdef Py_ssize_t i, n = <Py_ssize_t>subs.size()
        cdef int32_t r, first = -1, n_flat = 0, o, n_slots, k, lab, m, li, ln, out_o, cur_len, prev_len = -1
        cdef bint any_node = False
        cdef int64_t p, cur
        cdef size_t prev_at = 0
        for i in range(begin, n):
            r = subs[i]
            if r >= 0:
                any_node = True
            elif r <= -2:
                if n_flat == 0:
                    first = r
                n_flat += 1
        if any_node:
            return self.union_as_nodes(subs, begin)
        if n_flat <= 1:
            return first
        # the labels, ascending (-1 first); then per label the lists to merge
        self.fl_labels.clear()
        for i in range(begin, n):
            r = subs[i]
            if r > -2:
                continue
            o = -2 - r
            n_slots = self.fl[o]
            for k in range(n_slots):
                lab = self.fl[o + 1 + 2 * k]
                for m in range(<int32_t>self.fl_labels.size()):
                    if self.fl_labels[m] == lab:
                        break
                else:
                    self.fl_labels.push_back(lab)
        _sort_unique(self.fl_labels)
        if <int32_t>self.fl_labels.size() > _FLAT_SLOTS:
            return self.union_as_nodes(subs, begin)
        self.fl_out.clear()
        self.fl_out.push_back(<int32_t>self.fl_labels.size())
        for m in range(<int32_t>self.fl_labels.size()):
            self.fl_out.push_back(self.fl_labels[m])
            self.fl_out.push_back(0)
        for m in range(<int32_t>self.fl_labels.size()):
            lab = self.fl_labels[m]
            self.fl_lists.clear()  # (offset, length) of each list of this label
            for i in range(begin, n):
                r = subs[i]
                if r > -2:
                    continue
                o = -2 - r
                n_slots = self.fl[o]
                p = o + 1 + 2 * n_slots
                cur = p
                cur_len = 0
                for k in range(n_slots):
                    ln = self.fl[o + 2 + 2 * k]
                    if ln >= 0:
                        cur = p
                        cur_len = ln
                        p += ln
                    if self.fl[o + 1 + 2 * k] == lab:
                        self.fl_lists.push_back(<int32_t>cur)
                        self.fl_lists.push_back(cur_len)
                        break
            ln = self.merge_lists()
            # a slot equal to the previous one keeps no copy (most slots of a record are alike)
            if m > 0 and ln == prev_len and memcmp(&self.fl_out[prev_at], &self.fl_out[self.fl_out.size() - ln],
                                                   <size_t>ln * sizeof(int32_t)) == 0:
                self.fl_out.resize(self.fl_out.size() - ln)
                self.fl_out[2 + 2 * m] = -1
            else:
                self.fl_out[2 + 2 * m] = ln
                prev_at = self.fl_out.size() - ln
                prev_len = ln
        out_o = self.flat_begin(self.fl_out[0])
        self.fl.insert(self.fl.end(), self.fl_out.begin() + 1, self.fl_out.end())
        # (the merged intervals were appended to fl_out after the header, in label order)
        return -2 - out_o

    cdef int32_t merge_lists(self) except -1:
        """Append to ``fl_out`` the union of the interval lists ``fl_lists`` (pairs of offset into
        ``fl`` and length), as sorted disjoint intervals with touching ones joined (the canonical
        form of a weight); returns how many bounds were appended."""
        cdef size_t start = self.fl_out.size(), q, nl = self.fl_lists.size() // 2, i
        cdef int32_t lo, hi, j, off, ln
        cdef bint ordered = True
        cdef int32_t last = -1
        cdef GmPair pr
        for q in range(nl):
            off = self.fl_lists[2 * q]
            ln = self.fl_lists[2 * q + 1]
            if self.fl[off] < last:
                ordered = False
                break
            last = self.fl[off + ln - 1]
        if ordered:
            for q in range(nl):
                off = self.fl_lists[2 * q]
                ln = self.fl_lists[2 * q + 1]
                j = 0
                if self.fl_out.size() > start and self.fl[off] <= self.fl_out.back():
                    if self.fl[off + 1] > self.fl_out.back():
                        self.fl_out[self.fl_out.size() - 1] = self.fl[off + 1]
                    j = 2
                while j < ln:
                    self.fl_out.push_back(self.fl[off + j])
                    self.fl_out.push_back(self.fl[off + j + 1])
                    j += 2
            return <int32_t>(self.fl_out.size() - start)
        self.fl_pairs.clear()
        for q in range(nl):
            off = self.fl_lists[2 * q]
            ln = self.fl_lists[2 * q + 1]
            j = 0
            while j < ln:
                pr.a = self.fl[off + j]
                pr.b = self.fl[off + j + 1]
                self.fl_pairs.push_back(pr)
                j += 2
        cpp_sort(self.fl_pairs.begin(), self.fl_pairs.end())
        for i in range(self.fl_pairs.size()):
            lo = <int32_t>self.fl_pairs[i].a
            hi = <int32_t>self.fl_pairs[i].b
            if self.fl_out.size() > start and lo <= self.fl_out.back():
                if hi > self.fl_out.back():
                    self.fl_out[self.fl_out.size() - 1] = hi
            else:
                self.fl_out.push_back(lo)
                self.fl_out.push_back(hi)
        return <int32_t>(self.fl_out.size() - start)

    cdef int32_t own(self, int32_t node, int32_t cid) except? -2:
        cdef int32_t tok[2]
        tok[0] = self.node_internal[node]
        if tok[0] < 0:
            return -1
        tok[1] = tok[0] + 1
        return self.own_tokens(tok, 2, cid)

    cdef int push_items(self, int32_t node, int32_t cid) except -1:
        """Append the children of ``node`` stepped from ``cid`` to ``items``. Leaf children (a
        token and nothing below) — and subtrees spelled only with looping bytes, whose every
        token ends in the same branches — that reach the same ``(label, branch)`` collapse into
        one item holding all their tokens as intervals: one DAG node for all of them."""
        cdef int32_t li, j, c, r, k, lo, hi, lab, cid2, slot, n
        cdef int byte
        cdef uint64_t* lw
        cdef bint whole
        cdef int64_t lkey
        cdef Item it
        cdef size_t slot_i
        cdef vector[int32_t]* run
        self.ensure_cid(cid)
        li = self.loop_of(cid, node)
        if self.leaf_keys.size() > _LINEAR_KEYS:
            self.leaf_slot.clear()
        self.leaf_keys.clear()
        for j in range(self.child_ptr[node], self.child_ptr[node + 1]):
            c = self.child_node[j]
            byte = self.child_byte[j]
            r = self.step(cid, byte)
            lw = &self.loop_words[<size_t>li * 4]
            whole = self.child_ptr[c] == self.child_ptr[c + 1]
            if whole:
                lo = self.node_internal[c]
                hi = lo + 1
            elif ((lw[byte >> 6] >> (byte & 63)) & 1) \
                    and (self.sub_bytes[c, 0] & ~lw[0]) == 0 and (self.sub_bytes[c, 1] & ~lw[1]) == 0 \
                    and (self.sub_bytes[c, 2] & ~lw[2]) == 0 and (self.sub_bytes[c, 3] & ~lw[3]) == 0:
                whole = True
                lo = self.sub_lo[c]
                hi = self.sub_hi[c]
            k = <int32_t>self.results.ptr[r]
            while k < self.results.ptr[r + 1]:
                lab = self.results.data[k]
                cid2 = self.results.data[k + 1]
                k += 2
                if not whole:
                    it.child = c
                    it.lab = lab
                    it.cid = self.canonical(cid2, c)
                    if not self.is_link(c):  # (a plain link is not looked up)
                        self.memo.prefetch(it.cid * self.nn + c)
                    it.n_pairs = 1
                    it.b_off = 0
                    it.b_len = 0
                    self.items.push_back(it)
                    continue
                lkey = (<int64_t>(lab + 1)) << 32 | cid2
                slot = -1
                if self.leaf_keys.size() <= _LINEAR_KEYS:
                    for slot_i in range(self.leaf_keys.size()):
                        if self.leaf_keys[slot_i] == lkey:
                            slot = <int32_t>slot_i
                            break
                else:
                    slot = self.leaf_slot.get(lkey)
                if slot < 0:
                    slot = <int32_t>self.leaf_keys.size()
                    self.leaf_keys.push_back(lkey)
                    if self.leaf_keys.size() == _LINEAR_KEYS + 1:
                        for slot_i in range(self.leaf_keys.size()):
                            self.leaf_slot.put(self.leaf_keys[slot_i], <int32_t>slot_i)
                    elif self.leaf_keys.size() > _LINEAR_KEYS + 1:
                        self.leaf_slot.put(lkey, slot)
                    if self.leaf_runs.size() <= <size_t>slot:
                        self.leaf_runs.resize(slot + 1)
                    self.leaf_runs[slot].clear()
                    self.leaf_runs[slot].push_back(lo)
                    self.leaf_runs[slot].push_back(hi)
                    self.leaf_runs[slot].push_back(1)
                else:
                    run = &self.leaf_runs[slot]
                    run[0][run.size() - 1] += 1
                    if run[0][run.size() - 2] == lo:
                        run[0][run.size() - 2] = hi
                    else:
                        n = run[0][run.size() - 1]
                        run[0][run.size() - 1] = lo
                        run.push_back(hi)
                        run.push_back(n)
        for slot_i in range(self.leaf_keys.size()):
            run = &self.leaf_runs[slot_i]
            it.child = -1
            it.lab = <int32_t>(self.leaf_keys[slot_i] >> 32) - 1
            it.cid = <int32_t>(self.leaf_keys[slot_i] & 0xffffffff)
            it.n_pairs = run[0][run.size() - 1]
            it.b_off = <int32_t>self.bounds.size()
            it.b_len = <int32_t>run.size() - 1
            for k in range(it.b_len):
                self.bounds.push_back(run[0][k])
            self.items.push_back(it)
        return 0

    cdef int push_frame(self, int64_t key, int32_t node, int32_t cid) except -1:
        cdef Frame fr
        cdef int32_t own
        fr.key = key
        fr.subs_begin = <int32_t>self.subs.size()
        own = self.own(node, cid)
        self.subs.push_back(own)
        fr.items_begin = <int32_t>self.items.size()
        fr.bounds_begin = <int32_t>self.bounds.size()
        self.push_items(node, cid)
        fr.items_end = <int32_t>self.items.size()
        fr.idx = fr.items_begin
        self.frames.push_back(fr)
        return 0

    def walk_from(self, long lex, conds) -> int:
        """The DAG node of every token scanned from branch ``(lex, conds)`` (a boundary root:
        ``lex`` = -2 at a lexeme start), keyed by its class at the trie root's height."""
        cdef vector[int32_t] cv
        cdef int32_t cid
        if self.native:
            for c in sorted(set(conds)):
                cv.push_back(<int32_t>c)
            cid = self.branch_id(<int32_t>lex, cv)
        else:
            cid = <int32_t>self.b._cfg_id((lex, tuple(conds)))
        cid = self.canonical(cid, 0)
        return self.walk(0, cid)

    cdef int32_t walk(self, int32_t node0, int32_t cid0) except -2:
        """The DAG node (-1: nothing) of the tokens of ``node0``'s subtree scanned from branch
        ``cid0``. A frame collects its own outcome and every child's (label-prefixed) result,
        and unions them all at once."""
        cdef int64_t key = cid0 * self.nn + node0
        cdef int32_t sub, acc, res = -1
        cdef Frame* fr
        cdef Item it
        cdef bint pushed
        if self.memo_has(key):
            return self.node_of(self.memo_value(key))
        self.items.clear()
        self.subs.clear()
        self.bounds.clear()
        self.frames.clear()
        self.push_frame(key, node0, cid0)
        while self.frames.size():
            fr = &self.frames.back()
            pushed = False
            while fr.idx < fr.items_end:
                it = self.items[fr.idx]
                self.steps += it.n_pairs
                if self.steps > self.max_steps:
                    raise GrammarTooComplex(
                        f"terminal DWA (trie walk): more than {self.max_steps} (trie node, "
                        "branch) pairs (limit max_walk_steps)")
                if (self.steps & 1023) < it.n_pairs:
                    self.b._check_time("trie walk")
                if it.child < 0:
                    sub = self.own_tokens(&self.bounds[it.b_off], it.b_len, it.cid)
                else:
                    key = it.cid * self.nn + it.child
                    if self.plain_link(it.child, it.cid):
                        sub = -1
                    else:
                        sub = self.memo.get(key)  # see memo_store; -1: not walked yet
                    if sub == -1:
                        self.push_frame(key, it.child, it.cid)
                        pushed = True
                        break
                    if sub >= 0:
                        sub -= 1
                sub = self.prefix_r(it.lab, sub)
                if sub != -1:
                    self.subs.push_back(sub)
                fr.idx += 1
            if pushed:
                continue
            acc = self.combine(self.subs, fr.subs_begin)
            if not self.plain_link(<int32_t>(fr.key % self.nn), <int32_t>(fr.key // self.nn)):
                self.memo_store(fr.key, acc)
            self.subs.resize(fr.subs_begin)
            self.bounds.resize(fr.bounds_begin)
            self.items.resize(fr.items_begin)
            self.frames.pop_back()
            if self.frames.size():
                fr = &self.frames.back()
                it = self.items[fr.idx]
                acc = self.prefix_r(it.lab, acc)
                if acc != -1:
                    self.subs.push_back(acc)
                fr.idx += 1
            else:
                res = self.node_of(acc)
        return res

    cdef inline bint is_link(self, int32_t node) noexcept:
        """A node that is no token and has one child: it only links its parent to that child."""
        return self.node_internal[node] < 0 and self.child_ptr[node + 1] - self.child_ptr[node] == 1

    cdef inline bint plain_link(self, int32_t node, int32_t cid) except -1:
        """A link that branch ``cid`` crosses without branching (its byte steps ``cid`` to one
        branch at most): its result is not memoized — a second visit costs one step to the child,
        whose result is — which spares the memo a lookup and a store, two cache misses, on the
        long single-child chains of a large vocabulary's trie. Only plain links: where a branch
        splits, the memo is what keeps converging branches from walking a chain once per path
        (2^n paths through n spaces of ignored whitespace)."""
        cdef int32_t r
        if not self.is_link(node):
            return False
        r = self.step(cid, self.child_byte[self.child_ptr[node]])
        return self.results.ptr[r + 1] - self.results.ptr[r] <= 2

    # The memo stores a node or nothing as node + 1 (>= 0) and a flat result as itself (<= -2),
    # so that -1 means "absent".
    cdef inline bint memo_has(self, int64_t key) noexcept:
        return self.memo.get(key) != -1

    cdef inline int32_t memo_value(self, int64_t key) noexcept:
        cdef int32_t v = self.memo.get(key)
        return v - 1 if v >= 0 else v

    cdef inline void memo_store(self, int64_t key, int32_t r) noexcept:
        self.memo.put(key, r + 1 if r >= -1 else r)


cdef inline void _push_pair(vector[int32_t]& pairs, int32_t lab, int32_t cid) noexcept:
    """Append ``(lab, cid)`` unless already there (first occurrence kept, as ``dict.fromkeys``)."""
    cdef size_t i = 0
    while i < pairs.size():
        if pairs[i] == lab and pairs[i + 1] == cid:
            return
        i += 2
    pairs.push_back(lab)
    pairs.push_back(cid)


cdef void _sort_unique(vector[int32_t]& v) noexcept:
    cdef size_t i, j
    if v.size() < 2:
        return
    cpp_sort(v.begin(), v.end())
    j = 0
    for i in range(1, v.size()):
        if v[i] != v[j]:
            j += 1
            v[j] = v[i]
    v.resize(j + 1)


cdef inline void _record(vector[char]& seen, vector[int32_t]& order, int32_t x) noexcept:
    if <size_t>x >= seen.size():
        seen.resize(<size_t>x + 1 if <size_t>x + 1 > 2 * seen.size() else 2 * seen.size(), 0)
    if not seen[x]:
        seen[x] = 1
        order.push_back(x)


cdef extern from *:
    """
    static inline int gm_ctz64(uint64_t x) { return __builtin_ctzll(x); }
    """
    int _ctz "gm_ctz64" (uint64_t x) noexcept nogil

