"""Peer engines behind one small interface, shared by the benchmarks: a *matcher* is one replay
with ``mask()`` (packed int32 words over token ids) and ``commit(token) -> bool``.

Why here: the benchmarks compare glrmask with llguidance and xgrammar in the same process and on
the same token ids; each peer's per-request object is wrapped once, the way its own docs drive it
(a deep copy of a compiled llguidance matcher; a fresh xgrammar ``GrammarMatcher``).
"""
from __future__ import annotations

import numpy as np


class LlguidanceMatcher:
    """One request over a compiled ``llguidance.LLMatcher`` (``proto``, deep-copied per request)."""

    def __init__(self, proto, n_tokens: int):
        import llguidance.numpy

        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.m = proto.deep_copy()
        self.words = np.zeros((1, (n_tokens + 31) // 32), dtype=np.int32)

    def mask(self) -> np.ndarray:
        self._fill(self.m, self.words, 0)
        return self.words

    def commit(self, token: int) -> bool:
        return self.m.consume_token(token)


class XgrammarMatcher:
    """One request over an xgrammar ``CompiledGrammar``."""

    def __init__(self, compiled, vocab_size: int):
        import xgrammar as xgr

        self.m = xgr.GrammarMatcher(compiled)
        self.t = xgr.allocate_token_bitmask(1, vocab_size)
        self.words = self.t.numpy()

    def mask(self) -> np.ndarray:
        self.m.fill_next_token_bitmask(self.t)
        return self.words

    def commit(self, token: int) -> bool:
        return self.m.accept_token(token)
