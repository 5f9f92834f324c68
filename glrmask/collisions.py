"""Static detection of lookahead collisions (DESIGN §2).

Masks judge a configuration alive component by component: its lexer lane can still end in a
terminal the parser takes, and every pending lookahead condition of an earlier match can still hold
on *some* continuation. They are exact except where both hold but never on the *same*
continuation — where the bytes a following terminal B must read are exactly those that make an
earlier terminal A's match condition fail. ``start: A B`` with ``A: /a+/`` and ``B: "a"`` has an
empty language (``re.match`` takes every ``a`` into A), yet after ``a`` the mask keeps offering
``a`` forever. Such dead ends cannot be seen locally, so the compiler looks for them once.

A terminal A, or a pair (A, B) of terminals that can be adjacent, is reported only when the joint
search finds a configuration the masks would keep that no continuation completes:

* **inside B**: after a candidate end of A with pending condition ``c`` and a non-empty prefix
  ``u`` of a B lexeme, ``c`` can still hold and B can still end, but no continuation does both
  (or B ends with its own condition and the two conditions exclude each other);
* **at the boundary**: at some place of A in the grammar (a position in a rule: what may follow
  there is FIRST of the rest of the rule, plus FOLLOW of its left-hand side when the rest can be
  empty; an ignored terminal's places are all the gaps), some lane state of A is alive, yet every
  match of A it can still reach carries a condition that none of the terminals that may follow
  there, no ignored terminal (they may always sit in between) and, where the document may end
  there, not the end either, lets stand — A's bytes lead nowhere. ``x := //c`` in a grammar whose
  newlines are tokens is one: the comment can only end at a newline, which may not follow ``:=``.

Ordinary lookaheads are not reported: ``AND: /and(?![A-Za-z0-9_])/`` before ``NAME`` or
``COMMENT: /#[^\\n]*/`` before anything only means the text continues as another lexeme, which
the masks see at once; nor is a comment that ignored whitespace or a newline token may end. Text after B is taken to be anything (a condition reaching past B into a third
terminal is not followed), and inside B no other lexeme that could read the same bytes is
assumed to rescue the configuration (the pair is reported if some context lacks one). FOLLOW sets
merge the contexts of a rule's left-hand side, so a boundary collision that only one of them has
can go unreported. Exploration is bounded; hitting the bound is reported too.
"""
from __future__ import annotations

import json
from collections import deque
from typing import Optional

from .grammar.ir import Grammar
from .lexer import Lexer


def _nullable_and_firsts(grammar: Grammar, nts: set[str], *, lasts: bool = False):
    """The nullable nonterminals, each nonterminal's FIRST terminals and, ``lasts``, its LAST ones.

    Worklists, not rounds over every rule until nothing changes: a generated grammar has
    thousands of rules and long chains of nonterminals (a JSON Schema: 11k rules), where the
    rounds cost a second per call."""
    rules = grammar.rules
    # nullable: a rule's count of symbols not known nullable yet; terminals never are
    left = [len(r.rhs) for r in rules]
    uses: dict[str, list[int]] = {}
    nullable: set[str] = set()
    work: list[str] = []
    for k, r in enumerate(rules):
        if any(x not in nts for x in r.rhs):
            left[k] = -1
            continue
        for x in r.rhs:
            uses.setdefault(x, []).append(k)
        if not r.rhs and r.lhs not in nullable:
            nullable.add(r.lhs)
            work.append(r.lhs)
    while work:
        n = work.pop()
        for k in uses.get(n, ()):
            left[k] -= 1
            lhs = rules[k].lhs
            if left[k] == 0 and lhs not in nullable:
                nullable.add(lhs)
                work.append(lhs)

    def closure(ordered) -> dict[str, set[str]]:
        """Terminals that can come first in each nonterminal (of each right-hand side as
        ``ordered`` gives it): direct ones, then along "x can come first in lhs" edges."""
        table: dict[str, set[str]] = {n: set() for n in nts}
        into: dict[str, set[str]] = {}
        for r in rules:
            for x in ordered(r.rhs):
                if x in nts:
                    into.setdefault(x, set()).add(r.lhs)
                else:
                    table[r.lhs].add(x)
                if x not in nullable:
                    break
        todo = [n for n in nts if table[n]]
        while todo:
            n = todo.pop()
            src = table[n]
            for lhs in into.get(n, ()):
                dst = table[lhs]
                if not src <= dst:
                    dst |= src
                    todo.append(lhs)
        return table

    first = closure(lambda rhs: rhs)
    last = closure(reversed) if lasts else {n: set() for n in nts}
    return nullable, first, last


