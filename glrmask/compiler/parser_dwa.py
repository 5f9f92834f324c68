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
(the *closure* of the settled state): the weight accepted at once and the *read states* ``(t, e, d')`` —
effect automaton ``t`` in state ``e`` about to read the original stack, continuing at ``d'``
(``OPEN`` for an open final) — each with the tokens of the paths reaching it.

Start rows by label class. The first read of a walk is the stack's top ``s``, and a read state
of a root's closure is still at its automaton's start, where only the terminal's own explicit
edges live. So the LR states fall into *start classes* by which terminals' first reads live at them
(:func:`start_label_classes`; Kubernetes schemas: ~1,000 classes over 22k LR states), and a root
starts, per class, at the state of only the read states that can live there: at ``s`` it steps
exactly as the state of all its read states would (the others die at ``s``). One state of all a
root's reads would carry an explicit edge per LR state any of them acts in (a JSON string's
inside reads ~4,000: Kubernetes #5 had 33 of 36 million edges there, one row per boundary lexer
state), while a class's state holds only the reads of a few terminals and is shared by every root
whose reads of those terminals agree (the string's plain inside, whatever key prefix the lexer
tracks alongside).

A start state is entered only with the stack's top in its class, so it is its class's own state
(interned with the class) and its row holds only the class's labels; every other LR state takes its
DEFAULT edge, which no walk reads. Rows over every label the reads name made Kubernetes #5's ~19k
start states carry 10.7M of the automaton's 11.1M edges; per class they need 0.37M (143k start
states, one per class and reads).

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
expands a mask to tokens once. The construction is native (:mod:`glrmask_ext.pdwa_build`:
fixed-width ``uint64`` bitsets interned in a hash-consed pool, flat closure and state tables, the
GIL released), because the runtime needs the *complete* automaton and a large grammar's has tens
of thousands of states built from hundreds of thousands of closures. States are numbered
first the start states (roots in ``tdwa.boundary_states`` order, per root its classes ascending),
then breadth-first, each state's DEFAULT edge before
its explicit labels (ascending); weights by first appearance in the exported rows. Same input,
same arrays: nothing depends on a hash seed. :meth:`ParserDWA.arrays` exports the flat layout a
native walk reads (``int32`` unless noted):

* per Terminal-DWA root ``i`` (``boundary_states[i]`` is its lexer state): ``start_accept[i]``
  (weight accepted before reading the stack, ``-1`` none) and its start states by class: for
  ``k in range(start_ptr[i], start_ptr[i+1])``, class ``start_class_of[k]`` (ascending) starts at
  state ``start_target[k]``; a class not listed reads nothing. ``start_class[s]`` is the class of
  LR state ``s`` (``-1``: none; one entry per LR state);
* ``root_restrict[i]``: ``-1``, or the weight that restricts root ``i`` (a root that masks as another
  root on a subset of the tokens, :mod:`.restricted_roots`, starts where that root starts; a walk
  from it keeps only the tokens of this weight);
* states ``0 .. n_states-1``; explicit edges CSR ``edge_ptr`` / ``edge_label`` (LR state, ascending)
  / ``edge_target`` (``-1`` = stop) / ``edge_accept`` (weight or ``-1``); ``default_target``,
  ``default_accept`` per state;
* ``weights uint64[n_weights, n_class_words]``: dense class bitsets.
"""
from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Optional, Sequence

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex

from glrmask_ext import pdwa_build as _native

from .restricted_roots import RootRestriction
from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA

__all__ = ["ParserDWA", "DEFAULT_BUDGETS", "start_label_classes"]

DEFAULT_BUDGETS = {"max_closures": 8_000_000, "max_states": 3_000_000}
"""Default limits on the memo tables: settled product states and determinized states. Sized from
the largest JSONSchemaBench schemas whose earlier stages fit the compile budget (Llama-3.1
vocabulary): Github_ultra #0 needs 1.46M states and 1.95M closures (~830 MB resident, ~16 s CPU),
Github_ultra #1 0.62M and 1.06M (~315 MB); at the limits the tables take ~2.5 GB."""

_TDWA_READ = ("final_weight", "open_ptr", "open_label", "open_weight", "edge_ptr", "edge_label", "edge_target",
              "edge_weight")
