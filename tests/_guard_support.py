"""Shared helpers for the guard tests: tokenizers, tiny vocabularies and a stream driver."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from glrmask.guards import PhraseRequest
from glrmask.vocab import Vocab

TESTS = Path(__file__).resolve().parent
SHARED = Path(__file__).resolve().parents[2] / "shared"


def tokenizer_path(name: str) -> Path | None:
    """tests/data copy first, then the shared data folder; None when neither exists."""
    for path in (
        TESTS / "data" / "tokenizers" / name / "tokenizer.json.gz",
        SHARED / "data" / "tokenizers" / name / "tokenizer.json",
    ):
        if path.is_file():
            return path
    return None


def load_vocab(name: str) -> Vocab:
    path = tokenizer_path(name)
    if path is None:
        pytest.skip(f"tokenizer {name} is not available")
    return Vocab.from_tokenizer_json(path)


def tiny_vocab(pieces: list[bytes | None]) -> Vocab:
    """A vocabulary given as bytes per id; None marks a special token."""
    return Vocab.from_token_bytes(pieces, eos_token_ids=[i for i, p in enumerate(pieces) if p is None][:1])


def ids_for(vocab: Vocab, pieces: list[bytes]) -> list[int]:
    """Token ids of exact byte pieces (first id with those bytes)."""
    index: dict[bytes, int] = {}
    for i in range(vocab.size):
        index.setdefault(vocab.token_bytes(i), i)
    return [index[p] for p in pieces]


def packed_row(n_logits: int, allowed: list[int] | None = None) -> np.ndarray:
    """A packed int32 mask row allowing ``allowed`` (all ids when None): bit id%32 of word id//32."""
    words = np.zeros((n_logits + 31) // 32, dtype=np.uint32)
    for tok in range(n_logits) if allowed is None else allowed:
        words[tok >> 5] |= np.uint32(1 << (tok & 31))
    return words.view(np.int32)


def allowed_ids(row: np.ndarray) -> list[int]:
    """Ids whose bit is set in a packed int32 row."""
    words = row.view(np.uint32).astype(np.int64)
    return [w * 32 + b for w in range(len(words)) for b in range(32) if (words[w] >> b) & 1]


class StreamRecord:
    """What a client saw while one stream was pushed through a request."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.released: list[int] = []
        self.kept: list[int] = []  # the retained history, as the caller keeps it
        self.rewinds: list[tuple[int, int, int]] = []  # (position, dropped, banned token)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def drive(req: PhraseRequest, source: list[int], rng: random.Random, *, stop_at_error: bool = True) -> StreamRecord:
    """Push tokens drawn from ``source`` (in order, skipping tokens banned where they would go).

    After a rewind the caller's history is truncated, as a real decode loop would do. Returns what
    was streamed, including the final ``finish``.
    """
    rec = StreamRecord()
    for tok in source:
        if tok in req.banned_tokens(req.position):
            continue
        ev = req.push(tok, logprob=("lp", tok))
        rec.kept.append(tok)
        _absorb(rec, ev)
    _absorb(rec, req.finish())
    return rec


def _absorb(rec: StreamRecord, ev) -> None:
    assert ev.released_logprobs == [("lp", t) for t in ev.released_tokens] or all(
        lp is None for lp in ev.released_logprobs
    )
    rec.released.extend(ev.released_tokens)
    rec.chunks.append(ev.released_text)
    if ev.rewind:
        assert ev.dropped_tokens == rec.kept[len(rec.kept) - ev.rewind:]
        del rec.kept[len(rec.kept) - ev.rewind:]
        assert ev.position == len(rec.kept)
        rec.rewinds.append((ev.position, ev.rewind, ev.banned_token))
