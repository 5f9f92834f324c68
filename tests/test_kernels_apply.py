"""Specification of ``glrmask.apply_token_bitmask_`` and ``glrmask.allocate_token_bitmask``.

Every implementation (numpy, torch CPU, the plain-torch device fallback, the Triton kernel) is held
to one naive reference: a Python loop that reads bit ``t % 32`` of word ``t // 32`` and writes -inf
for a clear bit, for a token past the mask, and leaves rows outside ``indices`` untouched.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import glrmask
from glrmask.kernels.apply import torch_apply_token_bitmask_

NEG_INF = float("-inf")
TORCH_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def reference(logits: np.ndarray, bitmask: np.ndarray, indices=None) -> np.ndarray:
    """The masked logits (float64 copy), token by token."""
    out = np.array(logits, dtype=np.float64, copy=True)
    rows = range(out.shape[0]) if indices is None else sorted(set(int(i) for i in indices))
    words = bitmask.shape[1]
    for r in rows:
        for t in range(out.shape[1]):
            allowed = t < words * 32 and (int(bitmask[r, t // 32]) >> (t % 32)) & 1
            if not allowed:
                out[r, t] = NEG_INF
    return out


def as_float64(logits) -> np.ndarray:
    if isinstance(logits, torch.Tensor):
        return logits.to(torch.float64).numpy()
    return logits.astype(np.float64)


@st.composite
def problems(draw):
    """Random logits width, mask width (<= ceil(width/32)), batch, mask bits and an optional
    subset of rows."""
    width = draw(st.integers(min_value=1, max_value=200))
    words = draw(st.integers(min_value=1, max_value=(width + 31) // 32))
    rows = draw(st.integers(min_value=1, max_value=5))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    density = draw(st.sampled_from([0.0, 0.03, 0.5, 0.97, 1.0]))
    bits = rng.random((rows, words * 32)) < density
    bitmask = np.packbits(bits, axis=1, bitorder="little").view("<i4").astype(np.int32)
    logits = rng.standard_normal((rows, width)).astype(np.float32)
    indices = draw(st.none() | st.lists(st.integers(min_value=0, max_value=rows - 1), max_size=rows))
    return logits, bitmask, indices


# ---- the CPU paths against the reference -----------------------------------------------------


@settings(max_examples=150)
@given(problems(), st.sampled_from(TORCH_DTYPES))
def test_torch_cpu_logits_equal_the_reference(problem, dtype):
    logits, bitmask, indices = problem
    t = torch.from_numpy(logits).to(dtype)
    expected = reference(as_float64(t), bitmask, indices)
    glrmask.apply_token_bitmask_(t, bitmask, indices)
    np.testing.assert_array_equal(as_float64(t), expected)


@settings(max_examples=100)
@given(problems(), st.sampled_from([np.float16, np.float32, np.float64]))
def test_numpy_logits_equal_the_reference(problem, dtype):
    logits, bitmask, indices = problem
    arr = logits.astype(dtype)
    expected = reference(arr, bitmask, indices)
    glrmask.apply_token_bitmask_(arr, bitmask, indices)
    np.testing.assert_array_equal(arr.astype(np.float64), expected)


@settings(max_examples=100)
@given(problems(), st.sampled_from(TORCH_DTYPES))
def test_plain_torch_fallback_equals_the_reference(problem, dtype):
    logits, bitmask, indices = problem
    t = torch.from_numpy(logits).to(dtype)
    expected = reference(as_float64(t), bitmask, indices)
    torch_apply_token_bitmask_(t, torch.from_numpy(bitmask), indices)
    np.testing.assert_array_equal(as_float64(t), expected)


# ---- layout details ---------------------------------------------------------------------------


def test_token_id_is_bit_id_mod_32_of_word_id_div_32():
    logits = torch.zeros(1, 96)
    bitmask = glrmask.bitmask.mask_from_ids([0, 31, 32, 95], 96)[None, :]
    glrmask.apply_token_bitmask_(logits, bitmask)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0, 31, 32, 95]


def test_logits_wider_than_the_mask_are_disallowed_past_it():
    logits = torch.zeros(2, 100)
    bitmask = glrmask.allocate_token_bitmask(2, 64)
    glrmask.apply_token_bitmask_(logits, bitmask)
    assert torch.isfinite(logits[:, :64]).all()
    assert torch.isneginf(logits[:, 64:]).all()


def test_mask_bits_past_the_logits_width_are_ignored():
    logits = torch.zeros(1, 40)
    glrmask.apply_token_bitmask_(logits, glrmask.allocate_token_bitmask(1, 64))
    assert torch.isfinite(logits).all()


def test_rows_outside_indices_are_untouched():
    logits = torch.randn(4, 50)
    before = logits.clone()
    bitmask = np.zeros((4, 2), dtype=np.int32)
    glrmask.apply_token_bitmask_(logits, bitmask, indices=[1, 3])
    assert torch.equal(logits[[0, 2]], before[[0, 2]])
    assert torch.isneginf(logits[[1, 3]]).all()


def test_indices_may_be_a_tensor():
    logits = torch.randn(3, 40)
    glrmask.apply_token_bitmask_(logits, np.zeros((3, 2), dtype=np.int32), torch.tensor([2]))
    assert torch.isneginf(logits[2]).all() and torch.isfinite(logits[:2]).all()


def test_empty_indices_change_nothing():
    logits = torch.randn(2, 40)
    before = logits.clone()
    glrmask.apply_token_bitmask_(logits, np.zeros((2, 2), dtype=np.int32), indices=[])
    assert torch.equal(logits, before)


def test_a_strided_view_is_masked_in_place():
    """HF passes ``outputs.logits[:, -1, :]``: a view whose rows are not adjacent in memory."""
    full = torch.randn(2, 3, 64)
    last = full[:, -1, :]
    bitmask = glrmask.bitmask.mask_from_ids([5], 64)[None, :].repeat(2, axis=0)
    glrmask.apply_token_bitmask_(last, bitmask)
    assert torch.isfinite(full[:, -1, :]).sum().item() == 2
    assert torch.isfinite(full[:, :2, :]).all()


def test_one_dimensional_logits_and_mask():
    logits = np.zeros(40, dtype=np.float32)
    glrmask.apply_token_bitmask_(logits, glrmask.bitmask.mask_from_ids([3], 40))
    assert np.isfinite(logits).nonzero()[0].tolist() == [3]


def test_a_taller_bitmask_serves_a_smaller_batch():
    logits = torch.zeros(2, 32)
    bitmask = np.zeros((8, 1), dtype=np.int32)
    bitmask[1, 0] = -1
    glrmask.apply_token_bitmask_(logits, bitmask)
    assert torch.isneginf(logits[0]).all() and torch.isfinite(logits[1]).all()


def test_a_torch_bitmask_is_accepted():
    logits = torch.zeros(1, 32)
    glrmask.apply_token_bitmask_(logits, torch.zeros(1, 1, dtype=torch.int32))
    assert torch.isneginf(logits).all()


def test_batches_larger_than_one_chunk_are_fully_masked():
    logits = torch.zeros(300, 20_000)
    bitmask = np.zeros((300, (20_000 + 31) // 32), dtype=np.int32)
    bitmask[:, 0] = 1
    glrmask.apply_token_bitmask_(logits, bitmask)
    assert (torch.isfinite(logits).sum(dim=1) == 1).all()


# ---- allocation ---------------------------------------------------------------------------------


def test_allocated_bitmask_allows_everything():
    bitmask = glrmask.allocate_token_bitmask(3, 100)
    assert bitmask.shape == (3, 4) and bitmask.dtype == np.int32
    logits = torch.zeros(3, 100)
    glrmask.apply_token_bitmask_(logits, bitmask)
    assert torch.isfinite(logits).all()


def test_mask_fill_writes_into_an_allocated_bitmask(gpt2):
    mask = glrmask.compile('start: "ab"', gpt2, mode="dynamic")
    bitmask = glrmask.allocate_token_bitmask(2, gpt2.n_logits)
    mask.fill_mask(mask.start(), bitmask, 1)
    logits = torch.zeros(2, gpt2.n_logits)
    glrmask.apply_token_bitmask_(logits, bitmask, indices=[1])
    allowed = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    assert allowed and all(b"ab".startswith(gpt2.token_bytes(t)) for t in allowed)
    assert torch.isfinite(logits[0]).all()


# ---- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logits", "bitmask", "indices", "message"),
    [
        (torch.zeros(1, 32), np.zeros((1, 2), dtype=np.int32), None, "words"),
        (torch.zeros(1, 32), np.zeros((1, 1), dtype=np.int64), None, "int32"),
        (torch.zeros(1, 32, dtype=torch.int32), np.zeros((1, 1), dtype=np.int32), None, "float"),
        (np.zeros((1, 32), dtype=np.int32), np.zeros((1, 1), dtype=np.int32), None, "float"),
        (torch.zeros(3, 32), np.zeros((2, 1), dtype=np.int32), None, "rows"),
        (torch.zeros(2, 32), np.zeros((2, 1), dtype=np.int32), [2], "indices"),
        (torch.zeros(2, 32), np.zeros((2, 1), dtype=np.int32), [-1], "indices"),
        (torch.zeros(2, 32), np.zeros((2, 1), dtype=np.int32), [[0]], "indices"),
        (torch.zeros(2, 2, 32), np.zeros((2, 1), dtype=np.int32), None, "2-D"),
        ([0.0] * 32, np.zeros((1, 1), dtype=np.int32), None, "torch tensor or a numpy array"),
        (torch.zeros(1, 32), [[0]], None, "numpy array or torch tensor"),
    ],
)
def test_mismatched_arguments_raise_bitmask_error(logits, bitmask, indices, message):
    with pytest.raises(glrmask.BitmaskError, match=message):
        glrmask.apply_token_bitmask_(logits, bitmask, indices)


def test_bitmask_error_is_a_glrmask_error():
    assert issubclass(glrmask.BitmaskError, glrmask.GlrmaskError)


def test_read_only_numpy_logits_are_refused():
    logits = np.zeros((1, 32), dtype=np.float32)
    logits.flags.writeable = False
    with pytest.raises(glrmask.BitmaskError, match="read-only"):
        glrmask.apply_token_bitmask_(logits, np.zeros((1, 1), dtype=np.int32))


# ---- the Triton kernel ---------------------------------------------------------------------------

_INTERPRETED_KERNEL_CHECK = textwrap.dedent(
    """
    import numpy as np, torch
    from glrmask.kernels import triton_apply
    from tests.test_kernels_apply import reference
    rng = np.random.default_rng(0)
    cases = [(70, 3, 3, torch.float32, None), (5000, 150, 2, torch.bfloat16, [1]),
             (64, 2, 4, torch.float16, [0, 3]), (4097, 129, 1, torch.float32, None)]
    for width, words, rows, dtype, indices in cases:
        logits = torch.from_numpy(rng.standard_normal((rows, width)).astype(np.float32)).to(dtype)
        bitmask = rng.integers(-2**31, 2**31, size=(rows, words), dtype=np.int64).astype(np.int32)
        expected = reference(logits.to(torch.float64).numpy(), bitmask, indices)
        idx = None if indices is None else torch.tensor(indices, dtype=torch.int32)
        triton_apply.apply(logits, torch.from_numpy(bitmask), idx)
        np.testing.assert_array_equal(logits.to(torch.float64).numpy(), expected)
    """
)


def test_triton_kernel_equals_the_reference_in_the_interpreter():
    """The kernel's indexing, run by Triton's CPU interpreter (no GPU needed)."""
    pytest.importorskip("triton")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", _INTERPRETED_KERNEL_CHECK], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _cuda_with_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_with_triton(), reason="needs CUDA and Triton")
@settings(max_examples=60)
@given(problems(), st.sampled_from(TORCH_DTYPES))
def test_cuda_logits_equal_the_reference(problem, dtype):
    from glrmask.kernels import triton_apply

    logits, bitmask, indices = problem
    t = torch.from_numpy(logits).to(dtype).cuda()
    assert triton_apply.supports(t)
    expected = reference(as_float64(t.cpu()), bitmask, indices)
    glrmask.apply_token_bitmask_(t, bitmask, indices)
    np.testing.assert_array_equal(as_float64(t.cpu()), expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fallback_without_triton_equals_the_reference():
    rng = np.random.default_rng(1)
    logits = torch.from_numpy(rng.standard_normal((3, 1000)).astype(np.float32))
    bitmask = rng.integers(-2**31, 2**31, size=(3, 30), dtype=np.int64).astype(np.int32)
    expected = reference(logits.numpy(), bitmask, [0, 2])
    cuda = logits.cuda()
    torch_apply_token_bitmask_(cuda, torch.from_numpy(bitmask).cuda(), [0, 2])
    np.testing.assert_array_equal(cuda.cpu().to(torch.float64).numpy(), expected)
