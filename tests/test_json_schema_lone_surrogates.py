"""Strings holding a lone surrogate in a schema (``"\\ud800"`` unpaired): glrmask's strings are
sequences of Unicode characters — a ``\\uD8xx`` escape must pair with a ``\\uDCxx`` — so no JSON
text it accepts decodes to such a string. An ``enum`` or ``const`` value, or a property name, with
a lone surrogate therefore denotes nothing: it must never let the rest of the string through as
if the surrogate were absent (``"a\\ud800"`` accepting ``"a"``)."""
from __future__ import annotations

import json

import pytest

import glrmask


@pytest.fixture(scope="module")
def vocab() -> glrmask.Vocab:
    return glrmask.Vocab.default()


def _accepts(mask, vocab, doc: str) -> bool:
    state = mask.start()
    return all(state.commit(t) for t in vocab.encode(doc)) and state.is_accepting()


def test_an_enum_value_with_a_lone_surrogate_is_never_produced(vocab):
    mask = glrmask.compile_json_schema({"enum": ["a\ud800", "b"]}, vocab, mode="dynamic")
    assert not _accepts(mask, vocab, '"a"')
    assert _accepts(mask, vocab, '"b"')


def test_a_const_with_a_lone_surrogate_accepts_no_document(vocab):
    mask = glrmask.compile_json_schema({"const": "a\ud800"}, vocab, mode="dynamic")
    assert not any(_accepts(mask, vocab, d) for d in ('"a"', '"a\\ud800"', '""'))


def test_a_property_named_with_a_lone_surrogate_cannot_be_written(vocab):
    schema = {"type": "object", "properties": {"k\udc00": {"type": "integer"}, "x": {}},
              "additionalProperties": False}
    mask = glrmask.compile_json_schema(schema, vocab, mode="dynamic")
    assert not _accepts(mask, vocab, json.dumps({"k": 1}))
    assert _accepts(mask, vocab, json.dumps({"x": 1}))
