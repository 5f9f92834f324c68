"""Specification of glrmask.trie.VocabTrie: pre-order renumbering, intervals, aliases, masks, cache."""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask.trie import VocabTrie

SHARED = Path(__file__).resolve().parents[2] / "shared"
GPT2_JSON = SHARED / "data" / "tokenizers" / "gpt2" / "tokenizer.json"


class FakeVocab:
    """The slice of glrmask.vocab.Vocab the trie uses: bytes per id, specials, fingerprint."""

    def __init__(self, tokens: list[bytes | None], special_token_ids: tuple[int, ...] = (),
                 n_logits: int | None = None) -> None:
        self._tokens = [b"" if (t is None or i in special_token_ids) else t for i, t in enumerate(tokens)]
        self._special = {i for i, t in enumerate(self._tokens) if not t} | set(special_token_ids)
        self.size = len(tokens)
        self.n_logits = n_logits if n_logits is not None else self.size
        h = hashlib.sha256(repr((self._tokens, sorted(self._special))).encode())
        self.fingerprint = h.hexdigest()

    def token_bytes(self, i: int) -> bytes:
        return self._tokens[i] if i < self.size else b""

    def is_special(self, i: int) -> bool:
        return i >= self.size or i in self._special


TOKENS: list[bytes | None] = [
    b"ab", b"a", b"abc", None, b"b", b"ab", b"", b"abd", b"\x00", b"\xff\xfe", b"<eos>", b"a\x00", b"ba",
]
SPECIAL = (10,)  # "<eos>" is a special token whose text would otherwise be a byte token


@pytest.fixture
def trie() -> VocabTrie:
    return VocabTrie.build(FakeVocab(TOKENS, SPECIAL))


def byte_tokens(tokens, special=()):
    return sorted({t for i, t in enumerate(tokens) if t and i not in special})


def random_vocab(seed: int, n: int = 300, alphabet: bytes = b"ab\x00\xff") -> list[bytes | None]:
    rng = random.Random(seed)
    out: list[bytes | None] = []
    for _ in range(n):
        r = rng.random()
        out.append(None if r < 0.03 else bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 5))))
    return out


def test_internal_ids_are_byte_tokens_in_lexicographic_order(trie):
    expected = byte_tokens(TOKENS, SPECIAL)
    assert trie.n_internal == len(expected)
    assert [trie.internal_bytes(i) for i in range(trie.n_internal)] == expected


def test_nodes_are_numbered_in_preorder_with_children_sorted_by_byte(trie):
    prefixes = [n.prefix for n in trie.iter_preorder()]
    assert prefixes[0] == b""
    assert prefixes == sorted(prefixes)
    assert len(set(prefixes)) == trie.n_nodes
    expected_nodes = {t[:k] for t in byte_tokens(TOKENS, SPECIAL) for k in range(len(t) + 1)}
    assert set(prefixes) == expected_nodes


def test_node_internal_marks_exactly_the_nodes_where_a_token_ends(trie):
    for n in trie.iter_preorder():
        if n.internal >= 0:
            assert trie.internal_bytes(n.internal) == n.prefix
            assert trie.internal_node[n.internal] == n.node
        else:
            assert n.prefix not in byte_tokens(TOKENS, SPECIAL)


def test_subtree_interval_is_exactly_the_tokens_with_the_node_prefix(trie):
    tokens = byte_tokens(TOKENS, SPECIAL)
    for n in trie.iter_preorder():
        lo, hi = trie.subtree_interval(n.node)
        assert [i for i, t in enumerate(tokens) if t.startswith(n.prefix)] == list(range(lo, hi))


def test_subtree_end_skips_exactly_the_nodes_below(trie):
    prefixes = [n.prefix for n in trie.iter_preorder()]
    for v, p in enumerate(prefixes):
        end = int(trie.node_subtree_end[v])
        assert all(q.startswith(p) for q in prefixes[v:end])
        assert end == trie.n_nodes or not prefixes[end].startswith(p)


def test_children_csr_lists_children_sorted_by_byte(trie):
    prefixes = [n.prefix for n in trie.iter_preorder()]
    for v, p in enumerate(prefixes):
        lo, hi = trie.child_ptr[v], trie.child_ptr[v + 1]
        kids = [int(c) for c in trie.child_node[lo:hi]]
        assert kids == [u for u, q in enumerate(prefixes) if len(q) == len(p) + 1 and q.startswith(p)]
        assert list(trie.child_byte[lo:hi]) == [prefixes[u][-1] for u in kids]
        assert all(trie.node_parent[u] == v for u in kids)
        if kids:
            assert kids[0] == v + 1


