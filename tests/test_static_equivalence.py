"""``mode="static"`` and ``mode="dynamic"`` give the same masks on real grammars and tokenizers.

The contract (DESIGN §4.8, §5 get_mask): after the same committed tokens, a static ``Mask`` and a
dynamic ``Mask`` of one grammar over one vocabulary return byte-identical ``get_mask`` arrays, and a
token is in the mask iff ``commit`` accepts it. test_static_mode.py checks this exhaustively on tiny
vocabularies; here it is checked at scale, through the public API only:

* every shipped grammar (grammars/*.lark) with each shipped tokenizer (GPT-2, Qwen3, Mistral-7B v0.1);
* every corpus grammar with inputs (tests/data/grammars/<name>/) with GPT-2;

on (a) replays of valid inputs, tokenized canonically by that tokenizer, comparing the masks before
every token and after the last one, and (b) seeded random walks, uniform over the mask.

Each (grammar, tokenizer) pair is compiled once per module in both modes: the ``masks`` fixture is
module-scoped and parametrized, so pytest runs all tests of one pair together and frees it after.
"""
from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed
from conftest import DATA, shipped_tokenizer
from glrmask.vocab import Vocab
from test_grammars_shipped import EXAMPLES as SHIPPED_EXAMPLES

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
CORPUS = DATA / "grammars"
TOKENIZER_NAMES = ["gpt2", "qwen3", "mistral-7b-v0.1"]
SHIPPED = sorted(p.stem for p in GRAMMARS.glob("*.lark"))
# Pairs that run only with ``-m slow`` (none today).
SLOW: set[tuple[str, str]] = set()
# Corpus grammars whose complete Parser DWA is over the default budget: no static mask to compare
# (test_an_over_budget_parser_dwa_is_a_clear_error_and_auto_stays_dynamic checks what they get).
OVER_BUDGET = {"java_subset"}
CORPUS_NAMES = sorted(p.name for p in CORPUS.iterdir()
                      if (p / "grammar.lark").is_file() and any((p / "inputs").glob("*.txt"))
                      and p.name not in OVER_BUDGET)


WALKS = 4          # random walks per pair
WALK_STEPS = 30    # tokens per walk (a walk ends early when the mask is empty or the state ended)
OUTSIDE_PROBES = 4  # tokens outside the mask that must fail to commit, per walk step
JSON_DOCUMENT_STRIDE = 25  # replay every 25th shipped JSON document (each tokenizer)


@dataclass(frozen=True)
class Pair:
    """One grammar compiled in both modes against one vocabulary, with the texts it must accept."""

    label: str
    vocab: Vocab
    dynamic: glrmask.Mask
    static: glrmask.Mask
    inputs: tuple[str, ...]


@lru_cache(maxsize=None)
def vocab(tokenizer: str) -> Vocab:
    return Vocab.from_tokenizer_json(shipped_tokenizer(tokenizer))


def shipped_inputs(name: str) -> tuple[str, ...]:
    """Valid texts of a shipped grammar: its accepted examples, plus shipped JSON documents."""
    texts = list(SHIPPED_EXAMPLES.get(name, ([], []))[0])
    if name == "json":
        lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
        texts += [json.loads(line) for line in lines[::JSON_DOCUMENT_STRIDE]]
    return tuple(texts)


def corpus_inputs(name: str) -> tuple[str, ...]:
    return tuple(p.read_text(encoding="utf-8") for p in sorted((CORPUS / name / "inputs").glob("*.txt")))


def compile_pair(label: str, source: Path, tokenizer: str, inputs: tuple[str, ...]) -> Pair:
    v = vocab(tokenizer)
    return Pair(label, v, glrmask.compile(str(source), v, mode="dynamic"),
                glrmask.compile(str(source), v, mode="static"), inputs)


def cases() -> list:
    out = []
    for name in SHIPPED:
        for tok in TOKENIZER_NAMES:
            marks = [pytest.mark.slow] if (name, tok) in SLOW else []
            out.append(pytest.param(("shipped", name, tok), id=f"{name}-{tok}", marks=marks))
    for name in CORPUS_NAMES:
        marks = [pytest.mark.slow] if (f"corpus/{name}", "gpt2") in SLOW else []
        out.append(pytest.param(("corpus", name, "gpt2"), id=f"corpus/{name}-gpt2", marks=marks))
    return out


@pytest.fixture(scope="module", params=cases())
def masks(request) -> Pair:
    kind, name, tok = request.param
    if kind == "shipped":
        return compile_pair(f"{name}-{tok}", GRAMMARS / f"{name}.lark", tok, shipped_inputs(name))
    return compile_pair(f"corpus/{name}-{tok}", CORPUS / name / "grammar.lark", tok, corpus_inputs(name))


