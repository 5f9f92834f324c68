"""The Terminal DWA denotes exactly the terminal language of every (boundary lexer state, token)
(DESIGN §4.7 "Denotation test", §4.10), checked by brute force:

* every path of the automaton (labels, end) with its weight equals a straightforward per-token scan
  written here, branching over ``lexer.step`` events exactly as the recognizer does;
* the boundary lexer states are exactly those tokens can end in (closure from the initial state);
* ``fail_seed`` equals a direct ``cond_step`` scan of every token;
* combined with the reference GLR parser, the automaton admits exactly the tokens the reference
  recognizer admits from reachable configurations (an independent end-to-end judge).
"""
from __future__ import annotations

import random
from functools import lru_cache

import pytest

import glrmask
from _engine_support import allowed
from _grammars import CASE_BY_NAME
from conftest import byte_vocab, tiny_vocab
from glrmask.compiler.terminal_dwa import CLOSED, TerminalDWA, terminal_labels
from glrmask.errors import GrammarTooComplex
from glrmask.lexer import Lexer
from glrmask.reference import BOUNDARY, Config
from glrmask.vocab import Vocab

HARD_CASES = ["ambiguous_expr", "keywords_vs_names", "lazy_quantifier", "trailing_lookahead",
              "number_list", "escaped_string", "unicode_class", "ignore_ws", "case_insensitive"]
# two more corners: a token may end inside an ignored lexeme that is not yet a match (the parser
# needs nothing more), and an event whose condition can never hold must not count
EXTRA_CASES = {
    "ignored_comment": ('start: X+\nX: "x"\nCOMMENT: /#[a-z]*;/\n%ignore COMMENT',
                        ("#", "ab", ";", "x", "#a", "a;", "x#", "#;x")),
    "contradictory_lookahead": ('start: Y "b" | "y" "c"\nY: /y(?=b)(?=c)/', ("y", "b", "c", "yb", "yc")),
    # label-free outcomes of different shapes side by side in one subtree ("1" open in NUM or
    # WORD, "1a" only in WORD, "12a!" closed), so subtree results are united label by label
    "mixed_open_ends": ('start: (NUM | WORD)+\nNUM: /[0-9]+/\nWORD: /[0-9a-z]+!/\nWS: / +/\n%ignore WS',
                        ("1", "12", "123", "1a", "12a!", " ", "1 ", " 12", "a!", "1!", "2 3", "  ")),
    # a terminal both ignored and used: each event restarts twice, unlabelled and labelled, so a
    # subtree's result unites overlapping token sets reached through different branches
    "ignored_and_used": ('start: X (NL X)*\nX: "x"\nNL: /\\n+/\n%ignore NL',
                         ("x", "\n", "x\n", "\nx", "\n\n", "x\n\nx", "xx", "\nx\n")),
    # tokens open in more terminals than a flat result holds ("ab" in all seven, "ab3" closed in
    # one and open in all again): their outcomes are built with one label standing for the set
    # and written out in the layout, also beside labels of their own ("1" closes A, "12" opens)
    "open_in_many_terminals": (
        "start: item+\nitem: A | B | C | D | E | F | G\nA: /[a-z]*1/\nB: /[a-z]*2/\nC: /[a-z]*3/\n"
        "D: /[a-z]*4/\nE: /[a-z]*5/\nF: /[a-z]*6/\nG: /[a-z]*7/",
        ("a", "b", "ab", "ba", "1", "a1", "b2", "ab3", "4", "5a", "6", "7ab", "aa", "abab", "12", "3b")),
}


