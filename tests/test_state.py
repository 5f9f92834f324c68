"""Per-request state: commit/rollback/fork, end tokens, termination, forced tokens, UTF-8."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed
from conftest import byte_vocab, tiny_vocab

JSON = Path(__file__).resolve().parents[1] / "grammars" / "json.lark"


@pytest.fixture(scope="module")
def json_bytes():
    vocab = byte_vocab()
    return vocab, glrmask.compile(JSON, vocab)


def test_commit_outside_the_mask_returns_false_and_leaves_state_unchanged(json_bytes):
    vocab, mask = json_bytes
    state = mask.start()
    assert state.commit(ord("["))
    before = mask.get_mask(state).copy()
    assert not state.commit(ord("]") + 1)  # '^'
    assert state.num_committed == 1
    assert np.array_equal(mask.get_mask(state), before)


def test_rollback_gives_the_same_masks_as_a_fresh_replay(json_bytes):
    vocab, mask = json_bytes
    text = b'{"a": [1, 2.5, true], "b": null}'
    state = mask.start()
    masks = [mask.get_mask(state)]
    for b in text:
        assert state.commit(b)
        masks.append(mask.get_mask(state))
    rng = random.Random(3)
    for _ in range(20):
        k = rng.randrange(len(text) + 1)
        s = state.fork()
        s.rollback(k)
        assert np.array_equal(mask.get_mask(s), masks[len(text) - k])


def test_fork_is_independent(json_bytes):
    vocab, mask = json_bytes
    a = mask.start()
    assert a.commit(ord("["))
    b = a.fork()
    assert b.commit(ord("1"))
    assert a.num_committed == 1 and b.num_committed == 2
    assert a.commit(ord("]")) and a.is_accepting()
    assert not b.is_accepting()


def test_rollback_more_than_committed_raises(json_bytes):
    vocab, mask = json_bytes
    state = mask.start()
    state.commit(ord("1"))
    with pytest.raises(ValueError):
        state.rollback(2)


def test_end_token_only_when_complete_then_terminated(json_bytes):
    vocab, mask = json_bytes
    state = mask.start()
    end = 256
    assert end not in allowed(mask.get_mask(state))
    assert not state.commit(end)
    for b in b"[1]":
        state.commit(b)
    assert end in allowed(mask.get_mask(state))
    assert state.commit(end)
    assert state.is_terminated() and state.is_accepting()
    assert not mask.get_mask(state).any()
    assert not state.commit(ord(" "))
    state.rollback(1)
    assert not state.is_terminated() and state.commit(ord(" "))


def test_mask_length_follows_n_logits_and_padding_is_never_allowed():
    vocab = glrmask.Vocab.from_token_bytes([b"1", b"2", None], special_token_ids=[2], eos_token_ids=[2],
                                           n_logits=70)
    mask = glrmask.compile("start: /[12]+/", vocab)
    state = mask.start()
    bits = mask.get_mask(state)
    assert bits.shape == (3,) and bits.dtype == np.int32
    assert allowed(bits) == {0, 1}
    assert not state.commit(69)


def test_fill_mask_writes_one_row(json_bytes):
    vocab, mask = json_bytes
    out = np.full((3, mask.n_words), -1, dtype=np.int32)
    state = mask.start()
    mask.fill_mask(state, out, 1)
    assert np.array_equal(out[1], mask.get_mask(state))
    assert (out[0] == -1).all() and (out[2] == -1).all()


def test_partial_utf8_tokens_allowed_iff_a_completion_exists():
    vocab = tiny_vocab([b"\xc3", b"\xa9", b"\xbc", b"x", "é", b"\xe2", b"\xff"])
    mask = glrmask.compile('start: /[é-ü]+/', vocab)  # é = c3 a9 .. ü = c3 bc
    state = mask.start()
    ids = allowed(mask.get_mask(state))
    assert 0 in ids and 4 in ids  # lead byte c3, and the whole é
    assert 3 not in ids and 5 not in ids and 6 not in ids
    assert state.commit(0)
    assert allowed(mask.get_mask(state)) == {1, 2}  # only continuation bytes inside the range


def test_forced_tokens_are_the_determined_prefix(gpt2):
    mask = glrmask.compile('start: "{\\"name\\": \\"" /[a-z]+/ "\\"}"', gpt2)
    state = mask.start()
    forced = state.forced_tokens()
    text = b"".join(gpt2.token_bytes(t) for t in forced)
    assert text and b'{"name": "'.startswith(text)
    assert state.num_committed == 0  # forced_tokens does not commit
    for t in forced:
        assert state.commit(t)


def test_forced_tokens_empty_when_a_choice_exists(json_bytes):
    vocab, mask = json_bytes
    assert mask.start().forced_tokens() == []


def test_random_walk_states_roll_back_consistently(json_bytes):
    vocab, mask = json_bytes
    rng = random.Random(5)
    state, tokens, masks = mask.start(), [], []
    for _ in range(40):
        masks.append(mask.get_mask(state))
        ids = sorted(allowed(masks[-1]) - {256})
        if not ids:
            break
        tokens.append(rng.choice(ids))
        assert state.commit(tokens[-1])
    for _ in range(10):
        k = rng.randrange(1, len(tokens) + 1)
        probe = state.fork()
        probe.rollback(k)
        assert np.array_equal(mask.get_mask(probe), masks[len(tokens) - k])
        for t in tokens[len(tokens) - k:]:
            assert probe.commit(t)
        assert np.array_equal(mask.get_mask(probe), mask.get_mask(state))


def test_byte_fallback_vocabulary_spells_multibyte_text(mistral):
    mask = glrmask.compile('start: " «" /[a-z]+/ "»"', mistral)  # SentencePiece prepends a space
    state = mask.start()
    ids = mistral.encode("«abc»")
    for t in ids:
        assert state.commit(t), mistral.token_bytes(t)
    assert state.is_accepting()


def test_collision_is_reported():
    vocab = byte_vocab()
    mask = glrmask.compile('start: A B\nA: /a+/\nB: "a"', vocab)
    assert any("A" in w and "B" in w for w in mask.warnings)


def test_json_grammar_has_no_collision_warnings(json_bytes):
    vocab, mask = json_bytes
    assert mask.warnings == []


def test_one_mask_serves_many_threads(json_bytes):
    """Requests on different threads share one Mask; each sees exactly its own masks."""
    import threading

    vocab, mask = json_bytes
    docs = [b'{"a": [1, 2]}', b'[true, false, null]', b'"x\\u00e9"', b'{"k": {"n": -1.5e3}}']
    expected = {}
    for d in docs:
        s = mask.start()
        seq = []
        for b in d:
            seq.append(mask.get_mask(s).copy())
            assert s.commit(b)
        expected[d] = seq
    errors = []

    def worker(d):
        try:
            for _ in range(5):
                s = mask.start()
                for i, b in enumerate(d):
                    if not np.array_equal(mask.get_mask(s), expected[d][i]) or not s.commit(b):
                        errors.append(d)
                        return
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(d,)) for d in docs * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
