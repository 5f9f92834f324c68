"""Static detection of lookahead collisions (DESIGN §2).

Masks judge a configuration alive component by component: its lexer lane can still end in a
terminal the parser takes, and every pending lookahead condition of an earlier match can still hold
on *some* continuation. They are exact except where both hold but never on the *same*
continuation — where the bytes a following terminal B must read are exactly those that make an
earlier terminal A's match condition fail. ``start: A B`` with ``A: /a+/`` and ``B: "a"`` has an
empty language (``re.match`` takes every ``a`` into A), yet after ``a`` the mask keeps offering
``a`` forever. Such dead ends cannot be seen locally, so the compiler looks for them once.

A pair (A, B) of terminals that can be adjacent is reported only when the joint search finds a
configuration the masks would keep that no continuation completes:

* **inside B**: after a candidate end of A with pending condition ``c`` and a non-empty prefix
  ``u`` of a B lexeme, ``c`` can still hold and B can still end, but no continuation does both
  (or B ends with its own condition and the two conditions exclude each other);
* **at the boundary**: some lane state of A is alive, yet every match of A it can still reach
  carries a condition that neither B's bytes nor those of an ignored terminal (which may always
  sit in between) can satisfy — when B is what must follow, A's bytes lead nowhere.

Ordinary lookaheads are not reported: ``AND: /and(?![A-Za-z0-9_])/`` before ``NAME`` or
``COMMENT: /#[^\\n]*/`` before anything only means the text continues as another lexeme, and the
masks see that at once. Text after B is taken to be anything (a condition reaching past B into a
third terminal is not followed). Exploration is bounded; hitting the bound is reported too.
"""
from __future__ import annotations

from collections import deque
from typing import Optional

from .grammar.ir import Grammar
from .lexer import Lexer


def adjacent_terminal_pairs(grammar: Grammar) -> set[tuple[str, str]]:
    """Pairs (A, B) such that terminal B can directly follow terminal A in some sentence
    (ignored terminals may sit anywhere, so they follow and precede every terminal)."""
    nts = set(grammar.nonterminals)
    first: dict[str, set[str]] = {n: set() for n in nts}
    last: dict[str, set[str]] = {n: set() for n in nts}
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            if all(x in nullable for x in r.rhs) and r.lhs not in nullable:
                nullable.add(r.lhs)
                changed = True
            for seq, table in ((r.rhs, first), (tuple(reversed(r.rhs)), last)):
                for x in seq:
                    add = {x} if x not in nts else table[x]
                    if not add <= table[r.lhs]:
                        table[r.lhs] |= add
                        changed = True
                    if x not in nullable:
                        break

    def firsts(x: str) -> set[str]:
        return first[x] if x in nts else {x}

    def lasts(x: str) -> set[str]:
        return last[x] if x in nts else {x}

    pairs: set[tuple[str, str]] = set()
    for r in grammar.rules:
        for i, x in enumerate(r.rhs):
            for y in r.rhs[i + 1:]:
                for a in lasts(x):
                    for b in firsts(y):
                        pairs.add((a, b))
                if y not in nullable:
                    break
    terms = list(grammar.terminals)
    for ig in grammar.ignore:
        for t in terms:
            pairs.add((t, ig))
            pairs.add((ig, t))
    return pairs


class _BudgetExceeded(Exception):
    pass


