"""Lexer-state classes in the Terminal DWA (glrmask.compiler.lexer_classes): over a dense lexer and
a vocabulary holding every single byte, a trie walk keys its branches by the representative of
the lexer states no token below the trie node can tell apart. Specification:

* h-equivalent states agree on every byte string of at most h bytes (events, futures, death);
* the automaton built that way denotes, for every boundary state, the same token outcomes as the
  one built over the lazy lexer (no classes), with the same boundary states, condition seeds and
  sizes — on grammars whose lexers are long chains (bounded strings, counted repeats), with
  lookaheads and ignored terminals, and over vocabularies whose tokens are longer than the
  chains' distinguishing depth;
* a vocabulary without every single byte keeps the exact walk (the classes stay off).
"""
from __future__ import annotations

import itertools
import random
from functools import lru_cache

import pytest

import glrmask
from glrmask.compiler.lexer_classes import BoundedClasses, byte_groups, node_heights
from glrmask.compiler.terminal_dwa import TerminalDWA, _Builder, terminal_labels
from glrmask.grammar.lark_frontend import grammar_from_lark
from glrmask.grammar.normalize import normalize
from glrmask.lexer import Lexer
from glrmask.lexer.dense import DenseLexer
from glrmask.lr import LRTable
from glrmask.trie import VocabTrie
from glrmask.vocab import Vocab

GRAMMARS = {
    "bounded_string": r'''
        start: "[" item ("," item)* "]"
        item: STR | NUM
        STR: /"[a-c]{0,12}"/
        NUM: /[0-9]{1,6}(?![0-9])/
    ''',
    "chain_and_free_text": r'''
        start: (KEY ":" VAL ";")+
        KEY: /"(?!ab")[a-z]{2,9}"/
        VAL: /[a-z ]{3,7}(?=;)/
        WS: /[ ]+/
        %ignore WS
    ''',
    "overlapping_bounds": r'''
        start: A | B | C
        A: /x{1,10}y/
        B: /x{4,15}z/
        C: /(?:xx){1,6}/
    ''',
}


def _vocab(extra: list[bytes]) -> Vocab:
    toks = [bytes([i]) for i in range(256)] + extra + [None]
    return Vocab.from_token_bytes(toks, special_token_ids=[len(toks) - 1], eos_token_ids=[len(toks) - 1])


