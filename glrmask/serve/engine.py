"""The decode engine: continuous batching over a transformers causal LM with grammar masks, phrase
bans (with rewind) and no-repeat-ngram bans applied together on every step.

One step of the engine, for every active request at once:

1. **Forward.** Requests that just joined are prefilled in one forward (prompts left-padded);
   requests with one pending token (including those that just rewound) are decoded in one batched
   forward (their KV caches stacked, left-padded, with per-row positions; the stack is kept while
   the same requests keep decoding together). Each request has its own cache again as soon as the
   group changes, so joining, leaving and rewinding never disturb the others. On a GPU the
   forward's kernels are only launched here and nothing waits for them before the masks are filled,
   so the CPU computes masks while the GPU computes logits.
2. **Masks.** Grammar-constrained rows are filled in one ``glrmask.fill_masks`` call; then each
   row's phrase-guard bans (tokens banned at this position after a rewind) and no-repeat-ngram bans
   are cleared from it, and ``glrmask.apply_token_bitmask_`` applies all rows at once.
3. **Sampling.** :class:`~glrmask.serve.sampler.BatchSampler`, one pass, parameters per row.
4. **Commit.** The token goes to the grammar state, the n-gram guard and the phrase guard. On a
   phrase match the guard says how many tokens to drop: the request's KV cache is cropped by that
   many, the grammar state and the n-gram guard roll back the same count, and the next step
   samples again at that position with the offending token banned there (for this request only).
   What the guard releases goes through the detokenizer (complete UTF-8, stop strings) to the
   request's sink.

A request that cannot continue (the grammar and the bans leave no token, the rewind budget is
spent, a stop token completes a phrase) ends with ``finish_reason="error"`` and the error, never
a hang; the other requests carry on.

Reproducibility: the sampler draws a seeded request's noise from its own generator, so given the
same logits its tokens do not depend on the batch. The batched forward itself computes the same
logits as a forward alone only up to float rounding (different matrix shapes); with
``batch_invariant=True`` every request is forwarded alone, so a seeded request's output is
bit-identical alone or in any batch, at the cost of the batched forward's throughput.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

import glrmask
from glrmask.errors import GlrmaskError
from glrmask.guards import NoRepeatNGram, PhraseBanError, PhraseGuard
from glrmask.vocab import Vocab

from .detokenizer import IncrementalDetokenizer
from .sampler import BatchSampler, SamplingParams, TokenLogprob

__all__ = [
    "Completion",
    "Engine",
    "EngineStats",
    "GenerationError",
    "GenerationRequest",
    "RequestOutput",
]

log = logging.getLogger("glrmask.serve")


class GenerationError(GlrmaskError):
    """A request could not continue (the message says why); it ends with ``finish_reason="error"``."""


class RequestError(GlrmaskError, ValueError):
    """A request is malformed (empty prompt, too long for the model); refused before it starts."""


@dataclass(slots=True)
class GenerationRequest:
    """One generation: the prompt's token ids and everything that constrains the output.

    ``mask``: a compiled grammar (``glrmask.compile`` / ``compile_json_schema``), or None. The
    sequence ends at an end token (only allowed by the grammar where it accepts), at a stop string,
    or after ``max_tokens`` tokens.
    """

    prompt_ids: Sequence[int]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = 256
    stop: Sequence[str] = ()
    mask: glrmask.Mask | None = None
    phrase_guard: PhraseGuard | None = None
    no_repeat_ngram: NoRepeatNGram | None = None
    request_id: str = ""


@dataclass(slots=True)
class RequestOutput:
    """What a request's sink receives: new final text, and at the end why it ended."""

    request_id: str
    text: str
    token_ids: list[int]
    """Tokens whose text is now fully released (in order)."""
    logprobs: list[TokenLogprob] | None
    """One entry per token of ``token_ids`` when the request asked for logprobs."""
    finished: bool = False
    finish_reason: str | None = None
    """``"stop"`` (end token or stop string), ``"length"``, ``"error"`` or ``"cancelled"``."""
    error: GlrmaskError | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(slots=True)
class Completion:
    """The whole result of a request (what :meth:`Engine.generate` returns)."""

    request_id: str
    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprob] | None
    finish_reason: str
    error: GlrmaskError | None
    prompt_tokens: int
    completion_tokens: int
    chunks: list[str]


