"""Boundary lexer states whose every token acts either not at all or exactly as from another state:
a Parser-DWA root shared with that state, and a token set that restricts it.

Why. A bounded run — JSON Schema's whitespace gap, at most ``max_indent`` (64) spaces after a line
break — is a chain of lexer states that all differ (each allows fewer more spaces), so each is a
Terminal-DWA root of its own and each multiplies the Parser DWA by the LR states it meets: on
Kubernetes #5 the 70 whitespace states made 1.12M of the Parser DWA's 1.15M states (each one
times the ~4,000 LR states after an object member). Yet ``k`` spaces into the indentation, a token
either dies (it holds more than ``64 - k`` spaces) or feeds the parser exactly what it feeds from
the indentation's start. So the mask from ``k`` is the mask from the start, restricted to the tokens
that survive ``k``: one root, one AND per lane at run time.

The relation, decided on the Terminal DWA's denotation (:mod:`.terminal_dwa`): root ``q`` is a
*restriction* of root ``g`` when ``Lex(q, v)`` is empty or equals ``Lex(g, v)`` for every token
``v``; with ``R`` the tokens of some outcome from ``q`` (the support of ``q``'s root node), that is
``node(q) = node(g) | R``: every weight of ``q``'s tree equals ``g``'s intersected with ``R``,
label for label, down to where the two trees meet (a shared node is its own restriction, its
support lying inside ``R``). A Parser-DWA walk decides each token by that token's outcomes alone,
so ``mask(q, stack) = R ∩ mask(g, stack)``. ``R`` is a union of Terminal-DWA weights, hence of
token classes: the runtime ANDs it into the lane's seed, beside its pending conditions' failures.
Pending conditions belong to the lane, not to its lexer state, and are applied alike.

Candidates. Checking every pair of roots would be quadratic; runs are found on the lexer instead.
A pair ``(succ(g, b), g)`` — a state and the state one byte before it — is a candidate when the two
have the same futures and, on every byte group, the first dies (no event, no successor) or both
report the same events with successors alive alike, and the successor pairs of alive different
successors are candidates themselves (the greatest such set, by refinement). Following a state's
candidate predecessors leads to the start of its run; the exact check above decides, from the
farthest predecessor down, which one it restricts. Candidates only choose what to check: a pair is
aliased only when the denotations say so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from glrmask.budget import current_budget
from glrmask.lexer.dfa import LexerDFA

from .lexer_classes import byte_groups, event_keys
from .terminal_dwa import TerminalDWA

__all__ = ["RootRestriction", "restricted_roots"]

MAX_CHECK_NODES = 20_000
"""Node pairs one exact check may visit before it gives up (the root then stays its own)."""

MAX_TRIES = 4
"""Predecessors up a run checked per root (the farthest first); a long chain of failures stops
here, so the checks stay linear in the roots."""


@dataclass(frozen=True)
class RootRestriction:
    """Root ``root`` (an index into ``boundary_states``) masks as root ``rep`` does, restricted to
    the tokens of the Terminal-DWA weights ``support`` (their union)."""

    root: int
    rep: int
    support: tuple[int, ...]


def restricted_roots(tdwa: TerminalDWA, dfa: LexerDFA, class_sets: Sequence[int], *,
                     max_nodes: int = MAX_CHECK_NODES) -> list[RootRestriction]:
    """The roots of ``tdwa`` that are restrictions of another, unrestricted, root (module
    docstring), in root order. ``dfa``: the dense lexer the Terminal DWA was built over;
    ``class_sets``: each Terminal-DWA weight's token classes (:meth:`TokenClasses.from_weights`)."""
    bs = np.asarray(tdwa.boundary_states, dtype=np.int64)
    if bs.size < 2:
        return []
    pred = _run_predecessors(dfa)
    if not pred:
        return []
    index = {int(q): i for i, q in enumerate(bs.tolist())}
    check = _Check(tdwa, class_sets, max_nodes)
    out: list[RootRestriction] = []
    aliased: set[int] = set()
    budget = current_budget()
    for i, q in enumerate(bs.tolist()):
        if i % 256 == 0:
            budget.check("restricted roots")
        chain = _ancestors(q, pred, index)
        for g in list(reversed(chain))[:MAX_TRIES]:  # the farthest first: the start of the run
            j = index[g]
            if j in aliased or tdwa.roots[j] == tdwa.roots[i]:
                continue
            support = check.restricts(int(tdwa.roots[i]), int(tdwa.roots[j]))
            if support is not None:
                out.append(RootRestriction(i, j, support))
                aliased.add(i)
                break
    # a representative must be a root of its own (an alias of an alias would need two ANDs)
    return [r for r in out if r.rep not in aliased]


def _ancestors(q: int, pred: dict[int, int], index: dict[int, int]) -> list[int]:
    """Boundary states up ``q``'s run, nearest first (cycles cut)."""
    out: list[int] = []
    seen = {q}
    x = pred.get(q)
    while x is not None and x not in seen:
        seen.add(x)
        if x in index:
            out.append(x)
        x = pred.get(x)
    return out


