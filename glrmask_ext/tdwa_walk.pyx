# cython: language_level=3, wraparound=True, boundscheck=True
"""Compiled core of :class:`glrmask.compiler.terminal_dwa.TerminalDWA` construction: the hash-consed
DAG of weighted label trees and the memoized trie walk. Same operations in the same order as the
pure-Python description in ``terminal_dwa`` (so the interned node order, hence the output, is
identical); compiled because the build is millions of small dict/tuple operations."""
cimport cython
from libc.stdint cimport int32_t, uint64_t

import numpy as np

from glrmask.errors import GrammarTooComplex


@cython.boundscheck(False)
@cython.wraparound(False)
def subtree_byte_sets(const int32_t[::1] child_ptr, const unsigned char[::1] child_byte,
                      const int32_t[::1] child_node):
    """``uint64[n_nodes, 4]``: the set of bytes spelled anywhere below each trie node (children
    have higher ids than their parent, so one reverse pass suffices)."""
    cdef Py_ssize_t n = child_ptr.shape[0] - 1
    out_arr = np.zeros((max(n, 1), 4), dtype=np.uint64)
    cdef uint64_t[:, ::1] out = out_arr
    cdef Py_ssize_t node, j, c, k
    cdef long byte
    with nogil:
        for node in range(n - 1, -1, -1):
            for j in range(child_ptr[node], child_ptr[node + 1]):
                c = child_node[j]
                byte = child_byte[j]
                out[node, byte >> 6] |= (<uint64_t>1) << (byte & 63)
                for k in range(4):
                    out[node, k] |= out[c, k]
    return out_arr


cdef list _union2(tuple a, tuple b):
    cdef list out = []
    cdef Py_ssize_t i = 0, j = 0, na = len(a), nb = len(b)
    cdef long lo, hi
    while i < na or j < nb:
        if j >= nb or (i < na and <long>a[i] <= <long>b[j]):
            lo = a[i]; hi = a[i + 1]
            i += 2
        else:
            lo = b[j]; hi = b[j + 1]
            j += 2
        if out and lo <= <long>out[-1]:
            if hi > <long>out[-1]:
                out[-1] = hi
        else:
            out.append(lo)
            out.append(hi)
    return out


cdef inline void _group(dict groups, tuple pairs):
    """Append each ``(key, value)`` of ``pairs`` to ``groups[key]``."""
    for k, v in pairs:
        lst = groups.get(k)
        if lst is None:
            groups[k] = [v]
        else:
            lst.append(v)


cdef list _operands(list ids):
    """The distinct non-empty (non-negative) ids of a many-way union, ascending."""
    return sorted(set([x for x in ids if <long>x >= 0]))