@dataclass(slots=True)
class EngineStats:
    """Seconds spent in each part of the steps so far, and counters."""

    forward: float = 0.0
    masks: float = 0.0
    guards: float = 0.0
    sampling: float = 0.0
    commit: float = 0.0
    steps: int = 0
    sampled_tokens: int = 0
    rewinds: int = 0
    relaxed_ngram_steps: int = 0
    cancelled: int = 0
    failed: int = 0

    def shares(self) -> dict[str, float]:
        """Fraction of the step time in forward, masks, guards, sampling and commit."""
        total = self.forward + self.masks + self.guards + self.sampling + self.commit
        parts = ("forward", "masks", "guards", "sampling", "commit")
        return {p: (getattr(self, p) / total if total else 0.0) for p in parts}


class _Active:
    """One running request: its KV cache, grammar state, guards, detokenizer and sink."""

    __slots__ = (
        "req", "sink", "rid", "prompt", "generated", "cache", "pending", "grammar", "phrase",
        "ngram", "generator", "detok", "released", "n_prompt", "wants_logprobs", "done",
    )

    def __init__(self, req: GenerationRequest, sink: Callable[[RequestOutput], None], rid: str,
                 vocab: Vocab, device: torch.device) -> None:
        self.req = req
        self.sink = sink
        self.rid = rid
        self.prompt = [int(t) for t in req.prompt_ids]
        self.n_prompt = len(self.prompt)
        self.generated: list[int] = []
        self.cache: Any = None
        self.pending: list[int] = list(self.prompt)
        self.grammar = req.mask.start() if req.mask is not None else None
        guard = req.phrase_guard
        self.phrase = guard.start(vocab) if guard is not None and guard.phrases else None
        ngram = req.no_repeat_ngram
        self.ngram = ngram.start(self.prompt) if ngram is not None and ngram.n > 0 else None
        self.generator = req.sampling.generator(device)
        self.detok = IncrementalDetokenizer(vocab, req.stop)
        self.released: deque[tuple[int, TokenLogprob | None]] = deque()  # text not fully out yet
        self.wants_logprobs = req.sampling.logprobs is not None
        self.done = False

    @property
    def needs_mask(self) -> bool:
        if self.grammar is not None or self.ngram is not None:
            return True
        return self.phrase is not None and bool(self.phrase.banned_tokens(self.phrase.position))


@dataclass(slots=True)
class _DecodeGroup:
    """Requests decoded together step after step, sharing one stacked, left-padded KV cache."""

    rows: list[_Active]
    cache: Any
    offsets: list[int]
    """Per row, the padding columns in front of its cache."""


