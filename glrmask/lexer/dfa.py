"""A dense, minimized export of the lazy lexer (DESIGN §4.3, §4.10, §6).

Why: the :class:`~glrmask.lexer.Lexer` interns states and conditions lazily as Python objects,
which an offline artifact cannot store and a Cython runtime cannot step. :meth:`LexerDFA.explore`
enumerates everything reachable (every lexer state over all 256 bytes, every condition an event
can carry, closed under ``cond_step``), minimizes both automata by partition refinement, and lays
the result out as flat numpy arrays:

* ``trans int32[n_states, 256]``: next state, ``-1`` = DEAD;
* events of the transition ``(s, b)`` in CSR: ``ev_term[k]``, ``ev_cond[k]`` for
  ``k in range(ev_ptr[s*256+b], ev_ptr[s*256+b+1])``, in the lexer's order (by terminal);
* ``futures uint64[n_states, n_words]``: bit ``t`` (word ``t // 64``) set iff terminal ``t`` is in
  ``lexer.futures(q)``;
* ``cond_trans int32[n_conds, 256]`` and ``cond_at_end uint8[n_conds]``: the condition automaton;
  ids 0 (TRUE) and 1 (FALSE) are reserved and absorbing, exactly like the lexer's.

Equivalence (the coarsest one that keeps everything a consumer can observe):

* two conditions are equivalent iff their ``cond_at_end`` verdicts agree and, for every byte, their
  successors are equivalent. TRUE and FALSE stay classes of their own: a pending condition is never
  renamed to a settled verdict, so "settled now" and "still pending" remain distinguishable (the
  terminal DWA keys branches on exactly that, §4.10);
* two lexer states are equivalent iff their ``futures`` agree and, for every byte, their targets
  are equivalent (DEAD only to DEAD) and their event lists are equal once every condition is
  replaced by its class.

Conditions do not depend on lexer states, so they are minimized first; lexer states are then
refined against the condition classes (Moore's algorithm, vectorized: each round hashes the rows
``(class, class of target per byte)`` with ``np.unique``). Ids are canonical: classes are numbered
by their first member in the exploration order (breadth-first from ``lexer.initial``, then the
extra start states), so the same terminals always give the same arrays.

Speed: the loops over states run in :mod:`glrmask_ext.lexer_dfa` (``native=True``, the default):
breadth-first exploration over joint states held as vectors of lane indices, the futures bitsets
and the refinement; Python is called only for what the lexer itself must compute (a lane's
transitions, its futures, a new joint state's lazy id) and for new event lists. The Python loops
below stay as the reference (``native=False``), and both give the same arrays, id for id
(tests/test_lexer_dfa_native.py).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import ArtifactError, GrammarTooComplex
from glrmask.grammar.gc_pause import cyclic_gc_paused

from .lexer import Lexer

__all__ = ["LexerDFA"]

DEAD = -1
TRUE = 0
FALSE = 1
_UNEXPLORED = -2  # in the lazy-id maps: the lexer interned this id, but the export never saw it

DEFAULT_MAX_STATES = 65_536
"""Default export budget (``limits["lexer"]["max_states"]``), a memory bound: the native export and
its minimization peak at about 7 KB per explored state (int32 transition and event rows, their
copies out, refinement temporaries, the lazy lexer's new joint states; WashingtonPost #0's 76,169
states grow the process by ~540 MB in 2.1 s CPU), so this caps the stage near 0.5 GiB. The first
three schemas of every JSONSchemaBench split need at most 13,858 (JsonSchemaStore #0);
WashingtonPost #0, past it, would next stop at the Terminal DWA's ``max_boundary_states`` (its
39,767 minimized states leave more than 20,000 at token boundaries), so a larger default would
only move that refusal seconds later."""

_ARRAY_NAMES = (
    "trans", "ev_ptr", "ev_term", "ev_cond", "futures", "cond_trans", "cond_at_end",
    "initial", "n_terminals", "lazy_state_map", "lazy_cond_map",
)


@dataclass(frozen=True, eq=False)
class LexerDFA:
    """The explicit lexer; see the module docstring for the meaning of each array.

    ``lazy_state_map[q]`` / ``lazy_cond_map[c]`` translate the lazy lexer's ids (the one this was
    explored from) to the minimized ids; ``-2`` marks ids the export did not reach.
    """

    trans: np.ndarray
    ev_ptr: np.ndarray
    ev_term: np.ndarray
    ev_cond: np.ndarray
    futures: np.ndarray
    cond_trans: np.ndarray
    cond_at_end: np.ndarray
    initial: int
    n_terminals: int
    lazy_state_map: np.ndarray
    lazy_cond_map: np.ndarray

    DEAD = DEAD
    TRUE = TRUE
    FALSE = FALSE

    # ------------------------------------------------------------------ construction
    @classmethod
    def explore(
        cls,
        lexer: Lexer,
        start_states: Iterable[int] | None = None,
        *,
        max_states: int = DEFAULT_MAX_STATES,
        max_conds: int = 200_000,
        max_seconds: float | None = None,
        native: bool = True,
    ) -> "LexerDFA":
        """Enumerate every lexer state reachable from ``lexer.initial`` and ``start_states`` (e.g.
        :meth:`Lexer.restrict` results) and every condition their events reach, then minimize.

        Raises :class:`GrammarTooComplex` when more than ``max_states`` lexer states or
        ``max_conds`` pending conditions are reachable (the lexer's own ``max_states`` applies to
        its interning as well), or the exploration takes more than ``max_seconds``.

        ``native=False`` runs the Python reference loops (the test oracle) instead of
        :mod:`glrmask_ext.lexer_dfa`; both give the same arrays and leave the lexer with the same
        interned states (the lane steps themselves are the lexer's Python code either way).

        The cyclic garbage collector is paused meanwhile: the lexer's memo grows by tens of
        thousands of cycle-free tuples, lists and sets, and the collections they trigger scan
        every tracked object of the process (a third of the export's time on the largest
        JSONSchemaBench schema, freeing nothing); reference counting frees as usual.
        """
        with cyclic_gc_paused():
            return cls._explore(lexer, start_states, max_states, max_conds, max_seconds, native)

    @classmethod
    def _explore(cls, lexer: Lexer, start_states: Iterable[int] | None, max_states: int, max_conds: int,
                 max_seconds: float | None, native: bool) -> "LexerDFA":
        check = _Deadline(max_seconds)
        lane_lists = None
        if native:
            from glrmask_ext.lexer_dfa import explore_states

            starts = [lexer.initial] + [q for q in (start_states or ()) if q != DEAD]
            states, trans_raw, ev_raw, ev_lists, lane_lists = explore_states(lexer, starts, max_states, check)
        else:
            states, trans_raw, ev_raw, ev_lists = _explore_states(lexer, start_states, max_states, check)
        conds, cond_trans_raw = _explore_conds(lexer, ev_lists, max_conds, check)
        at_end = np.array([lexer.cond_at_end(c) for c in conds], dtype=np.uint8)

        if native:
            from glrmask_ext.lexer_dfa import first_occurrence_ids as renumber
        else:
            renumber = _first_occurrence_ids
        cond_cls = _minimize_conds(cond_trans_raw, at_end, check, native)
        cond_new = renumber(cond_cls)  # TRUE/FALSE are rows 0/1: they keep 0/1
        cond_of = {c: int(cond_new[i]) for i, c in enumerate(conds)}

        n_terms = len(lexer.terminal_names)
        n_words = max(1, (n_terms + 63) // 64)
        if lane_lists is not None:
            from glrmask_ext.lexer_dfa import lane_futures

            fut_rows = lane_futures(lexer, lane_lists, n_words, check)
        else:
            fut_rows = np.zeros((len(states), n_words), dtype=np.uint64)
            for i, q in enumerate(states):
                check.tick("lexer DFA export (futures)", i)
                for t in lexer.futures(q):
                    fut_rows[i, t // 64] |= np.uint64(1) << np.uint64(t % 64)

        # event lists with conditions replaced by their minimized ids, interned per transition
        mapped_ids: dict[tuple, int] = {}
        mapped_lists: list[tuple[tuple[int, int], ...]] = []
        raw_to_mapped = np.empty(len(ev_lists), dtype=np.int32 if native else np.int64)
        for k, evs in enumerate(ev_lists):
            key = tuple((t, cond_of[c]) for t, c in evs)
            mid = mapped_ids.get(key)
            if mid is None:
                mid = mapped_ids[key] = len(mapped_lists)
                mapped_lists.append(key)
            raw_to_mapped[k] = mid
        ev_key = raw_to_mapped[ev_raw]

        state_cls = _minimize_states(trans_raw, ev_key, fut_rows, check, native)
        state_new = renumber(state_cls)
        n_states = int(state_new.max()) + 1 if len(states) else 0
        reps = np.empty(n_states, dtype=np.int64)
        reps[state_new[::-1]] = np.arange(len(states) - 1, -1, -1)  # first member of each class

        if native:
            from glrmask_ext.lexer_dfa import export_rows

            lens = np.array([len(x) for x in mapped_lists], dtype=np.int64)
            list_start = np.zeros(len(mapped_lists) + 1, dtype=np.int64)
            np.cumsum(lens, out=list_start[1:])
            flat_t = np.array([t for x in mapped_lists for t, _ in x], dtype=np.int32)
            flat_c = np.array([c for x in mapped_lists for _, c in x], dtype=np.int32)
            trans, ev_ptr, ev_term, ev_cond = export_rows(
                trans_raw, np.ascontiguousarray(ev_key, dtype=np.int32), reps,
                np.ascontiguousarray(state_new, dtype=np.int64), list_start, flat_t, flat_c)
        else:
            rep_trans = trans_raw[reps]
            trans = np.where(rep_trans >= 0, state_new[np.maximum(rep_trans, 0)], DEAD).astype(np.int32)
            ev_ptr, ev_term, ev_cond = _events_csr(ev_key[reps], mapped_lists)

        n_conds = int(cond_new.max()) + 1
        creps = np.empty(n_conds, dtype=np.int64)
        creps[cond_new[::-1]] = np.arange(len(conds) - 1, -1, -1)
        cond_trans = cond_new[cond_trans_raw[creps]].astype(np.int32)

        # a lexer without terminals starts DEAD: its export is one state whose every byte is DEAD
        # (so ``initial`` stays a valid state id); DEAD itself is never in the lazy-id map
        lazy = np.asarray(states, dtype=np.int64)
        live = lazy >= 0
        state_map = np.full(int(lazy.max()) + 1 if live.any() else 0, _UNEXPLORED, dtype=np.int32)
        state_map[lazy[live]] = state_new[live]
        cond_map = np.full(max(conds) + 1, _UNEXPLORED, dtype=np.int32)
        cond_map[np.asarray(conds, dtype=np.int64)] = cond_new
        return cls(
            trans=trans,
            ev_ptr=ev_ptr,
            ev_term=ev_term,
            ev_cond=ev_cond,
            futures=np.ascontiguousarray(fut_rows[reps]),
            cond_trans=cond_trans,
            cond_at_end=np.ascontiguousarray(at_end[creps]),
            initial=int(state_new[0]),
            n_terminals=n_terms,
            lazy_state_map=state_map,
            lazy_cond_map=cond_map,
        )

    # ------------------------------------------------------------------ (de)serialization
    def arrays(self) -> dict[str, np.ndarray]:
        """Plain numeric arrays for an artifact (scalars as 0-d int64 arrays)."""
        return {
            "trans": self.trans,
            "ev_ptr": self.ev_ptr,
            "ev_term": self.ev_term,
            "ev_cond": self.ev_cond,
            "futures": self.futures,
            "cond_trans": self.cond_trans,
            "cond_at_end": self.cond_at_end,
            "initial": np.array(self.initial, dtype=np.int64),
            "n_terminals": np.array(self.n_terminals, dtype=np.int64),
            "lazy_state_map": self.lazy_state_map,
            "lazy_cond_map": self.lazy_cond_map,
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], *, prefix: str = "") -> "LexerDFA":
        """Rebuild from :meth:`arrays` (keys optionally prefixed, as stored beside other arrays in
        one artifact). Checks shapes, dtypes and id ranges, raising :class:`ArtifactError`, so a
        runtime that indexes the arrays without bounds checks cannot be handed corrupt ones."""
        missing = [n for n in _ARRAY_NAMES if prefix + n not in arrays]
        if missing:
            raise ArtifactError(f"lexer DFA arrays missing: {', '.join(prefix + n for n in missing)}")
        a = {n: np.asarray(arrays[prefix + n]) for n in _ARRAY_NAMES}

        def want(name: str, dtype, ndim: int) -> np.ndarray:
            x = a[name]
            if x.dtype != np.dtype(dtype) or x.ndim != ndim:
                raise ArtifactError(
                    f"lexer DFA array {prefix + name!r}: expected {ndim}-d {np.dtype(dtype)}, "
                    f"got {x.ndim}-d {x.dtype}"
                )
            return x

        trans = want("trans", np.int32, 2)
        ev_ptr = want("ev_ptr", np.int32, 1)
        ev_term = want("ev_term", np.int32, 1)
        ev_cond = want("ev_cond", np.int32, 1)
        futures = want("futures", np.uint64, 2)
        cond_trans = want("cond_trans", np.int32, 2)
        cond_at_end = want("cond_at_end", np.uint8, 1)
        initial = int(want("initial", np.int64, 0))
        n_terms = int(want("n_terminals", np.int64, 0))
        state_map = want("lazy_state_map", np.int32, 1)
        cond_map = want("lazy_cond_map", np.int32, 1)

        def bad(what: str) -> ArtifactError:
            return ArtifactError(f"lexer DFA arrays are inconsistent: {what}")

        n, m = trans.shape[0], cond_trans.shape[0]
        if trans.shape[1] != 256 or cond_trans.shape[1] != 256:
            raise bad("transition tables must have 256 columns")
        if not 0 <= initial < n:
            raise bad(f"initial state {initial} out of range [0, {n})")
        if trans.size and (trans.min() < DEAD or trans.max() >= n):
            raise bad("a transition targets a state out of range")
        if m < 2 or cond_at_end.shape != (m,) or tuple(cond_at_end[:2]) != (1, 0):
            raise bad("the condition table must start with TRUE and FALSE")
        if cond_trans.min() < 0 or cond_trans.max() >= m or cond_trans[0].any() or (cond_trans[1] != 1).any():
            raise bad("condition transitions out of range or TRUE/FALSE not absorbing")
        if ev_ptr.shape != (n * 256 + 1,) or ev_ptr[0] != 0 or (np.diff(ev_ptr) < 0).any():
            raise bad("ev_ptr must be a non-decreasing offset array of n_states*256+1 entries")
        if ev_term.shape != ev_cond.shape or ev_term.shape[0] != ev_ptr[-1]:
            raise bad("ev_term/ev_cond lengths differ from ev_ptr[-1]")
        if ev_term.size and (ev_term.min() < 0 or ev_term.max() >= n_terms):
            raise bad("an event names a terminal out of range")
        if ev_cond.size and (ev_cond.min() < 0 or ev_cond.max() >= m):
            raise bad("an event carries a condition out of range")
        if futures.shape != (n, max(1, (n_terms + 63) // 64)):
            raise bad("futures must have one row per state and ceil(n_terminals/64) words")
        for name, mp, hi in (("lazy_state_map", state_map, n), ("lazy_cond_map", cond_map, m)):
            if mp.size and (mp.min() < _UNEXPLORED or mp.max() >= hi or (mp == -1).any()):
                raise bad(f"{name} holds ids out of range")
        return cls(
            trans=trans, ev_ptr=ev_ptr, ev_term=ev_term, ev_cond=ev_cond, futures=futures,
            cond_trans=cond_trans, cond_at_end=cond_at_end, initial=initial, n_terminals=n_terms,
            lazy_state_map=state_map, lazy_cond_map=cond_map,
        )

    # ------------------------------------------------------------------ queries
    @property
    def n_states(self) -> int:
        """Minimized lexer states (DEAD not counted)."""
        return int(self.trans.shape[0])

    @property
    def n_conds(self) -> int:
        """Minimized conditions, TRUE and FALSE included."""
        return int(self.cond_trans.shape[0])

    @property
    def n_explored_states(self) -> int:
        """Lazy lexer states the exploration reached (before minimization)."""
        return int((self.lazy_state_map >= 0).sum())

    @property
    def n_explored_conds(self) -> int:
        """Conditions the exploration reached (before minimization), TRUE and FALSE included."""
        return int((self.lazy_cond_map >= 0).sum())

    def state_id(self, q: int) -> int:
        """The minimized id of the lazy lexer's state ``q`` (DEAD stays -1); KeyError if the
        exploration never reached ``q``."""
        if q == DEAD:
            return DEAD
        if not 0 <= q < self.lazy_state_map.shape[0] or self.lazy_state_map[q] == _UNEXPLORED:
            raise KeyError(f"lexer state {q} was not explored (pass it in start_states)")
        return int(self.lazy_state_map[q])

    def cond_id(self, c: int) -> int:
        """The minimized id of the lazy lexer's condition ``c`` (TRUE 0 / FALSE 1 unchanged)."""
        if not 0 <= c < self.lazy_cond_map.shape[0] or self.lazy_cond_map[c] == _UNEXPLORED:
            raise KeyError(f"condition {c} was not explored")
        return int(self.lazy_cond_map[c])

    def step(self, s: int, b: int) -> tuple[int, tuple[tuple[int, int], ...]]:
        """Like :meth:`Lexer.step`, on the arrays (for Python callers and tests)."""
        if s < 0:
            return DEAD, ()
        k = s * 256 + b
        lo, hi = int(self.ev_ptr[k]), int(self.ev_ptr[k + 1])
        events = tuple(zip(self.ev_term[lo:hi].tolist(), self.ev_cond[lo:hi].tolist()))
        return int(self.trans[s, b]), events

    def cond_step(self, c: int, b: int) -> int:
        """Like :meth:`Lexer.cond_step`."""
        return int(self.cond_trans[c, b])

    def cond_holds_at_end(self, c: int) -> bool:
        """Like :meth:`Lexer.cond_at_end`."""
        return bool(self.cond_at_end[c])

    def futures_of(self, s: int) -> frozenset[int]:
        """Like :meth:`Lexer.futures`: the terminals whose bit is set in ``futures[s]``."""
        if s < 0:
            return frozenset()
        out = []
        for w, word in enumerate(self.futures[s].tolist()):
            while word:
                low = word & -word
                out.append(w * 64 + low.bit_length() - 1)
                word ^= low
        return frozenset(out)


# ---------------------------------------------------------------------- exploration
class _Deadline:
    """The export's own ``max_seconds`` (from its start) together with the compile's budget: every
    loop of the export — exploration, conditions, futures, minimization rounds — checks both."""

    def __init__(self, max_seconds: float | None) -> None:
        self.max_seconds = max_seconds
        self.deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        self.budget = current_budget()

    def check(self, stage: str) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise GrammarTooComplex(f"{stage}: took more than {self.max_seconds:g} s (limit max_seconds)")
        self.budget.check(stage)

    def tick(self, stage: str, i: int) -> None:
        if not i & 31:
            self.check(stage)


def _explore_states(lexer: Lexer, start_states: Iterable[int] | None, max_states: int,
                    check: _Deadline):
    """Breadth-first over all bytes. Returns the lazy states in visiting order, their raw
    transition table (exploration indices, -1 DEAD), the raw event-list id per transition and the
    distinct raw event lists (lazy condition ids)."""
    starts = [lexer.initial] + [q for q in (start_states or ()) if q != DEAD]
    index: dict[int, int] = {}
    states: list[int] = []
    queue: deque[int] = deque()

    def visit(q: int) -> int:
        i = index.get(q)
        if i is None:
            if len(states) >= max_states:
                raise GrammarTooComplex(
                    f"lexer DFA export: more than {max_states} reachable lexer states "
                    "(limit max_states)"
                )
            i = index[q] = len(states)
            states.append(q)
            queue.append(q)
        return i

    for q in starts:
        visit(q)
    ev_ids: dict[tuple, int] = {(): 0}
    ev_lists: list[tuple] = [()]
    # per state: the byte -> class map (one list object per set of live terminals, so the rows
    # are expanded to 256 columns in one gather per distinct map at the end) and, per class, the
    # target and the event list
    cls_of: list[int] = []
    maps: list[list[int]] = []
    map_ids: dict[int, int] = {}
    rows_t: list[list[int]] = []
    rows_e: list[list[int]] = []
    lexer_row = lexer.row  # all transitions of a state, one per class of bytes it treats alike
    while queue:
        check.tick(f"lexer DFA export (after {len(states)} lexer states)", len(rows_t))
        q = queue.popleft()
        cls, results = lexer_row(q)
        m = map_ids.get(id(cls))
        if m is None:
            m = map_ids[id(cls)] = len(maps)
            maps.append(cls)
        cls_of.append(m)
        rt = []
        re_ = []
        # classes ascend by smallest byte: successors are met in the order a walk over all 256
        # bytes meets them, so the exploration order (and the canonical ids) do not depend on
        # how bytes are grouped
        for q2, ev in results:
            rt.append(visit(q2) if q2 != DEAD else DEAD)
            k = 0
            if ev:
                k = ev_ids.get(ev)
                if k is None:
                    k = ev_ids[ev] = len(ev_lists)
                    ev_lists.append(ev)
            re_.append(k)
        rows_t.append(rt)
        rows_e.append(re_)
    n = len(states)
    trans = np.empty((n, 256), dtype=np.int64)
    evs = np.empty((n, 256), dtype=np.int64)
    which = np.asarray(cls_of, dtype=np.int64)
    for m, cls in enumerate(maps):
        members = np.flatnonzero(which == m)
        idx = np.asarray(cls, dtype=np.int64)
        width = int(idx.max()) + 1
        t_rows = np.array([rows_t[i] for i in members.tolist()], dtype=np.int64).reshape(-1, width)
        e_rows = np.array([rows_e[i] for i in members.tolist()], dtype=np.int64).reshape(-1, width)
        trans[members] = t_rows[:, idx]
        evs[members] = e_rows[:, idx]
    return states, trans, evs, ev_lists


def _explore_conds(lexer: Lexer, ev_lists: list[tuple], max_conds: int, check: _Deadline):
    """Every condition named by an event, closed under ``cond_step``; TRUE and FALSE are always
    indices 0 and 1. Returns the lazy ids in visiting order and their raw transition table."""
    conds = [Lexer.TRUE, Lexer.FALSE]
    index = {Lexer.TRUE: 0, Lexer.FALSE: 1}
    queue: deque[int] = deque()

    def visit(c: int) -> int:
        i = index.get(c)
        if i is None:
            if len(conds) - 2 >= max_conds:
                raise GrammarTooComplex(
                    f"lexer DFA export: more than {max_conds} reachable pending match "
                    "conditions (limit max_conds)"
                )
            i = index[c] = len(conds)
            conds.append(c)
            queue.append(c)
        return i

    for evs in ev_lists:
        for _t, c in evs:
            visit(c)
    step = lexer.cond_step
    groups = lexer.byte_groups
    reps = [g[0] for g in groups]
    byte_group = np.empty(256, dtype=np.int64)
    for i, group in enumerate(groups):
        byte_group[list(group)] = i
    # per condition, the successor on each byte group (the lexer's groups step alike)
    rows: list[list[int]] = [[0] * len(groups), [1] * len(groups)]
    while queue:
        check.tick("lexer DFA export (match conditions)", len(rows))
        c = queue.popleft()
        # a condition reads only its terminal's classes: the groups that one of its terminal's
        # groups holds step alike too, so each is stepped once (first group first, as before:
        # the lexer interns the conditions it meets in the same order)
        term_group = lexer.cond_byte_groups(c)
        seen: dict[int, int] = {}
        row = []
        for b in reps:
            g = term_group[b]
            i = seen.get(g)
            if i is None:
                i = seen[g] = visit(step(c, b))
            row.append(i)
        rows.append(row)
    return conds, np.ascontiguousarray(np.array(rows, dtype=np.int64)[:, byte_group])


# ---------------------------------------------------------------------- minimization
def _row_labels(rows: np.ndarray) -> np.ndarray:
    """Labels equal iff the int64 rows are equal (exact). Rows are grouped by two independent
    64-bit multiplicative hashes — sorting two integer columns is far cheaper than ``np.unique``
    over whole rows — and every group is then checked against its first row; on a collision
    (never seen in practice, but possible) the rows are grouped exactly by ``np.unique``."""
    m, w = rows.shape
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    gen = np.random.default_rng(0x61726D)  # fixed: labels must not depend on a random seed
    coef = gen.integers(1, 2**63 - 1, size=(2, w), dtype=np.int64).astype(np.uint64) | np.uint64(1)
    u = rows.astype(np.uint64)
    with np.errstate(over="ignore"):
        h1 = (u * coef[0]).sum(axis=1, dtype=np.uint64)
        h2 = ((u ^ np.uint64(0x9E3779B97F4A7C15)) * coef[1]).sum(axis=1, dtype=np.uint64)
    order = np.lexsort((h2, h1))
    s1, s2 = h1[order], h2[order]
    starts = np.empty(m, dtype=bool)
    starts[0] = True
    starts[1:] = (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
    group = np.cumsum(starts) - 1
    labels = np.empty(m, dtype=np.int64)
    labels[order] = group
    first = order[np.flatnonzero(starts)]
    if not np.array_equal(rows, rows[first[labels]]):  # pragma: no cover - a 128-bit collision
        _, labels = np.unique(rows, axis=0, return_inverse=True)
        labels = labels.reshape(-1)
    return labels


def _refine(cls: np.ndarray, targets: np.ndarray, check: _Deadline, stage: str) -> np.ndarray:
    """The coarsest partition refining ``cls`` in which members of a class have targets in the
    same classes on every byte (DEAD = -1 only to DEAD): Moore's refinement, incrementally.

    Why incremental: a chain of ``n`` states (a counted repeat ``x{1,n}``) needs ``n`` rounds, and
    re-hashing every row each round makes that quadratic. After the first round only the
    predecessors of states that changed class can see a different row; a class's other members
    keep the row they shared, so a round only regroups those candidates: within a class, each
    distinct candidate row becomes a new class, except that when every member is a candidate the
    largest group keeps the class's id. Classes are only ever split on a difference in rows, and
    the loop stops at a stable partition, so the result is the same coarsest partition the
    plain algorithm reaches (ids are renumbered canonically by the caller)."""
    n, k = targets.shape
    _, cls = np.unique(cls, return_inverse=True)
    cls = cls.reshape(-1).astype(np.int64)
    if n == 0:
        return cls
    n_cls = int(cls.max()) + 1
    flat = targets.reshape(-1)
    live = flat >= 0
    src = np.repeat(np.arange(n, dtype=np.int64), k)[live]
    dst = flat[live]
    by_dst = np.argsort(dst, kind="stable")
    pred_src = src[by_dst]
    pred_ptr = np.searchsorted(dst[by_dst], np.arange(n + 1))
    size = np.bincount(cls, minlength=n_cls)
    cand = np.arange(n, dtype=np.int64)
    while cand.size:
        check.check(stage)
        own = cls[cand]
        t = targets[cand]
        rows = np.concatenate([own[:, None], np.where(t >= 0, cls[np.maximum(t, 0)], -1)], axis=1)
        grp = _row_labels(np.ascontiguousarray(rows))
        n_grp = int(grp.max()) + 1
        grp_block = np.empty(n_grp, dtype=np.int64)
        grp_block[grp] = own
        grp_size = np.bincount(grp, minlength=n_grp)
        cand_in_block = np.bincount(own, minlength=n_cls)
        # the group that keeps its block's id: none when the block has members that are not
        # candidates (they keep it), else the largest group of the block (first on ties)
        keep = np.zeros(n_grp, dtype=bool)
        full = cand_in_block[grp_block] == size[grp_block]
        if full.any():
            idx = np.flatnonzero(full)
            # largest group per block: sort by (block, -size, group) and take each block's first
            o = np.lexsort((idx, -grp_size[idx], grp_block[idx]))
            ordered = idx[o]
            firsts = np.ones(ordered.size, dtype=bool)
            firsts[1:] = grp_block[ordered[1:]] != grp_block[ordered[:-1]]
            keep[ordered[firsts]] = True
        moving = np.flatnonzero(~keep)
        if moving.size == 0:
            break
        new_id = np.full(n_grp, -1, dtype=np.int64)
        new_id[moving] = n_cls + np.arange(moving.size)
        n_cls += moving.size
        moved = new_id[grp] >= 0
        changed = cand[moved]
        old_blocks = cls[changed]
        cls[changed] = new_id[grp[moved]]
        size = np.concatenate([size, np.zeros(moving.size, dtype=size.dtype)])
        np.subtract.at(size, old_blocks, 1)
        np.add.at(size, cls[changed], 1)
        # next candidates: the predecessors of every state that changed class
        lo, hi = pred_ptr[changed], pred_ptr[changed + 1]
        counts = hi - lo
        if not counts.sum():
            break
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        cand = np.unique(pred_src[starts + np.arange(int(counts.sum()))])
    return cls


def _minimize_conds(trans: np.ndarray, at_end: np.ndarray, check: _Deadline, native: bool) -> np.ndarray:
    # initial blocks: TRUE, FALSE, pending failing at the end, pending passing at the end
    init = np.where(at_end.astype(np.int64) > 0, 3, 2)
    init[0], init[1] = 0, 1
    stage = "lexer DFA minimization (match conditions)"
    if native:
        from glrmask_ext.lexer_dfa import refine

        return refine(init, np.ascontiguousarray(trans, dtype=np.int32), check.check, stage)
    return _refine(init, trans, check, stage)


def _minimize_states(trans: np.ndarray, ev_key: np.ndarray, futures: np.ndarray,
                     check: _Deadline, native: bool) -> np.ndarray:
    if trans.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    # event lists and futures never change during refinement: fold them into the first blocks
    stage = "lexer DFA minimization (lexer states)"
    if native:  # the partition is what counts: any exact labelling of the rows will do
        from glrmask_ext.lexer_dfa import refine, row_labels

        init = row_labels(np.ascontiguousarray(futures), np.ascontiguousarray(ev_key, dtype=np.int32))
        return refine(init, np.ascontiguousarray(trans, dtype=np.int32), check.check, stage)
    first = np.ascontiguousarray(np.concatenate([futures.view(np.int64), ev_key], axis=1))
    _, init = np.unique(first, axis=0, return_inverse=True)
    return _refine(init.reshape(-1), trans, check, stage)


def _first_occurrence_ids(cls: np.ndarray) -> np.ndarray:
    """Renumber classes by the index of their first member (canonical, deterministic ids)."""
    _, first = np.unique(cls, return_index=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    # np.unique sorts the labels, so label L is the L-th unique value
    labels = np.unique(cls)
    lut = np.empty(int(labels.max()) + 1, dtype=np.int64)
    lut[labels] = rank
    return lut[cls]


def _events_csr(keys: np.ndarray, lists: list[tuple[tuple[int, int], ...]]):
    """CSR over transitions ``s*256+b`` from the per-transition event-list ids ``keys``."""
    lens = np.array([len(x) for x in lists], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)])
    flat_t = np.array([t for x in lists for t, _ in x], dtype=np.int32)
    flat_c = np.array([c for x in lists for _, c in x], dtype=np.int32)
    k = keys.reshape(-1)
    per = lens[k]
    ptr = np.concatenate([[0], np.cumsum(per)])
    total = int(ptr[-1])
    src = np.repeat(starts[k] - ptr[:-1], per) + np.arange(total, dtype=np.int64)
    if total >= 2**31:  # pragma: no cover - would need > 2^31 events
        raise GrammarTooComplex("lexer DFA export: more than 2^31 events (limit int32 offsets)")
    return ptr.astype(np.int32), flat_t[src], flat_c[src]
