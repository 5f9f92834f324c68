"""Conflict-preserving LR(1) parse table (DESIGN §4.4).

The table is the parser half of the compiler: the GLR recognizer, the stack-effect automata and the
Cython runtime all read it. It is built as follows:

1. Augment the grammar with ``$START -> start $END`` (rule 0). ``$END`` is an ordinary terminal id
   (the last one) that the runtime matches against the end-of-sequence token; shifting it is the
   *accept* transition, so "the sentence is complete" is just "``$END`` can be shifted".
2. Build canonical LR(1) item sets. Items are ``(core, lookahead-bitset)`` where a core
   (rule, dot) is interned as one int and a lookahead set is a Python int used as a bitset over
   terminal ids. Closure is cheap because the closure of every nonterminal is precomputed once with
   symbolic lookaheads (``spontaneous | inherited``), so closing a kernel is a table lookup per
   kernel item rather than a fixed-point iteration.
3. If canonical LR(1) exceeds ``max_states``, rebuild as LALR(1) (states keyed by cores only,
   lookaheads merged and propagated to a fixed point) and record that in ``notes``. The native
   builder counts the LR(0) states (the LALR(1) ones) first on large grammars, so that a canonical
   attempt known to exceed ``max_states`` is not made (``LRTable.build(lr0_first=...)``).
4. Merge states whose action/goto rows are identical up to the merge (Moore-style partition
   refinement, i.e. a bisimulation quotient). This never adds conflicts, unlike LALR merging.

Conflicts are *kept*: a cell is :class:`Action` ``(shift, reduces, accept)`` and a GLR driver explores
every alternative.

Two builders compute the same table, state for state: :mod:`glrmask_ext.lr_build` (the default; the
LR table is the largest part of the time to the first mask for a new JSON Schema, and the native
builder is 10-50x faster) and :class:`_Builder` in pure Python, kept as the readable reference and
the test oracle (``LRTable.build(..., native=False)``). Either way the sparse rows (see
:class:`LRTable`) are the table; the dense arrays and the :class:`Action` rows are derived from
them on first use.
"""
from __future__ import annotations

import threading

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import ArtifactError, GrammarError, GrammarTooComplex
from glrmask.grammar.ir import Grammar, Rule

END = "$END"
"""Reserved terminal name for the end of the sentence (matched by the EOS token later)."""

AUG_START = "$START"
"""Name of the augmented start nonterminal; rule 0 is ``$START -> start $END``."""


@dataclass(frozen=True)
class Action:
    """One cell of the action table.

    ``shift`` is the target state or ``None``; ``reduces`` are rule ids (sorted) to reduce by;
    ``accept`` is true on the ``$END`` column of the state where the sentence can be complete (the
    shift of ``$END`` then leads to the final state). Several alternatives at once are a conflict,
    which the GLR driver explores in parallel.
    """

    shift: int | None = None
    reduces: tuple[int, ...] = ()
    accept: bool = False

    def __bool__(self) -> bool:
        return self.shift is not None or bool(self.reduces)

    @property
    def is_conflict(self) -> bool:
        return (self.shift is not None) + len(self.reduces) > 1