def test_depth_and_byte_describe_the_prefix(trie):
    for n in trie.iter_preorder():
        assert trie.node_depth[n.node] == len(n.prefix)
        if n.node:
            assert trie.node_byte[n.node] == n.prefix[-1]


def test_identical_bytes_alias_to_one_internal_id(trie):
    i = trie.orig_to_internal[0]
    assert trie.orig_to_internal[5] == i
    assert list(trie.orig_ids(int(i))) == [0, 5]


def test_special_none_and_empty_tokens_are_not_in_the_trie(trie):
    for orig in (3, 6, 10):
        assert trie.orig_to_internal[orig] == -1
    assert trie.find_node(b"<eos>") == -1
    assert trie.find_node(b"<") == -1


def test_orig_to_internal_and_internal_to_orig_are_inverse(trie):
    seen = []
    for i in range(trie.n_internal):
        for orig in trie.orig_ids(i):
            assert trie.orig_to_internal[orig] == i
            assert TOKENS[orig] == trie.internal_bytes(i)
            seen.append(int(orig))
    assert sorted(seen) == [o for o in range(len(TOKENS)) if trie.orig_to_internal[o] >= 0]


def test_find_node_follows_bytes(trie):
    assert trie.find_node(b"") == 0
    v = trie.find_node(b"ab")
    assert v > 0 and trie.internal_bytes(int(trie.node_internal[v])) == b"ab"
    assert trie.find_node(b"abz") == -1


def test_empty_vocabulary_of_specials_builds_a_root_only_trie():
    trie = VocabTrie.build(FakeVocab([None, b"", b"x"], special_token_ids=(2,)))
    assert trie.n_nodes == 1 and trie.n_internal == 0
    assert trie.subtree_interval(0) == (0, 0)
    out = trie.expand_to_orig_bitmask(np.zeros(0, dtype=np.uint64), 40)
    assert out.dtype == np.int32 and out.shape == (2,) and not out.any()


def reference_expand(tokens, special, trie, internal_set, n_logits):
    words = np.zeros((n_logits + 31) // 32, dtype=np.uint32)
    uniq = byte_tokens(tokens, special)
    for orig, t in enumerate(tokens):
        if t and orig not in special and uniq.index(t) in internal_set:
            words[orig // 32] |= np.uint32(1 << (orig % 32))
    return words.view(np.int32)


@pytest.mark.parametrize("seed", range(4))
def test_expand_to_orig_bitmask_matches_a_slow_reference(seed):
    tokens = random_vocab(seed)
    special = (1, 7)
    trie = VocabTrie.build(FakeVocab(tokens, special))
    rng = random.Random(seed)
    chosen = {i for i in range(trie.n_internal) if rng.random() < 0.4}
    n_logits = len(tokens) + 45  # padding ids beyond the vocabulary
    got = trie.expand_to_orig_bitmask(trie.internal_bitmask(sorted(chosen)), n_logits)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, reference_expand(tokens, special, trie, chosen, n_logits))


def test_expand_sets_bit_31_as_a_negative_int32_word():
    tokens = [bytes([i]) for i in range(32)]
    trie = VocabTrie.build(FakeVocab(tokens))
    out = trie.expand_to_orig_bitmask(trie.internal_bitmask([31]), 32)
    assert out.tolist() == [-(2**31)]


def test_expand_ignores_bits_past_the_last_internal_id():
    trie = VocabTrie.build(FakeVocab([b"a", b"b"]))
    all_ones = np.full(2, np.iinfo(np.uint64).max, dtype=np.uint64)
    assert trie.expand_to_orig_bitmask(all_ones, 64).tolist() == [0b11, 0]


def test_expand_rejects_wrong_dtype_and_too_few_logits():
    trie = VocabTrie.build(FakeVocab([b"a", b"b"]))
    with pytest.raises(ValueError):
        trie.expand_to_orig_bitmask(np.zeros(1, dtype=np.int64), 2)
    with pytest.raises(ValueError):
        trie.expand_to_orig_bitmask(np.zeros(1, dtype=np.uint64), 1)


def expand_by_definition(trie: VocabTrie, bits: np.ndarray, n_logits: int) -> np.ndarray:
    """Expansion by definition: original id j is set iff it is a byte token whose internal id is."""
    n_words = (n_logits + 31) // 32
    flags = np.zeros(n_words * 32, dtype=np.uint8)
    internal = np.unpackbits(np.ascontiguousarray(bits, dtype="<u8").view(np.uint8), bitorder="little")
    for j, i in enumerate(trie.orig_to_internal.tolist()):
        if i >= 0 and internal[i]:
            flags[j] = 1
    return np.packbits(flags, bitorder="little").view("<i4").astype(np.int32)


@pytest.mark.parametrize("density", [0.0, 0.01, 0.3, 0.7, 1.0])
def test_expansion_sets_exactly_the_original_ids_of_the_set_internal_ids(density):
    tokens = random_vocab(5, n=2000, alphabet=b"abcd")
    trie = VocabTrie.build(FakeVocab(tokens, (3,)))
    rng = np.random.default_rng(int(density * 100))
    bits = trie.internal_bitmask(np.flatnonzero(rng.random(trie.n_internal) < density))
    n_logits = len(tokens) + 100
    np.testing.assert_array_equal(trie.expand_to_orig_bitmask(bits, n_logits),
                                  expand_by_definition(trie, bits, n_logits))


def test_expand_fills_a_given_out_array():
    trie = VocabTrie.build(FakeVocab([b"a", b"b", b"a"]))
    out = np.full(2, -1, dtype=np.int32)
    result = trie.expand_to_orig_bitmask(trie.internal_bitmask([0]), 40, out=out)
    assert result is out and out.tolist() == [0b101, 0]


def test_expand_works_on_a_memory_mapped_trie(tmp_path):
    tokens = random_vocab(6)
    built = VocabTrie.build(FakeVocab(tokens))
    built.save(tmp_path / "t")
    mapped = VocabTrie.load(tmp_path / "t")
    bits = built.internal_bitmask(np.arange(0, built.n_internal, 3))
    np.testing.assert_array_equal(mapped.expand_to_orig_bitmask(bits, 320),
                                  expand_by_definition(built, bits, 320))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=4)), max_size=40))
