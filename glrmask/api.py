"""The user-facing facade: ``compile()`` → :class:`Mask` (immutable, shared) → :class:`State` (per request).

A ``Mask`` owns everything derived from (grammar, vocabulary) and is safe to share between requests;
a ``State`` is a small value (a pointer into a persistent history), so ``fork()`` is O(1) and
``rollback(n)`` just walks back ``n`` links. Every state lives in the native runtime
(:mod:`glrmask.runtime`): on a static mask its masks walk the Parser DWA; on a dynamic one
(``mode="dynamic"``, and ``mode="auto"`` until its compile ends) they walk the vocabulary trie over
the same native state, with the lexer explored on demand. Masks are packed int32 bitmasks in the layout shared by
xgrammar and llguidance: bit ``id % 32`` of word ``id // 32``, ``ceil(n_logits / 32)`` words.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Optional, Sequence

import numpy as np


from .budget import DEFAULT_MAX_SECONDS, activate_budget
from .collisions import find_lookahead_collisions
from .errors import GlrmaskError
from .grammar.gc_pause import cyclic_gc_paused
from .grammar.ir import Grammar
from .grammar.loader import load_grammar
from .grammar.normalize import normalize
from .lexer import Lexer
from .lexer.dense import DenseLexer
from .lr.table import LRTable
from .reference import Recognizer
from .trie import VocabTrie
from .vocab import Vocab

MODES = ("static", "dynamic", "auto")


def _token_id(token_id, n_logits: int) -> int:
    """A token id as an ``int``: integers (numpy's too) only, within the logits."""
    if type(token_id) is not int:
        if isinstance(token_id, bool) or not hasattr(token_id, "__index__"):
            raise TypeError(f"a token id must be an integer, got {type(token_id).__name__} {token_id!r}")
        token_id = token_id.__index__()
    if token_id < 0 or token_id >= n_logits:
        raise ValueError(f"token id {token_id} is outside [0, {n_logits})")
    return token_id


class State:
    """Per-request parser state. Cheap to create, fork and roll back; never shared mutably.

    The state lives in native memory owned by the request (and its forks): ``commit`` and masks
    run in C without the GIL and without any lock shared with other requests (on a dynamic mask,
    lexer entries nobody explored yet are computed under the mask's lock, once for everyone)."""

    __slots__ = ("_mask", "_impl")

    def __init__(self, mask: "Mask", impl) -> None:
        self._mask = mask
        self._impl = impl

    # -- decoding ---------------------------------------------------------------------------------
    def commit(self, token_id: int) -> bool:
        """Advance by one token. Returns False (and leaves the state unchanged) when the token is
        outside the mask; a non-integer or an id outside the logits is a usage error."""
        return self._impl.commit(_token_id(token_id, self._mask.n_logits))

    def commit_bytes(self, data: bytes) -> bool:
        """Advance by raw output bytes (a prompt prefix, forced text); counts as one step for rollback."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"commit_bytes takes bytes, got {type(data).__name__}; encode text first")
        return self._impl.commit_bytes(bytes(data))

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` commits."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"rollback takes an int, got {type(n).__name__}")
        self._impl.rollback(n)

    def fork(self) -> "State":
        """An independent copy (O(1): histories are persistent)."""
        return State(self._mask, self._impl.fork())

    # -- queries ----------------------------------------------------------------------------------
    def is_accepting(self) -> bool:
        """The output so far is a complete sentence (pending decisions resolved as at the end of the
        document). Stays true after an end token was committed."""
        return self._impl.is_accepting()

    def is_terminated(self) -> bool:
        """An end token was committed: the mask is all zeros and commit returns False."""
        return self._impl.terminated

    @property
    def num_committed(self) -> int:
        return self._impl.depth

    @property
    def mask(self) -> "Mask":
        """The mask this state belongs to."""
        return self._mask

    def forced_tokens(self) -> list[int]:
        """Tokens fully determined from here (jump-forward decoding); does not commit."""
        return self._mask._forced_tokens(self)

    def configuration(self) -> tuple:
        """What the state is, as a hashable value: ``((lexer state, pending conditions, stacks),
        …)`` with every parser stack as a tuple of LR states, bottom first (plus whether an end
        token was committed). Equal configurations of one mask get equal masks — for tests,
        debugging and deduplicating explored states; lexer ids are those of the active engine."""
        return (self.is_terminated(), self._impl.configuration())

    def __repr__(self) -> str:
        return (f"State(committed={self.num_committed}, accepting={self.is_accepting()}, "
                f"terminated={self.is_terminated()})")


class Mask:
    """A grammar compiled against one vocabulary. Immutable and safe to share between requests
    and threads.

    Modes:

    * ``"static"`` (default): the offline compiler runs up front (dense lexer, stack effects,
      Terminal DWA, token classes, the complete Parser DWA) and requests run on the native
      runtime: a mask is a walk of the Parser DWA over the parser stacks, in C, with no lock
      shared by requests. Only static masks can be saved.
    * ``"dynamic"``: nothing is compiled ahead but the LR table and a lazy lexer; requests run on
      the same native runtime and a mask walks the vocabulary trie over the native state (the
      lexer is explored on demand; first mask at once).
    * ``"auto"``: dynamic at once; when the background compile ends (:meth:`wait_static`) every
      request, new or running, continues on the static engine at its next mask; a compile that
      fails a budget leaves the mask dynamic (``static_error`` says why).

    All modes give the same masks and accept the same token sequences."""

    def __init__(self, grammar: Grammar, vocab: Vocab, *, mode: str = "static", lexer_max_states: int = 200_000,
                 limits: Optional[dict] = None,
                 on_stage: Optional[Callable[[str, float, dict], None]] = None,
                 cache_dir: "str | os.PathLike[str] | None" = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        with cyclic_gc_paused():  # tables and lexer programs: tens of thousands of cycle-free objects
            self._init_common(vocab, grammar, normalize(grammar), mode)
            self.table = LRTable.build(self.grammar, check=False)  # normalize() checked its normal form
            self._lazy_lexer = Lexer([(t.name, t.pattern) for t in self.grammar.terminals.values()],
                                     max_states=lexer_max_states)
        self._limits = dict(limits or {})
        if mode == "static":
            self._engine = self._static_engine(on_stage)
        elif mode == "dynamic":
            self._engine = self._dynamic_engine()
        else:
            self._engine = self._dynamic_engine()
            hit = None
            if cache_dir is not None:
                from .mask_artifact import cache_lookup

                hit = cache_lookup(grammar, vocab, cache_dir, limits=limits)
            if hit is not None:
                Mask._adopt_static(self, hit)
            else:  # a worker process: the compile never competes with decoding for the GIL
                from .background_compile import BackgroundCompile

                self._background = BackgroundCompile(self, grammar, vocab, limits, cache_dir,
                                                     Mask._adopt_static, Mask._static_failed,
                                                     known=(self.grammar, self.table))

    def _init_common(self, vocab: Vocab, source_grammar: Grammar, grammar: Grammar, mode: str) -> None:
        self.vocab = vocab
        self.source_grammar = source_grammar
        self.grammar = grammar
        self.mode = mode
        self.compiled = None  # CompiledMasks while a freshly compiled static engine exists
        self.stats: dict = {}
        self.static_error: Optional[GlrmaskError] = None
        self._background = None  # mode="auto": the BackgroundCompile
        self._trie: Optional[VocabTrie] = None
        self._stored: Optional[dict] = None  # the runtime arrays an artifact stores
        self.n_logits = int(vocab.n_logits)
        self.n_words = (vocab.n_logits + 31) // 32
        self._eos = tuple(sorted(set(vocab.eos_token_ids)))
        self._eos_set = frozenset(self._eos)
        self._warnings: Optional[list[str]] = None
        self._lock = threading.RLock()  # the lazy lexer's memo tables (exploration, collision check)
        self._upgrade = False  # mode="auto": the static engine arrived; dynamic states move at their next mask

    # -- engines ----------------------------------------------------------------------------------
    @property
    def trie(self) -> VocabTrie:
        """The vocabulary trie (from the per-tokenizer disk cache; loaded on first use)."""
        if self._trie is None:
            self._trie = VocabTrie.for_vocab(self.vocab)
        return self._trie

    def _dynamic_engine(self):
        from .runtime.dynamic import DynamicEngine

        grammar, table, lexer = self.grammar, self.table, self._lazy_lexer
        # (the factories capture what they need, never the mask: an engine that referred back to
        # its mask made every mask a reference cycle, freed only by the cyclic collector — memory
        # held until then, a background compile not cancelled, and the collection that finally
        # freed a large mask's lexer landing inside some later request)
        return DynamicEngine(lexer, table, grammar.ignore, self.vocab, self._eos, self.trie,
                             recognizer=lambda: Recognizer(grammar, table, lexer),
                             lock=self._lock, limits=self._limits.get("dynamic"))

    def _static_engine(self, on_stage=None):
        import time

        from .compiler.static_mask import compile_masks
        from .runtime.tables import stored_arrays

        limits = self._limits
        t0 = time.perf_counter()
        max_seconds = limits.get("max_seconds", DEFAULT_MAX_SECONDS)
        deadline = None if max_seconds is None else t0 + max_seconds
        dense = DenseLexer.from_lexer(self._lazy_lexer, **{"max_seconds": max_seconds, **limits.get("lexer", {})})
        info = {"states": dense.n_states, "conditions": dense.n_conds}
        self.stats["dense lexer"] = {"seconds": time.perf_counter() - t0, **info}
        if on_stage is not None:
            on_stage("dense lexer", self.stats["dense lexer"]["seconds"], info)
        compiled = compile_masks(dense, self.grammar, self.table, self.trie,
                                 tdwa_budgets=limits.get("terminal_dwa"), pdwa_budgets=limits.get("parser_dwa"),
                                 deadline=deadline, on_stage=on_stage, complete=True)
        self.stats.update(compiled.stats)
        self.compiled = compiled
        stored = stored_arrays(compiled.pdwa, compiled.classes, self.trie, self.vocab.size)
        return self._engine_for(dense, stored)

    def _engine_for(self, dense: DenseLexer, stored: dict):
        """The native engine over a dense lexer, this mask's LR table and the stored runtime
        arrays (validated here: they may come from an untrusted artifact)."""
        from .runtime import NativeEngine, runtime_arrays_from_stored

        arrays = runtime_arrays_from_stored(stored, dense, self.table, self.grammar.ignore, self.vocab, self._eos)
        max_stacks = self._limits.get("runtime", {}).get("max_stacks")
        if max_stacks is not None:
            if isinstance(max_stacks, bool) or not isinstance(max_stacks, int) or max_stacks < 1:
                raise ValueError(f"limits['runtime']['max_stacks'] must be a positive integer, got {max_stacks!r}")
            arrays["max_stacks"] = np.int64(max_stacks)
        self._stored = stored
        self._dense_lexer = dense
        grammar, table, vocab = self.grammar, self.table, self.vocab  # not the mask (see _dynamic_engine)
        return NativeEngine(arrays, lambda: Recognizer(grammar, table, dense, restrict_lexer=False),
                            lambda: VocabTrie.for_vocab(vocab), vocab.n_logits)

    @staticmethod
    def _adopt_static(mask: "Mask", loaded: "Mask") -> None:
        """``mode="auto"``: the background compile ended; new requests get its native engine."""
        mask._stored, mask._dense_lexer = loaded._stored, loaded._dense_lexer
        mask.stats.update(loaded.stats)
        mask._static_source = loaded  # keeps the engine's reference recognizer and trie alive
        mask._engine = loaded._engine
        mask._upgrade = True

    @staticmethod
    def _static_failed(mask: "Mask", error: GlrmaskError) -> None:
        mask.static_error = error

    def wait_static(self, timeout: Optional[float] = None) -> bool:
        """``mode="auto"``: wait for the background compile; True once new requests are static."""
        if self._background is not None:
            self._background.join(timeout)
        return self._engine.kind == "static"

    @property
    def static_compile_pid(self) -> Optional[int]:
        """``mode="auto"``: the process id of the background compile's worker while it runs."""
        bg = self._background
        return bg.pid if bg is not None and bg.is_alive() else None

    def cancel_static(self) -> None:
        """``mode="auto"``: stop the background compile (requests stay dynamic). Dropping the
        mask does the same."""
        if self._background is not None:
            self._background.cancel()

    @property
    def active_mode(self) -> str:
        """``"static"`` or ``"dynamic"``: how requests started now get their masks."""
        return self._engine.kind

    @property
    def recognizer(self) -> Recognizer:
        """The reference recognizer of the active engine (static: over the dense lexer)."""
        return self._engine.recognizer

    @property
    def lexer(self):
        """The lexer of the active engine (a :class:`DenseLexer` in static mode)."""
        if self._engine.kind == "static":
            return self._dense_lexer
        return self._lazy_lexer

    @property
    def n_fallbacks(self) -> int:
        """Static masks answered by the trie walk (lanes the Parser DWA has no root for)."""
        return self._engine.n_fallbacks

    @property
    def dynamic_stats(self) -> Optional[dict]:
        """What the dynamic engine has done so far (None when requests are static): lexer entries
        explored, memory held by lexeme memos, and memos transferred from another lexer state's
        (``memo_transfers``: ``(tried and not shown, done, done for the short tokens only)`` — a
        bounded string's counts that no token tells apart share one memo instead of each walking
        the trie; near the bound, where only long tokens tell them apart, they share it for the
        tokens of at most 16 bytes), memos relabelled from a lexeme of other terminals whose walk
        has the same shape (``memo_relabels``: ``(tried and not shown, done, done for the short
        tokens only)`` — another bounded string's counts, far from both bounds), the trie
        walks memos cost (``memo_walks``: ``(walks, trie nodes visited)``) and the lazy lexer's
        states interned so far (``lexer_states``: ``(joint states, lane states)``) — what a cold
        mask creates in Python objects, the part of its exploration no memo saves."""
        explorer = getattr(self._engine, "explorer", None)
        if explorer is None:
            return None
        native = explorer.native
        return {"explored_entries": explorer.n_explored, "memo_bytes": native.memo_bytes,
                "memo_transfers": native.memo_transfers, "memo_relabels": native.memo_relabels,
                "memo_walks": native.memo_walks,
                "lexer_states": (explorer.lexer.n_states, explorer.lexer.n_lane_states)}

    @property
    def warnings(self) -> list[str]:
        """Front-end warnings and possible lookahead collisions (DESIGN §2). The collision check
        explores every terminal's lexer states, so it runs on first access, not at compile time
        (a loaded mask whose artifact was saved without it builds a lazy lexer for it)."""
        if self._warnings is None:
            with self._lock:  # the collision search steps the lazy lexer the dynamic engine explores
                lexer = self._lazy_lexer
                if lexer is None:
                    lexer = Lexer([(t.name, t.pattern) for t in self.grammar.terminals.values()])
                self._warnings = list(self.source_grammar.warnings) + find_lookahead_collisions(
                    self.grammar, lexer)
        return self._warnings

    # -- artifacts --------------------------------------------------------------------------------
    def save(self, path: "str | os.PathLike[str]", *, warnings: bool = True) -> None:
        """Write the compiled grammar to ``path`` (glrmask's own checksummed format; DESIGN §6).
        Only a static mask has something to save (``mode="auto"``: after :meth:`wait_static`).
        ``warnings=False`` skips the lookahead-collision check (:attr:`warnings`): the mask that
        loads the file runs it when asked."""
        from .mask_artifact import save_mask

        save_mask(self, path, warnings=warnings)

    @classmethod
    def load(cls, path: "str | os.PathLike[str]", vocab: Vocab) -> "Mask":
        """Load a saved mask for ``vocab``; refuses another vocabulary, a damaged file or another
        format version with :class:`glrmask.ArtifactError`. Nothing is compiled: the arrays are
        mapped, validated and served."""
        from .mask_artifact import load_mask

        return load_mask(path, vocab)

    # -- requests ---------------------------------------------------------------------------------
    def start(self) -> State:
        return State(self, self._engine.start())

    def _check_state(self, state) -> None:
        if not isinstance(state, State):
            raise TypeError(f"expected a glrmask.State, got {type(state).__name__}")
        if state._mask is not self:
            raise ValueError("this State belongs to another Mask")

    def get_mask(self, state: State) -> np.ndarray:
        """The packed int32 mask of ``state`` (``ceil(n_logits / 32)`` words)."""
        if type(state) is not State or state._mask is not self:
            self._check_state(state)
        out = np.empty(self.n_words, dtype=np.int32)
        impl = state._impl
        if self._upgrade and impl.dynamic:
            impl = self._switch(state)
        if impl.fill_into(out, 0) != 0:
            self._fill_impl(impl, out)
        return out

    def fill_mask(self, state: State, out, row: int = 0) -> None:
        """Write the mask into row ``row`` of a preallocated ``(batch, words)`` int32 array (a NumPy
        array or a CPU torch tensor, pinned memory included; no allocation)."""
        if type(state) is not State or state._mask is not self:
            self._check_state(state)
        impl = state._impl
        if self._upgrade and impl.dynamic:
            impl = self._switch(state)
        if type(out) is np.ndarray and out.ndim == 2 and type(row) is int:
            if impl.fill_into(out, row) == 0:  # checks the buffer; NEEDS_FALLBACK: below
                return
        arr = _as_mask_buffer(out, self.n_words)
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < arr.shape[0]:
            raise ValueError(f"row {row!r} is outside the {arr.shape[0]} rows of out")
        self._fill_impl(impl, arr[row])

    def _switch(self, state: State):
        """``mode="auto"``: a request that started on the dynamic engine continues on the static
        one as soon as it is ready — its committed steps are replayed once into a static native
        state (same masks by construction, tested at every switch position; the whole history
        comes along, so rollback still reaches the start). Returns the state's implementation,
        switched or not."""
        impl = state._impl
        engine = self._engine
        if not impl.dynamic or engine.kind != "static":
            return impl
        native = engine.start()
        for step in impl.steps():
            ok = native.commit(step) if isinstance(step, int) else native.commit_bytes(step)
            if not ok:  # cannot happen (static ≡ dynamic); stay on the exact dynamic engine
                return impl
        state._impl = native
        return native

    def _fill_impl(self, impl, out: np.ndarray) -> None:
        """``out``: an int32 row of at least ``n_words`` words (extra words are zeroed)."""
        if impl.fill(out.view(np.uint32)) != 0:  # a lane the Parser DWA has no root for: the trie walk
            self._engine_of(impl).fill_fallback(impl, out)
        if out.shape[0] > self.n_words:
            out[self.n_words:] = 0

    def _engine_of(self, impl):
        """The static engine a native state belongs to (the active one, or the one it started on)."""
        engine = self._engine
        if engine.kind == "static" and engine.tables is impl.tables:
            return engine
        raise ValueError("this State belongs to another Mask")

    def is_allowed(self, state: State, token_id: int) -> bool:
        self._check_state(state)
        return state.fork().commit(token_id)

    def _forced_tokens(self, state: State, max_bytes: int = 4096) -> list[int]:
        if state.is_terminated():
            return []
        probe = state._impl.fork()
        forced = bytearray()
        while len(forced) < max_bytes and not probe.is_accepting():
            nxt = [b for b in range(256) if probe.probe_bytes(bytes((b,)))]
            if len(nxt) != 1:
                break
            forced.append(nxt[0])
            probe.commit_bytes(bytes((nxt[0],)))
        return _determined_tokens(self, state, bytes(forced))


def _as_mask_buffer(out, n_words: int) -> np.ndarray:
    """A writable C-contiguous int32 ``(batch, >= n_words)`` NumPy view of ``out`` (NumPy array
    or CPU torch tensor) — or a clear error (wrong dtype, shape, device, read-only)."""
    arr = out
    if not isinstance(arr, np.ndarray):
        mod = type(out).__module__
        if mod.startswith("torch"):
            if out.device.type != "cpu":
                raise ValueError(f"out must be a CPU tensor (got one on {out.device}); fill on the host and copy")
            arr = out.numpy()
        else:
            raise TypeError(f"out must be a NumPy array or a torch tensor, got {type(out).__name__}")
    if arr.ndim != 2 or arr.dtype != np.int32 or arr.shape[1] < n_words:
        raise ValueError(f"out must be an int32 array of shape (batch, >= {n_words}), "
                         f"got {arr.dtype} {list(arr.shape)}")
    if not arr.flags.c_contiguous or not arr.flags.writeable:
        raise ValueError("out must be writable and C-contiguous")
    return arr


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

    ``mode``: see :class:`Mask`. ``limits``: budgets that end in :class:`GrammarTooComplex` naming
    the stage and the limit (:mod:`glrmask.budget` lists them and their defaults) —
    ``max_seconds`` for the whole compile (default 300; ``None``: no limit), ``max_memory_mb``
    (resident-memory growth), and per-stage dicts: ``grammar``, ``normalize``, ``lr``, ``lexer``,
    ``terminal_dwa``, ``parser_dwa``, ``dynamic`` (``max_step_transitions``: lexer entries one
    dynamic mask or commit may explore, default 200,000; ``max_memo_mb``: the lexeme memos' memory,
    default 256, 0 for none) and ``runtime`` (``max_stacks``: parser stacks one native step may keep,
    default 100,000). ``cache_dir``: reuse static compiles across processes (keyed by
    grammar, vocabulary, options and glrmask version; see :class:`glrmask.compile_cache.CompileCache`).
    ``on_stage(name, seconds, info)`` reports each compile stage as it ends."""
    with activate_budget(limits):  # one deadline and memory budget for every stage, front-end included
        grammar = load_grammar(source, format=format, start=start)
        return compile_grammar(grammar, vocab, mode=mode, limits=limits, cache_dir=cache_dir, on_stage=on_stage)


def compile_json_schema(
    schema,
    vocab: Vocab,
    *,
    mode: str = "auto",
    limits: Optional[dict] = None,
    cache_dir: "str | os.PathLike[str] | None" = None,
    on_stage: Optional[Callable[[str, float, dict], None]] = None,
    **schema_options,
) -> Mask:
    """Compile a JSON Schema (dict, JSON text, or a path) by lowering it to a grammar
    (:func:`glrmask.json_schema.json_schema_to_grammar` shows that grammar). ``schema_options`` go
    to :func:`glrmask.lower_json_schema` (``whitespace``, ``max_whitespace``, ``indent``,
    ``property_order``, ``lenient``, …); ``on_stage`` reports static compile stages as
    :func:`compile` does. Warnings of the lowering (ignored keywords in ``lenient``
    mode) are appended to ``mask.warnings``.

    The default is ``mode="auto"`` with a 30 s budget for the background static compile: schemas
    arrive per request and some are costly to compile statically (a string with ``maxLength:
    1024`` is a lexer state per length), so masks start at once and turn static when the compile
    fits its budget; pass ``mode="static"`` to compile up front (and be able to save)."""
    if mode == "auto" and limits is None:
        limits = {"max_seconds": 30.0}
    from .json_schema import lower_json_schema_ir

    with activate_budget(limits):
        # the IR directly: printing Lark text and parsing it again cost up to a second per schema
        grammar, warnings = lower_json_schema_ir(schema, **schema_options)
        grammar.warnings.extend(warnings)
        return compile_grammar(grammar, vocab, mode=mode, limits=limits, cache_dir=cache_dir, on_stage=on_stage)


def compile_grammar(grammar: Grammar, vocab: Vocab, *, mode: str = "static", limits: Optional[dict] = None,
                    cache_dir: "str | os.PathLike[str] | None" = None,
                    on_stage: Optional[Callable[[str, float, dict], None]] = None) -> Mask:
    """Compile an already-built grammar IR (front-ends that produce IR directly)."""
    with activate_budget(limits):
        if cache_dir is None or mode != "static":
            return Mask(grammar, vocab, mode=mode, limits=limits, on_stage=on_stage,
                        cache_dir=cache_dir if mode == "auto" else None)
        from .mask_artifact import cached_compile

        return cached_compile(grammar, vocab, cache_dir, limits=limits, on_stage=on_stage)


def fill_masks(states: "Sequence[State]", out, *, n_threads: Optional[int] = None) -> None:
    """Fill row ``i`` of the ``(batch, words)`` int32 array ``out`` (NumPy or CPU torch) with the
    mask of ``states[i]``; states may come from different masks. Native states are filled with
    the GIL released, split over ``n_threads`` threads (default: one per core this process may run
    on, at most one per 16 rows); rows past ``len(states)`` are left alone."""
    from .runtime.batch import default_threads, fill_native

    states = list(states)
    if not states:
        return
    n_words = max(st._mask.n_words for st in states) if all(isinstance(st, State) for st in states) else 0
    for st in states:
        if not isinstance(st, State):
            raise TypeError(f"fill_masks takes glrmask.State objects, got {type(st).__name__}")
    arr = _as_mask_buffer(out, n_words)
    if arr.shape[0] < len(states):
        raise ValueError(f"out has {arr.shape[0]} rows for {len(states)} states")
    for st in states:
        if st._mask._upgrade and st._impl.dynamic:
            st._mask._switch(st)
    if n_threads is None:
        n_threads = default_threads(len(states))
    need = fill_native([st._impl for st in states], arr.view(np.uint32), int(n_threads))
    for i in need:  # a static lane with no Parser-DWA root, or a dynamic lexer entry to explore
        states[i]._mask._fill_impl(states[i]._impl, arr[i])


def commit_many(states: "Sequence[State]", tokens: "Sequence[int]", *, n_threads: int = 1) -> list[bool]:
    """``[states[i].commit(tokens[i]) for i]``; native states commit with the GIL released."""
    from .runtime.batch import commit_native

    states = list(states)
    if len(states) != len(tokens):
        raise ValueError(f"{len(states)} states but {len(tokens)} tokens")
    ids = [_token_id(t, st._mask.n_logits) for st, t in zip(states, tokens)]
    if not states:
        return []
    res = commit_native([st._impl for st in states], np.asarray(ids, dtype=np.int64), int(n_threads))
    return [bool(r) for r in res]


def load(path: "str | os.PathLike[str]", vocab: Vocab) -> Mask:
    """A mask saved with :meth:`Mask.save` (``glrmask compile … -o path``), for ``vocab``."""
    return Mask.load(path, vocab)


__all__ = ["Mask", "State", "commit_many", "compile", "compile_grammar", "compile_json_schema", "fill_masks", "load"]
