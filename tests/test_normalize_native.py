"""The native normalizer (``glrmask_ext.normalize``, the default) returns exactly the grammar of the
Python reference (``normalize(..., native=False)``), or raises exactly its error.

"The same language" would not be enough: LR state numbers, lexer terminal order and artifacts all
follow the order of rules and the fresh symbols' names, so the two must agree rule for rule and name
for name. Random grammars make every step of the normal form happen by chance (ε-rules and long
nullable runs, unit cycles, direct, hidden and dense right recursion, unproductive and unreachable
symbols); names that are not ASCII, that start with a digit, or that look like fresh names check the
naming of fresh symbols. The JSONSchemaBench schemas and the shipped grammars are compared against
recorded digests in ``tests/test_front_end_equivalence.py``.
"""
from __future__ import annotations

import random
import re

import pytest

from _lr_support import bnf
from glrmask.budget import activate_budget
from glrmask.errors import GlrmaskError, GrammarError, GrammarTooComplex
from glrmask.grammar.ir import Grammar, Rule, TerminalDef
from glrmask.grammar.normalize import normalize

TERMS = ("A", "B", "C")
# a digit first, upper case, punctuation, non-ASCII (the Kelvin sign lower-cases to ASCII "k"),
# a name the normalizer's own fresh names would collide with
NONTERMS = ("s", "x", "Yy", "9z", "ab-c", "Ünï", "\u212aelvin", "s__span1", "t")


def _random_grammar(rng: random.Random, n_nonterms: int, max_len: int) -> Grammar:
    nts = NONTERMS[:n_nonterms]
    rules = []
    for lhs in nts:
        for _ in range(rng.randint(1, 4)):
            n = rng.randint(0, max_len)
            rules.append(Rule(lhs, tuple(rng.choice(TERMS + nts + nts) for _ in range(n))))
    rules.append(Rule("s", tuple(rng.choice(TERMS) for _ in range(rng.randint(1, 2)))))
    terminals = {t: TerminalDef(t, t.lower(), t.lower()) for t in TERMS}
    return Grammar(rules, terminals, "s")


def _outcome(g: Grammar, *, native: bool, **kw) -> tuple:
    try:
        out = normalize(g, native=native, **kw)
    except GlrmaskError as exc:
        return ("error", type(exc), str(exc))
    return ("grammar", out.rules, out.start, out.terminals, out.ignore, out.source_name, out.warnings)


def _assert_same(g: Grammar, **kw) -> tuple:
    ref = _outcome(g, native=False, **kw)
    assert _outcome(g, native=True, **kw) == ref
    return ref


@pytest.mark.parametrize("seed", range(150))
def test_random_grammars_normalize_to_the_reference_grammar(seed):
    rng = random.Random(seed)
    _assert_same(_random_grammar(rng, n_nonterms=rng.randint(2, len(NONTERMS)), max_len=rng.randint(2, 7)))


def test_the_random_grammars_make_every_kind_of_fresh_symbol():
    """Span trees, a fresh start, hubs' left-recursive symbols, right corners and their exits."""
    made = set()
    for seed in range(150):
        rng = random.Random(seed)
        g = normalize(_random_grammar(rng, n_nonterms=rng.randint(2, len(NONTERMS)), max_len=rng.randint(2, 7)))
        made.update(re.findall(r"__(span|start|rr|rc|exit)[0-9]", " ".join(r.lhs for r in g.rules)))
    assert made == {"span", "start", "rr", "rc", "exit"}


def test_long_nullable_runs_build_the_same_span_tree():
    g = bnf("s: x x y x z x y y x z A\nx: B |\ny: x x | C\nz: y |")
    ref = _assert_same(g)
    assert any("__span" in r.lhs for r in ref[1])


DENSE_RIGHT_RECURSION = """s: A t | B u | C v
t: A u | B v | s | C
u: B t | A s | v | A
v: C s | A t u | B"""


def test_a_dense_right_recursive_component_gets_the_same_right_corners():
    ref = _assert_same(bnf(DENSE_RIGHT_RECURSION))
    assert any("__rc" in r.lhs for r in ref[1])


def test_right_recursion_broken_by_hubs_is_the_same():
    ref = _assert_same(bnf("s: A s | B t | C\nt: B s | A t t | C"))
    assert any("__rr" in r.lhs for r in ref[1])


def test_unit_cycles_collapse_onto_the_same_representative():
    _assert_same(bnf("s: x | A\nx: y | B\ny: s | x | C"))


def test_a_language_with_the_empty_string_gets_the_same_fresh_start():
    ref = _assert_same(bnf("s: A s |"))
    assert ref[2] != "s"


def test_an_empty_language_is_the_same_grammar_error():
    ref = _assert_same(bnf("s: A s"))
    assert ref[1] is GrammarError


@pytest.mark.parametrize("seed", range(8))
def test_every_rule_budget_is_exceeded_at_the_same_step_and_count(seed):
    g = _random_grammar(random.Random(1000 + seed), n_nonterms=len(NONTERMS), max_len=7)
    full = _assert_same(g)
    if full[0] == "error":
        pytest.skip("this seed's language is empty")
    n = len(full[1])
    outcomes = [_assert_same(g, max_rules=m) for m in sorted({*range(1, 30, 3), n // 2, n, 4 * n})]
    assert any(r[0] == "error" and r[1] is GrammarTooComplex for r in outcomes)
    assert outcomes[-1][0] == "grammar"


def test_an_expired_deadline_stops_both_at_the_same_stage():
    g = bnf("s: x x x x A\nx: B |")
    with activate_budget({"max_seconds": 1e-9}):
        ref = _assert_same(g)
    assert ref[1] is GrammarTooComplex and "normalize (" in ref[2]


def test_rules_and_names_of_any_str_subclass_come_back_as_given():
    class Name(str):
        pass

    g = Grammar([Rule(Name("s"), (Name("A"), Name("s"))), Rule(Name("s"), (Name("B"),))],
                {"A": TerminalDef("A", "a", "a"), "B": TerminalDef("B", "b", "b")}, Name("s"))
    _assert_same(g)
