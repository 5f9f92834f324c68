"""Valid documents replay token by token inside the masks and end accepting; invalid ones are
refused at the right token (DESIGN §11, judge 4)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import glrmask
from conftest import DATA, byte_vocab
from test_grammars_shipped import EXAMPLES as SHIPPED_EXAMPLES

ROOT = Path(__file__).resolve().parents[1]
DOCS = [json.loads(line) for line in (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()]


def bit(bits: np.ndarray, tok: int) -> bool:
    return bool((int(bits.view(np.uint32)[tok >> 5]) >> (tok & 31)) & 1)


def replay(mask, vocab, text: str, rng: random.Random, check_every: int = 7):
    """Commit every token of the canonical tokenization; compare the mask at sampled steps."""
    state = mask.start()
    for i, tok in enumerate(vocab.encode(text)):
        if i % check_every == 0:
            assert bit(mask.get_mask(state), tok), (text, i, vocab.token_bytes(tok))
        assert state.commit(tok), (text, i, vocab.token_bytes(tok))
    return state


@pytest.fixture(scope="module")
def json_mask_gpt2(gpt2):
    return glrmask.compile(ROOT / "grammars" / "json.lark", gpt2)


def test_json_documents_replay_with_gpt2(json_mask_gpt2, gpt2):
    rng = random.Random(0)
    for text in DOCS:
        state = replay(json_mask_gpt2, gpt2, text, rng)
        assert state.is_accepting(), text
        eos = gpt2.eos_token_ids[0]
        assert bit(json_mask_gpt2.get_mask(state), eos)


def test_json_documents_replay_with_qwen3(qwen3):
    mask = glrmask.compile(ROOT / "grammars" / "json.lark", qwen3)
    rng = random.Random(1)
    for text in DOCS[::3]:
        assert replay(mask, qwen3, text, rng, check_every=11).is_accepting(), text


@pytest.mark.parametrize("text,bad_at", [
    ("1.", None), (".5", 0), ("01", 1), ("[1,]", 3), ('{"a" 1}', 5), ("tru", None),
    ('"a\x01"', 2), ("+1", 0), ("[1 2]", 3), ("1e", None), ('{"a":1,}', 7),
])
def test_invalid_json_is_refused_at_the_right_byte(text, bad_at):
    """``bad_at``: index of the first byte the masks must refuse (None: every byte is a viable
    prefix, but the text is incomplete)."""
    vocab = byte_vocab()
    mask = _byte_json_mask(vocab)
    state = mask.start()
    data = text.encode()
    for i, b in enumerate(data):
        ok = state.commit(b)
        if i == bad_at:
            assert not ok, (text, i)
            return
        assert ok, (text, i)
    assert bad_at is None
    assert not state.is_accepting()
    assert not state.commit(256)


_byte_masks: dict = {}


def _byte_json_mask(vocab):
    if "json" not in _byte_masks:
        _byte_masks["json"] = glrmask.compile(ROOT / "grammars" / "json.lark", vocab)
    return _byte_masks["json"]


def test_json_accepts_what_json_module_accepts_bytewise():
    vocab = byte_vocab()
    mask = _byte_json_mask(vocab)
    for text in ["0", "-0.5e+3", '"\\u00e9\\n"', "[]", "{}", ' {"a" : [ true , null ] } ', '"é😀"']:
        json.loads(text)
        state = mask.start()
        assert all(state.commit(b) for b in text.encode()), text
        assert state.is_accepting(), text


@pytest.mark.parametrize("name", sorted(SHIPPED_EXAMPLES))
def test_shipped_grammar_examples_replay_with_gpt2(name, gpt2):
    """Texts lark accepts replay to an accepting state; texts it rejects never do."""
    accepted, rejected = SHIPPED_EXAMPLES[name]
    mask = glrmask.compile(ROOT / "grammars" / f"{name}.lark", gpt2, mode="dynamic")
    rng = random.Random(name)
    for text in accepted:
        assert replay(mask, gpt2, text, rng).is_accepting(), text
    for text in rejected:
        state = mask.start()
        ok = all(state.commit(t) for t in gpt2.encode(text))
        assert not (ok and state.is_accepting()), text


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "grammars").iterdir() if p.is_dir()))
def test_corpus_grammar_inputs_replay_with_gpt2(name, gpt2):
    folder = DATA / "grammars" / name
    mask = glrmask.compile(folder / "grammar.lark", gpt2, mode="dynamic")
    rng = random.Random(name)
    for path in sorted((folder / "inputs").iterdir()):
        assert replay(mask, gpt2, path.read_text(encoding="utf-8"), rng, check_every=13).is_accepting(), path
