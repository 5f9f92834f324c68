# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: language = c++
"""Native loops of the dense lexer export (semantics and reference: :mod:`glrmask.lexer.dfa`).

Why native. Exporting the lazy lexer visits every reachable joint state over all 256 bytes; a
JSON Schema with a few hundred terminals has thousands of joint states of sixty-odd live lanes
each, and assembling their successors in Python (per lane, per byte group, per joint byte class,
a tuple and a dict lookup) cost more than stepping the lanes themselves. Here a joint state is a
vector of lane indices (one per ``(terminal, lane state)`` pair), a lane's transitions are a dense
row over its terminal's byte groups holding the successor's lane index, joint byte classes are
computed by refining the live terminals' groups, and a successor is found in an open-addressing
table by a hash of its lane indices. The per-class loop runs without the GIL. Python is called
only for what is new: a lane whose transitions the lexer has not listed yet
(``Lexer._lane_live``, which steps the lane in Python: the semantics stay in one place), a joint
state the lexer must intern (``Lexer._intern_joint``, so lazy ids stay the lexer's), a new event
list, and (:func:`lane_futures`) a lane's futures (``Lexer._lane_future``).

Identical output. States are visited breadth-first in the order of :func:`glrmask.lexer.dfa.
_explore_states` (successors by ascending joint byte class, i.e. by smallest byte), lanes are
listed in each state's lane order and joint states interned in class order, exactly as
:meth:`Lexer.row` does, so the lexer hands out the same lazy ids, and event lists are numbered by
first occurrence. The partition refinement (:func:`refine`) computes the coarsest stable partition
with the same incremental rounds as :func:`glrmask.lexer.dfa._refine`; the caller renumbers
classes canonically, so only the partition matters.

Memory. The lazy lexer's per-state memo rows (``_js_rows``, ``_js_cls``) are not filled: the
export does not need them, and a later :meth:`Lexer.step` or :meth:`Lexer.row` on these states
rebuilds them from the lane memo. Transition and event tables are ``int32`` and copied out once.
"""
cimport cython
import numpy as np
cimport numpy as cnp

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.algorithm cimport sort
from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from glrmask.errors import GrammarTooComplex

cnp.import_array()

__all__ = ["explore_states", "export_rows", "first_occurrence_ids", "lane_futures", "refine", "row_labels"]

cdef enum:
    _CHECK_EVERY = 32


cdef inline string _key32(const int32_t* p, size_t n) noexcept nogil:
    return string(<const char*>p, n * sizeof(int32_t))


cdef inline uint64_t _mix(uint64_t h) noexcept nogil:
    """murmur3's finalizer: a fixed, seedless mix (ids must not depend on any seed)."""
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    h *= 0xC4CEB9FE1A85EC53ULL
    h ^= h >> 33
    return h


cdef class _Lanes:
    """Lane indices ``L`` for the lexer's ``(terminal, lane state)`` pairs, with each lane's
    transitions as a dense row over its terminal's byte groups: the successor's lane index (-1:
    the lane dies) and the lane event-list id (0: none)."""

    cdef object lexer
    cdef unordered_map[int64_t, int32_t] index
    cdef vector[int32_t] term
    cdef vector[int32_t] lstate
    cdef vector[int64_t] off  # row start in nxt/ev; -1 while not listed
    cdef vector[int32_t] nxt
    cdef vector[int32_t] ev
    cdef vector[int32_t] n_groups  # per terminal
    cdef dict ev_ids
    cdef list ev_lists

    def __init__(self, lexer):
        self.lexer = lexer
        for grep in lexer._grep:
            self.n_groups.push_back(len(grep))
        self.ev_ids = {(): 0}
        self.ev_lists = [()]

    cdef int32_t lane(self, int32_t t, int32_t ts):
        cdef int64_t k = (<int64_t>t << 32) | <int64_t>ts
        cdef unordered_map[int64_t, int32_t].iterator it = self.index.find(k)
        if it != self.index.end():
            return cython.operator.dereference(it).second
        cdef int32_t L = <int32_t>self.term.size()
        self.index[k] = L
        self.term.push_back(t)
        self.lstate.push_back(ts)
        self.off.push_back(-1)
        return L

    cdef int list_lane(self, int32_t L) except -1:
        """Fill the lane's row from ``Lexer._lane_live`` (its Python lane steps)."""
        cdef int32_t t = self.term[L]
        cdef int64_t base = <int64_t>self.nxt.size()
        cdef int32_t g, ts2, L2, ng = self.n_groups[t]
        self.nxt.resize(base + ng, -1)
        self.ev.resize(base + ng, 0)
        self.off[L] = base
        cdef object eid
        cdef int32_t e
        for gs, ts2_, evs in self.lexer._lane_live(t, self.lstate[L]):
            ts2 = ts2_
            L2 = self.lane(t, ts2) if ts2 >= 0 else -1
            e = 0
            if evs:
                eid = self.ev_ids.get(evs)
                if eid is None:
                    eid = self.ev_ids[evs] = len(self.ev_lists)
                    self.ev_lists.append(evs)
                e = eid
            for g_ in gs:
                g = g_
                self.nxt[base + g] = L2
                self.ev[base + g] = e
        return 0


