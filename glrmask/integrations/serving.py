"""Engine-agnostic pieces of a serving integration: grammar specs per request, a bounded compile
cache that compiles off the engine loop, and a table of per-request decoding states.

A serving engine receives the grammar with each request (vLLM: ``SamplingParams.extra_args``),
keeps requests in slots of a persistent batch, and calls its logits processors once per step for
the whole batch. The engine adapters (:mod:`glrmask.integrations.vllm`) translate the engine's
calls into the three operations here:

* :class:`GrammarSpec` — what a request asks for, read and checked from its arguments;
* :class:`CompileCache` — ``spec -> Future[Mask]``: a new grammar is compiled in a worker thread
  as soon as the request arrives (in ``auto`` mode, so its first masks are available at once and
  the static compile finishes in the background); the same spec text is compiled once; the cache
  keeps the most recently used entries only;
* :class:`SlotTable` — slot -> (mask, state, tokens committed): requests added, removed, moved or
  swapped as the engine says, new output tokens committed, and the masks of a whole step written
  into one int32 bitmask with :func:`glrmask.fill_masks`.
"""
from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

import glrmask
from glrmask.api import Mask, State
from glrmask.errors import GlrmaskError
from glrmask.vocab import Vocab

__all__ = ["EXTRA_ARG_GRAMMAR", "EXTRA_ARG_JSON_SCHEMA", "EXTRA_ARG_FORMAT", "GrammarSpec",
           "CompileCache", "SlotTable"]

log = logging.getLogger("glrmask.serving")

#: Request argument holding a grammar (Lark, GBNF or regex text).
EXTRA_ARG_GRAMMAR = "glrmask_grammar"
#: Request argument holding a JSON Schema (an object or its JSON text).
EXTRA_ARG_JSON_SCHEMA = "glrmask_json_schema"
#: Optional grammar format: "lark", "gbnf", "regex" (default: decided from the text).
EXTRA_ARG_FORMAT = "glrmask_format"

_FORMATS = ("auto", "lark", "gbnf", "ebnf", "regex")


@dataclass(frozen=True)
class GrammarSpec:
    """A request's constraint: ``kind`` is "json_schema" or "grammar"; ``text`` is the canonical
    text (JSON Schemas re-serialised with sorted keys, so equal schemas share a cache entry)."""

    kind: str
    text: str
    format: str = "auto"

    @classmethod
    def from_args(cls, args: Optional[Mapping[str, Any]]) -> Optional["GrammarSpec"]:
        """The spec in a request's extra arguments; None when it asks for no constraint.

        Raises :class:`GlrmaskError` for both kinds at once, a wrong type or an unknown format."""
        if not args:
            return None
        grammar = args.get(EXTRA_ARG_GRAMMAR)
        schema = args.get(EXTRA_ARG_JSON_SCHEMA)
        if grammar is None and schema is None:
            return None
        if grammar is not None and schema is not None:
            raise GlrmaskError(f"give either {EXTRA_ARG_GRAMMAR} or {EXTRA_ARG_JSON_SCHEMA}, not both")
        fmt = args.get(EXTRA_ARG_FORMAT, "auto")
        if fmt not in _FORMATS:
            raise GlrmaskError(f"{EXTRA_ARG_FORMAT} must be one of {_FORMATS}, got {fmt!r}")
        if grammar is not None:
            if not isinstance(grammar, str) or not grammar.strip():
                raise GlrmaskError(f"{EXTRA_ARG_GRAMMAR} must be non-empty grammar text")
            return cls("grammar", grammar, fmt)
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise GlrmaskError(f"{EXTRA_ARG_JSON_SCHEMA} is not valid JSON: {exc}") from exc
        if not isinstance(schema, (dict, bool)):
            raise GlrmaskError(f"{EXTRA_ARG_JSON_SCHEMA} must be a JSON object, got {type(schema).__name__}")
        return cls("json_schema", json.dumps(schema, sort_keys=True, separators=(",", ":")))

    def check(self) -> None:
        """Parse the grammar / lower the schema without compiling (cheap; for request admission),
        so a malformed constraint fails its request with the front-end's message."""
        if self.kind == "grammar":
            glrmask.load_grammar(self.text, format=self.format)
        else:
            glrmask.json_schema.lower_json_schema_ir(json.loads(self.text))

    def compile(self, vocab: Vocab, mode: str = "auto") -> Mask:
        if self.kind == "grammar":
            return glrmask.compile(self.text, vocab, format=self.format, mode=mode)
        return glrmask.compile_json_schema(json.loads(self.text), vocab, mode=mode)


