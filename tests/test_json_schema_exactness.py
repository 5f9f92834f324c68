"""Regressions for the cases where the lowering accepted invalid instances it claimed to handle
(issue 13, "Wrong today"). Each instance is checked against `jsonschema` first, then against the
grammar (lark as the judge)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_helpers import accepts, dumps, parser_for, valid  # noqa: E402

from glrmask.errors import GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.json_schema import ecma_regex, json_schema_to_grammar  # noqa: E402
from glrmask.json_schema.refs import SchemaRefs  # noqa: E402
from glrmask.json_schema.reorder import reorder_to_schema  # noqa: E402


def check(schema, good, bad=(), **kw):
    """Every `good` instance is jsonschema-valid and accepted; every `bad` one invalid and rejected."""
    p = parser_for(schema, **kw)
    for x in good:
        assert valid(schema, x), x
        assert accepts(p, dumps(reorder_to_schema(x, schema))), x
    for x in bad:
        assert not valid(schema, x), x
        assert not accepts(p, dumps(reorder_to_schema(x, schema))), x


# ----------------------------------------------------------------------------- 1. patternProperties

def test_pattern_properties_a_key_matching_several_patterns_meets_all_of_them():
    s = {"patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}}
    check(s, [{"a": 31}, {"aaaa": 18}, {"b": 5}], [{"aaaa": 31}, {"aa": "x"}, {"b": "x"}])


def test_pattern_properties_a_declared_property_also_meets_matching_patterns():
    s = {"properties": {"foo": {"type": "array", "maxItems": 3}},
         "patternProperties": {"f.o": {"minItems": 2}}, "additionalProperties": {"type": "integer"}}
    check(s, [{"foo": [1, 2]}, {"fxo": [1, 2, 3, 4]}, {"x": 1}],
          [{"foo": [1]}, {"foo": [1, 2, 3, 4]}, {"fxo": [1]}, {"x": "s"}])


def test_pattern_properties_with_additional_properties_false_across_all_of():
    s = {"allOf": [{"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False},
                   {"patternProperties": {"y$": {"minimum": 5}}}]}
    check(s, [{"x": 1}, {"xy": 7}], [{"xy": 3}, {"y": 9}, {"x": "a"}])


def test_pattern_properties_over_budget_names_the_pointer():
    s = {"patternProperties": {c: {"maxLength": i} for i, c in enumerate("abcdefgh")}}
    with pytest.raises(GrammarTooComplex, match="#/patternProperties"):
        json_schema_to_grammar(s)


def test_pattern_properties_with_disjoint_anchored_patterns_stay_within_budget():
    s = {"patternProperties": {f"^{c}:": {"maxLength": i, "title": c} for i, c in enumerate("abcdefghij")},
         "additionalProperties": False}
    check(s, [{"a:": "", "j:x": "123456789"}], [{"b:": "ab"}, {"k": ""}])


# ----------------------------------------------------------------------------- 2. \p{...} escapes

def test_unicode_property_escapes_are_general_categories_not_literal_text():
    s = {"type": "string", "pattern": "^\\p{Lu}\\p{Letter}*$"}
    p = parser_for(s)
    for x, ok in (("Ab", True), ("Éé", True), ("ΣΩ", True), ("ab", False), ("A1", False), ("p{Lu}", False)):
        assert accepts(p, dumps(x)) == ok, x


def test_unicode_property_escapes_negated_and_in_classes():
    p = parser_for({"type": "string", "pattern": "^[\\p{Nd}\\P{L}]+$"})
    assert accepts(p, dumps("12")) and accepts(p, dumps("١٢")) and accepts(p, dumps("-!"))
    assert not accepts(p, dumps("a"))
    p = parser_for({"type": "string", "pattern": "^\\p{gc=Ll}\\p{General_Category=Nd}$"})
    assert accepts(p, dumps("a1")) and not accepts(p, dumps("A1"))


@pytest.mark.parametrize("pattern", ["\\p{Script=Greek}", "\\pL", "\\a", "\\e", "\\z", "\\x4", "\\u12", "\\c",
                                     "\\p{Alphabetic}"])
def test_unsupported_escapes_are_refused_not_reinterpreted(pattern):
    with pytest.raises(ecma_regex.PatternUnsupported):
        ecma_regex.content_regex(pattern)
    with pytest.raises(UnsupportedSchema, match="#/pattern"):
        json_schema_to_grammar({"type": "string", "pattern": pattern})


def test_punctuation_identity_escapes_stay_literal():
    check({"type": "string", "pattern": "^\\-\\_\\'\\\"\\@$"}, ["-_'\"@"], ["-_'\"#"])


# ----------------------------------------------------------------------------- 3. allOf scoping

def test_all_of_items_does_not_look_in_applicators():
    s = {"allOf": [{"prefixItems": [{"minimum": 3}]}], "items": {"minimum": 5}}
    check(s, [[5, 5], [6]], [[3, 5], [5, 4]])


def test_all_of_items_of_a_branch_without_prefix_items_covers_every_position():
    s = {"allOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"type": "integer", "maximum": 2}}]}
    check(s, [[1, 2], []], [[5], [1, 3]])


def test_all_of_additional_properties_does_not_look_in_applicators():
    s = {"allOf": [{"properties": {"foo": {}}}], "additionalProperties": {"type": "boolean"}}
    check(s, [{"foo": True}, {"bar": False}], [{"foo": 1}, {"bar": 1}])


# ----------------------------------------------------------------------------- 4. $id / $anchor scoping

def test_anchor_resolves_in_the_nearest_id_resource():
    s = {"$id": "http://example.com/root.json", "$ref": "nested.json",
         "$defs": {"A": {"$anchor": "bigint", "maximum": 1},
                   "B": {"$id": "nested.json", "$ref": "#bigint",
                         "$defs": {"bi": {"$anchor": "bigint", "maxLength": 2}}}}}
    check(s, ["ab", 100], ["abc"])


def test_relative_ref_to_an_embedded_resource():
    check({"$defs": {"i": {"$id": "int.json", "type": "integer"}}, "$ref": "int.json"}, [1], ["a"])


def test_urn_ref_to_an_embedded_resource():
    urn = "urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed"
    check({"$ref": urn, "$defs": {"x": {"$id": urn, "type": "string"}}}, ["a"], [1])


def test_absolute_path_ref_to_an_embedded_resource():
    s = {"$id": "http://localhost:1234/draft2020-12/ref-and-id1/base.json", "$ref": "int.json",
         "$defs": {"bigint": {"$id": "int.json", "maximum": 10},
                   "smallint": {"$id": "/draft2020-12/ref-and-id1-int.json", "maximum": 2}}}
    check(s, [5], [50])
    s2 = dict(s, **{"$ref": "/draft2020-12/ref-and-id1-int.json"})
    check(s2, [2], [5])


def test_id_inside_an_enum_is_not_a_resource():
    s = {"$defs": {"e": {"enum": [{"$id": "fake.json", "type": "null"}]}, "real": {"$id": "fake.json", "type": "integer"}},
         "$ref": "fake.json"}
    check(s, [1], [None])


def test_truly_remote_ref_stays_unsupported():
    with pytest.raises(UnsupportedSchema, match="remote"):
        json_schema_to_grammar({"$id": "http://example.com/a.json", "$ref": "other.json"})


# ----------------------------------------------------------------------------- 5. one pointer resolver

def test_reorder_and_lowering_share_the_resolver():
    s = {"$id": "http://example.com/r.json", "$ref": "n.json",
         "$defs": {"n": {"$id": "n.json", "properties": {"b": {}, "a": {}}}}}
    refs = SchemaRefs(s)
    target, ptr = refs.resolve("n.json", s)
    assert target is s["$defs"]["n"] and ptr == "/$defs/n"
    assert list(reorder_to_schema({"a": 1, "b": 2}, s)) == ["b", "a"]


def test_ref_siblings_are_ignored_in_draft7_and_apply_in_2020_12():
    import jsonschema
    defs = {"definitions": {"s": {"type": "string"}}}
    old = {"$schema": "http://json-schema.org/draft-07/schema#", **defs, "$ref": "#/definitions/s", "maxLength": 1}
    new = {**defs, "$ref": "#/definitions/s", "maxLength": 1}
    assert jsonschema.Draft7Validator(old).is_valid("abc") and not valid(new, "abc")
    assert accepts(parser_for(old), dumps("abc"))
    assert not accepts(parser_for(new), dumps("abc")) and accepts(parser_for(new), dumps("a"))


def test_required_keys_without_a_declaration_follow_the_declared_ones():
    s = {"properties": {"a": {}}, "required": ["z", "a"]}
    assert list(reorder_to_schema({"z": 1, "q": 2, "a": 3}, s)) == ["a", "z", "q"]
    check(s, [{"a": 1, "z": 2, "q": 3}])


def test_dynamic_ref_with_a_single_dynamic_anchor_is_a_static_ref():
    s = {"$id": "https://example.com/root", "type": "array", "items": {"$dynamicRef": "#items"},
         "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"}}}
    check(s, [["a"], []], [[1]])


def test_recursive_dynamic_ref_lowers_as_recursion():
    s = {"$id": "https://example.com/tree", "$dynamicAnchor": "node", "type": "object",
         "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}, "additionalProperties": False}
    check(s, [{}, {"kids": [{"kids": []}]}], [{"kids": [1]}, {"x": 1}])


def test_dynamic_ref_whose_target_depends_on_the_dynamic_scope_is_refused():
    s = {"$defs": {"a": {"$dynamicAnchor": "x", "type": "string"},
                   "b": {"$id": "b.json", "$dynamicAnchor": "x", "type": "integer"}}, "$dynamicRef": "#x"}
    with pytest.raises(UnsupportedSchema, match="#/\\$dynamicRef: .*dynamic scope"):
        json_schema_to_grammar(s)
