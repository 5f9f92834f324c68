"""Lexer states that no token can tell apart: classes by behaviour over a bounded number of bytes
(DESIGN §4.7 "after merging lexer states that behave identically on the whole vocab").

Why. The Terminal DWA walks the vocabulary trie once per (trie node, branch), a branch holding a
lexer state. A bounded string (``maxLength: 1024``) is a chain of ~1024 lexer states, all different
— yet a token of at most ``h`` bytes cannot tell apart two states that agree on everything
observable within ``h`` steps. Walking the trie from each of them repeats the same work ~1024
times (and a chain state never converges with another, so the walk memo does not help). This
module gives, for every ``h``, the partition of the dense lexer's states into classes of states
that agree within ``h`` bytes, so that a branch at a trie node whose subtree is at most ``h`` bytes
deep can be keyed by its class representative.

What "agree within ``h`` bytes" means (the *h-equivalence* of Moore's algorithm): two states are
0-equivalent when they have the same futures and the same event list (terminals and condition
ids) on every byte; ``h``-equivalent when they are ``(h-1)``-equivalent and on every byte their
targets are ``(h-1)``-equivalent (DEAD only to DEAD). Everything the Terminal DWA reads of a branch
while scanning at most ``h`` more bytes — the events, whether the lane survives (its futures), the
futures at the token's end — is then the same, so the walk's results coincide: the canonical key
is exact. (0-equivalence already asks for equal events, which only matter once a byte is read:
finer than needed at ``h = 0``, never coarser.) The dense lexer is minimized, so the refinement
ends in the identity partition; it stops there, or at the largest ``h`` asked for.

Representatives are the smallest state id of each class, so the keys — and the built automaton —
do not depend on the order in which classes are found.
"""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from glrmask.budget import current_budget
from glrmask.lexer.dfa import LexerDFA, _row_labels
from glrmask_ext import state_classes as _native

__all__ = ["BoundedClasses", "byte_groups", "event_keys", "node_heights", "trie_heights"]


class BoundedClasses:
    """``rep(q, h)``: the smallest dense lexer state ``h``-equivalent to ``q`` (module docstring).

    Levels are computed once, up to ``max_h`` or until the partition no longer changes (then every
    higher level equals the last one)."""

    def __init__(self, dfa: LexerDFA, max_h: int, *, stage: str = "terminal DWA (lexer state classes)",
                 ev: Optional[np.ndarray] = None, native: bool = True,
                 groups: Optional[tuple[tuple[int, ...], ...]] = None):
        """``native=False``: the levels by the numpy description below (the tests' reference).
        ``groups``: :func:`byte_groups` of ``dfa`` when at hand (their first bytes are the only
        columns to compare: a group's bytes have equal columns)."""
        ev = event_keys(dfa) if ev is None else ev
        # bytes with identical columns (target and events) in every state are one column here:
        # the smallest byte of each
        if groups is not None:
            reps = np.asarray(sorted(g[0] for g in groups), dtype=np.int64)
            cols = np.concatenate([dfa.trans[:, reps].astype(np.int64), ev[:, reps]], axis=0)
            _, first = np.unique(_column_labels(cols), return_index=True)
            keep = reps[np.sort(first)]
        else:
            cols = np.concatenate([dfa.trans.astype(np.int64), ev], axis=0)
            _, first = np.unique(_column_labels(cols), return_index=True)
            keep = np.sort(first)
        observed = np.concatenate([dfa.futures.view(np.int64), ev[:, keep]], axis=1)
        if native:
            current_budget().check(stage)
            self.n_states = int(dfa.trans.shape[0])
            self._reps = _native.refinement_levels(np.ascontiguousarray(dfa.trans[:, keep], dtype=np.int32),
                                                   np.ascontiguousarray(observed, dtype=np.int64), max_h)
            self.stable_from = len(self._reps) - 1
        else:
            self._build(dfa.trans[:, keep].astype(np.int64), observed, max_h, stage)

    def _build(self, trans: np.ndarray, observed: np.ndarray, max_h: int, stage: str) -> None:
        n = trans.shape[0]
        self.n_states = n
        budget = current_budget()
        labels = _row_labels(np.ascontiguousarray(observed)) if n else np.zeros(0, dtype=np.int64)
        dead = trans < 0
        safe = np.maximum(trans, 0)
        self._reps: list[np.ndarray] = [_smallest_member(labels)]  # int32 per level: ~4 bytes a state
        n_cls = int(labels.max()) + 1 if n else 0
        h = 0
        while h < max_h and n_cls < n:
            budget.check(stage)
            # a state alone in its class stays alone: only the others' rows can split
            counts = np.bincount(labels, minlength=n_cls)
            active = np.flatnonzero(counts[labels] > 1)
            tgt = np.where(dead[active], -1, labels[safe[active]])
            sub = _row_labels(np.concatenate([labels[active, None], tgt], axis=1))
            new = labels.copy()
            new[active] = n_cls + sub
            _, new = np.unique(new, return_inverse=True)
            new = new.reshape(-1)
            m = int(new.max()) + 1
            if m == n_cls:
                break
            labels, n_cls = new, m
            self._reps.append(_smallest_member(labels))
            h += 1
        self.stable_from: int = len(self._reps) - 1
        """Levels from this one on are all equal (the last one computed)."""

    def levels_array(self) -> np.ndarray:
        """``int32[n_levels, n_states]``: row ``h`` is :meth:`level` ``(h)`` (for native walks)."""
        if not self._reps:
            return np.zeros((0, self.n_states), dtype=np.int32)
        return np.ascontiguousarray(np.stack([np.asarray(r, dtype=np.int32) for r in self._reps]))

    def level(self, h: int) -> list[int]:
        """``rep(q, h)`` for every state ``q``, as a list indexed by ``q``."""
        return self._reps[min(h, self.stable_from)].tolist()

    def rep(self, q: int, h: int) -> int:
        """The representative of ``q``'s ``h``-equivalence class (DEAD and other negative ids are
        returned unchanged)."""
        if q < 0:
            return q
        return int(self._reps[min(h, self.stable_from)][q])

    @property
    def n_levels(self) -> int:
        return len(self._reps)

    def n_classes(self, h: int) -> int:
        lev = self.level(h)
        return len(set(lev))