def _extra_tokens(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = b'"[],:;abcxyz019 '
    out = {b'"abcabcabc', b'xxxxxxxx', b'xxxxxxxxxxxxxxxxy', b'"ab"', b'aaaaaaaaaaaaaaa"', b'123456', b'abc ;'}
    while len(out) < 60:
        out.add(bytes(rng.choice(alphabet) for _ in range(rng.randint(2, 18))))
    return sorted(out)


@lru_cache(maxsize=None)
def _built(name: str, full_bytes: bool = True):
    grammar = normalize(grammar_from_lark(GRAMMARS[name], source_name=name))
    table = LRTable.build(grammar)
    lazy = Lexer([(t.name, t.pattern) for t in grammar.terminals.values()])
    dense = DenseLexer.from_lexer(lazy)
    extra = _extra_tokens(len(name))
    vocab = _vocab(extra) if full_bytes else Vocab.from_token_bytes(
        [bytes([i]) for i in range(1, 256)] + extra + [None], special_token_ids=[255 + len(extra)],
        eos_token_ids=[255 + len(extra)])
    trie = VocabTrie.for_vocab(vocab)
    out = []
    for lexer in (lazy, dense):
        ignored, label_of = terminal_labels(lexer, grammar, table)
        out.append(TerminalDWA.build(lexer, trie, ignored=ignored, label_of=label_of))
    return grammar, table, lazy, dense, trie, out[0], out[1]


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_h_equivalent_states_agree_on_every_string_of_at_most_h_bytes(name):
    _g, _t, _lazy, dense, _trie, _l, _d = _built(name)
    classes = BoundedClasses(dense.dfa, 6)
    alphabet = sorted(set(b'"[],:;abcxyz019 \x00'))
    for h in range(0, 4):
        for q in range(dense.n_states):
            r = classes.rep(q, h)
            if r == q:
                continue
            for n in range(h + 1):
                for word in itertools.product(alphabet, repeat=n):
                    a, b = q, r
                    for byte in word:
                        a, ea = dense.step(a, byte)
                        b, eb = dense.step(b, byte)
                        assert ea == eb, (name, q, r, word)
                        assert (a < 0) == (b < 0), (name, q, r, word)
                    assert dense.futures(a) == dense.futures(b), (name, q, r, word)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_classes_from_the_byte_groups_are_the_classes_from_every_byte(name):
    _g, _t, _lazy, dense, _trie, _l, _d = _built(name)
    whole = BoundedClasses(dense.dfa, 20)
    grouped = BoundedClasses(dense.dfa, 20, groups=byte_groups(dense.dfa))
    assert grouped.n_levels == whole.n_levels
    assert all(grouped.level(h) == whole.level(h) for h in range(whole.n_levels))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_byte_groups_are_the_bytes_with_equal_columns(name):
    _g, _t, _lazy, dense, _trie, _l, _d = _built(name)
    dfa = dense.dfa
    assert byte_groups(dfa) == byte_groups(dfa, native=False)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_classes_merge_states_of_long_chains(name):
    _g, _t, _lazy, dense, _trie, _l, _d = _built(name)
    classes = BoundedClasses(dense.dfa, 20)
    assert classes.n_classes(0) < dense.n_states
    assert classes.n_classes(classes.stable_from) == dense.n_states  # the dense lexer is minimized


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walk_over_classes_denotes_what_the_exact_walk_denotes(name):
    _g, _t, _lazy, dense, trie, lazy_dwa, dense_dwa = _built(name)
    dfa = dense.dfa
    lazy_roots = lazy_dwa.boundary_states.tolist()
    assert set(dense_dwa.boundary_states.tolist()) == {dfa.state_id(q) for q in lazy_roots}
    assert int(dense_dwa.boundary_states[0]) == dense.initial
    for q in lazy_roots:
        assert dense_dwa.denotation(dfa.state_id(q)) == lazy_dwa.denotation(q), (name, q)
    assert (dense_dwa.n_nodes, dense_dwa.n_weights) == (lazy_dwa.n_nodes, lazy_dwa.n_weights)
    assert {dfa.cond_id(c) for c in lazy_dwa.cond_ids.tolist()} == set(dense_dwa.cond_ids.tolist())
    for c in lazy_dwa.cond_ids.tolist():
        assert dense_dwa.fail_seed_tokens(dfa.cond_id(c)) == lazy_dwa.fail_seed_tokens(c)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_the_walk_uses_classes_only_over_a_vocabulary_with_every_byte(name):
    grammar, table, _lazy, dense, trie, _l, _d = _built(name)
    ignored, label_of = terminal_labels(dense, grammar, table)
    kw = dict(max_boundary_states=10**6, max_nodes=10**7, max_weights=10**7, max_walk_steps=10**9,
              max_seconds=None)
    assert _Builder(dense, trie, frozenset(ignored), dict(label_of), **kw).classes is not None
    _g2, _t2, _lazy2, dense2, trie2, lazy_dwa2, dense_dwa2 = _built(name, full_bytes=False)
    assert _Builder(dense2, trie2, frozenset(ignored), dict(label_of), **kw).classes is None
    dfa2 = dense2.dfa
    for q in lazy_dwa2.boundary_states.tolist():
        assert dense_dwa2.denotation(dfa2.state_id(q)) == lazy_dwa2.denotation(q), (name, q)


def test_node_heights_are_the_longest_token_below_each_node():
    vocab = _vocab([b"abc", b"abd", b"abcdef", b"b"])
    trie = VocabTrie.for_vocab(vocab)
    h = node_heights(trie.child_ptr, trie.child_node)
    assert h[0] == 6
    for tok in range(trie.n_internal):
        node = int(trie.internal_node[tok])
        data = trie.internal_bytes(tok)
        below = [len(trie.internal_bytes(t)) - len(data) for t in range(trie.n_internal)
                 if trie.internal_bytes(t).startswith(data)]
        assert h[node] == max(below), data
