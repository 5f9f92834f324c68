"""The vocabulary trie: every byte token of a tokenizer, renumbered so subtrees are id intervals.

Why it exists (DESIGN §4.6): a mask walk descends the trie once per lexer/parser state and must be
able to say "nothing below this node survives" and skip a whole subtree at once. Renumbering the
tokens in trie pre-order (a node's own token before its children, children sorted by byte) makes
every subtree a contiguous interval of *internal* ids, so compile-time token sets become cheap
interval unions and run-time masks are dense bitmaps over internal ids, expanded to the original
ids once per call (:meth:`VocabTrie.expand_to_orig_bitmask`).

Pre-order with byte-sorted children is exactly lexicographic order of the node strings, so the
internal id of a token is the rank of its bytes among the distinct byte strings of the vocabulary.

Only *byte tokens* enter the trie: special tokens and tokens with no bytes are left out
(``orig_to_internal == -1``); they reach the grammar only as special terminals. Distinct original
ids with identical bytes alias to one internal id (``internal_to_orig`` is one-to-many).

Everything is stored as flat numpy arrays (no Python object per node), so a trie for a 150k
vocabulary builds in a fraction of a second, is shared by every grammar compiled for that
tokenizer, and is cached on disk (in the artifact container, keyed by the vocabulary fingerprint).

Node arrays (index = node id = pre-order position; node 0 is the root, the empty prefix):

* ``node_depth`` int32 — length of the node's prefix.
* ``node_byte`` uint8 — last byte of the prefix (0 for the root).
* ``node_parent`` int32 — parent node (-1 for the root).
* ``node_internal`` int32 — internal id of the token whose bytes end here, or -1.
* ``node_subtree_end`` int32 — first pre-order index after the node's subtree. A non-recursive walk
  is ``i += 1`` to descend/continue, ``i = node_subtree_end[i]`` to skip the subtree.
* ``node_subtree_lo`` / ``node_subtree_hi`` int32 — the half-open interval of internal ids of the
  tokens in the subtree (the node's own token included).
* ``child_ptr`` int32[n_nodes + 1], ``child_byte`` uint8, ``child_node`` int32 — children in CSR
  form, sorted by byte (the first child of a node with children is always ``node + 1``).

Token arrays:

* ``tok_bytes`` uint8 / ``tok_offsets`` int64[n_internal + 1] — bytes of each internal token.
* ``internal_node`` int32[n_internal] — the node where each internal token ends.
* ``i2o_ptr`` int32[n_internal + 1] / ``i2o_ids`` int32 — original ids of each internal token,
  ascending.
* ``orig_to_internal`` int32[vocab.size] — -1 for special or empty tokens.
"""
from __future__ import annotations

import hashlib
import os
import threading
from itertools import chain
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Protocol

import numpy as np

from glrmask.errors import ArtifactError, VocabError

from glrmask_ext import trie_walk as _native

__all__ = ["VocabTrie", "TrieNode", "TRIE_LAYOUT_VERSION", "default_trie_cache_dir"]

#: Bumped whenever the set or meaning of the stored arrays changes; a cached trie with another
#: layout is rebuilt rather than loaded.
TRIE_LAYOUT_VERSION = 1

_ARTIFACT_KIND = "trie"
_MEMORY_CACHE_SIZE = 4


class _VocabLike(Protocol):
    """The part of :class:`glrmask.vocab.Vocab` the trie needs."""

    size: int
    n_logits: int
    fingerprint: str

    def token_bytes(self, i: int) -> bytes: ...

    def is_special(self, i: int) -> bool: ...


class TrieNode(NamedTuple):
    """One node as seen by :meth:`VocabTrie.iter_preorder` (for tests and debugging)."""

    node: int
    prefix: bytes
    internal: int  # internal id of the token ending here, or -1


_NODE_ARRAYS = (
    "node_depth",
    "node_byte",
    "node_parent",
    "node_internal",
    "node_subtree_end",
    "node_subtree_lo",
    "node_subtree_hi",
    "child_ptr",
    "child_byte",
    "child_node",
)
_TOKEN_ARRAYS = ("tok_bytes", "tok_offsets", "internal_node", "i2o_ptr", "i2o_ids", "orig_to_internal")
_ARRAY_DTYPES: dict[str, type] = {
    "node_depth": np.int32,
    "node_byte": np.uint8,
    "node_parent": np.int32,
    "node_internal": np.int32,
    "node_subtree_end": np.int32,
    "node_subtree_lo": np.int32,
    "node_subtree_hi": np.int32,
    "child_ptr": np.int32,
    "child_byte": np.uint8,
    "child_node": np.int32,
    "tok_bytes": np.uint8,
    "tok_offsets": np.int64,
    "internal_node": np.int32,
    "i2o_ptr": np.int32,
    "i2o_ids": np.int32,
    "orig_to_internal": np.int32,
}