def _rests(rhs, nts: set[str], nullable: set[str], first: dict[str, set[str]]) -> list[tuple[set[str], bool]]:
    """For each position ``i`` of a right-hand side: FIRST of ``rhs[i + 1:]`` and whether it can
    be empty — built right to left, once per rule (the sets are shared: read them only)."""
    out: list = [None] * len(rhs)
    cur: set[str] = set()
    empty = True
    for i in range(len(rhs) - 1, -1, -1):
        out[i] = (cur, empty)
        x = rhs[i]
        fx = first[x] if x in nts else {x}
        if x in nullable:
            cur = cur | fx
        else:
            cur, empty = set(fx), False
    return out


def adjacent_terminal_pairs(grammar: Grammar) -> set[tuple[str, str]]:
    """Pairs (A, B) such that terminal B can directly follow terminal A in some sentence
    (ignored terminals may sit anywhere, so they follow and precede every terminal)."""
    nts = set(grammar.nonterminals)
    nullable, first, last = _nullable_and_firsts(grammar, nts, lasts=True)
    after: dict[str, set[str]] = {}
    for r in grammar.rules:
        for x, (rest, _empty) in zip(r.rhs, _rests(r.rhs, nts, nullable, first)):
            if rest:
                for a in last[x] if x in nts else (x,):
                    after.setdefault(a, set()).update(rest)
    pairs = {(a, b) for a, bs in after.items() for b in bs}
    terms = list(grammar.terminals)
    for ig in grammar.ignore:
        for t in terms:
            pairs.add((t, ig))
            pairs.add((ig, t))
    return pairs


class _BudgetExceeded(Exception):
    pass


class _StepsExceeded(Exception):
    """The whole check's budget of lexer steps (``max_steps``) is spent."""


class _Steps:
    """What is left of the whole check's lexer steps (shared by every terminal's exploration)."""

    def __init__(self, n: int) -> None:
        self.left = n

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _StepsExceeded


_ONE_CLASS: tuple[int, ...] = (0,) * 256


class _ByteReps:
    """The bytes a search must try from a product of lexer objects: one per class of bytes that
    every component steps alike (the smallest byte of each class, ascending).

    Why. Every search here steps a product — conditions, lanes — over each byte, and a byte
    stepped from the same product as an earlier byte of its class gives the same successor, so
    only the first byte of each class can reach something new or be the first to trigger a
    result: trying the classes' smallest bytes in ascending order visits the same states in the
    same order and returns the same first byte as trying all 256 (a median JSON Schema's check
    went from ~0.5 s to a fraction of that; the largest ones from 44 s). A lexer state's classes
    are :meth:`Lexer.byte_classes`; a pending condition steps alike on its terminal's byte groups."""

    def __init__(self, lexer: Lexer) -> None:
        self.lexer = lexer
        self._memo: dict[tuple[int, ...], tuple[tuple, tuple[int, ...]]] = {}

    def state(self, q: int) -> "list[int] | tuple[int, ...]":
        return self.lexer.byte_classes(q)[0]

    def cond(self, c: int) -> tuple[int, ...]:
        return _ONE_CLASS if c < 2 else self.lexer.cond_byte_groups(c)

    def reps(self, *parts) -> tuple[int, ...]:
        key = tuple(map(id, parts))
        hit = self._memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], parts)):
            return hit[1]
        seen: set = set()
        out = []
        for b in range(256):
            k = tuple(p[b] for p in parts)
            if k not in seen:
                seen.add(k)
                out.append(b)
        res = tuple(out)
        self._memo[key] = (parts, res)  # the parts stay referenced: their ids are not reused
        return res


class _JointSearch:
    """Joint satisfiability of pending conditions and terminal lanes, memoized across pairs.

    Every search is a breadth-first walk over a finite product of interned lexer objects; each
    one may visit at most ``budget`` product states (:class:`_BudgetExceeded` otherwise)."""

    def __init__(self, lexer: Lexer, budget: int) -> None:
        self.lexer = lexer
        self.budget = budget
        self.bytes = _ByteReps(lexer)
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
            for b in self.bytes.reps(self.bytes.cond(x1), self.bytes.cond(x2)):
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
            for b in self.bytes.reps(self.bytes.cond(x), self.bytes.state(p)):
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
            for b in self.bytes.reps(self.bytes.cond(c), self.bytes.state(q), self.bytes.state(own)):
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

    def __init__(self, lexer: Lexer, term: int, budget: int, byte_reps: _ByteReps, steps: _Steps) -> None:
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
            reps = byte_reps.reps(byte_reps.state(q))
            steps.take(len(reps))
            for b in reps:
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