"""What the native builder reads of a Terminal DWA besides its roots."""

_SLICE_SECONDS = 0.25
"""The native build returns to Python this often, for the compile budget's deadline and memory
check (:mod:`glrmask.budget`); an interrupted build resumes where it stopped."""


class ParserDWA:
    """The determinized automaton of one grammar × vocabulary (see the module docstring).

    :meth:`expand` determinizes breadth-first, natively, until done or a limit is hit (then a later
    call continues); :meth:`arrays` exports the flat layout of the complete automaton. Budgets
    (``max_states``, ``max_closures``) end the build with :class:`GrammarTooComplex` naming the
    limit."""

    def __init__(self, tdwa: TerminalDWA, effects: StackEffects, class_sets: list[int], n_classes: int,
                 restrictions: Sequence[RootRestriction] = (), **budgets) -> None:
        """``restrictions``: roots that mask as another root restricted to a token set
        (:mod:`.restricted_roots`): they start where their representative starts, and
        :meth:`arrays` gives each its restriction (``root_restrict``)."""
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
        self.start_class, start_terms = start_label_classes(effects)
        tc_ptr, tc = _term_classes(start_terms, len(effects.automata))
        ct_ptr = np.zeros(len(start_terms) + 1, dtype=np.int32)
        ct_ptr[1:] = np.cumsum([len(ts) for ts in start_terms])
        ct = np.asarray([t for ts in start_terms for t in ts], dtype=np.int32)
        self.restrictions = tuple(restrictions)
        roots = np.array(tdwa.roots, dtype=np.int32)
        for r in self.restrictions:
            roots[r.root] = roots[r.rep]
        source = tdwa if not self.restrictions else SimpleNamespace(
            **{k: getattr(tdwa, k) for k in _TDWA_READ}, roots=roots)
        self._builder: Optional[_native.Builder] = _native.Builder(
            source, effects.automata, _dense_sets(class_sets, n_classes), self.limits["max_states"],
            self.limits["max_closures"], tc_ptr, tc, ct_ptr, ct, len(start_terms), self.start_class)
        self._arrays: Optional[dict[str, np.ndarray]] = None
        self._sizes = (0, 0)  # (states, closures) once the builder is released

    @property
    def n_states(self) -> int:
        """Determinized states built so far."""
        return self._sizes[0] if self._builder is None else self._builder.n_states

    @property
    def n_closures(self) -> int:
        """Settled product states whose closure is computed so far."""
        return self._sizes[1] if self._builder is None else self._builder.n_closures

    # ---------------------------------------------------------------- queries
    def has_root(self, q: int) -> bool:
        return int(q) in self._root_index

    def has_cond(self, c: int) -> bool:
        return int(c) in self._cond_index

    def fail_bits(self, cond: int) -> int:
        """Classes of the tokens that drive pending condition ``cond`` to FALSE."""
        w = int(self.tdwa.fail_seed[self._cond_index[int(cond)]])
        return self.class_sets[w] if w >= 0 else 0

    # ---------------------------------------------------------------- determinization
    def expand(self, *, max_states: Optional[int] = None, max_seconds: Optional[float] = None) -> bool:
        """Determinize every state reachable from every root, breadth-first, until done (True) or
        until more than ``max_states`` states exist or ``max_seconds`` have passed (False; calling
        again continues). Raises :class:`GrammarTooComplex` when a budget is exceeded or the
        compile's deadline or memory limit (:func:`glrmask.budget.current_budget`) is hit."""
        b = self._builder
        if b is None:  # exported: complete
            return True
        budget = current_budget()  # the compile's deadline and memory backstop (glrmask.budget)
        end = None if max_seconds is None else time.perf_counter() + max_seconds
        while True:
            left = _SLICE_SECONDS if end is None else min(_SLICE_SECONDS, end - time.perf_counter())
            status = b.run(max_states, max(left, 0.0))
            if status == _native.COMPLETE:
                return True
            if status == _native.MAX_STATES:
                raise GrammarTooComplex(
                    f"parser DWA: more than {self.limits['max_states']} determinized states (limit max_states)")
            if status == _native.MAX_CLOSURES:
                raise GrammarTooComplex(
                    f"parser DWA: more than {self.limits['max_closures']} product states (limit max_closures)")
            if max_states is not None and b.n_states > max_states:
                return False
            if end is not None and time.perf_counter() >= end:
                return False
            budget.check("parser DWA")

    def arrays(self) -> dict[str, np.ndarray]:
        """The flat layout of the complete automaton (runs :meth:`expand` without limits): see the
        module docstring. Explicit edges equal to the DEFAULT edge are left out."""
        if self._arrays is None:
            self.expand()
            b = self._builder
            self._arrays = {"boundary_states": self.tdwa.boundary_states, "start_class": self.start_class,
                            **b.arrays()}
            self._arrays.update(self._restriction_arrays(self._arrays["weights"]))
            # the memo tables (closures, interned sets, members) are not needed once exported and
            # can be large (go_subset x GPT-2: ~1 GB): release them, keep the sizes for reports
            self._sizes = (b.n_states, b.n_closures)
            self._builder = None
        return dict(self._arrays)

    def _restriction_arrays(self, weights: np.ndarray) -> dict[str, np.ndarray]:
        """``root_restrict`` (per root: a row of ``weights``, ``-1`` for none) and ``weights`` with
        the restriction rows appended: the class set of each restricted root's support."""
        restrict = np.full(len(self.tdwa.roots), -1, dtype=np.int32)
        if not self.restrictions:
            return {"root_restrict": restrict}
        rows = []
        for r in self.restrictions:
            bits = 0
            for w in r.support:
                bits |= self.class_sets[w]
            restrict[r.root] = weights.shape[0] + len(rows)
            rows.append(bits)
        extra = _dense_sets(rows, self.n_classes)
        return {"root_restrict": restrict, "weights": np.concatenate([weights.reshape(-1, extra.shape[1]), extra])}

    def __repr__(self) -> str:
        return f"ParserDWA(roots={len(self._root_index)}, states built={self.n_states})"


