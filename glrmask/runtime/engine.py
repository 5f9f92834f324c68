"""The static engine: native tables over a compiled grammar, and its trie walk for the rare lane.

Why a trie walk here. The Parser DWA has a root for every lexer state a *token boundary* reaches
and a failure seed for every condition pending there. Bytes committed in the middle of a token
(``State.commit_bytes`` with a prompt prefix) can leave a lane in a lexer state the automaton has
no root for; such a configuration is answered by the dynamic engine's native walk of the
vocabulary trie over the same dense lexer and LR table — exact, counted in
:attr:`NativeEngine.n_fallbacks`, never a rebuild. The trie is attached on the first such mask,
so loading an artifact never waits for it.
"""
from __future__ import annotations

import threading
from typing import Callable

from glrmask.reference import Recognizer

from .tables import build_tables

__all__ = ["NativeEngine"]

_TRIE_KEYS = ("node_depth", "node_byte", "node_internal", "node_subtree_end", "node_subtree_lo", "node_subtree_hi",
              "i2o_ptr", "i2o_ids")


def trie_arrays(trie) -> dict:
    """The :class:`glrmask.trie.VocabTrie` arrays a native trie walk reads (with the per-node
    byte sets and token intervals that let a walk take a looping subtree at once): one dict per
    trie, so that the runtime validates them once per trie, not once per mask (a vocabulary's
    min/max checks were ~0.2 ms of every new schema's first mask)."""
    out = trie.__dict__.get("_runtime_arrays")
    if out is None:
        out = {k: getattr(trie, k) for k in _TRIE_KEYS}
        out["node_subtree_bytes"] = trie.subtree_bytes()
        trie.__dict__["_runtime_arrays"] = out
    return out


class NativeEngine:
    """One compiled mask's native runtime (immutable; shared by every request and thread)."""

    kind = "static"

    def __init__(self, arrays: dict, recognizer_factory: Callable[[], Recognizer], trie: Callable, n_logits: int):
        self.tables = build_tables(arrays)
        self.n_words = int(self.tables.n_words)
        self._recognizer_factory = recognizer_factory
        self._recognizer = None
        self._trie = trie
        self._lock = threading.Lock()

    def start(self):
        return self.tables.new_state()

    @property
    def n_fallbacks(self) -> int:
        """Masks answered by the trie walk (lanes the Parser DWA has no root for)."""
        return self.tables.n_walks

    @property
    def recognizer(self) -> Recognizer:
        """The reference recognizer over the same lexer and table (the tests' oracle; built on
        first use)."""
        with self._lock:
            if self._recognizer is None:
                self._recognizer = self._recognizer_factory()
            return self._recognizer

    def fill_fallback(self, native_state, out) -> None:
        """The mask of a configuration the Parser DWA does not cover (``out``: int32 words), by the
        native trie walk (end tokens included): the first one attaches the trie, later ones never
        leave the native fill."""
        with self._lock:
            self.tables.attach_trie(trie_arrays(self._trie()))
        if native_state.fill(out.view("uint32")) != 0:  # cannot happen once the trie is attached
            raise RuntimeError("glrmask runtime: the trie walk did not answer a fallback mask")
