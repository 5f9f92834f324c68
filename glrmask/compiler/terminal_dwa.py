"""The Terminal DWA: what every vocabulary token does to the *terminal* stream, per lexer state
(DESIGN §4.7, §4.9, §4.10; notes §1 items 1-3, §3.8-3.9).

Why. A static mask must know, for every lexer state ``q`` a runtime lane can be in at a token
boundary and every token ``v``, which sequences of parser terminals scanning ``β(v)`` from ``q`` can
feed the parser — independently of the parser stack, so it is computed once per grammar and
vocabulary. The Parser DWA (§4.8) then replaces each terminal label by that terminal's stack-effect
automaton.

Semantics (reproduces :meth:`glrmask.reference.recognizer.Recognizer._step_configs` token by token, with the
*unrestricted* lexer — the parser filters later). A *branch* is ``(lexer state or BOUNDARY,
pending conditions created inside this token)``. Per byte: every pending condition is stepped (a
FALSE kills the branch, a TRUE is dropped); the lexer steps from the branch's state (``initial`` at
BOUNDARY); the mid-lexeme lane survives iff its futures contain an ignored or labelled terminal;
each event ``(t, cond)`` whose ``cond`` is not FALSE and is satisfiable restarts at BOUNDARY with
``cond`` added to the pending set — transparently when ``t`` is ignored, with label
``label_of[t]`` when ``t`` is labelled (both when both). An *outcome* of ``(q, v)`` is the label
sequence of a branch alive at the token's end plus its end: ``CLOSED`` (at BOUNDARY) or OPEN in
lexer state ``q'`` — then the parser must accept next some terminal ``t`` in ``futures(q')``; an
OPEN end whose futures hold an ignored terminal also counts as "nothing more needed", exactly like
CLOSED (ignored terminals never touch the parser). Hence the *denotation*::

    Lex(q, v) = { (r, CLOSED) : the parser must consume exactly r }
              ∪ { (r, t)      : the parser must consume r and then accept t (t an LR terminal) }

Conditions that are still pending at the token's end are not part of the denotation (they constrain
the *next* token); every such condition, and everything later tokens can step it to, gets a
``fail_seed``: the tokens whose bytes, stepped from it, reach FALSE (a static mask removes them from
a configuration that carries the condition).

How. The trie is walked once per (trie node, branch) pair — memoized, so the many boundary states
that converge after a byte or two share the rest of the walk, and dead branches never descend.
The walk, the DAG and (over a dense lexer) the branch semantics are native
(:mod:`glrmask_ext.tdwa_walk`): a build is tens of millions of memo probes, step-table reads and
interval merges, about a microsecond each with Python dicts and tuples. :class:`_Builder` keeps
the same semantics in Python (``native=False``): lazy lexers use it, and the tests compare the two.
The result of a pair is a node of one hash-consed DAG of weighted label trees (a node is its final
weight, its open weights and its labelled children; equal denotations are the same node), built
bottom-up by memoized unions of the children's results. Sharing suffixes keeps ambiguous tokens
linear (``*`` lexed as either of two terminals gives 2^n label words for ``*``^n, but n nodes).
Weights are interned interval lists over internal ids (trie order makes subtrees intervals, so most
weights are one or two intervals). A node's identity is its whole weighted suffix language, so the
weight of a path is simply the final weight where it ends; edge weights are the supports of their
targets and let a runtime stop early. Only the nodes reachable from the roots are kept.

Flat layout (all ``int32`` numpy arrays; the Parser DWA composition and a Cython runtime read them):

* roots: ``boundary_states[i]`` (a lexer state; ``lexer.initial`` first) starts at node
  ``roots[i]``; roots of boundary states with identical behaviour coincide;
* nodes ``0 .. n_nodes-1`` in topological order (every edge goes to a higher id);
* label edges, CSR: edges of node ``d`` are ``k in range(edge_ptr[d], edge_ptr[d+1])`` with LR
  terminal ``edge_label[k]`` (ascending), target ``edge_target[k]`` and weight ``edge_weight[k]`` =
  the tokens with some outcome passing through the edge;
* ``final_weight[d]``: tokens whose outcome is (path to ``d``, CLOSED), ``-1`` when none;
* open finals, CSR: ``open_label[k]`` / ``open_weight[k]`` for ``k in range(open_ptr[d],
  open_ptr[d+1])``: tokens with an outcome (path to ``d``, ``open_label[k]``), labels ascending;
* weights: interned token sets over internal (trie-order) ids; weight ``w`` is the sorted disjoint
  half-open intervals ``weight_bounds[weight_ptr[w]:weight_ptr[w+1]]`` read as ``lo, hi`` pairs.
  Every stored weight is non-empty. :meth:`TerminalDWA.dense_weights` gives ``uint64`` bitmaps;
* conditions: ``cond_ids`` (ascending lexer condition ids) and ``fail_seed[i]`` (a weight, or
  ``-1`` when no token kills condition ``cond_ids[i]``).
"""
from __future__ import annotations

