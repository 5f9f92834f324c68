"""The native lexer-state classes (glrmask_ext.state_classes) against the numpy descriptions in
glrmask.compiler.lexer_classes (``native=False``): over dense lexers of the shipped grammars and
of real JSON schemas, the same event keys, the same byte groups (same order) and the same
refinement levels (each state's smallest class member, level by level, and where they stop)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import glrmask
from glrmask.compiler.lexer_classes import BoundedClasses, byte_groups, event_keys
from glrmask.lexer.dense import DenseLexer

from _maskbench import MASKBENCH, first_schemas
from conftest import byte_vocab

_OVER_BUDGET = {"Snowplow[0]", "WashingtonPost[0]"}
"""Schemas whose lexer exceeds the default limits (a `maxLength: 65535` string; 76k explored
states): no dense lexer to compare on. Any other schema over budget fails the test."""

GRAMMARS = sorted((Path(__file__).resolve().parents[1] / "grammars").glob("*.lark"))


def _dfas():
    for path in GRAMMARS:
        yield pytest.param(lambda p=path: glrmask.compile(str(p), byte_vocab(), mode="static").lexer.dfa, id=path.stem)
    if MASKBENCH.is_dir():
        for name, schema in first_schemas(1):
            if name in _OVER_BUDGET:
                continue
            def make(s=schema):
                lexer = glrmask.compile_json_schema(s, byte_vocab(), mode="dynamic").lexer
                return DenseLexer.from_lexer(lexer).dfa
            yield pytest.param(make, id=name)


@pytest.fixture(params=list(_dfas()))
def dfa(request):
    return request.param()


def test_event_keys_are_the_descriptions(dfa):
    assert np.array_equal(event_keys(dfa), event_keys(dfa, native=False))


def test_byte_groups_are_the_descriptions(dfa):
    ev = event_keys(dfa, native=False)
    assert byte_groups(dfa, ev) == byte_groups(dfa, ev, native=False)


@pytest.mark.parametrize("max_h", [1, 128])
def test_refinement_levels_are_the_descriptions(dfa, max_h):
    native, python = BoundedClasses(dfa, max_h), BoundedClasses(dfa, max_h, native=False)
    assert native.stable_from == python.stable_from
    assert all(native.level(h) == python.level(h) for h in range(max_h + 2))
