"""The front end (JSON Schema lowering, normalization) leaves no reference cycles behind.

Why it matters: both stages run with the cyclic garbage collector paused
(:mod:`glrmask.grammar.gc_pause`), so anything they leave in a cycle is found by the first
collection after the pause, inside the time to the first mask: on a large schema the lowering's
recursive closures kept its whole working state (~34,000 objects) alive until then, a 10 ms
collection. Without cycles, reference counting frees it all as each stage returns.
"""
from __future__ import annotations

import gc

import pytest

from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
        "counts": {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3},
                   "maxContains": 2, "minItems": 1, "maxItems": 4},
        "kind": {"oneOf": [{"const": "x"}, {"const": "y"}]},
    },
    "patternProperties": {"^x-": {"type": "string"}, "^y-": {"type": "number"}},
    "additionalProperties": False,
    "required": ["name"],
    "maxProperties": 6,
}


@pytest.fixture
def collector_off():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def test_lowering_a_schema_leaves_no_cyclic_garbage(collector_off):
    lower_json_schema_ir(SCHEMA)
    assert gc.collect() == 0


def test_lowering_with_properties_in_any_order_leaves_no_cyclic_garbage(collector_off):
    lower_json_schema_ir({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}}, property_order="any")
    assert gc.collect() == 0


def test_normalizing_leaves_no_cyclic_garbage(collector_off):
    grammar, _ = lower_json_schema_ir(SCHEMA)
    gc.collect()
    normalize(grammar)
    normalize(grammar, native=False)
    assert gc.collect() == 0


def test_rules_the_normalizer_makes_are_left_out_of_the_cyclic_collector():
    """They hold strings only, so they can be on no cycle; a large grammar keeps tens of thousands
    alive, which every full collection would otherwise scan."""
    grammar, _ = lower_json_schema_ir(SCHEMA)
    made = [r for r in normalize(grammar).rules if r not in set(grammar.rules)]
    assert made and not any(gc.is_tracked(r) or gc.is_tracked(r.rhs) for r in made)


def test_rules_the_lowering_makes_are_left_out_of_the_cyclic_collector():
    grammar, _ = lower_json_schema_ir(SCHEMA)
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.rhs) for r in grammar.rules)
