"""The static engine: native tables + the reference recognizer for the rare uncovered lane.

Why the reference is still here. The Parser DWA has a root for every lexer state a *token
boundary* reaches and a failure seed for every condition pending there. Bytes committed in the
middle of a token (``State.commit_bytes`` with a prompt prefix) can leave a lane in a lexer state
the automaton has no root for; such a configuration is answered by the reference dynamic masker
over the same lexer and LR table — exact, counted in :attr:`NativeEngine.n_fallbacks`, never a
rebuild. Everything else (commit, masks, acceptance) is native.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from glrmask.reference import Config, Recognizer, StackNode

from .tables import build_tables

__all__ = ["NativeEngine"]


class NativeEngine:
    """One compiled mask's native runtime (immutable; shared by every request and thread)."""

    kind = "static"

    def __init__(self, arrays: dict, recognizer_factory: Callable[[], Recognizer], trie: Callable, n_logits: int):
        self.tables = build_tables(arrays)
        self.n_words = int(self.tables.n_words)
        self._recognizer_factory = recognizer_factory
        self._trie = trie
        self._n_logits = n_logits
        self._fallback = None
        self._fallback_lock = threading.Lock()
        self.n_fallbacks = 0

    def start(self):
        return self.tables.new_state()

    # ---------------------------------------------------------------- the reference fallback
    @property
    def recognizer(self) -> Recognizer:
        """The reference recognizer over the same lexer and table (built on first use)."""
        return self._fallback_parts()[0]

    def _fallback_parts(self):
        with self._fallback_lock:
            if self._fallback is None:
                from glrmask.reference import DynamicMasker

                rec = self._recognizer_factory()
                self._fallback = (rec, DynamicMasker(rec, self._trie(), self._n_logits))
            return self._fallback

    def config_set(self, native_state) -> frozenset:
        """The native configuration as the reference recognizer's configuration set."""
        out = []
        for lex, conds, stacks in native_state.lanes():
            nodes = []
            for stack in stacks:
                node = None
                for s in stack:
                    node = StackNode(s, node)
                nodes.append(node)
            out.append(Config(lex, frozenset(nodes), tuple(conds)))
        return frozenset(out)

    def fill_fallback(self, native_state, out: np.ndarray) -> None:
        """The mask of a configuration the Parser DWA does not cover, from the reference masker
        (``out``: int32 words; end tokens added by the caller's acceptance check)."""
        masker = self._fallback_parts()[1]
        with self._fallback_lock:  # the reference's memo tables are not thread-safe
            self.n_fallbacks += 1
            words = masker.token_words(self.config_set(native_state))
        out[:] = 0
        out[: self.n_words] = words
