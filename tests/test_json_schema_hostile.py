"""Hostile and malformed JSON Schemas end in a clear glrmask error naming the JSON pointer (issue 16),
never in a Python exception from deep inside the lowering."""
from __future__ import annotations

import json
import math

import pytest

from glrmask.errors import GlrmaskError, GrammarTooComplex, UnsupportedSchema
from glrmask.json_schema import lower_json_schema


def refused(schema, error=UnsupportedSchema, pointer=None, **kw):
    with pytest.raises(error) as e:
        lower_json_schema(schema, **kw)
    assert isinstance(e.value, GlrmaskError)
    if pointer is not None:
        assert pointer in str(e.value), str(e.value)
    return str(e.value)


@pytest.mark.parametrize("bound", [2 ** 40, 1e308])
def test_huge_max_length_is_a_budget_error_not_overflow(bound):
    refused({"type": "string", "maxLength": bound}, GrammarTooComplex, "#/maxLength")


def test_infinite_maximum_is_refused():
    refused({"maximum": math.inf}, pointer="#/maximum")


def test_nan_minimum_is_refused():
    refused({"minimum": math.nan}, pointer="#/minimum")


def test_null_enum_beside_const_is_refused():
    refused({"const": 1, "enum": None}, pointer="#/enum")


def test_properties_given_as_a_list_is_refused():
    refused({"items": {"additionalProperties": {}, "oneOf": [{"properties": [{}]}]}},
            pointer="#/items/oneOf/0/properties")


def test_non_integer_min_items_under_all_of_is_refused():
    msg = refused({"allOf": [{"minItems": []}], "minItems": {}})
    assert "#/minItems" in msg and "#/allOf/0/minItems" in msg


def test_malformed_applicators_are_refused_even_when_lenient():
    msg = refused({"anyOf": 0, "oneOf": {}}, lenient=True)
    assert "#/anyOf" in msg and "#/oneOf" in msg


@pytest.mark.parametrize("value", [2.5, "10", -1, True])
def test_max_length_must_be_a_non_negative_integer(value):
    refused({"type": "string", "maxLength": value}, pointer="#/maxLength")


def test_integral_float_counts_are_accepted():
    text, _ = lower_json_schema({"type": "string", "maxLength": 3.0})
    assert "start" in text


def test_deeply_nested_schema_text_is_refused_not_recursion_error():
    deep = '{"items":' * 2000 + '{}' + '}' * 2000
    refused(deep)


def test_deeply_nested_schema_dict_is_a_budget_error():
    root: dict = {}
    cur = root
    for _ in range(2000):
        cur["items"] = {}
        cur = cur["items"]
    refused(root, GrammarTooComplex, "nested more than")


def test_huge_min_items_is_a_budget_error_before_the_prune():
    refused({"type": "array", "items": {"type": "integer"}, "minItems": 10000}, GrammarTooComplex, "#")


def test_long_but_legal_min_items_lowers():
    text, _ = lower_json_schema({"type": "array", "items": {"type": "integer"}, "minItems": 900})
    assert text.count("items") > 900


@pytest.mark.parametrize("schema", [
    {"type": 5}, {"required": "a"}, {"pattern": 3}, {"$ref": 1}, {"not": 1}, {"prefixItems": {}},
    {"dependentRequired": {"a": "b"}}, {"multipleOf": 0}, {"uniqueItems": "yes"}, {"properties": {"a": 1}},
])
def test_wrong_kinds_of_keyword_values_are_refused(schema):
    refused(schema, pointer="#/" + next(iter(schema)))


def test_schema_that_is_not_a_schema_is_refused():
    refused(json.dumps([1, 2]))


# ----------------------------------------------------------------------------- fuzz

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from glrmask.json_schema.lowering import STRUCTURAL  # noqa: E402

KEYWORDS = sorted(k for k in STRUCTURAL if not k.startswith("__")) + ["$defs", "$id", "$anchor", "definitions"]
junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 2 ** 40), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(alphabet="ab^$*#/{}\\p", max_size=5),
                 st.sampled_from(["#", "#/$defs/a", "#a", "string", "integer", "object", "array"]))
trees = st.recursive(
    junk,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(KEYWORDS + ["a", "b"]), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYWORDS), trees, max_size=5), st.booleans())
def test_random_keyword_trees_give_a_grammar_or_a_glrmask_error(schema, lenient):
    try:
        lower_json_schema(schema, lenient=lenient)
    except GlrmaskError:
        pass


def _string_mask(schema):
    import glrmask
    from conftest import tiny_vocab

    return glrmask.compile_json_schema(schema, tiny_vocab(['"', "a", "aaaa"]), mode="dynamic")


def _allowed(mask, state, piece: bytes) -> bool:
    ids = {mask.vocab.token_bytes(i): i for i in range(mask.vocab.size)}
    words = mask.get_mask(state)
    return bool((int(words[ids[piece] >> 5]) >> (ids[piece] & 31)) & 1)


def test_a_database_sized_max_length_gets_dynamic_masks():
    """``maxLength: 65535`` is a 2.7 M-instruction lexer program: it builds within the NFA limit,
    and masks and commits agree inside the string and at its end."""
    mask = _string_mask({"type": "string", "maxLength": 65535})
    state = mask.start()
    assert state.commit_bytes(b'"' + b"a" * 300)
    assert _allowed(mask, state, b"aaaa") and _allowed(mask, state, b'"')
    assert state.commit_bytes(b'"') and state.is_accepting()
    assert not _allowed(mask, state, b"a")


def test_a_max_length_bound_is_counted_exactly():
    """One character short of the bound, a four-character token no longer fits; at it, only the
    closing quote does (the same counted repeat as a database-sized bound, shorter)."""
    mask = _string_mask({"type": "string", "maxLength": 3000})
    state = mask.start()
    assert state.commit_bytes(b'"' + b"a" * 2999)
    assert _allowed(mask, state, b"a") and not _allowed(mask, state, b"aaaa")
    assert state.commit_bytes(b"a")
    assert not _allowed(mask, state, b"a") and _allowed(mask, state, b'"')
    assert state.commit_bytes(b'"') and state.is_accepting()


def test_several_database_sized_strings_end_at_the_nfa_limit_with_a_clear_error():
    schema = {"type": "object", "properties": {k: {"type": "string", "maxLength": 65535 - i}
                                                for i, k in enumerate("abc")}}
    with pytest.raises(GrammarTooComplex, match="max_nfa_nodes"):
        _string_mask(schema)
