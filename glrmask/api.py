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
from typing import Callable, Optional, Sequence

import numpy as np

from .collisions import find_lookahead_collisions
from .dynamic import DynamicMasker
from .errors import GlrmaskError
from .grammar.ir import Grammar
from .grammar.loader import load_grammar
from .grammar.normalize import normalize
from .lexer import Lexer
from .lexer.dense import DenseLexer
from .lr.table import LRTable
from .recognizer import ConfigSet, Recognizer
from .trie import VocabTrie
from .vocab import Vocab

MODES = ("static", "dynamic", "auto")

DEFAULT_STATIC_SECONDS = 300.0
"""Default wall-time budget of a static compile (``limits["max_seconds"]``): a clear
``GrammarTooComplex`` instead of a compile that seems to hang."""


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


class _Engine:
    """A recognizer and the masker that answers for its configuration sets. A request keeps the
    engine it started with (its configuration sets only mean something to that recognizer), so
    ``mode="auto"`` can switch new requests to the static engine while old ones finish."""

    __slots__ = ("recognizer", "masker", "kind")

    def __init__(self, recognizer: Recognizer, masker, kind: str) -> None:
        self.recognizer = recognizer
        self.masker = masker
        self.kind = kind


@dataclass(frozen=True)
class _History:
    """One committed step: the configuration set after it, and the link to the step before."""

    configs: ConfigSet
    terminated: bool
    prev: Optional["_History"]
    depth: int
    engine: _Engine


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
            s = head.engine.recognizer.step_bytes(head.configs, data)
        if not s:
            return False
        self._head = _History(s, False, head, head.depth + 1, head.engine)
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
            return head.engine.recognizer.is_accepting(head.configs)

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
    to share between requests and threads: memo tables are filled lazily, so every call that may
    fill them holds one lock (a cached transition costs no more than the lock).

    Modes:

    * ``"static"`` (default): the offline compiler runs up front (dense lexer, stack effects,
      Terminal DWA, token classes, Parser DWA) and a mask is a walk of the Parser DWA over the
      parser stacks; the recognizer's lexemes start from the unrestricted lexer, so its lexer
      states are the ones the automata were built for. Only static masks can be saved.
    * ``"dynamic"``: nothing is compiled ahead; a mask walks the vocabulary trie through the
      recognizer (first mask at once, slower tail).
    * ``"auto"``: dynamic at once, static for requests started after a background compile ends
      (:meth:`wait_static`); a compile that fails a budget leaves the mask dynamic
      (``static_error`` says why).

    All modes give the same masks and accept the same token sequences."""

    def __init__(self, grammar: Grammar, vocab: Vocab, *, mode: str = "static", lexer_max_states: int = 200_000,
                 limits: Optional[dict] = None,
                 on_stage: Optional[Callable[[str, float, dict], None]] = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._init_common(vocab, grammar, normalize(grammar), mode)
        self.table = LRTable.build(self.grammar)
        self._lazy_lexer = Lexer([(t.name, t.pattern) for t in self.grammar.terminals.values()],
                                 max_states=lexer_max_states)
        self._limits = dict(limits or {})
        if mode == "static":
            self._engine = self._static_engine(on_stage)
        elif mode == "dynamic":
            self._engine = self._dynamic_engine()
        else:
            self._engine = self._dynamic_engine()
            self._static_thread = threading.Thread(target=self._compile_in_background, daemon=True,
                                                   name="glrmask-static-compile")
            self._static_thread.start()

    def _init_common(self, vocab: Vocab, source_grammar: Grammar, grammar: Grammar, mode: str) -> None:
        self.vocab = vocab
        self.source_grammar = source_grammar
        self.grammar = grammar
        self.mode = mode
        self.compiled = None  # CompiledMasks once a static engine exists
        self.stats: dict = {}
        self.static_error: Optional[GlrmaskError] = None
        self._static_thread: Optional[threading.Thread] = None
        self._trie: Optional[VocabTrie] = None
        self.n_words = (vocab.n_logits + 31) // 32
        self._eos = tuple(sorted(set(vocab.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        self._warnings: Optional[list[str]] = None
        self._lock = threading.RLock()

    # -- engines ----------------------------------------------------------------------------------
    @property
    def trie(self) -> VocabTrie:
        """The vocabulary trie (from the per-tokenizer disk cache; loaded on first use)."""
        if self._trie is None:
            self._trie = VocabTrie.for_vocab(self.vocab)
        return self._trie

    def _dynamic_engine(self) -> _Engine:
        rec = Recognizer(self.grammar, self.table, self._lazy_lexer)
        return _Engine(rec, DynamicMasker(rec, self.trie, self.vocab.n_logits), "dynamic")

    def _static_engine(self, on_stage=None) -> _Engine:
        import time

        from .compiler.static_mask import compile_masks

        limits = self._limits
        t0 = time.perf_counter()
        max_seconds = limits.get("max_seconds", DEFAULT_STATIC_SECONDS)
        deadline = None if max_seconds is None else t0 + max_seconds
        dense = DenseLexer.from_lexer(self._lazy_lexer, **{"max_seconds": max_seconds, **limits.get("lexer", {})})
        info = {"states": dense.n_states, "conditions": dense.n_conds}
        self.stats["dense lexer"] = {"seconds": time.perf_counter() - t0, **info}
        if on_stage is not None:
            on_stage("dense lexer", self.stats["dense lexer"]["seconds"], info)
        compiled = compile_masks(dense, self.grammar, self.table, self.trie,
                                 tdwa_budgets=limits.get("terminal_dwa"), pdwa_budgets=limits.get("parser_dwa"),
                                 deadline=deadline, on_stage=on_stage, **limits.get("expand", {}))
        self.stats.update(compiled.stats)
        return self._engine_for(dense, compiled)

    def _engine_for(self, dense: DenseLexer, compiled) -> _Engine:
        from .compiler.static_mask import StaticMasker

        rec = Recognizer(self.grammar, self.table, dense, restrict_lexer=False)
        self.compiled = compiled
        masker = StaticMasker(compiled, rec, lambda: self.trie, self.vocab.n_logits)
        return _Engine(rec, _CachedStaticWords(masker), "static")

    def _compile_in_background(self) -> None:
        try:
            engine = self._static_engine()
        except GlrmaskError as e:
            self.static_error = e
            return
        with self._lock:
            self._engine = engine

    def wait_static(self, timeout: Optional[float] = None) -> bool:
        """``mode="auto"``: wait for the background compile; True once new requests are static."""
        if self._static_thread is not None:
            self._static_thread.join(timeout)
        return self._engine.kind == "static"

    @property
    def active_mode(self) -> str:
        """``"static"`` or ``"dynamic"``: how requests started now get their masks."""
        return self._engine.kind

    @property
    def recognizer(self) -> Recognizer:
        return self._engine.recognizer

    @property
    def lexer(self):
        """The lexer of the active recognizer (a :class:`DenseLexer` in static mode)."""
        return self._engine.recognizer.lexer

    @property
    def _masker(self):
        return self._engine.masker

    @property
    def warnings(self) -> list[str]:
        """Front-end warnings and possible lookahead collisions (DESIGN §2). The collision check
        explores every terminal's lexer states, so it runs on first access, not at compile time."""
        if self._warnings is None:
            self._warnings = list(self.source_grammar.warnings) + find_lookahead_collisions(
                self.grammar, self._lazy_lexer)
        return self._warnings

    # -- artifacts --------------------------------------------------------------------------------
    def save(self, path: "str | os.PathLike[str]") -> None:
        """Write the compiled grammar to ``path`` (glrmask's own checksummed format; DESIGN §6).
        Only a static mask has something to save (``mode="auto"``: after :meth:`wait_static`)."""
        from .mask_artifact import save_mask

        save_mask(self, path)

    @classmethod
    def load(cls, path: "str | os.PathLike[str]", vocab: Vocab) -> "Mask":
        """Load a saved mask for ``vocab``; refuses another vocabulary, a damaged file or another
        format version with :class:`glrmask.ArtifactError`."""
        from .mask_artifact import load_mask

        return load_mask(path, vocab)

    # -- requests ---------------------------------------------------------------------------------
    def start(self) -> State:
        engine = self._engine
        return State(self, _History(engine.recognizer.initial, False, None, 0, engine))

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
        engine = head.engine
        out[: self.n_words] = engine.masker.token_words(head.configs)
        if self._eos and engine.recognizer.is_accepting(head.configs):
            u = out.view(np.uint32)
            for t in self._eos:
                u[t >> 5] |= np.uint32(1 << (t & 31))

    def _advance(self, head: _History, token: int) -> Optional[_History]:
        with self._lock:
            return self._advance_locked(head, token)

    def _advance_locked(self, head: _History, token: int) -> Optional[_History]:
        if head.terminated or token < 0 or token >= self.vocab.size:
            return None
        rec = head.engine.recognizer
        if token in self._eos_set:
            if rec.is_accepting(head.configs):
                return _History(head.configs, True, head, head.depth + 1, head.engine)
            return None
        data = self.vocab.token_bytes(token)
        if not data or self.vocab.is_special(token):
            return None
        s = rec.step_bytes(head.configs, data)
        if not s:
            return None
        return _History(s, False, head, head.depth + 1, head.engine)

    def _forced_tokens(self, state: State, max_bytes: int = 4096) -> list[int]:
        with self._lock:
            return self._forced_tokens_locked(state, max_bytes)

    def _forced_tokens_locked(self, state: State, max_bytes: int) -> list[int]:
        head = state._head
        if head.terminated:
            return []
        rec = head.engine.recognizer
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
    mode: str = "static",
    limits: Optional[dict] = None,
    cache_dir: "str | os.PathLike[str] | None" = None,
    on_stage: Optional[Callable[[str, float, dict], None]] = None,
) -> Mask:
    """Compile a grammar (text, or a path to a .lark/.gbnf/.ebnf file) against ``vocab``.

    ``mode``: see :class:`Mask`. ``limits``: budgets that end in :class:`GrammarTooComplex` —
    ``max_seconds`` for the whole static compile (default ``DEFAULT_STATIC_SECONDS``; ``None``: no
    limit) and per-stage dicts of keyword limits (``lexer``, ``terminal_dwa``, ``parser_dwa``,
    ``expand``). ``cache_dir``: reuse static compiles across processes (keyed by
    grammar, vocabulary, options and glrmask version; see :class:`glrmask.compile_cache.CompileCache`).
    ``on_stage(name, seconds, info)`` reports each compile stage as it ends."""
    grammar = load_grammar(source, format=format, start=start)
    return compile_grammar(grammar, vocab, mode=mode, limits=limits, cache_dir=cache_dir, on_stage=on_stage)


