"""glrmask for llama-cpp-python: a logits processor for ``Llama.create_completion`` / ``__call__``.

    from llama_cpp import Llama, LogitsProcessorList
    from glrmask.integrations.llama_cpp import LogitsProcessor, vocab_from_llama

    llm = Llama(model_path="model.gguf")
    mask = glrmask.compile_json_schema(schema, vocab_from_llama(llm))
    out = llm.create_completion(prompt, max_tokens=200,
                                logits_processor=LogitsProcessorList([LogitsProcessor(mask)]))

llama-cpp-python calls each processor as ``processor(input_ids, scores) -> scores`` before it
samples a token: ``input_ids`` are all tokens evaluated so far (prompt, then the generated ones)
and ``scores`` the last position's logits, one float32 per token of the model. The processor infers
the prompt from its first call, commits each newly generated token, rolls back when the sequence
is shorter than what it committed, and sets every token the grammar does not allow to -inf (the
vocabulary's end tokens exactly when the output is complete; llama.cpp stops on them).

The vocabulary comes from the ``Llama`` object's own tokenizer (:func:`vocab_from_llama`), so the
masks are over exactly the pieces llama-cpp-python writes into the completion text (see
:func:`vocab_from_llama` for the one way it differs from :meth:`glrmask.Vocab.from_gguf`).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

import glrmask
from glrmask.api import Mask, State
from glrmask.errors import GlrmaskError, VocabError
from glrmask.vocab import WELL_KNOWN_EOS_NAMES, Vocab

__all__ = ["LogitsProcessor", "vocab_from_llama"]

_EOS_METADATA = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def vocab_from_llama(llama: Any) -> Vocab:
    """The vocabulary of a ``llama_cpp.Llama``: each token's bytes as llama.cpp writes them.

    A token's bytes are read after a fixed reference token (``detokenize([ref, t])`` minus
    ``detokenize([ref])``): llama.cpp strips the leading space of the *first* piece of a
    detokenisation for SentencePiece models, which would lose the space of ``▁{``. Tokens that
    write nothing unless special tokens are rendered are special; end ids are ``token_eos()``,
    the GGUF's eot/eom ids and the well-known end names among the special tokens.

    The bytes are what the library writes, which is also how it builds the completion text:
    llama-cpp-python 0.3.16 writes nothing for a piece longer than its 32-byte buffer (47 of
    SmolLM2's 49,152 tokens: long runs of spaces, dashes, ``#``). Such a token would vanish from
    the returned text, so it is treated as special — never allowed — and the masks stay exact for
    the text the user receives; otherwise the vocabulary equals :meth:`Vocab.from_gguf`."""
    try:
        n_vocab = int(llama.n_vocab())
    except Exception as exc:  # noqa: BLE001 - not a Llama
        raise VocabError(f"{type(llama).__name__} does not look like a llama_cpp.Llama: {exc}") from exc
    ref = _reference_token(llama, n_vocab)
    ref_bytes = llama.detokenize([ref], special=False)
    metadata = getattr(llama, "metadata", None) or {}
    unknown = _metadata_id(metadata, "tokenizer.ggml.unknown_token_id", n_vocab)
    tokens: list[Optional[bytes]] = []
    specials: list[int] = [] if unknown is None else [unknown]  # llama.cpp writes <unk> as U+2585
    special_text: dict[str, int] = {}
    for t in range(n_vocab):
        pair = llama.detokenize([ref, t], special=False)
        if not pair.startswith(ref_bytes):
            raise VocabError(f"llama.cpp detokenised token {ref} differently before token {t}")
        piece = pair[len(ref_bytes):]
        if piece and t != unknown:
            tokens.append(piece)
            continue
        tokens.append(None)
        specials.append(t)
        text = llama.detokenize([t], special=True)
        if text:
            special_text.setdefault(text.decode("utf-8", "replace"), t)
    eos = {int(llama.token_eos())} if 0 <= int(llama.token_eos()) < n_vocab else set()
    eos.update(i for key in _EOS_METADATA if (i := _metadata_id(metadata, key, n_vocab)) is not None)
    eos.update(special_text[n] for n in WELL_KNOWN_EOS_NAMES if n in special_text)
    return Vocab(tokens, special_token_ids=specials, eos_token_ids=sorted(eos), n_logits=n_vocab,
                 name=str(getattr(llama, "model_path", "llama.cpp")), scheme="llama.cpp")


def _metadata_id(metadata: Any, key: str, n_vocab: int) -> Optional[int]:
    """A token id from llama.cpp's GGUF metadata (values are strings there)."""
    value = metadata.get(key)
    if value is None or not str(value).isdigit() or not 0 <= int(value) < n_vocab:
        return None
    return int(value)


def _reference_token(llama: Any, n_vocab: int) -> int:
    """A token that writes plain text (the last token of "a")."""
    ids = llama.tokenize(b"a", add_bos=False, special=False)
    if not ids or not 0 <= ids[-1] < n_vocab:
        raise VocabError("llama.cpp cannot tokenize 'a' with this model")
    return int(ids[-1])


class LogitsProcessor:
    """A llama-cpp-python logits processor constraining one completion to ``mask``'s language.

    Use a new processor per completion (or call :meth:`reset`): it takes the first sequence it
    sees as the prompt."""

    def __init__(self, mask: Mask):
        if not isinstance(mask, Mask):
            raise GlrmaskError(f"LogitsProcessor needs a glrmask.Mask, got {type(mask).__name__}")
        if not mask.vocab.eos_token_ids:
            raise GlrmaskError(
                f"the vocabulary {mask.vocab.name!r} has no end token, so the completion could never "
                "stop; build it with vocab_from_llama(llm)"
            )
        self.mask = mask
        self._bitmask = np.empty((1, mask.n_words), dtype=np.int32)
        self.reset()

    def reset(self) -> None:
        """Forget the completion being followed; the next call's tokens are a new prompt."""
        self._prompt: Optional[np.ndarray] = None
        self._state: Optional[State] = None
        self._tokens: list[int] = []
        self._consumed = 0  # generated tokens the state has committed (the rest follow the end)

    @property
    def state(self) -> Optional[State]:
        """The parser state after the generated tokens seen so far (None before the first call)."""
        return self._state

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        ids = np.asarray(input_ids).reshape(-1)
        if scores.ndim != 1:
            raise GlrmaskError(f"scores must be one row of logits, got shape {scores.shape}")
        if scores.shape[0] < self.mask.vocab.size:
            raise GlrmaskError(
                f"the mask covers {self.mask.vocab.n_logits} tokens but the model's logits only "
                f"{scores.shape[0]}; compile against vocab_from_llama(llm)"
            )
        prompt = self._prompt
        if prompt is None or ids.shape[0] < prompt.shape[0] or not np.array_equal(ids[: prompt.shape[0]], prompt):
            self.reset()
            self._prompt = ids.copy()
            self._state = self.mask.start()
        self._follow(ids[self._prompt.shape[0]:].tolist())  # type: ignore[union-attr]
        state = self._state
        assert state is not None
        if state.is_terminated():
            self._bitmask[0] = 0
            end = self._tokens[self._consumed - 1]
            self._bitmask.view(np.uint32)[0, end >> 5] = 1 << (end & 31)
        else:
            self.mask.fill_mask(state, self._bitmask, 0)
        glrmask.apply_token_bitmask_(scores, self._bitmask[0, : (scores.shape[0] + 31) // 32])
        return scores

    def _follow(self, generated: list[int]) -> None:
        """Bring the state to ``generated``: roll back past a divergence, commit what is new."""
        n = 0
        limit = min(len(generated), len(self._tokens))
        while n < limit and generated[n] == self._tokens[n]:
            n += 1
        if n < len(self._tokens):
            if n < self._consumed:
                self._state.rollback(self._consumed - n)  # type: ignore[union-attr]
                self._consumed = n
            del self._tokens[n:]
        for t in generated[n:]:
            self._tokens.append(t)
            if self._consumed != len(self._tokens) - 1 or self._state.is_terminated():  # type: ignore[union-attr]
                continue
            if not self._state.commit(t):  # type: ignore[union-attr]
                raise GlrmaskError(
                    f"llama.cpp sampled token {t} ({self.mask.vocab.token_bytes(t)!r}), which the mask "
                    "does not allow; did another logits processor run after glrmask's?"
                )
            self._consumed += 1
