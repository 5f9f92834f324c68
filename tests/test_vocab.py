"""Specification of glrmask.Vocab: the bytes each token id writes (DESIGN §7) and the end ids (§2).

The judge for token bytes is independent of our decoding: concatenating the bytes of the ids that
the original tokenizer produces for a text must give exactly that text's UTF-8 after the
tokenizer's own normalization (SentencePiece prepends a space, Qwen3 applies NFC).
"""
from __future__ import annotations

import gzip
import json
import random
import sys
import types
import unicodedata
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from glrmask.errors import GlrmaskError, VocabError
from glrmask.vocab import TokenIdError, Vocab, gpt2_unicode_to_byte

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "data" / "tokenizers"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "tokenizers"
VECTORS = SHARED / "llamacpp-test-vectors"


def _identity(text: str) -> str:
    return text


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _sentencepiece(text: str) -> str:
    return " " + text


# name -> (tokenizer file, normalization of the reference text, expected end-token names)
CASES: dict[str, tuple[Path, object, set[str]]] = {
    "shipped/gpt2": (SHIPPED / "gpt2" / "tokenizer.json.gz", _identity, {"<|endoftext|>"}),
    "shipped/qwen3": (SHIPPED / "qwen3" / "tokenizer.json.gz", _nfc, {"<|endoftext|>", "<|im_end|>"}),
    "shipped/mistral-7b-v0.1": (SHIPPED / "mistral-7b-v0.1" / "tokenizer.json.gz", _sentencepiece, {"</s>"}),
    "shared/gpt2": (SHARED / "gpt2" / "tokenizer.json", _identity, {"<|endoftext|>"}),
    # This file is the Llama-3 layout: id 128008 is a reserved token, not <|eom_id|>.
    "shared/llama-3.1": (SHARED / "llama-3.1" / "tokenizer.json", _identity, {"<|end_of_text|>", "<|eot_id|>"}),
    "shared/qwen3": (SHARED / "qwen3" / "tokenizer.json", _nfc, {"<|endoftext|>", "<|im_end|>"}),
    "shared/llama-2": (SHARED / "llama-2" / "tokenizer.json", _sentencepiece, {"</s>"}),
    "shared/mistral-7b-v0.1": (SHARED / "mistral-7b-v0.1" / "tokenizer.json", _sentencepiece, {"</s>"}),
    "shared/mistral-tekken": (SHARED / "mistral-tekken-240911" / "tokenizer.json", _identity, {"</s>"}),
    "shared/deepseek-v3": (
        SHARED / "deepseek-v3" / "tokenizer.json",
        _identity,
        {"<\uff5cend\u2581of\u2581sentence\uff5c>"},
    ),
}


@pytest.fixture(scope="module")
def loaded():
    """Every tokenizer of CASES loaded at most once per module. ``vocab.tokenizer`` is the original
    ``tokenizers.Tokenizer`` it was read from (the judge of encodings), built on first use."""
    cache: dict[str, Vocab] = {}

    def get(name: str) -> Vocab:
        path = CASES[name][0]
        if not path.is_file():
            pytest.skip(f"{path} is not available")
        if name not in cache:
            cache[name] = Vocab.from_tokenizer_json(path)
        return cache[name]

    return get


# The shared copies of the shipped tokenizers are the same files: they are checked to give the same
# Vocab (test_shipped_and_shared_copies_of_a_tokenizer_give_the_same_vocab) rather than re-encoding.
DUPLICATES = {"shared/gpt2", "shared/qwen3", "shared/mistral-7b-v0.1"}
ENCODING_CASES = sorted(set(CASES) - DUPLICATES)


def random_texts(seed: int, n: int = 30) -> list[str]:
    """Mixed-script texts that stress token boundaries: whitespace runs, CJK, emoji with ZWJ and
    skin tones, flags, combining marks (NFC-sensitive), right-to-left scripts, digits, code."""
    pools = [
        "The quick brown fox, 123 jumps! ",
        "def f(x):\n\treturn {'a': [1, 2.5e-3]}\n",
        " ", "  ", "    ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t \t",
        "你好世界", "日本語のテキスト", "한국어",
        "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️",
        "e\u0301", "n\u0303a", "A\u030a", "o\u0308\u0304",
        "مرحبا بالعالم", "שלום", "Привет", "Ελληνικά", "हिन्दी",
        "\u00a0", "\u200b", "'s 're 've", "...", "~~", "0123456789",
    ]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [rng.choice(pools) for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.3:
            parts.append("".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 8))))
        text = "".join(parts).replace("\u2581", "_")
        out.append(text)
    return out