def has(words: np.ndarray, tok: int) -> bool:
    """Token ``tok``'s bit in a packed mask (cheaper than unpacking a 150k-token mask)."""
    return bool((int(words.view(np.uint32)[tok >> 5]) >> (tok & 31)) & 1)


def ids_of(words: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))


def assert_same_mask(pair: Pair, dyn_state, sta_state, where) -> np.ndarray:
    """The two modes' masks are byte-identical here; returns the (static) mask."""
    want = pair.dynamic.get_mask(dyn_state)
    got = pair.static.get_mask(sta_state)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if got.tobytes() != want.tobytes():
        a, b = allowed(want), allowed(got)
        shown = lambda ids: sorted((t, pair.vocab.token_bytes(t)) for t in sorted(ids)[:8])  # noqa: E731
        pytest.fail(f"{pair.label}: masks differ at {where}: only dynamic {shown(a - b)}, "
                    f"only static {shown(b - a)}")
    return got


# ------------------------------------------------------------------------------ replays
def test_static_equals_dynamic_before_every_token_of_valid_inputs(masks: Pair):
    assert masks.inputs, masks.label
    for text in masks.inputs:
        tokens = masks.vocab.encode(text)
        d, s = masks.dynamic.start(), masks.static.start()
        for i, tok in enumerate(tokens):
            assert_same_mask(masks, d, s, (text[:60], i, masks.vocab.token_bytes(tok)))
            assert d.commit(tok) and s.commit(tok), (masks.label, text[:60], i)
        assert_same_mask(masks, d, s, (text[:60], "end"))


def test_every_replayed_token_is_in_the_preceding_static_mask(masks: Pair):
    for text in masks.inputs:
        s = masks.static.start()
        for i, tok in enumerate(masks.vocab.encode(text)):
            assert has(masks.static.get_mask(s), tok), (masks.label, text[:60], i)
            assert s.commit(tok), (masks.label, text[:60], i)


def test_replayed_valid_inputs_end_accepting_in_both_modes(masks: Pair):
    for text in masks.inputs:
        tokens = masks.vocab.encode(text)
        for mask in (masks.dynamic, masks.static):
            state = mask.start()
            assert all(state.commit(t) for t in tokens), (masks.label, mask.mode, text[:60])
            assert state.is_accepting(), (masks.label, mask.mode, text[:60])


# ------------------------------------------------------------------------------ random walks
def test_static_equals_dynamic_along_seeded_random_walks(masks: Pair):
    """Uniform walks over the static mask; at each step a few outside tokens must fail to commit in
    both modes (a token is in the mask iff commit accepts it)."""
    rng = random.Random(zlib.crc32(masks.label.encode()))
    size = masks.vocab.size
    steps = 0
    for walk in range(WALKS):
        d, s = masks.dynamic.start(), masks.static.start()
        for step in range(WALK_STEPS):
            words = assert_same_mask(masks, d, s, ("walk", walk, step))
            probes = [rng.randrange(size) for _ in range(4 * OUTSIDE_PROBES)]
            outside = [t for t in probes if not has(words, t)][:OUTSIDE_PROBES]
            outside += [e for e in masks.vocab.eos_token_ids if not has(words, e)]
            for tok in outside:
                assert not d.fork().commit(tok) and not s.fork().commit(tok), (walk, step, tok)
            ids = ids_of(words)
            if not len(ids):
                break
            tok = int(ids[rng.randrange(len(ids))])
            assert d.commit(tok) and s.commit(tok), (masks.label, walk, step, tok)
            steps += 1
            if s.is_terminated():
                assert d.is_terminated()
                break
        assert_same_mask(masks, d, s, ("walk", walk, "end"))
        assert d.is_accepting() == s.is_accepting(), (masks.label, walk)
    assert steps >= WALKS, masks.label


@pytest.mark.slow
def test_an_over_budget_parser_dwa_is_a_clear_error_and_auto_stays_dynamic():
    """The Java subset's composition grows past the default closure budget: ``mode="static"``
    names the stage and the limit, ``mode="auto"`` keeps serving exact dynamic masks."""
    source = str(CORPUS / "java_subset" / "grammar.lark")
    v = vocab("gpt2")
    with pytest.raises(glrmask.GrammarTooComplex, match="parser DWA.*max_closures"):
        glrmask.compile(source, v, mode="static")
    auto = glrmask.compile(source, v, mode="auto")
    assert not auto.wait_static(timeout=600)
    assert isinstance(auto.static_error, glrmask.GrammarTooComplex)
    text = corpus_inputs("java_subset")[0]
    state = auto.start()
    for tok in v.encode(text):
        assert has(auto.get_mask(state), tok) and state.commit(tok)
    assert state.is_accepting()
