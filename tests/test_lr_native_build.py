"""The native LR table builder (:mod:`glrmask_ext.lr_build`) builds exactly the table of the Python
reference builder (``LRTable.build(..., native=False)``): the same method, notes, start and final
states, state numbering, sparse action and goto rows, reduce lists and names — on the shipped
grammars, the test corpora, random grammars, the LALR(1) fallback and JSONSchemaBench schemas —
and fails the same way on the same bad input and budgets. The dense views derived from the sparse
rows agree with them cell by cell."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import glrmask.lr.table as lr_table
from _grammars import CASES
from _lr_support import (CORPUS, SPARSE, bnf, bnf_file, corpus_grammar, maskbench_sample, needs_maskbench,
                         schema_grammar)
from glrmask.budget import CompileBudget, activate_budget
from glrmask.errors import GlrmaskError, GrammarError, GrammarTooComplex
from glrmask.grammar.ir import Grammar, Rule, TerminalDef
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.lr import LRTable

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_CORPUS = Path(__file__).resolve().parent / "data" / "grammars"

SOURCES = (
    {p.stem: str(p) for p in sorted((ROOT / "grammars").glob("*.lark"))}
    | {f"corpus_{p.parent.name}": str(p) for p in sorted(GRAMMAR_CORPUS.glob("*/grammar.lark"))}
    | {f"case_{c.name}": c.grammar for c in CASES}
)

#: build options: the default, the exploration's own numbering, and the LALR(1) fallback
OPTIONS = {
    "default": {},
    "unmerged": {"merge": False},
    "lalr": {"max_states": 8},
    "lalr_unmerged": {"max_states": 8, "merge": False},
}


def assert_dense_views_agree(t: LRTable) -> None:
    """``shift_table``, ``goto_table`` and ``reduce_offsets`` hold exactly the sparse rows: every
    entry's cell has its target and reduce range, every other cell is -1 / empty."""
    n, T, n_nt = t.n_states, t.n_terminals, len(t.nonterminals)
    shift, goto, off = t.shift_table, t.goto_table, t.reduce_offsets
    assert shift.dtype == goto.dtype == off.dtype == np.int32
    assert shift.shape == (n, T) and goto.shape == (n, n_nt) and off.shape == (n * T + 1,)
    cells = np.repeat(np.arange(n) * T, np.diff(t.act_ptr)) + t.act_term
    assert np.array_equal(shift.ravel()[cells], t.act_shift)
    assert np.array_equal(off[cells], t.act_roff[:-1]) and np.array_equal(off[cells + 1], t.act_roff[1:])
    other = np.ones(n * T, dtype=bool)
    other[cells] = False
    assert (shift.ravel()[other] == -1).all() and (np.diff(off)[other] == 0).all()
    assert off[0] == 0 and off[-1] == len(t.reduce_rules)
    gcells = np.repeat(np.arange(n) * n_nt, np.diff(t.goto_ptr)) + t.goto_nt
    assert np.array_equal(goto.ravel()[gcells], t.goto_tgt)
    gother = np.ones(n * n_nt, dtype=bool)
    gother[gcells] = False
    assert (goto.ravel()[gother] == -1).all()


def assert_same_build(grammar: Grammar, **kw) -> LRTable:
    """Both builders give equal tables, or both raise the same glrmask error."""
    try:
        ref = LRTable.build(grammar, native=False, **kw)
    except GlrmaskError as e:
        with pytest.raises(type(e)) as got:
            LRTable.build(grammar, native=True, **kw)
        assert str(got.value) == str(e)
        return None
    new = LRTable.build(grammar, native=True, **kw)
    for name in SPARSE:
        x, y = getattr(ref, name), getattr(new, name)
        assert x.dtype == y.dtype == np.int32 and np.array_equal(x, y), name
    a, b = ref.to_arrays(), new.to_arrays()
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name
    assert (ref.method, ref.notes, ref.start_state, ref.final_state) == (
        new.method, new.notes, new.start_state, new.final_state)
    assert ref.rules == new.rules and ref.rule_lhs == new.rule_lhs and ref.rule_len == new.rule_len
    assert ref.ignored_terminals == new.ignored_terminals
    return new


