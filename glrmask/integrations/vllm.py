"""glrmask as a vLLM custom logits processor, configured per request through ``extra_args``.

Start the server with the processor loaded (vLLM >= 0.32, whose default Model Runner V2 has its own
interface; the legacy runner is ``VLLM_USE_V2_MODEL_RUNNER=0``)::

    vllm serve HuggingFaceTB/SmolLM2-135M-Instruct \\
        --logits-processors glrmask.integrations.vllm:GlrmaskLogitsProcessor
    # legacy V1 model runner:
    VLLM_USE_V2_MODEL_RUNNER=0 vllm serve ... \\
        --logits-processors glrmask.integrations.vllm:GlrmaskV1LogitsProcessor

and constrain a request with ``vllm_xargs`` (REST) or ``SamplingParams(extra_args=...)`` (offline)::

    {"vllm_xargs": {"glrmask_json_schema": "{\\"type\\": \\"object\\", ...}"}}
    SamplingParams(max_tokens=200, extra_args={"glrmask_grammar": 'start: "yes" | "no"'})

Keys: ``glrmask_json_schema`` (object or JSON text), ``glrmask_grammar`` (Lark / GBNF / regex
text), ``glrmask_format`` (optional: lark, gbnf, regex). Requests without them are untouched.

What happens per request and per step:

* **Admission** (``validate_params``, in the API server): the grammar is parsed or the schema
  lowered, so a malformed constraint fails its request with the front-end's error message.
* **Added to the batch**: its spec is looked up in a bounded LRU compile cache keyed by the
  canonical spec text (``GLRMASK_VLLM_CACHE_SIZE``, default 64); a new one is compiled in a worker
  thread in ``auto`` mode (``GLRMASK_VLLM_MODE``) while the prompt is prefilled, so the engine loop
  never compiles; its first masks come from the dynamic engine and later requests get the static
  artifact when its background compile ends.
* **Each step**: the new output tokens of every constrained request are committed to its state,
  all their masks are written into one int32 bitmask by :func:`glrmask.fill_masks`, copied to the
  device once, and applied by one :func:`glrmask.apply_token_bitmask_` (one Triton kernel on
  CUDA). An ended request is held to its end tokens; a constraint that failed to compile in the
  engine ends its request at once (the error is logged).

The vocabulary is the served model's tokenizer, read with transformers, widened to the model's
logits width, with the end ids of its generation config.

The two engine-facing classes exist only where vLLM is importable; the logic behind them is
:class:`BatchUpdateLogic` (legacy runner: ``BatchUpdate`` ledger of added / removed / moved rows,
each added request bringing a live reference to its output-token list) and :class:`SlotLogic`
(Model Runner V2: requests in fixed slots re-initialised by ``add_request``, a row-to-slot mapping
per step, token history in the runner's device buffer). They take the engine's objects by duck
typing, so the tests drive them with the same calls vLLM makes.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

import numpy as np

import glrmask
from glrmask.errors import GlrmaskError
from glrmask.integrations.serving import CompileCache, GrammarSpec, SlotTable
from glrmask.vocab import Vocab

__all__ = ["BatchUpdateLogic", "SlotLogic", "vocab_for_vllm", "validate_sampling_params"]

log = logging.getLogger("glrmask.vllm")

_CACHE_SIZE_ENV = "GLRMASK_VLLM_CACHE_SIZE"
_MODE_ENV = "GLRMASK_VLLM_MODE"


def _cache_from_env(vocab: Vocab) -> CompileCache:
    size = int(os.environ.get(_CACHE_SIZE_ENV, "64"))
    mode = os.environ.get(_MODE_ENV, "auto")
    return CompileCache(vocab, max_entries=size, mode=mode)


def validate_sampling_params(sampling_params: Any) -> None:
    """``ValueError`` (vLLM's convention for rejecting a request) for a malformed constraint."""
    try:
        spec = GrammarSpec.from_args(getattr(sampling_params, "extra_args", None))
        if spec is not None:
            spec.check()
    except GlrmaskError as exc:
        raise ValueError(f"glrmask: {exc}") from exc


def vocab_for_vllm(vllm_config: Any) -> Vocab:
    """The served model's vocabulary: its tokenizer (transformers), the logits width vLLM uses and
    the end ids of the model's generation config."""
    model_config = vllm_config.model_config
    try:
        import transformers  # noqa: PLC0415 - vLLM depends on it
    except ImportError as exc:  # pragma: no cover
        raise GlrmaskError("glrmask's vLLM processor needs transformers") from exc
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        model_config.tokenizer,
        revision=getattr(model_config, "tokenizer_revision", None),
        trust_remote_code=bool(getattr(model_config, "trust_remote_code", False)),
    )
    generation_config = None
    getter = getattr(model_config, "try_get_generation_config", None)
    if callable(getter):
        try:
            generation_config = getter()
        except Exception:  # noqa: BLE001 - optional information
            generation_config = None
    return Vocab.from_hf(tokenizer, n_logits=int(model_config.get_vocab_size()),
                         generation_config=generation_config or None)