def _file_stem(fingerprint: str) -> str:
    """The fingerprint itself when it is a plain hex digest, else a digest of it (a safe name)."""
    if fingerprint and len(fingerprint) <= 128 and all(c in "0123456789abcdef" for c in fingerprint):
        return fingerprint
    return hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()


def default_trie_cache_dir() -> Path:
    """``$GLRMASK_CACHE_DIR/tries`` if set, else ``$XDG_CACHE_HOME/glrmask/tries``, else
    ``~/.cache/glrmask/tries``."""
    env = os.environ.get("GLRMASK_CACHE_DIR")
    if env:
        return Path(env) / "tries"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "glrmask" / "tries"




def _token_pieces(vocab: _VocabLike) -> list[bytes]:
    """Every id's bytes, ``b""`` for ids that are not byte tokens (special or empty).

    Uses the vocabulary's concatenated byte buffer when it has one (``glrmask.vocab.Vocab``):
    slicing one ``bytes`` object is several times faster than a method call per id.
    """
    size = int(vocab.size)
    concat = getattr(vocab, "token_bytes_concat", None)
    offsets = getattr(vocab, "token_offsets", None)
    if concat is not None and offsets is not None and len(offsets) == size + 1:
        buf = np.asarray(concat, dtype=np.uint8).tobytes()
        offs = np.asarray(offsets, dtype=np.int64).tolist()
        pieces = [buf[a:b] for a, b in zip(offs, offs[1:])]
        specials = getattr(vocab, "special_token_ids", None)
        special_ids = specials if specials is not None else (i for i in range(size) if vocab.is_special(i))
        for i in special_ids:
            if 0 <= i < size:
                pieces[i] = b""
        return pieces
    pieces = []
    for i in range(size):
        b = b"" if vocab.is_special(i) else vocab.token_bytes(i)
        if not isinstance(b, (bytes, bytearray)):
            raise VocabError(f"token {i}: token_bytes returned {type(b).__name__}, expected bytes")
        pieces.append(bytes(b))
    return pieces