cdef class _States:
    """The explored joint states: their lane-index sequences (CSR) and lazy ids, in visiting
    order, with an open-addressing hash table from a sequence to its exploration index."""

    cdef vector[int64_t] ptr
    cdef vector[int32_t] lanes
    cdef vector[uint64_t] hash
    cdef vector[int64_t] lazy
    cdef vector[int32_t] slots
    cdef uint64_t mask

    def __cinit__(self):
        self.ptr.push_back(0)
        self.slots.resize(1 << 12, -1)
        self.mask = (1 << 12) - 1

    cdef int32_t find(self, const int32_t* seq, int64_t m, uint64_t h) noexcept nogil:
        cdef uint64_t p = h & self.mask
        cdef int32_t i
        while True:
            i = self.slots[p]
            if i < 0:
                return -1
            if (self.hash[i] == h and self.ptr[i + 1] - self.ptr[i] == m
                    and (m == 0 or memcmp(&self.lanes[self.ptr[i]], seq, <size_t>m * sizeof(int32_t)) == 0)):
                return i
            p = (p + 1) & self.mask

    cdef int32_t add(self, const int32_t* seq, int64_t m, uint64_t h, int64_t lazy_id):
        """Append a state (``seq`` must not point into ``self.lanes``)."""
        cdef int32_t i = <int32_t>self.lazy.size()
        cdef int64_t j
        cdef uint64_t p
        for j in range(m):
            self.lanes.push_back(seq[j])
        self.ptr.push_back(self.lanes.size())
        self.hash.push_back(h)
        self.lazy.push_back(lazy_id)
        if 2 * <uint64_t>(i + 1) > self.mask:
            self.slots.assign(2 * (self.mask + 1), -1)
            self.mask = 2 * (self.mask + 1) - 1
            for j in range(i + 1):
                p = self.hash[j] & self.mask
                while self.slots[p] >= 0:
                    p = (p + 1) & self.mask
                self.slots[p] = <int32_t>j
        else:
            p = h & self.mask
            while self.slots[p] >= 0:
                p = (p + 1) & self.mask
            self.slots[p] = i
        return i


cdef inline uint64_t _seq_hash(const int32_t* seq, int64_t m) noexcept nogil:
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ <uint64_t>m
    cdef int64_t j
    for j in range(m):
        h = (h ^ <uint64_t>(<uint32_t>seq[j])) * 0x100000001B3ULL
    return _mix(h)


