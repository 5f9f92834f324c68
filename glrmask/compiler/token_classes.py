"""The internal token quotient: tokens that no compiled weight tells apart are one class (DESIGN §4.9).

Why. A Terminal-DWA weight is a set of internal (trie-order) token ids; with a 128k vocabulary a
dense bitset over tokens is 16 KiB, and the Parser DWA composes thousands of them. But a grammar
distinguishes far fewer tokens than a tokenizer has: every digit run behaves alike in JSON, so do
most words inside a string. Two tokens that belong to exactly the same weights (final, open, edge
*and* condition seeds) can never be separated by any mask, so the Parser DWA is built and stored
over *classes* instead: its weights become bitsets of ``n_classes`` bits (typically a few hundred),
and a mask is expanded to tokens once at the very end.

How (native: ``glrmask_ext.token_quotient``). Weights are sorted interval lists, so membership is
constant between consecutive interval bounds; each such *segment* gets a signature — the XOR of two independent random 64-bit keys of
every weight covering it, computed with one difference array per key — and segments with equal
signatures form a class. The hash is then *verified* exactly: every weight must equal the union of
the classes of its segments, token count for token count (a collision would make a class stick out
of some weight), so a wrong quotient raises instead of producing a wrong mask. Tokens in no weight
at all are in no class: nothing can ever allow them.

Classes are numbered by their first token, and each lists its tokens as sorted half-open intervals
of internal ids (``class_ptr`` / ``class_bounds``, as ``lo, hi`` pairs).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from glrmask_ext.token_quotient import class_of_tokens as _class_of_tokens, quotient as _quotient
from glrmask_ext.trie_walk import expand_classes as _expand

__all__ = ["TokenClasses"]

_ARRAYS = ("class_ptr", "class_bounds", "n_internal")


class TokenClasses:
    """The partition; see the module docstring."""

    def __init__(self, class_ptr: np.ndarray, class_bounds: np.ndarray, n_internal: int) -> None:
        self.class_ptr = np.ascontiguousarray(class_ptr, dtype=np.int32)
        self.class_bounds = np.ascontiguousarray(class_bounds, dtype=np.int32)
        self.n_internal = int(n_internal)
        self.n_classes = int(self.class_ptr.shape[0]) - 1
        self.n_words = max(1, (self.n_classes + 63) // 64)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_weights(cls, weight_ptr: np.ndarray, weight_bounds: np.ndarray, n_internal: int,
                     *, seed: int = 0x9E3779B97F4A7C15) -> tuple["TokenClasses", list[int]]:
        """The coarsest partition refining every weight of a Terminal DWA (its ``weight_ptr`` /
        ``weight_bounds`` CSR of flat interval bounds). Returns the classes and, per weight, its
        class set as a Python int bitset (bit ``c`` = class ``c``)."""
        wp = np.asarray(weight_ptr, dtype=np.int64)
        wb = np.asarray(weight_bounds, dtype=np.int64)
        n_weights = len(wp) - 1
        # The cuts are the distinct bounds (with 0 and n_internal), and a bound's segment index is
        # its rank among them. Bounds are token ids in [0, n_internal]: one mark per id and a
        # running count give both in linear time (np.unique and searchsorted over the hundreds
        # of thousands of bounds of a patterned string took most of this stage).
        top = max(int(n_internal), int(wb.max()) if wb.size else 0, 0)
        mark = np.zeros(top + 1, dtype=np.bool_)
        mark[wb] = True
        mark[0] = True
        mark[int(n_internal)] = True
        cuts = np.flatnonzero(mark).astype(np.int64)
        rank = np.cumsum(mark, dtype=np.int64)
        rank -= 1
        rng = np.random.default_rng(seed)
        keys = rng.integers(0, np.iinfo(np.int64).max, size=(2, max(n_weights, 1)), dtype=np.int64)
        seg_lo = rank[wb[0::2]]
        seg_hi = rank[wb[1::2]]
        ptr, bounds, sets = _quotient(np.ascontiguousarray(wp), seg_lo, seg_hi, np.ascontiguousarray(cuts),
                                      np.ascontiguousarray(keys))
        return cls(ptr, bounds, n_internal), sets

    # ---------------------------------------------------------------- queries
    def class_tokens(self, c: int) -> list[tuple[int, int]]:
        """Class ``c`` as sorted half-open intervals of internal token ids."""
        b = self.class_bounds[self.class_ptr[c]:self.class_ptr[c + 1]].tolist()
        return list(zip(b[0::2], b[1::2]))

    def class_of_tokens(self) -> np.ndarray:
        """``int32[n_internal]``: the class of each internal token, ``-1`` when it has none."""
        return _class_of_tokens(self.class_ptr, self.class_bounds, self.n_internal)

    def dense(self, bits: int) -> np.ndarray:
        """A class bitset (Python int) as ``uint64[n_words]``."""
        return np.frombuffer(bits.to_bytes(self.n_words * 8, "little"), dtype="<u8").astype(np.uint64)

    def internal_words(self, bits: int) -> np.ndarray:
        """The internal tokens of a class bitset, as ``uint64[ceil(n_internal / 64)]``."""
        out = np.zeros(max(1, (self.n_internal + 63) // 64), dtype=np.uint64)
        _expand(self.dense(bits), self.class_ptr, self.class_bounds, out)
        return out

    # ---------------------------------------------------------------- (de)serialization
    def arrays(self) -> dict[str, np.ndarray]:
        return {"class_ptr": self.class_ptr, "class_bounds": self.class_bounds,
                "n_internal": np.asarray([self.n_internal], dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "TokenClasses":
        return cls(arrays["class_ptr"], arrays["class_bounds"], int(arrays["n_internal"][0]))

    def __repr__(self) -> str:
        return f"TokenClasses(classes={self.n_classes}, internal_tokens={self.n_internal})"

