"""glrmask as a Hugging Face transformers ``LogitsProcessor`` (``model.generate(logits_processor=...)``).

    vocab = glrmask.Vocab.from_hf(tokenizer, model=model)     # logits width and end ids of the model
    mask = glrmask.compile_json_schema(schema, vocab)
    out = model.generate(**inputs, logits_processor=[LogitsProcessor(mask)], max_new_tokens=200)

transformers hands a processor only ``(input_ids, scores)``: the whole sequence of every row so far
and the next-token scores. Everything else is inferred from those, so one processor works for
greedy search, sampling, beam search and batches with padding:

* **Prompt.** The first call's sequence length is the prompt length; the states are created then,
  one per row, and only tokens after the prompt are ever committed.
* **Rows.** ``masks`` is one :class:`~glrmask.Mask` for every row or a list with one entry per
  prompt (``None``: that prompt is unconstrained). With ``num_beams > 1`` or
  ``num_return_sequences > 1`` the rows are ``len(masks) * k`` and prompt ``i`` owns rows
  ``i*k .. i*k+k-1``, as transformers lays them out.
* **Beam reordering.** Between two steps beam search reorders, drops and duplicates rows. A row's
  state is found from its tokens: it continues the previous row (with the same mask) whose generated
  tokens share the longest prefix with it — its own in greedy search and sampling, its parent beam
  in beam search — by ``fork()``, ``rollback()`` past any divergence (assisted decoding re-scores a
  shorter prefix) and ``commit()`` of the new tokens. A state is never shared mutably between rows.
* **End tokens.** A mask allows the vocabulary's end tokens exactly when the output is complete.
  After a row committed one it is terminated; transformers then pads it (its scores no longer
  matter) or, if that end token is not one the model stops on, it is held to repeating it, so the
  text never continues past the end.
* **Width.** ``scores`` may be wider than the tokenizer (padded embedding matrices): ids past the
  vocabulary are disallowed. The masks are written into one ``(rows, words)`` int32 bitmask with
  :func:`glrmask.fill_masks` and applied in one :func:`glrmask.apply_token_bitmask_` call.
* **Rejected tokens.** Beam search takes its candidates from the top scores of all beams of a
  prompt together; when fewer tokens are allowed than it needs, it may continue a beam with a -inf
  token. Such a beam has score -inf, so it is never returned while a finite one exists; it is left
  unconstrained and listed in :attr:`LogitsProcessor.rejected`. (Greedy search and sampling never
  pick a -inf token.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import numpy as np

try:
    import torch
    import transformers
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "glrmask.integrations.transformers needs torch and transformers: "
        "python -m pip install 'glrmask[hf]'"
    ) from exc

import glrmask
from glrmask.api import Mask, State
from glrmask.errors import GlrmaskError

__all__ = ["LogitsProcessor"]


@dataclass
class _Row:
    """One row's decoding state: ``state`` has committed ``tokens[:consumed]``."""

    mask: Mask
    state: State
    tokens: list[int] = field(default_factory=list)
    consumed: int = 0  # tokens the state has committed (the rest follow an end token or a rejection)
    rejected: bool = False

    def fork(self) -> "_Row":
        return _Row(self.mask, self.state.fork(), list(self.tokens), self.consumed, self.rejected)

    def truncate(self, n: int) -> None:
        """Back to the first ``n`` generated tokens."""
        if n < self.consumed:
            self.state.rollback(self.consumed - n)
            self.consumed = n
            self.rejected = False
        del self.tokens[n:]

    def extend(self, new: Sequence[int]) -> Optional[int]:
        """Append generated tokens, committing those the state can take; returns the first rejected
        token, if any."""
        bad = None
        for t in new:
            self.tokens.append(t)
            if self.consumed != len(self.tokens) - 1 or self.state.is_terminated():
                continue  # after an end token or a rejection: recorded, never committed
            if self.state.commit(t):
                self.consumed += 1
            else:
                self.rejected = True
                bad = t
        return bad


