"""Phrase-ban guard properties on random phrase sets and random token streams.

Judge: plain ``str`` search on the case-folded decoded text, independent of the automaton.
Tokenizers: a byte-piece vocabulary that splits text anywhere (inside UTF-8 characters too),
GPT-2 (byte-level BPE) and Mistral-7B v0.1 (SentencePiece with byte fallback).
"""
from __future__ import annotations

import codecs
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _guard_support import StreamRecord, drive, load_vocab, tokenizer_path
from glrmask.guards import PhraseGuard, RewindLimitExceeded
from glrmask.vocab import Vocab

ALPHABET = "abs ßẞéÉ日"
phrase_sets = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), min_size=1, max_size=4)


@st.composite
def stream_texts(draw, phrases):
    """Text made of phrases, their prefixes and suffixes, and filler, in random case."""
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        p = draw(st.sampled_from(phrases))
        kind = draw(st.sampled_from(["whole", "prefix", "suffix", "filler"]))
        k = draw(st.integers(0, len(p)))
        part = {"whole": p, "prefix": p[:k], "suffix": p[k:]}.get(kind) or draw(
            st.text(alphabet=ALPHABET, max_size=3)
        )
        parts.append(part.upper() if draw(st.booleans()) else part)
    return "".join(parts)


def contains_phrase(text: str, phrases: list[str], case_sensitive: bool = False) -> bool:
    f = (lambda s: s) if case_sensitive else str.casefold
    return any(f(p) in f(text) for p in phrases)


def decoded_prefix(data: bytes) -> str:
    """Text of ``data`` as a streaming decoder shows it (an unfinished last character omitted)."""
    return codecs.getincrementaldecoder("utf-8")("replace").decode(data)


def match_start_token(vocab, tokens: list[int], phrases: list[str], case_sensitive: bool) -> int:
    """Token holding the first byte of the match that ends first (the shortest one ending there).

    Computed from the text alone: folded offsets → characters → bytes → tokens.
    """
    raw = vocab.decode_bytes(tokens)
    text = decoded_prefix(raw)
    f = (lambda s: s) if case_sensitive else str.casefold
    folded_starts, pos = [], 0
    for ch in text:
        folded_starts.append(pos)
        pos += len(f(ch))
    folded = f(text)
    best = None  # (end, -start)
    for p in phrases:
        fp = f(p)
        i = folded.find(fp)
        while i >= 0:
            cand = (i + len(fp), -i)
            best = cand if best is None or cand < best else best
            i = folded.find(fp, i + 1)
    start_char = max(c for c, s0 in enumerate(folded_starts) if s0 <= -best[1])
    k = next(k for k in range(len(raw) + 1) if len(decoded_prefix(raw[:k])) > start_char)
    first_byte = k - len(text[start_char].encode())
    offset = 0
    for t, tok in enumerate(tokens):
        offset += len(vocab.token_bytes(tok))
        if offset > first_byte:
            return t
    raise AssertionError("match start past the end")


def check_stream(vocab, phrases: list[str], source: list[int], seed: int, case_sensitive=False) -> StreamRecord:
    """Push ``source``, checking every step against the judge; return the stream record."""
    req = PhraseGuard(phrases, case_sensitive=case_sensitive, max_rewinds=10_000).start(vocab)
    rec = StreamRecord()
    for tok in source:
        if tok in req.banned_tokens(req.position):
            continue
        before = decoded_prefix(vocab.decode_bytes(rec.kept))
        ev = req.push(tok, logprob=("lp", tok))
        after_push = rec.kept + [tok]
        full = decoded_prefix(vocab.decode_bytes(after_push))
        n_released = len(rec.released)
        rec.released.extend(ev.released_tokens)
        rec.chunks.append(ev.released_text)
        if ev.rewind:
            assert contains_phrase(full, phrases, case_sensitive)
            start = match_start_token(vocab, after_push, phrases, case_sensitive)
            if not rec.rewinds:
                # Before any rewind the held suffix always covers a match's start.
                assert start >= n_released
            assert ev.position == max(start, n_released)
            assert ev.banned_token == after_push[ev.position]
            assert ev.dropped_tokens == after_push[len(after_push) - ev.rewind:]
            rec.kept = after_push[: len(after_push) - ev.rewind]
            rec.rewinds.append((ev.position, ev.rewind, ev.banned_token))
            assert ev.banned_token in req.banned_tokens(ev.position)
        else:
            assert not contains_phrase(full, phrases, case_sensitive), (before, full)
            rec.kept = after_push
        assert ev.position == len(rec.kept)
        # Released tokens are final: always a prefix of the retained history.
        assert rec.released == rec.kept[: len(rec.released)]
        assert ev.released_logprobs == [("lp", t) for t in ev.released_tokens]
        assert not contains_phrase("".join(rec.chunks), phrases, case_sensitive)
    ev = req.finish()
    rec.released.extend(ev.released_tokens)
    rec.chunks.append(ev.released_text)
    assert rec.released == rec.kept
    assert rec.text == vocab.decode_bytes(rec.kept).decode("utf-8", "replace")
    assert not contains_phrase(rec.text, phrases, case_sensitive)
    return rec