class _JointSearch:
    """Joint satisfiability of pending conditions and terminal lanes, memoized across pairs.

    Every search is a breadth-first walk over a finite product of interned lexer objects; each
    one may visit at most ``budget`` product states (:class:`_BudgetExceeded` otherwise)."""

    def __init__(self, lexer: Lexer, budget: int) -> None:
        self.lexer = lexer
        self.budget = budget
        self._conds_memo: dict[tuple[int, int], bool] = {}
        self._lane_memo: dict[tuple[int, int], bool] = {}

    def pending_alive(self, c: int) -> bool:
        """What the recognizer keeps: TRUE or a pending condition that can still hold."""
        return c == Lexer.TRUE or (c != Lexer.FALSE and self.lexer.cond_satisfiable(c))

    def conds_together(self, c1: int, c2: int) -> bool:
        """Some continuation (then the end of the document, or more text) makes both TRUE."""
        lx = self.lexer
        if c1 == Lexer.FALSE or c2 == Lexer.FALSE:
            return False
        if c1 == Lexer.TRUE:
            return lx.cond_satisfiable(c2)
        if c2 == Lexer.TRUE:
            return lx.cond_satisfiable(c1)
        key = (min(c1, c2), max(c1, c2))
        hit = self._conds_memo.get(key)
        if hit is not None:
            return hit
        seen = {key}
        queue = deque([key])
        found = False
        while queue and not found:
            x1, x2 = queue.popleft()
            if lx.cond_at_end(x1) and lx.cond_at_end(x2):
                found = True
                break
            for b in range(256):
                d1, d2 = lx.cond_step(x1, b), lx.cond_step(x2, b)
                if d1 == Lexer.FALSE or d2 == Lexer.FALSE:
                    continue
                if (d1 == Lexer.TRUE and lx.cond_satisfiable(d2)) or (d2 == Lexer.TRUE and lx.cond_satisfiable(d1)):
                    found = True
                    break
                if d1 == Lexer.TRUE or d2 == Lexer.TRUE:
                    continue
                k = (min(d1, d2), max(d1, d2))
                if k not in seen:
                    if len(seen) >= self.budget:
                        raise _BudgetExceeded
                    seen.add(k)
                    queue.append(k)
        self._conds_memo[key] = found
        return found

    def lane_completes(self, c: int, q: int) -> bool:
        """Some continuation ends the lane ``q`` in a match whose condition holds together with
        the earlier terminal's condition ``c`` (read over the same bytes)."""
        lx = self.lexer
        if c == Lexer.FALSE or q == Lexer.DEAD:
            return False
        if c == Lexer.TRUE:
            return bool(lx.futures(q))
        hit = self._lane_memo.get((c, q))
        if hit is not None:
            return hit
        seen = {(c, q)}
        queue = deque(seen)
        found = False
        while queue and not found:
            x, p = queue.popleft()
            for b in range(256):
                x2 = lx.cond_step(x, b)
                if x2 == Lexer.FALSE:
                    continue
                p2, events = lx.step(p, b)
                if any(self.conds_together(x2, e) for _t, e in events):
                    found = True
                    break
                if p2 == Lexer.DEAD:
                    continue
                if x2 == Lexer.TRUE:
                    if lx.futures(p2):
                        found = True
                        break
                    continue
                if (x2, p2) not in seen:
                    if len(seen) >= self.budget:
                        raise _BudgetExceeded
                    seen.add((x2, p2))
                    queue.append((x2, p2))
        self._lane_memo[(c, q)] = found
        return found

    def dead_inside(self, c0: int, q0: int, own0: int) -> Optional[bytes]:
        """A non-empty prefix ``u`` of the lane ``q0`` after which the masks keep the pair
        (condition ``c0`` stepped over ``u``, lane) alive though nothing completes it, while the
        earlier terminal's own lane (``own0``, where it stood when it reported the match) cannot
        read ``u`` on — then the same bytes would simply extend the earlier lexeme, as a comment
        or a string does. None if there is no such ``u``."""
        lx = self.lexer
        seen = {(c0, q0, own0)}
        queue = deque([(c0, q0, own0, b"")])
        while queue:
            c, q, own, u = queue.popleft()
            for b in range(256):
                c2 = lx.cond_step(c, b)
                if c2 == Lexer.TRUE or not self.pending_alive(c2):
                    continue  # settled: the masks see the outcome directly
                q2, events = lx.step(q, b)
                own2 = lx.step(own, b)[0]
                if own2 != Lexer.DEAD and not lx.futures(own2):
                    own2 = Lexer.DEAD
                w = u + bytes((b,))
                if own2 == Lexer.DEAD:
                    for _t, e in events:
                        if self.pending_alive(e) and not self.conds_together(c2, e):
                            return w
                if q2 == Lexer.DEAD or not lx.futures(q2):
                    continue
                if own2 == Lexer.DEAD and not self.lane_completes(c2, q2):
                    return w
                if (c2, q2, own2) not in seen:
                    if len(seen) >= self.budget:
                        raise _BudgetExceeded
                    seen.add((c2, q2, own2))
                    queue.append((c2, q2, own2, w))
        return None