# ------------------------------------------------------------------------------ reference scan
def reference_outcomes(lexer, q: int, data: bytes, ignored, label_of) -> frozenset:
    """Lex(q, data): scan ``data`` from lexer state ``q`` with the recognizer's branching."""
    branches = {((), BOUNDARY if q == lexer.initial else q, ())}
    for byte in data:
        nxt = set()
        for labels, lex, conds in branches:
            kept = []
            for c in conds:
                c2 = lexer.cond_step(c, byte)
                if c2 == Lexer.FALSE:
                    break
                if c2 != Lexer.TRUE:
                    kept.append(c2)
            else:
                state = lexer.initial if lex == BOUNDARY else lex
                q2, events = lexer.step(state, byte)
                if q2 != Lexer.DEAD and lexer.futures(q2):
                    nxt.add((labels, q2, tuple(sorted(set(kept)))))
                for term, cond in events:
                    if cond == Lexer.FALSE or (cond != Lexer.TRUE and not lexer.cond_satisfiable(cond)):
                        continue
                    after = set(kept) if cond == Lexer.TRUE else set(kept) | {cond}
                    after = tuple(sorted(after))
                    if term in ignored:
                        nxt.add((labels, BOUNDARY, after))
                    if term in label_of:
                        nxt.add((labels + (label_of[term],), BOUNDARY, after))
        branches = nxt
    out = set()
    for labels, lex, _conds in branches:
        if lex == BOUNDARY:
            out.add((labels, CLOSED))
            continue
        for t in lexer.futures(lex):
            if t in ignored:
                out.add((labels, CLOSED))
            if t in label_of:
                out.add((labels, label_of[t]))
    return frozenset(out)


def reference_end_states(lexer, q, data, ignored, label_of) -> set[int]:
    """Mid-lexeme lexer states a scan of ``data`` from ``q`` can end in (with some outcome)."""
    ends = set()
    branches = {(BOUNDARY if q == lexer.initial else q, ())}
    for byte in data:
        nxt = set()
        for lex, conds in branches:
            kept = []
            for c in conds:
                c2 = lexer.cond_step(c, byte)
                if c2 == Lexer.FALSE:
                    break
                if c2 != Lexer.TRUE:
                    kept.append(c2)
            else:
                q2, events = lexer.step(lexer.initial if lex == BOUNDARY else lex, byte)
                if q2 != Lexer.DEAD and lexer.futures(q2):
                    nxt.add((q2, tuple(sorted(set(kept)))))
                for term, cond in events:
                    if cond == Lexer.FALSE or (cond != Lexer.TRUE and not lexer.cond_satisfiable(cond)):
                        continue
                    if term in ignored or term in label_of:
                        nxt.add((BOUNDARY, tuple(sorted(set(kept) | ({cond} - {Lexer.TRUE})))))
        branches = nxt
    for lex, _ in branches:
        if lex != BOUNDARY and lexer.futures(lex) & (set(ignored) | set(label_of)):
            ends.add(lex)
    return ends


def reference_denotation(lexer, trie, q, ignored, label_of) -> dict:
    den: dict = {}
    for tok in range(trie.n_internal):
        for o in reference_outcomes(lexer, q, trie.internal_bytes(tok), ignored, label_of):
            den.setdefault(o, set()).add(tok)
    return {o: frozenset(s) for o, s in den.items()}


def reference_fail(lexer, cond: int, data: bytes) -> bool:
    c = cond
    for byte in data:
        c = lexer.cond_step(c, byte)
        if c == Lexer.FALSE:
            return True
        if c == Lexer.TRUE:
            return False
    return False


# ------------------------------------------------------------------------------ fixtures
@lru_cache(maxsize=None)
def built(name: str):
    if name == "json_bytes":
        mask = glrmask.compile(_json_path(), byte_vocab())
    elif name in EXTRA_CASES:
        grammar, pieces = EXTRA_CASES[name]
        mask = glrmask.compile(grammar, tiny_vocab(list(pieces)), format="lark")
    else:
        case = CASE_BY_NAME[name]
        mask = glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark")
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    dwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of)
    return mask, dwa, ignored, label_of


def _json_path() -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parents[1] / "grammars" / "json.lark")


ALL = HARD_CASES + list(EXTRA_CASES) + ["json_bytes"]


# ------------------------------------------------------------------------------ denotation
@pytest.mark.parametrize("name", ALL)
def test_every_path_denotes_exactly_the_reference_outcomes(name):
    mask, dwa, ignored, label_of = built(name)
    for q in dwa.boundary_states.tolist():
        assert dwa.denotation(q) == reference_denotation(mask.lexer, mask.trie, q, ignored, label_of), (name, q)


