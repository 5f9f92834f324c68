"""Batched sampling: one pass over a ``(batch, vocab)`` logits tensor, parameters per row.

Each request brings its own temperature, top-k, top-p, min-p (temperature 0 = greedy). Sampling
them one by one would cost a small kernel per request and per step, so the parameters are laid out
as ``(batch,)`` tensors and every filter is one tensor operation over the whole batch; top-k and
top-p share one sort.

The draw is an *exponential race* instead of ``torch.multinomial``: with ``E_i`` independent
exponentials of rate 1, ``argmax_i p_i / E_i`` is ``i`` with probability exactly ``p_i`` (``E_i/p_i``
is exponential of rate ``p_i`` and the smallest of several exponentials is ``i`` with probability
proportional to its rate). It is noise, a division and an argmax, with no CPU-GPU synchronisation,
and the noise of a row can come from that request's own ``torch.Generator``: a seeded request then
draws the same numbers whatever else is in the batch, so its output is identical alone or batched.

Logprobs are the model's *raw* distribution (log-softmax of the logits before masks, temperature
and truncation), as vLLM reports them by default: they say how confident the model itself was,
independent of the decoding policy.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from glrmask.errors import GlrmaskError

__all__ = ["BatchSampler", "SamplingParams", "SamplingParamsError", "TokenLogprob"]

MAX_TOP_LOGPROBS = 20


class SamplingParamsError(GlrmaskError, ValueError):
    """A sampling parameter is out of range (the message names it); a client error (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How one request picks its next token.

    ``temperature`` 0 means greedy (argmax; the other filters do not matter then). ``top_k`` 0 and
    ``top_p`` 1 and ``min_p`` 0 switch those filters off. ``seed`` gives the request its own random
    generator (reproducible output); None draws from the engine's shared generator. ``logprobs``:
    None for none, ``n >= 0`` for the sampled token's logprob and the ``n`` most likely tokens.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    logprobs: int | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise SamplingParamsError(f"temperature must be a finite number >= 0, got {t!r}")
        k = self.top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise SamplingParamsError(f"top_k must be an int >= 0 (0 = off), got {k!r}")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise SamplingParamsError(f"top_p must be in (0, 1], got {p!r}")
        m = self.min_p
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m <= 1:
            raise SamplingParamsError(f"min_p must be in [0, 1], got {m!r}")
        s = self.seed
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**63):
            raise SamplingParamsError(f"seed must be an int in [0, 2**63), got {s!r}")
        n = self.logprobs
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_TOP_LOGPROBS):
            raise SamplingParamsError(f"logprobs must be an int in [0, {MAX_TOP_LOGPROBS}], got {n!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def generator(self, device: torch.device | str = "cpu") -> torch.Generator | None:
        """A fresh generator for this request's draws (None without a seed)."""
        if self.seed is None:
            return None
        return torch.Generator(device=device).manual_seed(self.seed)


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The raw log-probability of a sampled token and the most likely alternatives at its step."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = field(default=())


class BatchSampler:
    """Samples one token per row of a logits batch, each row with its own parameters.

    ``shared_generator`` draws the noise of rows without a seed (None: torch's default generator).
    """

    def __init__(self, shared_generator: torch.Generator | None = None) -> None:
        self._shared = shared_generator

    def sample(
        self,
        logits: torch.Tensor,
        params: Sequence[SamplingParams],
        generators: Sequence[torch.Generator | None],
    ) -> torch.Tensor:
        """Token ids ``(batch,)`` (int64) for masked logits ``(batch, vocab)``.

        Disallowed tokens carry ``-inf`` (apply the grammar and guard masks first). A row with no
        finite logit cannot be sampled and gets ``-1``; the caller reports it for that request.
        ``generators[i]`` is row ``i``'s own generator (from :meth:`SamplingParams.generator`) or None.
        """
        if logits.ndim != 2 or logits.shape[0] != len(params) or len(generators) != len(params):
            raise ValueError(
                f"logits must be (batch, vocab) with one params and generator per row; got "
                f"{tuple(logits.shape)}, {len(params)} params, {len(generators)} generators"
            )
        x = logits.float()
        batch = x.shape[0]
        out = torch.full((batch,), -1, dtype=torch.long, device=x.device)
        if batch == 0:
            return out
        greedy_rows = [i for i, p in enumerate(params) if p.greedy]
        if greedy_rows:
            idx = torch.tensor(greedy_rows, device=x.device)
            out[idx] = x[idx].argmax(dim=-1)
        rows = [i for i, p in enumerate(params) if not p.greedy]
        if rows:
            idx = torch.tensor(rows, device=x.device)
            probs = self.probabilities(x[idx], [params[i] for i in rows])
            noise = torch.empty_like(probs)
            for j, i in enumerate(rows):
                noise[j].exponential_(generator=generators[i] if generators[i] is not None else self._shared)
            noise.clamp_min_(torch.finfo(noise.dtype).tiny)
            out[idx] = (probs / noise).argmax(dim=-1)
        # A row whose pick has logit -inf had nothing allowed (its softmax was NaN, or all -inf).
        dead = x.gather(1, out[:, None])[:, 0] == float("-inf")
        return out.masked_fill_(dead, -1)

    @staticmethod
    def probabilities(logits: torch.Tensor, params: Sequence[SamplingParams]) -> torch.Tensor:
        """The distribution :meth:`sample` draws from for non-greedy rows: softmax after temperature,
        min-p, top-k and top-p, in that order (vLLM's order), each row with its own parameters."""
        x = logits.float()
        dev = x.device
        temps = torch.tensor([p.temperature for p in params], dtype=x.dtype, device=dev)
        x = x / temps[:, None]
        n = x.shape[-1]
        # The switches are read from the parameters, not from device tensors: no GPU sync.
        if any(p.min_p > 0 for p in params):
            min_p = torch.tensor([p.min_p for p in params], dtype=x.dtype, device=dev)
            probs = x.softmax(dim=-1)
            keep = probs >= min_p[:, None] * probs.max(dim=-1, keepdim=True).values
            x = x.masked_fill(~keep, float("-inf"))
        if any(0 < p.top_k < n or p.top_p < 1 for p in params):
            top_k = torch.tensor([p.top_k if 0 < p.top_k < n else n for p in params], device=dev)
            top_p = torch.tensor([p.top_p for p in params], dtype=x.dtype, device=dev)
            sorted_x, order = x.sort(dim=-1, descending=True, stable=True)
            rank = torch.arange(n, device=dev).expand_as(sorted_x)
            drop = rank >= top_k[:, None]
            sorted_probs = sorted_x.masked_fill(drop, float("-inf")).softmax(dim=-1)
            # A token goes when the tokens ranked above it already hold top_p of the mass.
            drop |= (sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_p[:, None]
            drop[:, 0] = False  # the most likely token always stays
            x = x.scatter(1, order, sorted_x.masked_fill(drop, float("-inf")))
        return x.softmax(dim=-1)

    @staticmethod
    def logprobs(raw_logits: torch.Tensor, tokens: Sequence[int], top_n: Sequence[int]) -> list[TokenLogprob]:
        """Raw logprobs of ``tokens[i]`` in row ``i`` and its ``top_n[i]`` most likely tokens."""
        lp = torch.log_softmax(raw_logits.float(), dim=-1)
        chosen = lp.gather(1, torch.tensor(list(tokens), device=lp.device)[:, None].clamp_min(0))[:, 0].tolist()
        k = max(top_n, default=0)
        top_vals = top_ids = None
        if k:
            top_vals, top_ids = lp.topk(k, dim=-1)
            top_vals, top_ids = top_vals.tolist(), top_ids.tolist()
        out = []
        for i, tok in enumerate(tokens):
            top = ()
            if top_n[i] and top_vals is not None:
                top = tuple(zip(top_ids[i][: top_n[i]], top_vals[i][: top_n[i]]))
            out.append(TokenLogprob(int(tok), float(chosen[i]), top))
        return out