import gc
import time
from bisect import bisect_right
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex

from glrmask_ext.tdwa_walk import Dag as _Dag, Walker as _Walker

from .lexer_classes import BoundedClasses, byte_groups, event_keys
from .trie_tables import trie_tables

__all__ = ["CLOSED", "TerminalDWA", "terminal_labels"]

#: End marker of an outcome that needs nothing more from the parser (a closed lexeme, or one still
#: open inside an ignored terminal).
CLOSED = -1
_BOUNDARY = -2  # branch lexer "state": at a lexeme start (steps from ``lexer.initial``)

Intervals = tuple[int, ...]  # flat sorted disjoint half-open intervals: lo0, hi0, lo1, hi1, ...
Outcome = tuple[tuple[int, ...], int]  # (label sequence, CLOSED or the open LR terminal)


def terminal_labels(lexer, grammar, table) -> tuple[set[int], dict[int, int]]:
    """The ``ignored`` set and ``label_of`` map for :meth:`TerminalDWA.build`, as the recognizer
    sees them: lexer terminals named in ``%ignore``, and lexer terminal → LR terminal id for the
    terminals some rule uses (a terminal no rule uses can never be shifted, so it gets no label)."""
    used = {s for r in table.rules for s in r.rhs}
    ignored_names = set(grammar.ignore)
    ignored: set[int] = set()
    label_of: dict[int, int] = {}
    for i, name in enumerate(lexer.terminal_names):
        if name in ignored_names:
            ignored.add(i)
        if name in used and name in table.terminal_index:
            label_of[i] = table.terminal_index[name]
    return ignored, label_of


# ---------------------------------------------------------------------------------------------
# interval helpers (flat tuples/lists of lo, hi pairs)


def _contains(ivs: Sequence[int], tok: int) -> bool:
    i = bisect_right(ivs, tok)
    return (i & 1) == 1


# ---------------------------------------------------------------------------------------------


