"""The user-facing facade: ``compile()`` → :class:`Mask` (immutable, shared) → :class:`State` (per request).

A ``Mask`` owns everything derived from (grammar, vocabulary) and is safe to share between requests;
a ``State`` is a small value (a pointer into a persistent history), so ``fork()`` is O(1) and
``rollback(n)`` just walks back ``n`` links. Masks are packed int32 bitmasks in the layout shared by
xgrammar and llguidance: bit ``id % 32`` of word ``id // 32``, ``ceil(n_logits / 32)`` words.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .collisions import find_lookahead_collisions
from .dynamic import DynamicMasker
from .grammar.ir import Grammar
from .grammar.loader import load_grammar
from .grammar.normalize import normalize
from .lexer import Lexer
from .lr.table import LRTable
from .recognizer import ConfigSet, Recognizer
from .trie import VocabTrie
from .vocab import Vocab

MODES = ("dynamic", "static")


class _CachedStaticWords:
    """The static masker's token words, cached per configuration set (LRU, read-only arrays) like
    :class:`DynamicMasker`'s: a decode loop revisits the same few sets over and over."""

    def __init__(self, masker, cache_size: int = 2048):
        self.masker = masker
        self._cache: OrderedDict[ConfigSet, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def token_words(self, s: ConfigSet) -> np.ndarray:
        hit = self._cache.get(s)
        if hit is not None:
            self._cache.move_to_end(s)
            return hit
        words = self.masker.token_words(s)
        words.flags.writeable = False
        self._cache[s] = words
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return words


@dataclass(frozen=True)
class _History:
    """One committed step: the configuration set after it, and the link to the step before."""

    configs: ConfigSet
    terminated: bool
    prev: Optional["_History"]
    depth: int


class State:
    """Per-request parser state. Cheap to create, fork and roll back; never shared mutably."""

    __slots__ = ("_mask", "_head")

    def __init__(self, mask: "Mask", head: _History):
        self._mask = mask
        self._head = head

    # -- decoding ---------------------------------------------------------------------------------
    def commit(self, token_id: int) -> bool:
        """Advance by one token. Returns False (and leaves the state unchanged) when the token is
        outside the mask."""
        nxt = self._mask._advance(self._head, int(token_id))
        if nxt is None:
            return False
        self._head = nxt
        return True

    def commit_bytes(self, data: bytes) -> bool:
        """Advance by raw output bytes (a prompt prefix, forced text); counts as one step for rollback."""
        head = self._head
        if head.terminated:
            return False
        with self._mask._lock:
            s = self._mask.recognizer.step_bytes(head.configs, data)
        if not s:
            return False
        self._head = _History(s, False, head, head.depth + 1)
        return True

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` commits."""
        if n < 0 or n > self._head.depth:
            raise ValueError(f"cannot roll back {n} steps: only {self._head.depth} were committed")
        head = self._head
        for _ in range(n):
            head = head.prev  # type: ignore[assignment]
        self._head = head

    def fork(self) -> "State":
        """An independent copy (O(1): histories are persistent)."""
        return State(self._mask, self._head)

    # -- queries ----------------------------------------------------------------------------------
    def is_accepting(self) -> bool:
        """The output so far is a complete sentence (pending decisions resolved as at the end of the
        document). Stays true after an end token was committed."""
        head = self._head
        if head.terminated:
            return True
        with self._mask._lock:
            return self._mask.recognizer.is_accepting(head.configs)

    def is_terminated(self) -> bool:
        """An end token was committed: the mask is all zeros and commit returns False."""
        return self._head.terminated

    @property
    def num_committed(self) -> int:
        return self._head.depth

    def forced_tokens(self) -> list[int]:
        """Tokens fully determined from here (jump-forward decoding); does not commit."""
        return self._mask._forced_tokens(self)

    def __repr__(self) -> str:
        return (f"State(committed={self._head.depth}, configs={len(self._head.configs)}, "
                f"accepting={self.is_accepting()}, terminated={self.is_terminated()})")


class Mask:
    """A grammar compiled against one vocabulary. Immutable from the user's point of view and safe
    to share between requests and threads: the recognizer's memo tables are filled lazily, so every
    call that may fill them holds one lock (a cached transition costs no more than the lock).

    ``mode="dynamic"`` computes a mask by walking the vocabulary trie through the recognizer;
    ``mode="static"`` compiles the Terminal DWA and stack effects up front and reads masks from them
    (:class:`glrmask.compiler.static_mask.StaticMasker`), with a recognizer whose lexemes start
    from the unrestricted lexer so its lexer states are the ones the Terminal DWA was built for.
    Both give the same masks and accept the same token sequences."""

    def __init__(self, grammar: Grammar, vocab: Vocab, *, mode: str = "dynamic", lexer_max_states: int = 200_000):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.vocab = vocab
        self.source_grammar = grammar
        self.grammar = normalize(grammar)
        self.table = LRTable.build(self.grammar)
        self.lexer = Lexer([(t.name, t.pattern) for t in self.grammar.terminals.values()], max_states=lexer_max_states)
        self.recognizer = Recognizer(self.grammar, self.table, self.lexer, restrict_lexer=mode != "static")
        self.trie = VocabTrie.for_vocab(vocab)
        self.mode = mode
        if mode == "static":
            from .compiler.static_mask import StaticMasker

            self._masker = _CachedStaticWords(StaticMasker(self))
        else:
            self._masker = DynamicMasker(self.recognizer, self.trie, vocab.n_logits)
        self.n_words = (vocab.n_logits + 31) // 32
        self._eos = tuple(sorted(set(vocab.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        self._warnings: Optional[list[str]] = None
        self._lock = threading.RLock()

    @property
    def warnings(self) -> list[str]:
        """Front-end warnings and possible lookahead collisions (DESIGN §2). The collision check
        explores every terminal's lexer states, so it runs on first access, not at compile time."""
        if self._warnings is None:
            self._warnings = list(self.source_grammar.warnings) + find_lookahead_collisions(self.grammar, self.lexer)
        return self._warnings

    # -- requests ---------------------------------------------------------------------------------
    def start(self) -> State:
        return State(self, _History(self.recognizer.initial, False, None, 0))

    def get_mask(self, state: State) -> np.ndarray:
        out = np.empty(self.n_words, dtype=np.int32)
        self._fill(state, out)
        return out

    def fill_mask(self, state: State, out: np.ndarray, row: int = 0) -> None:
        """Write the mask into row ``row`` of a preallocated ``(batch, words)`` int32 array."""
        if out.ndim != 2 or out.shape[1] < self.n_words or out.dtype != np.int32:
            raise ValueError(f"out must be an int32 array of shape (batch, >= {self.n_words})")
        self._fill(state, out[row])

    def is_allowed(self, state: State, token_id: int) -> bool:
        return self._advance(state._head, int(token_id)) is not None

    def _fill(self, state: State, out: np.ndarray) -> None:
        with self._lock:
            self._fill_locked(state, out)

    def _fill_locked(self, state: State, out: np.ndarray) -> None:
        head = state._head
        out[:] = 0
        if head.terminated:
            return
        out[: self.n_words] = self._masker.token_words(head.configs)
        if self._eos and self.recognizer.is_accepting(head.configs):
            u = out.view(np.uint32)
            for t in self._eos:
                u[t >> 5] |= np.uint32(1 << (t & 31))

    def _advance(self, head: _History, token: int) -> Optional[_History]:
        with self._lock:
            return self._advance_locked(head, token)

    def _advance_locked(self, head: _History, token: int) -> Optional[_History]:
        if head.terminated or token < 0 or token >= self.vocab.size:
            return None
        if token in self._eos_set:
            if self.recognizer.is_accepting(head.configs):
                return _History(head.configs, True, head, head.depth + 1)
            return None
        data = self.vocab.token_bytes(token)
        if not data or self.vocab.is_special(token):
            return None
        s = self.recognizer.step_bytes(head.configs, data)
        if not s:
            return None
        return _History(s, False, head, head.depth + 1)

    def _forced_tokens(self, state: State, max_bytes: int = 4096) -> list[int]:
        with self._lock:
            return self._forced_tokens_locked(state, max_bytes)

    def _forced_tokens_locked(self, state: State, max_bytes: int) -> list[int]:
        head = state._head
        if head.terminated:
            return []
        rec = self.recognizer
        s = head.configs
        forced = bytearray()
        while len(forced) < max_bytes and not rec.is_accepting(s):
            nxt = rec.possible_bytes(s)
            if len(nxt) != 1:
                break
            forced.append(nxt[0])
            s = rec.step(s, nxt[0])
        return _determined_tokens(self, state, bytes(forced))


def _determined_tokens(mask: Mask, state: State, forced: bytes) -> list[int]:
    """Tokenize the forced bytes and keep only the tokens no continuation could merge differently.

    The last token of a tokenization may merge with bytes that come after the forced string, so it
    is never returned; every returned token is checked against the mask in sequence."""
    if not forced:
        return []
    try:
        text = forced.decode("utf-8")
    except UnicodeDecodeError as e:
        text = forced[: e.start].decode("utf-8")
    if not text:
        return []
    try:
        ids = mask.vocab.encode(text)
    except Exception:
        ids = _greedy_tokenize(mask.trie, text.encode("utf-8"))
    ids = ids[:-1]
    probe = state.fork()
    out: list[int] = []
    for t in ids:
        if not probe.commit(t):
            break
        out.append(t)
    return out


def _greedy_tokenize(trie: VocabTrie, data: bytes) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(data):
        node, best, best_len = 0, -1, 0
        for j in range(i, len(data)):
            node = trie.child(node, data[j])
            if node < 0:
                break
            t = int(trie.node_internal[node])
            if t >= 0:
                best, best_len = t, j - i + 1
        if best < 0:
            break
        out.append(int(trie.orig_ids(best)[0]))
        i += best_len
    return out


def compile(
    source: "str | os.PathLike[str]",
    vocab: Vocab,
    *,
    format: str = "auto",
    start: Optional[str] = None,
    mode: str = "dynamic",
) -> Mask:
    """Compile a grammar (text, or a path to a .lark/.gbnf/.ebnf file) against ``vocab``."""
    grammar = load_grammar(source, format=format, start=start)
    return Mask(grammar, vocab, mode=mode)


def compile_json_schema(
    schema,
    vocab: Vocab,
    *,
    whitespace: str = "flexible",
    max_whitespace: Optional[int] = None,
    indent: Optional[int] = None,
    property_order: str = "schema",
    lenient: bool = False,
    mode: str = "dynamic",
) -> Mask:
    """Compile a JSON Schema (dict, JSON text, or a path) by lowering it to a Lark grammar
    (:func:`glrmask.json_schema.json_schema_to_grammar` shows that grammar). Warnings of the
    lowering (ignored keywords in ``lenient`` mode) are appended to ``mask.warnings``."""
    from .grammar.lark_frontend import grammar_from_lark
    from .json_schema import DEFAULT_MAX_WHITESPACE, lower_json_schema

    text, warnings = lower_json_schema(
        schema, whitespace=whitespace,
        max_whitespace=DEFAULT_MAX_WHITESPACE if max_whitespace is None else max_whitespace,
        indent=indent, property_order=property_order, lenient=lenient,
    )
    grammar = grammar_from_lark(text, source_name="<json-schema>")
    grammar.warnings.extend(warnings)
    return Mask(grammar, vocab, mode=mode)


def compile_grammar(grammar: Grammar, vocab: Vocab, *, mode: str = "dynamic") -> Mask:
    """Compile an already-built grammar IR (front-ends that produce IR directly)."""
    return Mask(grammar, vocab, mode=mode)


__all__ = ["Mask", "State", "compile", "compile_grammar", "compile_json_schema"]