def compile_json_schema(
    schema,
    vocab: Vocab,
    *,
    mode: str = "auto",
    limits: Optional[dict] = None,
    cache_dir: "str | os.PathLike[str] | None" = None,
    **schema_options,
) -> Mask:
    """Compile a JSON Schema (dict, JSON text, or a path) by lowering it to a grammar
    (:func:`glrmask.json_schema.json_schema_to_grammar` shows that grammar). ``schema_options`` go
    to :func:`glrmask.lower_json_schema` (``whitespace``, ``max_whitespace``, ``indent``,
    ``property_order``, ``lenient``, …). Warnings of the lowering (ignored keywords in ``lenient``
    mode) are appended to ``mask.warnings``.

    The default is ``mode="auto"`` with a 30 s budget for the background static compile: schemas
    arrive per request and some are costly to compile statically (a string with ``maxLength:
    1024`` is a lexer state per length), so masks start at once and turn static when the compile
    fits its budget; pass ``mode="static"`` to compile up front (and be able to save)."""
    if mode == "auto" and limits is None:
        limits = {"max_seconds": 30.0}
    from .grammar.lark_frontend import grammar_from_lark
    from .json_schema import lower_json_schema

    text, warnings = lower_json_schema(schema, **schema_options)
    grammar = grammar_from_lark(text, source_name="<json-schema>")
    grammar.warnings.extend(warnings)
    return compile_grammar(grammar, vocab, mode=mode, limits=limits, cache_dir=cache_dir)