# ---------------------------------------------------------------- identical tables
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_grammars_and_hard_cases_build_identically(name, option):
    assert_same_build(normalize(load_grammar(SOURCES[name])), **OPTIONS[option])


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_lr_corpus_builds_identically(name, option):
    assert_same_build(normalize(corpus_grammar(name)), **OPTIONS[option])


def test_the_lalr_fallback_is_taken_and_identical():
    t = assert_same_build(normalize(bnf_file("c_subset.bnf")), max_states=100)
    assert t.method == "lalr1" and any("LALR" in n for n in t.notes)


def test_kept_conflicts_are_identical():
    t = assert_same_build(normalize(bnf_file("c_subset.bnf")))
    assert t.conflicts() == LRTable.build(normalize(bnf_file("c_subset.bnf")), native=False).conflicts()
    assert t.conflicts()


def _random_grammar(rng: random.Random) -> Grammar:
    terms, nonterms = ("A", "B", "C"), ("s", "x", "y", "z")
    rules = [Rule(lhs, tuple(rng.choice(terms + nonterms) for _ in range(rng.choice((0, 1, 2, 2, 3)))))
             for lhs in nonterms for _ in range(rng.randint(1, 3))]
    return Grammar(rules, {t: TerminalDef(t, t.lower(), t.lower()) for t in terms}, "s")


@pytest.mark.parametrize("seed", range(40))
def test_random_grammars_build_identically_normalized_or_raw(seed):
    # raw (check=False): unit cycles, ε-rules, unproductive symbols and empty languages as they come
    g = _random_grammar(random.Random(seed))
    assert_same_build(g, check=False)
    assert_same_build(g, check=False, max_states=4)
    try:
        ng = normalize(g)
    except GrammarError:
        return
    assert_same_build(ng)
    assert_same_build(ng, max_states=4, merge=False)


# ---------------------------------------------------------------- JSONSchemaBench
FAST_SCHEMAS = ("Github_easy[0]", "Glaiveai2K[1]", "Kubernetes[1]", "WashingtonPost[1]")


@needs_maskbench
@pytest.mark.parametrize("name", FAST_SCHEMAS)
def test_jsonschemabench_schemas_build_identically_past_max_states(name):
    t = assert_same_build(schema_grammar(dict(maskbench_sample(2))[name]), max_states=100)
    assert t.method == "lalr1"


@needs_maskbench
@pytest.mark.parametrize("index", range(50))
def test_jsonschemabench_sample_builds_identically(index):
    # the first five schemas of each split: ~10 s, most of it the Python builder on the largest
    sample = maskbench_sample(5)
    assert len(sample) == 50  # five of each of the ten splits
    assert_same_build(schema_grammar(sample[index][1]))


# ---------------------------------------------------------------- errors and budgets
def test_reserved_terminal_names_are_a_grammar_error():
    g = normalize(bnf("s: A"))
    g.terminals["$END"] = TerminalDef("$END", "x")
    with pytest.raises(GrammarError, match="reserved"):
        LRTable.build(g, native=True)


def test_a_start_symbol_without_rules_is_a_grammar_error():
    g = Grammar([Rule("s", ("A",))], {"A": TerminalDef("A", "a")}, "t")
    with pytest.raises(GrammarError, match="has no rules"):
        LRTable.build(g, check=False, native=True)


def test_an_unknown_symbol_is_a_grammar_error():
    g = Grammar([Rule("s", ("A", "nowhere"))], {"A": TerminalDef("A", "a")}, "s")
    with pytest.raises(GrammarError, match="'nowhere'"):
        LRTable.build(g, check=False, native=True)


def test_too_many_lalr_states_is_too_complex():
    with pytest.raises(GrammarTooComplex, match="max_lalr_states=50"):
        LRTable.build(normalize(bnf_file("c_subset.bnf")), max_states=10, max_lalr_states=50, native=True)