def start_label_classes(effects: StackEffects) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The start classes of the LR states (see the module docstring): ``label_class[s]`` (``-1``:
    no terminal's first read lives at ``s``; ``int32``, one per LR state) and per class the
    terminals whose first read lives there (ascending). Classes are numbered by their first LR
    state, so the same table gives the same classes."""
    n = int(effects.table.n_states)
    live: list[list[int]] = [[] for _ in range(n)]
    for t, a in enumerate(effects.automata):
        if a.n_states == 0:
            continue
        lo, hi = int(a.edge_ptr[0]), int(a.edge_ptr[1])
        labels, targets = a.edge_label[lo:hi], a.edge_target[lo:hi]
        if int(a.default_target[0]) >= 0:  # a first read by DEFAULT: live wherever no edge kills it
            dead = set(labels[targets < 0].tolist())
            for s in range(n):
                if s not in dead:
                    live[s].append(t)
        else:
            for s in labels[targets >= 0].tolist():
                live[s].append(t)
    ids: dict[tuple[int, ...], int] = {}
    label_class = np.full(n, -1, dtype=np.int32)
    for s, ts in enumerate(live):
        if ts:
            label_class[s] = ids.setdefault(tuple(ts), len(ids))
    return label_class, list(ids)


def _term_classes(start_terms: list[tuple[int, ...]], n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of terminal -> the start classes it is live in (ascending)."""
    per: list[list[int]] = [[] for _ in range(n_terms)]
    for c, ts in enumerate(start_terms):
        for t in ts:
            per[t].append(c)
    ptr = np.zeros(n_terms + 1, dtype=np.int32)
    ptr[1:] = np.cumsum([len(x) for x in per])
    flat = np.asarray([c for x in per for c in x], dtype=np.int32)
    return ptr, flat


def _dense_sets(class_sets: list[int], n_classes: int) -> np.ndarray:
    """Class sets (Python ints) as ``uint64[len(class_sets), max(1, ceil(n_classes / 64))]``, word
    ``j`` holding classes ``64 j .. 64 j + 63`` (the layout of the exported weights)."""
    n_words = max(1, (n_classes + 63) // 64)
    raw = b"".join(bits.to_bytes(n_words * 8, "little") for bits in class_sets)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(len(class_sets), n_words)
