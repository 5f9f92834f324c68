"""The tables of a vocabulary trie that every Terminal DWA build reads, computed once per trie.

Why. A serving process compiles a new grammar per request against one or two tokenizers; the
trie's heights (the longest token below each node, for lexer-state classes), the set of bytes
spelled below each node (for whole-subtree skipping) and whether every single byte is a token do
not depend on the grammar, yet computing them costs ~20 ms on a 128k-token vocabulary — a tenth
of a small schema's compile. They are cached per trie object (tries themselves are cached per
vocabulary fingerprint, :meth:`glrmask.trie.VocabTrie.for_vocab`), weakly, so a dropped
vocabulary frees them.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .lexer_classes import trie_heights

__all__ = ["TrieTables", "trie_tables"]


@dataclass(frozen=True)
class TrieTables:
    """``subtree_bytes``: ``uint64[n_nodes, 4]``, the bytes spelled anywhere below each node;
    ``all_bytes``: each of the 256 one-byte strings is a token; ``heights`` (``int32[n_nodes]``)
    and ``height_list`` (the same as a list, for Python-side indexing): the most bytes a token
    below each node has past it, or ``None`` unless ``all_bytes`` (classes need every byte)."""

    subtree_bytes: np.ndarray
    all_bytes: bool
    heights: Optional[np.ndarray]
    height_list: Optional[list[int]]


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def trie_tables(trie) -> TrieTables:
    """The tables of ``trie`` (computed on first use, then shared)."""
    with _LOCK:
        hit = _CACHE.get(trie)
    if hit is not None:
        return hit
    all_bytes = _all_bytes_are_tokens(trie)
    heights = trie_heights(trie) if all_bytes else None
    hit = TrieTables(
        subtree_bytes=trie.subtree_bytes(),
        all_bytes=all_bytes,
        heights=None if heights is None else np.asarray(heights, dtype=np.int32),
        height_list=heights,
    )
    with _LOCK:
        _CACHE[trie] = hit
    return hit


def _all_bytes_are_tokens(trie) -> bool:
    """Whether each of the 256 one-byte strings is a token (byte-level vocabularies)."""
    cp, cn = trie.child_ptr, trie.child_node
    lo, hi = int(cp[0]), int(cp[1])
    if hi - lo != 256:
        return False
    return bool((trie.node_internal[np.asarray(cn[lo:hi], dtype=np.int64)] >= 0).all())