def _adjacent_lcp(tok_bytes: np.ndarray, offsets: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Longest common prefix of each string with its predecessor (0 for the first).

    Compares position p of all still-matching adjacent pairs at once; the set of pairs shrinks
    fast, so the work is about the sum of the LCPs.
    """
    n = lens.shape[0]
    lcps = np.zeros(n, dtype=np.int64)
    if n < 2:
        return lcps
    k = np.arange(1, n, dtype=np.int64)
    limit = np.minimum(lens[:-1], lens[1:])
    p = 0
    while k.size:
        k = k[limit[k - 1] > p]
        if not k.size:
            break
        k = k[tok_bytes[offsets[k - 1] + p] == tok_bytes[offsets[k] + p]]
        p += 1
        lcps[k] = p
    return lcps


def _parents_and_ends(node_depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent and subtree end of every node, from the pre-order depth sequence alone.

    In pre-order the parent of v is the last node before v one level up, and the subtree of v
    ends at its next sibling, or where its parent's subtree ends if it has none. Both are
    computed one depth level at a time (top-down), with a binary search per level.
    """
    n_nodes = node_depth.shape[0]
    parent = np.full(n_nodes, -1, dtype=np.int32)
    end = np.full(n_nodes, n_nodes, dtype=np.int32)
    order = np.argsort(node_depth, kind="stable")
    level_bounds = np.searchsorted(node_depth[order], np.arange(int(node_depth.max()) + 2))
    upper = order[level_bounds[0]:level_bounds[1]]  # the root
    for d in range(1, len(level_bounds) - 1):
        level = order[level_bounds[d]:level_bounds[d + 1]]
        if not level.size:
            break
        par = upper[np.searchsorted(upper, level) - 1]
        parent[level] = par
        nxt = np.empty_like(end[level])
        same_parent = np.zeros(level.size, dtype=bool)
        same_parent[:-1] = par[1:] == par[:-1]
        nxt[:-1] = level[1:]
        end[level] = np.where(same_parent, nxt, end[par])
        upper = level
    return parent, end

class VocabTrie:
    """Byte trie of a vocabulary's byte tokens in flat CSR arrays; see the module docstring.

    Build with :meth:`build` (always fresh) or :meth:`for_vocab` (cached in process and on disk).
    Instances are immutable; their arrays may be read-only memory maps.
    """

    # Declared for type checkers; filled by __init__ from the arrays dict.
    node_depth: np.ndarray
    node_byte: np.ndarray
    node_parent: np.ndarray
    node_internal: np.ndarray
    node_subtree_end: np.ndarray
    node_subtree_lo: np.ndarray
    node_subtree_hi: np.ndarray
    child_ptr: np.ndarray
    child_byte: np.ndarray
    child_node: np.ndarray
    tok_bytes: np.ndarray
    tok_offsets: np.ndarray
    internal_node: np.ndarray
    i2o_ptr: np.ndarray
    i2o_ids: np.ndarray
    orig_to_internal: np.ndarray

    _memory_cache: "OrderedDict[str, VocabTrie]" = OrderedDict()
    _memory_lock = threading.Lock()

    def __init__(self, arrays: dict[str, np.ndarray], *, fingerprint: str = "") -> None:
        missing = [name for name in _ARRAY_DTYPES if name not in arrays]
        if missing:
            raise ArtifactError(f"trie data lacks arrays {missing}")
        for name, dtype in _ARRAY_DTYPES.items():
            arr = arrays[name]
            if arr.dtype != np.dtype(dtype) or arr.ndim != 1:
                raise ArtifactError(
                    f"trie array {name!r} has dtype {arr.dtype} and {arr.ndim} dims; "
                    f"expected one-dimensional {np.dtype(dtype)}"
                )
            setattr(self, name, arr)
        self.fingerprint = fingerprint
        self.n_nodes = int(self.node_depth.shape[0])
        self.n_internal = int(self.internal_node.shape[0])
        self.size = int(self.orig_to_internal.shape[0])
        self._check_shapes()

    def _check_shapes(self) -> None:
        """Cheap consistency checks, so a damaged or foreign array set fails here, not in a walk."""
        n, t = self.n_nodes, self.n_internal
        expect = {
            "node_byte": n, "node_parent": n, "node_internal": n, "node_subtree_end": n,
            "node_subtree_lo": n, "node_subtree_hi": n, "child_ptr": n + 1,
            "child_byte": max(n - 1, 0), "child_node": max(n - 1, 0),
            "tok_offsets": t + 1, "i2o_ptr": t + 1,
        }
        for name, length in expect.items():
            if getattr(self, name).shape[0] != length:
                raise ArtifactError(f"trie array {name!r} has length {getattr(self, name).shape[0]}, "
                                    f"expected {length}")
        if n < 1 or self.tok_bytes.shape[0] != int(self.tok_offsets[-1]) \
                or self.i2o_ids.shape[0] != int(self.i2o_ptr[-1]):
            raise ArtifactError("trie arrays are inconsistent")

    # ------------------------------------------------------------------------------------------
    # construction

    @classmethod
    def build(cls, vocab: _VocabLike) -> "VocabTrie":
        """Build the trie of ``vocab``'s byte tokens (non-special, non-empty)."""
        size = int(vocab.size)
        groups: dict[bytes, list[int]] = {}
        for i, b in enumerate(_token_pieces(vocab)):
            if not b:
                continue
            ids = groups.get(b)
            if ids is None:
                groups[b] = [i]
            else:
                ids.append(i)
        return cls._from_groups(groups, size, fingerprint=str(getattr(vocab, "fingerprint", "")))

    @classmethod
    def from_token_bytes(cls, tokens: list[bytes | None], *, fingerprint: str = "") -> "VocabTrie":
        """Build from a plain list (``None`` or ``b""`` = not a byte token); handy in tests."""
        groups: dict[bytes, list[int]] = {}
        for i, b in enumerate(tokens):
            if b:
                groups.setdefault(bytes(b), []).append(i)
        return cls._from_groups(groups, len(tokens), fingerprint=fingerprint)

    @classmethod
    def _from_groups(cls, groups: dict[bytes, list[int]], size: int, *, fingerprint: str) -> "VocabTrie":
        uniq = sorted(groups)
        n_tok = len(uniq)
        members = list(map(groups.__getitem__, uniq))

        # Original <-> internal maps. Ids inside a group are ascending because they were
        # appended in increasing order.
        counts = np.fromiter(map(len, members), dtype=np.int64, count=n_tok)
        i2o_ptr = np.zeros(n_tok + 1, dtype=np.int64)
        np.cumsum(counts, out=i2o_ptr[1:])
        i2o_ids = np.fromiter(chain.from_iterable(members), dtype=np.int32, count=int(i2o_ptr[-1]))
        o2i = np.full(size, -1, dtype=np.int32)
        o2i[i2o_ids] = np.repeat(np.arange(n_tok, dtype=np.int32), counts)

        lens = np.fromiter(map(len, uniq), dtype=np.int64, count=n_tok)
        tok_offsets = np.zeros(n_tok + 1, dtype=np.int64)
        np.cumsum(lens, out=tok_offsets[1:])
        tok_bytes = np.frombuffer(b"".join(uniq), dtype=np.uint8).copy()

        # String k (in sorted order) introduces the nodes for its prefixes of length
        # lcp(k-1, k)+1 .. len(k), in that order, right after the nodes of string k-1: that is
        # the pre-order, and every string introduces at least its own terminal node.
        lcps = _adjacent_lcp(tok_bytes, tok_offsets, lens)
        new_counts = lens - lcps
        node_start = np.ones(n_tok, dtype=np.int64)
        if n_tok:
            node_start[1:] = 1 + np.cumsum(new_counts)[:-1]
        n_nodes = 1 + int(new_counts.sum())
        owner = np.repeat(np.arange(n_tok, dtype=np.int64), new_counts)
        within = np.arange(1, n_nodes, dtype=np.int64) - np.repeat(node_start, new_counts)

        node_depth = np.zeros(n_nodes, dtype=np.int32)
        node_depth[1:] = lcps[owner] + 1 + within
        node_byte = np.zeros(n_nodes, dtype=np.uint8)
        node_byte[1:] = tok_bytes[tok_offsets[owner] + node_depth[1:] - 1]

        internal_node = (node_start + new_counts - 1).astype(np.int32)
        node_internal = np.full(n_nodes, -1, dtype=np.int32)
        node_internal[internal_node] = np.arange(n_tok, dtype=np.int32)

        node_parent, node_subtree_end = _parents_and_ends(node_depth)

        # Internal ids are assigned in pre-order, so the tokens in a node's subtree are those
        # whose nodes lie in [node, subtree_end): count terminal nodes before each position.
        before = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(node_internal >= 0, out=before[1:])
        node_subtree_lo = before[:n_nodes].astype(np.int32)
        node_subtree_hi = before[node_subtree_end].astype(np.int32)

        # Children CSR: a stable sort by parent keeps pre-order among siblings, i.e. byte order.
        child_node = np.argsort(node_parent[1:], kind="stable").astype(np.int32) + 1
        child_byte = node_byte[child_node]
        child_ptr = np.zeros(n_nodes + 1, dtype=np.int32)
        np.cumsum(np.bincount(node_parent[1:], minlength=n_nodes), out=child_ptr[1:])

        return cls(
            {
                "node_depth": node_depth,
                "node_byte": node_byte,
                "node_parent": node_parent,
                "node_internal": node_internal,
                "node_subtree_end": node_subtree_end,
                "node_subtree_lo": node_subtree_lo,
                "node_subtree_hi": node_subtree_hi,
                "child_ptr": child_ptr,
                "child_byte": child_byte,
                "child_node": child_node,
                "tok_bytes": tok_bytes,
                "tok_offsets": tok_offsets,
                "internal_node": internal_node,
                "i2o_ptr": i2o_ptr.astype(np.int32),
                "i2o_ids": i2o_ids,
                "orig_to_internal": o2i,
            },
            fingerprint=fingerprint,
        )

    # ------------------------------------------------------------------------------------------
    # caching

    @classmethod
    def for_vocab(cls, vocab: _VocabLike, cache_dir: str | os.PathLike[str] | None = None) -> "VocabTrie":
        """The trie of ``vocab``, from the in-process cache, else the disk cache, else built.

        The disk cache holds one artifact per vocabulary fingerprint under ``cache_dir``
        (default :func:`default_trie_cache_dir`). A cached file that cannot be loaded (corrupt,
        other format or layout version) is rebuilt and overwritten; a cache directory that cannot
        be written is not an error, the trie is just not persisted.
        """
        fingerprint = str(vocab.fingerprint)
        with cls._memory_lock:
            hit = cls._memory_cache.get(fingerprint)
            if hit is not None:
                cls._memory_cache.move_to_end(fingerprint)
                return hit
        directory = Path(cache_dir) if cache_dir is not None else default_trie_cache_dir()
        path = directory / f"{_file_stem(fingerprint)}.glrtrie"
        trie = cls._load_cached(path, fingerprint)
        if trie is None:
            trie = cls.build(vocab)
            try:
                directory.mkdir(parents=True, exist_ok=True)
                trie.save(path)
            except OSError:
                pass
        with cls._memory_lock:
            cls._memory_cache[fingerprint] = trie
            cls._memory_cache.move_to_end(fingerprint)
            while len(cls._memory_cache) > _MEMORY_CACHE_SIZE:
                cls._memory_cache.popitem(last=False)
        return trie

    @classmethod
    def clear_memory_cache(cls) -> None:
        """Forget the in-process tries (tests; or to release memory maps)."""
        with cls._memory_lock:
            cls._memory_cache.clear()

    @classmethod
    def _load_cached(cls, path: Path, fingerprint: str) -> "VocabTrie | None":
        if not path.is_file():
            return None
        try:
            return cls.load(path, expect_fingerprint=fingerprint)
        except (ArtifactError, OSError):
            return None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trie as a ``kind="trie"`` artifact (atomically)."""
        from glrmask.artifact import write_artifact

        write_artifact(
            path,
            kind=_ARTIFACT_KIND,
            meta={"vocab_fingerprint": self.fingerprint, "trie_layout": TRIE_LAYOUT_VERSION},
            arrays=self.arrays(),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, expect_fingerprint: str | None = None,
             mmap: bool = True) -> "VocabTrie":
        """Read a trie written by :meth:`save`; raises :class:`ArtifactError` on any mismatch."""
        from glrmask.artifact import read_artifact

        art = read_artifact(path, kind=_ARTIFACT_KIND, expect_fingerprint=expect_fingerprint, mmap=mmap)
        layout = art.meta.get("trie_layout")
        if layout != TRIE_LAYOUT_VERSION:
            raise ArtifactError(f"{path}: trie layout {layout}, this glrmask uses "
                                f"{TRIE_LAYOUT_VERSION}: rebuild the trie")
        return cls(dict(art.arrays), fingerprint=str(art.meta.get("vocab_fingerprint", "")))

    def arrays(self) -> dict[str, np.ndarray]:
        """All arrays by name (the on-disk content)."""
        return {name: getattr(self, name) for name in _ARRAY_DTYPES}

    # ------------------------------------------------------------------------------------------
    # queries

    def internal_bytes(self, i: int) -> bytes:
        """The bytes of internal token ``i``."""
        if not 0 <= i < self.n_internal:
            raise IndexError(f"internal id {i} out of range 0..{self.n_internal - 1}")
        return self.tok_bytes[self.tok_offsets[i]:self.tok_offsets[i + 1]].tobytes()

    def orig_ids(self, i: int) -> np.ndarray:
        """The original ids aliased by internal token ``i``, ascending."""
        if not 0 <= i < self.n_internal:
            raise IndexError(f"internal id {i} out of range 0..{self.n_internal - 1}")
        return self.i2o_ids[self.i2o_ptr[i]:self.i2o_ptr[i + 1]]

    def subtree_interval(self, node: int) -> tuple[int, int]:
        """Half-open interval ``[lo, hi)`` of internal ids of the tokens at or below ``node``."""
        return int(self.node_subtree_lo[node]), int(self.node_subtree_hi[node])

    def subtree_bytes(self) -> np.ndarray:
        """``uint64[n_nodes, 4]``: the bytes spelled anywhere below each node (a 256-bit set),
        computed once per trie. A walk whose lexer state loops on every byte below a node takes
        the node's whole subtree at once (the Terminal DWA build, dynamic lexeme memos)."""
        hit = self.__dict__.get("_subtree_bytes")
        if hit is None:
            hit = _native.subtree_byte_sets(self.child_ptr, self.child_byte, self.child_node)
            hit.setflags(write=False)
            self.__dict__["_subtree_bytes"] = hit
        return hit

    def child(self, node: int, byte: int) -> int:
        """The child of ``node`` along ``byte``, or -1."""
        lo, hi = int(self.child_ptr[node]), int(self.child_ptr[node + 1])
        j = lo + int(np.searchsorted(self.child_byte[lo:hi], byte))
        if j < hi and int(self.child_byte[j]) == byte:
            return int(self.child_node[j])
        return -1

    def find_node(self, prefix: bytes) -> int:
        """The node whose prefix is ``prefix``, or -1 if no token starts with it."""
        node = 0
        for b in prefix:
            node = self.child(node, b)
            if node < 0:
                return -1
        return node

    def iter_preorder(self) -> Iterator[TrieNode]:
        """Every node in pre-order with its full prefix (slow; for tests and debugging)."""
        prefix = bytearray()
        for v in range(self.n_nodes):
            depth = int(self.node_depth[v])
            del prefix[max(depth - 1, 0):]
            if v:
                prefix.append(int(self.node_byte[v]))
            yield TrieNode(v, bytes(prefix), int(self.node_internal[v]))

    # ------------------------------------------------------------------------------------------
    # masks

    def expand_to_orig_bitmask(self, internal_bits: np.ndarray, n_logits: int, *,
                               out: np.ndarray | None = None) -> np.ndarray:
        """Expand a bitmap over internal ids into packed ``int32`` words over original ids.

        ``internal_bits`` is ``uint64[>= ceil(n_internal/64)]``, bit ``i % 64`` of word ``i // 64``
        for internal id ``i``; bits at or past ``n_internal`` are ignored. The result has
        ``ceil(n_logits/32)`` words, bit ``j % 32`` of word ``j // 32`` set iff original id ``j``
        is a byte token whose internal id is set (aliases all get the bit; special, empty and
        padding ids never do). This is the layout of a token bitmask tensor. ``out``, if given,
        is an ``int32`` C-contiguous array of that length to fill (no allocation).

        The native kernels scatter over the set bits when few are set and gather over all
        original ids otherwise.
        """
        if n_logits < self.size:
            raise ValueError(f"n_logits={n_logits} is smaller than the vocabulary size {self.size}")
        bits = np.asarray(internal_bits)
        n_words_in = (self.n_internal + 63) // 64
        if bits.dtype != np.uint64 or bits.ndim != 1 or bits.shape[0] < n_words_in:
            raise ValueError(f"internal_bits must be uint64[>= {n_words_in}], "
                             f"got {bits.dtype}{list(bits.shape)}")
        n_words = (n_logits + 31) // 32
        if out is not None and (out.dtype != np.int32 or out.shape != (n_words,)
                                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"out must be a writable C-contiguous int32[{n_words}]")
        words = np.ascontiguousarray(bits[:n_words_in], dtype=np.uint64)
        result = out if out is not None else np.empty(n_words, dtype=np.int32)
        if n_words_in == 0:
            result[:] = 0
            return result
        n_set = _native.count_bits(words, self.n_internal)
        # Aliases make the scatter touch more than one output bit per set bit.
        scatter_cost = n_set * self.i2o_ids.shape[0] // max(self.n_internal, 1)
        if scatter_cost * 5 <= self.size * 2:
            _native.expand_sparse(words, self.n_internal, self.i2o_ptr, self.i2o_ids, result)
        else:
            _native.expand_dense(words, self.orig_to_internal, result)
        return result

    def internal_bitmask(self, internal_ids: Any) -> np.ndarray:
        """A ``uint64`` bitmap over internal ids with the given ids set (tests, small callers)."""
        out = np.zeros((self.n_internal + 63) // 64, dtype=np.uint64)
        ids = np.asarray(internal_ids, dtype=np.int64).reshape(-1)
        if ids.size:
            if ids.min() < 0 or ids.max() >= self.n_internal:
                raise IndexError("internal id out of range")
            np.bitwise_or.at(out, ids >> 6, np.left_shift(np.uint64(1), (ids & 63).astype(np.uint64)))
        return out

    def __repr__(self) -> str:
        return (f"VocabTrie(n_nodes={self.n_nodes}, n_internal={self.n_internal}, size={self.size}, "
                f"fingerprint={self.fingerprint[:12]!r})")
