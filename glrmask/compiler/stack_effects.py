"""Per-terminal stack-effect automata (DESIGN §4.5; notes §1 item 4, §3.5).

Why. Consuming one terminal ``t`` makes an LR parser do zero or more reductions and then one shift.
Viewed from the parser stack that is: consume a few states from the top of the old stack (the
*reads*, top-down) and put a few states back (the *writes*, bottom-up). The Parser DWA (§4.8)
splices these effects into the Terminal DWA, so each terminal's effect is compiled once, here,
into a small acyclic automaton instead of being re-derived at every mask.

How. The table is executed *symbolically* on an unknown stack. A configuration is the known
segment ``K`` (states known to sit on top of the still-unread rest of the old stack). While ``K``
is non-empty its top decides the action on lookahead ``t``: a shift ends the path with writes
``K + (shift,)``; a reduction by ``A -> α`` pops ``|α|`` states and does ``goto(top, A)``. When a
pop exhausts ``K`` the remaining pops *read* states of the old stack without looking at them
(DEFAULT reads: any state), and the revealed state that ``goto`` needs is an explicit read. The
very first step reads the top explicitly (its action is needed). A read state that stays on the
stack (the state revealed under a reduction, or the initial top) is consumed and written back, so
every result is the pure form "pop the read prefix, push the writes". Normalization (§4.2) makes
the chains of reductions between two shifts follow the acyclic right-end graph, so every path is
finite and the automaton is acyclic.

The nondeterministic reads (GLR conflicts, DEFAULT versus explicit reads of different branches) are
determinized by a subset construction over read labels: explicit reads shadow DEFAULT, and a
DEFAULT branch also follows every explicit label. Because a conflict can give one read prefix
several results, a final state carries a *set* of write sequences. The result is minimized
(canonical bottom-up hashing of an acyclic DFA, explicit edges that agree with DEFAULT dropped) and
budgeted: more than ``max_states`` subset states for one terminal raises
:class:`~glrmask.errors.GrammarTooComplex` naming the terminal.

Two builders, one result. :meth:`StackEffects.build` runs the construction natively by default
(:mod:`glrmask_ext.stack_effects_build`: interned integer ids over the table's sparse rows, the GIL
released; a large JSON Schema's 230 terminals over 13k LR states take 0.05 s instead of 7 s); the
Python construction below (``native=False``) is the reference it is tested against, array for
array (tests/test_stack_effects_native.py).

Semantics of one automaton (its denotation; tests/test_stack_effects.py runs it). Walk a concrete stack top-down from state
0. Having consumed ``i`` states and standing in automaton state ``d``: if ``d`` is final, every
write sequence ``w`` of ``d`` yields a result — the stack with its top ``i`` states removed and
``w`` pushed (``w[0]`` first, ``w[-1]`` ends on top). Then read the next state ``p`` (none left:
the walk stops — reading below the bottom fails): the explicit edge labelled ``p`` if there is one
(its target may be ``-1``: dead, shadowing DEFAULT), else the DEFAULT target (``-1``: none).
For every stack the GLR driver can be in, the results equal ``GLR.feed({stack}, t)``.

Flat layout of :class:`EffectAutomaton` (all ``int32`` numpy arrays; a Cython runtime and the
Parser DWA composition read them directly):

* states ``0 .. n_states-1`` in topological order: the start is 0 and every edge goes to a higher
  id (so acyclicity is ``edge_target > source`` and bottom-up passes are reverse id order);
* explicit read edges in CSR form: the edges of state ``d`` are
  ``k in range(edge_ptr[d], edge_ptr[d+1])`` with label ``edge_label[k]`` (a parser state, sorted
  ascending within a state) and target ``edge_target[k]`` (``-1`` = dead). Reads are the only
  edge kind: writes live on finals, which keeps the automaton deterministic over reads;
* ``default_target[d]``: DEFAULT (any parser state not listed on an explicit edge of ``d``), ``-1``
  when there is none;
* finals: the write sequences of state ``d`` are ids ``final_writes[final_ptr[d]:final_ptr[d+1]]``
  (empty = not final), sorted; write sequence ``w`` is
  ``write_states[write_ptr[w]:write_ptr[w+1]]`` in bottom-up (push) order. The empty write
  sequence is legal (only in the identity automaton).

A rejecting automaton (the terminal can never be shifted) is one non-final state with no edges.
The identity automaton (ignored terminals) is one final state whose only write sequence is empty.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import ArtifactError, GlrmaskError, GrammarTooComplex
from glrmask.lr.table import LRTable
from glrmask_ext import stack_effects_build as native

__all__ = [
    "DEFAULT_MAX_STATES",
    "EffectAutomaton",
    "StackEffects",
    "StackEffectError",
]

DEFAULT_MAX_STATES = 200_000
"""Default budget per terminal: subset-construction states, and symbolic configurations whose top
state has an action on the terminal."""

_DEAD = -1


class StackEffectError(GlrmaskError):
    """Internal error: the table breaks an invariant the symbolic execution relies on (a cycle of
    reductions without a shift means the grammar was not normalized)."""


# ---------------------------------------------------------------------------------------------
# the automaton
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class EffectAutomaton:
    """One terminal's stack effect as an acyclic DFA over read labels; layout in the module doc."""

    edge_ptr: np.ndarray
    edge_label: np.ndarray
    edge_target: np.ndarray
    default_target: np.ndarray
    final_ptr: np.ndarray
    final_writes: np.ndarray
    write_ptr: np.ndarray
    write_states: np.ndarray

    @property
    def n_states(self) -> int:
        return len(self.default_target)

    @property
    def n_edges(self) -> int:
        """Explicit edges plus DEFAULT edges."""
        return len(self.edge_label) + int(np.count_nonzero(self.default_target >= 0))

    @property
    def n_writes(self) -> int:
        return len(self.write_ptr) - 1

    @property
    def is_empty(self) -> bool:
        """True when no stack lets the terminal be shifted."""
        return len(self.final_writes) == 0

    def writes(self, w: int) -> tuple[int, ...]:
        """Write sequence ``w`` as a tuple of parser states, bottom-up."""
        return tuple(int(x) for x in self.write_states[self.write_ptr[w]: self.write_ptr[w + 1]])

    def finals(self, d: int) -> list[tuple[int, ...]]:
        """The write sequences accepted at state ``d`` (empty: not final)."""
        return [self.writes(int(w)) for w in self.final_writes[self.final_ptr[d]: self.final_ptr[d + 1]]]

    def step(self, d: int, parser_state: int) -> int:
        """The target of reading ``parser_state`` in state ``d`` (``-1``: the path dies)."""
        lo, hi = int(self.edge_ptr[d]), int(self.edge_ptr[d + 1])
        labels = self.edge_label
        k = lo + int(np.searchsorted(labels[lo:hi], parser_state))
        if k < hi and labels[k] == parser_state:
            return int(self.edge_target[k])
        return int(self.default_target[d])

    def edges(self, d: int) -> Iterator[tuple[int, int]]:
        """Explicit ``(label, target)`` pairs of state ``d``."""
        for k in range(int(self.edge_ptr[d]), int(self.edge_ptr[d + 1])):
            yield int(self.edge_label[k]), int(self.edge_target[k])

    def max_reads(self) -> int:
        """The longest read prefix on any accepting path (how deep the effect looks)."""
        n = self.n_states
        best = [-1] * n  # longest path from d to a final, -1 if none
        for d in range(n - 1, -1, -1):
            b = 0 if self.final_ptr[d + 1] > self.final_ptr[d] else -1
            targets = [t for _, t in self.edges(d)]
            if self.default_target[d] >= 0:
                targets.append(int(self.default_target[d]))
            for t in targets:
                if t >= 0 and best[t] >= 0:
                    b = max(b, best[t] + 1)
            best[d] = b
        return max(best[0], 0) if n else 0

    def is_acyclic(self) -> bool:
        """Every edge goes to a higher state id (the layout's invariant)."""
        for d in range(self.n_states):
            for _, t in self.edges(d):
                if t != _DEAD and t <= d:
                    return False
            if self.default_target[d] != _DEAD and self.default_target[d] <= d:
                return False
        return True

    # -- construction from python lists -----------------------------------------------------------
    @classmethod
    def from_lists(
        cls,
        edges: Sequence[Sequence[tuple[int, int]]],
        defaults: Sequence[int],
        finals: Sequence[Iterable[tuple[int, ...]]],
    ) -> "EffectAutomaton":
        """Pack per-state edge lists (sorted by label), default targets and write-sequence sets."""
        n = len(defaults)
        edge_ptr = np.zeros(n + 1, dtype=np.int32)
        labels: list[int] = []
        targets: list[int] = []
        for d in range(n):
            for lab, tgt in edges[d]:
                labels.append(lab)
                targets.append(tgt)
            edge_ptr[d + 1] = len(labels)
        pool: dict[tuple[int, ...], int] = {}
        final_ptr = np.zeros(n + 1, dtype=np.int32)
        fw: list[int] = []
        for d in range(n):
            # ids by first appearance, state by state, ascending sequences within a state: a
            # numbering that depends on nothing but the automaton (not on set iteration order)
            ids = sorted(pool.setdefault(w, len(pool)) for w in sorted(set(finals[d])))
            fw.extend(ids)
            final_ptr[d + 1] = len(fw)
        write_ptr = np.zeros(len(pool) + 1, dtype=np.int32)
        ws: list[int] = []
        for i, w in enumerate(pool):  # dict order = id order
            ws.extend(w)
            write_ptr[i + 1] = len(ws)
        return cls(
            edge_ptr=edge_ptr,
            edge_label=np.asarray(labels, dtype=np.int32),
            edge_target=np.asarray(targets, dtype=np.int32),
            default_target=np.asarray(defaults, dtype=np.int32),
            final_ptr=final_ptr,
            final_writes=np.asarray(fw, dtype=np.int32),
            write_ptr=write_ptr,
            write_states=np.asarray(ws, dtype=np.int32),
        )


