"""No-repeat-ngram guard (DESIGN §9.2): exact bans, rollback, window, whitelist, the grammar fallback."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _guard_support import allowed_ids, packed_row
from glrmask.errors import GlrmaskError
from glrmask.guards import NoRepeatNGram, NoRepeatNGramError

histories = st.lists(st.integers(0, 5), max_size=40)


def reference_banned(history: list[int], n: int, window: int | None = None) -> list[int]:
    """Direct definition: followers of every earlier occurrence of the last n-1 tokens."""
    if n == 0 or len(history) < n - 1:
        return []
    lo = 0 if window is None else max(0, len(history) - window)
    key = tuple(history[len(history) - n + 1:]) if n > 1 else ()
    return sorted({history[i + n - 1] for i in range(lo, len(history) - n + 1) if tuple(history[i:i + n - 1]) == key})


def softmax_after_ban(logits: np.ndarray, banned: list[int]) -> np.ndarray:
    out = logits.astype(np.float64).copy()
    out[banned] = -np.inf
    e = np.exp(out - out.max())
    return e / e.sum()


def test_the_follower_of_a_repeated_ngram_gets_exactly_zero_probability():
    state = NoRepeatNGram(3).start([5, 6, 7, 1, 5, 6])  # "5 6" was followed by 7
    assert state.banned() == [7]
    logits = np.linspace(0.0, 1.0, 10)
    before, after = softmax_after_ban(logits, []), softmax_after_ban(logits, state.banned())
    assert after[7] == 0.0
    unrelated = [t for t in range(10) if t != 7]
    # unrelated tokens keep their relative probabilities
    assert np.allclose(after[unrelated] / after[unrelated].sum(), before[unrelated] / before[unrelated].sum())


def test_fill_banned_clears_only_the_followers():
    state = NoRepeatNGram(2).start([1, 2, 1])
    row = packed_row(70)
    assert tuple(state.fill_banned(row)) == (1, False)
    assert allowed_ids(row) == [t for t in range(70) if t != 2]


def test_size_zero_never_touches_the_mask():
    state = NoRepeatNGram(0).start([1, 1, 1, 1])
    state.push(1)
    row = packed_row(40)
    before = row.tobytes()
    assert tuple(state.fill_banned(row)) == (0, False)
    assert row.tobytes() == before and state.banned() == []


def test_size_one_bans_every_token_seen():
    state = NoRepeatNGram(1).start([3, 1, 3])
    assert state.banned() == [1, 3]


@settings(max_examples=200, deadline=None)
@given(histories, st.integers(1, 5), st.one_of(st.none(), st.integers(1, 12)))
def test_incremental_bans_equal_the_definition_at_every_step(history, n, window):
    state = NoRepeatNGram(n, window=window).start([])
    for i, tok in enumerate(history):
        assert state.banned() == reference_banned(history[:i], n, window)
        state.push(tok)
    assert state.banned() == reference_banned(history, n, window)


@settings(max_examples=200, deadline=None)
@given(histories, st.integers(1, 5), st.one_of(st.none(), st.integers(1, 12)), st.data())
def test_rollback_restores_the_exact_earlier_state(history, n, window, data):
    state = NoRepeatNGram(n, window=window).start([])
    for tok in history:
        state.push(tok)
    k = data.draw(st.integers(0, len(history)))
    state.rollback(k)
    kept = history[: len(history) - k]
    assert state.banned() == reference_banned(kept, n, window)
    # Indistinguishable from a state that never saw the undone tokens, whatever comes next.
    fresh = NoRepeatNGram(n, window=window, include_prompt=False).start()
    for tok in kept:
        fresh.push(tok)
    extra = data.draw(histories)
    for i, tok in enumerate(extra):
        state.push(tok)
        fresh.push(tok)
        assert state.banned() == fresh.banned() == reference_banned(kept + extra[: i + 1], n, window)
    assert state.n_generated == fresh.n_generated


def test_the_prompt_counts_unless_excluded():
    assert NoRepeatNGram(2).start([4, 9, 4]).banned() == [9]
    assert NoRepeatNGram(2, include_prompt=False).start([4, 9, 4]).banned() == []
    gen = NoRepeatNGram(2, include_prompt=False).start([4, 9, 4])
    for tok in (4, 9, 4):
        gen.push(tok)
    assert gen.banned() == [9]


def test_the_prompt_cannot_be_rolled_back():
    state = NoRepeatNGram(2).start([1, 2, 3])
    state.push(4)
    with pytest.raises(NoRepeatNGramError):
        state.rollback(2)


def test_whitelisted_tokens_are_never_banned():
    state = NoRepeatNGram(2, whitelist=[2]).start([1, 2, 1, 3, 1])
    assert state.banned() == [3]
    row = packed_row(8)
    state.fill_banned(row)
    assert allowed_ids(row) == [0, 1, 2, 4, 5, 6, 7]


def test_the_grammar_wins_when_the_ban_would_empty_the_row():
    state = NoRepeatNGram(2).start([1, 2, 1])
    row = packed_row(64, [2])  # the grammar allows only the banned follower
    result = state.fill_banned(row)
    assert (result.cleared, result.relaxed) == (0, True)
    assert allowed_ids(row) == [2] and state.relaxed_steps == 1
    row = packed_row(64, [2, 5])
    assert tuple(state.fill_banned(row)) == (1, False) and allowed_ids(row) == [5]
    assert state.relaxed_steps == 1


@pytest.mark.parametrize("bad", [{"n": -1}, {"n": 2, "window": 0}, {"n": 1.5}])
def test_invalid_configuration_is_rejected(bad):
    with pytest.raises(NoRepeatNGramError):
        NoRepeatNGram(**bad)
    assert issubclass(NoRepeatNGramError, GlrmaskError)


def test_bans_match_transformers_no_repeat_ngram_logits_processor():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rng = random.Random(1234)
    vocab_size = 12
    for _ in range(150):
        n = rng.randint(1, 5)
        history = [rng.randrange(vocab_size) for _ in range(rng.randint(0, 60))]
        split = rng.randint(0, len(history))
        state = NoRepeatNGram(n).start(history[:split])
        for tok in history[split:]:
            state.push(tok)
        scores = torch.zeros((1, vocab_size))
        ids = torch.tensor([history], dtype=torch.long) if history else torch.zeros((1, 0), dtype=torch.long)
        out = transformers.NoRepeatNGramLogitsProcessor(n)(ids, scores)
        theirs = sorted(torch.nonzero(torch.isinf(out[0])).flatten().tolist())
        assert state.banned() == theirs, (n, history)