def explore_states(lexer, list starts, int64_t max_states, check):
    """:func:`glrmask.lexer.dfa._explore_states`, natively: ``(states, trans, evs, ev_lists,
    lane_lists)`` — the lazy ids in visiting order, the ``int32[n, 256]`` transition table over
    exploration indices (-1 DEAD), the raw event-list id per transition (``int32[n, 256]``), the
    distinct event lists, and the per-state lanes for :func:`lane_futures` (opaque)."""
    cdef _Lanes lanes = _Lanes(lexer)
    cdef _States st = _States()
    cdef list js = lexer._js
    cdef list gid_py = lexer._gid
    cdef int n_terms = len(gid_py)
    # per terminal, its byte -> group map
    cdef vector[int32_t] gid
    gid.resize(<size_t>n_terms * 256)
    cdef int t, b
    for t in range(n_terms):
        row = gid_py[t]
        for b in range(256):
            gid[<size_t>t * 256 + b] = row[b]

    cdef unordered_map[string, int32_t] parts  # terminal words -> partition index
    cdef vector[uint8_t] part_cls  # per partition: byte -> class
    cdef vector[uint8_t] part_reps_flat
    cdef vector[int32_t] part_reps_ptr
    part_reps_ptr.push_back(0)
    cdef unordered_map[string, int32_t] ev_seq_ids  # lane event-id words -> raw event-list id
    cdef unordered_map[string, int32_t].iterator pt
    cdef list ev_lists = [()]
    cdef vector[int32_t] trans
    cdef vector[int32_t] evs
    cdef vector[int32_t] succ
    cdef vector[int32_t] tw
    cdef vector[int32_t] res_t
    cdef vector[int32_t] res_e
    cdef vector[const int32_t*] lane_gid
    cdef vector[const int32_t*] lane_nxt
    cdef vector[const int32_t*] lane_ev
    cdef vector[int32_t] succ_vec, seq_vec  # a successor's lanes / event-list ids, in lane order
    cdef int32_t* succ_buf
    cdef int32_t* seq_buf
    cdef vector[int32_t] new_cls, relabel
    cdef vector[int64_t] stamp
    new_cls.resize(256)
    stamp.resize(256 * 256, -1)
    relabel.resize(256 * 256)
    cdef int64_t q, q2, i, head = 0, gen = 0
    cdef int32_t L, k, ncls, j, m, g, nx, e, pidx, x, n_new, c0, y, nsucc, nseq
    cdef uint64_t h
    cdef size_t lo, base
    cdef string key
    cdef const uint8_t* cls
    cdef const uint8_t* reps
    cdef const int32_t* gt

    start_index = {}
    for q_obj in starts:
        q = q_obj
        if q in start_index:
            continue
        if <int64_t>st.lazy.size() >= max_states:
            raise GrammarTooComplex(
                f"lexer DFA export: more than {max_states} reachable lexer states (limit max_states)")
        succ.clear()
        if q >= 0:
            for t_, ts_ in js[q]:
                succ.push_back(lanes.lane(t_, ts_))
        h = _seq_hash(succ.data(), <int64_t>succ.size())
        x = st.find(succ.data(), <int64_t>succ.size(), h)
        start_index[q] = x if x >= 0 else st.add(succ.data(), <int64_t>succ.size(), h, q)

    while head < <int64_t>st.lazy.size():
        if not (head & (_CHECK_EVERY - 1)):
            check.check(f"lexer DFA export (after {st.lazy.size()} lexer states)")
        i = head
        head += 1
        lo = st.ptr[i]
        m = <int32_t>(st.ptr[i + 1] - lo)
        base = trans.size()
        trans.resize(base + 256, -1)
        evs.resize(base + 256, 0)
        if m == 0:  # DEAD as a start (a lexer without terminals): every byte stays DEAD
            continue
        # lanes listed in order (the lexer steps and interns lane states as Lexer.row would)
        for j in range(m):
            L = st.lanes[lo + j]
            if lanes.off[L] < 0:
                lanes.list_lane(L)
        tw.resize(m)
        for j in range(m):
            tw[j] = lanes.term[st.lanes[lo + j]]
        lane_gid.resize(m)
        lane_nxt.resize(m)
        lane_ev.resize(m)
        if <int32_t>succ_vec.size() < m:
            succ_vec.resize(m)
            seq_vec.resize(m)
        succ_buf = succ_vec.data()
        seq_buf = seq_vec.data()
        with nogil:  # Python only for what is new: a joint state to intern, an event list
            # the joint byte classes of this set of live terminals (Lexer.byte_classes): bytes
            # every live terminal's groups put together, numbered by their smallest byte
            key = _key32(tw.data(), tw.size())
            pt = parts.find(key)
            if pt == parts.end():
                pidx = <int32_t>(part_reps_ptr.size() - 1)
                parts[key] = pidx
                for b in range(256):
                    new_cls[b] = 0
                for j in range(m):  # refine by each terminal's groups, renumbering as we go
                    gt = &gid[<size_t>tw[j] * 256]
                    n_new = 0
                    gen += 1
                    for b in range(256):
                        y = new_cls[b] * 256 + gt[b]
                        if stamp[y] != gen:
                            stamp[y] = gen
                            relabel[y] = n_new
                            n_new += 1
                        new_cls[b] = relabel[y]
                for b in range(256):
                    part_cls.push_back(<uint8_t>new_cls[b])
                c0 = 0
                for b in range(256):
                    if new_cls[b] == c0:
                        part_reps_flat.push_back(<uint8_t>b)
                        c0 += 1
                part_reps_ptr.push_back(part_reps_flat.size())
            else:
                pidx = cython.operator.dereference(pt).second
            cls = &part_cls[<size_t>pidx * 256]
            reps = &part_reps_flat[part_reps_ptr[pidx]]
            ncls = part_reps_ptr[pidx + 1] - part_reps_ptr[pidx]
            res_t.resize(ncls)
            res_e.resize(ncls)
            for j in range(m):
                L = st.lanes[lo + j]
                lane_gid[j] = &gid[<size_t>tw[j] * 256]
                lane_nxt[j] = &lanes.nxt[lanes.off[L]]
                lane_ev[j] = &lanes.ev[lanes.off[L]]
            for k in range(ncls):
                b = reps[k]
                nsucc = 0
                nseq = 0
                for j in range(m):
                    g = lane_gid[j][b]
                    nx = lane_nxt[j][g]
                    e = lane_ev[j][g]
                    if nx >= 0:
                        succ_buf[nsucc] = nx
                        nsucc += 1
                    if e:
                        seq_buf[nseq] = e
                        nseq += 1
                # the successor
                if nsucc == 0:
                    res_t[k] = -1
                else:
                    h = _seq_hash(succ_buf, nsucc)
                    x = st.find(succ_buf, nsucc, h)
                    if x < 0:
                        with gil:
                            if <int64_t>st.lazy.size() >= max_states:
                                raise GrammarTooComplex(
                                    f"lexer DFA export: more than {max_states} reachable lexer states "
                                    "(limit max_states)")
                            q2 = lexer._intern_joint(tuple([(lanes.term[succ_buf[j]], lanes.lstate[succ_buf[j]])
                                                            for j in range(nsucc)]))
                            x = st.add(succ_buf, nsucc, h, q2)
                    res_t[k] = x
                # the events
                if nseq == 0:
                    res_e[k] = 0
                else:
                    key = _key32(seq_buf, <size_t>nseq)
                    pt = ev_seq_ids.find(key)
                    if pt == ev_seq_ids.end():
                        with gil:
                            flat = []
                            for j in range(nseq):
                                flat.extend(lanes.ev_lists[seq_buf[j]])
                            e = <int32_t>len(ev_lists)
                            ev_lists.append(tuple(flat))
                            ev_seq_ids[key] = e
                        res_e[k] = e
                    else:
                        res_e[k] = cython.operator.dereference(pt).second
            for b in range(256):
                trans[base + b] = res_t[cls[b]]
                evs[base + b] = res_e[cls[b]]

    cdef int64_t n = <int64_t>st.lazy.size()
    states = [st.lazy[i] for i in range(n)]
    trans_a = np.empty((n, 256), dtype=np.int32)
    evs_a = np.empty((n, 256), dtype=np.int32)
    if n:
        memcpy(cnp.PyArray_DATA(trans_a), trans.data(), <size_t>n * 256 * sizeof(int32_t))
        memcpy(cnp.PyArray_DATA(evs_a), evs.data(), <size_t>n * 256 * sizeof(int32_t))
    vector[int32_t]().swap(trans)
    vector[int32_t]().swap(evs)
    ptr_a = np.empty(n + 1, dtype=np.int64)
    memcpy(cnp.PyArray_DATA(ptr_a), st.ptr.data(), <size_t>(n + 1) * sizeof(int64_t))
    lanes_a = np.empty(st.lanes.size(), dtype=np.int32)
    if st.lanes.size():
        memcpy(cnp.PyArray_DATA(lanes_a), st.lanes.data(), st.lanes.size() * sizeof(int32_t))
    return states, trans_a, evs_a, ev_lists, (lanes, ptr_a, lanes_a)


