"""Reference GLR recognizer over interned, persistent stacks (DESIGN §4.4).

This is the parser-side ground truth: the stack-effect automata, the Parser DWA and the Cython runtime
are all tested against it, so it favours obvious correctness over speed.

Representation. A stack is a linked list of :class:`StackNode` (top first). Nodes are hash-consed:
``StackNode(s, p) is StackNode(s, p)``, so equal stacks are the same object, shared tails are shared,
and equality/hashing are by identity (O(1)). A :data:`Frontier` is a frozenset of top nodes, i.e.
the set of live stacks (a graph-structured stack kept in tree form, which makes every stack an
explicit value the tests can compare).

Complexity. ``feed(f, t)`` explores the reduce closure of every stack in ``f`` for lookahead ``t``.
Each reduction pops ``rule_len`` nodes (a pointer walk) and pushes one interned node; a visited set
of nodes makes it a fixed point. Because normalized grammars have no ε-rules (except the fresh
start's) and an acyclic right-end graph, the chain of reductions from one stack is bounded by the
grammar (not the input), so one feed costs O(|f| · R · L) where R bounds the reductions reachable
from one stack and L the rule length. The number of distinct stacks can grow with ambiguity
(tree form does not share prefixes the way a GSS does); for unambiguous inputs it stays small.
Results are memoized per ``(frontier, terminal)``.
"""
from __future__ import annotations

import weakref
from typing import Iterable, Optional, Sequence

from glrmask.errors import GlrmaskError
from glrmask.lr.table import END, LRTable


class StackNode:
    """An interned stack cell: ``state`` on top of ``parent`` (``None`` = the bottom).

    Construct with ``StackNode(state, parent)``; the same arguments give the same object, so
    ``==``/``hash`` are identity-based and O(1)."""

    __slots__ = ("state", "parent", "depth", "__weakref__")
    _interned: "weakref.WeakValueDictionary[tuple[int, Optional[StackNode]], StackNode]" = (
        weakref.WeakValueDictionary()
    )

    state: int
    parent: Optional["StackNode"]
    depth: int

    def __new__(cls, state: int, parent: Optional["StackNode"] = None) -> "StackNode":
        key = (state, parent)
        node = cls._interned.get(key)
        if node is None:
            node = object.__new__(cls)
            node.state = state
            node.parent = parent
            node.depth = 1 if parent is None else parent.depth + 1
            cls._interned[key] = node
        return node

    def states(self) -> tuple[int, ...]:
        """The stack as a tuple of states, bottom first."""
        out = []
        n: Optional[StackNode] = self
        while n is not None:
            out.append(n.state)
            n = n.parent
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"StackNode{self.states()}"

    def __reduce__(self):
        return (StackNode, (self.state, self.parent))


Frontier = frozenset
"""A frontier is a ``frozenset[StackNode]`` of stack tops; the empty frontier means rejected."""

EMPTY_FRONTIER: frozenset = frozenset()


class GLRError(GlrmaskError):
    """The table violates an invariant the GLR driver relies on (an internal bug, not bad input)."""


