"""The byte-level lexer: ``re.match`` semantics per terminal, with delayed decisions.

Model (DESIGN §2 "Delayed decisions", §4.3): every terminal runs a priority-ordered Pike VM over
the bytes read since the lexeme start. Its lane is an ordered list of entries (highest priority
first), all started at the lexeme start:

* THREAD ``(pc, conds)``: an NFA position plus the lookahead conditions its path passed through
  (``conds`` is an interned set of *atoms*; an atom is a lookahead instance started at some
  position, stepped in lockstep with the input, with its polarity — see below);
* BLOCKER ``(-1, conds)``: a candidate match end already reported whose lookaheads are pending;
  lower-priority entries survive it because ``re`` falls back to them if a lookahead fails.

When a thread's closure reaches ACCEPT after byte *i*, the terminal reports an *event*
``(terminal, cond)``: the match ``re.match`` returns ends after byte *i* iff ``cond`` holds on the
bytes after *i*. ``cond`` = "every entry ahead of the candidate fails, and the candidate's own
lookaheads pass" — an interned finite-state object stepped with :meth:`Lexer.cond_step`. An
unconditional candidate cuts every entry behind it; a conditional one stays as a BLOCKER.

An atom's state is the set of its body's paths still open: ``(pc, conds)`` threads and
``(-1, conds)`` body matches whose own nested lookaheads are pending (bodies may nest lookaheads,
so ``conds`` recurse; the depth is bounded by the pattern's nesting). The body is matched like
``re`` matches an assertion: it holds iff *some* path reaches the body's end with all of its own
conditions passing, so the set is unordered and a path needing a superset of another's conditions
at the same place is dropped. A positive atom is TRUE once a body match has no pending
conditions left and FALSE once no path is open; a negative one the reverse. When the body holds
lookbehinds or ``\\b``, the atom carries its own copy of the terminal's lookbehind trackers
(they are a function of the bytes since the lexeme start, which the atom keeps reading).

Everything is interned lazily (structural key -> int id) and transitions are memoized, so scanning
familiar bytes is a chain of dict lookups; the sizes are bounded by ``max_states``.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Optional, Sequence

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex, RegexError

from .charsets import DEAD as CLS_DEAD
from .program import (
    ACCEPT,
    BOUND,
    CHAR,
    LB,
    LOOK,
    MID,
    REP_CHECK,
    REP_ENTER,
    SPLIT,
    SUBACCEPT,
    Program,
    TerminalProgram,
)

_ATOM_TRUE = -1
_ATOM_FALSE = -2
_CS_FAIL = -1
_EMPTY_CS = 0
_NO_FLAGS: frozenset[int] = frozenset()

Event = tuple[int, int]


class Lexer:
    """Joint lexer over a list of terminals ``(name, Python re pattern)``.

    A state is an int (``DEAD`` = -1 when no terminal is alive); see the module docstring for
    what it stands for. Conditions are ints too: ``TRUE`` (0), ``FALSE`` (1) or a pending one.

    ``max_nfa_nodes`` bounds the program's instructions (~13 bytes each in its typed arrays, so
    the default is ~50 MB): a JSON string with ``maxLength: 65535`` (a database column's limit,
    common in real schemas) is ~2.7 M of them, built in ~0.2 s; its states are explored only as
    far as documents go.
    """

    DEAD: int = -1
    TRUE: int = 0
    FALSE: int = 1

    def __init__(
        self,
        terminals: Sequence[tuple[str, str]],
        *,
        max_states: int = 200_000,
        max_nfa_nodes: int = 4_000_000,
    ):
        self.max_states = max_states
        self.terminal_names: list[str] = [name for name, _ in terminals]
        if len(set(self.terminal_names)) != len(self.terminal_names):
            raise RegexError("lexer: duplicate terminal names")
        self.prog = Program(max_nodes=max_nfa_nodes)
        self.terms: list[TerminalProgram] = [
            self.prog.add_terminal(name, pattern) for name, pattern in terminals
        ]
        self.prog.drop_compile_memos()
        self.byte_groups: tuple[tuple[int, ...], ...] = self.prog.byte_groups()
        """Bytes every state steps alike (:meth:`Program.byte_groups`), representative first."""
        self._reps: tuple[int, ...] = tuple(g[0] for g in self.byte_groups)
        # Per terminal, the bytes its own classes cannot tell apart: a lane (with its atoms,
        # trackers and conditions) is stepped and memoized once per group of *its* partition —
        # a keyword literal has a handful of groups where the whole grammar has a hundred.
        self._gid: list[tuple[int, ...]] = []  # terminal -> byte -> group
        self._grep: list[tuple[int, ...]] = []  # terminal -> group -> representative byte
        # (shared by every lexer whose terminal has the same classes: Program.byte_partition)
        by_classes: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for term in self.terms:
            hit = by_classes.get(term.classes)
            if hit is None:
                hit = by_classes[term.classes] = self.prog.byte_partition(term.classes)
            self._gid.append(hit[0])
            self._grep.append(hit[1])
        # joint states step alike on the bytes that every live lane's partition puts together:
        # per set of live terminals, byte -> class and the classes' representatives
        self._parts: dict[tuple[int, ...], tuple[list[int], tuple[int, ...]]] = {}
        self._spreads: dict[tuple[int, ...], list[list[list[int]]]] = {}
        # atoms: (positive, open body paths {(pc or -1, condset)}, trackers or None);
        # condsets: frozensets of atom ids
        self._atoms: list[tuple[bool, frozenset[tuple[int, int]], tuple | None]] = []
        self._atom_ids: dict[tuple, int] = {}
        self._atom_step: dict[tuple[int, int], int] = {}
        self._atom_end: dict[int, bool] = {}
        self._look_init: dict[tuple[int, bool, tuple | None], int] = {}
        self._cs: list[frozenset[int]] = [frozenset()]
        self._cs_ids: dict[frozenset[int], int] = {frozenset(): 0}
        self._cs_step: dict[tuple[int, int], int] = {}
        self._cs_add: dict[tuple[int, int], int] = {}
        # lookbehind trackers: (start pc, waiting set, accepts-here)
        self._trk: list[tuple[int, frozenset[int], bool]] = []
        self._trk_ids: dict[tuple[int, frozenset[int], bool], int] = {}
        self._trk_step: dict[tuple[int, int], int] = {}
        self._closures: dict[tuple[int, int, tuple | None], tuple[tuple[int, int], ...]] = {}
        # per-terminal lanes
        n = len(terminals)
        self._ts: list[list[tuple]] = [[] for _ in range(n)]
        self._ts_ids: list[dict[tuple, int]] = [{} for _ in range(n)]
        # lane steps: per terminal, per lane state, one entry per byte group of the terminal
        self._ts_rows: list[list[list]] = [[] for _ in range(n)]
        self._ts_live: list[list[Optional[list]]] = [[] for _ in range(n)]
        self._ts_total = 0
        self._n_trans = 0  # memoized byte transitions (joint and lane), see _transition_added
        self._ts_future: list[dict[int, bool]] = [{} for _ in range(n)]
        # which byte groups a lane's listing steps (_read_groups), per terminal: bitmask of the
        # groups a waiting pc survives on, by pc and by (class, class state); the step of a
        # (class, state) on each group; per set of (class, state) pairs, the first group stepping
        # alike with each group; per (such set, bitmask), the sets of groups stepped once; and per
        # condition set, the (class, state) pairs its lookahead bodies read
        self._pc_groups: list[dict[int, int]] = [{} for _ in range(n)]
        self._cls_groups: list[dict[tuple[int, int], int]] = [{} for _ in range(n)]
        self._cls_steps: list[dict[tuple[int, int], tuple[int, ...]]] = [{} for _ in range(n)]
        self._alike: list[dict[frozenset[tuple[int, int]], list[int]]] = [{} for _ in range(n)]
        self._read_sets: list[dict[tuple[frozenset[tuple[int, int]], int], list[tuple[int, ...]]]] = [
            {} for _ in range(n)]
        self._cs_cls: dict[int, Optional[frozenset[tuple[int, int]]]] = {}
        self._plain_terms: dict[int, bool] = {}
        self._class_encodable: dict[int, bool] = {}  # class id -> it holds an encodable character
        # conditions
        self._conds: list[tuple | None] = [None, None]
        self._cond_ids: dict[tuple, int] = {}
        self._cond_step: dict[tuple[int, int], int] = {}
        self._cond_sat: dict[int, bool] = {}
        # joint states
        # a joint state is the tuple of its live lanes ``(terminal, lane state)``, by terminal:
        # sparse, because after a byte or two most terminals of a large grammar are dead
        self._js: list[tuple[tuple[int, int], ...]] = []
        self._js_ids: dict[tuple[tuple[int, int], ...], int] = {}
        # joint steps: per state, its byte -> class list (shared by the states with the same live
        # terminals) and one memo entry per class; both None until the state is first stepped
        self._js_cls: list[Optional[list[int]]] = []
        self._js_rows: list[Optional[list]] = []
        init = tuple((t, ts) for t, ts in ((t, self._initial_lane(t)) for t in range(n)) if ts >= 0)
        self.initial: int = self._intern_joint(init)

    # ------------------------------------------------------------------ public API
    @property
    def n_states(self) -> int:
        """Joint states interned so far."""
        return len(self._js)

    @property
    def n_lane_states(self) -> int:
        """Per-terminal lane states interned so far (all terminals)."""
        return self._ts_total

    @property
    def n_conds(self) -> int:
        """Pending conditions interned so far (TRUE/FALSE excluded)."""
        return len(self._conds) - 2

    def step(self, state: int, byte: int) -> tuple[int, tuple[Event, ...]]:
        """Feed one byte. Returns ``(next_state or DEAD, events)``; each event
        ``(terminal_id, cond_id)`` says a candidate match of that terminal ends right after this
        byte, and it is ``re.match``'s answer iff ``cond_id`` holds on the bytes that follow
        (``TRUE`` = unconditionally)."""
        if state < 0:
            return -1, ()
        row = self._js_rows[state]
        if row is None:
            cls, reps = self._partition(state)
            row = self._js_rows[state] = [None] * len(reps)
            self._js_cls[state] = cls
        k = self._js_cls[state][byte]
        hit = row[k]
        if hit is not None:
            return hit
        nxt = []
        events: list[Event] = []
        for t, ts in self._js[state]:
            ts2, ev = self._lane_step(t, ts, byte)
            if ts2 >= 0:
                nxt.append((t, ts2))
            events.extend(ev)
        res = (self._intern_joint(tuple(nxt)), tuple(events))
        row[k] = res
        self._transition_added()
        return res

    def row(self, state: int) -> tuple[list[int], list[tuple[int, tuple[Event, ...]]]]:
        """All of ``state``'s transitions at once: ``(class of each byte, result of each
        class)``, with :meth:`byte_classes`' classes — ``step(state, b) == results[cls[b]]``.
        Cheaper than a :meth:`step` per class: each live lane contributes only on the bytes where
        it survives or reports an event (a keyword literal: one or two of the classes), so the
        cost is the lanes' live entries, not classes times lanes."""
        if state < 0:  # DEAD (the initial state of a lexer without terminals) stays DEAD
            return [0] * 256, [(-1, ())]
        cls, reps = self.byte_classes(state)
        row = self._js_rows[state]
        if all(x is not None for x in row):
            return cls, row
        spread = self._spread(tuple(t for t, _ in self._js[state]))
        nxt: list[list[tuple[int, int]]] = [[] for _ in reps]
        evs: list[list[Event]] = [[] for _ in reps]
        for i, (t, ts) in enumerate(self._js[state]):
            to_classes = spread[i]
            for gs, ts2, ev in self._lane_live(t, ts):
                for g in gs:
                    for k in to_classes[g]:
                        if ts2 >= 0:
                            nxt[k].append((t, ts2))
                        if ev:
                            evs[k].extend(ev)
        intern = self._intern_joint
        for k in range(len(reps)):
            if row[k] is None:
                row[k] = (intern(tuple(nxt[k])), tuple(evs[k]))
                self._transition_added()
        return cls, row

    def _spread(self, terms: tuple[int, ...]) -> list[list[list[int]]]:
        """For the live terminals ``terms`` of a joint state: per terminal (in order), per byte
        group of the terminal, the joint byte classes it covers (ascending)."""
        hit = self._spreads.get(terms)
        if hit is None:
            cls = self._partition_of(terms)[0]
            hit = []
            for t in terms:
                gid = self._gid[t]
                per: list[list[int]] = [[] for _ in self._grep[t]]
                for b in range(256):
                    lst = per[gid[b]]
                    if not lst or lst[-1] != cls[b]:
                        if cls[b] not in lst:
                            lst.append(cls[b])
                for lst in per:
                    lst.sort()
                hit.append(per)
            self._spreads[terms] = hit
        return hit

    def _lane_live(self, t: int, ts: int) -> list[tuple[tuple[int, ...], int, tuple[Event, ...]]]:
        """A lane's transitions that matter: ``(groups, lane state', events)`` for each set of
        byte groups of its terminal that the lane steps alike (:meth:`_read_groups`) on which it
        survives or reports an event. Each set is stepped once, on its first group, and every
        group of it gets that step's memo entry."""
        live = self._ts_live[t]
        hit = live[ts]
        if hit is None:
            hit = []
            entries, trackers = self._ts[t][ts]
            memo = self._ts_rows[t][ts]
            grep = self._grep[t]
            for gs in self._read_groups(t, entries, trackers):
                res = self._lane_step(t, ts, grep[gs[0]])
                for g in gs[1:]:
                    memo[g] = res
                ts2, ev = res
                if ts2 >= 0 or ev:
                    hit.append((gs, ts2, ev))
            live[ts] = hit
        return hit

    def _read_groups(self, t: int, entries: tuple[tuple[int, int], ...], trackers) -> list[tuple[int, ...]]:
        """The byte groups of terminal ``t`` on which a lane holding ``entries`` (with
        ``trackers``) can survive or report (:meth:`_entries_groups`; on the others its step is
        ``(DEAD, ())``), as sets of groups it steps exactly alike (:meth:`_alike_groups`): each
        set ascending, the sets by their first group."""
        mask = self._entries_groups(t, entries)
        if not mask & (mask - 1):  # none, or one group
            return [(mask.bit_length() - 1,)] if mask else []
        keys = self._read_keys(entries, trackers)
        if keys is None:
            out = []
            while mask:
                low = mask & -mask
                mask ^= low
                out.append((low.bit_length() - 1,))
            return out
        memo = self._read_sets[t]
        hit = memo.get((keys, mask))
        if hit is None:
            same = self._alike_groups(t, keys)
            sets: dict[int, list[int]] = {}
            m = mask
            while m:  # ascending: each set starts at its first group
                low = m & -m
                m ^= low
                g = low.bit_length() - 1
                sets.setdefault(same[g], []).append(g)
            hit = memo[(keys, mask)] = [tuple(gs) for gs in sets.values()]
        return hit

    def _read_keys(self, entries: tuple[tuple[int, int], ...], trackers) -> Optional[frozenset[tuple[int, int]]]:
        """The (class, class state) pairs a lane holding ``entries`` reads its next byte through:
        its threads' pcs and, recursively, its lookahead bodies' paths; None when the lane or
        one of its lookaheads carries lookbehind trackers (they read the byte too)."""
        if trackers is not None:
            return None
        prog = self.prog
        kind, a, bb = prog.kind, prog.a, prog.b
        keys: set[tuple[int, int]] = set()
        for pc, cs in entries:
            if pc >= 0:
                keys.add((a[pc], 0 if kind[pc] == CHAR else bb[pc]))
            if cs:
                sub = self._cs_classes(cs)
                if sub is None:
                    return None
                keys |= sub
        return frozenset(keys)

    def _alike_groups(self, t: int, keys: frozenset[tuple[int, int]]) -> list[int]:
        """Per byte group of terminal ``t``, the first group on which every (class, state) of
        ``keys`` (:meth:`_read_keys`) steps as on it.

        Why this is exact: without trackers, a lane step reads its byte only through
        :meth:`Program.advance` of the pcs of its threads and, recursively, of its lookahead
        bodies' paths — everything else (closures, conditions, interning) is a function of those
        results. ``advance(pc, b)`` depends on ``b`` only through the step of the pc's
        (class, class state) (the pc after it, or a half-read MID interned per class state), so
        groups on which every such class steps to the same state give the same step. A lane
        guarding a key against fifty others reads fifty-odd groups but only the few dozen
        letters of those keys tell them apart."""
        memo = self._alike[t]
        hit = memo.get(keys)
        if hit is None:
            vecs = [self._class_steps(t, k) for k in keys]
            if vecs:
                first: dict[tuple[int, ...], int] = {}
                hit = [first.setdefault(sig, g) for g, sig in enumerate(zip(*vecs))]
            else:  # nothing left reads a byte
                hit = [0] * len(self._grep[t])
            memo[keys] = hit
        return hit

    def _class_steps(self, t: int, key: tuple[int, int]) -> tuple[int, ...]:
        """The step of class state ``key = (class, state)`` on each byte group of terminal ``t``."""
        memo = self._cls_steps[t]
        hit = memo.get(key)
        if hit is None:
            step = self.prog.classes[key[0]].step
            hit = memo[key] = tuple(step(key[1], b) for b in self._grep[t])
        return hit

    def _cs_classes(self, cs: int) -> Optional[frozenset[tuple[int, int]]]:
        """The (class, state) pairs the lookahead bodies of condition set ``cs`` read, through
        nested lookaheads; None when one of them carries lookbehind trackers."""
        memo = self._cs_cls
        if cs in memo:
            return memo[cs]
        prog = self.prog
        kind, a, bb = prog.kind, prog.a, prog.b
        keys: set[tuple[int, int]] = set()
        known = True
        for aid in self._cs[cs]:
            _positive, body, trk = self._atoms[aid]
            if trk is not None:
                known = False
                break
            for pc, sub_cs in body:
                if pc >= 0:
                    keys.add((a[pc], 0 if kind[pc] == CHAR else bb[pc]))
                if sub_cs:
                    sub = self._cs_classes(sub_cs)
                    if sub is None:
                        known = False
                        break
                    keys |= sub
            if not known:
                break
        res = frozenset(keys) if known else None
        memo[cs] = res
        return res

    def _entries_groups(self, t: int, entries: tuple[tuple[int, int], ...]) -> int:
        """Bitmask of terminal ``t``'s byte groups on which a lane holding ``entries`` can survive
        or report an event: every group when it holds a blocker, else the groups some thread's
        pc reads. On the other groups every thread dies at once (:meth:`Program.advance` < 0)
        whatever its conditions, so the step is ``(DEAD, ())`` without being computed — most
        groups of most lanes (a keyword literal reads one or two of them)."""
        memo = self._pc_groups[t]
        mask = 0
        for pc, _cs in entries:
            if pc < 0:
                return (1 << len(self._grep[t])) - 1
            m = memo.get(pc)
            if m is None:
                m = memo[pc] = self._pc_group_mask(t, pc)
            mask |= m
        return mask

    def _pc_group_mask(self, t: int, pc: int) -> int:
        """Bitmask of terminal ``t``'s byte groups on which the CHAR/MID instruction ``pc``
        survives (:meth:`Program.advance` >= 0: its class does not die on the byte). Keyed by
        the instruction's (class, class state), not its pc: a counted repeat's copies of one
        character share it."""
        prog = self.prog
        cls = prog.a[pc]
        cstate = 0 if prog.kind[pc] == CHAR else prog.b[pc]
        key = (cls, cstate)
        memo = self._cls_groups[t]
        m = memo.get(key)
        if m is None:
            step = prog.classes[cls].step
            m = 0
            for g, b in enumerate(self._grep[t]):
                if step(cstate, b) != CLS_DEAD:
                    m |= 1 << g
            memo[key] = m
        return m

    def byte_classes(self, state: int) -> tuple[list[int], tuple[int, ...]]:
        """The bytes ``state`` steps alike: ``(class of each byte, representative of each
        class)``, classes numbered by their smallest byte (the representative). Every byte of a
        class gives the same :meth:`step` result — each class is a union of
        :attr:`byte_groups`, merged where no live terminal tells them apart — so an exploration
        steps once per class. DEAD has one class."""
        if state < 0:
            return [0] * 256, (0,)
        if self._js_cls[state] is None:
            cls, reps = self._partition(state)
            self._js_rows[state] = [None] * len(reps)
            self._js_cls[state] = cls
        return self._js_cls[state], self._parts[tuple(t for t, _ in self._js[state])][1]

    def _partition(self, state: int) -> tuple[list[int], tuple[int, ...]]:
        return self._partition_of(tuple(t for t, _ in self._js[state]))

    def _partition_of(self, terms: tuple[int, ...]) -> tuple[list[int], tuple[int, ...]]:
        hit = self._parts.get(terms)
        if hit is None:
            gids = self._gid
            distinct = {id(gids[t]): gids[t] for t in terms}  # terminals sharing classes share one
            hit = self._parts[terms] = _joint_classes(list(distinct.values()))
        return hit

    def scan(self, state: int, data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
        """Feed ``data``; returns ``(state, [(end_offset, terminal_id, cond_id), ...])`` where
        ``end_offset`` counts bytes of ``data`` (the candidate ends after ``data[end_offset-1]``).
        Stops early once the state is DEAD."""
        return scan_with(self.step, state, data)

    def alive_terminals(self, state: int) -> frozenset[int]:
        """Terminals whose lane is not empty (they may still report events)."""
        if state < 0:
            return frozenset()
        return frozenset(t for t, _ts in self._js[state])

    def restrict(self, state: int, terminals: Iterable[int]) -> int:
        """The same state with every terminal not in ``terminals`` dropped (DEAD if none left)."""
        if state < 0:
            return -1
        keep = frozenset(terminals)
        return self._intern_joint(tuple((t, ts) for t, ts in self._js[state] if t in keep))

    def futures(self, state: int) -> frozenset[int]:
        """Terminals that, for some continuation of the bytes, still report an event whose
        condition is satisfiable (exact: a search over the finite lane state space)."""
        if state < 0:
            return frozenset()
        return frozenset(
            t for t, ts in self._js[state] if self._lane_future(t, ts)
        )

    def has_future(self, state: int, terminal: int) -> bool:
        """``terminal in futures(state)``, searching that terminal's lane only (the dynamic
        runtime asks only about terminals the parser could take next)."""
        if state < 0:
            return False
        for t, ts in self._js[state]:
            if t == terminal:
                return self._lane_future(t, ts)
        return False

    def cond_step(self, cond: int, byte: int) -> int:
        """Advance a condition over one more byte: TRUE, FALSE or a pending condition."""
        if cond < 2:
            return cond
        key = (cond, byte)
        hit = self._cond_step.get(key)
        if hit is None:
            hit = self._compute_cond_step(cond, byte)
            self._cond_step[key] = hit
        return hit

    def cond_byte_groups(self, cond: int) -> tuple[int, ...]:
        """Byte -> group of the terminal a pending condition belongs to: the condition steps
        alike on the bytes of one group (it reads only that terminal's classes)."""
        return self._gid[self._conds[cond][0]]

    def cond_at_end(self, cond: int) -> bool:
        """Resolve a condition at the end of the document: pending positive lookaheads fail,
        negative ones pass, pending higher-priority threads die, blockers pass iff their own
        lookaheads pass."""
        if cond < 2:
            return cond == self.TRUE
        _t, _tr, ahead, own = self._conds[cond]
        if not self._cs_passes_at_end(own):
            return False
        return not any(pc == -1 and self._cs_passes_at_end(cs) for pc, cs in ahead)

    def cond_satisfiable(self, cond: int) -> bool:
        """Whether some byte suffix (possibly empty, then end of document) makes ``cond`` TRUE."""
        if cond < 2:
            return cond == self.TRUE
        hit = self._cond_sat.get(cond)
        if hit is not None:
            return hit
        seen = {cond}
        queue = deque([cond])
        found = False
        while queue:
            c = queue.popleft()
            if c == self.TRUE or (c >= 2 and self._cond_sat.get(c) is True):
                found = True
                break
            if c == self.FALSE or self._cond_sat.get(c) is False:
                continue
            if self.cond_at_end(c):
                found = True
                break
            for b in self._grep[self._conds[c][0]]:  # a condition reads its terminal's classes
                d = self.cond_step(c, b)
                if d not in seen:
                    seen.add(d)
                    queue.append(d)
        if found:
            self._cond_sat[cond] = True
        else:
            for c in seen:
                if c >= 2:
                    self._cond_sat[c] = False
        return found

    def lane_entries(self, state: int, terminal: int) -> tuple[tuple[int, int], ...]:
        """Debug view: the ordered ``(pc, condset)`` entries of a terminal (pc -1 = blocker)."""
        if state < 0:
            return ()
        ts = dict(self._js[state]).get(terminal, -1)
        return () if ts < 0 else self._ts[terminal][ts][0]

    # ------------------------------------------------------------------ interning
    def _transition_added(self) -> None:
        """Memory and time budget of a compile (DESIGN §4.11): the memo tables are what grows — a
        few hundred bytes per memoized transition (one per byte class of each joint state the dense
        export visits, one per byte group of the terminal for each of its lane states) — so while a compile runs their size is limited by
        ``limits["lexer"]["max_transitions"]`` and its deadline is checked. Outside a compile (a dynamic mask serving requests) neither applies:
        the lexer's ``max_states`` still bounds it."""
        self._n_trans += 1
        if self._n_trans & 1023:
            return
        budget = current_budget()
        if not budget.active:
            return
        budget.check("lexer")
        budget.check_size("lexer", self._n_trans, "lexer", "max_transitions",
                          "memoized byte transitions (large counted repeats or long literals?)")

    def _budget(self, what: int, label: str) -> None:
        if what >= self.max_states:
            raise GrammarTooComplex(
                f"lexer: more than {self.max_states} interned {label} (limit max_states); "
                "the terminals' regexes create too many distinct scanning states"
            )

    def _intern_joint(self, lanes: tuple[tuple[int, int], ...]) -> int:
        if not lanes:
            return -1
        sid = self._js_ids.get(lanes)
        if sid is None:
            self._budget(len(self._js), "joint lexer states")
            sid = len(self._js)
            self._js.append(lanes)
            self._js_ids[lanes] = sid
            self._js_cls.append(None)
            self._js_rows.append(None)
        return sid

    def _intern_lane(self, t: int, entries: tuple, trackers: tuple | None) -> int:
        if not entries:
            return -1
        key = (entries, trackers)
        ids = self._ts_ids[t]
        sid = ids.get(key)
        if sid is None:
            self._budget(self._ts_total, f"lane states (terminal {self.terminal_names[t]!r})")
            self._ts_total += 1
            sid = len(self._ts[t])
            self._ts[t].append(key)
            self._ts_rows[t].append([None] * len(self._grep[t]))
            self._ts_live[t].append(None)
            ids[key] = sid
        return sid

    def _intern_cs(self, atoms: frozenset[int]) -> int:
        cid = self._cs_ids.get(atoms)
        if cid is None:
            self._budget(len(self._cs), "lookahead condition sets")
            cid = len(self._cs)
            self._cs.append(atoms)
            self._cs_ids[atoms] = cid
        return cid

    def _intern_atom(self, positive: bool, body: frozenset[tuple[int, int]], trackers) -> int:
        key = (positive, body, trackers)
        aid = self._atom_ids.get(key)
        if aid is None:
            self._budget(len(self._atoms), "lookahead states")
            aid = len(self._atoms)
            self._atoms.append(key)
            self._atom_ids[key] = aid
        return aid

    def _intern_trk(self, start: int, waiting: frozenset[int], acc: bool) -> int:
        key = (start, waiting, acc)
        tid = self._trk_ids.get(key)
        if tid is None:
            self._budget(len(self._trk), "lookbehind tracker states")
            tid = len(self._trk)
            self._trk.append(key)
            self._trk_ids[key] = tid
        return tid

    # ------------------------------------------------------------------ lookaheads (atoms)
    def _resolve_body(self, positive: bool, paths: Iterable[tuple[int, int]], trackers) -> int:
        """Atom for a body whose open paths are ``paths`` (``(-1, cs)`` = matched under ``cs``):
        decided TRUE/FALSE when a path matched unconditionally or none is left, else interned
        with the paths that are not dominated by another one."""
        sets = self._cs
        paths = set(paths)
        if (-1, _EMPTY_CS) in paths:
            return _ATOM_TRUE if positive else _ATOM_FALSE
        if not paths:
            return _ATOM_FALSE if positive else _ATOM_TRUE
        done = [sets[cs] for pc, cs in paths if pc == -1]
        # the condition sets each pc is reached under (a pc reached once cannot be dominated
        # at its own position: the common case, a set of alternatives read in lockstep)
        at_pc: dict[int, list[int]] = {}
        for pc, cs in paths:
            if pc != -1:
                at_pc.setdefault(pc, []).append(cs)
        keep = []
        for pc, cs in paths:
            mine = sets[cs]
            # whenever this path could succeed, a body match needing fewer conditions does too,
            # or the same position reached under fewer conditions does
            if done and any(d < mine or (pc != -1 and d <= mine) for d in done):
                continue
            if pc != -1:
                others = at_pc[pc]
                if len(others) > 1 and any(qcs != cs and sets[qcs] < mine for qcs in others):
                    continue
            keep.append((pc, cs))
        return self._intern_atom(positive, frozenset(keep), self._canon_trackers(trackers, keep))

    def _make_atom(self, look: int, positive: bool, trackers) -> int:
        """The atom of lookahead ``look`` started here (``trackers``: the lookbehind trackers at
        this position, needed when its body looks back)."""
        if trackers is not None and not self.prog.reaches_lookbehind(self.prog.look_starts[look]):
            trackers = None  # (no trackers: nothing to drop, and no walk over a key guard's body)
        key = (look, positive, trackers)
        hit = self._look_init.get(key)
        if hit is None:
            paths = self._closure(self.prog.look_starts[look], _EMPTY_CS, trackers)
            hit = self._resolve_body(positive, paths, trackers)
            self._look_init[key] = hit
        return hit

    def _step_set(self, waiting: frozenset[int], byte: int) -> tuple[frozenset[int], bool]:
        """Step an assertion-free state set (lookbehind trackers)."""
        adv = self.prog.advance
        nxt = [q for q in (adv(pc, byte) for pc in waiting) if q >= 0]
        return self.prog.set_closure(nxt)

    def _atom_advance(self, aid: int, byte: int) -> int:
        key = (aid, byte)
        hit = self._atom_step.get(key)
        if hit is None:
            positive, paths, trackers = self._atoms[aid]
            tr2 = self._trackers_advance(trackers, byte)
            advance = self.prog.advance
            out: list[tuple[int, int]] = []
            for pc, cs in paths:
                cs2 = cs and self._cs_advance(cs, byte)  # (the empty set stays empty)
                if cs2 == _CS_FAIL:
                    continue
                if pc == -1:
                    out.append((-1, cs2))
                    continue
                nxt = advance(pc, byte)
                if nxt >= 0:
                    out.extend(self._closure(nxt, cs2, tr2))
            hit = self._resolve_body(positive, out, tr2)
            self._atom_step[key] = hit
        return hit

    def _atom_at_end(self, aid: int) -> bool:
        """Resolution at the end of the document: open threads die, a body match holds iff its
        own conditions hold at the end."""
        hit = self._atom_end.get(aid)
        if hit is None:
            positive, paths, _ = self._atoms[aid]
            matched = any(pc == -1 and self._cs_passes_at_end(cs) for pc, cs in paths)
            hit = matched == positive
            self._atom_end[aid] = hit
        return hit

    def _cs_advance(self, cs: int, byte: int) -> int:
        if cs == _EMPTY_CS:
            return _EMPTY_CS
        key = (cs, byte)
        hit = self._cs_step.get(key)
        if hit is None:
            out = set()
            hit = None
            for aid in self._cs[cs]:
                r = self._atom_advance(aid, byte)
                if r == _ATOM_FALSE:
                    hit = _CS_FAIL
                    break
                if r != _ATOM_TRUE:
                    out.add(r)
            if hit is None:
                hit = self._intern_cs(frozenset(out))
            self._cs_step[key] = hit
        return hit

    def _cs_with(self, cs: int, aid: int) -> int:
        key = (cs, aid)
        hit = self._cs_add.get(key)
        if hit is None:
            hit = self._intern_cs(self._cs[cs] | {aid})
            self._cs_add[key] = hit
        return hit

    def _cs_passes_at_end(self, cs: int) -> bool:
        return all(self._atom_at_end(a) for a in self._cs[cs])

    # ------------------------------------------------------------------ lookbehind trackers
    def _initial_trackers(self, t: int) -> tuple[int, ...] | None:
        starts = self.terms[t].tracker_starts
        if not starts:
            return None
        out = []
        for s in starts:
            waiting, acc = self.prog.set_closure([s])
            out.append(self._intern_trk(s, waiting, acc))
        return tuple(out)

    def _trk_advance(self, tid: int, byte: int) -> int:
        key = (tid, byte)
        hit = self._trk_step.get(key)
        if hit is None:
            start, waiting, _ = self._trk[tid]
            w1, acc1 = self._step_set(waiting, byte)
            w0, acc0 = self.prog.set_closure([start])  # the body may start at the next char
            hit = self._intern_trk(start, w1 | w0, acc1 or acc0)
            self._trk_step[key] = hit
        return hit

    def _trackers_advance(self, trackers: tuple[int, ...] | None, byte: int):
        if trackers is None:
            return None
        return tuple(self._trk_advance(x, byte) for x in trackers)

    def _canon_trackers(self, trackers, entries) -> tuple[int, ...] | None:
        """Drop the trackers once no thread can meet a lookbehind again (smaller state space)."""
        if trackers is None:
            return None
        reach = self.prog.reaches_lookbehind
        if any(pc >= 0 and reach(pc) for pc, _ in entries):
            return trackers
        return None

    # ------------------------------------------------------------------ ordered closure
    def _closure(self, pc0: int, cs0: int, trackers) -> tuple[tuple[int, int], ...]:
        """Epsilon closure from ``pc0`` in ``re``'s priority order: ``(pc, condset)`` for each
        thread waiting on a byte and ``(-1, condset)`` for each ACCEPT (or, in a lookahead body,
        SUBACCEPT) reached."""
        key = (pc0, cs0, trackers)
        hit = self._closures.get(key)
        if hit is not None:
            return hit
        p = self.prog
        kind, A, B, Cc, D, T = p.kind, p.a, p.b, p.c, p.d, p.targets
        out: list[tuple[int, int]] = []
        seen_out: set[tuple[int, int]] = set()
        visited: set = set()
        stack = [(pc0, cs0, _NO_FLAGS)]
        while stack:
            item = stack.pop()
            if item in visited:
                continue
            visited.add(item)
            pc, cs, fl = item
            k = kind[pc]
            if k == CHAR or k == MID:
                if (pc, cs) not in seen_out:
                    seen_out.add((pc, cs))
                    out.append((pc, cs))
            elif k == ACCEPT or k == SUBACCEPT:
                if (-1, cs) not in seen_out:
                    seen_out.add((-1, cs))
                    out.append((-1, cs))
            elif k == SPLIT:
                first = A[pc]
                for tgt in reversed(T[first:first + B[pc]]):
                    stack.append((tgt, cs, fl))
            elif k == REP_ENTER:
                rep = A[pc]
                stack.append((B[pc], cs, fl - {rep} if rep in fl else fl))
            elif k == REP_CHECK:
                rep = A[pc]
                if rep in fl:  # the iteration just finished consumed nothing: take the tail
                    stack.append((Cc[pc], cs, fl - {rep}))
                elif D[pc]:  # greedy: body first
                    stack.append((Cc[pc], cs, fl))
                    stack.append((B[pc], cs, fl | {rep}))
                else:
                    stack.append((B[pc], cs, fl | {rep}))
                    stack.append((Cc[pc], cs, fl))
            elif k == LOOK:
                r = self._make_atom(A[pc], B[pc], trackers)
                if r == _ATOM_TRUE:
                    stack.append((Cc[pc], cs, fl))
                elif r != _ATOM_FALSE:
                    stack.append((Cc[pc], self._cs_with(cs, r), fl))
            elif k == LB:
                holds = self._trk[trackers[A[pc]]][2]
                if holds == B[pc]:
                    stack.append((Cc[pc], cs, fl))
            elif k == BOUND:
                prev_word = self._trk[trackers[A[pc]]][2]
                r = self._make_atom(B[pc], prev_word != Cc[pc], None)
                if r == _ATOM_TRUE:
                    stack.append((D[pc], cs, fl))
                elif r != _ATOM_FALSE:
                    stack.append((D[pc], self._cs_with(cs, r), fl))
            else:  # pragma: no cover - every instruction kind is handled above
                raise AssertionError(f"unexpected instruction {k} at pc {pc}")
        res = tuple(out)
        self._closures[key] = res
        return res

    # ------------------------------------------------------------------ lanes
    def _place(self, entries: list[tuple[int, int]], pc: int, cs: int) -> bool:
        """Append unless an entry ahead with the same pc needs a subset of its conditions (then it
        would win whenever this one could)."""
        sets = self._cs
        mine = sets[cs]
        for q, qcs in entries:
            if q == pc and (qcs == cs or sets[qcs] <= mine):
                return False
        entries.append((pc, cs))
        return True

    def _initial_lane(self, t: int) -> int:
        trackers = self._initial_trackers(t)
        entries: list[tuple[int, int]] = []
        for pc, cs in self._closure(self.terms[t].start, _EMPTY_CS, trackers):
            if pc == -1:  # pragma: no cover - nullable patterns are rejected at compile time
                raise RegexError(f"terminal {self.terminal_names[t]!r} matches the empty string")
            self._place(entries, pc, cs)
        return self._intern_lane(t, tuple(entries), self._canon_trackers(trackers, entries))

    def _lane_step(self, t: int, ts: int, byte: int) -> tuple[int, tuple[Event, ...]]:
        memo = self._ts_rows[t][ts]
        g = self._gid[t][byte]
        hit = memo[g]
        if hit is not None:
            return hit
        entries, trackers = self._ts[t][ts]
        tr2 = self._trackers_advance(trackers, byte)
        new: list[tuple[int, int]] = []
        events: list[Event] = []
        advance = self.prog.advance
        cut = False
        for pc, cs in entries:
            cs2 = cs and self._cs_advance(cs, byte)  # (the empty set stays empty)
            if cs2 == _CS_FAIL:
                continue
            if pc == -1:
                if cs2 == _EMPTY_CS:  # an earlier candidate's lookaheads all passed: it wins
                    break  # over everything behind it (its event was reported then)
                self._place(new, -1, cs2)
                continue
            nxt = advance(pc, byte)
            if nxt < 0:
                continue
            for q, qcs in self._closure(nxt, cs2, tr2):
                if q == -1:
                    cond = self._make_cond(t, tr2, new, qcs)
                    if cond != self.FALSE:
                        events.append((t, cond))
                    if qcs == _EMPTY_CS:
                        cut = True
                        break
                    self._place(new, -1, qcs)
                else:
                    self._place(new, q, qcs)
            if cut:
                break
        res = (self._intern_lane(t, tuple(new), self._canon_trackers(tr2, new)), tuple(events))
        memo[g] = res
        self._transition_added()
        return res

    def always_has_future(self, t: int) -> bool:
        """Whether terminal ``t`` reads no lookaround and no ``\\b``, and every character class
        it reads holds a character. Then each of its live lanes has a future without a search:
        every thread's path goes on to the terminal's match end (instructions are compiled
        toward it), the first thread to get there — or a higher-priority one, whose match end
        would cut it — reports an event, and that event's condition ("the entries ahead fail")
        holds at the end of the text. Keys and strings with many escape forms would otherwise
        cost a search of their whole lane automaton each (milliseconds on a new schema)."""
        hit = self._plain_terms.get(t)
        if hit is None:
            prog = self.prog
            kind, a, b, c = prog.kind, prog.a, prog.b, prog.c
            # Assertion instructions come only from these spellings (anchors are refused), so a
            # pattern without them needs no walk over its instructions (thousands for a bounded
            # string: ~10 ms of a large schema's first mask); with one, the walk decides. The
            # walk comes before the classes: a key's exclusion lookahead is its first
            # instruction, while its classes (one per spelling of each character) are many.
            hit = not self.terms[t].tracker_starts
            seen: set[int] = set()
            stack = [self.terms[t].start] if any(x in self.terms[t].pattern for x in _ASSERTION_SPELLINGS) else []
            while stack and hit:
                pc = stack.pop()
                if pc in seen:
                    continue
                seen.add(pc)
                k = kind[pc]
                if k in (LOOK, LB, BOUND):
                    hit = False
                elif k == CHAR:
                    stack.append(b[pc])
                elif k == MID:
                    stack.append(c[pc])
                elif k == SPLIT:
                    stack.extend(prog.split_targets(pc))
                elif k == REP_ENTER:
                    stack.append(b[pc])
                elif k == REP_CHECK:
                    stack.extend((b[pc], c[pc]))
            if hit:  # classes are shared between terminals (a key's spellings): each is checked once
                memo = self._class_encodable
                for k in self.terms[t].classes:
                    ok = memo.get(k)
                    if ok is None:
                        ok = memo[k] = _encodable(prog.classes[k].cps)
                    if not ok:
                        hit = False
                        break
            self._plain_terms[t] = hit
        return hit

    def _lane_future(self, t: int, ts: int) -> bool:
        if self.always_has_future(t):
            return True
        memo = self._ts_future[t]
        hit = memo.get(ts)
        if hit is not None:
            return hit
        # Depth first, each state's steps taken one at a time, descending into the first new
        # successor: one path to a match end suffices. A breadth-first search visits every lane
        # state nearer than the nearest match end — all of a date-time format's hundreds — and
        # expanding each state whole stepped every byte group of every state on the path: a
        # bounded string's count, ten or so groups per level down to its bound, where one per
        # level finds the end.
        groups = self._grep[t]
        seen = {ts}
        path: list[int] = [ts]
        steps = [self._future_steps(t, ts, groups)]  # per state on the path: its steps not taken yet
        found = False
        while path and not found:
            for y, ev in steps[-1]:
                if any(self.cond_satisfiable(c) for _, c in ev):
                    found = True
                    break
                if y < 0 or y in seen:
                    continue
                seen.add(y)
                known = memo.get(y)
                if known is False:
                    continue
                path.append(y)
                if known is True:
                    found = True
                else:
                    steps.append(self._future_steps(t, y, groups))
                break
            else:  # every step of the last state taken: back up
                path.pop()
                steps.pop()
        if found:
            for x in path:  # every state on the path reaches the match end: later queries hit
                memo[x] = True
            return True
        for x in seen:  # the search was exhaustive: nothing reachable from here has a future
            memo[x] = False
        return False

    def _future_steps(self, t: int, x: int, groups):
        """The steps :meth:`_lane_future` takes from lane state ``x``, lazily: only the groups
        where ``x`` survives or reports (on the others its step is ``(DEAD, ())``), from the
        listed transitions when the export listed them."""
        listed = self._ts_live[t][x]
        if listed is not None:
            return ((y, ev) for _gs, y, ev in listed)
        mask = self._entries_groups(t, self._ts[t][x][0])
        return (self._lane_step(t, x, b) for g, b in enumerate(groups) if mask >> g & 1)

    # ------------------------------------------------------------------ conditions
    def _make_cond(self, t: int, trackers, ahead: Iterable[tuple[int, int]], own: int) -> int:
        sets = self._cs
        mine = sets[own]
        entries: list[tuple[int, int]] = []
        for pc, cs in ahead:
            if pc == -1 and sets[cs] <= mine:
                return self.FALSE  # whenever our lookaheads pass, that earlier candidate wins
            entries.append((pc, cs))
        if not entries:
            if own == _EMPTY_CS:
                return self.TRUE
            key = (t, None, frozenset(), own)
        else:
            # "any ahead entry succeeds" is order-free: drop entries another one dominates
            keep = [
                (pc, cs)
                for i, (pc, cs) in enumerate(entries)
                if not any(
                    j != i and q == pc and sets[qcs] <= sets[cs] and (sets[qcs] != sets[cs] or j < i)
                    for j, (q, qcs) in enumerate(entries)
                )
            ]
            key = (t, self._canon_trackers(trackers, keep), frozenset(keep), own)
        cid = self._cond_ids.get(key)
        if cid is None:
            self._budget(len(self._conds), "match conditions")
            cid = len(self._conds)
            self._conds.append(key)
            self._cond_ids[key] = cid
        return cid

    def _compute_cond_step(self, cond: int, byte: int) -> int:
        t, trackers, ahead, own = self._conds[cond]
        own2 = self._cs_advance(own, byte)
        if own2 == _CS_FAIL:
            return self.FALSE
        tr2 = self._trackers_advance(trackers, byte)
        new: list[tuple[int, int]] = []
        advance = self.prog.advance
        for pc, cs in sorted(ahead):
            cs2 = cs and self._cs_advance(cs, byte)  # (the empty set stays empty)
            if cs2 == _CS_FAIL:
                continue
            if pc == -1:
                if cs2 == _EMPTY_CS:
                    return self.FALSE
                new.append((-1, cs2))
                continue
            nxt = advance(pc, byte)
            if nxt < 0:
                continue
            for q, qcs in self._closure(nxt, cs2, tr2):
                if q == -1 and qcs == _EMPTY_CS:
                    return self.FALSE  # a higher-priority thread matched unconditionally
                new.append((q, qcs))
        return self._make_cond(t, tr2, new, own2)


_ASSERTION_SPELLINGS = ("(?=", "(?!", "(?<", "\\b", "\\B")
"""Every way a Python regex writes a lookaround or a word boundary (the only sources of LOOK, LB
and BOUND instructions; a character class's ``[\\b]`` is a false alarm, which only costs a walk)."""


def _joint_classes_py(rows: list) -> tuple[list[int], tuple[int, ...]]:
    """The bytes every row (a byte -> group map of one live terminal) steps alike: ``(class of
    each byte, smallest byte of each class)``, classes numbered by that byte. The reference of
    ``glrmask_ext.byte_groups.joint_classes``, which :meth:`Lexer._partition_of` uses."""
    ids: dict[tuple[int, ...], int] = {}
    cls = [0] * 256
    reps: list[int] = []
    for b, key in enumerate(zip(*rows) if rows else [()] * 256):
        k = ids.get(key)
        if k is None:
            k = ids[key] = len(reps)
            reps.append(b)
        cls[b] = k
    return cls, tuple(reps)


try:
    from glrmask_ext.byte_groups import joint_classes as _joint_classes
except ImportError:  # pragma: no cover - the extension is not built
    _joint_classes = _joint_classes_py


def _encodable(cps) -> bool:
    """Whether a code point set holds a character UTF-8 can encode (one that is not a surrogate)."""
    return any(lo < 0xD800 or hi > 0xDFFF for lo, hi in cps)


def scan_with(step, state: int, data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """:meth:`Lexer.scan` over any ``step(state, byte) -> (state', events)`` (lazy or dense)."""
    out: list[tuple[int, int, int]] = []
    for i, b in enumerate(data):
        if state < 0:
            break
        state, ev = step(state, b)
        for t, c in ev:
            out.append((i + 1, t, c))
    return state, out


PYTHON_STEPPING: dict = {name: getattr(Lexer, name) for name in (
    "step", "row", "_lane_step", "_lane_live", "_entries_groups", "_lane_future", "_closure", "_cs_advance",
    "_atom_advance")}
"""The Python methods ``glrmask_ext.lazy_step`` replaces (the references the native ones are
tested against: setting them back on :class:`Lexer` gives the pure Python lexer)."""
_python_step = PYTHON_STEPPING["step"]
_python_lane_step = PYTHON_STEPPING["_lane_step"]
_python_lane_future = PYTHON_STEPPING["_lane_future"]

try:
    from glrmask_ext import lazy_step as _native_step
except ImportError:  # pragma: no cover - the extension is not built: the Python steps
    _native_step = None
else:
    # the same algorithms over the same objects (same ids, events and conditions), in C: a cold
    # dynamic mask spends most of its exploration in these, the dense export in ``row``
    Lexer.step = _native_step.step  # type: ignore[method-assign]
    Lexer.row = _native_step.row  # type: ignore[method-assign]
    Lexer._lane_step = _native_step.lane_step  # type: ignore[method-assign]
    Lexer._lane_live = _native_step.lane_live  # type: ignore[method-assign]
    Lexer._entries_groups = _native_step.entries_groups  # type: ignore[method-assign]
    Lexer._lane_future = _native_step.lane_future  # type: ignore[method-assign]
    Lexer._closure = _native_step.closure  # type: ignore[method-assign]
    Lexer._cs_advance = _native_step.cs_advance  # type: ignore[method-assign]
    Lexer._atom_advance = _native_step.atom_advance  # type: ignore[method-assign]
