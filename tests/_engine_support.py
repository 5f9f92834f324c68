"""Judges and walkers shared by the mask tests. The judges are independent of glrmask's own lexer
and parser: lark's Earley parser with its dynamic lexer decides membership (DESIGN §11)."""
from __future__ import annotations

import itertools
import random
from functools import lru_cache

import numpy as np
from lark import Lark
from lark.exceptions import LarkError


class LarkJudge:
    """Membership in L(G) as lark's Earley/dynamic parser decides it."""

    def __init__(self, grammar_text: str, start: str = "start"):
        self.parser = Lark(grammar_text, parser="earley", lexer="dynamic", regex=False, start=start)
        self._memo: dict[bytes, bool] = {}

    def accepts(self, data: bytes) -> bool:
        hit = self._memo.get(data)
        if hit is None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                hit = False
            else:
                try:
                    self.parser.parse(text)
                    hit = True
                except LarkError:
                    hit = False
            self._memo[data] = hit
        return hit

    def language_prefixes(self, alphabet: bytes, max_len: int) -> set[bytes]:
        """Every prefix of every sentence of length <= max_len over ``alphabet`` (brute force)."""
        prefixes: set[bytes] = set()
        for n in range(max_len + 1):
            for combo in itertools.product(alphabet, repeat=n):
                s = bytes(combo)
                if self.accepts(s):
                    for k in range(len(s) + 1):
                        prefixes.add(s[:k])
        return prefixes


def allowed(bits: np.ndarray) -> set[int]:
    return set(np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")).tolist())


def random_walk(mask, rng: random.Random, max_steps: int, *, stop_at_end: bool = True):
    """States visited by committing uniformly random allowed tokens; yields (state, allowed ids)."""
    state = mask.start()
    for _ in range(max_steps):
        ids = sorted(allowed(mask.get_mask(state)))
        yield state, ids
        if not ids:
            return
        tok = rng.choice(ids)
        assert state.commit(tok)
        if state.is_terminated():
            yield state, sorted(allowed(mask.get_mask(state)))
            return


def output_bytes(vocab, tokens) -> bytes:
    return b"".join(vocab.token_bytes(t) for t in tokens)


@lru_cache(maxsize=None)
def reference_masker(mask):
    """The reference trie walk over ``mask``'s own recognizer (same lexer, same LR table)."""
    from glrmask.reference import DynamicMasker

    return DynamicMasker(mask.recognizer, mask.trie, mask.vocab.n_logits)


def reference_words(mask, data: bytes) -> np.ndarray:
    """The reference mask after ``data`` (end tokens included when the text is complete)."""
    rec = mask.recognizer
    configs = rec.step_bytes(rec.initial, data)
    words = np.array(reference_masker(mask).token_words(configs))
    if rec.is_accepting(configs):
        u = words.view(np.uint32)
        for e in mask.vocab.eos_token_ids:
            u[e >> 5] |= np.uint32(1 << (e & 31))
    return words


def reachable_states(mask, max_depth: int = 6, max_sets: int = 400) -> list:
    """(state, bytes committed) for distinct configurations reachable by allowed tokens, breadth-first."""
    seen: dict = {}
    layer = [(mask.start(), b"")]
    for _ in range(max_depth + 1):
        nxt = []
        for state, data in layer:
            key = state.configuration()
            if key in seen or len(seen) >= max_sets:
                continue
            seen[key] = (state, data)
            if state.is_terminated():
                continue
            for tok in sorted(allowed(mask.get_mask(state))):
                child = state.fork()
                if child.commit(tok) and not child.is_terminated():
                    nxt.append((child, data + mask.vocab.token_bytes(tok)))
        layer = nxt
    return list(seen.values())