def lane_futures(lexer, lane_lists, int n_words, check):
    """``uint64[n_states, n_words]``: bit ``t`` set iff terminal ``t`` is in
    ``lexer.futures(q)`` of the explored state — each distinct lane asked once
    (``Lexer._lane_future``), in the order :meth:`Lexer.futures` over the states would ask;
    ``check(stage)`` is the deadline, called every few states."""
    cdef _Lanes lanes = lane_lists[0]
    cdef const int64_t[::1] ptr = lane_lists[1]
    cdef const int32_t[::1] flat = lane_lists[2]
    cdef int64_t n = ptr.shape[0] - 1
    out = np.zeros((n, max(1, n_words)), dtype=np.uint64)
    cdef uint64_t[:, ::1] o = out
    cdef vector[int8_t] memo
    memo.resize(lanes.term.size(), -1)
    cdef int64_t i, x
    cdef int32_t L, t
    cdef int8_t has
    lane_future = lexer._lane_future
    for i in range(n):
        if not (i & (_CHECK_EVERY - 1)):
            check.check("lexer DFA export (futures)")
        for x in range(ptr[i], ptr[i + 1]):
            L = flat[x]
            if memo[L] < 0:
                # (a plain local: Cython types a conditional expression assigned to a vector
                # element as an uninitialized reference temporary)
                has = 1 if lane_future(lanes.term[L], lanes.lstate[L]) else 0
                memo[L] = has
            if memo[L]:
                t = lanes.term[L]
                o[i, t >> 6] |= (<uint64_t>1) << (t & 63)
    return out


