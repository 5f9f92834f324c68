"""``mode="static"`` is a drop-in for ``mode="dynamic"`` (DESIGN §4.8, §5 get_mask).

A static ``Mask`` reads its masks from the compiled Terminal DWA and stack effects and runs a
recognizer whose lexemes start from the unrestricted lexer (``restrict_lexer=False``). The contract:

* its masks equal the dynamic masks byte for byte after the same tokens;
* a token is in its mask iff ``commit`` accepts it (end tokens included);
* the unrestricted recognizer accepts exactly the token sequences the default one accepts;
* it never meets a lexer state its Terminal DWA lacks (no rebuild while decoding vocabulary tokens).

Checked on the hard-case grammars with tiny vocabularies (every state reachable within a few tokens)
and on json.lark with GPT-2 (replays of shipped JSON documents and random walks).
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed
from _grammars import CASE_BY_NAME
from conftest import DATA, tiny_vocab
from glrmask.reference import Recognizer

HARD_CASES = ["ambiguous_expr", "non_lalr", "right_recursive", "nullable_heavy", "keywords_vs_names",
              "lazy_quantifier", "trailing_lookahead", "number_list", "escaped_string",
              "unicode_class", "ignore_ws", "case_insensitive"]
JSON_GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "json.lark"


@lru_cache(maxsize=None)
def pair(name: str):
    """(dynamic mask, static mask) of a hard case over its tiny vocabulary."""
    case = CASE_BY_NAME[name]
    vocab = tiny_vocab(list(case.pieces))
    return (glrmask.compile(case.grammar, vocab, format="lark", mode="dynamic"),
            glrmask.compile(case.grammar, vocab, format="lark", mode="static"))


@lru_cache(maxsize=None)
def reachable(name: str, max_depth: int = 5, max_states: int = 300) -> list[tuple[int, ...]]:
    """Token sequences reaching distinct (dynamic, static) state pairs, breadth-first over the
    tokens either mode allows (a disagreement is caught by the tests, not hidden by the walk)."""
    dyn, sta = pair(name)
    seen: dict = {}
    layer = [()]
    for _ in range(max_depth + 1):
        nxt = []
        for seq in layer:
            d, s = replay(dyn, seq), replay(sta, seq)
            if d is None or s is None:
                continue
            key = (d.configuration(), s.configuration())
            if key in seen or len(seen) >= max_states:
                continue
            seen[key] = seq
            if d.is_terminated():
                continue
            toks = allowed(dyn.get_mask(d)) | allowed(sta.get_mask(s))
            nxt.extend(seq + (t,) for t in sorted(toks))
        layer = nxt
    return list(seen.values())


def replay(mask, seq):
    state = mask.start()
    for t in seq:
        if not state.commit(t):
            return None
    return state


# ------------------------------------------------------------------------------ hard cases
@pytest.mark.parametrize("name", HARD_CASES)
def test_static_masks_equal_dynamic_masks_on_every_reachable_state(name):
    dyn, sta = pair(name)
    seqs = reachable(name)
    assert len(seqs) > 1
    for seq in seqs:
        d, s = replay(dyn, seq), replay(sta, seq)
        assert d is not None and s is not None, seq
        assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes(), seq


@pytest.mark.parametrize("name", HARD_CASES)
def test_static_mask_holds_exactly_the_tokens_commit_accepts(name):
    _dyn, sta = pair(name)
    for seq in reachable(name):
        s = replay(sta, seq)
        in_mask = allowed(sta.get_mask(s))
        for tok in range(sta.vocab.size):
            assert s.fork().commit(tok) == (tok in in_mask), (seq, tok)


@pytest.mark.parametrize("name", HARD_CASES)
def test_unrestricted_recognizer_accepts_the_same_token_sequences(name):
    dyn, _sta = pair(name)
    default = dyn.recognizer
    free = Recognizer(dyn.grammar, dyn.table, dyn.lexer, restrict_lexer=False)
    vocab = dyn.vocab
    byte_tokens = [t for t in range(vocab.size) if not vocab.is_special(t) and vocab.token_bytes(t)]
    for seq in reachable(name):
        if any(t in vocab.eos_token_ids for t in seq):
            continue
        data = b"".join(vocab.token_bytes(t) for t in seq)
        a, b = default.step_bytes(default.initial, data), free.step_bytes(free.initial, data)
        assert bool(a) == bool(b), seq
        assert default.is_accepting(a) == free.is_accepting(b), seq
        for tok in byte_tokens:
            piece = vocab.token_bytes(tok)
            a2, b2 = default.step_bytes(a, piece), free.step_bytes(b, piece)
            assert bool(a2) == bool(b2), (seq, tok)
            assert default.is_accepting(a2) == free.is_accepting(b2), (seq, tok)


@pytest.mark.parametrize("name", HARD_CASES)
def test_static_mode_answers_every_token_boundary_from_the_parser_dwa(name):
    _dyn, sta = pair(name)
    for seq in reachable(name):
        sta.get_mask(replay(sta, seq))
    assert sta.n_fallbacks == 0


def test_dynamic_recognizer_restricts_the_lexer_and_static_does_not():
    dyn, sta = pair("keywords_vs_names")
    assert dyn.recognizer.restrict_lexer and not sta.recognizer.restrict_lexer
    assert dyn.mode == "dynamic" and sta.mode == "static"


def test_static_is_the_default_mode():
    case = CASE_BY_NAME["non_lalr"]
    mask = glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark")
    assert mask.mode == "static" and mask.active_mode == "static"


def test_unknown_mode_is_rejected_naming_both_modes():
    case = CASE_BY_NAME["non_lalr"]
    with pytest.raises(ValueError, match="static"):
        glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark", mode="compiled")


def test_json_schema_compiles_in_static_mode(gpt2):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    dyn = glrmask.compile_json_schema(schema, gpt2)
    sta = glrmask.compile_json_schema(schema, gpt2, mode="static")
    assert sta.mode == "static"
    d, s = dyn.start(), sta.start()
    for tok in gpt2.encode('{"a": 12}'):
        assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes()
        assert d.commit(tok) and s.commit(tok)
    assert s.is_accepting()
    assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes()


# ------------------------------------------------------------------------------ json × GPT-2
@pytest.fixture(scope="module")
def json_pair(gpt2):
    return glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="dynamic"), glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="static")


def check_mask_commit_agree(sta, s, rng: random.Random, k: int = 64) -> None:
    """Sampled tokens inside and outside the static mask (plus every end token) commit iff masked."""
    in_mask = allowed(sta.get_mask(s))
    outside = [t for t in rng.sample(range(sta.vocab.size), 4 * k) if t not in in_mask][:k]
    inside = rng.sample(sorted(in_mask), min(k, len(in_mask)))
    for tok in inside + outside + list(sta.vocab.eos_token_ids):
        assert s.fork().commit(tok) == (tok in in_mask), tok


def test_json_gpt2_static_equals_dynamic_on_document_replays(json_pair, gpt2):
    dyn, sta = json_pair
    rng = random.Random(1)
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    n = 0
    for line in lines[:10]:
        d, s = dyn.start(), sta.start()
        for tok in gpt2.encode(json.loads(line)):
            assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes()
            if n % 7 == 0:
                check_mask_commit_agree(sta, s, rng)
            assert d.commit(tok) and s.commit(tok)
            n += 1
        assert d.is_accepting() and s.is_accepting()
        assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes()
    assert n > 100
    assert sta.n_fallbacks == 0


def test_json_gpt2_static_equals_dynamic_on_random_walks(json_pair):
    dyn, sta = json_pair
    rng = random.Random(7)
    n = 0
    for _ in range(8):
        d, s = dyn.start(), sta.start()
        for _step in range(30):
            words = sta.get_mask(s)
            assert words.tobytes() == dyn.get_mask(d).tobytes()
            if n % 5 == 0:
                check_mask_commit_agree(sta, s, rng)
            ids = sorted(allowed(words))
            if not ids:
                break
            tok = rng.choice(ids)
            assert s.commit(tok) and d.commit(tok), tok
            n += 1
            if s.is_terminated():
                break
    assert n > 20


def test_json_gpt2_static_mask_has_the_token_bitmask_layout(json_pair):
    _dyn, sta = json_pair
    words = sta.get_mask(sta.start())
    assert words.dtype == np.int32 and words.shape == ((sta.vocab.n_logits + 31) // 32,)


@pytest.mark.parametrize("name", ["escaped_string", "keywords_vs_names", "lazy_quantifier"])
def test_static_masks_after_raw_bytes_equal_dynamic_masks(name):
    """``commit_bytes`` may stop where no token boundary does (a lane the Parser DWA has no root
    for); such states are answered by the dynamic masker over the same recognizer — still exact."""
    dyn, sta = pair(name)
    case = CASE_BY_NAME[name]
    pieces = [p.encode() if isinstance(p, str) else p for p in case.pieces]
    rng = random.Random(name)
    for _ in range(20):
        data = b"".join(rng.choice(pieces)[: rng.randint(1, 3)] for _ in range(rng.randint(1, 4)))
        d, s = dyn.start(), sta.start()
        ok_d, ok_s = d.commit_bytes(data), s.commit_bytes(data)
        assert ok_d == ok_s, data
        if ok_d:
            assert sta.get_mask(s).tobytes() == dyn.get_mask(d).tobytes(), data
            assert s.is_accepting() == d.is_accepting(), data