EMPTY_ACTION = Action()


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(eq=False)
class LRTable:
    """An LR(1) automaton with all conflicting actions kept.

    Ids: terminal ids index ``terminals`` (``$END`` is the last); nonterminal ids index
    ``nonterminals`` (``$START`` is 0); rule ids index ``rules`` (rule 0 is the augmented rule).
    ``rule_lhs[r]`` is a nonterminal id and ``rule_len[r]`` the number of symbols popped.

    The table is stored as sparse rows (int32 arrays, CSR), its canonical form:

    * actions: the cells of state ``s`` that shift or reduce are entries
      ``e in range(act_ptr[s], act_ptr[s + 1])``, sorted strictly by terminal ``act_term[e]``;
      ``act_shift[e]`` is the shift target or -1 and the cell's reduce rules (sorted) are
      ``reduce_rules[act_roff[e]:act_roff[e + 1]]``. Every entry shifts or reduces (an empty cell
      has no entry), so ``reduce_rules`` lists the rules in (state, terminal) order;
    * gotos: ``e in range(goto_ptr[s], goto_ptr[s + 1])``, sorted strictly by nonterminal
      ``goto_nt[e]``, goes to ``goto_tgt[e]``.

    Why sparse: on large JSON Schemas a state has a handful of actions among thousands of
    terminals (0.1% of the cells), and writing dense tables of hundreds of MB was most of the time
    to the first mask. The dense views for consumers that index cells directly —
    ``shift_table[state, term]`` (target or -1), ``goto_table[state, nonterminal]`` (target or -1)
    and ``reduce_offsets`` (cell ``(s, t)`` has rules ``reduce_rules[reduce_offsets[k]:
    reduce_offsets[k + 1]]``, ``k = s * n_terminals + t``) — are computed from the rows on first
    access and cached, read-only (they must keep agreeing with the rows); the native runtime reads
    the rows themselves. A table of more than 2**31 cells has no dense action views
    (:class:`GrammarTooComplex` on access: their offsets are int32).

    ``ignored_terminals`` are the ids of the grammar's ``%ignore`` terminals: they have no actions
    (the runtime skips them; their stack effect is the identity). ``notes`` records decisions such
    as the LALR(1) fallback; ``method`` is ``"lr1"`` or ``"lalr1"``.
    """

    terminals: list[str]
    terminal_index: dict[str, int]
    nonterminals: list[str]
    nonterminal_index: dict[str, int]
    rules: list[Rule]
    rule_lhs: list[int]
    rule_len: list[int]
    start_state: int
    final_state: int
    act_ptr: np.ndarray
    act_term: np.ndarray
    act_shift: np.ndarray
    act_roff: np.ndarray
    reduce_rules: np.ndarray
    goto_ptr: np.ndarray
    goto_nt: np.ndarray
    goto_tgt: np.ndarray
    ignored_terminals: frozenset[int] = frozenset()
    notes: list[str] = field(default_factory=list)
    method: str = "lr1"
    rows: "_ArrayRows" = field(init=False, repr=False)
    _dense: dict = field(init=False, repr=False, default_factory=dict)
    _dense_lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.rows = _ArrayRows(self.n_terminals, self.act_ptr, self.act_term, self.act_shift, self.act_roff,
                               self.reduce_rules)

    def __getstate__(self) -> dict:
        """Pickled without what is derived (the row cache, the dense views) or per process (the
        views' lock); they are rebuilt on unpickling."""
        state = dict(self.__dict__)
        for name in ("rows", "_dense", "_dense_lock"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._dense = {}
        self._dense_lock = threading.Lock()
        self.__post_init__()

    # -- dense views -----------------------------------------------------------------------------
    @property
    def shift_table(self) -> np.ndarray:
        """``[n_states, n_terminals]`` int32: the shift target of each cell, or -1 (computed on
        first access)."""
        return self._dense_view("shift_table")

    @property
    def goto_table(self) -> np.ndarray:
        """``[n_states, n_nonterminals]`` int32: the goto target of each cell, or -1."""
        return self._dense_view("goto_table")

    @property
    def reduce_offsets(self) -> np.ndarray:
        """``[n_states * n_terminals + 1]`` int32: the CSR over dense cells into ``reduce_rules``."""
        return self._dense_view("reduce_offsets")

    @property
    def dense_views_nbytes(self) -> int:
        """Bytes held by the dense views computed so far (0 until a consumer asks for one): what
        a dynamic mask must keep at 0, since writing them is what the sparse form saves."""
        return sum(x.nbytes for x in list(self._dense.values()))

    def _dense_view(self, name: str) -> np.ndarray:
        x = self._dense.get(name)
        if x is None:
            with self._dense_lock:
                x = self._dense.get(name)
                if x is None:
                    x = _densify(self, name)
                    x.setflags(write=False)
                    self._dense[name] = x
        return x

    # -- queries ---------------------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self.act_ptr) - 1

    @property
    def n_terminals(self) -> int:
        return len(self.terminals)

    @property
    def end_id(self) -> int:
        return self.terminal_index[END]

    def action(self, state: int, term_id: int) -> Action:
        return self.rows[state][term_id]

    def goto(self, state: int, nonterminal: int | str) -> int | None:
        nt = self.nonterminal_index[nonterminal] if isinstance(nonterminal, str) else nonterminal
        if not 0 <= nt < len(self.nonterminals):
            raise IndexError(f"nonterminal id {nt} out of range")
        lo, hi = int(self.goto_ptr[state]), int(self.goto_ptr[state + 1])
        i = lo + int(np.searchsorted(self.goto_nt[lo:hi], nt))
        return int(self.goto_tgt[i]) if i < hi and self.goto_nt[i] == nt else None

    def conflicts(self) -> list[tuple[int, int, Action]]:
        """Every ``(state, term_id, action)`` cell holding more than one alternative."""
        return [
            (s, t, a)
            for s, row in enumerate(self.rows)
            for t, a in enumerate(row)
            if a.is_conflict
        ]

    # -- (de)serialization -----------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for an artifact (no pickle): the sparse rows as they are, and the names,
        rules and bookkeeping as a ``uint8`` JSON blob ``lr_meta``."""
        from glrmask.json_blob import encode_json_blob

        meta = {
            "terminals": list(self.terminals),
            "nonterminals": list(self.nonterminals),
            "rules": [[r.lhs, list(r.rhs)] for r in self.rules],
            "start_state": int(self.start_state),
            "final_state": int(self.final_state),
            "ignored_terminals": sorted(int(t) for t in self.ignored_terminals),
            "notes": list(self.notes),
            "method": self.method,
        }
        out = {"lr_meta": encode_json_blob(meta)}
        for name in _LR_ARRAYS[1:]:
            out[name] = np.ascontiguousarray(getattr(self, name), dtype=np.int32)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], *, prefix: str = "") -> "LRTable":
        """Rebuild a table from :meth:`to_arrays` (keys optionally prefixed). Checks names, shapes,
        id ranges and the sorted rows (:func:`check_sparse_rows`), raising :class:`ArtifactError`,
        so the GLR driver and compiled consumers never index out of range."""
        return _table_from_arrays(arrays, prefix)

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        grammar: Grammar,
        *,
        max_states: int = 20_000,
        max_lalr_states: int = 200_000,
        merge: bool = True,
        check: bool = True,
        native: bool = True,
        lr0_first: Optional[bool] = None,
    ) -> "LRTable":
        """Build the table for a normalized grammar.

        ``check_normalized`` runs first unless ``check=False`` (the GLR driver relies on the
        post-condition for termination). Canonical LR(1) is tried with ``max_states`` states; beyond
        that LALR(1) is used (bounded by ``max_lalr_states``, else :class:`GrammarTooComplex`).
        ``native=False`` runs the Python reference builder (same table, slower).

        ``lr0_first`` (native only) chooses the order of work, never the table
        (``tests/test_lr_build_order.py``): ``True`` first builds the LR(0) automaton, whose states
        are the LALR(1) ones, and when it has more than ``max_states`` states does not attempt
        canonical LR(1) (which has at least as many); ``None`` (the default) does so only for
        grammars large enough for that to be likely, else tries canonical LR(1) first. Either
        way the LALR(1) fallback computes its lookaheads on the LR(0) automaton by propagation.
        ``False`` is the plain sequence, the reference: canonical LR(1) closing every state, then
        LALR(1) explored from scratch.
        """
        if check:
            from glrmask.grammar.normalize import check_normalized

            check_normalized(grammar)
        if native:
            return _native_build(_Symbols(grammar, native=True), max_states, max_lalr_states, merge, lr0_first)
        return _Builder(grammar).build(max_states, max_lalr_states, merge)


class _Symbols:
    """The numbering both builders share: terminal ids (the grammar's, then ``$END``), nonterminal
    ids (``$START`` first), rule ids (the augmented rule 0 first) and each right-hand side as
    symbol codes (a terminal id, or ``T`` + a nonterminal id). Raises :class:`GrammarError` for
    reserved names, a start symbol without rules and unknown symbols.

    The nonterminals and right-hand sides are numbered in Python (``rhs_flat``, a list: the
    reference builder's input) or, with ``native=True``, by
    :func:`glrmask_ext.lr_build.encode_rules` straight into the int32 arrays
    :class:`~glrmask_ext.lr_build.Automaton` takes (``rule_lhs_arr``, ``rhs_off``, ``rhs``): the
    same numbers (``tests/test_lr_numbering.py``) without a Python int list per symbol, 2 ms
    less on a 10,000-rule JSON Schema. The errors are checked in the same order either way."""

    def __init__(self, grammar: Grammar, native: bool = False) -> None:
        if END in grammar.terminals or AUG_START in grammar.terminals:
            raise GrammarError(f"terminal names {END!r} and {AUG_START!r} are reserved")
        self.grammar = grammar
        self.terminals = [*grammar.terminals, END]
        self.terminal_index = {t: i for i, t in enumerate(self.terminals)}
        self.rules = [Rule(AUG_START, (grammar.start, END))] + list(grammar.rules)
        T = len(self.terminals)
        self.T = T
        unknown = None
        if native:
            from glrmask_ext.lr_build import encode_rules

            (self.nonterminals, self.nonterminal_index, self.rule_lhs_arr, self.rhs_off, self.rhs,
             unknown) = encode_rules(self.rules, self.terminal_index)
            self.rule_lhs: list[int] = self.rule_lhs_arr.tolist()
            self.rule_len: list[int] = np.diff(self.rhs_off).tolist()
        else:
            self.nonterminals = [AUG_START] + [n for n in grammar.nonterminals if n != AUG_START]
            self.nonterminal_index = {n: i for i, n in enumerate(self.nonterminals)}
        if grammar.start not in self.nonterminal_index:
            raise GrammarError(f"start symbol {grammar.start!r} has no rules")
        if not native:
            codes = dict(self.terminal_index)
            codes.update((n, T + i) for i, n in enumerate(self.nonterminals) if n not in codes)
            self.rule_lhs = [self.nonterminal_index[r.lhs] for r in self.rules]
            self.rule_len = [len(r.rhs) for r in self.rules]
            try:  # every right-hand side, concatenated in rule order (one comprehension: ~2x faster)
                self.rhs_flat: list[int] = [codes[x] for r in self.rules for x in r.rhs]
            except KeyError as e:
                unknown = e.args[0]
        if unknown is not None:
            raise GrammarError(f"symbol {unknown!r} is neither a terminal nor a nonterminal with rules")


class _Builder(_Symbols):
    """The Python reference builder: cores, FIRST sets and precomputed closures for one grammar
    (:func:`_native_build` computes the same table natively)."""

    def __init__(self, grammar: Grammar) -> None:
        super().__init__(grammar)
        T = self.T
        rhs_codes: list[list[int]] = []
        k = 0
        for n in self.rule_len:
            rhs_codes.append(self.rhs_flat[k:k + n])
            k += n
        nts = self.nonterminals
        self.rules_of: list[list[int]] = [[] for _ in nts]
        for i, r in enumerate(self.rules):
            self.rules_of[self.rule_lhs[i]].append(i)
        # cores: one int per (rule, dot)
        self.rule_off: list[int] = []
        core_rule: list[int] = []
        core_next: list[int] = []  # symbol code after the dot, -1 at the end
        for i, codes in enumerate(rhs_codes):
            self.rule_off.append(len(core_rule))
            for d in range(len(codes) + 1):
                core_rule.append(i)
                core_next.append(codes[d] if d < len(codes) else -1)
        self.core_rule = core_rule
        self.core_next = core_next
        self._first_sets(rhs_codes)
        # FIRST/nullable of the suffix after the symbol following the dot, per core
        n_cores = len(core_rule)
        self.beta_first = [0] * n_cores
        self.beta_nullable = [True] * n_cores
        for i, codes in enumerate(rhs_codes):
            off = self.rule_off[i]
            f, nul = 0, True
            # walk right to left; core off+d has next symbol codes[d], beta = codes[d+1:]
            for d in range(len(codes) - 1, -1, -1):
                self.beta_first[off + d] = f
                self.beta_nullable[off + d] = nul
                c = codes[d]
                if c < T:
                    f, nul = 1 << c, False
                else:
                    n = c - T
                    f = self.first[n] | (f if self.nullable[n] else 0)
                    nul = nul and self.nullable[n]
        self._closures()

    def _first_sets(self, rhs_codes: list[list[int]]) -> None:
        T = self.T
        n_nt = len(self.nonterminals)
        nullable = [False] * n_nt
        first = [0] * n_nt
        changed = True
        budget = current_budget()
        while changed:
            budget.check("LR table (FIRST sets)")
            changed = False
            for i, codes in enumerate(rhs_codes):
                a = self.rule_lhs[i]
                f = first[a]
                all_null = True
                for c in codes:
                    if c < T:
                        f |= 1 << c
                        all_null = False
                        break
                    n = c - T
                    f |= first[n]
                    if not nullable[n]:
                        all_null = False
                        break
                if f != first[a]:
                    first[a] = f
                    changed = True
                if all_null and not nullable[a]:
                    nullable[a] = True
                    changed = True
        self.first = first
        self.nullable = nullable

    def _closures(self) -> None:
        """Set up the closure table ``pre``, filled on first use by :meth:`_pre_of`: only the
        nonterminals that follow a dot in some kernel need one, and eager tables would cost
        ``n²/2`` items for a chain of ``n`` unit rules (each nonterminal's closure holds the whole
        chain below it) where the automaton itself needs ``n``."""
        self.pre: list[Optional[list[tuple[int, int, bool]]]] = [None] * len(self.nonterminals)
        self._pre_total = 0
        self._budget = current_budget()
        self._max_pre_items = self._budget.size_limit("lr", "max_closure_items")

    def _pre_of(self, b: int) -> list[tuple[int, int, bool]]:
        """pre[B] = closure items of ``B`` as ``(core, spontaneous_la, inherits)``: the item's
        lookahead is ``spontaneous_la | (L if inherits)`` where ``L`` is the lookahead of ``B``."""
        T = self.T
        self._budget.check("LR table (closures)")
        items: dict[int, list] = {}
        work: deque[int] = deque()
        for r in self.rules_of[b]:
            c = self.rule_off[r]
            items[c] = [0, True]
            work.append(c)
        while work:
            c = work.popleft()
            nxt = self.core_next[c]
            if nxt < T:
                continue
            m, inh = items[c]
            add_m = self.beta_first[c] | (m if self.beta_nullable[c] else 0)
            add_inh = inh and self.beta_nullable[c]
            for r in self.rules_of[nxt - T]:
                c2 = self.rule_off[r]
                cur = items.get(c2)
                if cur is None:
                    items[c2] = [add_m, add_inh]
                    work.append(c2)
                else:
                    nm, ni = cur[0] | add_m, cur[1] or add_inh
                    if nm != cur[0] or ni != cur[1]:
                        cur[0], cur[1] = nm, ni
                        work.append(c2)
        self._pre_total += len(items)
        if self._pre_total > self._max_pre_items:
            raise GrammarTooComplex(
                f"LR table (closures): more than {self._max_pre_items} closure items for "
                f"{sum(p is not None for p in self.pre) + 1} nonterminals (limit lr.max_closure_items)")
        pre = self.pre[b] = [(c, m, inh) for c, (m, inh) in items.items()]
        return pre

    def closure(self, kernel: dict[int, int]) -> dict[int, int]:
        T = self.T
        items = dict(kernel)
        for c, la in kernel.items():
            nxt = self.core_next[c]
            if nxt < T:
                continue
            L = self.beta_first[c] | (la if self.beta_nullable[c] else 0)
            pre = self.pre[nxt - T]
            if pre is None:
                pre = self._pre_of(nxt - T)
            for c2, sm, inh in pre:
                items[c2] = items.get(c2, 0) | sm | (L if inh else 0)
        return items

    def successors(self, items: dict[int, int]) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        for c, la in items.items():
            sym = self.core_next[c]
            if sym >= 0:
                out.setdefault(sym, {})[c + 1] = la
        return out

    def explore(self, lalr: bool, limit: int) -> list[dict[int, int]] | None:
        """Item-set kernels reachable from the start. Canonical mode keys states by
        ``(core, la)`` pairs; LALR mode keys by cores and merges lookaheads to a fixed point.
        Returns None when more than ``limit`` states would be needed."""
        start = {self.rule_off[0]: 0}
        kernels: list[dict[int, int]] = [start]
        index: dict[frozenset, int] = {self._key(start, lalr): 0}
        work: deque[int] = deque([0])
        queued = {0}
        budget = current_budget()
        while work:
            budget.check("LR table (item sets)")  # every step: one closure can be large
            s = work.popleft()
            queued.discard(s)
            for kern in self.successors(self.closure(kernels[s])).values():
                key = self._key(kern, lalr)
                t = index.get(key)
                if t is None:
                    if len(kernels) >= limit:
                        return None
                    t = len(kernels)
                    index[key] = t
                    kernels.append(dict(kern))
                    work.append(t)
                    queued.add(t)
                elif lalr:
                    tk = kernels[t]
                    grew = False
                    for c, la in kern.items():
                        if la & ~tk[c]:
                            tk[c] |= la
                            grew = True
                    if grew and t not in queued:
                        work.append(t)
                        queued.add(t)
        return kernels

    @staticmethod
    def _key(kernel: dict[int, int], lalr: bool) -> frozenset:
        return frozenset(kernel) if lalr else frozenset(kernel.items())

    def build(self, max_states: int, max_lalr_states: int, merge: bool) -> LRTable:
        notes: list[str] = []
        method = "lr1"
        kernels = self.explore(False, max_states)
        if kernels is None:
            notes.append(
                f"canonical LR(1) exceeded max_states={max_states}; fell back to LALR(1)"
            )
            method = "lalr1"
            kernels = self.explore(True, max_lalr_states)
            if kernels is None:
                raise GrammarTooComplex(
                    f"LR table: LALR(1) automaton exceeds max_lalr_states={max_lalr_states}"
                )
        T = self.T
        lalr = method == "lalr1"
        index = {self._key(k, lalr): i for i, k in enumerate(kernels)}
        n = len(kernels)
        # sparse rows: trans[s] maps a symbol code (terminal id, or T + nonterminal id) to a target
        trans: list[dict[int, int]] = []
        reduces: list[dict[int, list[int]]] = []
        budget = current_budget()
        for kern in kernels:
            budget.check("LR table (rows)")
            items = self.closure(kern)
            trans.append(
                {sym: index[self._key(succ, lalr)] for sym, succ in self.successors(items).items()}
            )
            red: dict[int, list[int]] = {}
            for c, la in items.items():
                if self.core_next[c] == -1:
                    r = self.core_rule[c]
                    if r == 0:
                        continue  # $START -> start $END . : the final state, nothing to reduce
                    for t in _bits(la):
                        red.setdefault(t, []).append(r)
            reduces.append({t: sorted(set(rs)) for t, rs in red.items()})
        # the final state is the target of the (unique) $END shift
        end = T - 1
        finals = {row[end] for row in trans if end in row}
        if len(finals) != 1:
            raise GrammarError("the grammar derives no sentence")
        final = finals.pop()
        start = 0
        if merge:
            trans, reduces, start, final = _minimize(trans, reduces, start, final)
            if len(trans) != n:
                notes.append(f"merged {n} states into {len(trans)} with identical rows")
        return _assemble(self, trans, reduces, start, final, notes, method)


def _refine_rows(trans: list[dict[int, int]], syms: list[list[int]], cls: list[int], n_cls: int) -> list[int]:
    """The coarsest refinement of ``cls`` in which members of a class go to the same classes on
    the same symbols: Moore's refinement, incrementally (like the lexer's, :func:`glrmask.lexer.dfa._refine`).

    A chain of ``n`` states (``"a"{100000}``) needs ``n`` rounds; after the first, only the
    predecessors of states that changed class are regrouped (a class's other members keep the row
    they shared), so each round costs what changed, not the whole table. Within a class, each
    distinct candidate row becomes a new class, except that the largest group keeps the class's id
    when every member is a candidate."""
    budget = current_budget()
    n = len(trans)
    cls = list(cls)
    size = [0] * n_cls
    for c in cls:
        size[c] += 1
    preds: list[list[int]] = [[] for _ in range(n)]
    for src, row in enumerate(trans):
        for tgt in row.values():
            preds[tgt].append(src)
    cand: list[int] = list(range(n))
    rounds = 0
    while cand:
        rounds += 1
        budget.tick("LR table (merging identical rows)", rounds)
        groups: dict[tuple, list[int]] = {}
        for s in cand:
            row = trans[s]
            groups.setdefault((cls[s], tuple([cls[row[x]] for x in syms[s]])), []).append(s)
        by_block: dict[int, list[list[int]]] = {}
        for key, members in groups.items():
            by_block.setdefault(key[0], []).append(members)
        changed: list[int] = []
        for block, parts in by_block.items():
            if sum(len(p) for p in parts) == size[block]:
                if len(parts) == 1:
                    continue
                keep = max(range(len(parts)), key=lambda i: len(parts[i]))
            else:
                keep = -1
            for i, part in enumerate(parts):
                if i == keep:
                    continue
                new = len(size)
                size.append(len(part))
                size[block] -= len(part)
                for s in part:
                    cls[s] = new
                changed.extend(part)
        if not changed:
            break
        nxt: set[int] = set()
        for s in changed:
            nxt.update(preds[s])
        cand = sorted(nxt)
    return cls


def _minimize(trans, reduces, start, final):
    """Bisimulation quotient: states with identical rows (targets compared up to the partition)
    are merged; states are renumbered in BFS order from the start so the start state is 0."""
    n = len(trans)
    syms = [sorted(row) for row in trans]
    sig0: dict[tuple, int] = {}
    cls = []
    for s in range(n):
        key = (tuple((t, tuple(rs)) for t, rs in sorted(reduces[s].items())), tuple(syms[s]))
        cls.append(sig0.setdefault(key, len(sig0)))
    cls = _refine_rows(trans, syms, cls, len(sig0))
    rep: dict[int, int] = {}
    for s in range(n):
        rep.setdefault(cls[s], s)
    order: dict[int, int] = {cls[start]: 0}
    queue = deque([cls[start]])
    while queue:
        s = rep[queue.popleft()]
        for x in syms[s]:
            c = cls[trans[s][x]]
            if c not in order:
                order[c] = len(order)
                queue.append(c)
    ntrans: list[dict[int, int]] = [{} for _ in order]
    nred: list[dict[int, list[int]]] = [{} for _ in order]
    for c, i in order.items():
        s = rep[c]
        ntrans[i] = {x: order[cls[tgt]] for x, tgt in trans[s].items()}
        nred[i] = reduces[s]
    return ntrans, nred, 0, order[cls[final]]


def _assemble(b: _Builder, trans, reduces, start, final, notes, method) -> LRTable:
    """The sparse rows of the Python builder's transitions and reduce lists (the native builder
    exports the same arrays, :meth:`glrmask_ext.lr_build.Automaton.tables`)."""
    T = b.T
    act_ptr, act_term, act_shift, act_roff, flat = [0], [], [], [0], []
    goto_ptr, goto_nt, goto_tgt = [0], [], []
    for s in range(len(trans)):
        row, red = trans[s], reduces[s]
        for t in sorted({x for x in row if x < T} | set(red)):
            act_term.append(t)
            act_shift.append(row.get(t, -1))
            flat.extend(red.get(t, ()))
            act_roff.append(len(flat))
        act_ptr.append(len(act_term))
        for x in sorted(x for x in row if x >= T):
            goto_nt.append(x - T)
            goto_tgt.append(row[x])
        goto_ptr.append(len(goto_nt))
    arrays = [np.asarray(a, dtype=np.int32)
              for a in (act_ptr, act_term, act_shift, act_roff, flat, goto_ptr, goto_nt, goto_tgt)]
    return _table(b, start, final, arrays, notes, method)


def _table(b: _Symbols, start: int, final: int, arrays: list[np.ndarray], notes: list[str],
           method: str) -> LRTable:
    """The table of a builder's sparse arrays, in the order of :data:`_LR_ARRAYS` (after ``lr_meta``)."""
    return LRTable(
        b.terminals, b.terminal_index, b.nonterminals, b.nonterminal_index, b.rules, b.rule_lhs, b.rule_len,
        start, final, *arrays,
        ignored_terminals=frozenset(b.terminal_index[t] for t in b.grammar.ignore if t in b.terminal_index),
        notes=notes,
        method=method,
    )


def _native_build(b: _Symbols, max_states: int, max_lalr_states: int, merge: bool,
                  lr0_first: Optional[bool] = None) -> LRTable:
    """:meth:`_Builder.build` in :mod:`glrmask_ext.lr_build`: the same exploration order, state
    numbering, notes and errors, 10-100x faster (the Python builder is the test oracle).

    ``lr0_first``: see :meth:`LRTable.build`."""
    from glrmask_ext.lr_build import Automaton

    budget = current_budget()
    auto = Automaton(b.rule_lhs_arr, b.rhs_off, b.rhs, b.T, len(b.nonterminals),
                     budget.size_limit("lr", "max_closure_items"), budget.check)
    notes: list[str] = []
    method = "lr1"
    too_many_lalr = f"LR table: LALR(1) automaton exceeds max_lalr_states={max_lalr_states}"
    if lr0_first is not False and max_lalr_states >= max_states:
        # The LR(0) automaton has the LALR(1) states, and canonical LR(1) at least as many: past
        # max_states the canonical attempt would only be thrown away (on the largest JSON Schemas
        # it was a third of the build), and LALR(1) needs only the lookaheads. Counting first pays
        # where canonical LR(1) is likely not to fit; JSON Schema grammars have about 0.4-0.5 LR(0)
        # states per core (rule position), so grammars with fewer than 2 cores per allowed state
        # try canonical LR(1) first. Which comes first changes the cost, never the table.
        n_lr0 = -1
        if lr0_first or len(b.rhs) + len(b.rule_lhs_arr) >= 2 * max_states:
            n_lr0 = auto.explore_lr0(max_lalr_states)
            if n_lr0 < 0:
                raise GrammarTooComplex(too_many_lalr)
        if n_lr0 <= max_states and auto.explore(False, max_states):
            pass
        else:
            notes.append(f"canonical LR(1) exceeded max_states={max_states}; fell back to LALR(1)")
            method = "lalr1"
            if n_lr0 < 0 and auto.explore_lr0(max_lalr_states) < 0:
                raise GrammarTooComplex(too_many_lalr)
            auto.lalr_from_lr0()
    elif not auto.explore(False, max_states, False):
        notes.append(f"canonical LR(1) exceeded max_states={max_states}; fell back to LALR(1)")
        method = "lalr1"
        if not auto.explore(True, max_lalr_states):
            raise GrammarTooComplex(too_many_lalr)
    n = auto.n_states
    start, final, *arrays = auto.tables(merge)
    if final < 0:
        raise GrammarError("the grammar derives no sentence")
    if merge and len(arrays[0]) - 1 != n:
        notes.append(f"merged {n} states into {len(arrays[0]) - 1} with identical rows")
    return _table(b, start, final, arrays, notes, method)


_LR_ARRAYS = ("lr_meta", "act_ptr", "act_term", "act_shift", "act_roff", "reduce_rules", "goto_ptr", "goto_nt",
              "goto_tgt")
"""The arrays of :meth:`LRTable.to_arrays`; after ``lr_meta``, the order of the sparse fields."""


def _densify(t: LRTable, name: str) -> np.ndarray:
    """One dense view of ``t``'s sparse rows (see :class:`LRTable`)."""
    n, T, n_nt = t.n_states, t.n_terminals, len(t.nonterminals)
    if name == "goto_table":
        out = np.full((n, n_nt), -1, dtype=np.int32)
        out[np.repeat(np.arange(n), np.diff(t.goto_ptr)), t.goto_nt] = t.goto_tgt
        return out
    if n * T + 1 > 0x7FFFFFFF:
        raise GrammarTooComplex("LR table: the dense action table exceeds 2**31 cells (int32 offsets)")
    cell = np.repeat(np.arange(n, dtype=np.int64) * T, np.diff(t.act_ptr)) + t.act_term
    if name == "shift_table":
        out = np.full(n * T, -1, dtype=np.int32)
        out[cell] = t.act_shift
        return out.reshape(n, T)
    counts = np.zeros(n * T + 1, dtype=np.int32)
    counts[cell + 1] = np.diff(t.act_roff)
    return np.cumsum(counts, dtype=np.int32)


class _ArrayRows:
    """The action rows of a table, built row by row from the sparse rows on first use: the native
    runtime reads the arrays themselves, so a compiled or loaded table does not pay for Python rows
    (``Action`` objects per cell) unless the reference recognizer or a compile stage asks.

    The built rows are a dict keyed by state rather than a list of ``None`` per state: an empty
    dict is untracked by the cyclic collector, so a table whose rows are never asked for (every
    natively served mask) adds nothing for full collections to walk."""

    def __init__(self, T: int, ptr: np.ndarray, term: np.ndarray, shift: np.ndarray, roff: np.ndarray,
                 flat: np.ndarray) -> None:
        self._T = T
        self._n = len(ptr) - 1
        self._ptr, self._term, self._shift, self._roff, self._flat = ptr, term, shift, roff, flat
        self._rows: dict[int, list] = {}
        self._interned: dict[Action, Action] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return (self[s] for s in range(self._n))

    def __eq__(self, other) -> bool:
        return isinstance(other, (list, _ArrayRows)) and len(self) == len(other) and all(
            a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, s: int) -> list:
        row = self._rows.get(s)
        if row is None:
            s = int(s)
            if s < 0:  # a list's indexing, as the rows were once stored
                s += self._n
            if not 0 <= s < self._n:
                raise IndexError(f"LR state {s} out of range")
            with self._lock:
                row = self._rows.get(s)
                if row is None:
                    row = self._rows[s] = self._build(s)
        return row

    def _build(self, s: int) -> list:
        # accept = shift on the $END column
        end = self._T - 1
        lo, hi = int(self._ptr[s]), int(self._ptr[s + 1])
        terms = self._term[lo:hi].tolist()
        shifts = self._shift[lo:hi].tolist()
        roff = self._roff[lo:hi + 1].tolist()
        flat = self._flat[roff[0]:roff[-1]].tolist()
        base = roff[0]
        row = [EMPTY_ACTION] * self._T
        for i, t in enumerate(terms):
            tgt = shifts[i]
            a = Action(None if tgt < 0 else tgt, tuple(flat[roff[i] - base:roff[i + 1] - base]), t == end and tgt >= 0)
            row[t] = self._interned.setdefault(a, a)
        return row


def check_sparse_rows(arrays: Mapping[str, np.ndarray], n_terminals: int, n_nonterminals: int, n_rules: int,
                      bad) -> int:
    """Validate the sparse rows of an LR table (``arrays`` keyed as :data:`_LR_ARRAYS`, int32, 1-d)
    with vectorized checks, raising ``bad(what)``: pointers start at 0, never decrease and end at
    their arrays' lengths; rows are sorted strictly by terminal / nonterminal; every action entry
    shifts or reduces; targets, terminal, nonterminal and rule ids are in range. Returns the number
    of states. Why this much: the native runtime binary-searches the rows and follows targets
    without bounds checks, so an artifact (untrusted) must be proven well-formed first."""
    ptr, term, shift, roff = arrays["act_ptr"], arrays["act_term"], arrays["act_shift"], arrays["act_roff"]
    flat, gptr, gnt, gtgt = arrays["reduce_rules"], arrays["goto_ptr"], arrays["goto_nt"], arrays["goto_tgt"]
    n = len(ptr) - 1
    if n < 1 or len(gptr) != n + 1:
        raise bad("act_ptr/goto_ptr must have n_states + 1 >= 2 entries each")

    def csr(p: np.ndarray, n_items: int, name: str) -> None:
        if int(p[0]) != 0 or int(p[-1]) != n_items or bool((np.diff(p) < 0).any()):
            raise bad(f"{name} must be non-decreasing offsets from 0 to {n_items}")

    def in_range(x: np.ndarray, lo: int, hi: int, name: str) -> None:
        if x.size and (int(x.min()) < lo or int(x.max()) >= hi):
            raise bad(f"{name} has a value outside [{lo}, {hi})")

    def sorted_rows(p: np.ndarray, key: np.ndarray, name: str) -> None:
        if len(key) > 1:
            starts = np.zeros(len(key), dtype=bool)
            starts[p[:-1][p[:-1] < len(key)]] = True
            if bool((~starts[1:] & (key[1:] <= key[:-1])).any()):
                raise bad(f"{name} rows are not sorted strictly by key")

    if len(shift) != len(term) or len(roff) != len(term) + 1 or len(gtgt) != len(gnt):
        raise bad("act_term/act_shift/act_roff or goto_nt/goto_tgt lengths disagree")
    csr(ptr, len(term), "act_ptr")
    csr(roff, len(flat), "act_roff")
    csr(gptr, len(gnt), "goto_ptr")
    in_range(term, 0, n_terminals, "act_term")
    in_range(shift, -1, n, "act_shift (a shift target)")
    in_range(flat, 0, n_rules, "reduce_rules")
    in_range(gnt, 0, n_nonterminals, "goto_nt")
    in_range(gtgt, 0, n, "goto_tgt (a goto target)")
    sorted_rows(ptr, term, "act_term")
    sorted_rows(gptr, gnt, "goto_nt")
    if bool(((shift < 0) & (roff[1:] == roff[:-1])).any()):
        raise bad("an action entry neither shifts nor reduces")
    return n


def _table_from_arrays(arrays: Mapping[str, np.ndarray], prefix: str) -> LRTable:
    """See :meth:`LRTable.from_arrays`."""
    from glrmask.json_blob import decode_json_blob

    missing = [prefix + n for n in _LR_ARRAYS if prefix + n not in arrays]
    if missing:
        raise ArtifactError(f"LR table arrays missing: {', '.join(missing)}")

    def bad(what: str) -> ArtifactError:
        return ArtifactError(f"LR table arrays are inconsistent: {what}")

    def want(name: str) -> np.ndarray:
        x = np.asarray(arrays[prefix + name])
        if x.dtype != np.int32 or x.ndim != 1:
            raise ArtifactError(f"LR table array {prefix + name!r}: expected 1-d int32, got {x.ndim}-d {x.dtype}")
        return np.ascontiguousarray(x)

    meta = decode_json_blob(arrays[prefix + "lr_meta"], f"LR table array {prefix + 'lr_meta'!r}")
    sparse = {name: want(name) for name in _LR_ARRAYS[1:]}
    terminals = _str_list(meta, "terminals", bad)
    nonterminals = _str_list(meta, "nonterminals", bad)
    raw_rules = _field(meta, "rules", list, bad)
    rules: list[Rule] = []
    for r in raw_rules:
        if (not isinstance(r, list) or len(r) != 2 or not isinstance(r[0], str)
                or not isinstance(r[1], list) or not all(isinstance(x, str) for x in r[1])):
            raise bad(f"malformed rule {r!r}")
        rules.append(Rule(r[0], tuple(r[1])))
    start = _field(meta, "start_state", int, bad)
    final = _field(meta, "final_state", int, bad)
    ignored = _field(meta, "ignored_terminals", list, bad)
    notes = _str_list(meta, "notes", bad)
    method = _field(meta, "method", str, bad)

    T, n_nt = len(terminals), len(nonterminals)
    if len(set(terminals)) != T or len(set(nonterminals)) != n_nt:
        raise bad("duplicate terminal or nonterminal names")
    if not terminals or terminals[-1] != END or not nonterminals or nonterminals[0] != AUG_START:
        raise bad(f"terminals must end with {END!r} and nonterminals start with {AUG_START!r}")
    terminal_index = {t: i for i, t in enumerate(terminals)}
    nonterminal_index = {n: i for i, n in enumerate(nonterminals)}
    for r in rules:
        if r.lhs not in nonterminal_index or any(
                x not in terminal_index and x not in nonterminal_index for x in r.rhs):
            raise bad(f"rule {r} names an unknown symbol")
    n = check_sparse_rows(sparse, T, n_nt, len(rules), bad)
    if not (0 <= start < n and 0 <= final < n):
        raise bad("start or final state out of range")
    if not all(isinstance(t, int) and 0 <= t < T for t in ignored):
        raise bad("ignored terminal ids out of range")

    return LRTable(
        terminals, terminal_index, nonterminals, nonterminal_index, rules,
        [nonterminal_index[r.lhs] for r in rules], [len(r.rhs) for r in rules], start, final,
        *(sparse[name] for name in _LR_ARRAYS[1:]),
        ignored_terminals=frozenset(ignored),
        notes=notes,
        method=method,
    )


def _field(meta: Any, key: str, typ: type, bad) -> Any:
    if not isinstance(meta, dict) or key not in meta:
        raise bad(f"lr_meta lacks {key!r}")
    v = meta[key]
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise bad(f"lr_meta[{key!r}] must be {typ.__name__}")
    return v


def _str_list(meta: Any, key: str, bad) -> list[str]:
    v = _field(meta, key, list, bad)
    if not all(isinstance(x, str) for x in v):
        raise bad(f"lr_meta[{key!r}] must be a list of strings")
    return list(v)