def test_every_subtree_is_the_interval_of_its_prefix(tokens):
    trie = VocabTrie.build(FakeVocab(tokens))
    uniq = byte_tokens(tokens)
    assert trie.n_internal == len(uniq)
    for n in trie.iter_preorder():
        lo, hi = trie.subtree_interval(n.node)
        assert [i for i, t in enumerate(uniq) if t.startswith(n.prefix)] == list(range(lo, hi))
        assert trie.find_node(n.prefix) == n.node


def test_arrays_are_flat_numpy_of_the_documented_dtypes(trie):
    arrays = trie.arrays()
    assert all(a.ndim == 1 for a in arrays.values())
    assert arrays["child_byte"].dtype == np.uint8
    assert arrays["node_subtree_end"].dtype == np.int32
    assert arrays["orig_to_internal"].shape == (len(TOKENS),)


# -------------------------------------------------------------------------------------------------
# caching


def test_save_and_load_round_trip_every_array(trie, tmp_path):
    trie.fingerprint = "f" * 64
    trie.save(tmp_path / "t.glrtrie")
    loaded = VocabTrie.load(tmp_path / "t.glrtrie", expect_fingerprint="f" * 64)
    for name, arr in trie.arrays().items():
        np.testing.assert_array_equal(getattr(loaded, name), arr, err_msg=name)
    assert loaded.fingerprint == "f" * 64


def test_for_vocab_writes_the_disk_cache_and_reuses_it(tmp_path, monkeypatch):
    vocab = FakeVocab(random_vocab(7))
    VocabTrie.clear_memory_cache()
    first = VocabTrie.for_vocab(vocab, cache_dir=tmp_path)
    assert (tmp_path / f"{vocab.fingerprint}.glrtrie").is_file()

    VocabTrie.clear_memory_cache()
    monkeypatch.setattr(VocabTrie, "build", classmethod(lambda cls, v: pytest.fail("rebuilt")))
    second = VocabTrie.for_vocab(vocab, cache_dir=tmp_path)
    assert second is not first
    for name, arr in first.arrays().items():
        np.testing.assert_array_equal(getattr(second, name), arr, err_msg=name)
    VocabTrie.clear_memory_cache()


