"""Specification of the packed token bitmask helpers (glrmask.bitmask over glrmask_ext.bitset).

Layout (xgrammar/llguidance): token ``id`` is bit ``id % 32`` of int32 word ``id // 32``. Every
operation is checked against a plain numpy reference that unpacks the words into booleans.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask import bitmask

# ---- numpy references ------------------------------------------------------------------------


def ref_bits(words: np.ndarray) -> np.ndarray:
    """Booleans per id, unpacked from int32 words."""
    u = words.view(np.uint32).astype(np.uint64)
    return (((u[:, None] >> np.arange(32, dtype=np.uint64)) & 1) == 1).reshape(-1)


def ref_words(bits: np.ndarray) -> np.ndarray:
    """int32 words packed from booleans (length padded to a multiple of 32)."""
    n = len(bits)
    padded = np.zeros(((n + 31) // 32) * 32, dtype=bool)
    padded[:n] = bits
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
    packed = (padded.reshape(-1, 32).astype(np.uint64) * weights).sum(axis=1)
    return packed.astype(np.uint32).view(np.int32)


sizes = st.integers(min_value=0, max_value=300)


@st.composite
def size_and_ids(draw):
    n = draw(st.integers(min_value=1, max_value=300))
    ids = draw(st.lists(st.integers(min_value=0, max_value=n - 1), max_size=80))
    return n, ids


@st.composite
def word_arrays(draw, n_words=None):
    k = n_words if n_words is not None else draw(st.integers(min_value=0, max_value=12))
    values = draw(st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), min_size=k, max_size=k))
    return np.array(values, dtype=np.int32)


# ---- layout ------------------------------------------------------------------------------------


def test_bit_layout_is_id_mod_32_of_word_id_div_32():
    words = bitmask.mask_from_ids([0, 31, 32, 65], 70)
    assert words.dtype == np.int32 and words.shape == (3,)
    assert words.view(np.uint32).tolist() == [0x80000001, 0x1, 0x2]


@given(sizes)
def test_n_words_is_ceil_of_n_over_32(n):
    assert bitmask.n_words(n) == -(-n // 32)


def test_n_words_rejects_negative_counts():
    with pytest.raises(ValueError):
        bitmask.n_words(-1)


def test_allocate_token_bitmask_allows_everything():
    out = bitmask.allocate_token_bitmask(3, 50257)
    assert out.shape == (3, 1571) and out.dtype == np.int32
    assert (out == -1).all()


def test_allocate_token_bitmask_of_zero_rows():
    assert bitmask.allocate_token_bitmask(0, 10).shape == (0, 1)


# ---- conversions -------------------------------------------------------------------------------


@given(size_and_ids())
def test_mask_from_ids_matches_reference(case):
    n, ids = case
    bits = np.zeros(n, dtype=bool)
    bits[ids] = True
    assert np.array_equal(bitmask.mask_from_ids(ids, n), ref_words(bits))


@given(word_arrays())
def test_ids_from_mask_matches_reference(words):
    got = bitmask.ids_from_mask(words)
    assert got.dtype == np.int64
    assert got.tolist() == np.flatnonzero(ref_bits(words)).tolist()


@given(size_and_ids())
def test_ids_round_trip_through_a_mask(case):
    n, ids = case
    assert bitmask.ids_from_mask(bitmask.mask_from_ids(ids, n)).tolist() == sorted(set(ids))


def test_mask_from_ids_refuses_ids_outside_the_range():
    with pytest.raises(IndexError):
        bitmask.mask_from_ids([5], 5)
    with pytest.raises(IndexError):
        bitmask.mask_from_ids(np.array([-1]), 5)


def test_mask_from_ids_of_no_ids_is_all_zero():
    assert bitmask.mask_from_ids([], 40).tolist() == [0, 0]


# ---- counting and membership ---------------------------------------------------------------------


@given(word_arrays())
def test_count_matches_reference(words):
    assert bitmask.count(words) == int(ref_bits(words).sum())


def test_count_of_a_batch_counts_all_rows():
    batch = bitmask.allocate_token_bitmask(2, 64)
    assert bitmask.count(batch) == 128


@given(word_arrays(n_words=4), st.integers(min_value=0, max_value=127))
def test_is_set_matches_reference(words, i):
    assert bitmask.is_set(words, i) == bool(ref_bits(words)[i])


def test_is_set_refuses_ids_past_the_mask():
    with pytest.raises(IndexError):
        bitmask.is_set(np.zeros(2, dtype=np.int32), 64)


# ---- in-place operations -----------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10).flatmap(lambda k: st.tuples(word_arrays(k), word_arrays(k))))
def test_and_into_and_or_into_match_reference(pair):
    a, b = pair
    dst = a.copy()
    bitmask.and_into(dst, b)
    assert np.array_equal(dst, a & b)
    dst = a.copy()
    bitmask.or_into(dst, b)
    assert np.array_equal(dst, a | b)
    assert np.array_equal(pair[1], b)  # src untouched


def test_and_into_works_row_for_row_on_batches():
    dst = bitmask.allocate_token_bitmask(2, 64)
    src = np.array([[1, 2], [3, 4]], dtype=np.int32)
    bitmask.and_into(dst, src)
    assert dst.tolist() == [[1, 2], [3, 4]]


def test_in_place_operations_refuse_mismatched_shapes_and_dtypes():
    with pytest.raises(ValueError):
        bitmask.or_into(np.zeros(2, np.int32), np.zeros(3, np.int32))
    with pytest.raises(TypeError):
        bitmask.and_into(np.zeros(2, np.int64), np.zeros(2, np.int64))
    with pytest.raises(ValueError):
        bitmask.and_into(np.zeros((2, 4), np.int32)[:, ::2], np.zeros((2, 2), np.int32))


@given(word_arrays(n_words=5), st.lists(st.integers(min_value=0, max_value=159), max_size=40))
def test_clear_ids_matches_reference_and_counts_bits_actually_cleared(words, ids):
    bits = ref_bits(words)
    expected_cleared = int(bits[sorted(set(ids))].sum()) if ids else 0
    bits = bits.copy()
    bits[ids] = False
    dst = words.copy()
    assert bitmask.clear_ids(dst, ids) == expected_cleared
    assert np.array_equal(dst, ref_words(bits))


def test_clear_ids_out_of_range_changes_nothing():
    words = np.full(2, -1, dtype=np.int32)
    with pytest.raises(IndexError):
        bitmask.clear_ids(words, [3, 64])
    assert (words == -1).all()


def test_clear_ids_refuses_read_only_masks():
    words = np.full(2, -1, dtype=np.int32)
    words.flags.writeable = False
    with pytest.raises(ValueError):
        bitmask.clear_ids(words, [1])


@settings(max_examples=20)
@given(size_and_ids())
def test_bit_31_is_the_sign_bit_of_the_word(case):
    n, _ = case
    if n > 31:
        assert bitmask.mask_from_ids([31], n)[0] == np.int32(-(2**31))