def _nested_chain(n: int) -> Grammar:
    """``r_i: r_{i+1} | X r_{i+1}``: the closure items grow as ``n²/2``."""
    return normalize(bnf("s: r0\n" + "".join(f"r{i}: r{i + 1} | X r{i + 1}\n" for i in range(n)) + f"r{n}: X"))


def test_the_closure_item_limit_is_too_complex_with_the_same_message():
    g = _nested_chain(200)
    with activate_budget({"lr": {"max_closure_items": 2_000}}):
        with pytest.raises(GrammarTooComplex, match=r"LR table \(closures\).*lr\.max_closure_items") as ref:
            LRTable.build(g, native=False)
    with activate_budget({"lr": {"max_closure_items": 2_000}}):
        with pytest.raises(GrammarTooComplex) as new:
            LRTable.build(g, native=True)
    assert str(new.value) == str(ref.value)


def test_a_passed_deadline_stops_the_build():
    g = normalize(bnf_file("c_subset.bnf"))
    with activate_budget({"max_seconds": 1e-9}):
        with pytest.raises(GrammarTooComplex, match=r"LR table.*max_seconds"):
            LRTable.build(g, native=True)


class _CountingBudget(CompileBudget):
    def __init__(self) -> None:
        super().__init__({"max_seconds": None})
        self.stages: list[str] = []

    def check(self, stage: str) -> None:
        self.stages.append(stage)
        super().check(stage)


def test_the_deadline_is_consulted_throughout_a_large_build(monkeypatch):
    budget = _CountingBudget()
    monkeypatch.setattr(lr_table, "current_budget", lambda: budget)
    LRTable.build(normalize(bnf_file("c_subset.bnf")), max_states=1_000, native=True)
    exploring = ("LR table (item sets)", "LR table (closures)", "LR table (lookaheads)")
    explored = [s for s in budget.stages if s in exploring]
    assert len(explored) > 10  # every few thousand item operations, not once per stage


# ---------------------------------------------------------------- sparse rows and dense views
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_dense_views_agree_with_the_sparse_rows_on_the_grammars(name):
    t = LRTable.build(normalize(load_grammar(SOURCES[name])))
    assert_dense_views_agree(t)
    for s in range(t.n_states):  # the action rows and goto() read the sparse rows, not the views
        for term in range(t.n_terminals):
            a = t.action(s, term)
            k = s * t.n_terminals + term
            assert (a.shift if a.shift is not None else -1) == t.shift_table[s, term]
            assert a.reduces == tuple(t.reduce_rules[t.reduce_offsets[k]:t.reduce_offsets[k + 1]].tolist())
        for nt in range(len(t.nonterminals)):
            g = t.goto(s, nt)
            assert (g if g is not None else -1) == t.goto_table[s, nt]


@needs_maskbench
@pytest.mark.parametrize("name", FAST_SCHEMAS)
def test_dense_views_agree_with_the_sparse_rows_on_schemas(name):
    assert_dense_views_agree(LRTable.build(schema_grammar(dict(maskbench_sample(2))[name])))


def test_building_a_table_materializes_no_dense_view():
    t = LRTable.build(normalize(load_grammar(SOURCES["json"])))
    held = [v for v in vars(t).values() if isinstance(v, np.ndarray)]
    assert sorted(map(id, held)) == sorted(id(getattr(t, name)) for name in SPARSE)
    assert t.dense_views_nbytes == 0


def test_a_dense_view_is_computed_once_on_first_access_and_read_only():
    t = LRTable.build(normalize(load_grammar(SOURCES["json"])))
    assert t.shift_table is t.shift_table
    assert t.dense_views_nbytes == t.shift_table.nbytes
    with pytest.raises(ValueError):
        t.shift_table[0, 0] = 0


def test_a_dynamic_mask_materializes_no_dense_view(gpt2):
    import glrmask

    mask = glrmask.compile(ROOT / "grammars" / "json.lark", gpt2, mode="dynamic")
    state = mask.start()
    for piece in (b'{"a": [1, ', b'"x", {"b": null}]', b"}"):
        mask.get_mask(state)
        assert state.commit_bytes(piece)
    mask.get_mask(state)
    assert state.is_accepting()
    assert mask.table.dense_views_nbytes == 0