_EFFECT_FIELDS = ("edge_ptr", "edge_label", "edge_target", "default_target", "final_ptr", "final_writes",
                  "write_ptr", "write_states")

IDENTITY = EffectAutomaton.from_lists([[]], [_DEAD], [[()]])
"""The effect of an ignored terminal: read nothing, write nothing."""

_REJECT = EffectAutomaton.from_lists([[]], [_DEAD], [[]])


# ---------------------------------------------------------------------------------------------
# the container
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class StackEffects:
    """The stack-effect automata of every terminal of one :class:`LRTable`.

    ``automata[t]`` is terminal id ``t``'s automaton (``$END`` included); terminals listed in
    ``ignored`` have the identity effect. Build with :meth:`build`.
    """

    table: LRTable
    automata: tuple[EffectAutomaton, ...]
    ignored: frozenset[int]

    identity: ClassVar[EffectAutomaton] = IDENTITY

    @classmethod
    def build(
        cls,
        table: LRTable,
        *,
        max_states: int = DEFAULT_MAX_STATES,
        ignore: Iterable[str] = (),
        max_seconds: Optional[float] = None,
        native: bool = True,
    ) -> "StackEffects":
        """Compile every terminal's effect. ``ignore`` names terminals (the grammar's ``%ignore``
        list) that get the identity effect; unknown names are skipped, since an ignored terminal
        the rules never use need not be an LR terminal. Raises :class:`GrammarTooComplex` when one
        terminal needs more than ``max_states`` subset states or symbolic configurations, or the
        whole build more than ``max_seconds`` (or the compile budget's deadline passes).

        ``native=True`` builds with :mod:`glrmask_ext.stack_effects_build` over the table's sparse
        rows; ``native=False`` runs the Python construction below, which is the reference the
        native one is tested against (same arrays)."""
        ignored = frozenset(table.terminal_index[n] for n in ignore if n in table.terminal_index)
        t0 = time.perf_counter()
        deadline = None if max_seconds is None else t0 + max_seconds
        budget = current_budget()
        if native:
            make = _native_builder(table, max_states, max_seconds, t0)
        else:
            ctx = _TableView(table)
            make = lambda t: _TerminalBuilder(ctx, t, max_states).build()  # noqa: E731
        automata = []
        for t in range(table.n_terminals):
            budget.check(f"stack effects (terminal {table.terminals[t]!r})")  # deadline, memory
            if deadline is not None and time.perf_counter() > deadline:
                raise _out_of_time(max_seconds, time.perf_counter() - t0, t, table.n_terminals)
            automata.append(IDENTITY if t in ignored else make(t))
        return cls(table=table, automata=tuple(automata), ignored=ignored)

    # -- (de)serialization: every automaton's arrays concatenated, with per-automaton offsets ------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat arrays for an artifact (the table travels separately): for each field ``f`` of
        :class:`EffectAutomaton`, ``se_f`` (concatenated) and ``se_f_off`` (``int64[n + 1]``)."""
        out: dict[str, np.ndarray] = {}
        for f in _EFFECT_FIELDS:
            parts = [getattr(a, f) for a in self.automata]
            out["se_" + f] = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
            off = np.zeros(len(parts) + 1, dtype=np.int64)
            off[1:] = np.cumsum([len(p) for p in parts])
            out["se_" + f + "_off"] = off
        out["se_ignored"] = np.asarray(sorted(self.ignored), dtype=np.int32)
        return out

    @classmethod
    def from_arrays(cls, table: LRTable, arrays: Mapping[str, np.ndarray]) -> "StackEffects":
        """Rebuild from :meth:`to_arrays` over the same ``table``; raises :class:`ArtifactError`
        when the arrays do not describe one automaton per terminal of ``table``."""
        try:
            cols = {f: (np.asarray(arrays["se_" + f]), np.asarray(arrays["se_" + f + "_off"]))
                    for f in _EFFECT_FIELDS}
            ignored = frozenset(int(t) for t in np.asarray(arrays["se_ignored"]))
        except KeyError as e:
            raise ArtifactError(f"stack effects: missing array {e}") from None
        n = table.n_terminals
        if any(len(off) != n + 1 for _v, off in cols.values()):
            raise ArtifactError(f"stack effects: expected {n} automata (one per terminal)")
        automata = tuple(
            EffectAutomaton(**{f: np.ascontiguousarray(v[off[i]:off[i + 1]], dtype=np.int32)
                               for f, (v, off) in cols.items()})
            for i in range(n))
        return cls(table=table, automata=automata, ignored=ignored)

    def term_id(self, term: int | str) -> int:
        if isinstance(term, str):
            try:
                return self.table.terminal_index[term]
            except KeyError:
                raise KeyError(f"unknown terminal {term!r}") from None
        if not 0 <= term < len(self.automata):
            raise KeyError(f"terminal id {term} out of range")
        return term

    def automaton(self, term: int | str) -> EffectAutomaton:
        """The automaton of a terminal given by id or name."""
        return self.automata[self.term_id(term)]

    def sizes(self) -> dict[str, tuple[int, int]]:
        """``{terminal name: (states, edges)}`` for reports."""
        return {
            self.table.terminals[t]: (a.n_states, a.n_edges) for t, a in enumerate(self.automata)
        }

    def summary(self) -> dict[str, int]:
        """Totals over all terminals: states, edges, write sequences, largest automaton, deepest
        read prefix."""
        a = self.automata
        return {
            "terminals": len(a),
            "states": sum(x.n_states for x in a),
            "edges": sum(x.n_edges for x in a),
            "writes": sum(x.n_writes for x in a),
            "max_states": max((x.n_states for x in a), default=0),
            "max_reads": max((x.max_reads() for x in a), default=0),
        }


# ---------------------------------------------------------------------------------------------
# construction
# ---------------------------------------------------------------------------------------------
def _out_of_time(max_seconds: float, spent: float, done: int, total: int) -> GrammarTooComplex:
    """The error of a build that ran past its own ``max_seconds`` (the static compile passes what
    is left of the compile's budget, which may already be nothing)."""
    if max_seconds <= 0:
        return GrammarTooComplex(
            f"stack effects: no time was left for this stage, none of its {total} terminals built "
            "(the time budget was spent before it started; limit max_seconds)")
    return GrammarTooComplex(
        f"stack effects: took more than {max_seconds:.3g} s ({spent:.3g} s) after {done} of {total} "
        "terminals (limit max_seconds)")


def _native_builder(table: LRTable, max_states: int, max_seconds: Optional[float], t0: float):
    """``t -> EffectAutomaton`` over the native builder: each terminal runs with the GIL released,
    bounded by ``max_states`` and by the earlier of ``t0 + max_seconds`` and the compile budget's
    deadline."""
    builder = native.EffectBuilder(
        table.act_ptr, table.act_term, table.act_shift, table.act_roff, table.reduce_rules, table.goto_ptr,
        table.goto_nt, table.goto_tgt, np.asarray(table.rule_len, dtype=np.int32),
        np.asarray(table.rule_lhs, dtype=np.int32), table.n_terminals, len(table.nonterminals))
    budget = current_budget()
    deadline = None if max_seconds is None else t0 + max_seconds

    def build(t: int) -> EffectAutomaton:
        name = table.terminals[t]
        ends = [x for x in (deadline, budget.deadline) if x is not None]
        seconds = max(0.0, min(ends) - time.perf_counter()) if ends else -1.0
        try:
            status, arrays = builder.build(t, max_states, seconds)
        except MemoryError:
            raise GrammarTooComplex(
                f"stack-effect automaton of terminal {name!r}: out of memory (lower max_states)") from None
        if status == native.OK:
            return EffectAutomaton(*arrays)
        if status == native.MAX_CONFIGS or status == native.MAX_SUBSETS:
            what = "symbolic configurations" if status == native.MAX_CONFIGS else "subset states"
            raise GrammarTooComplex(
                f"stack-effect automaton of terminal {name!r}: {what} exceed max_states={max_states}")
        if status == native.CYCLE:
            raise StackEffectError(
                f"terminal {name!r}: reductions cycle without a shift (grammar not normalized)")
        budget.check(f"stack effects (terminal {name!r})")  # the compile's deadline: its own message
        raise _out_of_time(max_seconds, time.perf_counter() - t0, t, table.n_terminals)

    return build


class _TableView:
    """Plain-list copies of the table, shared by the per-terminal builders."""

    def __init__(self, table: LRTable) -> None:
        self.table = table
        self.rows = table.rows
        # the goto table is dense (states x nonterminals) but holds few entries (~one per
        # state): sparse rows and columns, read off its nonzero cells
        src, nts = np.nonzero(table.goto_table >= 0)
        tgt = table.goto_table[src, nts]
        self.goto: list[dict[int, int]] = [{} for _ in range(table.goto_table.shape[0])]
        self._goto_col: dict[int, list[tuple[int, int]]] = {}
        for s, nt, g in zip(src.tolist(), nts.tolist(), tgt.tolist()):  # by state, then nt
            self.goto[s][nt] = g
            self._goto_col.setdefault(nt, []).append((s, g))
        self.rule_len = table.rule_len
        self.rule_lhs = table.rule_lhs

    def acting_states(self, term: int) -> list[int]:
        """The states with an action (shift or reduce) on terminal ``term``, ascending."""
        table = self.table
        n, T = table.shift_table.shape
        has = table.shift_table[:, term] >= 0
        off = table.reduce_offsets
        cells = np.arange(n, dtype=np.int64) * T + term
        has |= off[cells + 1] > off[cells]
        return np.flatnonzero(has).tolist()

    def goto_sources(self, nt: int) -> list[tuple[int, int]]:
        """``(state, goto(state, nt))`` for every state with a goto on ``nt``, by state."""
        return self._goto_col.get(nt, [])


# Read nodes of the nondeterministic automaton. ROOT reads the initial top explicitly;
# (nt, d) with d > 0 pops one unseen state (DEFAULT); (nt, 0) reads the state revealed under a
# reduction to ``nt`` explicitly and continues with goto.
_ROOT = (-1, 0)


class _TerminalBuilder:
    def __init__(self, ctx: _TableView, term: int, max_states: int) -> None:
        self.ctx = ctx
        self.t = term
        self.max_states = max_states
        self.name = ctx.table.terminals[term]
        self._closure: dict[tuple[int, ...], tuple[frozenset, frozenset]] = {}
        self._active: set[tuple[int, ...]] = set()
        self._moves: dict[tuple[int, int], list] = {}
        self._n_configs = 0  # finished configurations whose top acts on the terminal

    def _too_complex(self, what: str) -> GrammarTooComplex:
        return GrammarTooComplex(
            f"stack-effect automaton of terminal {self.name!r}: {what} exceed "
            f"max_states={self.max_states}"
        )

    # -- symbolic execution -------------------------------------------------------------------
    def closure(self, known: tuple[int, ...]) -> tuple[frozenset, frozenset]:
        """Everything reachable from known segment ``known`` without reading: the read nodes
        where reading must resume, and the finished write sequences.

        Iterative (an explicit depth-first stack): a chain of reductions is as long as the
        grammar's longest chain of unit rules, far deeper than Python's recursion limit."""
        memo = self._closure
        hit = memo.get(known)
        if hit is not None:
            return hit
        ctx = self.ctx
        budget = current_budget()
        # frames: [segment, None] before expansion; [segment, (reads, outs, children)] after
        frames: list[list] = [[known, None]]
        while frames:
            frame = frames[-1]
            seg, work = frame
            if work is None:
                if seg in memo:
                    frames.pop()
                    continue
                action = ctx.rows[seg[-1]][self.t]
                # the budget counts configurations with something to do: one whose top has no
                # action on t is a dead end that costs nothing (most of the goto sources a read
                # node lists are such leaves, and the native builder never creates them)
                if action and self._n_configs >= self.max_states:
                    raise self._too_complex("symbolic configurations")
                budget.tick(f"stack effects (terminal {self.name!r})", len(memo))
                self._active.add(seg)
                reads: set = set()
                outs: set = set()
                children: list[tuple[int, ...]] = []
                if action.shift is not None:
                    outs.add(seg + (action.shift,))
                for r in action.reduces:
                    n_pop, nt = ctx.rule_len[r], ctx.rule_lhs[r]
                    if n_pop < len(seg):
                        rest = seg[: len(seg) - n_pop]
                        g = ctx.goto[rest[-1]].get(nt, -1)
                        if g >= 0:  # a missing goto cannot happen on a stack the parser can reach
                            children.append(rest + (g,))
                    else:
                        reads.add((nt, n_pop - len(seg)))
                frame[1] = (reads, outs, children)
                for child in children:
                    if child in memo:
                        continue
                    if child in self._active:
                        raise StackEffectError(
                            f"terminal {self.name!r}: reductions cycle without a shift (grammar not "
                            "normalized)")
                    frames.append([child, None])
                continue
            # every child is finished (the frames above this one were popped)
            reads, outs, children = work
            for child in children:
                sub_reads, sub_outs = memo[child]
                reads |= sub_reads
                outs |= sub_outs
            self._active.discard(seg)
            memo[seg] = (frozenset(reads), frozenset(outs))
            if ctx.rows[seg[-1]][self.t]:
                self._n_configs += 1
            frames.pop()
        return memo[known]

    def explicit_moves(self, node: tuple[int, int]) -> list[tuple[int, tuple[frozenset, frozenset]]]:
        """``(label, closure)`` of an explicit-read node, by label (memoized)."""
        hit = self._moves.get(node)
        if hit is not None:
            return hit
        ctx, t = self.ctx, self.t
        if node == _ROOT:
            moves = [(s, self.closure((s,))) for s in ctx.acting_states(t)]
        else:
            moves = [(s, self.closure((s, g))) for s, g in ctx.goto_sources(node[0])]
        self._moves[node] = moves
        return moves

    # -- determinization ----------------------------------------------------------------------
    def build(self) -> EffectAutomaton:
        start = (frozenset([_ROOT]), frozenset())
        index: dict[tuple[frozenset, frozenset], int] = {start: 0}
        states: list[tuple[frozenset, frozenset]] = [start]
        trans: list[tuple[dict[int, int], int]] = []
        i = 0
        budget = current_budget()
        while i < len(states):
            budget.tick(f"stack effects (terminal {self.name!r})", i)
            reads, _ = states[i]
            i += 1
            explicit: dict[int, tuple[set, set]] = {}
            wild: set = set()
            for node in reads:
                nt, d = node
                if d > 0:
                    wild.add((nt, d - 1))
                    continue
                for lab, (r, o) in self.explicit_moves(node):
                    cur = explicit.get(lab)
                    if cur is None:
                        explicit[lab] = (set(r), set(o))
                    else:
                        cur[0].update(r)
                        cur[1].update(o)

            def intern(r: Iterable, o: Iterable) -> int:
                key = (frozenset(r), frozenset(o))
                if not key[0] and not key[1]:
                    return _DEAD
                j = index.get(key)
                if j is None:
                    if len(states) >= self.max_states:
                        raise self._too_complex("subset states")
                    j = len(states)
                    index[key] = j
                    states.append(key)
                return j

            row = {lab: intern(r | wild, o) for lab, (r, o) in sorted(explicit.items())}
            default = intern(wild, ()) if wild else _DEAD
            trans.append((row, default))
        return _minimize(trans, [o for _, o in states])


def _minimize(trans: list[tuple[dict[int, int], int]], outs: list[frozenset]) -> EffectAutomaton:
    """Canonical minimization of an acyclic DFA with DEFAULT edges: states are hashed bottom-up by
    (write sequences, DEFAULT class, explicit edges that differ from DEFAULT); a non-final state
    whose every move dies is dead. Numbered in topological order from the start."""
    n = len(trans)
    order: list[int] = []  # post-order: targets before sources
    seen = [False] * n
    stack: list[tuple[int, Iterator[int]]] = [(0, iter(_succ(trans[0])))]
    seen[0] = True
    while stack:
        d, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
            order.append(d)
        elif nxt != _DEAD and not seen[nxt]:
            seen[nxt] = True
            stack.append((nxt, iter(_succ(trans[nxt]))))
    cls = [_DEAD] * n
    sig_index: dict[tuple, int] = {}
    signatures: list[tuple] = []
    for d in order:
        row, default = trans[d]
        dc = cls[default] if default != _DEAD else _DEAD
        edges = tuple(
            (lab, c) for lab, tgt in row.items() if (c := cls[tgt] if tgt != _DEAD else _DEAD) != dc
        )
        if not outs[d] and dc == _DEAD and not edges:
            continue  # dead
        sig = (outs[d], dc, edges)
        c = sig_index.get(sig)
        if c is None:
            c = len(signatures)
            sig_index[sig] = c
            signatures.append(sig)
        cls[d] = c
    root = cls[0]
    if root == _DEAD:
        return _REJECT
    # renumber classes in topological order (DFS post-order reversed) from the root
    topo: list[int] = []
    visited: set[int] = {root}
    st: list[tuple[int, Iterator[int]]] = [(root, iter(_class_succ(signatures[root])))]
    while st:
        c, it = st[-1]
        nxt = next(it, None)
        if nxt is None:
            st.pop()
            topo.append(c)
        elif nxt not in visited:
            visited.add(nxt)
            st.append((nxt, iter(_class_succ(signatures[nxt]))))
    topo.reverse()
    new_id = {c: i for i, c in enumerate(topo)}
    edges_out: list[list[tuple[int, int]]] = []
    defaults: list[int] = []
    finals: list[frozenset] = []
    for c in topo:
        o, dc, edges = signatures[c]
        edges_out.append([(lab, new_id[x] if x != _DEAD else _DEAD) for lab, x in edges])
        defaults.append(new_id[dc] if dc != _DEAD else _DEAD)
        finals.append(o)
    return EffectAutomaton.from_lists(edges_out, defaults, finals)


def _succ(entry: tuple[dict[int, int], int]) -> list[int]:
    row, default = entry
    return [*row.values(), default]


def _class_succ(sig: tuple) -> list[int]:
    _, dc, edges = sig
    out = [x for _, x in edges if x != _DEAD]
    if dc != _DEAD:
        out.append(dc)
    return out
