"""DenseLexer (glrmask.lexer.dense) is a drop-in for the lazy lexer wherever static mode uses one:

* stepped by the recognizer (``restrict_lexer=False``) it reaches, byte by byte, the same
  configuration sets as the lazy lexer once lazy ids are renamed to dense ones — hence the same
  acceptance and the same dead ends — on the shipped grammars, the grammar corpus and the hard
  cases, replaying their inputs and random byte walks;
* its ``step``/``futures``/``cond_*`` answers are the lazy lexer's, renamed;
* a Terminal DWA built over it denotes the same token outcomes per boundary state, with the same
  condition seeds;
* ``arrays()`` / ``from_arrays()`` (and an artifact file) give back an equal lexer.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from glrmask.artifact import read_artifact, write_artifact
from glrmask.compiler.terminal_dwa import TerminalDWA, terminal_labels
from glrmask.errors import ArtifactError
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.json_blob import encode_json_blob
from glrmask.lexer import Lexer
from glrmask.lexer.dense import DenseLexer, RestrictionUnsupported
from glrmask.lr import LRTable
from glrmask.reference import BOUNDARY, Recognizer

from _grammars import CASE_BY_NAME, CASES
from conftest import byte_vocab, tiny_vocab
from test_grammars_shipped import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
CORPUS = DATA / "grammars"
N_JSON_DOCS = 25
MAX_WALK_STACKS = 48  # of tests/data/json_documents.jsonl (the rest repeat the same structures)


def _corpus_inputs(name: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((CORPUS / name / "inputs").glob("*.txt"))]


def _json_docs() -> list[bytes]:
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line).encode("utf-8") for line in lines[:N_JSON_DOCS]]


def _case_texts(case) -> list[bytes]:
    pieces = [p.encode() if isinstance(p, str) else p for p in case.pieces]
    rnd = random.Random(case.name)
    return [b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8))) for _ in range(30)]


# name -> (grammar source, inputs)
GRAMMARS: dict[str, tuple[str, list[bytes]]] = {}
for _p in sorted((ROOT / "grammars").glob("*.lark")):
    _texts = [t.encode() for t in EXAMPLES.get(_p.stem, ([], []))[0] + EXAMPLES.get(_p.stem, ([], []))[1]]
    GRAMMARS[_p.stem] = (str(_p), _json_docs() if _p.stem == "json" else _texts)
for _p in sorted(CORPUS.glob("*/grammar.lark")):
    GRAMMARS[f"corpus_{_p.parent.name}"] = (str(_p), _corpus_inputs(_p.parent.name))
for _c in CASES:
    GRAMMARS[f"case_{_c.name}"] = (_c.grammar, _case_texts(_c))


class Pair:
    """One grammar with both lexers and a recognizer over each (unrestricted lexemes)."""

    def __init__(self, source: str):
        self.grammar = normalize(load_grammar(source))
        self.table = LRTable.build(self.grammar)
        self.lazy = Lexer([(t.name, t.pattern) for t in self.grammar.terminals.values()])
        self.dense = DenseLexer.from_lexer(self.lazy)
        self.dfa = self.dense.dfa
        self.r_lazy = Recognizer(self.grammar, self.table, self.lazy, restrict_lexer=False)
        self.r_dense = Recognizer(self.grammar, self.table, self.dense, restrict_lexer=False)

    def renamed(self, configs) -> dict:
        """A lazy configuration set in dense ids, merged the way the recognizer merges."""
        out: dict = {}
        for cfg in configs:
            lex = BOUNDARY if cfg.lex == BOUNDARY else self.dfa.state_id(cfg.lex)
            conds = tuple(sorted({self.dfa.cond_id(c) for c in cfg.conds}))
            out.setdefault((lex, conds), set()).update(cfg.frontier)
        return out

    @staticmethod
    def keyed(configs) -> dict:
        return {(cfg.lex, cfg.conds): set(cfg.frontier) for cfg in configs}

    def replay(self, data: bytes) -> int:
        """Step both recognizers over ``data`` comparing everything at every byte; returns how
        many bytes were read before the text died (``len(data)`` if it never did)."""
        s1, s2 = self.r_lazy.initial, self.r_dense.initial
        assert self.r_lazy.is_accepting(s1) == self.r_dense.is_accepting(s2)
        for i, b in enumerate(data):
            s1, s2 = self.r_lazy.step(s1, b), self.r_dense.step(s2, b)
            assert self.renamed(s1) == self.keyed(s2), (data[: i + 1])
            assert self.r_lazy.is_accepting(s1) == self.r_dense.is_accepting(s2), data[: i + 1]
            if not s1:
                return i
        return len(data)


@lru_cache(maxsize=None)
def pair(name: str) -> Pair:
    return Pair(GRAMMARS[name][0])


def random_walks(p: Pair, texts: list[bytes], rnd: random.Random, n: int) -> list[bytes]:
    """Walks that stay mostly alive: a random cut of an input, then bytes from the inputs'
    alphabet (or any byte) chosen among a few tries to keep the lazy recognizer alive. A walk
    stops early once its GLR frontiers hold many stacks (random identifiers next to ``<`` make
    the Java grammar's ambiguity explode; that costs time and tests nothing about the lexer)."""
    alphabet = sorted({b for t in texts for b in t}) or list(range(32, 127))
    out = []
    for _ in range(n):
        t = rnd.choice(texts) if texts else b""
        data = bytearray(t[: rnd.randint(0, len(t))])
        s = p.r_lazy.step_bytes(p.r_lazy.initial, bytes(data))
        for _ in range(rnd.randint(1, 40)):
            if not s or sum(len(cfg.frontier) for cfg in s) > MAX_WALK_STACKS:
                break
            for _try in range(4):
                b = rnd.choice(alphabet) if rnd.random() < 0.9 else rnd.randrange(256)
                s2 = p.r_lazy.step(s, b)
                if s2:
                    break
            data.append(b)
            s = s2
        out.append(bytes(data))
    return out


# ------------------------------------------------------------------------------ recognizer
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_recognizer_over_dense_lexer_replays_inputs_like_the_lazy_one(name):
    p = pair(name)
    for data in GRAMMARS[name][1]:
        p.replay(data)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_recognizer_over_dense_lexer_follows_random_byte_walks_like_the_lazy_one(name):
    p = pair(name)
    for data in random_walks(p, GRAMMARS[name][1], random.Random(name), 25):
        p.replay(data)


def test_corpus_inputs_are_accepted_through_the_dense_lexer():
    p = pair("corpus_json")
    for data in _corpus_inputs("json"):
        assert p.r_dense.is_accepting(p.r_dense.step_bytes(p.r_dense.initial, data))


def test_recognizer_refuses_to_restrict_a_dense_lexer():
    p = pair("case_ambiguous_expr")
    r = Recognizer(p.grammar, p.table, p.dense)  # restrict_lexer=True by default
    with pytest.raises(RestrictionUnsupported, match="restrict_lexer=False"):
        r.step(r.initial, ord("1"))


# ------------------------------------------------------------------------------ lexer interface
@pytest.mark.parametrize("name", ["sql", "json", "case_trailing_lookahead", "case_case_insensitive",
                                  "case_lazy_quantifier", "corpus_toml"])
def test_every_answer_is_the_lazy_lexers_renamed(name):
    p = pair(name)
    lazy, dense, dfa = p.lazy, p.dense, p.dfa
    assert dense.initial == dfa.state_id(lazy.initial)
    assert dense.terminal_names == lazy.terminal_names
    for q in np.flatnonzero(dfa.lazy_state_map >= 0).tolist():
        d = dfa.state_id(q)
        assert dense.futures(d) == lazy.futures(q)
        for b in range(256):
            q2, ev = lazy.step(q, b)
            assert dense.step(d, b) == (dfa.state_id(q2), tuple((t, dfa.cond_id(c)) for t, c in ev))
    for c in np.flatnonzero(dfa.lazy_cond_map >= 0).tolist():
        d = dfa.cond_id(c)
        assert dense.cond_at_end(d) == lazy.cond_at_end(c)
        assert dense.cond_satisfiable(d) == lazy.cond_satisfiable(c)
        for b in range(256):
            assert dense.cond_step(d, b) == dfa.cond_id(lazy.cond_step(c, b))


def test_constants_and_dead_state_match_the_lazy_lexer():
    dense = pair("json").dense
    assert (dense.DEAD, dense.TRUE, dense.FALSE) == (Lexer.DEAD, Lexer.TRUE, Lexer.FALSE)
    assert dense.step(dense.DEAD, 65) == (Lexer.DEAD, ())
    assert dense.futures(dense.DEAD) == frozenset()
    assert dense.cond_step(dense.TRUE, 0) == dense.TRUE and dense.cond_step(dense.FALSE, 0) == dense.FALSE
    assert dense.cond_satisfiable(dense.TRUE) and not dense.cond_satisfiable(dense.FALSE)
    assert dense.cond_at_end(dense.TRUE) and not dense.cond_at_end(dense.FALSE)


def test_sizes_count_like_the_lazy_lexer():
    dense = pair("sql").dense
    assert dense.n_states == dense.dfa.n_states
    assert dense.n_conds == dense.dfa.n_conds - 2  # pending ones only, as Lexer.n_conds
    assert dense.n_terminals == len(dense.terminal_names)


def test_an_unsatisfiable_condition_is_reported_so():
    # Y needs the next byte to be both "b" and "c": its event's condition can never hold
    p = Pair('start: Y "b" | "y" "c"\nY: /y(?=b)(?=c)/')
    conds = {c for q in range(p.dense.n_states) for b in range(256) for _t, c in p.dense.step(q, b)[1]}
    assert any(not p.dense.cond_satisfiable(c) for c in conds)
    for c in conds:
        lazy_ids = np.flatnonzero(p.dfa.lazy_cond_map == c).tolist()
        assert all(p.lazy.cond_satisfiable(x) == p.dense.cond_satisfiable(c) for x in lazy_ids)


def test_scan_reports_the_events_of_step():
    dense = pair("json").dense
    q, ev = dense.scan(dense.initial, b"12.5 ")
    state, expect = dense.initial, []
    for i, b in enumerate(b"12.5 "):
        if state < 0:
            break
        state, e = dense.step(state, b)
        expect.extend((i + 1, t, c) for t, c in e)
    assert (q, ev) == (state, expect)


# ------------------------------------------------------------------------------ terminal DWA
DWA_CASES = ["ambiguous_expr", "keywords_vs_names", "lazy_quantifier", "trailing_lookahead", "number_list",
             "escaped_string", "unicode_class", "ignore_ws", "case_insensitive"]


@lru_cache(maxsize=None)
def dwas(name: str):
    if name == "json_bytes":
        mask = glrmask.compile(str(ROOT / "grammars" / "json.lark"), byte_vocab(), mode="dynamic")
    else:
        case = CASE_BY_NAME[name]
        mask = glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark", mode="dynamic")
    dense = DenseLexer.from_lexer(mask.lexer)
    built = []
    for lexer in (mask.lexer, dense):
        ignored, label_of = terminal_labels(lexer, mask.grammar, mask.table)
        built.append(TerminalDWA.build(lexer, mask.trie, ignored=ignored, label_of=label_of))
    return mask, dense, built[0], built[1]


@pytest.mark.parametrize("name", DWA_CASES + ["json_bytes"])
def test_terminal_dwa_over_dense_lexer_has_the_same_denotation(name):
    mask, dense, lazy_dwa, dense_dwa = dwas(name)
    dfa = dense.dfa
    lazy_roots = lazy_dwa.boundary_states.tolist()
    assert set(dense_dwa.boundary_states.tolist()) == {dfa.state_id(q) for q in lazy_roots}
    assert int(dense_dwa.boundary_states[0]) == dense.initial
    for q in lazy_roots:
        assert dense_dwa.denotation(dfa.state_id(q)) == lazy_dwa.denotation(q), (name, q)
    assert (dense_dwa.n_nodes, dense_dwa.n_weights) == (lazy_dwa.n_nodes, lazy_dwa.n_weights)


@pytest.mark.parametrize("name", DWA_CASES + ["json_bytes"])
def test_terminal_dwa_over_dense_lexer_has_the_same_condition_seeds(name):
    mask, dense, lazy_dwa, dense_dwa = dwas(name)
    dfa = dense.dfa
    lazy_conds = lazy_dwa.cond_ids.tolist()
    assert set(dense_dwa.cond_ids.tolist()) == {dfa.cond_id(c) for c in lazy_conds}
    for c in lazy_conds:
        d = dfa.cond_id(c)
        assert dense_dwa.fail_seed_tokens(d) == lazy_dwa.fail_seed_tokens(c)
        for tok in range(mask.trie.n_internal):
            data = mask.trie.internal_bytes(tok)
            assert fails(dense, d, data) == fails(mask.lexer, c, data)


def fails(lexer, cond: int, data: bytes) -> bool:
    """``data`` drives pending condition ``cond`` to FALSE (what a static mask removes)."""
    for byte in data:
        cond = lexer.cond_step(cond, byte)
        if cond < 2:
            return cond == lexer.FALSE
    return False


# ------------------------------------------------------------------------------ (de)serialization
def same_lexer(a: DenseLexer, b: DenseLexer) -> None:
    xa, xb = a.arrays(), b.arrays()
    assert xa.keys() == xb.keys()
    for k in xa:
        assert xa[k].dtype == xb[k].dtype and np.array_equal(xa[k], xb[k]), k
    assert a.terminal_names == b.terminal_names and a.initial == b.initial
    for q in range(a.n_states):
        assert a.futures(q) == b.futures(q)
        for byte in range(256):
            assert a.step(q, byte) == b.step(q, byte)
    for c in range(a.n_conds + 2):
        assert a.cond_at_end(c) == b.cond_at_end(c) and a.cond_satisfiable(c) == b.cond_satisfiable(c)
        assert all(a.cond_step(c, byte) == b.cond_step(c, byte) for byte in range(256))


@pytest.mark.parametrize("name", ["sql", "case_trailing_lookahead", "case_unicode_class"])
def test_arrays_round_trip_gives_an_equal_lexer(name):
    dense = pair(name).dense
    same_lexer(dense, DenseLexer.from_arrays(dense.arrays()))


def test_artifact_file_round_trip(tmp_path):
    dense = pair("tinylang").dense
    write_artifact(tmp_path / "lex.bin", kind="lexer", meta={}, arrays=dense.arrays())
    same_lexer(dense, DenseLexer.from_arrays(read_artifact(tmp_path / "lex.bin", kind="lexer").arrays))


def test_prefixed_keys_are_read():
    dense = pair("arithmetic").dense
    arrays = {"lex/" + k: v for k, v in dense.arrays().items()}
    same_lexer(dense, DenseLexer.from_arrays(arrays, prefix="lex/"))


def test_bare_dfa_arrays_take_the_names_as_an_argument():
    dense = pair("arithmetic").dense
    same_lexer(dense, DenseLexer.from_arrays(dense.dfa.arrays(), terminal_names=dense.terminal_names))


def test_bare_dfa_arrays_without_names_are_an_artifact_error():
    dense = pair("arithmetic").dense
    with pytest.raises(ArtifactError, match="terminal_names"):
        DenseLexer.from_arrays(dense.dfa.arrays())


def test_names_disagreeing_with_the_stored_ones_are_an_artifact_error():
    dense = pair("arithmetic").dense
    with pytest.raises(ArtifactError, match="differ"):
        DenseLexer.from_arrays(dense.arrays(), terminal_names=list(reversed(dense.terminal_names)))


def test_wrong_number_of_names_is_an_artifact_error():
    arrays = pair("arithmetic").dense.arrays()
    arrays["terminal_names"] = encode_json_blob(["ONLY_ONE"])
    with pytest.raises(ArtifactError, match="terminal names"):
        DenseLexer.from_arrays(arrays)


def test_names_blob_that_is_not_a_list_of_strings_is_an_artifact_error():
    arrays = pair("arithmetic").dense.arrays()
    arrays["terminal_names"] = encode_json_blob({"a": 1})
    with pytest.raises(ArtifactError, match="list of names"):
        DenseLexer.from_arrays(arrays)