def row_labels(const uint64_t[:, ::1] a, const int32_t[:, ::1] b):
    """``int64[m]``: equal labels iff the rows ``(a[i], b[i])`` are equal (exact: each row is
    hashed as one byte string and compared whole); labels numbered by first occurrence."""
    cdef int64_t m = a.shape[0], wa = a.shape[1], wb = b.shape[1], i
    if b.shape[0] != m:
        raise ValueError("row_labels: both tables need one row per state")
    out = np.empty(m, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef unordered_map[string, int64_t] ids
    cdef unordered_map[string, int64_t].iterator it
    cdef string key
    with nogil:
        for i in range(m):
            key.clear()
            if wa:
                key.append(<const char*>&a[i, 0], <size_t>wa * sizeof(uint64_t))
            if wb:
                key.append(<const char*>&b[i, 0], <size_t>wb * sizeof(int32_t))
            it = ids.find(key)
            if it == ids.end():
                o[i] = <int64_t>ids.size()
                ids[key] = o[i]
            else:
                o[i] = cython.operator.dereference(it).second
    return out


def refine(const int64_t[::1] init, const int32_t[:, ::1] targets, check, str stage):
    """:func:`glrmask.lexer.dfa._refine`, natively: the coarsest partition refining the labels
    ``init`` in which members of a class have targets (``-1`` = DEAD, only to DEAD) in the same
    classes on every column. The same incremental Moore rounds: after the first, only the
    predecessors of states that changed class are regrouped within their class (the largest
    group keeps the class's id when every member is a candidate; members that are not
    candidates keep it otherwise, their row cannot have changed). Returns ``int64[n]`` labels
    (any numbering: the caller renumbers canonically). ``check(stage)`` runs once per round."""
    cdef int64_t n = targets.shape[0], k = targets.shape[1]
    if init.shape[0] != n:
        raise ValueError(f"refine: {init.shape[0]} initial labels for {n} states")
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] cls = out
    if n == 0:
        return out
    cdef int64_t i, j, s, y, g, blk, n_cls, n_grp, x
    cdef vector[int64_t] size
    # compact the initial labels
    cdef unordered_map[int64_t, int64_t] lab
    cdef unordered_map[int64_t, int64_t].iterator lt
    for i in range(n):
        lt = lab.find(init[i])
        if lt == lab.end():
            cls[i] = <int64_t>lab.size()
            lab[init[i]] = cls[i]
        else:
            cls[i] = cython.operator.dereference(lt).second
    n_cls = <int64_t>lab.size()
    size.resize(n_cls, 0)
    for i in range(n):
        size[cls[i]] += 1
    # predecessors (CSR by target)
    cdef vector[int64_t] pptr
    cdef vector[int32_t] psrc
    pptr.resize(n + 1, 0)
    for i in range(n):
        for j in range(k):
            y = targets[i, j]
            if y >= n:
                raise ValueError(f"refine: state {i} targets {y}, past the {n} states")
            if y >= 0:
                pptr[y + 1] += 1
    for i in range(n):
        pptr[i + 1] += pptr[i]
    psrc.resize(pptr[n])
    cdef vector[int64_t] fill = pptr
    for i in range(n):
        for j in range(k):
            y = targets[i, j]
            if y >= 0:
                psrc[fill[y]] = <int32_t>i
                fill[y] += 1
    cdef vector[int64_t] cand, nxt_cand, grp_of, grp_block, grp_size, grp_new, best, changed
    cdef vector[int64_t] cand_in_block
    cdef vector[int32_t] rowbuf
    cdef vector[uint8_t] mark
    cdef unordered_map[string, int64_t] groups
    cdef unordered_map[string, int64_t].iterator gt
    cdef string key
    mark.resize(n, 0)
    rowbuf.resize(k + 1)
    cand_in_block.resize(n_cls, 0)
    for i in range(n):
        cand.push_back(i)
    while cand.size():
        check(stage)
        with nogil:
            if groups.bucket_count() > 4 * cand.size() + 64:
                # a long chain refines one state per round: clear() would wipe every bucket
                groups = unordered_map[string, int64_t]()
            else:
                groups.clear()
            grp_of.resize(cand.size())
            grp_block.clear()
            grp_size.clear()
            for x in range(<int64_t>cand.size()):
                s = cand[x]
                rowbuf[0] = <int32_t>cls[s]
                for j in range(k):
                    y = targets[s, j]
                    rowbuf[j + 1] = <int32_t>cls[y] if y >= 0 else -1
                key = _key32(rowbuf.data(), <size_t>(k + 1))
                gt = groups.find(key)
                if gt == groups.end():
                    g = <int64_t>grp_block.size()
                    groups[key] = g
                    grp_block.push_back(cls[s])
                    grp_size.push_back(0)
                else:
                    g = cython.operator.dereference(gt).second
                grp_of[x] = g
                grp_size[g] += 1
            n_grp = <int64_t>grp_block.size()
            # per block: candidates in it and its largest candidate group (first on ties)
            cand_in_block.resize(n_cls, 0)
            best.resize(n_cls, -1)
            for g in range(n_grp):
                blk = grp_block[g]
                cand_in_block[blk] += grp_size[g]
                if best[blk] < 0 or grp_size[g] > grp_size[best[blk]]:
                    best[blk] = g
            grp_new.resize(n_grp)
            for g in range(n_grp):
                blk = grp_block[g]
                if cand_in_block[blk] == size[blk] and best[blk] == g:
                    grp_new[g] = -1  # keeps the block's id
                else:
                    grp_new[g] = n_cls
                    n_cls += 1
                    size.push_back(0)
            # reset the per-block scratch for the next round
            for g in range(n_grp):
                blk = grp_block[g]
                cand_in_block[blk] = 0
                best[blk] = -1
            changed.clear()
            for x in range(<int64_t>cand.size()):
                g = grp_new[grp_of[x]]
                if g >= 0:
                    s = cand[x]
                    size[cls[s]] -= 1
                    size[g] += 1
                    cls[s] = g
                    changed.push_back(s)
            nxt_cand.clear()
            for x in range(<int64_t>changed.size()):
                s = changed[x]
                for j in range(pptr[s], pptr[s + 1]):
                    y = psrc[j]
                    if not mark[y]:
                        mark[y] = 1
                        nxt_cand.push_back(y)
            for x in range(<int64_t>nxt_cand.size()):
                mark[nxt_cand[x]] = 0
            sort(nxt_cand.begin(), nxt_cand.end())
            cand.swap(nxt_cand)
    return out