def follower_contexts(grammar: Grammar) -> dict[str, set[tuple[frozenset[str], bool]]]:
    """For each terminal, the places it can occur: ``(terminals that can come right after it
    there, whether the document may end there)``, one entry per distinct place.

    A place is a position in a rule (``FIRST`` of the rest of the rule, plus the ``FOLLOW`` set of
    its left-hand side when the rest can be empty). An ignored terminal may sit in any gap, so its
    places are those of every terminal, plus the gap before the first one. Ignored terminals are
    left out of the sets: they may follow anything."""
    nts = set(grammar.nonterminals)
    ignore = frozenset(grammar.ignore)
    nullable, first, _ = _nullable_and_firsts(grammar, nts)
    rests = [_rests(r.rhs, nts, nullable, first) for r in grammar.rules]
    # FOLLOW: FIRST of the rest at each place, and FOLLOW(lhs) where the rest can be empty (an
    # edge lhs -> x, along which "the document may end here" spreads from the start too)
    follow: dict[str, set[str]] = {n: set() for n in nts}
    into: dict[str, set[str]] = {}
    for r, rest in zip(grammar.rules, rests):
        for x, (f, rest_nullable) in zip(r.rhs, rest):
            if x in nts:
                follow[x] |= f
                if rest_nullable:
                    into.setdefault(r.lhs, set()).add(x)
    todo = [n for n in nts if follow[n]]
    while todo:
        n = todo.pop()
        for x in into.get(n, ()):
            if not follow[n] <= follow[x]:
                follow[x] |= follow[n]
                todo.append(x)
    ends: set[str] = {grammar.start}
    todo = [grammar.start]
    while todo:
        for x in into.get(todo.pop(), ()):
            if x not in ends:
                ends.add(x)
                todo.append(x)
    contexts: dict[str, set[tuple[frozenset[str], bool]]] = {t: set() for t in grammar.terminals}
    for r, rest in zip(grammar.rules, rests):
        for x, (f, rest_nullable) in zip(r.rhs, rest):
            if x in nts:
                continue
            if rest_nullable:
                f = f | follow[r.lhs]
            contexts.setdefault(x, set()).add((frozenset(f - ignore), rest_nullable and r.lhs in ends))
    gaps = set().union(*contexts.values()) if contexts else set()
    start_first = first[grammar.start] if grammar.start in nts else {grammar.start}
    gaps.add((frozenset(start_first - ignore), grammar.start in nullable))
    for ig in ignore:
        contexts[ig] = set(gaps)
    return contexts


def find_lookahead_collisions(grammar: Grammar, lexer: Lexer, *, budget: int = 20_000,
                              max_steps: int = 150_000) -> list[str]:
    """Human-readable warnings, one per collision found (empty when masks are exact): per pair for
    one inside a follower, per terminal (naming one place) for one at a boundary.

    ``budget`` bounds each search (product states), ``max_steps`` the lexer steps of exploring
    every terminal's lanes, the bulk of the work (~10 µs each): a schema with hundreds of
    strings with ``maxLength`` took up to 44 s here, so past the budget the check stops and
    says which terminals it did not reach."""
    index = {n: i for i, n in enumerate(lexer.terminal_names)}
    followers: dict[str, set[str]] = {}
    for a, b in adjacent_terminal_pairs(grammar):
        followers.setdefault(a, set()).add(b)
    places = follower_contexts(grammar)
    search = _JointSearch(lexer, budget)
    steps = _Steps(max_steps)
    starts = {n: lexer.restrict(lexer.initial, frozenset((i,))) for n, i in index.items()}
    ignored = sorted(grammar.ignore)
    todo = sorted(set(followers) | {t for t, ctx in places.items() if ctx}, key=lambda n: _check_order(grammar, n))
    found: dict[str, list[str]] = {}  # per terminal checked: its warnings (reported by name)
    stopped: list[str] = []
    for k, a in enumerate(todo):
        found[a] = warnings = []
        try:
            lanes = _TerminalLanes(lexer, index[a], budget, search.bytes, steps)
        except _StepsExceeded:
            rest = sorted(todo[k:])
            more = f" and {len(rest) - 5} more" if len(rest) > 5 else ""
            stopped.append(f"lookahead-collision check stopped at its budget ({max_steps} lexer steps); "
                           f"not checked: {', '.join(rest[:5])}{more}")
            break
        except _BudgetExceeded:
            warnings.append(f"lookahead-collision check for terminal {a} stopped at its budget ({budget} states)")
            continue
        if not lanes.conds:
            continue  # every match of A is final when it ends: nothing after it can change it
        shown = {n: _display(grammar, n) for n in {a} | followers.get(a, set())}
        inside: set[str] = set()  # followers already reported: the boundary check would repeat them
        for b in sorted(followers.get(a, ())):
            if a == b and a in grammar.ignore:
                continue  # a run of one ignored terminal cut in two is just a longer run
            try:
                warning = _inside_warning(search, lanes, shown[a], shown[b], starts[b])
            except _BudgetExceeded:
                warning = f"lookahead-collision check for {shown[a]} followed by {shown[b]} stopped at its budget"
            if warning:
                warnings.append(warning)
                inside.add(b)
        a_places = {p for p in places.get(a, set()) if not p[0] & inside}
        try:
            warning = _boundary_warning(search, lanes, grammar, a, a_places, starts, ignored)
        except _BudgetExceeded:
            warning = f"lookahead-collision check for the end of {shown[a]} stopped at its budget"
        if warning:
            warnings.append(warning)
    return [w for a in sorted(found) for w in found[a]] + stopped