class _Applier:
    """One host bitmask per batch size, filled and applied once per step."""

    def __init__(self, table: SlotTable, n_logits: int):
        self.table = table
        self.words = (n_logits + 31) // 32
        self._host: Optional[np.ndarray] = None

    def apply(self, logits: Any, rows: list[int], slots: list[int]) -> Any:
        if not rows:
            return logits
        n = logits.shape[0]
        if self._host is None or self._host.shape[0] < n:
            self._host = _host_buffer(max(n, 1), self.words)
        bitmask = self._host[:n]
        applied = self.table.fill(rows, slots, bitmask)
        if applied:
            glrmask.apply_token_bitmask_(logits, bitmask, applied)
        return logits


def _host_buffer(rows: int, words: int) -> np.ndarray:
    """Pinned host memory when CUDA is present (the copy to the device is then asynchronous)."""
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            return torch.empty((rows, words), dtype=torch.int32, pin_memory=True).numpy()
    except ImportError:  # pragma: no cover
        pass
    return np.empty((rows, words), dtype=np.int32)


# ---- legacy V1 model runner: BatchUpdate ledger ----------------------------------------------------


class BatchUpdateLogic:
    """vLLM's legacy logits-processor protocol over a :class:`SlotTable` keyed by batch row.

    ``update_state(batch_update)`` processes ``removed``, then ``added`` (``(row, params,
    prompt_ids, output_ids)``, ``output_ids`` being the request's live output list), then
    ``moved`` (``(a, b, directionality)``: one-way a -> b or a swap); ``apply(logits)`` commits the
    new output tokens and masks the constrained rows."""

    def __init__(self, vocab: Vocab, cache: Optional[CompileCache] = None):
        self.vocab = vocab
        self.table = SlotTable(cache or _cache_from_env(vocab))
        self._outputs: dict[int, Any] = {}
        self._applier = _Applier(self.table, vocab.n_logits)

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes which token greedy decoding picks

    def update_state(self, batch_update: Any) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.table.remove(row)
            self._outputs.pop(row, None)
        for row, params, _prompt, output in batch_update.added:
            spec = GrammarSpec.from_args(getattr(params, "extra_args", None))
            self._outputs.pop(row, None)
            if self.table.add(row, spec):
                self._outputs[row] = output
        for a, b, direction in batch_update.moved:
            if _is_swap(direction):
                self.table.swap(a, b)
                oa, ob = self._outputs.pop(a, None), self._outputs.pop(b, None)
                if oa is not None:
                    self._outputs[b] = oa
                if ob is not None:
                    self._outputs[a] = ob
            else:
                self.table.move(a, b)
                out = self._outputs.pop(a, None)
                self._outputs.pop(b, None)
                if out is not None:
                    self._outputs[b] = out

    def apply(self, logits: Any) -> Any:
        rows = [r for r in self.table.slots if r < logits.shape[0]]
        for r in rows:
            self.table.sync(r, self._outputs[r])
        return self._applier.apply(logits, rows, rows)


def _is_swap(direction: Any) -> bool:
    return getattr(direction, "name", str(direction)).upper().endswith("SWAP")


# ---- Model Runner V2: fixed slots, row -> slot mapping per step -------------------------------------


