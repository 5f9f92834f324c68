"""Shared fixtures: vocabularies small enough for exhaustive checks, and the shipped real ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from glrmask.vocab import Vocab

# CI machines are small and shared: judge properties, never wall-clock time. On CI (CI=true) the
# examples are derandomized so a run is reproducible; locally every run explores new examples.
settings.register_profile("glrmask", deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          derandomize=bool(os.environ.get("CI")))
settings.load_profile("glrmask")

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"
TOKENIZERS = DATA / "tokenizers"


def byte_vocab() -> Vocab:
    """256 single-byte tokens plus an end token (id 256): masks over it are masks over bytes."""
    return Vocab.from_token_bytes([bytes([i]) for i in range(256)] + [None],
                                  special_token_ids=[256], eos_token_ids=[256])


def tiny_vocab(pieces: list[str | bytes]) -> Vocab:
    """The given pieces as tokens plus an end token (the last id)."""
    toks = [p.encode() if isinstance(p, str) else p for p in pieces]
    return Vocab.from_token_bytes(toks + [None], special_token_ids=[len(toks)], eos_token_ids=[len(toks)])


def shipped_tokenizer(name: str) -> Path:
    """A tokenizer shipped in tests/data (tracked in git): missing means a broken checkout, so fail."""
    path = TOKENIZERS / name / "tokenizer.json.gz"
    assert path.exists(), f"tokenizer {name} missing from {TOKENIZERS}"
    return path


@pytest.fixture(scope="session")
def gpt2() -> Vocab:
    return Vocab.default()


@pytest.fixture(scope="session")
def qwen3() -> Vocab:
    return Vocab.from_tokenizer_json(shipped_tokenizer("qwen3"))


@pytest.fixture(scope="session")
def mistral() -> Vocab:
    return Vocab.from_tokenizer_json(shipped_tokenizer("mistral-7b-v0.1"))