def event_keys(dfa: LexerDFA, *, native: bool = True) -> np.ndarray:
    """``int64[n_states, 256]``: equal iff the two transitions report the same event list (ids by
    first appearance in (state, byte) order; 0: no event)."""
    n = dfa.n_states
    if native:
        return _native.event_keys(np.ascontiguousarray(dfa.ev_ptr, dtype=np.int64),
                                  np.ascontiguousarray(dfa.ev_term, dtype=np.int32),
                                  np.ascontiguousarray(dfa.ev_cond, dtype=np.int32), n)
    ptr = dfa.ev_ptr.astype(np.int64)
    lens = np.diff(ptr)
    keys = np.zeros(n * 256, dtype=np.int64)
    nz = np.flatnonzero(lens)
    if nz.size:
        terms = dfa.ev_term.tolist()
        conds = dfa.ev_cond.tolist()
        ids: dict[tuple, int] = {}
        lo_all = ptr[nz].tolist()
        hi_all = ptr[nz + 1].tolist()
        out = np.empty(nz.size, dtype=np.int64)
        for i, (lo, hi) in enumerate(zip(lo_all, hi_all)):
            key = tuple(zip(terms[lo:hi], conds[lo:hi]))
            k = ids.get(key)
            if k is None:
                k = ids[key] = len(ids) + 1
            out[i] = k
        keys[nz] = out
    return keys.reshape(n, 256)


def byte_groups(dfa: LexerDFA, ev: Optional[np.ndarray] = None, *, native: bool = True) -> tuple[tuple[int, ...], ...]:
    """The bytes every state and every condition of ``dfa`` steps alike (same target, same
    events, same condition successor), as groups ordered by their smallest byte: a branch of the
    Terminal DWA walk is then stepped once per group."""
    ev = event_keys(dfa) if ev is None else ev
    if native:
        return _native.byte_groups(np.ascontiguousarray(dfa.trans, dtype=np.int32), np.ascontiguousarray(ev, dtype=np.int64),
                                   np.ascontiguousarray(dfa.cond_trans, dtype=np.int32).reshape(-1, 256))
    cols = np.concatenate([dfa.trans.astype(np.int64), ev, dfa.cond_trans.astype(np.int64)], axis=0)
    groups: dict[int, list[int]] = {}
    for b, g in enumerate(_column_labels(cols).tolist()):
        groups.setdefault(g, []).append(b)
    return tuple(tuple(g) for g in groups.values())


def _column_labels(cols: np.ndarray) -> np.ndarray:
    """Per column (byte) of ``cols``, a label equal iff the columns are equal (numbered by first
    column; ``np.unique(axis=1)`` sorted whole columns as byte strings, ~20 ms on a schema's
    lexer)."""
    return _native.column_labels(np.ascontiguousarray(cols, dtype=np.int64))


def _smallest_member(labels: np.ndarray) -> np.ndarray:
    """Per state, the smallest state with its label."""
    n = labels.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    m = int(labels.max()) + 1
    smallest = np.full(m, n, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(n, dtype=np.int64))
    return smallest[labels].astype(np.int32)


_HEIGHTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def trie_heights(trie) -> list[int]:
    """:func:`node_heights` of a vocabulary trie, cached per trie object (shared by every grammar
    compiled against the tokenizer)."""
    hit = _HEIGHTS.get(trie)
    if hit is None:
        hit = _HEIGHTS[trie] = node_heights(trie.child_ptr, trie.child_node)
    return hit


def node_heights(child_ptr: np.ndarray, child_node: np.ndarray) -> list[int]:
    """Per trie node, the most bytes a token below it has past the node (0 for a leaf). Children
    have higher ids than their parent; heights are pushed to the parents one trie level at a
    time, deepest first."""
    cp = np.asarray(child_ptr, dtype=np.int64)
    cn = np.asarray(child_node, dtype=np.int64)
    n = cp.shape[0] - 1
    if n <= 0:
        return []
    parent = np.full(n, -1, dtype=np.int64)
    parent[cn] = np.repeat(np.arange(n, dtype=np.int64), np.diff(cp))
    # the trie by levels from the root: the children of one level's nodes form the next
    level = np.array([0], dtype=np.int64)
    levels = [level]
    while level.size:
        lo, hi = cp[level], cp[level + 1]
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            break
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        level = cn[starts + np.arange(total, dtype=np.int64)]
        levels.append(level)
    height = np.zeros(n, dtype=np.int64)
    for level in reversed(levels[1:]):
        np.maximum.at(height, parent[level], height[level] + 1)
    return height.tolist()


