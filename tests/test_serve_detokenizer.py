"""Incremental detokenization: complete characters only, stop strings held back and cut.

The judge of the property tests is the one-shot decoding of the whole token stream (and, for
byte-level tokenizers, the ``tokenizers`` library's own ``DecodeStream``): whatever the stream and
however it is split into pushes, the chunks add up to that text, cut at the first stop string.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers.decoders import DecodeStream

from conftest import shipped_tokenizer, tiny_vocab
from glrmask.serve.detokenizer import IncrementalDetokenizer, truncate_at_stop
from glrmask.vocab import Vocab

TOKENIZERS = ("gpt2", "qwen3", "mistral-7b-v0.1")
_VOCABS: dict[str, Vocab] = {}


def vocab_of(name: str) -> Vocab:
    if name not in _VOCABS:
        _VOCABS[name] = Vocab.from_tokenizer_json(shipped_tokenizer(name))
    return _VOCABS[name]


ALPHABET = st.sampled_from(
    list("abc xyz,.:\n{}\"")
    + list("鹦鹉说答案是解释如下日本語")  # CJK: three UTF-8 bytes each
    + ["🦜", "😀", "👍🏽", "🇯🇵", "é", "ß", "Ω", "𝄞"]  # four-byte emoji, ZWJ/modifier pairs, flags
)
TEXTS = st.lists(ALPHABET, min_size=0, max_size=40).map("".join)


def full_text(vocab: Vocab, ids: list[int]) -> str:
    return vocab.decode_bytes(ids).decode("utf-8", "replace")


def stream(vocab: Vocab, ids: list[int], cuts: list[int], stop: list[str]) -> tuple[list[str], IncrementalDetokenizer]:
    """Push ``ids`` in groups ending at ``cuts``; return the chunks (the last from ``finish``)."""
    detok = IncrementalDetokenizer(vocab, stop)
    chunks, start = [], 0
    for end in sorted(set(cuts)) + [len(ids)]:
        if end > start:
            chunks.append(detok.push(ids[start:end]).text)
            start = end
    chunks.append(detok.finish().text)
    return chunks, detok


@st.composite
def token_streams(draw):
    """A tokenizer, a token stream (real text tokenized, with random tokens mixed in), push cuts."""
    name = draw(st.sampled_from(TOKENIZERS))
    vocab = vocab_of(name)
    ids = vocab.encode(draw(TEXTS))
    if draw(st.booleans()):  # arbitrary tokens too: partial or invalid UTF-8 anywhere
        extra = draw(st.lists(st.integers(0, vocab.size - 1), max_size=6))
        for tok in extra:
            ids.insert(draw(st.integers(0, len(ids))), tok)
    cuts = draw(st.lists(st.integers(0, len(ids)), max_size=len(ids)))
    return vocab, ids, cuts


@settings(max_examples=150)
@given(token_streams(), st.data())
def test_chunks_add_up_to_the_decoded_text_cut_at_the_first_stop(sample, data):
    vocab, ids, cuts = sample
    text = full_text(vocab, ids)
    stop = data.draw(st.lists(st.one_of(TEXTS, st.just(text[3:7])), max_size=3))
    chunks, detok = stream(vocab, ids, cuts, stop)
    expected, found = truncate_at_stop(text, stop)
    assert "".join(chunks) == expected
    assert detok.stopped == (found is not None)


@settings(max_examples=100)
@given(token_streams(), st.data())
def test_released_text_never_contains_a_stop_string(sample, data):
    vocab, ids, cuts = sample
    text = full_text(vocab, ids)
    stop = data.draw(st.lists(st.one_of(st.just(text[2:5]), TEXTS.filter(bool)), min_size=1, max_size=2))
    chunks, _ = stream(vocab, ids, cuts, stop)
    shown = ""
    for chunk in chunks:
        shown += chunk
        assert not any(s and s in shown for s in stop)


@settings(max_examples=100)
@given(st.sampled_from(TOKENIZERS), TEXTS)
def test_only_complete_characters_are_released(name, text):
    vocab = vocab_of(name)
    ids = vocab.encode(text)
    whole = full_text(vocab, ids)  # SentencePiece adds a leading space to ``text``
    assert "\ufffd" not in whole
    detok = IncrementalDetokenizer(vocab)
    shown = ""
    for tok in ids:
        chunk = detok.push([tok]).text
        assert "\ufffd" not in chunk
        shown += chunk
        assert whole.startswith(shown)
    assert shown + detok.finish().text == whole


@settings(max_examples=100)
@given(st.sampled_from(("gpt2", "qwen3")), TEXTS)
def test_byte_level_text_matches_the_tokenizers_streaming_decoder(name, text):
    vocab = vocab_of(name)
    ids = vocab.encode(text)
    judge = DecodeStream(skip_special_tokens=True)
    expected = "".join(filter(None, (judge.step(vocab.tokenizer, t) for t in ids)))
    chunks, _ = stream(vocab, ids, list(range(len(ids))), [])
    assert "".join(chunks) == expected


@pytest.mark.parametrize("name", TOKENIZERS)
def test_an_emoji_split_over_byte_tokens_comes_out_whole_with_its_last_byte(name):
    vocab = vocab_of(name)
    ids = [t for t in vocab.encode("🦜") if vocab.token_bytes(t).strip()]  # no SentencePiece space
    assert len(ids) > 1  # every shipped tokenizer spells the parrot in several byte tokens
    detok = IncrementalDetokenizer(vocab)
    chunks = [detok.push([t]).text for t in ids]
    assert chunks == [""] * (len(ids) - 1) + ["🦜"]


def test_only_the_tail_that_can_still_start_a_stop_string_is_held():
    vocab = tiny_vocab(["The answer", " is", " 42", ".", "\n", "Expl", "anation"])
    detok = IncrementalDetokenizer(vocab, stop=["\nExplanation"])
    assert detok.push([0, 1, 2]).text == "The answer is 42"
    assert detok.push([3]).text == "."
    assert detok.push([4]).text == ""  # "\n" may begin the stop string
    assert detok.push([5]).text == ""
    chunk = detok.push([6])
    assert chunk.text == "" and detok.stopped and detok.stop_string == "\nExplanation"
    assert detok.text == "The answer is 42."


def test_held_text_is_released_when_it_turns_out_not_to_be_a_stop_string():
    vocab = tiny_vocab(["a", "\n", "Ex", "it"])
    detok = IncrementalDetokenizer(vocab, stop=["\nExplanation"])
    assert detok.push([0, 1, 2]).text == "a"
    assert detok.push([3]).text == "\nExit"
    assert not detok.stopped


def test_the_stop_string_that_ends_first_wins_whatever_the_tokenization():
    vocab = tiny_vocab(["abcd", "a", "b", "c", "d"])
    stop = ["abcd", "bc"]
    whole = IncrementalDetokenizer(vocab, stop)
    whole.push([0])
    pieces = IncrementalDetokenizer(vocab, stop)
    for t in (1, 2, 3, 4):
        pieces.push([t])
    assert whole.text == pieces.text == "a"
    assert whole.stop_string == pieces.stop_string == "bc"


def test_token_counts_follow_the_released_text():
    vocab = tiny_vocab(["x", "y", "\n"])
    detok = IncrementalDetokenizer(vocab, stop=["\n\n"])
    assert detok.push([0, 1]) == ("xy", 2)
    assert detok.push([2]) == ("", 0)
    assert detok.push([0]) == ("\nx", 2)
    assert detok.push([2, 2]) == ("", 0)
    assert detok.stopped and detok.text == "xy\nx"


def test_trailing_broken_bytes_are_released_as_replacement_characters_at_the_end():
    vocab = tiny_vocab([b"ok", b"\xf0\x9f"])
    detok = IncrementalDetokenizer(vocab)
    assert detok.push([0, 1]).text == "ok"
    assert detok.finish().text == "\ufffd"


def test_special_tokens_add_no_text():
    vocab = tiny_vocab(["hi"])
    detok = IncrementalDetokenizer(vocab)
    assert detok.push([0, 1]).text == "hi"  # id 1 is the end token