class Engine:
    """Continuous-batching decode engine over one transformers causal LM.

    ``model``: a ``transformers`` causal LM (eval mode is set); ``vocab``: the glrmask vocabulary
    of its tokenizer with ``n_logits`` equal to the model's logits width. ``max_batch``: requests
    decoded together (others wait). ``seed``: seeds the shared generator of unseeded requests.

    Use it either synchronously (:meth:`generate`) or as a background loop (:meth:`start`, then
    :meth:`submit` from any thread; sinks are called on the engine thread and must not block).
    """

    def __init__(self, model: Any, vocab: Vocab, *, max_batch: int = 16, seed: int | None = None,
                 batch_invariant: bool = False) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.model = model.eval()
        self.vocab = vocab
        self.device = next(model.parameters()).device
        self.max_batch = max_batch
        self.batch_invariant = batch_invariant
        head = model.get_output_embeddings()
        width = int(head.weight.shape[0]) if head is not None else int(model.config.vocab_size)
        probe = _new_cache(model)
        if any(probe.is_sliding) or any(type(layer).__name__ != "DynamicLayer" for layer in probe.layers):
            raise ValueError(
                "this engine serves models whose every layer keeps a full-attention KV cache (so a rewind "
                f"can crop it); {type(model).__name__} has sliding-window or recurrent layers"
            )
        if vocab.n_logits != width:
            raise ValueError(
                f"the vocabulary's n_logits ({vocab.n_logits}) must equal the model's logits width "
                f"({width}); build it with Vocab.from_hf(tokenizer, n_logits={width})"
            )
        self.n_logits = width
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._eos = frozenset(vocab.eos_token_ids)
        shared = torch.Generator(device=self.device)
        shared.manual_seed(seed if seed is not None else int(torch.randint(0, 2**62, ()).item()))
        self.sampler = BatchSampler(shared)
        self.stats = EngineStats()
        self._active: list[_Active] = []
        self._waiting: deque[_Active] = deque()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._wake = threading.Condition()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._bitmask = glrmask.allocate_token_bitmask(max_batch, width)
        self._group: _DecodeGroup | None = None

    # ----------------------------------------------------------------------------- public API
    def submit(self, req: GenerationRequest, sink: Callable[[RequestOutput], None]) -> str:
        """Queue a request (thread-safe); returns its id. Malformed requests raise :class:`RequestError`."""
        self._check(req)
        rid = req.request_id or f"req-{next(self._ids)}"
        active = _Active(req, sink, rid, self.vocab, self.device)
        with self._wake:
            self._inbox.append(("add", active))
            self._wake.notify()
        return rid

    def cancel(self, request_id: str) -> None:
        """Stop a request and free its state at the next step (thread-safe; unknown ids are ignored)."""
        with self._wake:
            self._inbox.append(("cancel", request_id))
            self._wake.notify()

    def has_work(self) -> bool:
        return bool(self._active or self._waiting or self._inbox)

    def generate(self, requests: Iterable[GenerationRequest]) -> list[Completion]:
        """Run requests to completion on the calling thread (not with a background loop running)."""
        if self._thread is not None:
            raise RuntimeError("generate() cannot run while the background loop is running")
        results: dict[str, list[RequestOutput]] = {}
        order = []
        for req in requests:
            rid = self.submit(req, lambda out: results.setdefault(out.request_id, []).append(out))
            order.append(rid)
        while self.has_work():
            self.step()
        return [_completion(rid, results.get(rid, [])) for rid in order]

    def start(self) -> None:
        """Run the engine loop on a background daemon thread."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="glrmask-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background loop (running requests are cancelled)."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def step(self) -> None:
        """One decode step for every active request (admits waiting ones first)."""
        self._drain_inbox()
        while self._waiting and len(self._active) < self.max_batch:
            self._active.append(self._waiting.popleft())
        if not self._active:
            return
        # Constrained rows first, so that fill_masks writes rows 0..k-1 of the bitmask.
        self._active.sort(key=lambda a: a.grammar is None)
        batch = list(self._active)
        self.stats.steps += 1
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                logits = self._forward(batch)
        except Exception as exc:  # a model failure ends these requests, not the server
            log.exception("forward pass failed")
            for a in batch:
                self._fail(a, GenerationError(f"the model's forward pass failed: {exc}"))
            return
        t1 = time.perf_counter()
        self.stats.forward += t1 - t0
        logits = logits.float()
        raw = None
        lp_rows = [i for i, a in enumerate(batch) if a.wants_logprobs]
        if lp_rows:  # the model's own distribution, before any mask
            raw = logits[lp_rows].clone()
        if self.vocab.size < self.n_logits:  # padding ids are never text
            logits[:, self.vocab.size:] = float("-inf")
        alive = self._apply_masks(batch, logits)
        t3 = time.perf_counter()
        tokens = self.sampler.sample(logits, [a.req.sampling for a in batch],
                                     [a.generator for a in batch]).tolist()
        lps: dict[int, TokenLogprob] = {}
        if raw is not None:
            rows = [i for i in lp_rows if alive[i]]
            pos = [lp_rows.index(i) for i in rows]
            if rows:
                got = BatchSampler.logprobs(raw[pos], [tokens[i] for i in rows],
                                            [batch[i].req.sampling.logprobs or 0 for i in rows])
                lps = dict(zip(rows, got))
        t4 = time.perf_counter()
        self.stats.sampling += t4 - t3
        for i, a in enumerate(batch):
            if not alive[i]:
                continue
            try:
                self._commit(a, tokens[i], lps.get(i))
            except GlrmaskError as exc:
                self._fail(a, exc)
            except Exception as exc:  # a bug must not take the other requests down
                log.exception("request %s failed", a.rid)
                self._fail(a, GenerationError(f"internal error: {type(exc).__name__}: {exc}"))
        self.stats.commit += time.perf_counter() - t4

    # ----------------------------------------------------------------------------- loop
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self.has_work():
                    self._wake.wait()
                if self._stopping:
                    break
            try:
                self.step()
            except Exception as exc:  # the loop must survive: end what was running, keep serving
                log.exception("engine step failed")
                for a in list(self._active):
                    self._fail(a, GenerationError(f"internal error in the engine step: {type(exc).__name__}: {exc}"))
        self._drain_inbox()
        for a in list(self._active) + list(self._waiting):
            self._finish(a, "cancelled")

    def _drain_inbox(self) -> None:
        while True:
            with self._wake:
                if not self._inbox:
                    return
                kind, item = self._inbox.popleft()
            if kind == "add":
                self._waiting.append(item)
            else:
                for pool in (self._active, self._waiting):
                    for a in list(pool):
                        if a.rid == item:
                            self._finish(a, "cancelled")

    def _check(self, req: GenerationRequest) -> None:
        if not req.prompt_ids:
            raise RequestError("the prompt is empty: at least one token is needed")
        if isinstance(req.max_tokens, bool) or not isinstance(req.max_tokens, int) or req.max_tokens < 1:
            raise RequestError(f"max_tokens must be an int >= 1, got {req.max_tokens!r}")
        bad = [t for t in req.prompt_ids if not 0 <= int(t) < self.n_logits]
        if bad:
            raise RequestError(f"prompt token ids outside [0, {self.n_logits}): {bad[:5]}")
        if self.max_positions and len(req.prompt_ids) + req.max_tokens > self.max_positions:
            raise RequestError(
                f"the prompt ({len(req.prompt_ids)} tokens) plus max_tokens ({req.max_tokens}) exceeds "
                f"the model's context of {self.max_positions} tokens"
            )
        if req.mask is not None and req.mask.vocab.fingerprint != self.vocab.fingerprint:
            raise RequestError("the grammar was compiled for another vocabulary than the model's")

    # ----------------------------------------------------------------------------- forward
    def _forward(self, batch: list[_Active]) -> torch.Tensor:
        """Next-token logits ``(batch, n_logits)``: new requests prefilled together, the others
        decoded together (or each alone when ``batch_invariant``)."""
        out = torch.empty((len(batch), self.n_logits), dtype=torch.float32, device=self.device)
        decode = [i for i, a in enumerate(batch) if a.cache is not None and len(a.pending) == 1]
        prefill = [i for i in range(len(batch)) if _is_new(batch[i])]
        alone = [i for i in range(len(batch)) if i not in set(decode) | set(prefill)]
        if self.batch_invariant:
            alone, decode, prefill = list(range(len(batch))), [], []
        if len(decode) == 1:
            alone, decode = alone + decode, []
        if len(prefill) == 1:
            alone, prefill = alone + prefill, []
        if any(self._grouped(batch[i]) for i in alone):
            self._dissolve()
        for i in alone:
            a = batch[i]
            if a.cache is None:
                a.cache = _new_cache(self.model)
            ids = torch.tensor([a.pending], device=self.device)
            res = self.model(input_ids=ids, cache=a.cache, use_cache=True, logits_to_keep=1)
            out[i] = res.logits[0, -1]
            a.pending = []
        if prefill:
            out[prefill] = self._prefill_batch([batch[i] for i in prefill])
        if decode:
            out[decode] = self._decode_batch([batch[i] for i in decode])
        return out

    def _prefill_batch(self, rows: list[_Active]) -> torch.Tensor:
        """The prompts of new requests in one forward (left-padded); each gets its own cache."""
        lens = [len(a.pending) for a in rows]
        longest = max(lens)
        ids = torch.zeros((len(rows), longest), dtype=torch.long, device=self.device)
        attn = torch.zeros((len(rows), longest), dtype=torch.long, device=self.device)
        for i, (a, n) in enumerate(zip(rows, lens)):
            ids[i, longest - n:] = torch.tensor(a.pending, device=self.device)
            attn[i, longest - n:] = 1
        pos = (attn.cumsum(-1) - 1).clamp_min(0)
        cache = _new_cache(self.model)
        res = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, cache=cache, use_cache=True,
                         logits_to_keep=1)
        for i, (a, n) in enumerate(zip(rows, lens)):
            data = [(layer.keys[i:i + 1, :, longest - n:].contiguous(),
                     layer.values[i:i + 1, :, longest - n:].contiguous()) for layer in cache.layers]
            a.cache = _new_cache(self.model, data)
            a.pending = []
        return res.logits[:, -1]

    def _decode_batch(self, rows: list[_Active]) -> torch.Tensor:
        """One token for each row in one forward: caches stacked and left-padded, positions per row.

        The stacked cache is kept while the same requests keep decoding together (the usual case
        between joins, leaves and rewinds), so a step costs one forward and no restacking; any
        change dissolves it back into per-request caches first (:meth:`_dissolve`).
        """
        group = self._group
        if group is None or len(group.rows) != len(rows) or any(x is not y for x, y in zip(group.rows, rows)):
            self._dissolve()
            caches = [a.cache for a in rows]
            lens = [c.get_seq_length() for c in caches]
            longest = max(lens)
            data = []
            for li in range(len(caches[0].layers)):
                ks = [F.pad(c.layers[li].keys, (0, 0, longest - n, 0)) for c, n in zip(caches, lens)]
                vs = [F.pad(c.layers[li].values, (0, 0, longest - n, 0)) for c, n in zip(caches, lens)]
                data.append((torch.cat(ks), torch.cat(vs)))
            group = self._group = _DecodeGroup(list(rows), _new_cache(self.model, data),
                                               [longest - n for n in lens])
        width = group.cache.get_seq_length()
        attn = torch.ones((len(rows), width + 1), dtype=torch.long, device=self.device)
        for i, pad in enumerate(group.offsets):
            attn[i, :pad] = 0
        ids = torch.tensor([[a.pending[0]] for a in rows], device=self.device)
        pos = torch.tensor([width - pad for pad in group.offsets], device=self.device)[:, None]
        res = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, cache=group.cache,
                         use_cache=True, logits_to_keep=1)
        for a in rows:
            a.pending = []
        return res.logits[:, -1]

    def _dissolve(self) -> None:
        """Give every request of the decode group its own cache again (its rows of the stacked one)."""
        group, self._group = self._group, None
        if group is None:
            return
        for i, (a, pad) in enumerate(zip(group.rows, group.offsets)):
            if not a.done:
                a.cache = _new_cache(self.model, [(layer.keys[i:i + 1, :, pad:], layer.values[i:i + 1, :, pad:])
                                                  for layer in group.cache.layers])

    def _grouped(self, a: _Active) -> bool:
        return self._group is not None and any(x is a for x in self._group.rows)

    # ----------------------------------------------------------------------------- masks
    def _apply_masks(self, batch: list[_Active], logits: torch.Tensor) -> list[bool]:
        """Grammar ∧ phrase bans ∧ n-gram bans into the logits; False for rows that cannot go on."""
        alive = [True] * len(batch)
        t0 = time.perf_counter()
        if len(batch) > self._bitmask.shape[0]:
            self._bitmask = glrmask.allocate_token_bitmask(len(batch), self.n_logits)
        bits = self._bitmask
        grammar_rows = [i for i, a in enumerate(batch) if a.grammar is not None]
        if grammar_rows:  # they come first (see step)
            glrmask.fill_masks([batch[i].grammar for i in grammar_rows], bits)
        t1 = time.perf_counter()
        self.stats.masks += t1 - t0
        rows = []
        for i, a in enumerate(batch):
            if not a.needs_mask:
                continue
            row = bits[i]
            if a.grammar is None:
                row[:] = -1
            elif not row.any():
                alive[i] = False
                self._fail(a, GenerationError(
                    f"the grammar allows no token after {len(a.generated)} generated tokens"))
                continue
            try:
                if a.phrase is not None:
                    a.phrase.fill_banned(row, a.phrase.position)
            except PhraseBanError as exc:
                alive[i] = False
                self._fail(a, exc)
                continue
            if a.ngram is not None:
                self.stats.relaxed_ngram_steps += a.ngram.fill_banned(row).relaxed
            rows.append(i)
        if rows:
            glrmask.apply_token_bitmask_(logits, bits, indices=rows)
        self.stats.guards += time.perf_counter() - t1
        return alive

    # ----------------------------------------------------------------------------- commit
    def _commit(self, a: _Active, tok: int, lp: TokenLogprob | None) -> None:
        if tok < 0:
            raise GenerationError(
                f"no token has a finite probability after {len(a.generated)} generated tokens")
        self.stats.sampled_tokens += 1
        if tok in self._eos:
            if a.grammar is not None and not a.grammar.commit(tok):
                raise GenerationError(f"the grammar refused the end token {tok}")
            released = a.phrase.finish() if a.phrase is not None else None
            if released is not None:
                self._release(a, released.released_tokens, released.released_logprobs)
            self._finish(a, "stop")
            return
        if a.grammar is not None and not a.grammar.commit(tok):
            raise GenerationError(f"the grammar refused token {tok}, which its mask allowed")
        if a.ngram is not None:
            a.ngram.push(tok)
        a.generated.append(tok)
        if a.phrase is None:
            self._release(a, [tok], [lp])
        else:
            t0 = time.perf_counter()
            ev = a.phrase.push(tok, lp)
            self.stats.guards += time.perf_counter() - t0
            if ev.rewind:
                self._rewind(a, ev.rewind)
                return
            self._release(a, ev.released_tokens, ev.released_logprobs)
        if a.done:  # finished by a stop string in _release
            return
        if len(a.generated) >= a.req.max_tokens:
            if a.phrase is not None:
                ev = a.phrase.finish()
                self._release(a, ev.released_tokens, ev.released_logprobs)
            if not a.done:
                self._finish(a, "length")
            return
        a.pending = [tok]

    def _rewind(self, a: _Active, k: int) -> None:
        """Drop the last ``k`` tokens everywhere: KV cache, grammar, n-gram guard, history."""
        self.stats.rewinds += 1
        if self._grouped(a):
            self._dissolve()
        # The cache holds the prompt and every generated token but the newest (fed next step);
        # afterwards it must hold all but the last retained token, which is fed again: k fewer.
        a.cache.crop(-k)
        if a.grammar is not None:
            a.grammar.rollback(k)
        if a.ngram is not None:
            a.ngram.rollback(k)
        del a.generated[len(a.generated) - k:]
        a.pending = [a.generated[-1] if a.generated else a.prompt[-1]]

    def _release(self, a: _Active, tokens: list[int], lps: list[Any]) -> None:
        """Tokens that are final go through the detokenizer to the sink."""
        if not tokens:
            return
        a.released.extend(zip(tokens, lps))
        chunk = a.detok.push(tokens)
        self._emit(a, chunk.text, chunk.n_tokens)
        if a.detok.stopped:
            self._finish(a, "stop")

    def _emit(self, a: _Active, text: str, n_tokens: int, finish_reason: str | None = None,
              error: GlrmaskError | None = None) -> None:
        toks = []
        lps = [] if a.wants_logprobs else None
        for _ in range(min(n_tokens, len(a.released))):
            tok, lp = a.released.popleft()
            toks.append(tok)
            if lps is not None and lp is not None:
                lps.append(lp)
        if not text and not toks and finish_reason is None:
            return
        a.sink(RequestOutput(a.rid, text, toks, lps, finish_reason is not None, finish_reason, error,
                             a.n_prompt, len(a.generated)))

    def _finish(self, a: _Active, reason: str, error: GlrmaskError | None = None) -> None:
        if a.done:
            return
        a.done = True
        if self._grouped(a):
            self._dissolve()
        tail = a.detok.finish() if reason != "error" and reason != "cancelled" else None
        for pool in (self._active, self._waiting):
            if a in pool:
                pool.remove(a)
        a.cache = None  # free the KV cache now
        if reason == "cancelled":
            self.stats.cancelled += 1
        elif reason == "error":
            self.stats.failed += 1
        self._emit(a, tail.text if tail else "", tail.n_tokens if tail else 0, reason, error)

    def _fail(self, a: _Active, exc: GlrmaskError) -> None:
        self._finish(a, "error", exc)


def _is_new(a: _Active) -> bool:
    """A request that has not been through the model yet (its whole prompt is pending)."""
    return a.cache is None


def _new_cache(model: Any, data: list | None = None) -> Any:
    from transformers import DynamicCache

    if data is None:
        return DynamicCache(config=model.config)
    return DynamicCache(ddp_cache_data=data)


def _completion(rid: str, outs: list[RequestOutput]) -> Completion:
    text = "".join(o.text for o in outs)
    toks = [t for o in outs for t in o.token_ids]
    lps = None
    if outs and outs[-1].logprobs is not None:
        lps = [lp for o in outs for lp in (o.logprobs or [])]
    last = outs[-1] if outs else RequestOutput(rid, "", [], None, True, "cancelled")
    return Completion(rid, text, toks, lps, last.finish_reason or "cancelled", last.error,
                      last.prompt_tokens, last.completion_tokens, [o.text for o in outs if o.text])
