"""Static masks equal dynamic masks byte for byte (DESIGN §4.8, §5 get_mask).

The static path (Terminal DWA ∘ stack-effect automata = Parser DWA, walked over the parser stacks
of each configuration) must admit exactly the tokens the reference recognizer's trie walk admits:

* the hard-case grammars with tiny vocabularies, over every configuration set reachable within a
  few tokens (breadth-first, exhaustive up to a cap), and over each single configuration;
* json.lark with GPT-2, over the states of replays of shipped JSON documents and random walks.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed, random_walk
from _grammars import CASE_BY_NAME
from conftest import DATA, tiny_vocab
from glrmask.compiler.parser_dwa import ParserDWA
from glrmask.compiler.static_mask import StaticMasker, static_token_words
from glrmask.errors import GrammarTooComplex
from glrmask.recognizer import BOUNDARY

HARD_CASES = ["ambiguous_expr", "non_lalr", "right_recursive", "nullable_heavy", "keywords_vs_names",
              "lazy_quantifier", "trailing_lookahead", "number_list", "escaped_string",
              "unicode_class", "ignore_ws", "case_insensitive"]
# corners beyond _grammars.py: a token ending inside an ignored lexeme that is not yet a match, and
# an event whose condition can never hold
EXTRA_CASES = {
    "ignored_comment": ('start: X+\nX: "x"\nCOMMENT: /#[a-z]*;/\n%ignore COMMENT',
                        ("#", "ab", ";", "x", "#a", "a;", "x#", "#;x")),
    "contradictory_lookahead": ('start: Y "b" | "y" "c"\nY: /y(?=b)(?=c)/', ("y", "b", "c", "yb", "yc")),
}
JSON_GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "json.lark"


@lru_cache(maxsize=None)
def tiny(name: str):
    if name in EXTRA_CASES:
        grammar, pieces = EXTRA_CASES[name]
    else:
        grammar, pieces = CASE_BY_NAME[name].grammar, CASE_BY_NAME[name].pieces
    mask = glrmask.compile(grammar, tiny_vocab(list(pieces)), format="lark")
    return mask, StaticMasker(mask)


def reachable_sets(mask, max_depth: int = 6, max_sets: int = 400) -> list:
    """Configuration sets reachable by committing allowed tokens, breadth-first."""
    seen = {}
    layer = [mask.start()]
    for _ in range(max_depth + 1):
        nxt = []
        for state in layer:
            key = state._head.configs
            if key in seen or len(seen) >= max_sets:
                continue
            seen[key] = None
            if state.is_terminated():
                continue
            for tok in sorted(allowed(mask.get_mask(state))):
                child = state.fork()
                if child.commit(tok) and not child.is_terminated():
                    nxt.append(child)
        layer = nxt
    return list(seen)


def assert_same(mask, sm: StaticMasker, configs, what) -> None:
    got = sm.token_words(configs)
    want = mask._masker.token_words(configs)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (what, configs)


# ------------------------------------------------------------------------------ hard cases
@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_static_equals_dynamic_on_every_reachable_configuration_set(name):
    mask, sm = tiny(name)
    sets = reachable_sets(mask)
    assert len(sets) > 1
    for configs in sets:
        assert_same(mask, sm, configs, name)


@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_static_equals_dynamic_on_each_single_configuration(name):
    mask, sm = tiny(name)
    for configs in reachable_sets(mask):
        for cfg in configs:
            assert_same(mask, sm, frozenset({cfg}), name)


def test_an_unknown_mid_lexeme_state_rebuilds_the_terminal_dwa_and_stays_exact():
    case = CASE_BY_NAME["lazy_quantifier"]
    mask = glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark")
    sm = StaticMasker(mask)
    sets = reachable_sets(mask)
    lanes = {c.lex for s in sets for c in s if c.lex != BOUNDARY}
    fresh = lanes - set(sm.tdwa.boundary_states.tolist())
    assert fresh, "the case should hold parser-restricted lexer states"
    for configs in sets:
        assert_same(mask, sm, configs, "lazy_quantifier")
    assert fresh <= set(sm.tdwa.boundary_states.tolist())


def test_the_empty_configuration_set_allows_nothing():
    mask, sm = tiny("ambiguous_expr")
    assert not sm.token_words(frozenset()).any()


def test_end_tokens_are_left_to_the_caller():
    mask, sm = tiny("right_recursive")
    for configs in reachable_sets(mask):
        words = sm.token_words(configs)
        for eos in mask.vocab.eos_token_ids:
            assert not (int(words[eos // 32]) >> (eos % 32)) & 1


def test_one_shot_function_matches_the_masker():
    mask, sm = tiny("keywords_vs_names")
    for configs in reachable_sets(mask, max_depth=3, max_sets=20):
        assert static_token_words(mask, configs).tobytes() == sm.token_words(configs).tobytes()


def test_parser_dwa_budget_raises_grammar_too_complex():
    mask, sm = tiny("ambiguous_expr")
    pdwa = ParserDWA(sm.tdwa, sm.effects, max_closures=1)
    stack = next(iter(next(iter(mask.start()._head.configs)).frontier))
    with pytest.raises(GrammarTooComplex, match="max_closures"):
        pdwa.accepted(sm.tdwa.root_of(mask.lexer.initial), stack)


def test_closures_are_shared_between_masks():
    mask, _sm = tiny("number_list")
    sm = StaticMasker(mask)
    sets = reachable_sets(mask)
    for configs in sets:
        sm.token_words(configs)
    n = sm.pdwa.n_closures
    for configs in sets:
        sm.token_words(configs)
    assert sm.pdwa.n_closures == n


# ------------------------------------------------------------------------------ json × GPT-2
@pytest.fixture(scope="module")
def json_gpt2(gpt2):
    mask = glrmask.compile(str(JSON_GRAMMAR), gpt2)
    return mask, StaticMasker(mask)


def test_json_gpt2_static_equals_dynamic_on_document_replays(json_gpt2, gpt2):
    mask, sm = json_gpt2
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines][:12]
    seen = set()
    for doc in docs:
        state = mask.start()
        for tok in gpt2.encode(doc):
            configs = state._head.configs
            if configs not in seen:
                seen.add(configs)
                assert_same(mask, sm, configs, doc[:40])
            assert state.commit(tok)
    assert len(seen) > 50


def test_json_gpt2_static_equals_dynamic_on_random_walks(json_gpt2):
    mask, sm = json_gpt2
    rng = random.Random(5)
    n = 0
    for _ in range(8):
        for state, _ids in random_walk(mask, rng, 30):
            assert_same(mask, sm, state._head.configs, "random walk")
            n += 1
    assert n > 20


def test_json_gpt2_words_have_the_token_bitmask_layout(json_gpt2):
    mask, sm = json_gpt2
    words = sm.token_words(mask.start()._head.configs)
    assert words.dtype == np.int32 and words.shape == ((mask.vocab.n_logits + 31) // 32,)