class TerminalDWA:
    """The compiled automaton; see the module docstring for the arrays and what they denote."""

    def __init__(self, arrays: Mapping[str, np.ndarray], *, n_tokens: int, stats: Optional[dict] = None):
        for name in _ARRAYS:
            setattr(self, name, np.ascontiguousarray(arrays[name], dtype=np.int32))
        self.n_tokens = int(n_tokens)
        self.n_nodes = int(self.final_weight.shape[0])
        self.n_weights = int(self.weight_ptr.shape[0]) - 1
        self.stats: dict = dict(stats or {})
        self._root_of = {int(q): int(r) for q, r in zip(self.boundary_states, self.roots)}
        self._cond_index = {int(c): i for i, c in enumerate(self.cond_ids)}
        self._dense: Optional[np.ndarray] = None

    # ---------------------------------------------------------------- construction
    @classmethod
    def build(
        cls,
        lexer,
        trie,
        *,
        ignored: Iterable[int],
        label_of: Mapping[int, int],
        start_states: Optional[Iterable[int]] = None,
        max_boundary_states: int = 20_000,
        max_nodes: int = 2_000_000,
        max_weights: int = 1_000_000,
        max_walk_steps: int = 50_000_000,
        max_seconds: Optional[float] = None,
        native: bool = True,
    ) -> "TerminalDWA":
        """Build the automaton for every boundary lexer state reachable from ``lexer.initial`` (and
        ``start_states``). ``ignored``: lexer terminal ids of ignored terminals; ``label_of``: lexer
        terminal id → LR terminal id (terminals absent from both can never be used and are
        dropped). Budgets raise :class:`GrammarTooComplex` naming the limit: boundary states,
        interned DAG nodes (intermediate ones included), distinct weights, walk steps ((trie node, branch) pairs expanded), wall time.

        ``native``: over a dense lexer, step branches on its arrays in native code; ``False``
        steps them with this module's Python description of the semantics (the two build the
        same automaton; the Python one is the tests' oracle and serves lazy lexers)."""
        b = _Builder(lexer, trie, frozenset(ignored), dict(label_of), max_boundary_states=max_boundary_states,
                     max_nodes=max_nodes, max_weights=max_weights, max_walk_steps=max_walk_steps,
                     max_seconds=max_seconds, native=native)
        # The build allocates millions of small, acyclic tuples that stay alive; the cyclic GC would
        # rescan them over and over (about two thirds of the build time), so pause it meanwhile.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return b.run(start_states or ())
        finally:
            if gc_was_enabled:
                gc.enable()

    # ---------------------------------------------------------------- queries
    def root_of(self, q: int) -> int:
        """The root node of boundary lexer state ``q`` (KeyError if ``q`` is not one)."""
        return self._root_of[int(q)]

    def weight_intervals(self, w: int) -> list[tuple[int, int]]:
        """Weight ``w`` as sorted half-open ``(lo, hi)`` intervals of internal token ids."""
        b = self.weight_bounds[self.weight_ptr[w]:self.weight_ptr[w + 1]].tolist()
        return list(zip(b[0::2], b[1::2]))

    def weight_tokens(self, w: int) -> frozenset[int]:
        """Weight ``w`` as a set of internal token ids (tests, small vocabularies)."""
        return frozenset(t for lo, hi in self.weight_intervals(w) for t in range(lo, hi))

    def weight_contains(self, w: int, tok: int) -> bool:
        if w < 0:
            return False
        return _contains(self.weight_bounds[self.weight_ptr[w]:self.weight_ptr[w + 1]].tolist(), tok)

    def dense_weights(self) -> np.ndarray:
        """``uint64[n_weights, ceil(n_tokens/64)]``: bit ``i % 64`` of word ``i // 64`` of row ``w`` is
        set iff internal token ``i`` is in weight ``w`` (built once, then cached)."""
        if self._dense is None:
            n_words = (self.n_tokens + 63) // 64
            bits = np.zeros((self.n_weights, n_words * 64), dtype=np.uint8)
            for w in range(self.n_weights):
                for lo, hi in self.weight_intervals(w):
                    bits[w, lo:hi] = 1
            packed = np.packbits(bits, axis=1, bitorder="little")
            self._dense = np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)
        return self._dense

    def fail_seed_tokens(self, cond: int) -> frozenset[int]:
        """Tokens whose bytes, stepped from pending condition ``cond``, reach FALSE."""
        w = int(self.fail_seed[self._cond_index[int(cond)]])
        return frozenset() if w < 0 else self.weight_tokens(w)

    def token_outcomes(self, q: int, tok: int) -> frozenset[Outcome]:
        """The outcomes the automaton denotes for boundary state ``q`` and internal token ``tok``."""
        out: set[Outcome] = set()
        stack: list[tuple[int, tuple[int, ...]]] = [(self.root_of(q), ())]
        while stack:
            d, labels = stack.pop()
            if self.weight_contains(int(self.final_weight[d]), tok):
                out.add((labels, CLOSED))
            for k in range(self.open_ptr[d], self.open_ptr[d + 1]):
                if self.weight_contains(int(self.open_weight[k]), tok):
                    out.add((labels, int(self.open_label[k])))
            for k in range(self.edge_ptr[d], self.edge_ptr[d + 1]):
                if self.weight_contains(int(self.edge_weight[k]), tok):
                    stack.append((int(self.edge_target[k]), labels + (int(self.edge_label[k]),)))
        return frozenset(out)

    def denotation(self, q: int) -> dict[Outcome, frozenset[int]]:
        """Every path of root ``q``'s automaton with its weight (∩ edge weights ∩ final weight):
        ``{(labels, CLOSED or open terminal): internal token ids}`` (small vocabularies only)."""
        out: dict[Outcome, frozenset[int]] = {}
        full = frozenset(range(self.n_tokens))
        stack: list[tuple[int, tuple[int, ...], frozenset[int]]] = [(self.root_of(q), (), full)]
        while stack:
            d, labels, acc = stack.pop()
            ends = [(CLOSED, int(self.final_weight[d]))] + [
                (int(self.open_label[k]), int(self.open_weight[k]))
                for k in range(self.open_ptr[d], self.open_ptr[d + 1])
            ]
            for end, w in ends:
                if w >= 0:
                    got = acc & self.weight_tokens(w)
                    if got:
                        out[(labels, end)] = got
            for k in range(self.edge_ptr[d], self.edge_ptr[d + 1]):
                nxt = acc & self.weight_tokens(int(self.edge_weight[k]))
                if nxt:
                    stack.append((int(self.edge_target[k]), labels + (int(self.edge_label[k]),), nxt))
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _ARRAYS}

    def __repr__(self) -> str:
        return (f"TerminalDWA(boundary_states={len(self.boundary_states)}, nodes={self.n_nodes}, "
                f"edges={len(self.edge_label)}, open={len(self.open_label)}, weights={self.n_weights}, "
                f"conds={len(self.cond_ids)})")