class SlotLogic:
    """vLLM's Model Runner V2 protocol over a :class:`SlotTable` keyed by request slot.

    ``add_request(slot, params)`` (re)initialises a slot; ``apply(logits, ctx)`` reads the new
    output tokens of the constrained requests from the runner's token history
    (``req_states.all_token_ids`` on the device, ``prompt_len`` on the host, the sequence length
    from ``ctx.seq_lens_upper_bound_np``), commits them, and masks row ``i`` with the state of
    slot ``ctx.idx_mapping_np[i]``. Rows of requests still prefilling are left alone (their sample
    is discarded). Speculative decoding (several rows per request) is refused at construction."""

    def __init__(self, vocab: Vocab, req_states: Any, cache: Optional[CompileCache] = None):
        self.vocab = vocab
        self.req_states = req_states
        self.table = SlotTable(cache or _cache_from_env(vocab))
        self._applier = _Applier(self.table, vocab.n_logits)

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        return self.table.add(int(req_idx), GrammarSpec.from_args(getattr(sampling_params, "extra_args", None)))

    def apply(self, logits: Any, ctx: Any) -> Any:
        slots_np = np.asarray(ctx.idx_mapping_np)
        if logits.shape[0] != slots_np.shape[0]:
            raise GlrmaskError("glrmask's vLLM processor does not support speculative decoding")
        constrained = [i for i, s in enumerate(slots_np.tolist()) if s in self.table]
        if not constrained:
            return logits
        prompt_len = np.asarray(self.req_states.prompt_len.np)
        seq_lens = np.asarray(ctx.seq_lens_upper_bound_np)
        rows: list[int] = []
        slots: list[int] = []
        gather_slot: list[int] = []
        gather_pos: list[int] = []
        spans: list[tuple[int, int, int]] = []  # (slot, first output position, count)
        for i in constrained:
            slot = int(slots_np[i])
            outputs = int(seq_lens[i]) - int(prompt_len[slot])
            if outputs < 0:
                continue  # still prefilling: this row's sample is discarded
            done = self.table.committed(slot)
            if outputs > done:
                start = int(prompt_len[slot]) + done
                gather_slot.extend([slot] * (outputs - done))
                gather_pos.extend(range(start, start + outputs - done))
                spans.append((slot, done, outputs - done))
            rows.append(i)
            slots.append(slot)
        if gather_slot:
            tokens = self._read_tokens(gather_slot, gather_pos)
            k = 0
            for slot, first, count in spans:
                self.table.sync(slot, tokens[k:k + count], start=first)
                k += count
        return self._applier.apply(logits, rows, slots)

    def _read_tokens(self, slots: list[int], positions: list[int]) -> list[int]:
        """One gather from the device token history and one copy to the host for the whole step."""
        import torch  # noqa: PLC0415 - vLLM's tensors

        history = self.req_states.all_token_ids.gpu
        index_slot = torch.tensor(slots, dtype=torch.long).to(history.device, non_blocking=True)
        index_pos = torch.tensor(positions, dtype=torch.long).to(history.device, non_blocking=True)
        return history[index_slot, index_pos].cpu().tolist()


# ---- the classes vLLM loads (only where vLLM is installed) -------------------------------------------

try:  # pragma: no cover - exercised only where vLLM is installed
    from vllm.v1.sample.logits_processor import LogitsProcessor as _V1Base
except Exception:  # noqa: BLE001 - not installed, or a build without the V1 sampler
    _V1Base = None

try:  # pragma: no cover
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as _V2Base
except Exception:  # noqa: BLE001
    _V2Base = None


if _V1Base is not None:  # pragma: no cover

    class GlrmaskV1LogitsProcessor(BatchUpdateLogic, _V1Base):
        """glrmask for vLLM's legacy V1 model runner (``VLLM_USE_V2_MODEL_RUNNER=0``)."""

        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool):
            BatchUpdateLogic.__init__(self, vocab_for_vllm(vllm_config))

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            validate_sampling_params(sampling_params)

    __all__.append("GlrmaskV1LogitsProcessor")


if _V2Base is not None:  # pragma: no cover

    class GlrmaskLogitsProcessor(SlotLogic, _V2Base):
        """glrmask for vLLM's Model Runner V2 (the default since vLLM 0.32)."""

        def __init__(self, vllm_config: Any, req_states: Any, *_: Any):
            if getattr(vllm_config, "speculative_config", None) is not None:
                raise ValueError("glrmask's vLLM processor does not support speculative decoding")
            if not hasattr(req_states, "all_token_ids"):
                # Early V2 interfaces passed (vllm_config, device, is_pin_memory): no token history.
                raise ValueError(
                    "this vLLM's Model Runner V2 gives logits processors no token history; run it with "
                    "VLLM_USE_V2_MODEL_RUNNER=0 and glrmask.integrations.vllm:GlrmaskV1LogitsProcessor"
                )
            SlotLogic.__init__(self, vocab_for_vllm(vllm_config), req_states)

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            validate_sampling_params(sampling_params)

        def is_argmax_invariant(self) -> bool:
            return False

    __all__.append("GlrmaskLogitsProcessor")