# --------------------------------------------------------------------------------------------------
# Token bytes reproduce the tokenizer's normalized text


@pytest.mark.parametrize("name", ENCODING_CASES)
def test_token_bytes_of_an_encoding_spell_the_normalized_text(loaded, name):
    vocab = loaded(name)
    normalize = CASES[name][1]
    for text in random_texts(seed=zlib.crc32(name.encode())):
        ids = vocab.encode(text)
        assert vocab.decode_bytes(ids) == normalize(text).encode("utf-8"), (name, text, ids)


@pytest.mark.parametrize("name", ENCODING_CASES)
def test_special_tokens_have_no_bytes(loaded, name):
    vocab = loaded(name)
    tok = vocab.tokenizer
    specials = [i for i, t in tok.get_added_tokens_decoder().items() if t.special]
    assert specials, "every tested tokenizer has special tokens"
    for i in specials:
        assert vocab.is_special(i)
        assert vocab.token_bytes(i) == b""
        assert i in vocab.special_token_ids


@pytest.mark.parametrize("name", ENCODING_CASES)
def test_end_tokens_are_the_expected_ones(loaded, name):
    vocab = loaded(name)
    tok = vocab.tokenizer
    assert {tok.id_to_token(i) for i in vocab.eos_token_ids} == CASES[name][2]
    assert list(vocab.eos_token_ids) == sorted(vocab.eos_token_ids)


@pytest.mark.parametrize("name", ENCODING_CASES)
def test_size_covers_every_id_the_tokenizer_defines(loaded, name):
    vocab = loaded(name)
    tok = vocab.tokenizer
    assert vocab.size == tok.get_vocab_size(with_added_tokens=True)
    assert vocab.n_logits == vocab.size
    assert vocab.token_offsets.shape == (vocab.size + 1,)
    assert vocab.token_offsets[-1] == vocab.token_bytes_concat.shape[0]


@pytest.mark.parametrize("name", ["shipped/mistral-7b-v0.1", "shared/llama-2"])
def test_byte_fallback_tokens_map_to_one_raw_byte(loaded, name):
    vocab = loaded(name)
    tok = vocab.tokenizer
    for b in range(256):
        i = tok.token_to_id(f"<0x{b:02X}>")
        assert vocab.token_bytes(i) == bytes([b])


@pytest.mark.parametrize("name", ["shipped/mistral-7b-v0.1", "shared/llama-2"])
def test_sentencepiece_word_initial_piece_starts_with_a_space(loaded, name):
    vocab = loaded(name)
    tok = vocab.tokenizer
    assert vocab.scheme == "sentencepiece"
    assert vocab.token_bytes(tok.token_to_id("\u2581{")) == b" {"
    assert vocab.token_bytes(tok.token_to_id("\u2581")) == b" "


def test_byte_level_pieces_go_through_the_gpt2_byte_table(loaded):
    vocab = loaded("shipped/gpt2")
    tok = vocab.tokenizer
    assert vocab.scheme == "byte-level"
    assert vocab.token_bytes(tok.token_to_id("\u0120the")) == b" the"
    assert vocab.token_bytes(tok.token_to_id("\u010a")) == b"\n"
    # every single byte has a one-character token in GPT-2
    one_byte = {vocab.token_bytes(i) for i in range(vocab.size) if len(vocab.token_bytes(i)) == 1}
    assert len(one_byte) == 256


def test_gpt2_byte_table_is_a_bijection_onto_all_bytes():
    table = gpt2_unicode_to_byte()
    assert sorted(table.values()) == list(range(256))
    assert table["\u0120"] == 0x20 and table["\u010a"] == 0x0A and table["A"] == 0x41


def test_added_tokens_not_marked_special_are_text_with_their_content(loaded):
    vocab = loaded("shipped/qwen3")
    tok = vocab.tokenizer
    i = tok.token_to_id("<tool_call>")
    assert not vocab.is_special(i)
    assert vocab.token_bytes(i) == b"<tool_call>"
    ids = vocab.encode("x<tool_call>{}")
    assert i in ids and vocab.decode_bytes(ids) == b"x<tool_call>{}"


