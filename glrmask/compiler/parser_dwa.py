"""The Parser DWA: the Terminal DWA with every terminal label replaced by its stack-effect automaton
(DESIGN §4.8; notes §1, §3.10).

Why. A static mask must answer "which tokens can the parser stack below accept" without scanning
the vocabulary per mask. The Terminal DWA (:mod:`.terminal_dwa`) knows, per boundary lexer state,
which terminal sequences each token feeds the parser; the stack-effect automata
(:mod:`.stack_effects`) know what each terminal reads from and writes to the stack. Composing them
gives an automaton that reads the parser stack top-down and whose accepted weights are the tokens
the stack allows — the only per-mask work left is walking it over the frontier's stacks.

Product states. A *settled* state ``(d, P)`` stands at Terminal-DWA node ``d`` between terminals,
with ``P`` the writes of the terminals consumed so far that no later read has cancelled (a LIFO,
``P[-1]`` on top, sitting above the still-unread original stack). Consuming terminal ``t`` runs
``t``'s effect automaton, reading ``P`` top-down first: reading a pending write ``p`` takes the
edge the automaton would take on a concrete stack (the explicit edge for ``p``, else DEFAULT), so
``p+ p-`` cancels, ``p+ q-`` dies, DEFAULT cancels any ``p`` the state has no explicit edge for.
Reads past ``P`` read the original stack. A final of the effect automaton with write sequence
``w`` moves to settled ``(d', P_rest + w)``. Acceptance: a CLOSED final of ``d`` accepts as is
(pending writes are just the new stack top); an open final ``(t, w)`` accepts when ``t``'s effect
automaton reaches a final (``t`` can be shifted).

Everything that reads only pending writes is independent of the original stack, so it is computed
once per settled state and memoized (:meth:`ParserDWA.closure`): the CLOSED-acceptance weight and
the *read states* ``(t, e, d')`` — effect automaton ``t`` in state ``e`` with all pending writes
consumed, about to read the original stack, continuing at ``d'`` (``OPEN`` for an open final) —
each with the token set of the path that reached it. :meth:`ParserDWA.accepted` then walks a
concrete stack top-down from those read states, memoized per (product state, stack node) (stack
nodes are hash-consed, so shared GLR stacks are walked once).

Weights are token sets over internal (trie-order) ids held as Python ints used as bitsets
(bit ``i`` = internal token ``i``): intersections along a path are ``&``, unions ``|``.

What is not done here: the subset determinization of the product (sets of product states as one
DWA state), and a flat array layout for a native runtime. The lazily built closure is the
stack-independent part such a layout would be compiled from.
"""
from __future__ import annotations

from typing import Optional

from glrmask.errors import GrammarTooComplex
from glrmask.lr.glr import StackNode

from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA

__all__ = ["OPEN", "ParserDWA", "DEFAULT_MAX_CLOSURES"]

OPEN = -1
"""The continuation of a read state that belongs to an open final: reaching a final accepts."""

DEFAULT_MAX_CLOSURES = 2_000_000
"""Default budget: memoized settled product states ``(TDWA node, pending writes)``."""

ReadState = tuple[int, int, int]  # (terminal, effect state with all pending writes read, next TDWA node or OPEN)


class _Effect:
    """One effect automaton as Python lists (fast stepping in the walks)."""

    __slots__ = ("explicit", "default", "finals", "moves")

    def __init__(self, aut) -> None:
        n = aut.n_states
        ptr = aut.edge_ptr.tolist()
        labels = aut.edge_label.tolist()
        targets = aut.edge_target.tolist()
        self.explicit: list[dict[int, int]] = [
            {labels[k]: targets[k] for k in range(ptr[d], ptr[d + 1])} for d in range(n)
        ]
        self.default: list[int] = aut.default_target.tolist()
        self.finals: list[tuple[tuple[int, ...], ...]] = [tuple(aut.finals(d)) for d in range(n)]
        # whether reading anything more can still lead somewhere
        self.moves: list[bool] = [
            self.default[d] >= 0 or any(t >= 0 for t in self.explicit[d].values()) for d in range(n)
        ]

    def step(self, e: int, s: int) -> int:
        t = self.explicit[e].get(s)
        return self.default[e] if t is None else t


