"""The 2020-12 keywords built from complements and counters: not, if/then/else, the dependency
keywords, propertyNames, contains, oneOf, uniqueItems, unevaluated*, and format_mode. Valid/invalid
pairs are checked against `jsonschema`, then against the grammar (lark as the judge)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_helpers import accepts, dumps, parser_for, valid  # noqa: E402

from glrmask.errors import UnsupportedSchema  # noqa: E402
from glrmask.json_schema import json_schema_to_grammar, lower_json_schema  # noqa: E402
from glrmask.json_schema.reorder import reorder_to_schema  # noqa: E402


def check(schema, good, bad=(), **kw):
    p = parser_for(schema, **kw)
    for x in good:
        assert valid(schema, x), x
        assert accepts(p, dumps(reorder_to_schema(x, schema))), x
    for x in bad:
        assert not valid(schema, x), x
        assert not accepts(p, dumps(reorder_to_schema(x, schema))), x


# ----------------------------------------------------------------------------- not

def test_not_type():
    check({"not": {"type": "integer"}}, ["a", 1.5, None, [], {}], [1, 0])


def test_not_pattern_is_complemented_within_strings_only():
    check({"not": {"type": "string", "pattern": "^a"}}, ["b", 1, ""], ["a", "abc"])


def test_not_enum_of_strings():
    check({"type": "string", "not": {"enum": ["x", "y"]}}, ["z", "xx"], ["x", "y"])


def test_not_enum_of_scalars_compares_numbers_by_value():
    check({"not": {"enum": [1, "a", None, True]}}, [2, "b", False, 1.5], [1, "a", None, True, 1.0])


def test_not_numeric_bound_keeps_other_types_out():
    # {"minimum": 3} accepts every string, so its complement accepts none
    check({"not": {"minimum": 3}}, [2, 1.5, -7], [3, 3.5, 3.0, "a"])


def test_not_integer_with_bounds_accepts_fractions_and_integers_outside():
    check({"not": {"type": "integer", "minimum": 3}}, [2, 3.5, "a"], [3, 4, 3.0])


def test_not_required_and_property_counts():
    check({"type": "object", "not": {"required": ["a"]}}, [{}, {"b": 1}], [{"a": 1}])
    check({"type": "object", "not": {"maxProperties": 1}}, [{"a": 1, "b": 2}], [{}, {"a": 1}])


def test_not_length_bounds():
    check({"type": "string", "not": {"minLength": 2}}, ["a", ""], ["ab"])
    check({"type": "array", "not": {"maxItems": 1}}, [[1, 2]], [[], [1]])


def test_not_any_of_is_the_conjunction_of_complements():
    check({"not": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, [1, []], ["a", None])


def test_not_not_is_the_schema_itself():
    check({"not": {"not": {"type": "string", "maxLength": 2}}}, ["ab"], ["abc", 1])


def test_not_of_properties_means_some_declared_value_fails():
    check({"type": "object", "not": {"properties": {"a": {"type": "string"}}}},
          [{"a": 1}], [{}, {"a": "x"}, {"b": 1}])


def test_not_of_items_means_some_item_fails():
    check({"type": "array", "not": {"items": {"type": "integer"}}}, [["a"], [1, "b"]], [[], [1, 2]])


def test_not_of_a_non_regular_keyword_is_refused_with_its_pointer():
    with pytest.raises(UnsupportedSchema, match="#/properties/x/not"):
        json_schema_to_grammar({"properties": {"x": {"not": {"additionalProperties": False}}}})


# ----------------------------------------------------------------------------- if / then / else

def test_if_then_else():
    check({"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "integer"}},
          ["ab", 1], ["abc", 1.5])


def test_if_with_a_discriminator_property():
    s = {"type": "object", "properties": {"kind": {}, "n": {}},
         "if": {"properties": {"kind": {"const": "num"}}, "required": ["kind"]},
         "then": {"properties": {"n": {"type": "integer"}}, "required": ["n"]},
         "else": {"properties": {"n": {"type": "string"}}}}
    check(s, [{"kind": "num", "n": 1}, {"kind": "str", "n": "x"}, {}],
          [{"kind": "num"}, {"kind": "num", "n": "x"}, {"kind": "str", "n": 1}])


def test_if_without_then_or_else_constrains_nothing():
    check({"if": {"type": "string"}}, ["a", 1])


# ----------------------------------------------------------------------------- dependencies

def test_dependent_required():
    check({"dependentRequired": {"a": ["b"]}}, [{}, {"b": 1}, {"a": 1, "b": 2}], [{"a": 1}])


def test_dependent_schemas():
    s = {"properties": {"a": {}, "b": {}}, "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}}
    check(s, [{"a": 1, "b": 2}, {"b": "x"}], [{"a": 1, "b": "x"}])


def test_draft7_dependencies_both_forms():
    p = parser_for({"dependencies": {"a": ["b"], "c": {"required": ["d"]}}})
    assert accepts(p, dumps({"a": 1, "b": 1})) and accepts(p, dumps({"c": 1, "d": 1}))
    assert not accepts(p, dumps({"a": 1})) and not accepts(p, dumps({"c": 1}))


# ----------------------------------------------------------------------------- propertyNames

def test_property_names_filters_declared_keys_and_restricts_others():
    check({"propertyNames": {"maxLength": 3}, "properties": {"abcd": {}, "ab": {}}},
          [{"ab": 1}, {"xyz": 2}], [{"abcd": 1}, {"wxyz": 1}])


def test_property_names_pattern_and_false():
    check({"propertyNames": {"pattern": "^[a-f]+$"}}, [{"abc": 1}], [{"xyz": 1}])
    check({"propertyNames": False}, [{}], [{"a": 1}])


# ----------------------------------------------------------------------------- contains

def test_contains():
    check({"contains": {"type": "integer"}}, [[1], ["a", 1]], [[], ["a"]])


def test_min_and_max_contains():
    check({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
          [[1, 2], ["a", 1, 2, 3]], [[1], [1, 2, 3, 4]])
    check({"contains": {"const": 1}, "minContains": 0, "maxContains": 1}, [[], [2], [1, 2]], [[1, 1]])


# ----------------------------------------------------------------------------- oneOf

def test_one_of_with_distinct_types_is_exact_and_silent():
    _, warnings = lower_json_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    assert not any("oneOf" in w for w in warnings)
    check({"oneOf": [{"type": "string"}, {"type": "integer"}]}, ["a", 1], [None])


def test_one_of_with_a_const_discriminator_is_exact():
    s = {"type": "object", "oneOf": [
        {"properties": {"k": {"const": "a"}, "x": {"type": "integer"}}, "required": ["k"]},
        {"properties": {"k": {"const": "b"}}, "required": ["k"]}]}
    _, warnings = lower_json_schema(s)
    assert not any("oneOf" in w for w in warnings)
    check(s, [{"k": "a", "x": 1}, {"k": "b", "x": "s"}], [{"k": "a", "x": "s"}])


def test_one_of_with_overlapping_complementable_branches_is_exact():
    s = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}
    _, warnings = lower_json_schema(s)
    assert not any("oneOf" in w for w in warnings)
    check(s, [1, 2.5, "a", None], [2, 3])
    check({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"b": 1}],
          [{"a": 1, "b": 1}, {}], property_order="any")


def test_one_of_that_may_overlap_and_cannot_be_complemented_is_any_of_with_a_warning():
    _, warnings = lower_json_schema({"oneOf": [{"additionalProperties": False}, {"required": ["a"]}]})
    assert any("#/oneOf" in w and "not provably disjoint" in w for w in warnings)


# ----------------------------------------------------------------------------- uniqueItems

def test_unique_items_over_an_enum():
    check({"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": True},
          [[], ["a", "b", 1]], [["a", "a"], [1, 1]])


def test_unique_items_over_booleans_with_length_bounds():
    check({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
          [[True, False], [False]], [[True, True], []])


def test_unique_items_over_open_items_is_refused():
    with pytest.raises(UnsupportedSchema, match="#/uniqueItems"):
        json_schema_to_grammar({"type": "array", "items": {"type": "string"}, "uniqueItems": True})


# ----------------------------------------------------------------------------- unevaluated*

def test_unevaluated_properties_false():
    check({"properties": {"a": {}}, "unevaluatedProperties": False}, [{"a": 1}], [{"b": 1}])


def test_unevaluated_properties_sees_all_of_branches():
    check({"allOf": [{"properties": {"a": {}}}], "properties": {"b": {}}, "unevaluatedProperties": False},
          [{"a": 1, "b": 1}], [{"c": 1}])


def test_unevaluated_properties_inside_a_branch_rejects_the_parents_keys():
    check({"allOf": [{"properties": {"a": {}}, "unevaluatedProperties": False}], "properties": {"b": {}}},
          [{"a": 1}], [{"b": 1}])


def test_unevaluated_items_false():
    check({"prefixItems": [{"type": "integer"}], "unevaluatedItems": False}, [[1]], [[1, 2]])


def test_unevaluated_properties_over_any_of_is_refused():
    with pytest.raises(UnsupportedSchema, match="#/unevaluatedProperties"):
        json_schema_to_grammar({"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}],
                                "unevaluatedProperties": False})


# ----------------------------------------------------------------------------- format_mode

def test_format_annotation_mode_enforces_nothing():
    p = parser_for({"type": "string", "format": "date"}, format_mode="annotation")
    assert accepts(p, dumps("not a date"))
    p = parser_for({"type": "string", "format": "date"})
    assert not accepts(p, dumps("not a date"))


def test_unknown_format_mode_is_a_value_error():
    with pytest.raises(ValueError, match="format_mode"):
        json_schema_to_grammar({"format": "date"}, format_mode="strict")


def test_unevaluated_properties_over_branches_that_declare_nothing():
    s = {"properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
         "unevaluatedProperties": False}
    check(s, [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}], [{"a": 1, "c": 1}, {}])


def test_not_of_prefix_items_means_some_prefix_item_fails():
    check({"type": "array", "not": {"prefixItems": [{"type": "integer"}, {"type": "string"}]}},
          [["a"], [1, 2]], [[], [1], [1, "a"], [1, "a", 3]])


def test_not_of_contains_counts_outside_the_range():
    check({"type": "array", "not": {"contains": {"type": "integer"}}}, [[], ["a"]], [[1], ["a", 2]])
    check({"type": "array", "not": {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}},
          [[], [1], [1, 2, 3, 4]], [[1, 2], [1, 2, 3]])


def test_not_of_dependent_required():
    check({"type": "object", "not": {"dependentRequired": {"a": ["b"]}}}, [{"a": 1}], [{}, {"a": 1, "b": 2}, {"b": 1}],
          property_order="any")


def test_one_of_closed_objects_with_a_required_key_the_other_forbids_are_disjoint():
    s = {"type": "object", "oneOf": [
        {"properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False},
        {"properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": False}]}
    _, warnings = lower_json_schema(s)
    assert not any("oneOf" in w for w in warnings)
    check(s, [{"a": 1}, {"b": "x"}], [{}, {"a": 1, "b": "x"}, {"a": "x"}])


def test_two_contains_under_all_of_are_counted_together():
    s = {"type": "array", "allOf": [{"contains": {"type": "integer"}},
                                    {"contains": {"type": "string"}, "maxContains": 1}]}
    check(s, [[1, "a"], ["a", 1, 2]], [[1], ["a"], [1, "a", "b"], []])