cdef class Dag:
    """Hash-consed weighted label trees: a node is ``(final weight, ((open label, weight), ...),
    ((label, child), ...))`` (sorted, child ids lower than the node's), so equal denotations are
    the same id; weights are interned interval tuples (-1 = empty). Unions are memoized."""
    cdef public long max_nodes, max_weights
    cdef public dict weights, _wunion, nodes, _union, _prefix, _n0, _n1, _union_many
    cdef public list weight_list, node_list, support

    def __init__(self, long max_nodes, long max_weights):
        self.max_nodes = max_nodes
        self.max_weights = max_weights
        self.weights = {}
        self.weight_list = []
        self._wunion = {}
        self.nodes = {}
        self._n0 = {}
        self._n1 = {}
        self.node_list = []
        self.support = []
        self._union = {}
        self._prefix = {}
        self._union_many = {}

    cdef long _weight(self, tuple key) except? -2:
        if not key:
            return -1
        w = self.weights.get(key)
        if w is None:
            if len(self.weight_list) >= self.max_weights:
                raise GrammarTooComplex(
                    f"terminal DWA (weights): more than {self.max_weights} distinct token sets "
                    "(limit max_weights)")
            w = len(self.weight_list)
            self.weights[key] = w
            self.weight_list.append(key)
        return w

    def weight(self, ivs):
        return self._weight(tuple(ivs))

    cdef long _wunion_(self, long a, long b) except? -2:
        cdef tuple ia, ib
        cdef long w
        if a < 0 or a == b:
            return b
        if b < 0:
            return a
        key = (a << 32 | b) if a < b else (b << 32 | a)
        hit = self._wunion.get(key)
        if hit is not None:
            return hit
        ia = self.weight_list[a]
        ib = self.weight_list[b]
        if <long>ia[0] > <long>ib[0]:
            ia, ib = ib, ia
        if <long>ia[-1] < <long>ib[0]:
            w = self._weight(ia + ib)
        elif <long>ia[-1] == <long>ib[0]:
            w = self._weight(ia[:-1] + ib[1:])
        else:
            w = self._weight(tuple(_union2(ia, ib)))
        self._wunion[key] = w
        return w

    def wunion(self, long a, long b):
        return self._wunion_(a, b)

    cdef long _node(self, long final, tuple opens, tuple edges) except? -2:
        cdef long sup, n
        if final < 0 and not opens and not edges:
            return -1
        # The two commonest shapes (one token set, closed or open in one terminal) are looked up
        # by an int key in their own dict; every node of such a shape goes through it, so ids
        # stay unique.
        if not edges:
            if not opens:
                ikey = final
                hit = self._n0.get(ikey)
                if hit is not None:
                    return hit
                n = self._new_node(final, opens, edges)
                self._n0[ikey] = n
                return n
            if final < 0 and len(opens) == 1:
                t, w = opens[0]
                ikey = (<long>t) << 32 | <long>w
                hit = self._n1.get(ikey)
                if hit is not None:
                    return hit
                n = self._new_node(final, opens, edges)
                self._n1[ikey] = n
                return n
        key = (final, opens, edges)
        hit = self.nodes.get(key)
        if hit is not None:
            return hit
        n = self._new_node(final, opens, edges)
        self.nodes[key] = n
        return n

    cdef long _new_node(self, long final, tuple opens, tuple edges) except? -2:
        cdef long sup, n
        if len(self.node_list) >= self.max_nodes:
            raise GrammarTooComplex(
                f"terminal DWA (nodes): more than {self.max_nodes} automaton nodes (limit max_nodes)")
        sup = final
        for _t, w in opens:
            sup = self._wunion_(sup, w)
        for _l, c in edges:
            sup = self._wunion_(sup, self.support[c])
        n = len(self.node_list)
        self.node_list.append((final, opens, edges))
        self.support.append(sup)
        return n

    cdef long _wunion_all_(self, list ws) except? -2:
        """Union of many weights at once (one interval merge instead of a chain of unions)."""
        cdef list pairs = []
        cdef list out = []
        cdef tuple iv
        cdef Py_ssize_t k
        cdef long lo, hi
        ws = _operands(ws)
        if len(ws) <= 2:
            return self._wunion_(ws[0], ws[1]) if len(ws) == 2 else (ws[0] if ws else -1)
        for w in ws:
            iv = self.weight_list[w]
            for k in range(0, len(iv), 2):
                pairs.append((iv[k], iv[k + 1]))
        pairs.sort()
        for lo, hi in pairs:
            if out and lo <= <long>out[len(out) - 1]:
                if hi > <long>out[len(out) - 1]:
                    out[len(out) - 1] = hi
            else:
                out.append(lo)
                out.append(hi)
        return self._weight(tuple(out))

    cdef long _union_all_(self, list ns) except? -2:
        """Union of many nodes at once: one new node, not one per pairwise step (the walk unions
        all children of a trie node; pairwise unions would intern every partial result)."""
        cdef dict opens, edges
        cdef list finals
        ns = _operands(ns)
        if len(ns) <= 2:
            return self._union_(ns[0], ns[1]) if len(ns) == 2 else (ns[0] if ns else -1)
        key = tuple(ns)
        hit = self._union_many.get(key)
        if hit is not None:
            return hit
        finals = []
        opens = {}
        edges = {}
        for n in ns:
            f, o, e = self.node_list[n]
            if <long>f >= 0:
                finals.append(f)
            _group(opens, o)
            _group(edges, e)
        res = self._node(
            self._wunion_all_(finals),
            tuple(sorted([(t, self._wunion_all_(ws)) for t, ws in opens.items()])),
            tuple(sorted([(lab, self._union_all_(cs)) for lab, cs in edges.items()])))
        self._union_many[key] = res
        return res

    def union_all(self, ns):
        return self._union_all_(list(ns))

    def node(self, long final, tuple opens, tuple edges):
        return self._node(final, opens, edges)

    cdef long _prefix_(self, object lab, long n) except? -2:
        if lab is None or n < 0:
            return n
        key = (<long>lab) << 32 | n
        hit = self._prefix.get(key)
        if hit is not None:
            return hit
        r = self._node(-1, (), ((lab, n),))
        self._prefix[key] = r
        return r

    def prefix(self, lab, long n):
        return self._prefix_(lab, n)

    cdef long _union_(self, long a, long b) except? -2:
        cdef long final, res
        cdef tuple oa, ob, ea, eb
        if a < 0 or a == b:
            return b
        if b < 0:
            return a
        key = (a << 32 | b) if a < b else (b << 32 | a)
        hit = self._union.get(key)
        if hit is not None:
            return hit
        fa, oa, ea = self.node_list[a]
        fb, ob, eb = self.node_list[b]
        final = self._wunion_(fa, fb)
        if not ea and not eb and len(oa) == len(ob):
            same = True
            for x, y in zip(oa, ob):
                if x[0] != y[0]:
                    same = False
                    break
            if same:
                res = self._node(final, tuple([(x[0], self._wunion_(x[1], y[1])) for x, y in zip(oa, ob)]), ())
                self._union[key] = res
                return res
        opens = dict(oa)
        for t, w in ob:
            opens[t] = self._wunion_(opens.get(t, -1), w)
        edges = dict(ea)
        for lab, c in eb:
            edges[lab] = self._union_(edges.get(lab, -1), c)
        res = self._node(final, tuple(sorted(opens.items())), tuple(sorted(edges.items())))
        self._union[key] = res
        return res

    def union(self, long a, long b):
        return self._union_(a, b)