_ARRAYS = (
    "boundary_states", "roots",
    "edge_ptr", "edge_label", "edge_target", "edge_weight",
    "final_weight", "open_ptr", "open_label", "open_weight",
    "weight_ptr", "weight_bounds", "cond_ids", "fail_seed",
)


# ---------------------------------------------------------------------------------------------


class _Builder:
    """One construction: the memoized trie walk, the condition seeds, then the hash-consed DAG."""

    def __init__(self, lexer, trie, ignored: frozenset[int], label_of: dict[int, int], *,
                 max_boundary_states: int, max_nodes: int, max_weights: int, max_walk_steps: int,
                 max_seconds: Optional[float], native: bool = True):
        self.lexer = lexer
        self.trie = trie
        self.ignored = ignored
        self.label_of = label_of
        self.relevant = frozenset(ignored) | frozenset(label_of)
        self.max_boundary_states = max_boundary_states
        self.max_nodes = max_nodes
        self.max_weights = max_weights
        self.max_walk_steps = max_walk_steps
        self.max_seconds = max_seconds
        self.t0 = time.perf_counter()
        tables = trie_tables(trie)
        self._alive: dict[int, bool] = {}
        self._open_labels: dict[int, tuple[int, ...]] = {}
        self._cfg_ids: dict[tuple[int, tuple[int, ...]], int] = {}  # branch -> id
        self._cfgs: list[tuple[int, tuple[int, ...]]] = []
        self._cfg_steps: list[list] = []  # per branch id: 256 cached step results (None: not yet)
        self.dag = _Dag(max_nodes, max_weights)
        self._neutral: dict[int, tuple] = {}  # cid (cid * max_height + height with classes)
        self._by_result: dict[int, list[tuple[tuple, list[int]]]] = {}
        self.end_conds: set[int] = set()
        self.end_states: set[int] = set()
        # Lexer-state classes (lexer_classes): over a dense lexer, a branch at a trie node is
        # keyed by the representative of its lexer state's class among the states no token of
        # the node's subtree can tell apart — so the ~1024 states of a bounded string share
        # one walk instead of one each. Only when every single byte is a token: then the
        # boundary states are the lexer states reachable byte by byte (see run), which the
        # canonical walk, recording representatives, could not tell.
        self.classes: Optional[BoundedClasses] = None
        self.heights: Optional[list[int]] = None
        self._canon: dict[int, int] = {}
        dfa = getattr(lexer, "dfa", None)
        # bytes every branch steps alike: one step per group fills the row for all of them
        groups: tuple = tuple(getattr(lexer, "byte_groups", None) or ())
        if dfa is not None and hasattr(dfa, "trans"):
            ev = event_keys(dfa)
            groups = byte_groups(dfa, ev)
            if tables.all_bytes:
                self.heights = tables.height_list
                self.classes = BoundedClasses(dfa, self.heights[0] if self.heights else 0, ev=ev, groups=groups)
        if not groups:
            groups = tuple((b,) for b in range(256))
        self._groups: tuple[tuple[int, ...], ...] = groups
        self._members: list[tuple[int, ...]] = [()] * 256
        for g in groups:
            for b in g:
                self._members[b] = g
        self.max_height = (self.heights[0] if self.heights else 0) + 1
        self.native = native and dfa is not None and hasattr(dfa, "trans")
        self._walker = _Walker(self, self.dag, trie, tables.subtree_bytes,
                               tables.heights if self.heights is not None else None, self.max_height,
                               self._groups, dense=lexer if self.native else None, classes=self.classes)

    # ---------------------------------------------------------------- budgets
    def _check_time(self, stage: str) -> None:
        current_budget().check(f"terminal DWA ({stage})")
        if self.max_seconds is not None and time.perf_counter() - self.t0 > self.max_seconds:
            raise GrammarTooComplex(
                f"terminal DWA ({stage}): build took more than {self.max_seconds} s (limit max_seconds)")

    # ---------------------------------------------------------------- lexer semantics
    def _lane_alive(self, q: int) -> bool:
        hit = self._alive.get(q)
        if hit is None:
            hit = bool(self.lexer.futures(q) & self.relevant)
            self._alive[q] = hit
        return hit

    def open_labels(self, q: int) -> tuple[int, ...]:
        """What the parser may accept after a token that ends inside a lexeme in state ``q``:
        LR terminals of its futures, and CLOSED when an ignored terminal is among them."""
        hit = self._open_labels.get(q)
        if hit is None:
            fut = self.lexer.futures(q)
            labs = {self.label_of[t] for t in fut if t in self.label_of}
            if fut & self.ignored:
                labs.add(CLOSED)
            hit = tuple(sorted(labs))
            self._open_labels[q] = hit
        return hit

    def _cfg_id(self, cfg: tuple[int, tuple[int, ...]]) -> int:
        """Intern a branch: the walk keys its memo and step tables by small ints, which hash far
        faster than nested tuples."""
        cid = self._cfg_ids.get(cfg)
        if cid is None:
            cid = self._cfg_ids[cfg] = len(self._cfgs)
            self._cfgs.append(cfg)
            self._cfg_steps.append([None] * 256)
        return cid

    def _step(self, cid: int, byte: int) -> tuple:
        """The branches after one byte: ``((label or None, branch id'), ...)`` (recognizer
        semantics), cached in a dense per-branch row of 256 entries."""
        row = self._cfg_steps[cid]
        hit = row[byte]
        if hit is not None:
            return hit
        lexer = self.lexer
        TRUE, FALSE = lexer.TRUE, lexer.FALSE
        lex, conds = self._cfgs[cid]
        kept: set[int] = set()
        dead = False
        for c in conds:
            c2 = lexer.cond_step(c, byte)
            if c2 == FALSE:
                dead = True
                break
            if c2 != TRUE:
                kept.add(c2)
        out: list[tuple[Optional[int], tuple[int, tuple[int, ...]]]] = []
        if not dead:
            q = lexer.initial if lex == _BOUNDARY else lex
            q2, events = lexer.step(q, byte)
            base = tuple(sorted(kept))
            if q2 != lexer.DEAD and self._lane_alive(q2):
                out.append((None, (q2, base)))
            for term, cond in events:
                if cond == FALSE or (cond != TRUE and not lexer.cond_satisfiable(cond)):
                    continue
                after = base if cond == TRUE else tuple(sorted(kept | {cond}))
                if term in self.ignored:
                    out.append((None, (_BOUNDARY, after)))
                lab = self.label_of.get(term)
                if lab is not None:
                    out.append((lab, (_BOUNDARY, after)))
        res = tuple((lab, self._cfg_id(cfg2)) for lab, cfg2 in dict.fromkeys(out))  # dedupe, keep order
        for b in self._members[byte]:
            row[b] = res
        return res

    # ---------------------------------------------------------------- the walk
    def _results_by_byte(self, cid: int) -> list[tuple[tuple, list[int]]]:
        """``cid``'s distinct step results with the bytes giving each (ascending), cached: the
        neutral-byte search at several heights regroups a few results, not 256 bytes."""
        hit = self._by_result.get(cid)
        if hit is None:
            groups: dict[tuple, list[int]] = {}
            for members in self._groups:
                groups.setdefault(self._step(cid, members[0]), []).extend(members)
            hit = self._by_result[cid] = list(groups.items())
        return hit

    def neutral_bytes(self, cid: int, node: int = 0) -> tuple[tuple[int, int, int, int], tuple]:
        """The *looping* bytes of branch ``cid`` at trie node ``node`` and their common step
        result ``R``, for skipping whole trie subtrees: ``R`` keeps the branch as it is
        (``(None, cid)``) and may add exit branches ``(label, cid2)`` that every looping byte kills
        (``TEXT: /[^,]+/`` reports a match after each byte, which the next byte of the field
        refutes). A subtree spelled only with looping bytes then denotes, for all its tokens at
        once, ``cid`` itself plus each exit — the walk takes it in one step (most of a
        vocabulary, inside a string or a free-text field).

        With lexer-state classes, "keeps the branch as it is" is "keeps it in its class": below a
        node of height ``h`` (tokens at most ``h`` bytes longer), a byte whose continuation is
        ``(h-1)``-equivalent to ``cid`` loops (a bounded string far from its bound counts
        characters, yet no token below can reach the bound). Reading ``k`` looping bytes then
        leaves a branch ``(h-k)``-equivalent to ``cid`` — its events, survival and end futures
        are ``cid``'s for every token of the subtree — so the subtree's outcomes are the same
        as with an exact loop (:mod:`glrmask.compiler.lexer_classes`).

        Returns (the bytes as four 64-bit words, ``R``); no bytes when no such ``R`` exists."""
        h = -1 if self.heights is None else self.heights[node]
        key = cid if h < 0 else cid * self.max_height + h  # the walk looks this key up inline
        hit = self._neutral.get(key)
        if hit is None:
            if h < 0:
                def same(res):
                    return res
                home = (None, cid)
            else:
                lower = max(h - 1, 0)
                cfgs = self._cfgs

                def same(res):
                    return tuple((lab, self.canonical(c2, lower)) if cfgs[c2][0] >= 0 else (lab, c2)
                                 for lab, c2 in res)
                home = (None, self.canonical(cid, lower))
            by_result: dict[tuple, list[int]] = {}
            for raw, byte_list in self._results_by_byte(cid):
                norm = same(raw)
                if home in norm:
                    by_result.setdefault(norm, []).extend(byte_list)
            hit = ((0, 0, 0, 0), ())
            if by_result:
                res, loop = max(by_result.items(), key=lambda kv: len(kv[1]))
                if all(not self._step(cid2, b) for lab, cid2 in res if (lab, cid2) != home for b in loop):
                    words = [0, 0, 0, 0]
                    for byte in loop:
                        words[byte >> 6] |= 1 << (byte & 63)
                    hit = (tuple(words), res)
            self._neutral[key] = hit
        return hit

    def canonical(self, cid: int, h: int) -> int:
        """The branch that keys ``cid``'s walk below a trie node whose tokens are at most ``h``
        bytes longer: the same pending conditions, the lexer state replaced by its class
        representative (:class:`BoundedClasses`); ``cid`` itself without classes."""
        key = cid * self.max_height + h
        hit = self._canon.get(key)
        if hit is None:
            lex, conds = self._cfgs[cid]
            hit = cid
            if self.classes is not None and lex >= 0:
                r = self.classes.rep(lex, h)
                if r != lex:
                    hit = self._cfg_id((r, conds))
            self._canon[key] = hit
        return hit

    def walk(self, cfg0: tuple[int, tuple[int, ...]]) -> int:
        """The DAG node (-1: nothing) denoting the outcomes of every token scanned from branch
        ``cfg0`` (memoized per (trie node, branch); the loop is native:
        ``glrmask_ext.tdwa_walk.Walker``). Lexer states some token ends in join ``end_states``."""
        res = self._walker.walk_from(*cfg0)
        self.end_states.update(self._walker.end_states(len(self.end_states)))
        return res

    # ---------------------------------------------------------------- condition seeds
    def fail_seed(self, cond: int) -> tuple[list[int], set[int]]:
        """(intervals of tokens that drive ``cond`` to FALSE, conditions left pending at token ends)."""
        if self.native:
            ivs, pending = self._walker.fail_seed(cond)
            return ivs, set(pending)
        lexer = self.lexer
        TRUE, FALSE = lexer.TRUE, lexer.FALSE
        trie = self.trie
        cp, cb, cn = trie.child_ptr.tolist(), trie.child_byte.tolist(), trie.child_node.tolist()
        sub_lo, sub_hi, node_internal = (trie.node_subtree_lo.tolist(), trie.node_subtree_hi.tolist(),
                                         trie.node_internal.tolist())
        out: list[int] = []
        pending: set[int] = set()
        stack = [(cn[j], cb[j], cond) for j in range(cp[1] - 1, cp[0] - 1, -1)]
        while stack:
            node, byte, c = stack.pop()
            c2 = lexer.cond_step(c, byte)
            if c2 == FALSE:
                lo, hi = sub_lo[node], sub_hi[node]
                if out and out[-1] == lo:
                    out[-1] = hi
                else:
                    out.extend((lo, hi))
                continue
            if c2 == TRUE:
                continue
            if node_internal[node] >= 0:
                pending.add(c2)
            stack.extend((cn[j], cb[j], c2) for j in range(cp[node + 1] - 1, cp[node] - 1, -1))
        return out, pending

    def _byte_closure(self) -> set[int]:
        """The lexer states at token boundaries when every single byte is a token: those reached
        from ``initial`` one byte at a time through surviving branches. (A branch's lexer state
        evolves byte by byte whatever the token boundaries; pending conditions only kill
        branches, and every boundary root starts without any, so a longer token's end state is
        also reached by its bytes as single tokens.) A branch survives a byte into ``q2`` iff
        ``q2`` is not DEAD and its futures hold an ignored or labelled terminal."""
        dfa = self.lexer.dfa
        trans = dfa.trans
        n = trans.shape[0]
        # alive: the futures bitset meets the ignored and labelled terminals (as _lane_alive)
        futures = np.ascontiguousarray(dfa.futures, dtype=np.uint64).reshape(n, -1)
        rel = np.zeros(futures.shape[1], dtype=np.uint64)
        for t in self.relevant:
            rel[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
        alive = (futures & rel).any(axis=1)
        seen = np.zeros(n, dtype=bool)
        frontier = np.array([self.lexer.initial], dtype=np.int64)
        while frontier.size:
            nxt = trans[frontier].reshape(-1)
            hit = np.zeros(n, dtype=bool)
            hit[nxt[nxt >= 0]] = True
            hit &= alive & ~seen
            seen |= hit
            frontier = np.flatnonzero(hit)
        return set(np.flatnonzero(seen).tolist())

    # ---------------------------------------------------------------- assembly
    def run(self, start_states: Iterable[int]) -> TerminalDWA:
        lexer = self.lexer
        order: list[int] = [lexer.initial]
        seen = {lexer.initial}
        for q in start_states:
            if q not in seen and q >= 0:
                seen.add(q)
                order.append(int(q))
        roots: list[int] = []
        if self.classes is not None:
            rest = sorted(self._byte_closure() - seen)
            if len(seen) + len(rest) > self.max_boundary_states:
                raise GrammarTooComplex(
                    f"terminal DWA (boundary states): more than {self.max_boundary_states} lexer "
                    "states at token boundaries (limit max_boundary_states)")
            order.extend(rest)
            seen.update(rest)
        i = 0
        while i < len(order):
            q = order[i]
            cfg = (_BOUNDARY, ()) if q == lexer.initial else (q, ())
            roots.append(self.walk(cfg))
            if (i & 31) == 31:  # (the walk checks every 1024 steps; a budget check reads the clock and memory)
                self._check_time("trie walk")
            if self.classes is not None:
                i += 1
                continue
            for end in sorted(self.end_states - seen):
                if len(seen) >= self.max_boundary_states:
                    raise GrammarTooComplex(
                        f"terminal DWA (boundary states): more than {self.max_boundary_states} lexer "
                        "states at token boundaries (limit max_boundary_states)")
                seen.add(end)
                order.append(end)
            i += 1
        t_walk = time.perf_counter() - self.t0
        memo_entries = self._walker.memo_size()
        flat_entries = self._walker.flat_entries()
        self._walker.clear_memo()

        # condition seeds, closed under "what the next tokens step a pending condition to"
        seeds: dict[int, int] = {}
        self.end_conds.update(self._walker.end_conds())
        work = sorted(self.end_conds)
        while work:
            c = work.pop()
            if c in seeds:
                continue
            ivs, pending = self.fail_seed(c)
            seeds[c] = self.dag.weight(ivs)
            work.extend(p for p in pending if p not in seeds)
            self._check_time("condition seeds")
        stats = {
            "boundary_states": len(order),
            "distinct_roots": len(set(roots)),
            "walk_steps": self._walker.steps,
            "memo_entries": memo_entries,
            "flat_entries": flat_entries,
            "walk_seconds": t_walk,
            "conds": len(seeds),
            "interned_nodes": self.dag.n_nodes(),
        }
        dwa = _finish(self.dag, order, roots, seeds, stats, self.trie.n_internal)
        dwa.stats["build_seconds"] = time.perf_counter() - self.t0
        return dwa


def _finish(dag, order: list[int], roots: list[int], seeds: dict[int, int], stats: dict,
            n_tokens: int) -> TerminalDWA:
    """Lay out the nodes reachable from the roots (``dag`` is the builder's DAG; see
    :meth:`glrmask_ext.tdwa_walk.Dag.layout` for the numbering)."""
    arrays = dag.layout(roots, seeds, n_tokens)
    arrays["boundary_states"] = np.asarray(order, dtype=np.int32)
    stats = dict(stats, nodes=int(arrays["final_weight"].shape[0]), edges=int(arrays["edge_label"].shape[0]),
                 open_finals=int(arrays["open_label"].shape[0]), weights=int(arrays["weight_ptr"].shape[0]) - 1)
    return TerminalDWA(arrays, n_tokens=n_tokens, stats=stats)