def test_for_vocab_returns_the_same_object_within_a_process(tmp_path):
    vocab = FakeVocab(random_vocab(8))
    VocabTrie.clear_memory_cache()
    assert VocabTrie.for_vocab(vocab, cache_dir=tmp_path) is VocabTrie.for_vocab(vocab, cache_dir=tmp_path)
    VocabTrie.clear_memory_cache()


def test_for_vocab_rebuilds_a_corrupted_cache_file(tmp_path):
    vocab = FakeVocab(random_vocab(9))
    path = tmp_path / f"{vocab.fingerprint}.glrtrie"
    path.write_bytes(b"GLRMASK\0garbage")
    VocabTrie.clear_memory_cache()
    trie = VocabTrie.for_vocab(vocab, cache_dir=tmp_path)
    assert trie.n_internal == len(byte_tokens(random_vocab(9)))
    assert VocabTrie.load(path, expect_fingerprint=vocab.fingerprint).n_nodes == trie.n_nodes
    VocabTrie.clear_memory_cache()


def test_for_vocab_does_not_load_a_trie_of_another_vocabulary(tmp_path):
    vocab_a, vocab_b = FakeVocab(random_vocab(10)), FakeVocab(random_vocab(11))
    VocabTrie.clear_memory_cache()
    trie_a = VocabTrie.for_vocab(vocab_a, cache_dir=tmp_path)
    # Plant a's file under b's name: the fingerprint inside the file must win over the name.
    (tmp_path / f"{vocab_b.fingerprint}.glrtrie").write_bytes(
        (tmp_path / f"{vocab_a.fingerprint}.glrtrie").read_bytes())
    VocabTrie.clear_memory_cache()
    trie_b = VocabTrie.for_vocab(vocab_b, cache_dir=tmp_path)
    assert trie_b.fingerprint == vocab_b.fingerprint
    expected = VocabTrie.build(vocab_b)
    np.testing.assert_array_equal(trie_b.tok_bytes, expected.tok_bytes)
    assert not np.array_equal(trie_b.tok_bytes, trie_a.tok_bytes)
    VocabTrie.clear_memory_cache()


def test_glrmask_vocab_and_a_duck_typed_vocab_give_the_same_trie():
    from glrmask.vocab import Vocab

    tokens = random_vocab(12)
    real = VocabTrie.build(Vocab.from_token_bytes(tokens, special_token_ids=(1, 7)))
    fake = VocabTrie.build(FakeVocab(tokens, (1, 7)))
    for name, arr in fake.arrays().items():
        np.testing.assert_array_equal(getattr(real, name), arr, err_msg=name)


# -------------------------------------------------------------------------------------------------
# real tokenizer


@pytest.fixture(scope="module")
def gpt2_vocab():
    if not GPT2_JSON.is_file():
        pytest.skip(f"shared data absent: {GPT2_JSON}")
    from glrmask.vocab import Vocab

    return Vocab.from_tokenizer_json(GPT2_JSON)


@pytest.fixture(scope="module")
def gpt2_trie(gpt2_vocab):
    return VocabTrie.build(gpt2_vocab)


def test_gpt2_trie_holds_every_non_special_token(gpt2_vocab, gpt2_trie):
    trie = gpt2_trie
    assert trie.n_internal == 50256  # 50257 minus <|endoftext|>, no duplicate byte strings
    assert trie.orig_to_internal[50256] == -1
    rng = random.Random(0)
    for orig in rng.sample(range(50256), 200):
        i = int(trie.orig_to_internal[orig])
        assert trie.internal_bytes(i) == gpt2_vocab.token_bytes(orig)
        lo, hi = trie.subtree_interval(int(trie.internal_node[i]))
        assert lo == i and all(trie.internal_bytes(j).startswith(gpt2_vocab.token_bytes(orig))
                               for j in range(lo, min(hi, lo + 50)))
    # all 256 single bytes are GPT-2 tokens: the root has 256 children
    assert trie.child_ptr[1] - trie.child_ptr[0] == 256


def test_gpt2_full_mask_sets_every_non_special_id(gpt2_trie):
    trie = gpt2_trie
    all_internal = trie.internal_bitmask(np.arange(trie.n_internal))
    out = trie.expand_to_orig_bitmask(all_internal, 50304)
    bits = np.unpackbits(out.view(np.uint8), bitorder="little").astype(bool)
    assert bits.shape == (50304,)
    assert bits[:50256].all() and not bits[50256:].any()