cdef class _Walk:
    """The builder's tables, typed, plus its ``_own`` / ``_items`` (same logic and caches)."""
    cdef object b
    cdef Dag dag
    cdef list node_internal, child_ptr, child_byte, child_node, cfgs, cfg_steps, sub_lo, sub_hi
    cdef const uint64_t[:, ::1] sub_bytes
    cdef dict open_labels, canon, neutral
    cdef set end_conds, end_states
    cdef list heights
    cdef long max_height

    def __init__(self, b):
        self.b = b
        self.dag = b.dag
        self.node_internal = b.node_internal
        self.child_ptr = b.child_ptr
        self.child_byte = b.child_byte
        self.child_node = b.child_node
        self.cfgs = b._cfgs
        self.cfg_steps = b._cfg_steps
        self.end_conds = b.end_conds
        self.end_states = b.end_states
        self.open_labels = b._open_labels
        self.sub_lo = b.sub_lo
        self.sub_hi = b.sub_hi
        self.sub_bytes = b.subtree_bytes
        self.heights = b.heights  # None: branches are keyed as they are
        self.canon = b._canon
        self.neutral = b._neutral
        self.max_height = b.max_height

    cdef long canonical(self, long cid, long node) except? -2:
        """``b.canonical(cid, height of node)`` with the memo lookup inlined."""
        if self.heights is None:
            return cid
        cdef long h = self.heights[node]
        hit = self.canon.get(cid * self.max_height + h)
        if hit is None:
            return self.b.canonical(cid, h)
        return hit

    cdef long own(self, long node, long cid) except? -2:
        cdef long tok = self.node_internal[node]
        if tok < 0:
            return -1
        return self.own_tokens((tok, tok + 1), cid)

    cdef long own_tokens(self, tuple bounds, long cid) except? -2:
        """The DAG node of the outcome of the tokens ``bounds`` (flat sorted intervals) all
        ending in branch ``cid``: one node for all of them, as their union would be."""
        cdef long w, final
        lex, conds = self.cfgs[cid]
        if conds:
            self.end_conds.update(conds)
        w = self.dag._weight(bounds)
        if lex == -2:  # BOUNDARY
            return self.dag._node(w, (), ())
        self.end_states.add(lex)
        labels = self.open_labels.get(lex)
        if labels is None:
            labels = self.b.open_labels(lex)
        final = w if labels[0] == -1 else -1  # CLOSED
        return self.dag._node(final, tuple([(t, w) for t in labels if t != -1]), ())

    cdef list items(self, long node, long cid):
        """The children of ``node`` stepped from branch ``cid``, as ``(child, label, branch, n)``.
        Leaf children (a token and nothing below) that reach the same ``(label, branch)`` are
        collapsed into one item ``(bounds, label, branch, n)``: their outcomes differ only by the
        token, so one DAG node with all their tokens (``bounds``, flat intervals) is their union.
        ``n`` counts the (trie node, branch) pairs an item stands for (walk budget)."""
        cdef list items = []
        cdef list row = self.cfg_steps[cid]
        cdef list child_ptr = self.child_ptr
        cdef Py_ssize_t j
        cdef long byte, c, tok
        cdef dict leaves = None
        cdef list run
        cdef long lo, hi
        cdef uint64_t n0, n1, n2, n3
        cdef bint whole
        nkey = cid if self.heights is None else cid * self.max_height + <long>self.heights[node]
        hit = self.neutral.get(nkey)
        if hit is None:
            hit = self.b.neutral_bytes(cid, node)
        nw, loop_res = hit
        n0, n1, n2, n3 = nw[0], nw[1], nw[2], nw[3]
        for j in range(<long>child_ptr[node], <long>child_ptr[node + 1]):
            c = self.child_node[j]
            byte = self.child_byte[j]
            res = row[byte]
            if res is None:
                res = self.b._step(cid, byte)
            whole = <long>child_ptr[c] == <long>child_ptr[c + 1]  # a leaf: always a token
            if whole:
                lo = self.node_internal[c]
                hi = lo + 1
            elif ((n0 >> byte) & 1 if byte < 64 else (n1 >> (byte - 64)) & 1 if byte < 128
                  else (n2 >> (byte - 128)) & 1 if byte < 192 else (n3 >> (byte - 192)) & 1) \
                    and (self.sub_bytes[c, 0] & ~n0) == 0 and (self.sub_bytes[c, 1] & ~n1) == 0 \
                    and (self.sub_bytes[c, 2] & ~n2) == 0 and (self.sub_bytes[c, 3] & ~n3) == 0:
                # every byte below loops (res is the loop result): each token of the subtree ends
                # in the branch itself and in each exit of the loop
                whole = True
                lo = self.sub_lo[c]
                hi = self.sub_hi[c]
            if whole:
                if leaves is None:
                    leaves = {}
                for lab_cid in res:
                    run = leaves.get(lab_cid)
                    if run is None:
                        leaves[lab_cid] = [lo, hi, 1]
                    else:
                        run[len(run) - 1] += 1
                        if run[len(run) - 2] == lo:
                            run[len(run) - 2] = hi
                        else:
                            run.insert(len(run) - 1, lo)
                            run.insert(len(run) - 1, hi)
            else:
                for lab, cid2 in res:
                    items.append((c, lab, self.canonical(cid2, c), 1))
        if leaves is not None:
            for (lab, cid2), run in leaves.items():
                items.append((tuple(run[:len(run) - 1]), lab, cid2, run[len(run) - 1]))
        return items