def export_rows(const int32_t[:, ::1] trans_raw, const int32_t[:, ::1] ev_key, const int64_t[::1] reps,
                const int64_t[::1] state_new, const int64_t[::1] list_start, const int32_t[::1] flat_t,
                const int32_t[::1] flat_c):
    """The minimized state rows: ``(trans, ev_ptr, ev_term, ev_cond)`` for the class
    representatives ``reps`` (exploration indices), targets renamed by ``state_new`` (-1 DEAD
    stays), and each transition's event list ``ev_key`` (ids into the lists ``flat_t[a:z]``,
    ``flat_c[a:z]`` with ``a, z = list_start[k], list_start[k + 1]``) laid out in CSR, as
    :func:`glrmask.lexer.dfa._events_csr` does."""
    cdef int64_t m = reps.shape[0], n = trans_raw.shape[0], nl = list_start.shape[0] - 1
    cdef int64_t s, r, b, k, y, total = 0, x, a, z
    trans = np.empty((m, 256), dtype=np.int32)
    ptr = np.empty(m * 256 + 1, dtype=np.int32)
    cdef int32_t[:, ::1] tv = trans
    cdef int32_t[::1] pv = ptr
    for s in range(m):
        r = reps[s]
        if not 0 <= r < n:
            raise ValueError(f"export_rows: representative {r} out of range")
        for b in range(256):
            y = trans_raw[r, b]
            tv[s, b] = <int32_t>state_new[y] if y >= 0 else -1
            k = ev_key[r, b]
            if not 0 <= k < nl:
                raise ValueError(f"export_rows: event list {k} out of range")
            total += list_start[k + 1] - list_start[k]
    if total >= 2 ** 31:  # pragma: no cover - would need > 2^31 events
        raise GrammarTooComplex("lexer DFA export: more than 2^31 events (limit int32 offsets)")
    term = np.empty(total, dtype=np.int32)
    cond = np.empty(total, dtype=np.int32)
    cdef int32_t[::1] ttv = term
    cdef int32_t[::1] ccv = cond
    total = 0
    pv[0] = 0
    with nogil:
        for s in range(m):
            r = reps[s]
            for b in range(256):
                k = ev_key[r, b]
                a = list_start[k]
                z = list_start[k + 1]
                for x in range(a, z):
                    ttv[total] = flat_t[x]
                    ccv[total] = flat_c[x]
                    total += 1
                pv[s * 256 + b + 1] = <int32_t>total
    return trans, ptr, term, cond


def first_occurrence_ids(const int64_t[::1] labels):
    """:func:`glrmask.lexer.dfa._first_occurrence_ids`: classes renumbered ``0, 1, ...`` in the
    order of their first member (labels must be non-negative)."""
    cdef int64_t n = labels.shape[0], i, hi = -1, x
    for i in range(n):
        if labels[i] < 0:
            raise ValueError("first_occurrence_ids: negative label")
        if labels[i] > hi:
            hi = labels[i]
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef vector[int64_t] new_id
    new_id.resize(hi + 1, -1)
    cdef int64_t nxt = 0
    with nogil:
        for i in range(n):
            x = labels[i]
            if new_id[x] < 0:
                new_id[x] = nxt
                nxt += 1
            o[i] = new_id[x]
    return out