def _run_predecessors(dfa: LexerDFA) -> dict[int, int]:
    """Per state, one candidate predecessor (the smallest): see *Candidates* in the module
    docstring."""
    ev = event_keys(dfa)
    cols = np.asarray(sorted(g[0] for g in byte_groups(dfa, ev)), dtype=np.int64)
    trans = dfa.trans[:, cols].astype(np.int64)
    evc = ev[:, cols]
    n, m = trans.shape
    if n < 2 or m == 0:
        return {}
    g_all = np.repeat(np.arange(n, dtype=np.int64), m)
    q_all = trans.reshape(-1)
    ok = (q_all >= 0) & (q_all != g_all)
    pairs = np.unique(q_all[ok] * n + g_all[ok])  # (many groups of a state step to one successor)
    q, g = pairs // n, pairs % n
    for c in range(m):  # column by column: most pairs fail on their first columns
        tq, eq, eg = trans[q, c], evc[q, c], evc[g, c]
        local = ((tq < 0) & (eq == 0)) | ((eq == eg) & ((tq >= 0) == (trans[g, c] >= 0)))
        q, g = q[local], g[local]
    pairs = q * n + g  # (still ascending)
    budget = current_budget()
    while pairs.size:  # the greatest fixed point over the candidates
        budget.check("restricted roots")
        q, g = pairs // n, pairs % n
        tq, tg = trans[q], trans[g]
        need = (tq >= 0) & (tg >= 0) & (tq != tg)
        rows, cc = np.nonzero(need)
        succ = tq[rows, cc] * n + tg[rows, cc]
        at = np.minimum(np.searchsorted(pairs, succ), pairs.size - 1)  # (pairs ascend)
        bad = rows[pairs[at] != succ]
        if bad.size == 0:
            break
        keep = np.ones(pairs.size, dtype=bool)
        keep[bad] = False
        pairs = pairs[keep]
    pred: dict[int, int] = {}
    for code in pairs.tolist():  # ascending: the smallest predecessor first
        pred.setdefault(code // n, code % n)
    return pred


class _Check:
    """``restricts(dq, dg)``: whether Terminal-DWA node ``dq`` is node ``dg`` restricted to the
    support of ``dq`` (then that support, as the weights whose union it is), else ``None``.

    Token sets are the weights' token-class bitsets (:mod:`.token_classes`): every weight is
    exactly a union of classes, so unions, intersections and differences of weights — all a check
    computes — are the same sets as class bitsets, at the cost of a few machine words each instead
    of merging interval lists thousands long."""

    def __init__(self, tdwa: TerminalDWA, class_sets: Sequence[int], max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.sets = class_sets
        self.edge_ptr = tdwa.edge_ptr.tolist()
        self.edge_label = tdwa.edge_label.tolist()
        self.edge_target = tdwa.edge_target.tolist()
        self.edge_weight = tdwa.edge_weight.tolist()
        self.open_ptr = tdwa.open_ptr.tolist()
        self.open_label = tdwa.open_label.tolist()
        self.open_weight = tdwa.open_weight.tolist()
        self.final_weight = tdwa.final_weight.tolist()

    def bits(self, w: int) -> int:
        return self.sets[w] if w >= 0 else 0

    def _row(self, d: int) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
        opens = {self.open_label[k]: self.open_weight[k] for k in range(self.open_ptr[d], self.open_ptr[d + 1])}
        edges = {self.edge_label[k]: (self.edge_target[k], self.edge_weight[k])
                 for k in range(self.edge_ptr[d], self.edge_ptr[d + 1])}
        return opens, edges

    def restricts(self, dq: int, dg: int) -> Optional[tuple[int, ...]]:
        bits = self.bits
        opens, edges = self._row(dq)
        support = [w for w in [self.final_weight[dq], *opens.values(), *(w for _, w in edges.values())] if w >= 0]
        r = 0
        for w in support:
            r |= bits(w)
        seen: set[tuple[int, int]] = set()
        todo = [(dq, dg)]
        while todo:
            a, b = todo.pop()
            if a == b or (a, b) in seen:
                continue  # one node: its outcomes are the same, and only r's tokens reach it
            seen.add((a, b))
            if len(seen) > self.max_nodes:
                return None
            fa = bits(self.final_weight[a])
            if fa != bits(self.final_weight[b]) & r:
                return None
            oa, ea = self._row(a)
            ob, eb = self._row(b)
            if not oa.keys() <= ob.keys() or not ea.keys() <= eb.keys():
                return None
            for lab, w in ob.items():
                mine, theirs = bits(oa.get(lab, -1)), bits(w) & r
                if mine == theirs:
                    continue
                if mine & ~theirs:
                    return None  # an outcome g lacks
                # g's extra "then accept lab" outcomes must be implied by q's: closed here, or
                # closed after lab (consuming lab is accepting it)
                implied = fa
                if lab in ea:
                    implied |= bits(self.final_weight[ea[lab][0]])
                if theirs & ~mine & ~implied:
                    return None
            for lab, (tb, wb) in eb.items():
                if lab in ea:
                    todo.append((ea[lab][0], tb))
                elif bits(wb) & r:
                    return None  # g has outcomes past lab for tokens q keeps
        return tuple(sorted(set(support)))