_LOOKAROUNDS = ("(?=", "(?!", "(?<", "\\b", "\\B")


def _check_order(grammar: Grammar, name: str) -> tuple:
    """The order terminals are checked in, so that past ``max_steps`` the unchecked ones are the
    least likely to collide and the costliest: terminals that read a lookaround first (a
    collision needs a conditional match end, which they make), then by the length of their
    pattern (a long string's lanes are the bulk of the work)."""
    pattern = grammar.terminals[name].pattern
    return (not any(x in pattern for x in _LOOKAROUNDS), len(pattern), name)


def _display(grammar: Grammar, name: str) -> str:
    """A terminal as a user knows it: an anonymous literal as its quoted string, a named one (the
    front-end may have named it, ``EQUAL``) with the string beside the name."""
    t = grammar.terminals.get(name)
    if t is None or t.literal is None:
        return name
    if name.lstrip("_").startswith("ANON"):
        return json.dumps(t.literal)
    return f"{name} ({json.dumps(t.literal)})"


def _inside_warning(search: _JointSearch, lanes: _TerminalLanes, a: str, b: str, start_b: int) -> Optional[str]:
    for c0, own in sorted(lanes.ends):
        u = search.dead_inside(c0, start_b, own)
        if u is not None:
            return (f"lookahead collision: {a} followed by {b} can read {u!r} of {b} in a way no "
                    f"continuation completes (it undoes how {a} matched); masks may allow dead ends there")
    return None


def _boundary_warning(search: _JointSearch, lanes: _TerminalLanes, grammar: Grammar, a: str,
                      places: set[tuple[frozenset[str], bool]], starts: dict[str, int],
                      ignored: list[str]) -> Optional[str]:
    """A place of A where a live lane state of A can reach no match that what may follow there
    (or the end of the document, where it may end) lets stand."""
    lexer = search.lexer
    stuck_places = []
    for follow, may_end in sorted(places, key=lambda p: (len(p[0]), sorted(p[0]), p[1])):
        rescuers = [starts[t] for t in sorted(follow)] + [starts[i] for i in ignored]
        memo: dict[int, bool] = {}

        def good_end(c: int) -> bool:
            hit = memo.get(c)
            if hit is None:
                hit = memo[c] = search.pending_alive(c) and (
                    c == Lexer.TRUE or (may_end and lexer.cond_at_end(c))
                    or any(search.lane_completes(c, q) for q in rescuers))
            return hit

        prefix = lanes.stuck_state(lexer, good_end)
        if prefix is not None:
            stuck_places.append((follow, prefix))
    if not stuck_places:
        return None
    follow, prefix = stuck_places[0]
    names = sorted(_display(grammar, n) for n in follow)
    shown = ", ".join(names[:4]) + (f" or {len(names) - 4} more" if len(names) > 4 else "")
    where = f"where only {shown} may follow it" if names else "where nothing may follow it"
    more = f" (and {len(stuck_places) - 1} more such places)" if len(stuck_places) > 1 else ""
    after = f"after {prefix!r}, " if prefix else ""
    a = _display(grammar, a)
    return (f"lookahead collision: {after}every match {a} can still make is undone by what may follow it, "
            f"{where}{more}; masks allow bytes of {a} there that lead nowhere")
