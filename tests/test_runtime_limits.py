"""Runtime misuse and runaway work end in clear errors for the request at hand (issue: reliability).

Static-mode bad use is covered in test_native_runtime.py; these are the same promises for the
reference (dynamic) engine, plus its per-step fuel.
"""
from __future__ import annotations

import numpy as np
import pytest

import glrmask


@pytest.fixture(scope="module")
def vocab():
    return glrmask.Vocab.default()


def test_a_dynamic_mask_over_its_step_fuel_is_a_clear_error(vocab):
    mask = glrmask.compile('start: A\nA: /a{3000}/\n', vocab, mode="dynamic",
                           limits={"dynamic": {"max_step_transitions": 5}})
    with pytest.raises(glrmask.GrammarTooComplex, match="max_step_transitions"):
        mask.get_mask(mask.start())


def test_running_out_of_fuel_leaves_other_requests_working(vocab):
    mask = glrmask.compile('start: A | "b"\nA: /a{3000}/\n', vocab, mode="dynamic",
                           limits={"dynamic": {"max_step_transitions": 5}})
    with pytest.raises(glrmask.GrammarTooComplex):
        mask.get_mask(mask.start())
    other = glrmask.compile('start: "b"', vocab, mode="dynamic")
    assert other.get_mask(other.start()).any()


@pytest.mark.parametrize("mode", ["dynamic", "static"])
@pytest.mark.parametrize("token", [3.7, "90", None, b"1"])
def test_commit_takes_integers_only(vocab, mode, token):
    mask = glrmask.compile('start: "1"', vocab, mode=mode)
    with pytest.raises(TypeError, match="token id must be an integer"):
        mask.start().commit(token)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_get_mask_of_none_is_a_type_error(vocab, mode):
    mask = glrmask.compile('start: "1"', vocab, mode=mode)
    with pytest.raises(TypeError, match="glrmask.State"):
        mask.get_mask(None)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_a_state_of_another_mask_is_a_value_error(vocab, mode):
    a = glrmask.compile('start: "1"', vocab, mode=mode)
    b = glrmask.compile('start: "2"', vocab, mode=mode)
    with pytest.raises(ValueError, match="another Mask"):
        a.fill_mask(b.start(), np.zeros((1, a.n_words), dtype=np.int32))


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_commit_bytes_of_a_str_is_a_type_error(vocab, mode):
    mask = glrmask.compile('start: "1"', vocab, mode=mode)
    with pytest.raises(TypeError, match="bytes"):
        mask.start().commit_bytes("1")


def test_an_ambiguous_grammar_whose_stacks_multiply_ends_in_a_clear_error(vocab):
    """``e: e e | "a"`` keeps one parser stack per way to split the text so far: past
    ``max_stacks`` the request ends in ``GrammarTooComplex`` naming the limit, never in memory
    growing without bound; the state stays where it was."""
    mask = glrmask.compile('start: e\ne: e e | "a"', vocab, limits={"runtime": {"max_stacks": 8}})
    state = mask.start()
    a = vocab.encode("a")[0]
    with pytest.raises(glrmask.GrammarTooComplex, match="max_stacks"):
        for _ in range(64):
            state.commit(a)
    depth = state.num_committed
    assert depth > 0 and mask.get_mask(state).any()
    roomy = glrmask.compile('start: e\ne: e e | "a"', vocab)
    s = roomy.start()
    for _ in range(depth + 1):
        assert s.commit(a)


def test_max_stacks_must_be_a_positive_integer(vocab):
    with pytest.raises(ValueError, match="max_stacks"):
        glrmask.compile('start: "a"', vocab, limits={"runtime": {"max_stacks": 0}})