def compile_grammar(grammar: Grammar, vocab: Vocab, *, mode: str = "static", limits: Optional[dict] = None,
                    cache_dir: "str | os.PathLike[str] | None" = None,
                    on_stage: Optional[Callable[[str, float, dict], None]] = None) -> Mask:
    """Compile an already-built grammar IR (front-ends that produce IR directly)."""
    if cache_dir is None or mode != "static":
        return Mask(grammar, vocab, mode=mode, limits=limits, on_stage=on_stage)
    from .mask_artifact import cached_compile

    return cached_compile(grammar, vocab, cache_dir, limits=limits, on_stage=on_stage)


def fill_masks(states: "Sequence[State]", out: np.ndarray, *, n_threads: Optional[int] = None) -> None:
    """Fill row ``i`` of the ``(batch, words)`` int32 array ``out`` with the mask of ``states[i]``
    (states may come from different masks; rows past ``len(states)`` are left alone)."""
    if out.ndim != 2 or out.dtype != np.int32 or out.shape[0] < len(states):
        raise ValueError(f"out must be an int32 array of shape (>= {len(states)}, words)")
    for i, st in enumerate(states):
        st._mask.fill_mask(st, out, i)


def commit_many(states: "Sequence[State]", tokens: "Sequence[int]") -> list[bool]:
    """``[states[i].commit(tokens[i]) for i]``: one commit per state."""
    if len(states) != len(tokens):
        raise ValueError(f"{len(states)} states but {len(tokens)} tokens")
    return [st.commit(t) for st, t in zip(states, tokens)]


def load(path: "str | os.PathLike[str]", vocab: Vocab) -> Mask:
    """A mask saved with :meth:`Mask.save` (``glrmask compile … -o path``), for ``vocab``."""
    return Mask.load(path, vocab)


__all__ = ["Mask", "State", "commit_many", "compile", "compile_grammar", "compile_json_schema", "fill_masks", "load"]