class LogitsProcessor(transformers.LogitsProcessor):
    """Constrains ``model.generate`` to the language of one mask per prompt (see module docstring).

    Args:
        masks: one compiled :class:`glrmask.Mask` for every row, or a sequence with one entry per
            prompt (``None`` for an unconstrained prompt).

    A processor follows one ``generate`` call; it notices a new one (other prompts, another batch
    size) and starts over, or call :meth:`reset`.
    """

    def __init__(self, masks: Union[Mask, Sequence[Optional[Mask]]]):
        if isinstance(masks, Mask):
            self._masks: Optional[list[Optional[Mask]]] = None
            self._single: Optional[Mask] = masks
            distinct = [masks]
        else:
            self._masks = list(masks)
            self._single = None
            if not self._masks:
                raise GlrmaskError("LogitsProcessor needs at least one mask (or None per prompt)")
            for m in self._masks:
                if m is not None and not isinstance(m, Mask):
                    raise GlrmaskError(f"masks must be glrmask.Mask objects or None, got {type(m).__name__}")
            distinct = [m for m in self._masks if m is not None]
        for m in distinct:
            if not m.vocab.eos_token_ids:
                raise GlrmaskError(
                    f"the vocabulary {m.vocab.name!r} has no end token, so a constrained generation "
                    "could never stop; build it with glrmask.Vocab.from_hf(tokenizer, model=model)"
                )
        self.rejected: list[tuple[int, int, int]] = []  # (row, position in the generated text, token)
        self.reset()

    def reset(self) -> None:
        """Forget the current generation; the next call starts a new one."""
        self._prompt: Optional[torch.Tensor] = None
        self._rows: list[Optional[_Row]] = []
        self._generated = 0
        self._bitmask: Optional[np.ndarray] = None
        self.rejected = []

    # ---- transformers' entry point ----------------------------------------------------------

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        n_rows, length = input_ids.shape
        if scores.shape[0] != n_rows:
            raise GlrmaskError(f"{scores.shape[0]} rows of scores for {n_rows} sequences")
        if not self._continues(input_ids):
            self._start(input_ids)
        else:
            self._advance(input_ids)
        self._mask_scores(scores)
        return scores

    # ---- row bookkeeping ----------------------------------------------------------------------

    def _mask_for_row(self, row: int, n_rows: int) -> Optional[Mask]:
        if self._masks is None:
            return self._single
        if n_rows % len(self._masks):
            raise GlrmaskError(
                f"{n_rows} rows for {len(self._masks)} masks: the rows must be the prompts times "
                "num_beams (or num_return_sequences)"
            )
        return self._masks[row // (n_rows // len(self._masks))]

    def _continues(self, input_ids: torch.Tensor) -> bool:
        """Whether ``input_ids`` continues the generation being followed (same prompt rows)."""
        prompt = self._prompt
        return (
            prompt is not None
            and input_ids.shape[0] == prompt.shape[0]
            and input_ids.shape[1] >= prompt.shape[1]
            and torch.equal(input_ids[:, : prompt.shape[1]], prompt)
        )

    def _start(self, input_ids: torch.Tensor) -> None:
        self.reset()
        n_rows = input_ids.shape[0]
        self._prompt = input_ids.clone()
        self._rows = []
        for r in range(n_rows):
            m = self._mask_for_row(r, n_rows)
            self._rows.append(None if m is None else _Row(m, m.start()))

    def _advance(self, input_ids: torch.Tensor) -> None:
        start = self._prompt.shape[1]  # type: ignore[union-attr]
        generated = input_ids[:, start:].tolist()
        previous = self._rows
        fast = all(
            row is None or (len(g) >= len(row.tokens) and g[: len(row.tokens)] == row.tokens)
            for row, g in zip(previous, generated)
        )
        if fast:  # greedy search, sampling, a beam step without reordering
            rows = previous
        else:
            rows = [None if old is None else self._closest(old.mask, g, previous)
                    for old, g in zip(previous, generated)]
        for r, (row, g) in enumerate(zip(rows, generated)):
            if row is None:
                continue
            bad = row.extend(g[len(row.tokens):])
            if bad is not None:
                self.rejected.append((r, row.consumed, bad))
        self._rows = rows

    @staticmethod
    def _closest(mask: Mask, generated: list[int], previous: list[Optional[_Row]]) -> _Row:
        """A fresh row for ``generated``: the previous row with the same mask sharing the longest
        prefix of generated tokens, forked and truncated to that prefix."""
        best, best_len = None, -1
        for old in previous:
            if old is None or old.mask is not mask:
                continue
            n = _common_prefix(old.tokens, generated)
            if n > best_len:
                best, best_len = old, n
        row = best.fork()  # type: ignore[union-attr]
        row.truncate(best_len)
        return row

    # ---- masking --------------------------------------------------------------------------------

    def _mask_scores(self, scores: torch.Tensor) -> None:
        n_rows, width = scores.shape
        live: list[int] = []
        states: list[State] = []
        ended: list[int] = []
        for r, row in enumerate(self._rows):
            if row is None or row.rejected:
                continue
            if row.mask.n_words > (width + 31) // 32:
                raise GlrmaskError(
                    f"the mask covers {row.mask.vocab.n_logits} tokens but the model's scores only "
                    f"{width}; build the Vocab for this model (Vocab.from_hf(tokenizer, model=model))"
                )
            if row.state.is_terminated():
                ended.append(r)
            else:
                live.append(r)
                states.append(row.state)
        if not live and not ended:
            return
        words = (width + 31) // 32
        if self._bitmask is None or self._bitmask.shape != (n_rows, words):
            self._bitmask = np.empty((n_rows, words), dtype=np.int32)
        bitmask = self._bitmask
        if states:
            compact = np.empty((len(states), words), dtype=np.int32)
            glrmask.fill_masks(states, compact)
            bitmask[live] = compact
        for r in ended:  # hold a finished row to its end token
            row = self._rows[r]
            bitmask[r] = 0
            end = row.tokens[row.consumed - 1]  # type: ignore[union-attr]
            bitmask.view(np.uint32)[r, end >> 5] = 1 << (end & 31)
        glrmask.apply_token_bitmask_(scores, bitmask, live + ended)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
