"""The Parser-DWA construction in plain Python: the test oracle of the native determinization
(``glrmask_ext.pdwa_build``).

Why it lives in the tests. The package builds the Parser DWA natively only (no Python copy of
native code ships); this is the original, readable construction the native one was ported from —
memoized closures of settled product states ``(TDWA node, pending writes)``, the subset
construction over read states with residual class sets, final-weight subtraction, breadth-first
numbering from the roots in ``tdwa.boundary_states`` order, DEFAULT edge first, then explicit
labels ascending — and its :func:`reference_arrays` must equal ``ParserDWA.arrays()`` exactly.
The semantics are the module docstring of :mod:`glrmask.compiler.parser_dwa`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from glrmask.errors import GrammarTooComplex

OPEN = -1
ReadState = tuple[int, int, int]  # (terminal, effect state, next TDWA node or OPEN)


class _Effect:
    """One effect automaton as Python lists (fast stepping during composition)."""

    __slots__ = ("explicit", "default", "finals", "moves")

    def __init__(self, aut) -> None:
        n = aut.n_states
        ptr = aut.edge_ptr.tolist()
        labels = aut.edge_label.tolist()
        targets = aut.edge_target.tolist()
        self.explicit: list[dict[int, int]] = [
            {labels[k]: targets[k] for k in range(ptr[d], ptr[d + 1])} for d in range(n)
        ]
        self.default: list[int] = aut.default_target.tolist()
        self.finals: list[tuple[tuple[int, ...], ...]] = [tuple(aut.finals(d)) for d in range(n)]
        self.moves: list[bool] = [
            self.default[d] >= 0 or any(t >= 0 for t in self.explicit[d].values()) for d in range(n)
        ]

    def step(self, e: int, s: int) -> int:
        t = self.explicit[e].get(s)
        return self.default[e] if t is None else t


class ReferenceComposer:
    """Memoized closures of settled states and the subset construction's states and steps."""

    def __init__(self, tdwa, effects, class_sets: list[int], n_classes: int, *,
                 max_closures: int = 2_000_000, max_states: int = 500_000) -> None:
        self.tdwa = tdwa
        self.n_classes = n_classes
        self.eff = [_Effect(a) for a in effects.automata]
        self.cs = class_sets
        self.max_closures, self.max_states = max_closures, max_states
        self.closures: dict[tuple[int, tuple[int, ...]], tuple[int, tuple[tuple[ReadState, int], ...]]] = {}
        self._final = tdwa.final_weight.tolist()
        self._open_ptr = tdwa.open_ptr.tolist()
        self._open_label = tdwa.open_label.tolist()
        self._open_weight = tdwa.open_weight.tolist()
        self._edge_ptr = tdwa.edge_ptr.tolist()
        self._edge_label = tdwa.edge_label.tolist()
        self._edge_target = tdwa.edge_target.tolist()
        self._edge_weight = tdwa.edge_weight.tolist()
        self._state_ids: dict[tuple, int] = {}
        self.states: list[tuple[tuple[ReadState, int], ...]] = []
        self.tags: list[int] = []  # per state: the start class it starts (only its labels are read), or -1
        self._root_index = {int(q): i for i, q in enumerate(tdwa.boundary_states)}
        self._starts: dict[int, tuple[int, list[tuple[int, int]]]] = {}
        self.tdwa_n_labels = int(effects.table.n_states)
        self._rows: list[Optional[tuple[dict[int, tuple[int, int]], frozenset, Optional[tuple[int, int]]]]] = []

    def _bits(self, w: int) -> int:
        return self.cs[w] if w >= 0 else 0

    # ---------------------------------------------------------------- composition
    def closure(self, d: int, pending: tuple[int, ...]) -> tuple[int, tuple[tuple[ReadState, int], ...]]:
        """Settled state ``(d, pending)``: (tokens accepted without reading the original stack,
        ``((read state, tokens of the paths reaching it), ...)``)."""
        key = (d, pending)
        hit = self.closures.get(key)
        if hit is not None:
            return hit
        if len(self.closures) >= self.max_closures:
            raise GrammarTooComplex(
                f"parser DWA: more than {self.max_closures} product states (limit max_closures)")
        acc = self._bits(self._final[d])
        reads: dict[ReadState, int] = {}
        eff = self.eff
        n_p = len(pending)
        for k in range(self._open_ptr[d], self._open_ptr[d + 1]):
            t = self._open_label[k]
            wb = self._bits(self._open_weight[k])
            a = eff[t]
            e, i = 0, n_p
            while True:
                if a.finals[e]:  # t is shifted: the open lexeme can be accepted
                    acc |= wb
                    break
                if i == 0:
                    if a.moves[e]:
                        reads[(t, e, OPEN)] = reads.get((t, e, OPEN), 0) | wb
                    break
                i -= 1
                e = a.step(e, pending[i])
                if e < 0:
                    break
        for k in range(self._edge_ptr[d], self._edge_ptr[d + 1]):
            t = self._edge_label[k]
            d2 = self._edge_target[k]
            wb = self._bits(self._edge_weight[k])
            a = eff[t]
            e, i = 0, n_p
            while True:
                for ws in a.finals[e]:
                    acc2, reads2 = self.closure(d2, pending[:i] + ws)
                    acc |= wb & acc2
                    for rs, w2 in reads2:
                        w = wb & w2
                        if w:
                            reads[rs] = reads.get(rs, 0) | w
                if i == 0:
                    if a.moves[e]:
                        rs = (t, e, d2)
                        reads[rs] = reads.get(rs, 0) | wb
                    break
                i -= 1
                e = a.step(e, pending[i])
                if e < 0:
                    break
        res = (acc, tuple(reads.items()))
        self.closures[key] = res
        return res

    # ---------------------------------------------------------------- determinization
    def state(self, items: dict[ReadState, int], done: int, tag: int = -1) -> int:
        """Intern the residual set (tokens in ``done`` are subtracted); ``-1`` when nothing is left.
        ``tag``: the start class of a start state (one state per class: it reads only that class's
        LR states)."""
        members = tuple(sorted((rs, w & ~done) for rs, w in items.items() if w & ~done))
        if not members:
            return -1
        key = (tag, members)
        x = self._state_ids.get(key)
        if x is None:
            x = len(self.states)
            if x >= self.max_states:
                raise GrammarTooComplex(
                    f"parser DWA: more than {self.max_states} determinized states (limit max_states)")
            self._state_ids[key] = x
            self.states.append(members)
            self.tags.append(tag)
        return x

    def delta(self, members: tuple[tuple[ReadState, int], ...], s: Optional[int]) -> tuple[int, int]:
        """Read LR state ``s`` (``None``: one no member names, i.e. DEFAULT): (target, accept weight)."""
        eff = self.eff
        acc = 0
        new: dict[ReadState, int] = {}
        for (t, e, d2), w in members:
            a = eff[t]
            e2 = a.default[e] if s is None else a.step(e, s)
            if e2 < 0:
                continue
            fin = a.finals[e2]
            if fin and d2 == OPEN:
                acc |= w
                continue
            for ws in fin:
                acc2, reads2 = self.closure(d2, ws)
                acc |= w & acc2
                for rs, w2 in reads2:
                    x = w & w2
                    if x:
                        new[rs] = new.get(rs, 0) | x
            if a.moves[e2]:
                rs = (t, e2, d2)
                new[rs] = new.get(rs, 0) | w
        return self.state(new, acc), acc

    # ---------------------------------------------------------------- the walk's steps
    def start_classes(self) -> tuple[list[int], list[frozenset[int]]]:
        """The start class of every LR state a first read names (``-1``: none) and each class's
        terminals: the terminals whose automaton's start state steps somewhere on that LR state."""
        n = self.tdwa_n_labels
        live: list[list[int]] = [[] for _ in range(n)]
        for t, a in enumerate(self.eff):
            for s in range(n):
                if a.step(0, s) >= 0:
                    live[s].append(t)
        ids: dict[tuple[int, ...], int] = {}
        label_class = [ids.setdefault(tuple(ts), len(ids)) if ts else -1 for ts in live]
        return label_class, [frozenset(ts) for ts in ids]

    def start(self, q: int) -> tuple[int, list[tuple[int, int]]]:
        """Boundary lexer state ``q``: (classes accepted before reading the stack, ``[(start class,
        state of the reads live in it)]`` for the classes with a state, ascending)."""
        hit = self._starts.get(q)
        if hit is None:
            acc, reads = self.closure(int(self.tdwa.roots[self._root_index[int(q)]]), ())
            entries = []
            anywhere = any(rs[1] != 0 for rs, _w in reads)  # a read past its start: all, in every class
            for c, terms in enumerate(self._class_terms):
                members = {rs: w for rs, w in reads if anywhere or rs[0] in terms}
                if members:
                    x = self.state(members, acc, c)
                    if x >= 0:
                        entries.append((c, x))
            hit = self._starts[q] = (acc, entries)
        return hit

    def step(self, x: int, s: int) -> tuple[int, int]:
        """Read LR state ``s`` in state ``x``: (next state or ``-1``, classes accepted)."""
        rows = self._rows
        while len(rows) <= x:
            rows.append(None)
        row = rows[x]
        if row is None:
            names = frozenset(n for (t, e, _d), _w in self.states[x] for n in self.eff[t].explicit[e]
                              if self.tags[x] < 0 or self.label_class[n] == self.tags[x])
            row = rows[x] = ({}, names, None)
        edges, names, dflt = row
        if s in names:
            hit = edges.get(s)
            if hit is None:
                hit = edges[s] = self.delta(self.states[x], s)
            return hit
        if dflt is None:
            dflt = self.delta(self.states[x], None)
            rows[x] = (edges, names, dflt)
        return dflt

    def expand(self) -> None:
        """Determinize every state reachable from every root, breadth-first."""
        self.label_class, self._class_terms = self.start_classes()
        for q in self.tdwa.boundary_states.tolist():
            self.start(q)
        x = 0
        while x < len(self.states):
            self.step(x, -1)  # an LR state no effect automaton names: the DEFAULT edge
            for s in sorted(self._rows[x][1]):
                self.step(x, s)
            x += 1


