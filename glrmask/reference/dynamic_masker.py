"""Dynamic masks: one walk of the vocabulary trie per mask, driving the reference recognizer.

No compile step beyond the lexer and LR table, so it is both the tests' oracle for the compiled
masks and the zero-wait mode users get while an artifact builds. The walk visits the trie in
pre-order, keeps the configuration set of every ancestor on a stack (so a shared prefix is scanned
once for all tokens below it) and skips a whole subtree as soon as its configuration set is empty.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from glrmask.trie import VocabTrie
from glrmask_ext.dynamic_walk import walk_trie

from .recognizer import ConfigSet, Recognizer


DEFAULT_STEP_TRANSITIONS = 200_000
"""New configuration-set transitions one dynamic mask may compute (each is one byte step of the
reference recognizer; a cached transition costs nothing): the per-step fuel of DESIGN §4.11."""


class DynamicMasker:
    """Computes the allowed byte tokens of a configuration set as a bitmap over internal ids."""

    def __init__(self, recognizer: Recognizer, trie: VocabTrie, n_logits: int, *, cache_size: int = 2048,
                 max_step_transitions: "int | None" = DEFAULT_STEP_TRANSITIONS):
        self.recognizer = recognizer
        self.trie = trie
        self._depth = np.ascontiguousarray(trie.node_depth, dtype=np.int32)
        self._byte = np.ascontiguousarray(trie.node_byte, dtype=np.uint8)
        self._internal = np.ascontiguousarray(trie.node_internal, dtype=np.int32)
        self._end = np.ascontiguousarray(trie.node_subtree_end, dtype=np.int32)
        self._max_depth = int(self._depth.max()) if len(self._depth) else 0
        self._n_words = (trie.n_internal + 63) // 64
        self._n_logits = n_logits
        self._cache: OrderedDict[ConfigSet, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self.max_step_transitions = max_step_transitions

    def token_words(self, s: ConfigSet) -> np.ndarray:
        """Packed int32 words over original ids (the byte tokens that keep ``s`` alive; no end
        tokens). Cached per configuration set (LRU), read-only."""
        hit = self._cache.get(s)
        if hit is not None:
            self._cache.move_to_end(s)
            return hit
        words = self.trie.expand_to_orig_bitmask(self._walk(s), self._n_logits)
        words.flags.writeable = False
        self._cache[s] = words
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return words

    def _walk(self, s: ConfigSet) -> np.ndarray:
        """uint64 bitmap over internal token ids."""
        allowed = np.zeros(self._n_words * 64, dtype=np.uint8)
        if s:
            rec = self.recognizer
            rec.trim()
            rec.set_fuel(self.max_step_transitions)
            try:
                walk_trie(rec, rec.sid(s), self._depth, self._byte, self._internal, self._end,
                          self._max_depth, allowed)
            finally:
                rec.set_fuel(None)
        return np.packbits(allowed, bitorder="little").view("<u8").astype(np.uint64, copy=False)