class ParserDWA:
    """The lazily built composition of one :class:`TerminalDWA` with one :class:`StackEffects`."""

    def __init__(self, tdwa: TerminalDWA, effects: StackEffects, *,
                 max_closures: int = DEFAULT_MAX_CLOSURES) -> None:
        self.tdwa = tdwa
        self.effects = effects
        self.max_closures = max_closures
        self.full = (1 << tdwa.n_tokens) - 1
        self._eff = [_Effect(a) for a in effects.automata]
        self._weights: dict[int, int] = {}
        self._closure: dict[tuple[int, tuple[int, ...]], tuple[int, tuple[tuple[ReadState, int], ...]]] = {}
        # TDWA node arrays as lists
        self._final = tdwa.final_weight.tolist()
        self._open_ptr = tdwa.open_ptr.tolist()
        self._open_label = tdwa.open_label.tolist()
        self._open_weight = tdwa.open_weight.tolist()
        self._edge_ptr = tdwa.edge_ptr.tolist()
        self._edge_label = tdwa.edge_label.tolist()
        self._edge_target = tdwa.edge_target.tolist()
        self._edge_weight = tdwa.edge_weight.tolist()

    @property
    def n_closures(self) -> int:
        """Settled product states built so far."""
        return len(self._closure)

    def weight_bits(self, w: int) -> int:
        """Terminal-DWA weight ``w`` as an int bitset (0 for ``-1``)."""
        if w < 0:
            return 0
        b = self._weights.get(w)
        if b is None:
            b = 0
            for lo, hi in self.tdwa.weight_intervals(w):
                b |= (1 << hi) - (1 << lo)
            self._weights[w] = b
        return b

    # ------------------------------------------------------------------ stack-independent part
    def closure(self, d: int, pending: tuple[int, ...]) -> tuple[int, tuple[tuple[ReadState, int], ...]]:
        """Settled state ``(d, pending)``: (tokens accepted without reading the original stack,
        ``((read state, tokens of the paths reaching it), ...)``)."""
        key = (d, pending)
        hit = self._closure.get(key)
        if hit is not None:
            return hit
        if len(self._closure) >= self.max_closures:
            raise GrammarTooComplex(
                f"parser DWA: more than {self.max_closures} product states (limit max_closures)")
        acc = self.weight_bits(self._final[d])
        reads: dict[ReadState, int] = {}
        eff = self._eff
        n_p = len(pending)
        for k in range(self._open_ptr[d], self._open_ptr[d + 1]):
            t = self._open_label[k]
            wb = self.weight_bits(self._open_weight[k])
            a = eff[t]
            e, i = 0, n_p
            while True:
                if a.finals[e]:  # t is shifted: the open lexeme can be accepted
                    acc |= wb
                    break
                if i == 0:
                    if a.moves[e]:
                        reads[(t, e, OPEN)] = reads.get((t, e, OPEN), 0) | wb
                    break
                i -= 1
                e = a.step(e, pending[i])
                if e < 0:
                    break
        for k in range(self._edge_ptr[d], self._edge_ptr[d + 1]):
            t = self._edge_label[k]
            d2 = self._edge_target[k]
            wb = self.weight_bits(self._edge_weight[k])
            a = eff[t]
            e, i = 0, n_p
            while True:
                for ws in a.finals[e]:
                    acc2, reads2 = self.closure(d2, pending[:i] + ws)
                    acc |= wb & acc2
                    for rs, w2 in reads2:
                        w = wb & w2
                        if w:
                            reads[rs] = reads.get(rs, 0) | w
                if i == 0:
                    if a.moves[e]:
                        rs = (t, e, d2)
                        reads[rs] = reads.get(rs, 0) | wb
                    break
                i -= 1
                e = a.step(e, pending[i])
                if e < 0:
                    break
        res = (acc, tuple(reads.items()))
        self._closure[key] = res
        return res

    # ------------------------------------------------------------------ the walk over a stack
    def accepted(self, root: int, stack: StackNode, memo: Optional[dict] = None) -> int:
        """Tokens (int bitset over internal ids) the Terminal-DWA node ``root`` admits on parser
        stack ``stack`` (before condition seeds). ``memo`` may be shared across the stacks and
        configurations of one mask (keys hold stack nodes, so keep it short-lived)."""
        return self._settled(root, (), stack, {} if memo is None else memo)

    def _settled(self, d: int, pending: tuple[int, ...], node: Optional[StackNode], memo: dict) -> int:
        key = (d, pending, node)
        hit = memo.get(key)
        if hit is not None:
            return hit
        acc, reads = self.closure(d, pending)
        r = acc
        for rs, w in reads:
            if w & ~r:
                r |= w & self._read(rs, node, memo)
        memo[key] = r
        return r

    def _read(self, rs: ReadState, node: Optional[StackNode], memo: dict) -> int:
        """Tokens accepted (relative to the path weight) when read state ``rs`` reads ``node``."""
        if node is None:  # reading below the bottom fails
            return 0
        key = (rs, node)
        hit = memo.get(key)
        if hit is not None:
            return hit
        t, e, d2 = rs
        a = self._eff[t]
        e2 = a.step(e, node.state)
        r = 0
        if e2 >= 0:
            parent = node.parent
            fin = a.finals[e2]
            if fin and d2 == OPEN:
                r = self.full
            else:
                for ws in fin:
                    r |= self._settled(d2, ws, parent, memo)
                if a.moves[e2] and r != self.full:
                    r |= self._read((t, e2, d2), parent, memo)
        memo[key] = r
        return r