class CompileCache:
    """Bounded LRU of compiled masks keyed by :class:`GrammarSpec`, compiled in worker threads.

    ``get`` returns at once with a future; a failed compile is a future holding the error (and is
    not kept, so a later request tries again)."""

    def __init__(self, vocab: Vocab, *, max_entries: int = 64, mode: str = "auto", workers: int = 2):
        if max_entries < 1:
            raise GlrmaskError(f"max_entries must be at least 1, got {max_entries}")
        self.vocab = vocab
        self.mode = mode
        self.max_entries = max_entries
        self._entries: "OrderedDict[GrammarSpec, Future[Mask]]" = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="glrmask-compile")

    def get(self, spec: GrammarSpec) -> "Future[Mask]":
        with self._lock:
            future = self._entries.get(spec)
            if future is not None:
                self._entries.move_to_end(spec)
                return future
            future = self._pool.submit(spec.compile, self.vocab, self.mode)
            self._entries[spec] = future
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        future.add_done_callback(lambda f, s=spec: self._forget_failure(s, f))
        return future

    def _forget_failure(self, spec: GrammarSpec, future: "Future[Mask]") -> None:
        if future.exception() is not None:
            with self._lock:
                if self._entries.get(spec) is future:
                    del self._entries[spec]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, spec: GrammarSpec) -> bool:
        return spec in self._entries

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Slot:
    """A constrained request: its mask (once compiled), state, and output tokens committed."""

    __slots__ = ("future", "state", "committed", "failed")

    def __init__(self, future: "Future[Mask]"):
        self.future = future
        self.state: Optional[State] = None
        self.committed = 0
        self.failed = False

    def ready_state(self) -> Optional[State]:
        """The state, waiting for the compile if it is still running (only a request's first step
        can wait); None after a failed compile."""
        if self.state is None and not self.failed:
            try:
                self.state = self.future.result().start()
            except Exception as exc:  # noqa: BLE001 - a compile error ends just this request
                log.error("glrmask: compiling a request's constraint failed: %s", exc)
                self.failed = True
        return self.state


class SlotTable:
    """Per-slot decoding states of the constrained requests in a persistent batch.

    Slots are the engine's row or request indices; unconstrained requests have no entry. A
    request's output tokens are passed to :meth:`sync` (the whole list so far, or its new part via
    ``start``); tokens after an end token are ignored, and a token outside the mask (which only a
    later processor or a bug can produce) ends the constraint for that request with a log line."""

    def __init__(self, cache: CompileCache):
        self.cache = cache
        self._slots: dict[int, _Slot] = {}
        self._end_ids = tuple(cache.vocab.eos_token_ids)

    # ---- batch makeup ----------------------------------------------------------------------------

    def add(self, slot: int, spec: Optional[GrammarSpec]) -> bool:
        """(Re)initialise ``slot``; returns whether it is constrained."""
        self._slots.pop(slot, None)
        if spec is None:
            return False
        self._slots[slot] = _Slot(self.cache.get(spec))
        return True

    def remove(self, slot: int) -> None:
        self._slots.pop(slot, None)

    def move(self, src: int, dst: int) -> None:
        """The request in ``src`` now lives in ``dst`` (whatever was in ``dst`` is replaced)."""
        entry = self._slots.pop(src, None)
        self._slots.pop(dst, None)
        if entry is not None:
            self._slots[dst] = entry

    def swap(self, a: int, b: int) -> None:
        ea, eb = self._slots.pop(a, None), self._slots.pop(b, None)
        if ea is not None:
            self._slots[b] = ea
        if eb is not None:
            self._slots[a] = eb

    def __contains__(self, slot: int) -> bool:
        return slot in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def slots(self) -> list[int]:
        return list(self._slots)

    def committed(self, slot: int) -> int:
        """Output tokens of ``slot`` seen so far (committed, or ignored after the end)."""
        return self._slots[slot].committed

    # ---- one step ------------------------------------------------------------------------------

    def sync(self, slot: int, tokens: Sequence[int], start: int = 0) -> None:
        """Commit the output tokens ``tokens[committed - start:]`` of ``slot``: ``tokens`` are its
        output tokens from position ``start`` on (the whole output when ``start`` is 0)."""
        entry = self._slots.get(slot)
        if entry is None:
            return
        state = entry.ready_state()
        if state is None:
            return
        new = tokens[entry.committed - start:]
        for t in new:
            entry.committed += 1
            if state.is_terminated():
                continue
            if not state.commit(int(t)):
                log.error("glrmask: slot %d produced token %d outside its mask; constraint dropped", slot, t)
                entry.failed = True
                entry.state = None
                return

    def fill(self, rows: Sequence[int], slots: Sequence[int], bitmask: np.ndarray) -> list[int]:
        """Write the masks of ``slots`` into ``bitmask[rows]``; returns the rows to apply (the
        constrained ones whose state exists). A terminated request gets only its end tokens, a
        failed compile only the end tokens (the request ends at once)."""
        live_rows: list[int] = []
        live_states: list[State] = []
        ended_rows: list[int] = []
        for row, slot in zip(rows, slots):
            entry = self._slots.get(slot)
            if entry is None:
                continue
            state = entry.ready_state()
            if state is None:
                if entry.failed and entry.future.done() and entry.future.exception() is not None:
                    ended_rows.append(row)
                continue
            if state.is_terminated():
                ended_rows.append(row)
            else:
                live_rows.append(row)
                live_states.append(state)
        if live_states:
            compact = np.empty((len(live_states), bitmask.shape[1]), dtype=np.int32)
            glrmask.fill_masks(live_states, compact)
            bitmask[live_rows] = compact
        if ended_rows:
            bitmask[ended_rows] = 0
            words = bitmask.view(np.uint32)
            for t in self._end_ids:
                words[ended_rows, t >> 5] |= np.uint32(1 << (t & 31))
        return live_rows + ended_rows
