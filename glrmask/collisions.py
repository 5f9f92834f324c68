"""Static detection of lookahead collisions (DESIGN §2).

A mask is exact except where the bytes that start a *following* terminal can change how an earlier
terminal matched: ``start: A B`` with ``A: /a+/`` and ``B: "a"`` has an empty language, yet after
``a`` the mask keeps offering ``a`` forever. Such dead ends cannot be seen locally, so the compiler
looks for them once and reports every pair of adjacent terminals where it can happen.

Method: for each terminal A, every condition its candidate matches can carry (found by exploring
A's own lexer states) is run in lockstep with the lexer of each terminal B that may follow A (in
the grammar, or through an ignored terminal). If some byte string that B can still be reading makes
the condition fail, the pair collides. Exploration is bounded; hitting the bound is reported too.
"""
from __future__ import annotations

from collections import deque

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


def find_lookahead_collisions(grammar: Grammar, lexer: Lexer, *, budget: int = 20_000) -> list[str]:
    """Human-readable warnings, one per colliding terminal pair (empty when masks are exact)."""
    index = {n: i for i, n in enumerate(lexer.terminal_names)}
    pairs = adjacent_terminal_pairs(grammar)
    followers: dict[str, set[str]] = {}
    for a, b in pairs:
        followers.setdefault(a, set()).add(b)
    warnings: list[str] = []
    for a in sorted(followers):
        conds, complete = _candidate_conditions(lexer, index[a], budget)
        if not complete:
            warnings.append(f"lookahead-collision check for terminal {a} stopped at its budget ({budget} states)")
        if not conds:
            continue
        for b in sorted(followers[a]):
            if a == b and a in grammar.ignore:
                continue  # a run of one ignored terminal cut in two is just a longer run
            start_b = lexer.restrict(lexer.initial, frozenset((index[b],)))
            verdict = _condition_can_fail_inside(lexer, conds, start_b, budget)
            if verdict is None:
                warnings.append(f"lookahead-collision check for {a} followed by {b} stopped at its budget")
            elif verdict:
                warnings.append(
                    f"possible lookahead collision: the bytes that start {b} can change where {a} matches; "
                    f"masks may allow dead ends after {a} {b}"
                )
    return warnings


def _candidate_conditions(lexer: Lexer, term: int, budget: int) -> tuple[set[int], bool]:
    """All pending conditions candidate matches of ``term`` can carry (TRUE/FALSE excluded)."""
    start = lexer.restrict(lexer.initial, frozenset((term,)))
    seen = {start}
    queue = deque([start])
    conds: set[int] = set()
    while queue:
        q = queue.popleft()
        for b in range(256):
            q2, events = lexer.step(q, b)
            for t, c in events:
                if t == term and c not in (Lexer.TRUE, Lexer.FALSE):
                    conds.add(c)
            if q2 != Lexer.DEAD and q2 not in seen:
                if len(seen) >= budget:
                    return conds, False
                seen.add(q2)
                queue.append(q2)
    return conds, True


def _condition_can_fail_inside(lexer: Lexer, conds: set[int], start_b: int, budget: int) -> bool | None:
    """True if some prefix of a B-lexeme (while B is still matchable) makes a condition fail."""
    seen = {(c, start_b) for c in conds}
    queue = deque(seen)
    while queue:
        c, q = queue.popleft()
        for b in range(256):
            q2, events = lexer.step(q, b)
            b_alive = bool(events) or (q2 != Lexer.DEAD and bool(lexer.futures(q2)))
            if not b_alive:
                continue
            c2 = lexer.cond_step(c, b)
            if c2 == Lexer.FALSE:
                return True
            if c2 == Lexer.TRUE or q2 == Lexer.DEAD:
                continue
            key = (c2, q2)
            if key not in seen:
                if len(seen) >= budget:
                    return None
                seen.add(key)
                queue.append(key)
    return False
