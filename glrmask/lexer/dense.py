"""A lexer over the dense, minimized export, with the lazy lexer's interface (DESIGN §4.3, §6).

Why: the lazy :class:`~glrmask.lexer.Lexer` numbers its states and conditions in the order it
happens to meet them, so nothing compiled against it (Terminal DWA roots, condition seeds) can be
saved and reloaded. :class:`DenseLexer` wraps a :class:`~glrmask.lexer.LexerDFA`, whose ids are
canonical, and offers the part of the lexer interface the static mode uses — the recognizer with
``restrict_lexer=False``, the Terminal DWA builder and the static masker's condition scans:
``DEAD``/``TRUE``/``FALSE``, ``initial``, ``terminal_names``, ``step``, ``futures``, ``cond_step``,
``cond_at_end``, ``cond_satisfiable``, ``n_states``, ``n_conds``. Restricted lexer states are not
part of the export: :meth:`DenseLexer.restrict` raises.

Ids are the DFA's minimized ids, not the lazy lexer's (use ``dfa.state_id`` / ``dfa.cond_id`` to
translate). Equivalent lazy states or conditions share one id, so everything observable —
events, futures, condition verdicts — is the same as the lazy lexer's.

Speed: ``step`` and ``cond_step`` read Python lists built per state (per condition) from the
arrays on first use, so a hot loop is two list indexings, as with the lazy lexer's memo dicts.

Serialization: :meth:`arrays` is :meth:`LexerDFA.arrays` plus ``terminal_names``, the names as a
``uint8`` UTF-8 JSON list (:mod:`glrmask.json_blob`); :meth:`from_arrays` reads them back (or
takes ``terminal_names=`` when the arrays come from a bare :meth:`LexerDFA.arrays`).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from glrmask.errors import ArtifactError, GlrmaskError
from glrmask.json_blob import decode_json_blob, encode_json_blob

from .dfa import DEFAULT_MAX_STATES, LexerDFA
from .lexer import Lexer, scan_with

__all__ = ["DenseLexer", "RestrictionUnsupported"]

Event = tuple[int, int]
_NO_EVENTS: tuple[Event, ...] = ()
_NAMES_KEY = "terminal_names"


class RestrictionUnsupported(GlrmaskError):
    """A dense lexer has no restricted states; use it with ``restrict_lexer=False``."""


class DenseLexer:
    """The lexer interface of :class:`~glrmask.lexer.Lexer` over a :class:`LexerDFA`.

    States are ints in ``range(n_states)`` (``DEAD`` = -1); conditions are ints in
    ``range(n_conds + 2)`` with ``TRUE`` = 0 and ``FALSE`` = 1, as in the lazy lexer.
    """

    DEAD: int = Lexer.DEAD
    TRUE: int = Lexer.TRUE
    FALSE: int = Lexer.FALSE

    def __init__(self, dfa: LexerDFA, terminal_names: Sequence[str]):
        names = [str(n) for n in terminal_names]
        if len(names) != dfa.n_terminals:
            raise ArtifactError(
                f"dense lexer: {len(names)} terminal names for a DFA over {dfa.n_terminals} terminals"
            )
        if len(set(names)) != len(names):
            raise ArtifactError("dense lexer: duplicate terminal names")
        self.dfa = dfa
        self.terminal_names: list[str] = names
        self.initial: int = int(dfa.initial)
        n, m = dfa.n_states, dfa.n_conds
        self._rows: list[Optional[list[tuple[int, tuple[Event, ...]]]]] = [None] * n
        self._cond_rows: list[Optional[list[int]]] = [None] * m
        self._futures: list[Optional[frozenset[int]]] = [None] * n
        self._at_end: list[bool] = [bool(x) for x in dfa.cond_at_end.tolist()]
        self._satisfiable: list[bool] = _satisfiable(dfa.cond_trans, dfa.cond_at_end).tolist()
        self._event_lists: dict[tuple[Event, ...], tuple[Event, ...]] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_lexer(cls, lexer: Lexer, *, max_states: int = DEFAULT_MAX_STATES, max_conds: int = 200_000,
                   max_seconds: Optional[float] = None,
                   max_transitions: Optional[int] = None) -> "DenseLexer":
        """Explore and minimize ``lexer`` (see :meth:`LexerDFA.explore`; the budgets raise
        :class:`~glrmask.errors.GrammarTooComplex`). ``max_transitions`` is the lazy lexer's
        memory limit, read through the compile budget (:mod:`glrmask.budget`); it is accepted here
        so that one ``limits["lexer"]`` dict serves both."""
        del max_transitions
        dfa = LexerDFA.explore(lexer, max_states=max_states, max_conds=max_conds, max_seconds=max_seconds)
        return cls(dfa, lexer.terminal_names)

    def arrays(self) -> dict[str, np.ndarray]:
        """The DFA's arrays plus ``terminal_names`` (a ``uint8`` JSON list of the names)."""
        out = dict(self.dfa.arrays())
        out[_NAMES_KEY] = encode_json_blob(self.terminal_names)
        return out

    @classmethod
    def from_arrays(
        cls,
        arrays: Mapping[str, np.ndarray],
        *,
        prefix: str = "",
        terminal_names: Optional[Sequence[str]] = None,
    ) -> "DenseLexer":
        """Rebuild from :meth:`arrays` (keys optionally prefixed). The names come from the stored
        ``terminal_names`` blob, else from ``terminal_names=``; when both are present they must
        agree. Raises :class:`ArtifactError` on missing or inconsistent data."""
        dfa = LexerDFA.from_arrays(arrays, prefix=prefix)
        stored = None
        if prefix + _NAMES_KEY in arrays:
            stored = decode_json_blob(arrays[prefix + _NAMES_KEY], f"dense lexer array {prefix + _NAMES_KEY!r}")
            if not isinstance(stored, list) or not all(isinstance(s, str) for s in stored):
                raise ArtifactError(f"dense lexer array {prefix + _NAMES_KEY!r} must hold a list of names")
        if stored is None and terminal_names is None:
            raise ArtifactError(
                f"dense lexer arrays hold no {prefix + _NAMES_KEY!r}; pass terminal_names="
            )
        if stored is not None and terminal_names is not None and list(terminal_names) != stored:
            raise ArtifactError("dense lexer: the stored terminal names differ from terminal_names=")
        return cls(dfa, stored if stored is not None else terminal_names)

    # ------------------------------------------------------------------ sizes
    @property
    def n_states(self) -> int:
        """Lexer states (DEAD not counted)."""
        return self.dfa.n_states

    @property
    def n_conds(self) -> int:
        """Pending conditions, TRUE and FALSE excluded (as :attr:`Lexer.n_conds`; the DFA's
        ``n_conds`` counts them)."""
        return self.dfa.n_conds - 2

    @property
    def n_terminals(self) -> int:
        return len(self.terminal_names)

    # ------------------------------------------------------------------ the lexer interface
    def step(self, state: int, byte: int) -> tuple[int, tuple[Event, ...]]:
        """Like :meth:`Lexer.step`: ``(next state or DEAD, events)``, events ``(terminal, cond)``
        in the lazy lexer's order (by terminal)."""
        if state < 0:
            return Lexer.DEAD, _NO_EVENTS
        row = self._rows[state]
        if row is None:
            row = self._build_row(state)
        return row[byte]

    def futures(self, state: int) -> frozenset[int]:
        """Like :meth:`Lexer.futures`: terminals that can still report a satisfiable event."""
        if state < 0:
            return frozenset()
        hit = self._futures[state]
        if hit is None:
            hit = self._futures[state] = self.dfa.futures_of(state)
        return hit

    def cond_step(self, cond: int, byte: int) -> int:
        """Like :meth:`Lexer.cond_step`: TRUE, FALSE or a pending condition."""
        if cond < 2:
            return cond
        row = self._cond_rows[cond]
        if row is None:
            row = self._cond_rows[cond] = self.dfa.cond_trans[cond].tolist()
        return row[byte]

    def cond_at_end(self, cond: int) -> bool:
        """Like :meth:`Lexer.cond_at_end`: the verdict if the document ends now."""
        return self._at_end[cond]

    def cond_satisfiable(self, cond: int) -> bool:
        """Like :meth:`Lexer.cond_satisfiable`: some byte suffix (possibly empty, then the end of
        the document) makes ``cond`` hold. Precomputed for every condition."""
        return self._satisfiable[cond]

    def restrict(self, state: int, terminals) -> int:
        """Not available: the export holds only unrestricted states (static mode never restricts)."""
        raise RestrictionUnsupported(
            "DenseLexer has no restricted lexer states; build the Recognizer with restrict_lexer=False"
        )

    def scan(self, state: int, data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
        """Like :meth:`Lexer.scan`: feed ``data``, collecting ``(end_offset, terminal, cond)``."""
        return scan_with(self.step, state, data)

    # ------------------------------------------------------------------ internals
    def _build_row(self, state: int) -> list[tuple[int, tuple[Event, ...]]]:
        dfa = self.dfa
        trans = dfa.trans[state].tolist()
        base = state * 256
        ptr = dfa.ev_ptr[base:base + 257].tolist()
        lo = ptr[0]
        terms = dfa.ev_term[lo:ptr[256]].tolist()
        conds = dfa.ev_cond[lo:ptr[256]].tolist()
        intern = self._event_lists
        row: list[tuple[int, tuple[Event, ...]]] = []
        for b in range(256):
            a, z = ptr[b] - lo, ptr[b + 1] - lo
            if a == z:
                row.append((trans[b], _NO_EVENTS))
                continue
            evs = tuple(zip(terms[a:z], conds[a:z]))
            evs = intern.setdefault(evs, evs)
            row.append((trans[b], evs))
        self._rows[state] = row
        return row

    def __repr__(self) -> str:
        return f"DenseLexer(terminals={self.n_terminals}, states={self.n_states}, conds={self.n_conds})"


def _satisfiable(cond_trans: np.ndarray, cond_at_end: np.ndarray) -> np.ndarray:
    """``bool[n_conds]``: condition ``c`` can reach, over some bytes, one that holds at the end
    (TRUE does, FALSE never does) — backward reachability over the condition automaton, by layers
    of predecessors."""
    m = cond_trans.shape[0]
    sat = np.asarray(cond_at_end, dtype=bool).copy()
    if m == 0:
        return sat
    src = np.repeat(np.arange(m, dtype=np.int64), cond_trans.shape[1])
    dst = cond_trans.reshape(-1).astype(np.int64)
    keep = src != dst
    pairs = _distinct(dst[keep] * m + src[keep])  # sorted by target, then source
    dst, src = pairs // m, pairs % m
    ptr = np.searchsorted(dst, np.arange(m + 1, dtype=np.int64))
    frontier = np.flatnonzero(sat)
    while frontier.size:
        lo, hi = ptr[frontier], ptr[frontier + 1]
        lens = hi - lo
        total = int(lens.sum())
        if total == 0:
            break
        offs = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        preds = src[offs + np.arange(total, dtype=np.int64)]
        preds = _distinct(preds[~sat[preds]])
        sat[preds] = True
        frontier = preds
    return sat


def _distinct(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-d integer array (sorted distinct values), without its first call's
    import of ``numpy.ma`` (~13 ms, paid inside the first compile of a process otherwise)."""
    x = np.sort(x)
    if x.size < 2:
        return x
    keep = np.empty(x.size, dtype=bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]