@pytest.mark.parametrize("name", ALL)
def test_boundary_states_are_the_closure_of_token_end_states(name):
    mask, dwa, ignored, label_of = built(name)
    lexer, trie = mask.lexer, mask.trie
    seen, work = {lexer.initial}, [lexer.initial]
    while work:
        q = work.pop()
        for tok in range(trie.n_internal):
            for q2 in reference_end_states(lexer, q, trie.internal_bytes(tok), ignored, label_of):
                if q2 not in seen:
                    seen.add(q2)
                    work.append(q2)
    assert set(dwa.boundary_states.tolist()) == seen
    assert int(dwa.boundary_states[0]) == lexer.initial


@pytest.mark.parametrize("name", ALL)
def test_fail_seed_is_the_tokens_that_drive_the_condition_to_false(name):
    mask, dwa, _ignored, _label_of = built(name)
    lexer, trie = mask.lexer, mask.trie
    for c in dwa.cond_ids.tolist():
        expect = {t for t in range(trie.n_internal) if reference_fail(lexer, c, trie.internal_bytes(t))}
        assert dwa.fail_seed_tokens(c) == expect, (name, c)


def test_conditions_left_pending_by_tokens_all_have_seeds():
    mask, dwa, ignored, label_of = built("number_list")
    assert len(dwa.cond_ids) > 0  # "1" may still become "1.5": NUMBER=1 is conditional
    lexer, trie = mask.lexer, mask.trie
    conds = set(dwa.cond_ids.tolist())
    for c in conds:
        for t in range(trie.n_internal):
            d = c
            for byte in trie.internal_bytes(t):
                d = lexer.cond_step(d, byte)
                if d < 2:
                    break
            if d >= 2:
                assert d in conds


# ------------------------------------------------------------------------------ structure
@pytest.mark.parametrize("name", ALL)
def test_arrays_are_topological_sorted_and_weights_consistent(name):
    _mask, dwa, _i, _l = built(name)
    support = {}
    for d in reversed(range(dwa.n_nodes)):
        parts = set()
        if dwa.final_weight[d] >= 0:
            parts |= dwa.weight_tokens(int(dwa.final_weight[d]))
        labels = dwa.open_label[dwa.open_ptr[d]:dwa.open_ptr[d + 1]].tolist()
        assert labels == sorted(set(labels))
        for k in range(dwa.open_ptr[d], dwa.open_ptr[d + 1]):
            parts |= dwa.weight_tokens(int(dwa.open_weight[k]))
        labels = dwa.edge_label[dwa.edge_ptr[d]:dwa.edge_ptr[d + 1]].tolist()
        assert labels == sorted(set(labels))
        for k in range(dwa.edge_ptr[d], dwa.edge_ptr[d + 1]):
            tgt = int(dwa.edge_target[k])
            assert tgt > d
            assert dwa.weight_tokens(int(dwa.edge_weight[k])) == support[tgt]
            parts |= support[tgt]
        support[d] = parts
    for w in range(dwa.n_weights):
        ivs = dwa.weight_intervals(w)
        assert ivs and all(lo < hi for lo, hi in ivs)
        assert all(a[1] < b[0] for a, b in zip(ivs, ivs[1:]))  # disjoint, sorted, not adjacent