def walk(b, long node0, long cid0):
    """The memoized trie walk of ``_Builder.walk`` (``b`` is the builder): the DAG node (-1:
    nothing) of the tokens of ``node0``'s subtree scanned from branch ``cid0``. A frame collects
    its own outcome and every child's (label-prefixed) result, and unions them all at once."""
    cdef dict memo = b._memo
    cdef long nn = b._nn
    cdef Dag dag = b.dag
    cdef long max_steps = b.max_walk_steps
    cdef long steps = b.walk_steps
    cdef long key, acc, sub, cnode, cid2, res
    cdef Py_ssize_t i, n_items
    cdef list stack, fr, items, parent, subs
    cdef _Walk wk = _Walk(b)
    key = cid0 * nn + node0
    hit = memo.get(key)
    if hit is not None:
        return hit
    stack = [[key, [wk.own(node0, cid0)], wk.items(node0, cid0), 0]]
    res = -1
    try:
        while stack:
            fr = stack[len(stack) - 1]
            items = fr[2]
            i = fr[3]
            n_items = len(items)
            subs = fr[1]
            pushed = False
            while i < n_items:
                target, lab, cid2, n_pairs = items[i]
                steps += n_pairs
                if steps > max_steps:
                    raise GrammarTooComplex(
                        f"terminal DWA (trie walk): more than {max_steps} (trie node, "
                        "branch) pairs (limit max_walk_steps)")
                if (steps & 1023) < n_pairs:
                    b._check_time("trie walk")
                if type(target) is tuple:  # leaves collapsed into one item
                    sub = wk.own_tokens(target, cid2)
                else:
                    cnode = target
                    key = cid2 * nn + cnode
                    hit = memo.get(key)
                    if hit is None:
                        fr[3] = i
                        stack.append([key, [wk.own(cnode, cid2)], wk.items(cnode, cid2), 0])
                        pushed = True
                        break
                    sub = hit
                if lab is not None:
                    sub = dag._prefix_(lab, sub)
                if sub >= 0:
                    subs.append(sub)
                i += 1
            if pushed:
                continue
            stack.pop()
            acc = dag._union_all_(subs)
            memo[fr[0]] = acc
            if stack:
                parent = stack[len(stack) - 1]
                lab = parent[2][parent[3]][1]
                if lab is not None:
                    acc = dag._prefix_(lab, acc)
                if acc >= 0:
                    parent[1].append(acc)
                parent[3] += 1
            else:
                res = acc
    finally:
        b.walk_steps = steps
    return res
