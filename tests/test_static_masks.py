"""Static masks equal the reference masker's byte for byte (DESIGN §4.8, §5 get_mask).

The native static path (Terminal DWA ∘ stack-effect automata = Parser DWA, walked in C over the
parser stacks of each configuration) must admit exactly the tokens the reference recognizer's trie
walk admits on the same configuration — the reference recognizer replays the same bytes over the
same dense lexer and LR table:

* the hard-case grammars with tiny vocabularies, over every state reachable within a few tokens
  (breadth-first, exhaustive up to a cap);
* json.lark with GPT-2, over the states of replays of shipped JSON documents and random walks;
* lanes the Parser DWA has no root for (bytes committed mid-token) are answered by the reference.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed, reachable_states, reference_words
from _grammars import CASE_BY_NAME
from conftest import DATA, tiny_vocab
from glrmask.compiler.parser_dwa import ParserDWA
from glrmask.compiler.stack_effects import StackEffects
from glrmask.compiler.terminal_dwa import CLOSED, TerminalDWA, terminal_labels
from glrmask.compiler.token_classes import TokenClasses
from glrmask.errors import GrammarTooComplex
from glrmask.reference import StackNode

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
    return glrmask.compile(grammar, tiny_vocab(list(pieces)), format="lark", mode="static")


def assert_same(mask, state, data: bytes, what) -> None:
    got, want = mask.get_mask(state), reference_words(mask, data)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (what, data)


# ------------------------------------------------------------------------------ hard cases
@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_native_masks_equal_the_reference_on_every_reachable_state(name):
    mask = tiny(name)
    states = reachable_states(mask)
    assert len(states) > 1
    for state, data in states:
        assert_same(mask, state, data, name)
    assert mask.n_fallbacks == 0


def test_a_lane_without_a_parser_dwa_root_is_answered_exactly_by_the_reference():
    # bytes committed in the middle of a token can leave a lane in a lexer state no token
    # boundary reaches: the Parser DWA has no root for it, the reference masker answers
    mask = glrmask.compile('start: "ab" "c"', tiny_vocab(["ab", "c", "abc"]), format="lark", mode="static")
    state = mask.start()
    assert state.commit_bytes(b"a")
    assert_same(mask, state, b"a", "mid-token")
    assert mask.n_fallbacks > 0
    assert allowed(mask.get_mask(state)) == set()  # no token starts with "b"
    assert state.commit_bytes(b"b")
    assert_same(mask, state, b"ab", "after the lexeme")


def test_a_terminated_state_allows_nothing():
    mask = tiny("right_recursive")
    for state, _data in reachable_states(mask):
        if state.is_accepting():
            for eos in mask.vocab.eos_token_ids:
                done = state.fork()
                assert done.commit(eos) and done.is_terminated()
                assert not mask.get_mask(done).any()
            return
    pytest.fail("no accepting state reached")


# ------------------------------------------------------------------------------ the automata themselves
def pieces_of(name: str):
    if name in EXTRA_CASES:
        return EXTRA_CASES[name]
    return CASE_BY_NAME[name].grammar, CASE_BY_NAME[name].pieces


@lru_cache(maxsize=None)
def automata(name: str):
    """(mask with the unrestricted recognizer, Terminal DWA, token classes, class sets, Parser DWA)."""
    grammar, pieces = pieces_of(name)
    mask = glrmask.compile(grammar, tiny_vocab(list(pieces)), format="lark", mode="static")
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    tdwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of)
    classes, class_sets = TokenClasses.from_weights(tdwa.weight_ptr, tdwa.weight_bounds, tdwa.n_tokens)
    pdwa = ParserDWA(tdwa, StackEffects.build(mask.table, ignore=mask.grammar.ignore),
                     class_sets, classes.n_classes)
    return mask, tdwa, classes, class_sets, pdwa


@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_token_classes_partition_every_weight_exactly(name):
    _mask, tdwa, classes, class_sets, _pdwa = automata(name)
    class_of = classes.class_of_tokens()
    for w in range(tdwa.n_weights):
        tokens = tdwa.weight_tokens(w)
        assert {int(class_of[t]) for t in tokens} == {c for c in range(classes.n_classes) if class_sets[w] >> c & 1}
        for c in {int(class_of[t]) for t in tokens}:
            assert {t for lo, hi in classes.class_tokens(c) for t in range(lo, hi)} <= tokens


@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_parser_dwa_denotes_the_tokens_whose_terminals_the_stack_accepts(name):
    """PDWA(stack) ∋ (q, v) ⇔ some lexing (r, end) ∈ Lex(q, β(v)) has r accepted by the GLR parser
    on that stack and then ``end`` shiftable (or CLOSED) — judged with the GLR driver, not the
    stack-effect automata."""
    mask, tdwa, classes, _sets, pdwa = automata(name)
    glr = mask.recognizer.glr
    class_of = classes.class_of_tokens()
    arrays = pdwa.arrays()
    stacks = {_stack_node(stack) for state, _data in reachable_states(mask, max_depth=4, max_sets=60)
              for _lex, _conds, lane_stacks in state.configuration()[1] for stack in lane_stacks}
    for q in tdwa.boundary_states.tolist():
        for stack in sorted(stacks, key=repr)[:25]:
            got = accepted_by_walk(arrays, q, stack)
            for v in range(tdwa.n_tokens):
                want = False
                for labels, end in tdwa.token_outcomes(q, v):
                    f = frozenset({stack})
                    for t in labels:
                        f = glr.feed(f, t) if f else f
                    if f and (end == CLOSED or glr.can_shift(f, end)):
                        want = True
                        break
                c = int(class_of[v])
                assert (c >= 0 and bool(got >> c & 1)) == want, (name, q, stack, v)


def test_parser_dwa_budgets_raise_grammar_too_complex_naming_the_limit():
    _mask, tdwa, classes, class_sets, _pdwa = automata("ambiguous_expr")
    effects = StackEffects.build(_mask.table, ignore=_mask.grammar.ignore)
    for limit in ("max_states", "max_closures"):
        with pytest.raises(GrammarTooComplex, match=limit):
            ParserDWA(tdwa, effects, class_sets, classes.n_classes, **{limit: 1}).expand()


def test_parser_dwa_is_acyclic_and_its_edges_name_distinct_lr_states():
    a = automata("right_recursive")[4].arrays()
    n_states = len(a["default_target"])
    succ = []
    for x in range(n_states):
        lo, hi = a["edge_ptr"][x], a["edge_ptr"][x + 1]
        labels = a["edge_label"][lo:hi].tolist()
        assert labels == sorted(set(labels))
        succ.append({t for t in a["edge_target"][lo:hi].tolist() + [int(a["default_target"][x])] if t >= 0})
    indegree = [0] * n_states
    for ts in succ:
        for t in ts:
            indegree[t] += 1
    ready = [x for x in range(n_states) if indegree[x] == 0]
    removed = 0
    while ready:  # Kahn: every state gets removed iff there is no cycle
        x = ready.pop()
        removed += 1
        for t in succ[x]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    assert removed == n_states > 0


def accepted_by_walk(arrays: dict, q: int, stack) -> int:
    """The classes the exported Parser DWA accepts for boundary lexer state ``q`` on ``stack``:
    the start weight, then one edge per stack state top-down (the explicit edge, else DEFAULT)
    until the stack or the automaton ends — the walk the native runtime does, in Python."""
    weights = arrays["weights"]

    def bits(w: int) -> int:
        return int.from_bytes(weights[w].astype("<u8").tobytes(), "little") if w >= 0 else 0

    i = arrays["boundary_states"].tolist().index(q)
    acc, node = bits(int(arrays["start_accept"][i])), stack
    x = -1
    if node is not None and node.state < len(arrays["start_class"]):  # the root's state for the top's class
        c = int(arrays["start_class"][node.state])
        lo, hi = int(arrays["start_ptr"][i]), int(arrays["start_ptr"][i + 1])
        k = lo + int(np.searchsorted(arrays["start_class_of"][lo:hi], c))
        if c >= 0 and k < hi and arrays["start_class_of"][k] == c:
            x = int(arrays["start_target"][k])
    while x >= 0 and node is not None:
        lo, hi = int(arrays["edge_ptr"][x]), int(arrays["edge_ptr"][x + 1])
        k = lo + int(np.searchsorted(arrays["edge_label"][lo:hi], node.state))
        if k < hi and arrays["edge_label"][k] == node.state:
            x, w = int(arrays["edge_target"][k]), int(arrays["edge_accept"][k])
        else:
            x, w = int(arrays["default_target"][x]), int(arrays["default_accept"][x])
        acc |= bits(w)
        node = node.parent
    return acc


def _stack_node(states: tuple) -> StackNode:
    node = None
    for s in states:
        node = StackNode(s, node)
    return node


# ------------------------------------------------------------------------------ json × GPT-2
@pytest.fixture(scope="module")
def json_gpt2(gpt2):
    return glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="static")


def test_json_gpt2_native_equals_reference_on_document_replays(json_gpt2, gpt2):
    mask = json_gpt2
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines][:12]
    seen = set()
    for doc in docs:
        state = mask.start()
        data = b""
        for tok in gpt2.encode(doc):
            key = state.configuration()
            if key not in seen:
                seen.add(key)
                assert_same(mask, state, data, doc[:40])
            assert state.commit(tok)
            data += gpt2.token_bytes(tok)
    assert len(seen) > 50


def test_json_gpt2_native_equals_reference_on_random_walks(json_gpt2, gpt2):
    mask = json_gpt2
    rng = random.Random(5)
    n = 0
    for _ in range(8):
        state, data = mask.start(), b""
        for _step in range(30):
            assert_same(mask, state, data, "random walk")
            n += 1
            ids = sorted(allowed(mask.get_mask(state)))
            tok = rng.choice(ids) if ids else None
            if tok is None or tok in gpt2.eos_token_ids:
                break
            assert state.commit(tok)
            data += gpt2.token_bytes(tok)
    assert n > 20


def test_json_gpt2_masks_have_the_token_bitmask_layout(json_gpt2):
    words = json_gpt2.get_mask(json_gpt2.start())
    assert words.dtype == np.int32 and words.shape == ((json_gpt2.vocab.n_logits + 31) // 32,)