def test_dense_weights_match_the_intervals():
    _mask, dwa, _i, _l = built("json_bytes")
    dense = dwa.dense_weights()
    assert dense.shape == (dwa.n_weights, (dwa.n_tokens + 63) // 64)
    for w in range(dwa.n_weights):
        got = {i for i in range(dwa.n_tokens) if (int(dense[w, i // 64]) >> (i % 64)) & 1}
        assert got == dwa.weight_tokens(w)


# ------------------------------------------------------------------------------ end to end
def _admitted_by_dwa(mask, dwa, cfg: Config, tok: int, data: bytes) -> bool:
    glr = mask.recognizer.glr
    if any(tok in dwa.fail_seed_tokens(c) for c in cfg.conds):
        return False
    q = mask.lexer.initial if cfg.lex == BOUNDARY else cfg.lex
    for labels, end in dwa.token_outcomes(q, tok):
        f = cfg.frontier
        for lab in labels:
            if not glr.can_shift(f, lab):
                break
            f = glr.feed(f, lab)
        else:
            if end == CLOSED or glr.can_shift(f, end):
                return True
    return False


def _walk_configs(mask, rng: random.Random, steps: int) -> set[Config]:
    """Reference-recognizer configurations along a random walk of allowed byte tokens: each
    committed token's bytes are replayed through ``mask.recognizer``."""
    rec, vocab = mask.recognizer, mask.vocab
    state, cfgs = mask.start(), rec.initial
    seen = set(cfgs)
    for _ in range(steps):
        ids = [t for t in sorted(allowed(mask.get_mask(state))) if vocab.token_bytes(t)]
        if not ids:
            break
        tok = rng.choice(ids)
        assert state.commit(tok)
        cfgs = rec.step_bytes(cfgs, vocab.token_bytes(tok))
        assert cfgs
        seen |= cfgs
    return seen


@pytest.mark.parametrize("name", HARD_CASES + list(EXTRA_CASES))
def test_dwa_with_glr_admits_exactly_what_the_recognizer_admits(name):
    mask, _dwa, ignored, label_of = built(name)
    rng = random.Random(name)
    configs = {cfg for _ in range(6) for cfg in _walk_configs(mask, rng, 8)}
    # runtime lanes hold restricted lexer states: build with them as extra starts
    starts = {c.lex for c in configs if c.lex != BOUNDARY}
    dwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of, start_states=starts)
    trie, rec = mask.trie, mask.recognizer
    for cfg in configs:
        for tok in range(trie.n_internal):
            data = trie.internal_bytes(tok)
            expect = bool(rec.step_bytes(frozenset({cfg}), data))
            assert _admitted_by_dwa(mask, dwa, cfg, tok, data) == expect, (name, cfg, data)


# ------------------------------------------------------------------------------ GPT-2 + json
@pytest.fixture(scope="module")
def json_gpt2():
    vocab = Vocab.default()
    mask = glrmask.compile(_json_path(), vocab)
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    dwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of)
    return mask, dwa, ignored, label_of


def test_json_gpt2_sample_matches_reference_scan(json_gpt2):
    mask, dwa, ignored, label_of = json_gpt2
    trie = mask.trie
    rng = random.Random(7)
    sample = rng.sample(range(trie.n_internal), 400)
    # tokens with JSON structure bytes are the interesting ones
    rich = [t for t in range(trie.n_internal) if set(trie.internal_bytes(t)) & set(b'"\\{}[],:.-eE0123456789 ')]
    sample += rng.sample(rich, 400)
    for q in dwa.boundary_states.tolist():
        for tok in sample:
            data = trie.internal_bytes(tok)
            assert dwa.token_outcomes(q, tok) == reference_outcomes(mask.lexer, q, data, ignored, label_of), (q, data)


def test_json_gpt2_fail_seeds_match_a_direct_scan(json_gpt2):
    mask, dwa, _i, _l = json_gpt2
    trie = mask.trie
    for c in dwa.cond_ids.tolist():
        expect = {t for t in range(trie.n_internal) if reference_fail(mask.lexer, c, trie.internal_bytes(t))}
        assert dwa.fail_seed_tokens(c) == expect


# ------------------------------------------------------------------------------ budgets
@pytest.mark.parametrize("limit, word", [
    ({"max_boundary_states": 2}, "max_boundary_states"),
    ({"max_nodes": 3}, "max_nodes"),
    ({"max_weights": 3}, "max_weights"),
    ({"max_walk_steps": 1}, "max_walk_steps"),
    ({"max_seconds": 0.0}, "max_seconds"),
])
def test_budgets_raise_grammar_too_complex_naming_the_limit(limit, word):
    mask, _dwa, ignored, label_of = built("json_bytes")
    with pytest.raises(GrammarTooComplex, match=word):
        TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of, **limit)


def test_unknown_boundary_state_is_a_key_error():
    _mask, dwa, _i, _l = built("ignore_ws")
    with pytest.raises(KeyError):
        dwa.root_of(10**9)
