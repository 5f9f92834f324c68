"""The lowering's rule builder prunes natively exactly as its Python reference does: the same
rules (unproductive alternatives dropped, then what the start cannot reach), in the same order,
the same terminals, the same refusal when the start derives nothing."""
from __future__ import annotations

import copy
import random

import pytest

from glrmask.errors import UnsupportedSchema
from glrmask.json_schema.builder import GrammarBuilder

NAMES = ["start", "a", "b", "c", "d", "e", "f"]
TERMS = ["T", "U"]


def _random_builder(rng: random.Random) -> GrammarBuilder:
    g = GrammarBuilder(max_rules=10_000, max_chars=10**9)
    for t in TERMS:
        g.terminals[t] = t.lower()
    for name in NAMES:
        if rng.random() < 0.9:
            g.rules[name] = [[rng.choice(NAMES + TERMS + TERMS + ["undefined"]) for _ in range(rng.randint(0, 3))]
                             for _ in range(rng.randint(0, 3))]
    return g


def _pruned(g: GrammarBuilder, native: bool):
    g = copy.deepcopy(g)
    try:
        g.prune("start", native=native)
    except UnsupportedSchema as exc:
        return str(exc)
    return list(g.rules.items()), list(g.terminals.items())


@pytest.mark.parametrize("seed", range(300))
def test_native_prune_is_the_reference_prune(seed):
    g = _random_builder(random.Random(seed))
    assert _pruned(g, native=True) == _pruned(g, native=False)


def test_random_builders_cover_refusals_and_partial_prunes():
    outcomes = [_pruned(_random_builder(random.Random(seed)), native=True) for seed in range(300)]
    assert any(isinstance(o, str) for o in outcomes)
    assert any(not isinstance(o, str) and o[0] and len(o[0]) < len(NAMES) for o in outcomes)


def test_a_rule_keeping_all_its_alternatives_keeps_its_list():
    g = GrammarBuilder(max_rules=100, max_chars=10**6)
    g.terminals["T"] = "t"
    alts = [["T"], ["T", "T"]]
    g.rules = {"start": alts, "dead": [["nowhere"]]}
    g.prune("start")
    assert g.rules == {"start": alts} and g.rules["start"] is alts
