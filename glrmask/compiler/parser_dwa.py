"""The Parser DWA: the Terminal DWA composed with the stack-effect automata, determinized over parser
states read top-down (DESIGN §4.8; notes §1, §3.10).

Why. A static mask must answer "which tokens can the parser stack below accept" without scanning
the vocabulary per mask. The Terminal DWA (:mod:`.terminal_dwa`) knows, per boundary lexer state,
which terminal sequences each token feeds the parser; the stack-effect automata
(:mod:`.stack_effects`) know what each terminal reads from and writes to the stack. Composed and
determinized, they give one deterministic automaton per boundary lexer state that reads the parser
stack top-down, one LR state per step, and ORs the tokens accepted on each transition: a mask is
a walk of ``depth`` table lookups, whatever the vocabulary.

Composition with cancellation (compile time only). A *settled* product state ``(d, P)`` stands at
Terminal-DWA node ``d`` between terminals, with ``P`` the writes of the terminals consumed so far
that no later read has cancelled (a LIFO, ``P[-1]`` on top, above the still-unread original stack).
Consuming terminal ``t`` runs ``t``'s effect automaton, reading ``P`` top-down first: a pending
write ``p`` takes the edge a concrete stack would take (the explicit edge for ``p``, else DEFAULT),
so ``p+ p-`` cancels, ``p+ q-`` dies, DEFAULT cancels any ``p`` without an explicit edge. A final
of the effect automaton with write sequence ``w`` moves to settled ``(d', P_rest + w)``. A CLOSED
final of ``d`` accepts as is; an open final ``(t, w)`` accepts when ``t`` can be shifted. Everything
that reads only pending writes is independent of the original stack and memoized per settled state
(:meth:`_Composer.closure`): the weight accepted at once and the *read states* ``(t, e, d')`` —
effect automaton ``t`` in state ``e`` about to read the original stack, continuing at ``d'``
(``OPEN`` for an open final) — each with the tokens of the paths reaching it.

Weighted determinization. A Parser-DWA state is a set of read states, each with its *residual*
token set (the tokens still alive on some path to it). Reading LR state ``s`` steps every member,
collects the tokens that reach acceptance (the transition's *accept weight*) and continues with
the rest; tokens accepted are subtracted from every continuing residual (final-weight subtraction:
they are in the mask already), so states shrink as they go and the walk stops as soon as nothing
is left (target ``-1``). Labels are LR states; a state's explicit edges are the LR states some
member's effect automaton names, every other LR state takes the DEFAULT edge; explicit edges equal
to the DEFAULT edge are dropped. The automaton is acyclic (effect automata are, and the Terminal
DWA's node ids only grow), so every walk ends within its depth.

Weights are token *classes* (:mod:`.token_classes`): bitsets of ``n_classes`` bits; the runtime
expands a mask to tokens once. Determinization happens on demand (:class:`ParserDWA`), so what an
artifact stores is its input — the Terminal DWA, the stack effects and the class sets, all flat
arrays — and :meth:`ParserDWA.arrays` exports a complete automaton in the flat layout a native
walk reads (``int32`` unless noted):

* per Terminal-DWA root ``i`` (``boundary_states[i]`` is its lexer state): ``start_accept[i]``
  (weight accepted before reading the stack, ``-1`` none) and ``start_state[i]`` (``-1`` none);
* states ``0 .. n_states-1``; explicit edges CSR ``edge_ptr`` / ``edge_label`` (LR state, ascending)
  / ``edge_target`` (``-1`` = stop) / ``edge_accept`` (weight or ``-1``); ``default_target``,
  ``default_accept`` per state;
* ``weights uint64[n_weights, n_class_words]``: dense class bitsets.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex
from glrmask.lr.glr import StackNode

from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA

__all__ = ["OPEN", "ParserDWA", "DEFAULT_BUDGETS"]

OPEN = -1
"""The continuation of a read state that belongs to an open final: reaching a final accepts."""

DEFAULT_BUDGETS = {"max_closures": 2_000_000, "max_states": 500_000}
"""Default limits on the memo tables: settled product states and determinized states."""

ReadState = tuple[int, int, int]  # (terminal, effect state, next TDWA node or OPEN)


class ParserDWA:
    """The determinized automaton, built on demand, and the mask walk over parser stacks.

    States and transitions are determinized lazily, on first use, and memoized (like the
    recognizer's configuration-set DFA): a grammar whose complete automaton is large (SQL's has
    tens of thousands of states) only pays for the part its requests visit. :meth:`expand`
    determinizes eagerly, breadth-first, up to a budget — at compile time, to report sizes and to
    warm the tables; :meth:`arrays` exports the flat layout of a complete automaton. The memo
    tables can be dropped between masks (:meth:`trim`) without changing any result."""

    def __init__(self, tdwa: TerminalDWA, effects: StackEffects, class_sets: list[int], n_classes: int,
                 **budgets) -> None:
        unknown = set(budgets) - set(DEFAULT_BUDGETS)
        if unknown:
            raise TypeError(f"unknown parser DWA budget(s): {sorted(unknown)}")
        self.limits = {**DEFAULT_BUDGETS, **budgets}
        self.tdwa = tdwa
        self.effects = effects
        self.class_sets = class_sets
        self.n_classes = n_classes
        self._root_index = {int(q): i for i, q in enumerate(tdwa.boundary_states)}
        self._cond_index = {int(c): i for i, c in enumerate(tdwa.cond_ids)}
        self._reset()

    def _reset(self) -> None:
        self._c = _Composer(self.tdwa, self.effects, self.class_sets, self.n_classes, **self.limits)
        self._starts: dict[int, tuple[int, int]] = {}
        self._rows: list[Optional[tuple[dict[int, tuple[int, int]], frozenset, Optional[tuple[int, int]]]]] = []

    @property
    def n_states(self) -> int:
        """Determinized states built so far."""
        return len(self._c.states)

    @property
    def n_closures(self) -> int:
        return len(self._c.closures)

    def trim(self, max_states: int = 200_000) -> None:
        """Drop the memo tables once they hold more than ``max_states`` states (between masks only)."""
        if self.n_states > max_states or self.n_closures > self.limits["max_closures"] // 2:
            self._reset()

    # ---------------------------------------------------------------- queries
    def has_root(self, q: int) -> bool:
        return int(q) in self._root_index

    def has_cond(self, c: int) -> bool:
        return int(c) in self._cond_index

    def fail_bits(self, cond: int) -> int:
        """Classes of the tokens that drive pending condition ``cond`` to FALSE."""
        w = int(self.tdwa.fail_seed[self._cond_index[int(cond)]])
        return self.class_sets[w] if w >= 0 else 0

    def start(self, q: int) -> tuple[int, int]:
        """Boundary lexer state ``q``: (classes accepted before reading the stack, start state)."""
        hit = self._starts.get(q)
        if hit is None:
            acc, reads = self._c.closure(int(self.tdwa.roots[self._root_index[int(q)]]), ())
            hit = self._starts[q] = (acc, self._c.state(dict(reads), acc))
        return hit

    def step(self, x: int, s: int) -> tuple[int, int]:
        """Read LR state ``s`` in state ``x``: (next state or ``-1``, classes accepted)."""
        rows = self._rows
        while len(rows) <= x:
            rows.append(None)
        row = rows[x]
        if row is None:
            members = self._c.states[x]
            eff = self._c.eff
            names = frozenset(n for (t, e, _d), _w in members for n in eff[t].explicit[e])
            row = rows[x] = ({}, names, None)
        edges, names, dflt = row
        if s in names:
            hit = edges.get(s)
            if hit is None:
                hit = edges[s] = self._c.delta(self._c.states[x], s)
            return hit
        if dflt is None:
            dflt = self._c.delta(self._c.states[x], None)
            rows[x] = (edges, names, dflt)
        return dflt

    def accepted(self, q: int, stack: Optional[StackNode], memo: Optional[dict] = None) -> int:
        """Classes of the tokens boundary lexer state ``q`` admits on parser stack ``stack`` (before
        condition seeds). ``memo`` may be shared across the stacks of one mask: GLR stacks share
        their lower parts (hash-consed nodes), which are then walked once per automaton state."""
        acc, x = self.start(q)
        return acc | self._walk(x, stack, {} if memo is None else memo)

    def _walk(self, x: int, node: Optional[StackNode], memo: dict) -> int:
        path: list[tuple[int, StackNode, int]] = []
        tail = 0
        while x >= 0 and node is not None:
            hit = memo.get((x, node))
            if hit is not None:
                tail = hit
                break
            nx, acc = self.step(x, node.state)
            path.append((x, node, acc))
            x, node = nx, node.parent
        for px, pnode, acc in reversed(path):
            tail |= acc
            memo[(px, pnode)] = tail
        return tail

    # ---------------------------------------------------------------- eager determinization
    def expand(self, *, max_states: Optional[int] = None, max_seconds: Optional[float] = None) -> bool:
        """Determinize every state reachable from every root, breadth-first, until done (True) or a
        limit is hit (False; the rest stays lazy)."""
        t0 = time.perf_counter()
        self._c.deadline = None if max_seconds is None else t0 + max_seconds
        try:
            for q in self.tdwa.boundary_states.tolist():
                self.start(q)
            budget = current_budget()  # the compile's deadline and memory backstop (glrmask.budget)
            x = 0
            while x < self.n_states:
                if not x & 63:
                    budget.check("parser DWA")
                if max_states is not None and self.n_states > max_states:
                    return False
                if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                    return False
                self.step(x, -1)  # an LR state no effect automaton names: the DEFAULT edge
                for s in sorted(self._rows[x][1]):
                    self.step(x, s)
                x += 1
            return True
        except _OutOfTime:
            return False
        finally:
            self._c.deadline = None

    def arrays(self) -> dict[str, np.ndarray]:
        """The flat layout of the complete automaton (runs :meth:`expand` without limits): see the
        module docstring. Explicit edges equal to the DEFAULT edge are left out."""
        self.expand()
        weight_ids: dict[int, int] = {}

        def wid(bits: int) -> int:
            return weight_ids.setdefault(bits, len(weight_ids)) if bits else -1

        ptr, labels, targets, accepts, dtarget, daccept = [0], [], [], [], [], []
        for x in range(self.n_states):
            edges, _names, dflt = self._rows[x]
            for s in sorted(edges):
                if edges[s] != dflt:
                    labels.append(s)
                    targets.append(edges[s][0])
                    accepts.append(wid(edges[s][1]))
            ptr.append(len(labels))
            dtarget.append(dflt[0])
            daccept.append(wid(dflt[1]))
        starts = [self.start(q) for q in self.tdwa.boundary_states.tolist()]
        start_accept = [wid(a) for a, _x in starts]
        n_words = max(1, (self.n_classes + 63) // 64)
        dense = np.zeros((len(weight_ids), n_words), dtype=np.uint64)
        for bits, i in weight_ids.items():
            dense[i] = np.frombuffer(bits.to_bytes(n_words * 8, "little"), dtype="<u8")
        i32 = lambda v: np.asarray(v, dtype=np.int32)  # noqa: E731
        return {
            "boundary_states": self.tdwa.boundary_states, "start_accept": i32(start_accept),
            "start_state": i32([x for _a, x in starts]), "edge_ptr": i32(ptr), "edge_label": i32(labels),
            "edge_target": i32(targets), "edge_accept": i32(accepts), "default_target": i32(dtarget),
            "default_accept": i32(daccept), "weights": dense,
        }

    def __repr__(self) -> str:
        return f"ParserDWA(roots={len(self._root_index)}, states built={self.n_states})"


class _OutOfTime(Exception):
    """Eager determinization ran out of its time; memo tables hold only finished entries."""


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


class _Composer:
    """Memoized closures of settled states and the subset construction's states and steps."""

    def __init__(self, tdwa: TerminalDWA, effects: StackEffects, class_sets: list[int], n_classes: int, *,
                 max_closures: int, max_states: int) -> None:
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
        self.deadline: Optional[float] = None  # set by ParserDWA.expand: stop eager work in time

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
        if self.deadline is not None and not len(self.closures) & 1023 and time.perf_counter() > self.deadline:
            raise _OutOfTime
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
    def state(self, items: dict[ReadState, int], done: int) -> int:
        """Intern the residual set (tokens in ``done`` are subtracted); ``-1`` when nothing is left."""
        key = tuple(sorted((rs, w & ~done) for rs, w in items.items() if w & ~done))
        if not key:
            return -1
        x = self._state_ids.get(key)
        if x is None:
            x = len(self.states)
            if x >= self.max_states:
                raise GrammarTooComplex(
                    f"parser DWA: more than {self.max_states} determinized states (limit max_states)")
            self._state_ids[key] = x
            self.states.append(key)
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
