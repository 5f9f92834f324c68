"""The reference byte-level recognizer: lexer lanes × GLR frontiers × pending conditions.

This is the ground truth every faster path is compared with. A *configuration* says: the parser has
consumed terminals leading to ``frontier`` (a set of LR stacks); the current lexeme is being scanned
from lexer state ``lex`` (``BOUNDARY`` when nothing of it has been read yet); and ``conds`` are the
pending conditions on the bytes still to come under which earlier terminals matched where we assumed
(DESIGN §2 "Delayed decisions": ``re.match`` may settle a match end only several bytes later).

A *configuration set* is interned to an int id, and the byte transition between ids is memoized, so
the recognizer is a lazily built DFA over configuration sets: replaying a token or walking the
vocabulary trie becomes dictionary lookups once the states have been seen. Configurations with the
same lexer state and conditions are merged by uniting their frontiers (both see the same future).

``restrict_lexer`` chooses how a lexeme starts. By default the lexer is restricted to the terminals
the parser can use there, so lanes carry parser-specific lexer states. With ``restrict_lexer=False``
every lexeme starts from the unrestricted ``lexer.initial`` and a mid-lexeme lane is kept iff one
of its future terminals is shiftable by its frontier or ignored. Both accept the same texts (the
lanes of unusable terminals only ever report events the parser drops), but the unrestricted lexer
states are exactly those the static masker's Terminal DWA reaches at token boundaries, so
``mode="static"`` never meets a lexer state it has to rebuild for.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from glrmask.errors import GrammarTooComplex
from glrmask.grammar.ir import Grammar
from glrmask.lexer import Lexer
from glrmask.lr.table import LRTable

from .glr import GLR, Frontier

BOUNDARY = -2  # lexer "state" of a configuration that has not read any byte of its next lexeme


@dataclass(frozen=True)
class Config:
    lex: int
    frontier: Frontier
    conds: tuple[int, ...]


ConfigSet = frozenset  # frozenset[Config]; the empty set means the text can no longer be completed
DEAD: ConfigSet = frozenset()


class Recognizer:
    """Steps configuration sets byte by byte; shared by every request of one grammar.

    Configuration sets are interned to small ints and their byte transitions memoized in a dense
    ``int32[n_sets, 256]`` table (-1 unknown, -2 dead), which the Cython trie walk reads directly and
    fills through :meth:`fill` on a miss. Requests hold the sets themselves (values), so when the
    cache outgrows ``max_cached_sets`` it is simply dropped (:meth:`trim`) without invalidating them.
    """

    UNKNOWN = -1
    DEAD_ID = -2

    def __init__(self, grammar: Grammar, table: LRTable, lexer: Lexer, *, max_cached_sets: int = 100_000,
                 restrict_lexer: bool = True):
        self.grammar = grammar
        self.restrict_lexer = restrict_lexer
        self.lr_table = table
        self.lexer = lexer
        self.glr = GLR(table)
        self.max_cached_sets = max_cached_sets
        self._fuel: "int | None" = None
        names = lexer.terminal_names
        # lexer terminal id -> LR terminal id (None for terminals the rules never use)
        self._lr_term = [table.terminal_index.get(n) for n in names]
        ignored = set(grammar.ignore)
        self._ignored = frozenset(i for i, n in enumerate(names) if n in ignored)
        self._lex_of_lr = {table.terminal_index[n]: i for i, n in enumerate(names) if n in table.terminal_index}
        self.initial: ConfigSet = frozenset((Config(BOUNDARY, self.glr.initial(), ()),))
        self._reset_cache()

    def _reset_cache(self) -> None:
        self._ids: dict[ConfigSet, int] = {}
        self._sets: list[ConfigSet] = []
        self._accepting: dict[ConfigSet, bool] = {}
        self._start_lex: dict[Frontier, int] = {}
        self._usable: dict[Frontier, frozenset[int]] = {}
        self._lane_alive: dict[tuple[int, Frontier], bool] = {}
        self.table = np.full((1024, 256), self.UNKNOWN, dtype=np.int32)

    def trim(self) -> None:
        """Drop the transition cache if it grew past its cap (call between walks, never inside)."""
        if len(self._sets) > self.max_cached_sets:
            self._reset_cache()

    @property
    def n_cached_sets(self) -> int:
        return len(self._sets)

    # ---------------------------------------------------------------- stepping
    def sid(self, s: ConfigSet) -> int:
        """The interned id of a non-empty configuration set."""
        i = self._ids.get(s)
        if i is None:
            i = len(self._sets)
            if i >= self.table.shape[0]:
                grown = np.full((self.table.shape[0] * 2, 256), self.UNKNOWN, dtype=np.int32)
                grown[: self.table.shape[0]] = self.table
                self.table = grown
            self._ids[s] = i
            self._sets.append(s)
        return i

    def set_of(self, sid: int) -> ConfigSet:
        return self._sets[sid]

    def set_fuel(self, fuel: "int | None") -> None:
        """Allow at most ``fuel`` new transitions until the next call (``None``: unlimited): a
        dynamic mask over a grammar whose configurations never repeat (``/a{100000}/``) ends in
        :class:`GrammarTooComplex` instead of running for minutes (llguidance's lexer fuel)."""
        self._fuel = fuel

    def fill(self, sid: int, byte: int) -> int:
        """Compute and memoize the transition of set ``sid`` on ``byte`` (-2 when dead)."""
        if self._fuel is not None:
            self._fuel -= 1
            if self._fuel < 0:
                self._fuel = None
                raise GrammarTooComplex(
                    "dynamic mask: more than the allowed new parser/lexer configurations in one step "
                    "(limit max_step_transitions; raise it with limits={'dynamic': {'max_step_transitions': N}} "
                    "or compile with mode='static')")
        nxt = self._step_configs(self._sets[sid], byte)
        r = self.sid(nxt) if nxt else self.DEAD_ID
        self.table[sid, byte] = r
        return r

    def step(self, s: ConfigSet, byte: int) -> ConfigSet:
        if not s:
            return DEAD
        i = self.sid(s)
        r = int(self.table[i, byte])
        if r == self.UNKNOWN:
            r = self.fill(i, byte)
        return DEAD if r == self.DEAD_ID else self._sets[r]

    def step_bytes(self, s: ConfigSet, data: bytes) -> ConfigSet:
        self.trim()
        for b in data:
            s = self.step(s, b)
            if not s:
                return DEAD
        return s

    def _usable_terminals(self, frontier: Frontier) -> frozenset[int]:
        """Lexer terminals that matter after ``frontier``: the ones it can shift, and the ignored."""
        u = self._usable.get(frontier)
        if u is None:
            usable = set(self._ignored)
            for t in self.glr.acceptable(frontier):
                lt = self._lex_of_lr.get(t)
                if lt is not None:
                    usable.add(lt)
            u = self._usable[frontier] = frozenset(usable)
        return u

    def _lexer_start(self, frontier: Frontier) -> int:
        """The lexer state at a lexeme start: restricted to what the parser can use next, or the
        unrestricted initial state when ``restrict_lexer`` is off."""
        if not self.restrict_lexer:
            return self.lexer.initial
        q = self._start_lex.get(frontier)
        if q is None:
            usable = self._usable_terminals(frontier)
            q = self.lexer.restrict(self.lexer.initial, usable) if usable else Lexer.DEAD
            self._start_lex[frontier] = q
        return q

    def _lane_survives(self, q2: int, frontier: Frontier) -> bool:
        """A mid-lexeme lane in lexer state ``q2`` (not DEAD) can still end in a terminal that
        matters: any future at all for a restricted lexer (it only holds usable terminals), else a
        future the frontier can shift or an ignored one."""
        futures = self.lexer.futures(q2)
        if self.restrict_lexer or not futures:
            return bool(futures)
        key = (q2, frontier)
        r = self._lane_alive.get(key)
        if r is None:
            r = self._lane_alive[key] = not futures.isdisjoint(self._usable_terminals(frontier))
        return r

    def _step_configs(self, configs: ConfigSet, byte: int) -> ConfigSet:
        lexer, glr = self.lexer, self.glr
        merged: dict[tuple[int, tuple[int, ...]], set] = {}

        def add(lex: int, frontier: Frontier, conds: tuple[int, ...]) -> None:
            merged.setdefault((lex, conds), set()).update(frontier)

        for cfg in configs:
            conds: set[int] = set()
            for c in cfg.conds:
                c2 = lexer.cond_step(c, byte)
                if c2 == Lexer.FALSE:
                    break
                if c2 != Lexer.TRUE:
                    conds.add(c2)
            else:
                q = self._lexer_start(cfg.frontier) if cfg.lex == BOUNDARY else cfg.lex
                if q == Lexer.DEAD:
                    continue
                q2, events = lexer.step(q, byte)
                base = tuple(sorted(conds))
                if q2 != Lexer.DEAD and self._lane_survives(q2, cfg.frontier):
                    add(q2, cfg.frontier, base)
                for term, cond in events:
                    if cond == Lexer.FALSE or (cond != Lexer.TRUE and not lexer.cond_satisfiable(cond)):
                        continue
                    after = base if cond == Lexer.TRUE else tuple(sorted(conds | {cond}))
                    if term in self._ignored:  # ignored terminals leave the parser unchanged
                        add(BOUNDARY, cfg.frontier, after)
                    lr_t = self._lr_term[term]
                    if lr_t is not None and glr.can_shift(cfg.frontier, lr_t):
                        add(BOUNDARY, glr.feed(cfg.frontier, lr_t), after)
        return frozenset(Config(lex, frozenset(nodes), conds) for (lex, conds), nodes in merged.items())

    # ---------------------------------------------------------------- queries
    def is_accepting(self, s: ConfigSet) -> bool:
        """Some configuration sits at a lexeme boundary, every pending condition holds at the end of
        the document, and its parser can reduce to the start symbol."""
        if not s:
            return False
        r = self._accepting.get(s)
        if r is None:
            lexer = self.lexer
            r = any(
                cfg.lex == BOUNDARY
                and all(lexer.cond_at_end(c) for c in cfg.conds)
                and self.glr.accepts_end(cfg.frontier)
                for cfg in s
            )
            self._accepting[s] = r
        return r

    def possible_bytes(self, s: ConfigSet) -> list[int]:
        return [b for b in range(256) if self.step(s, b)]