class _TerminalLanes:
    """The lane states of one terminal lexed alone, with the candidate matches on each edge."""

    def __init__(self, lexer: Lexer, term: int, budget: int) -> None:
        start = lexer.restrict(lexer.initial, frozenset((term,)))
        self.start = start
        self.prefix: dict[int, bytes] = {start: b""}
        self.edges: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        self.conds: set[int] = set()
        #: (pending condition, lane state right after the match) of every conditional match
        self.ends: set[tuple[int, int]] = set()
        queue = deque([start])
        while queue:
            q = queue.popleft()
            out: list[tuple[int, tuple[int, ...]]] = []
            for b in range(256):
                q2, events = lexer.step(q, b)
                ends = tuple(c for t, c in events if t == term and c != Lexer.FALSE)
                self.conds.update(c for c in ends if c != Lexer.TRUE)
                self.ends.update((c, q2) for c in ends if c != Lexer.TRUE)
                if q2 == Lexer.DEAD and not ends:
                    continue
                out.append((q2, ends))
                if q2 != Lexer.DEAD and q2 not in self.prefix:
                    if len(self.prefix) >= budget:
                        raise _BudgetExceeded
                    self.prefix[q2] = self.prefix[q] + bytes((b,))
                    queue.append(q2)
            self.edges[q] = out

    def stuck_state(self, lexer: Lexer, good_end) -> Optional[bytes]:
        """The prefix of a live lane state none of whose reachable matches is ``good_end``
        (shortest first), or None."""
        good: set[int] = set()
        preds: dict[int, list[int]] = {}
        for q, out in self.edges.items():
            for q2, ends in out:
                if q2 != Lexer.DEAD:
                    preds.setdefault(q2, []).append(q)
                if q not in good and any(good_end(c) for c in ends):
                    good.add(q)
        queue = deque(good)
        while queue:
            q = queue.popleft()
            for p in preds.get(q, ()):
                if p not in good:
                    good.add(p)
                    queue.append(p)
        stuck = [q for q in self.edges if q not in good and lexer.futures(q)]
        if not stuck:
            return None
        return min((self.prefix[q] for q in stuck), key=lambda p: (len(p), p))


def find_lookahead_collisions(grammar: Grammar, lexer: Lexer, *, budget: int = 20_000) -> list[str]:
    """Human-readable warnings, one per colliding terminal pair (empty when masks are exact)."""
    index = {n: i for i, n in enumerate(lexer.terminal_names)}
    followers: dict[str, set[str]] = {}
    for a, b in adjacent_terminal_pairs(grammar):
        followers.setdefault(a, set()).add(b)
    search = _JointSearch(lexer, budget)
    starts = {n: lexer.restrict(lexer.initial, frozenset((i,))) for n, i in index.items()}
    ignored = sorted(grammar.ignore)
    warnings: list[str] = []
    for a in sorted(followers):
        try:
            lanes = _TerminalLanes(lexer, index[a], budget)
        except _BudgetExceeded:
            warnings.append(f"lookahead-collision check for terminal {a} stopped at its budget ({budget} states)")
            continue
        if not lanes.conds:
            continue  # every match of A is final when it ends: nothing after it can change it
        for b in sorted(followers[a]):
            if a == b and a in grammar.ignore:
                continue  # a run of one ignored terminal cut in two is just a longer run
            try:
                warning = _pair_warning(search, lanes, a, b, starts, ignored, b in grammar.ignore)
            except _BudgetExceeded:
                warning = f"lookahead-collision check for {a} followed by {b} stopped at its budget"
            if warning:
                warnings.append(warning)
    return warnings


def _pair_warning(search: _JointSearch, lanes: _TerminalLanes, a: str, b: str, starts: dict[str, int],
                  ignored: list[str], b_ignored: bool) -> Optional[str]:
    for c0, own in sorted(lanes.ends):
        u = search.dead_inside(c0, starts[b], own)
        if u is not None:
            return (f"lookahead collision: {a} followed by {b} can read {u!r} of {b} in a way no "
                    f"continuation completes (it undoes how {a} matched); masks may allow dead ends there")
    if b_ignored:
        return None  # whatever may follow an ignored terminal may follow A directly: checked there
    rescuers = [starts[b]] + [starts[i] for i in ignored]

    def good_end(c: int) -> bool:
        return search.pending_alive(c) and any(search.lane_completes(c, q) for q in rescuers)

    prefix = lanes.stuck_state(search.lexer, good_end)
    if prefix is None:
        return None
    shown = f"after {prefix!r}, " if prefix else ""
    return (f"lookahead collision: {shown}every way {a} can still match needs following bytes that "
            f"{b}{' and the ignored terminals' if ignored else ''} cannot start with; where {b} must "
            f"follow {a}, masks allow bytes of {a} that lead nowhere")
