"""The dynamic engine: native requests and masks before (or without) any compile.

Why. A schema that arrives with a request cannot wait for the static compile (dense lexer, stack
effects, Terminal and Parser DWA). The dynamic engine needs only what is cheap — the lazy lexer
and the LR table — and still runs every request natively: the same per-request state, commit and
GLR steps as the static engine (:mod:`glrmask_ext.runtime`), with the mask computed by a walk of
the vocabulary trie over that state instead of the Parser DWA — in practice from *lexeme memos*
built once per lane kind and shared by every request (the tokens that stay inside the lexeme,
and classes of the tokens that end a terminal, evaluated against the stacks; see the runtime's
module docstring), so most masks walk no trie at all.

The lexer is explored on demand. Native steps read lexer rows from
:class:`glrmask_ext.runtime.LazyLexer`; an entry not explored yet makes the step report what it
missed, :meth:`LexerExplorer.explore` computes those entries with the lazy lexer (under one
lock per mask, held only while exploring — the requests' own steps never take it) and the step
runs again. The native side hands over each missing entry once, and the lexer's hot steps and
the explore loop run in C (``glrmask_ext.lazy_step``, ``glrmask_ext.lazy_explore``: the same
algorithms over the same Python tables, so the same states and masks; the lanes with no lookahead
— JSON keys and strings — are stepped on a native mirror of those tables, ``step_plain``). Exploration is monotone, so after the first masks of a grammar nearly every step
is native end to end.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

import numpy as np

from glrmask_ext.runtime import LazyLexer

from ..grammar.gc_pause import cyclic_gc_paused

from .engine import trie_arrays
from .tables import build_tables, dynamic_arrays

try:
    from glrmask_ext import lazy_explore as _native_explore
except ImportError:  # pragma: no cover - the extension is not built: the loop in Python
    _native_explore = None

__all__ = ["DEFAULT_MEMO_MB", "DEFAULT_STEP_TRANSITIONS", "DynamicEngine", "LexerExplorer"]

DEFAULT_MEMO_MB = 256
"""Memory the lexeme memos of one mask may hold (``limits["dynamic"]["max_memo_mb"]``); past it,
masks of lexer states without a memo walk the trie (same masks, slower); 0 turns memos off."""

DEFAULT_STEP_TRANSITIONS = 200_000
"""Lexer entries one operation (a mask or a commit) may explore (``limits["dynamic"]
["max_step_transitions"]``; each is one step of the Python lazy lexer, an explored entry costs
nothing again): the per-step fuel of DESIGN §4.11 — a pathological lexer ends that request with
:class:`~glrmask.errors.GrammarTooComplex` instead of stalling it."""


EXPLORE_AHEAD = 16
"""Steps a chain of lexer states is explored ahead on one byte group. A state that a byte group
leaves for another without an event (a bounded string's next count) starts a chain the walks
would explore one trie level per round trip — a memo's walk, and a memo transfer or relabelling
comparing level by level: the next 16 states on that group are explored with the first (while
the lexer has room for the states: half its ``max_states``)."""


class LexerExplorer:
    """Fills a :class:`LazyLexer` from a Python lazy lexer, entry by entry, on request."""

    M_STEP, M_ALIVE, M_COND_STEP, M_COND_INFO, M_FUTURE, M_BOUNDARY = 0, 1, 2, 3, 4, 5

    def __init__(self, lexer, *, lock=None, max_step_transitions: Optional[int] = DEFAULT_STEP_TRANSITIONS) -> None:
        self.lexer = lexer
        self.max_step_transitions = max_step_transitions
        self.fut_words = max(1, (len(lexer.terminal_names) + 63) // 64)
        cap = int(lexer.max_states) + 2
        self.native = LazyLexer(cap, cap, self.fut_words)
        self._lock = lock if lock is not None else threading.Lock()
        self._spent = threading.local()
        group_of = np.zeros(256, dtype=np.int64)
        for k, g in enumerate(lexer.byte_groups):
            group_of[list(g)] = k
        # the native side hands each entry over once, and an explored byte step answers the
        # byte's whole group
        self.native.set_byte_groups(group_of)
        self.n_explored = 0
        self.explore_ahead = EXPLORE_AHEAD
        self.next_terminals: Optional[tuple[np.ndarray, np.ndarray]] = None
        """``(act_lex, follow_lex)`` of the tables (:func:`glrmask.runtime.tables.next_terminal_arrays`):
        what lexeme start states are restricted to (``M_BOUNDARY``)."""

    def explore(self, missing: np.ndarray, first: bool = True) -> None:
        """Compute the entries ``missing`` names (``(kind, a, b)`` rows; see ``Tables.attach_dynamic``),
        each once (the native side drops repeats, byte steps per byte group: :meth:`LazyLexer.set_byte_groups`);
        ``first``: the first call of one operation (its fuel starts again)."""
        if first:
            self._spent.n = 0
        spent = getattr(self._spent, "n", 0) + len(missing)
        self._spent.n = spent
        fuel = self.max_step_transitions
        if fuel is not None and spent > fuel:
            from glrmask.errors import GrammarTooComplex

            raise GrammarTooComplex(
                f"dynamic mask: one step needs more than {fuel} new lexer transitions (limit "
                "max_step_transitions, limits={'dynamic': {'max_step_transitions': N}}); the terminals' "
                "regexes create too many scanning states for the vocabulary")
        # the lexer's interning allocates thousands of small objects per cold mask, none of them
        # cyclic garbage: left to the collector, they started young collections and, now and
        # then, a full one of the whole process inside a mask (51 ms on the replay bench)
        with self._lock, cyclic_gc_paused():
            if _native_explore is not None:
                ahead = _native_explore.explore_rows(self, missing)
            else:  # pragma: no cover - the extension is not built
                ahead = 0
                for kind, a, b in missing.tolist():
                    n = self.explore_one(kind, a, b)
                    self.n_explored += 1 + n
                    ahead += n
        self._spent.n = spent + ahead  # (the chains explored ahead are fuel spent too)

    def explore_one(self, kind: int, a: int, b: int) -> int:
        """Compute and publish one entry (the lock held); returns the steps explored ahead
        (:data:`EXPLORE_AHEAD`). ``glrmask_ext.lazy_explore`` runs the byte steps itself, the
        same way, and hands the other kinds to this method."""
        lexer, nat = self.lexer, self.native
        if kind == self.M_STEP:
            x, k, roomy = a, 0, lexer.max_states // 2
            while True:
                q2, events = lexer.step(x, b)
                for _term, cond in events:
                    self._cond(cond)
                nat.set_step_events(x, b, q2, events)
                if q2 >= 0 and not nat.has_alive(q2):
                    # the walk asks next whether a lane in q2 survives: answered now, not in
                    # another round trip (a long lexeme is a chain of new states)
                    self.explore_one(self.M_ALIVE, q2, 0)
                # the chain ahead on b's group (explore_ahead)
                if (events or not 0 <= q2 != x or k == self.explore_ahead or lexer.n_states >= roomy
                        or nat.has_step(q2, b)):
                    break
                x, k = q2, k + 1
            return k
        elif kind == self.M_ALIVE:
            alive = sorted(lexer.alive_terminals(a))
            # the futures known without a search are answered now: no round trip per terminal
            nat.set_alive_terms(a, alive, [term for term in alive if lexer.always_has_future(term)])
        elif kind == self.M_FUTURE:
            nat.set_future(a, b, lexer.has_future(a, b))
        elif kind == self.M_BOUNDARY:
            act, follow = self.next_terminals
            words = (follow if b else act)[a]
            terms = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
            nat.set_boundary(a + b * len(act), lexer.restrict(lexer.initial, terms.tolist()))
        elif kind == self.M_COND_STEP:
            c2 = lexer.cond_step(a, b)
            self._cond(c2)
            nat.set_cond_step(a, b, c2)
        else:
            self._cond(a)
        return 0

    def _cond(self, c: int) -> None:
        if c >= 2 and not self.native.has_cond(c):
            self.native.set_cond(c, self.lexer.cond_at_end(c), self.lexer.cond_satisfiable(c))


class DynamicEngine:
    """Native requests over a lazy lexer and an LR table; masks by a native trie walk."""

    kind = "dynamic"

    def __init__(self, lexer, table, ignore: Sequence[str], vocab, eos_ids: Sequence[int], trie, *,
                 recognizer: Optional[Callable] = None, lock=None, limits: Optional[dict] = None) -> None:
        limits = dict(limits or {})
        fuel = limits.pop("max_step_transitions", DEFAULT_STEP_TRANSITIONS)
        memo_mb = limits.pop("max_memo_mb", DEFAULT_MEMO_MB)
        if limits:
            raise ValueError(f"unknown limits['dynamic'] keys: {sorted(limits)}")
        for name, v, least in (("max_step_transitions", fuel, 1), ("max_memo_mb", memo_mb, 0)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
                raise ValueError(f"limits['dynamic'][{name!r}] must be an integer >= {least}, got {v!r}")
        self.lexer = lexer
        self.explorer = LexerExplorer(lexer, lock=lock, max_step_transitions=fuel)
        self.explorer.native.memo_budget = (1 << 62) if memo_mb is None else memo_mb << 20
        self._recognizer_factory = recognizer
        self._recognizer = None
        arrays = dynamic_arrays(lexer, table, ignore, vocab, eos_ids)
        self.explorer.next_terminals = (arrays["act_lex"], arrays["follow_lex"])
        self.tables = build_tables(arrays)
        self.tables.attach_dynamic(self.explorer.native, trie_arrays(trie),
                                   self.explorer.explore)
        self.n_words = int(self.tables.n_words)
        self.n_fallbacks = 0

    def start(self):
        return self.tables.new_state()

    @property
    def recognizer(self):
        """The reference recognizer over the same lexer and LR table (the tests' oracle; built on
        first use)."""
        if self._recognizer is None and self._recognizer_factory is not None:
            self._recognizer = self._recognizer_factory()
        return self._recognizer