def byte_piece_tokens(text: str, rnd: random.Random) -> tuple[Vocab, list[int]]:
    """A vocabulary of all single bytes plus the pieces of a random split of ``text``'s bytes."""
    data = text.encode()
    pieces, i = [], 0
    while i < len(data):
        k = rnd.randint(1, 4)
        pieces.append(data[i:i + k])
        i += k
    table = [bytes([b]) for b in range(256)] + sorted(set(pieces) - {bytes([b]) for b in range(256)})
    index = {p: n for n, p in enumerate(table)}
    return Vocab.from_token_bytes(table), [index[p] for p in pieces]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), phrase_sets, st.booleans(), st.integers(0, 2**32))
def test_byte_piece_streams_never_release_a_phrase(data, phrases, case_sensitive, seed):
    text = data.draw(stream_texts(phrases))
    vocab, source = byte_piece_tokens(text, random.Random(seed))
    check_stream(vocab, phrases, source, seed, case_sensitive)


@pytest.mark.parametrize("name", ["gpt2", "mistral-7b-v0.1"])
def test_real_tokenizer_streams_never_release_a_phrase(name):
    vocab = load_vocab(name)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data(), phrase_sets, st.integers(0, 2**32))
    def run(data, phrases, seed):
        texts = [data.draw(stream_texts(phrases)) for _ in range(3)]
        # Pieces tokenized apart: phrases straddle token boundaries in non-canonical ways.
        source = [t for piece in texts for t in vocab.encode(piece)]
        check_stream(vocab, phrases, source, seed)

    run()


@settings(max_examples=60, deadline=None)
@given(st.data(), phrase_sets, st.integers(0, 2**32))
def test_requests_of_one_guard_do_not_affect_each_other(data, phrases, seed):
    text_a, text_b = data.draw(stream_texts(phrases)), data.draw(stream_texts(phrases))
    rnd = random.Random(seed)
    pieces = [bytes([b]) for b in range(256)] + [p.encode() for p in ALPHABET]
    vocab = Vocab.from_token_bytes(pieces)
    src_a, src_b = [list(t.encode()) for t in (text_a, text_b)]
    guard = PhraseGuard(phrases, max_rewinds=10_000)

    alone = [drive(guard.start(vocab), src, rnd) for src in (src_a, src_b)]

    reqs = [guard.start(vocab), guard.start(vocab)]
    recs = [StreamRecord(), StreamRecord()]
    iters = [iter(src_a), iter(src_b)]
    live = [0, 1]
    while live:
        k = rnd.choice(live)
        tok = next(iters[k], None)
        if tok is None:
            live.remove(k)
            ev = reqs[k].finish()
            recs[k].released.extend(ev.released_tokens)
            recs[k].chunks.append(ev.released_text)
            continue
        req, rec = reqs[k], recs[k]
        if tok in req.banned_tokens(req.position):
            continue
        # bans exist only at one position of one request
        assert sum(1 for p in range(req.position + 2) if req.banned_tokens(p)) <= 1
        ev = req.push(tok, logprob=("lp", tok))
        rec.kept.append(tok)
        rec.released.extend(ev.released_tokens)
        rec.chunks.append(ev.released_text)
        if ev.rewind:
            del rec.kept[len(rec.kept) - ev.rewind:]
            rec.rewinds.append((ev.position, ev.rewind, ev.banned_token))
    for solo, mixed in zip(alone, recs):
        assert (solo.text, solo.released, solo.rewinds) == (mixed.text, mixed.released, mixed.rewinds)


def test_the_default_rewind_budget_is_128_per_request():
    vocab = Vocab.from_token_bytes([b"x", b"ab"])
    req = PhraseGuard(["ab"]).start(vocab)
    for _ in range(128):
        req.push(0)
        assert req.push(1).rewind == 1  # each failure at a new position
    req.push(0)
    with pytest.raises(RewindLimitExceeded):
        req.push(1)