def test_qwen3_normalizes_to_nfc(loaded):
    vocab = loaded("shipped/qwen3")
    assert vocab.decode_bytes(vocab.encode("e\u0301")) == "\u00e9".encode()


# --------------------------------------------------------------------------------------------------
# llama.cpp reference encodings


VECTOR_PAIRS = [
    ("ggml-vocab-gpt-2", "shared/gpt2"),
    ("ggml-vocab-gpt-2", "shipped/gpt2"),
    ("ggml-vocab-llama-bpe", "shared/llama-3.1"),
    ("ggml-vocab-qwen2", "shipped/qwen3"),
    ("ggml-vocab-llama-spm", "shared/llama-2"),
]


def read_vectors(stem: str) -> list[tuple[str, list[int]]]:
    inp = (VECTORS / f"{stem}.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    out = (VECTORS / f"{stem}.gguf.out").read_text(encoding="utf-8").split("\n")
    texts, lines = inp[:-1], out[: len(inp) - 1]
    assert len(texts) == len(lines) > 0
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


@pytest.mark.parametrize("stem,name", VECTOR_PAIRS)
def test_encode_matches_llamacpp_reference_vectors(loaded, stem, name):
    if not (VECTORS / f"{stem}.gguf.inp").is_file():
        pytest.skip("llama.cpp test vectors are not available")
    vocab = loaded(name)
    normalize = CASES[name][1]
    for text, expected in read_vectors(stem):
        assert vocab.encode(text) == expected, text
        if text:
            assert vocab.decode_bytes(expected) == normalize(text).encode("utf-8"), text


# --------------------------------------------------------------------------------------------------
# n_logits padding


def test_padding_ids_have_no_bytes_and_are_special():
    vocab = Vocab.from_tokenizer_json(CASES["shipped/gpt2"][0], n_logits=50304)
    assert (vocab.size, vocab.n_logits) == (50257, 50304)
    for i in (50257, 50300, 50303):
        assert vocab.token_bytes(i) == b""
        assert vocab.is_special(i)
    assert 50300 not in vocab.special_token_ids  # special_token_ids lists tokenizer ids only


def test_ids_past_n_logits_are_refused_with_an_index_error():
    vocab = Vocab.from_token_bytes([b"a", b"b"], n_logits=4)
    with pytest.raises(TokenIdError):
        vocab.token_bytes(4)
    with pytest.raises(IndexError):
        vocab.is_special(-1)
    with pytest.raises(VocabError):
        vocab.token_bytes(10)


def test_n_logits_smaller_than_the_vocabulary_is_an_error():
    with pytest.raises(VocabError, match="n_logits"):
        Vocab.from_token_bytes([b"a", b"b", b"c"], n_logits=2)
    with pytest.raises(VocabError, match="n_logits"):
        Vocab.from_tokenizer_json(CASES["shipped/gpt2"][0], n_logits=50000)


def test_token_offsets_index_the_concatenated_bytes():
    vocab = Vocab.from_token_bytes([b"ab", None, b"\xff", b"xyz"], n_logits=8)
    assert vocab.token_offsets.tolist() == [0, 2, 2, 3, 6]
    assert vocab.token_offsets.dtype == np.int64
    assert vocab.token_bytes_concat.dtype == np.uint8
    assert vocab.token_bytes_concat.tobytes() == b"ab\xffxyz"


def test_arrays_are_read_only():
    vocab = Vocab.from_token_bytes([b"ab", b"c"])
    with pytest.raises(ValueError):
        vocab.token_bytes_concat[0] = 1
    with pytest.raises(ValueError):
        vocab.token_offsets[0] = 1


def test_vocab_attributes_cannot_be_reassigned():
    vocab = Vocab.from_token_bytes([b"ab", b"c"])
    with pytest.raises(AttributeError):
        vocab.size = 3


# --------------------------------------------------------------------------------------------------
# Fingerprint


# Pins the fingerprint format: artifacts compiled earlier must keep matching the same vocabulary.
GPT2_FINGERPRINT = "af9d9eab69ff"


def test_fingerprint_is_stable_across_loads():
    path = CASES["shipped/gpt2"][0]
    first = Vocab.from_tokenizer_json(path)
    from glrmask import vocab as vocab_module

    vocab_module._cached_from_file.cache_clear()
    second = Vocab.from_tokenizer_json(path)
    assert first is not second
    assert first.fingerprint == second.fingerprint
    assert first.fingerprint.startswith(GPT2_FINGERPRINT)
    assert len(first.fingerprint) == 64 and int(first.fingerprint, 16) >= 0


def test_fingerprint_changes_with_one_byte():
    base = Vocab.from_token_bytes([b"ab", b"c", None])
    assert Vocab.from_token_bytes([b"ab", b"d", None]).fingerprint != base.fingerprint
    assert Vocab.from_token_bytes([b"a", b"bc", None]).fingerprint != base.fingerprint
    assert Vocab.from_token_bytes([b"ab", b"c", None]).fingerprint == base.fingerprint


def test_fingerprint_changes_with_the_special_ids():
    base = Vocab.from_token_bytes([b"a", None, b"b", None])
    moved = Vocab.from_token_bytes([b"a", None, None, b"b"])
    more = Vocab.from_token_bytes([b"a", None, b"b", None, None])
    assert len({base.fingerprint, moved.fingerprint, more.fingerprint}) == 3


def test_fingerprint_does_not_depend_on_n_logits():
    tokens = [b"a", b"b", None]
    assert (
        Vocab.from_token_bytes(tokens).fingerprint
        == Vocab.from_token_bytes(tokens, n_logits=64).fingerprint
    )


def test_shipped_and_shared_copies_of_a_tokenizer_give_the_same_vocab(loaded):
    for name in ("gpt2", "qwen3", "mistral-7b-v0.1"):
        shipped = loaded(f"shipped/{name}")
        shared = loaded(f"shared/{name}")
        assert shipped.fingerprint == shared.fingerprint
        assert shipped.eos_token_ids == shared.eos_token_ids


# --------------------------------------------------------------------------------------------------
# from_token_bytes


def test_from_token_bytes_marks_none_as_special():
    vocab = Vocab.from_token_bytes([b"a", None, b"bc"])
    assert vocab.size == 3 and vocab.n_logits == 3
    assert vocab.special_token_ids == frozenset({1})
    assert [vocab.token_bytes(i) for i in range(3)] == [b"a", b"", b"bc"]
    assert [vocab.is_special(i) for i in range(3)] == [False, True, False]


def test_from_token_bytes_declared_special_ids_lose_their_bytes():
    vocab = Vocab.from_token_bytes([b"a", b"<s>"], special_token_ids=[1])
    assert vocab.token_bytes(1) == b"" and vocab.is_special(1)


def test_end_tokens_are_special():
    vocab = Vocab.from_token_bytes([b"a", b"b", b"</s>"], eos_token_ids=[2])
    assert vocab.eos_token_ids == (2,)
    assert vocab.is_special(2) and vocab.token_bytes(2) == b""


def test_user_end_ids_keep_their_order_without_duplicates():
    vocab = Vocab.from_token_bytes([b"a", None, None, None], eos_token_ids=[3, 1, 3])
    assert vocab.eos_token_ids == (3, 1)


def test_from_token_bytes_rejects_bad_input():
    with pytest.raises(VocabError, match="empty"):
        Vocab.from_token_bytes([])
    with pytest.raises(VocabError, match="special token id"):
        Vocab.from_token_bytes([b"a"], special_token_ids=[1])
    with pytest.raises(VocabError, match="eos token id"):
        Vocab.from_token_bytes([b"a"], eos_token_ids=[-1])
    with pytest.raises(VocabError, match="bytes or None"):
        Vocab.from_token_bytes([b"a", "b"])  # type: ignore[list-item]


def test_encode_without_a_tokenizer_is_an_error():
    with pytest.raises(VocabError, match="encode"):
        Vocab.from_token_bytes([b"a"]).encode("a")


def test_vocab_errors_are_glrmask_errors():
    assert issubclass(VocabError, GlrmaskError) and issubclass(TokenIdError, VocabError)


# --------------------------------------------------------------------------------------------------
# End ids from configs next to the tokenizer file


def write_tiny_byte_level_tokenizer(directory: Path, specials: list[str]) -> Path:
    """A real (tokenizers-loadable) byte-level BPE tokenizer: 256 byte tokens + ``specials``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    table = {b: c for c, b in gpt2_unicode_to_byte().items()}
    vocab = {table[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory / "tokenizer.json"


SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eom_id|>", "<|eot_id|>", "<|other|>"]


def test_end_ids_union_config_generation_config_and_well_known_names(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, SPECIALS)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|eot_id|>"}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [259, 260]}))
    vocab = Vocab.from_tokenizer_json(path)
    # <|end_of_text|>, <|eom_id|>, <|eot_id|> by name, and 260 (<|other|>) from the generation config
    assert vocab.eos_token_ids == (257, 258, 259, 260)
    assert vocab.decode_bytes(vocab.encode("hi \xff")) == "hi \xff".encode()


def test_end_token_given_as_an_added_token_dict_in_the_config(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, ["<|other|>"])
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": {"__type": "AddedToken", "content": "<|other|>"}})
    )
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": 256}))
    assert Vocab.from_tokenizer_json(path).eos_token_ids == (256,)


def test_no_end_token_found_gives_an_empty_tuple(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, ["<|other|>"])
    assert Vocab.from_tokenizer_json(path).eos_token_ids == ()


def test_user_end_ids_replace_the_automatic_ones(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, SPECIALS)
    assert Vocab.from_tokenizer_json(path, eos_token_ids=[260]).eos_token_ids == (260,)
    assert Vocab.from_tokenizer_json(path, eos_token_ids=[]).eos_token_ids == ()
    with pytest.raises(VocabError, match="eos token id"):
        Vocab.from_tokenizer_json(path, eos_token_ids=[9999])


def test_loading_is_cached_per_file_and_refreshed_when_it_changes(tmp_path):
    import os

    path = write_tiny_byte_level_tokenizer(tmp_path, ["<|endoftext|>"])
    first = Vocab.from_tokenizer_json(path)
    assert Vocab.from_tokenizer_json(path) is first
    write_tiny_byte_level_tokenizer(tmp_path, ["<|endoftext|>", "<|extra|>"])
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = Vocab.from_tokenizer_json(path)
    assert second is not first and second.size == 258


def test_gzip_and_plain_files_give_the_same_vocab(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path / "plain", ["<|endoftext|>"])
    gz = tmp_path / "tokenizer.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert Vocab.from_tokenizer_json(gz).fingerprint == Vocab.from_tokenizer_json(path).fingerprint


def test_unreadable_or_foreign_files_are_vocab_errors(tmp_path):
    with pytest.raises(VocabError, match="cannot read"):
        Vocab.from_tokenizer_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(VocabError, match="JSON"):
        Vocab.from_tokenizer_json(bad)
    wordpiece = tmp_path / "wp.json"
    wordpiece.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0}}}))
    with pytest.raises(VocabError, match="WordPiece"):
        Vocab.from_tokenizer_json(wordpiece)


def test_a_tokenizer_without_byte_scheme_is_refused(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}))
    with pytest.raises(VocabError, match="cannot tell"):
        Vocab.from_tokenizer_json(path)


# --------------------------------------------------------------------------------------------------
# default(), load(), from_pretrained(), from_hf()


def test_default_is_the_shipped_gpt2():
    vocab = Vocab.default()
    assert vocab.size == 50257 and vocab.eos_token_ids == (50256,)
    assert vocab.fingerprint.startswith(GPT2_FINGERPRINT)
    assert Vocab.default() is vocab


def test_load_resolves_default_files_and_directories(tmp_path):
    assert Vocab.load(None) is Vocab.default()
    assert Vocab.load("default") is Vocab.default()
    gz = CASES["shipped/gpt2"][0]
    assert Vocab.load(gz).fingerprint == Vocab.default().fingerprint
    assert Vocab.load(str(gz.parent)).fingerprint == Vocab.default().fingerprint
    with pytest.raises(VocabError, match="no tokenizer.json"):
        Vocab.load(tmp_path)
    with pytest.raises(VocabError, match="does not exist"):
        Vocab.load(str(tmp_path / "nothing.json"))


def test_load_treats_other_names_as_hub_names(monkeypatch):
    calls = []
    monkeypatch.setattr(Vocab, "from_pretrained", classmethod(lambda cls, name, **kw: calls.append(name)))
    Vocab.load("Qwen/Qwen3-8B")
    assert calls == ["Qwen/Qwen3-8B"]


def test_from_pretrained_without_huggingface_hub_is_a_vocab_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes the import fail
    with pytest.raises(VocabError, match="huggingface_hub"):
        Vocab.from_pretrained("gpt2")


def test_from_pretrained_offline_is_a_vocab_error(monkeypatch):
    fake = types.ModuleType("huggingface_hub")

    def offline(*args, **kwargs):
        raise OSError("we are offline")

    fake.hf_hub_download = offline
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    with pytest.raises(VocabError, match="offline"):
        Vocab.from_pretrained("some-org/some-model", revision="main")


def test_from_pretrained_with_local_files_only_never_reaches_the_network(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(VocabError, match="some-org/missing-model"):
        Vocab.from_pretrained("some-org/missing-model", cache_dir=str(tmp_path), local_files_only=True)


def test_from_pretrained_builds_from_the_downloaded_files(tmp_path, monkeypatch):
    path = write_tiny_byte_level_tokenizer(tmp_path, SPECIALS)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|other|>"}))
    fake = types.ModuleType("huggingface_hub")

    def download(repo_id, filename, **kwargs):
        assert kwargs == {"revision": "abc"}
        if not (tmp_path / filename).is_file():
            raise FileNotFoundError(filename)
        return str(tmp_path / filename)

    fake.hf_hub_download = download
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    vocab = Vocab.from_pretrained("org/tiny", revision="abc", n_logits=300)
    assert vocab.name == "org/tiny" and vocab.n_logits == 300
    assert vocab.eos_token_ids == (257, 258, 259, 260)
    assert vocab.fingerprint == Vocab.from_tokenizer_json(path).fingerprint


def test_from_hf_matches_from_tokenizer_json(loaded):
    transformers = pytest.importorskip("transformers")
    vocab = loaded("shipped/gpt2")
    tok = vocab.tokenizer
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    from_hf = Vocab.from_hf(hf, n_logits=50304)
    assert from_hf.fingerprint == vocab.fingerprint
    assert from_hf.eos_token_ids == (50256,) and from_hf.n_logits == 50304
    assert from_hf.encode("Hello world") == vocab.encode("Hello world")


def test_from_hf_refuses_a_slow_tokenizer():
    class SlowTokenizer:
        eos_token_id = 0

    with pytest.raises(VocabError, match="fast"):
        Vocab.from_hf(SlowTokenizer())


def test_tokenizer_is_the_original_for_files_and_none_for_bytes():
    from tokenizers import Tokenizer

    assert isinstance(Vocab.default().tokenizer, Tokenizer)
    assert Vocab.from_token_bytes([b"a"]).tokenizer is None


def test_a_vocab_survives_pickling_with_its_tokenizer():
    import pickle

    vocab = Vocab.default()
    clone = pickle.loads(pickle.dumps(vocab))
    assert clone.fingerprint == vocab.fingerprint and clone.eos_token_ids == vocab.eos_token_ids
    assert clone.token_bytes(50256) == b"" and clone.token_bytes(262) == vocab.token_bytes(262)
    assert clone.encode("Hello world") == vocab.encode("Hello world")
    assert not clone.token_offsets.flags.writeable


# --------------------------------------------------------------------------------------------------
# Other layouts and arbitrary text


def test_unigram_with_metaspace_and_byte_fallback_reads_as_sentencepiece(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = [("<unk>", 0.0), ("\u2581", -1.0), ("a", -2.0), ("b", -2.0), ("\u2581ab", -0.5)]
    pieces += [(f"<0x{b:02X}>", -10.0) for b in range(256)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    tok.add_special_tokens(["<unk>", "</s>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    vocab = Vocab.from_tokenizer_json(tmp_path / "tokenizer.json")
    assert vocab.scheme == "sentencepiece"
    assert vocab.token_bytes(4) == b" ab" and vocab.token_bytes(5 + 0x0A) == b"\n"
    assert vocab.eos_token_ids == (vocab.size - 1,) and vocab.is_special(0)
    # Metaspace prepends its space only when the text does not already start with one.
    assert vocab.decode_bytes(vocab.encode("  b")) == b"  b"
    for text in ["ab ba", "a\u00e9b\n", "b  "]:
        assert vocab.decode_bytes(vocab.encode(text)) == (" " + text).encode()


SPECIAL_LOOKING = ("<|endoftext|>", "<s>", "</s>", "<unk>")


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_is_spelled_by_the_gpt2_token_bytes(loaded, text):
    vocab = loaded("shipped/gpt2")
    assume("<|endoftext|>" not in text)
    assert vocab.decode_bytes(vocab.encode(text)) == text.encode("utf-8")


@settings(max_examples=80, deadline=None)
@given(text=st.text(min_size=1, max_size=40))
def test_any_text_is_spelled_by_the_mistral_token_bytes(loaded, text):
    vocab = loaded("shipped/mistral-7b-v0.1")
    assume("\u2581" not in text and not any(s in text for s in SPECIAL_LOOKING))
    assert vocab.decode_bytes(vocab.encode(text)) == (" " + text).encode("utf-8")


def test_cached_vocab_is_refreshed_when_the_config_beside_it_changes(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, SPECIALS)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|other|>"}))
    assert 260 in Vocab.from_tokenizer_json(path).eos_token_ids
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|begin_of_text|>"}))
    assert 256 in Vocab.from_tokenizer_json(path).eos_token_ids


def test_a_malformed_config_beside_the_tokenizer_is_a_vocab_error(tmp_path):
    path = write_tiny_byte_level_tokenizer(tmp_path, SPECIALS)
    (tmp_path / "generation_config.json").write_text("{oops")
    with pytest.raises(VocabError, match="generation_config.json"):
        Vocab.from_tokenizer_json(path)


# --------------------------------------------------------------------------------------------------
# from_hf with a model (logits width, generation config) and from_gguf


def _hf_gpt2(loaded):
    transformers = pytest.importorskip("transformers")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=loaded("shipped/gpt2").tokenizer,
                                                eos_token="<|endoftext|>")


def test_from_hf_adds_the_generation_config_end_ids(loaded):
    transformers = pytest.importorskip("transformers")
    config = transformers.GenerationConfig(eos_token_id=[50256, 198])
    vocab = Vocab.from_hf(_hf_gpt2(loaded), generation_config=config)
    assert vocab.eos_token_ids == (198, 50256)


def test_from_hf_takes_logits_width_and_generation_config_from_the_model(loaded):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=50304, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    model = transformers.LlamaForCausalLM(config)
    model.generation_config.eos_token_id = 13
    vocab = Vocab.from_hf(_hf_gpt2(loaded), model=model)
    assert vocab.n_logits == 50304
    assert vocab.eos_token_ids == (13, 50256)


def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int], **ids: int) -> Path:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if "eos" in ids:
        writer.add_eos_token_id(ids["eos"])
    if "vocab_size" in ids:
        writer.add_vocab_size(ids["vocab_size"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def test_from_gguf_reads_byte_level_pieces_through_the_gpt2_table(tmp_path):
    path = _write_gguf(tmp_path / "m.gguf", "gpt2", ["<|endoftext|>", "Ġhello", "Ċ", "<tool>"],
                       [CONTROL, NORMAL, NORMAL, USER_DEFINED], eos=0)
    vocab = Vocab.from_gguf(path)
    assert [vocab.token_bytes(i) for i in range(4)] == [b"", b" hello", b"\n", b"<tool>"]
    assert vocab.eos_token_ids == (0,) and vocab.special_token_ids == frozenset({0})
    assert vocab.scheme == "byte-level"


def test_from_gguf_reads_sentencepiece_pieces_and_byte_tokens(tmp_path):
    path = _write_gguf(tmp_path / "m.gguf", "llama", ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581{", "ab"],
                       [UNKNOWN, CONTROL, CONTROL, BYTE, NORMAL, NORMAL])
    vocab = Vocab.from_gguf(path)
    assert [vocab.token_bytes(i) for i in range(6)] == [b"", b"", b"", b"\n", b" {", b"ab"]
    assert vocab.eos_token_ids == (2,)  # "</s>" by its well-known name
    assert vocab.scheme == "sentencepiece"


def test_from_gguf_takes_the_logits_width_from_the_architecture(tmp_path):
    path = _write_gguf(tmp_path / "m.gguf", "gpt2", ["a", "b"], [NORMAL, NORMAL], vocab_size=64)
    assert Vocab.from_gguf(path).n_logits == 64
    assert Vocab.from_gguf(path, eos_token_ids=[1], n_logits=96).n_logits == 96


def test_from_gguf_refuses_missing_files_other_tokenizers_and_non_gguf(tmp_path):
    with pytest.raises(VocabError, match="does not exist"):
        Vocab.from_gguf(tmp_path / "missing.gguf")
    bert = _write_gguf(tmp_path / "bert.gguf", "bert", ["[CLS]", "a"], [CONTROL, NORMAL])
    with pytest.raises(VocabError, match="not supported"):
        Vocab.from_gguf(bert)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all")
    with pytest.raises(VocabError, match="GGUF"):
        Vocab.from_gguf(junk)