def reference_arrays(tdwa, effects, class_sets: list[int], n_classes: int, **budgets) -> dict[str, np.ndarray]:
    """The flat layout of the complete automaton, built in Python (``ParserDWA.arrays`` layout)."""
    c = ReferenceComposer(tdwa, effects, class_sets, n_classes, **budgets)
    c.expand()
    weight_ids: dict[int, int] = {}

    def wid(bits: int) -> int:
        return weight_ids.setdefault(bits, len(weight_ids)) if bits else -1

    ptr, labels, targets, accepts, dtarget, daccept = [0], [], [], [], [], []
    for x in range(len(c.states)):
        edges, _names, dflt = c._rows[x]
        for s in sorted(edges):
            if edges[s] != dflt:
                labels.append(s)
                targets.append(edges[s][0])
                accepts.append(wid(edges[s][1]))
        ptr.append(len(labels))
        dtarget.append(dflt[0])
        daccept.append(wid(dflt[1]))
    starts = [c.start(q) for q in tdwa.boundary_states.tolist()]
    start_accept = [wid(a) for a, _x in starts]
    start_ptr = np.cumsum([0] + [len(e) for _a, e in starts])
    n_words = max(1, (n_classes + 63) // 64)
    dense = np.zeros((len(weight_ids), n_words), dtype=np.uint64)
    for bits, i in weight_ids.items():
        dense[i] = np.frombuffer(bits.to_bytes(n_words * 8, "little"), dtype="<u8")
    i32 = lambda v: np.asarray(v, dtype=np.int32)  # noqa: E731
    return {
        "boundary_states": tdwa.boundary_states, "start_accept": i32(start_accept),
        "start_class": i32(c.label_class), "start_ptr": i32(start_ptr),
        "start_class_of": i32([k for _a, e in starts for k, _x in e]),
        "start_target": i32([x for _a, e in starts for _k, x in e]), "edge_ptr": i32(ptr), "edge_label": i32(labels),
        "edge_target": i32(targets), "edge_accept": i32(accepts), "default_target": i32(dtarget),
        "default_accept": i32(daccept), "weights": dense,
        "root_restrict": np.full(len(starts), -1, dtype=np.int32),  # the reference restricts no root
    }