class GLR:
    """Drives an :class:`LRTable` over sets of stacks; all answers are memoized per frontier."""

    def __init__(self, table: LRTable, *, memo_limit: int = 1_000_000) -> None:
        self.table = table
        self._rows = table.rows
        self._goto = table.goto_table.tolist()
        self._rule_len = table.rule_len
        self._rule_lhs = table.rule_lhs
        self._end = table.end_id
        self._memo_limit = memo_limit
        self._feed_memo: dict[tuple[frozenset, int], frozenset] = {}
        self._acc_memo: dict[frozenset, frozenset[int]] = {}

    # -- core ------------------------------------------------------------------------------------
    def initial(self) -> frozenset:
        return frozenset((StackNode(self.table.start_state, None),))

    def feed(self, frontier: frozenset, term_id: int) -> frozenset:
        """All stacks after shifting ``term_id``, exploring every reduce/shift alternative; the
        empty frontier if no stack can shift it. Shifting ``$END`` leads to the final state
        (``table.final_state``), from which nothing can be shifted. Ignored terminals have no
        actions, so feeding one rejects: skipping them is the caller's job."""
        key = (frontier, term_id)
        hit = self._feed_memo.get(key)
        if hit is not None:
            return hit
        out: set[StackNode] = set()
        for node in self._reduce_closure(frontier, term_id):
            sh = self._rows[node.state][term_id].shift
            if sh is not None:
                out.add(StackNode(sh, node))
        res = frozenset(out)
        if len(self._feed_memo) >= self._memo_limit:
            self._feed_memo.clear()
        self._feed_memo[key] = res
        return res

    def _reduce_closure(self, frontier: Iterable[StackNode], term_id: int) -> list[StackNode]:
        """Every stack reachable from ``frontier`` by reductions on lookahead ``term_id``
        (including the stacks themselves), found by a worklist with a visited set."""
        rows, goto, rlen, rlhs = self._rows, self._goto, self._rule_len, self._rule_lhs
        seen = set(frontier)
        work = list(seen)
        i = 0
        while i < len(work):
            node = work[i]
            i += 1
            for r in rows[node.state][term_id].reduces:
                p: Optional[StackNode] = node
                for _ in range(rlen[r]):
                    p = p.parent  # type: ignore[union-attr]
                    if p is None:
                        raise GLRError(f"reduction by rule {r} pops below the stack bottom")
                g = goto[p.state][rlhs[r]]
                if g < 0:
                    raise GLRError(f"no goto from state {p.state} on rule {r}'s lhs")
                new = StackNode(g, p)
                if new not in seen:
                    seen.add(new)
                    work.append(new)
        return work

    # -- derived queries -------------------------------------------------------------------------
    def can_shift(self, frontier: frozenset, term_id: int) -> bool:
        """Whether ``feed(frontier, term_id)`` would be non-empty."""
        return term_id in self.acceptable(frontier)

    def acceptable(self, frontier: frozenset) -> frozenset[int]:
        """Terminal ids that can be shifted next (``$END`` included when the input so far is a
        complete sentence)."""
        hit = self._acc_memo.get(frontier)
        if hit is not None:
            return hit
        rows = self._rows
        # a terminal with no action on any top can neither reduce nor shift: skip it
        candidates: set[int] = set()
        for node in frontier:
            for t, a in enumerate(rows[node.state]):
                if a:
                    candidates.add(t)
        ok = []
        for t in candidates:
            if any(rows[n.state][t].shift is not None for n in self._reduce_closure(frontier, t)):
                ok.append(t)
        res = frozenset(ok)
        if len(self._acc_memo) >= self._memo_limit:
            self._acc_memo.clear()
        self._acc_memo[frontier] = res
        return res

    def accepts_end(self, frontier: frozenset) -> bool:
        """The terminals fed so far form a complete sentence."""
        return self.can_shift(frontier, self._end)

    def is_empty(self, frontier: frozenset) -> bool:
        return not frontier

    def feed_names(self, frontier: frozenset, names: Sequence[str]) -> frozenset:
        """Feed terminals by name (convenience for tests and debugging)."""
        idx = self.table.terminal_index
        for name in names:
            if not frontier:
                break
            frontier = self.feed(frontier, idx[name])
        return frontier


def recognize(table: LRTable, terminals: Sequence[str], glr: GLR | None = None) -> bool:
    """Whether the terminal-name sequence is a sentence of the table's grammar."""
    g = glr or GLR(table)
    f = g.feed_names(g.initial(), terminals)
    return bool(f) and g.accepts_end(f)


__all__ = ["END", "EMPTY_FRONTIER", "Frontier", "GLR", "GLRError", "StackNode", "recognize"]
