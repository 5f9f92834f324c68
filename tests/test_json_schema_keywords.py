"""Per-keyword behaviour of the JSON Schema lowering, judged by lark and cross-checked with jsonschema."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_helpers import accepts, dumps, parser_for, valid  # noqa: E402

from glrmask.errors import GlrmaskError, GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.json_schema import json_schema_to_grammar, lower_json_schema  # noqa: E402


def check(schema, good, bad=(), **kw):
    """Every `good` instance is jsonschema-valid and accepted; every `bad` one invalid and rejected."""
    p = parser_for(schema, **kw)
    for x in good:
        assert valid(schema, x), x
        assert accepts(p, dumps(x)), dumps(x)
    for x in bad:
        assert not valid(schema, x), x
        assert not accepts(p, dumps(x)), dumps(x)


def check_text(schema, good_texts, bad_texts=(), **kw):
    p = parser_for(schema, **kw)
    for t in good_texts:
        assert accepts(p, t), t
    for t in bad_texts:
        assert not accepts(p, t), t


# ----------------------------------------------------------------------------- types

def test_type_null_boolean():
    check({"type": ["null", "boolean"]}, [None, True, False], [0, "x", [], {}])


def test_type_integer_rejects_fraction_and_exponent():
    check({"type": "integer"}, [0, -5, 12345678901234567890], [1.5, "1"])
    check_text({"type": "integer"}, ["12", "-0"], ["1.0", "1e3", "01", "1 2"])


def test_type_number_accepts_json_dumps_floats():
    check({"type": "number"}, [0, 1.5, -2.25e-07, 1e300, 12], ["1", None])
    check_text({"type": "number"}, ["1E+5", "-0.0"], ["01", ".5", "1.", "+1"])


def test_missing_type_allows_every_type():
    check({"minimum": 3}, [3, "x", None, [1], {"a": 1}], [2])


def test_nullable_type_list():
    check({"type": ["string", "null"], "maxLength": 2}, ["ab", None], ["abc", 1])


# ----------------------------------------------------------------------------- strings

def test_string_length_counts_code_points_not_escapes():
    s = {"type": "string", "minLength": 2, "maxLength": 3}
    check(s, ["ab", "é😀", "\n\t", 'a"b'], ["a", "abcd", "😀"])
    check_text(s, ['"\\u00e9\\u00E9"', '"\\ud83d\\ude00\\n"'], ['"\\ud83d\\ude00"'])


def test_pattern_is_an_unanchored_search():
    check({"type": "string", "pattern": "b+c"}, ["abbcd", "bc"], ["ac", "cb"])


def test_pattern_anchors():
    check({"type": "string", "pattern": "^[a-z]+$"}, ["abc"], ["ab1", "", "Abc"])
    check({"type": "string", "pattern": "^a|c$"}, ["ax", "xc"], ["xa", "cx"])


def test_pattern_applies_to_decoded_value():
    s = {"type": "string", "pattern": "^a/b\"c\\\\$"}
    check(s, ['a/b"c\\'])
    check_text(s, ['"a\\/b\\u0022c\\u005C"', '"\\u0061/b\\"c\\\\"'], ['"a/b"c\\\\"'])


def test_pattern_escapes_classes_and_quantifiers():
    check({"type": "string", "pattern": "^\\d{3}-\\w+\\s?[^x-z]{0,2}$"},
          ["123-ab", "123-_ a", "123-a\tq"], ["12-ab", "123-ab x", "1234-a"])


def test_pattern_word_and_digit_classes_are_ascii_like_ecma():
    # ECMA-262 \w and \d are ASCII (Python's re, used by jsonschema, is Unicode here)
    check_text({"type": "string", "pattern": "^\\w\\d$"}, ['"a1"'], ['"é1"', '"a١"'])


def test_pattern_with_lookahead():
    check({"type": "string", "pattern": "^(?=.*[0-9])(?!.*x)[a-z0-9]+$"}, ["ab1"], ["abc", "a1x"])


def test_pattern_and_length_intersect():
    check({"type": "string", "pattern": "^a+$", "maxLength": 3, "minLength": 2}, ["aa", "aaa"], ["a", "aaaa"])


def test_unsupported_pattern_is_reported_with_pointer():
    with pytest.raises(UnsupportedSchema, match=r"#/properties/x/pattern"):
        json_schema_to_grammar({"properties": {"x": {"type": "string", "pattern": "(a)\\1"}}})


@pytest.mark.parametrize("fmt,good,bad", [
    ("date", ["2024-02-29", "2023-12-31"], ["2023-02-29", "2023-13-01", "0000-01-01"]),
    ("time", ["12:30:00Z", "23:59:59.5+02:00"], ["24:00:00Z", "12:30:00"]),
    ("date-time", ["2024-01-01T00:00:00Z", "2024-01-01t10:00:00.123-05:30"], ["2024-01-01 00:00:00Z"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    ("ipv4", ["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "01.1.1.1", "1.1.1"]),
    ("ipv6", ["::1", "2001:db8::ff00:42:8329", "::ffff:192.0.2.1", "1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:8:9", ":::"]),
])
def test_formats_match_the_jsonschema_checker(fmt, good, bad):
    check({"type": "string", "format": fmt}, good, bad)


def test_other_formats_are_syntax_checked():
    check_text({"type": "string", "format": "email"}, ['"a@b.c"'], ['"no at sign"'])
    check_text({"type": "string", "format": "hostname"}, ['"example.com"'], ['"-bad-.com"'])
    check_text({"type": "string", "format": "uri"}, ['"https://x.org/a?b=c"'], ['"not a uri"'])
    check_text({"type": "string", "format": "duration"}, ['"P1DT2H"', '"P3W"'], ['"P"', '"PT"'])


def test_unknown_format_is_a_warning():
    text, warnings = lower_json_schema({"type": "string", "format": "x-custom"})
    assert any("x-custom" in w for w in warnings)


# ----------------------------------------------------------------------------- numbers

def test_integer_range_is_exact():
    s = {"type": "integer", "minimum": -17, "maximum": 1234}
    p = parser_for(s)
    for n in range(-40, 1300):
        assert accepts(p, str(n)) == valid(s, n), n


def test_integer_exclusive_and_fractional_bounds():
    check({"type": "integer", "exclusiveMinimum": 0, "maximum": 9.5}, [1, 9], [0, 10])
    check_text({"type": "integer", "minimum": 5, "exclusiveMinimum": True}, ["6"], ["5"])  # draft-4 form


def test_number_bounds_are_exact_without_exponent():
    s = {"type": "number", "minimum": -1.5, "exclusiveMaximum": 10}
    check(s, [-1.5, -1, 0, 9.999, 3], [-1.51, 10, 10.0, 11])


def test_integer_multiple_of():
    check({"type": "integer", "multipleOf": 5, "minimum": 0}, [0, 5, 100], [3, -5])
    s = {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 30}
    p = parser_for(s)
    for n in range(-40, 41):
        assert accepts(p, str(n)) == valid(s, n), n


def test_number_multiple_of_power_of_ten():
    check({"type": "number", "multipleOf": 0.01}, [1, 1.25, 0.5], [1.255])


def test_giant_integer_range_is_a_budget_error():
    with pytest.raises(GrammarTooComplex):
        json_schema_to_grammar({"type": "integer", "minimum": 0, "maximum": 10 ** 900})


# ----------------------------------------------------------------------------- enum / const

def test_enum_of_mixed_values():
    check({"enum": ["a", "b\"", 1, 2.5, None, True, [1, "x"], {"k": 0}]},
          ["a", 'b"', 1, 2.5, None, True, [1, "x"], {"k": 0}], ["c", 3, False, [1], {"k": 1}])


def test_const_string_accepts_every_spelling():
    check_text({"const": "é/"}, ['"é/"', '"\\u00e9\\/"', '"\\u00C9/"'.replace("C9", "e9")], ['"e/"'])


def test_huge_enum_is_a_budget_error():
    with pytest.raises(GrammarTooComplex):
        json_schema_to_grammar({"enum": list(range(100000))})


# ----------------------------------------------------------------------------- objects

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
       "required": ["b"]}


def test_properties_in_schema_order_with_optional_and_required():
    check(OBJ, [{"b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": True}, {"b": "x", "extra": [1]}],
          [{"a": 1}, {"a": "1", "b": "x"}])


def test_schema_order_is_enforced_by_default():
    check_text(OBJ, ['{"a": 1, "b": "x"}'], ['{"b": "x", "a": 1}'])


def test_additional_properties_false_and_schema():
    s = dict(OBJ, additionalProperties=False)
    check(s, [{"b": "x"}], [{"b": "x", "d": 1}])
    s = dict(OBJ, additionalProperties={"type": "integer"})
    check(s, [{"b": "x", "d": 1}], [{"b": "x", "d": "y"}])


def test_extra_key_may_not_reuse_a_declared_name():
    s = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    check_text(s, ['{"a": 1}', '{"b": "s"}'], ['{"a": "s"}', '{"\\u0061": "s"}'])


def test_pattern_properties():
    s = {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    check(s, [{"x-a": 1}, {}], [{"x-a": "s"}, {"y": 1}])


def test_min_max_properties():
    s = {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 2}
    check(s, [{"a": 1}, {"a": 1, "b": 2}, {"z": 1}], [{}, {"a": 1, "b": 2, "c": 3}])


def test_required_key_not_in_properties_uses_additional_schema():
    s = {"type": "object", "required": ["k"], "additionalProperties": {"type": "integer"}}
    check(s, [{"k": 1}], [{}, {"k": "s"}])


def test_property_order_any_accepts_every_permutation():
    s = dict(OBJ, additionalProperties=False)
    check(s, [{"c": True, "b": "x", "a": 1}, {"b": "x", "a": 2}], [{"c": True, "a": 1}], property_order="any")


def test_property_order_any_limits_property_count():
    props = {f"p{i}": {} for i in range(9)}
    with pytest.raises(UnsupportedSchema, match="at most 8"):
        json_schema_to_grammar({"type": "object", "properties": props}, property_order="any")


# ----------------------------------------------------------------------------- arrays

def test_items_and_length_bounds():
    s = {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}
    check(s, [[1], [1, 2, 3]], [[], [1, 2, 3, 4], ["a"]])


def test_prefix_items_then_items():
    s = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False}
    check(s, [[], ["a"], ["a", 1]], [[1], ["a", 1, 2]])


def test_draft4_tuple_items_with_additional_items():
    s = {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}}
    p = parser_for(s)
    assert accepts(p, '["a", 1, 2]') and not accepts(p, '["a", "b"]')


def test_huge_max_items_is_a_budget_error():
    with pytest.raises(GrammarTooComplex):
        json_schema_to_grammar({"type": "array", "maxItems": 100000})


# ----------------------------------------------------------------------------- combinators, refs

def test_any_of_and_one_of():
    check({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, [1, "a"], ["ab", None])
    check({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, [1, True], ["x"])


def test_all_of_is_merged():
    s = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}}}]}
    check(s, [{"a": 3}, {"a": 4, "b": "x"}], [{"a": 2}, {"b": "x"}])


def test_siblings_distribute_over_any_of():
    s = {"type": "string", "maxLength": 2, "anyOf": [{"pattern": "^a"}, {"pattern": "b$"}]}
    check(s, ["ab", "a", "b"], ["abc", "c"])


def test_recursive_ref():
    s = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                             "next": {"$ref": "#/$defs/node"}},
                            "required": ["v"], "additionalProperties": False}},
         "$ref": "#/$defs/node"}
    check(s, [{"v": 1}, {"v": 1, "next": {"v": 2, "next": {"v": 3}}}], [{"v": 1, "next": {}}])


def test_ref_pointer_escapes():
    s = {"definitions": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e f": {"type": "null"}},
         "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"}, {"$ref": "#/definitions/c~0d"},
                                          {"$ref": "#/definitions/e%20f"}]}
    check(s, [[1, "x", None]], [["x"]])


def test_false_schema_property_makes_it_forbidden():
    check({"type": "object", "properties": {"a": False}}, [{}, {"b": 1}], [{"a": 1}])


def test_unsatisfiable_schema_is_reported():
    with pytest.raises(UnsupportedSchema, match="unsatisfiable"):
        json_schema_to_grammar({"type": "integer", "minimum": 5, "maximum": 1})


# ----------------------------------------------------------------------------- unsupported / lenient

def test_unsupported_keywords_are_listed_with_pointers():
    s = {"not": {"additionalProperties": False},
         "properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                        "c": {"$dynamicRef": "#x"}}}
    with pytest.raises(UnsupportedSchema) as e:
        json_schema_to_grammar(s)
    msg = str(e.value)
    assert "#/not: not: keyword additionalProperties/patternProperties" in msg and "#/properties/a/uniqueItems" in msg
    assert "#/properties/c/$dynamicRef" in msg
    assert isinstance(e.value, GlrmaskError)


def test_remote_ref_is_unsupported():
    with pytest.raises(UnsupportedSchema, match="remote"):
        json_schema_to_grammar({"$ref": "https://example.com/s.json"})


def test_lenient_ignores_with_warnings():
    text, warnings = lower_json_schema({"type": "array", "uniqueItems": True}, lenient=True)
    assert any("uniqueItems" in w for w in warnings)
    assert "start" in text


def test_annotations_and_unknown_keywords_are_ignored():
    check({"title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c",
           "x-vendor": 5, "type": "integer"}, [1], ["a"])


# ----------------------------------------------------------------------------- input forms

def test_schema_from_json_text_path_and_str_path(tmp_path):
    f = tmp_path / "s.json"
    f.write_text('{"type": "integer"}')
    a = json_schema_to_grammar('{"type": "integer"}')
    assert a == json_schema_to_grammar(f) == json_schema_to_grammar(str(f))


def test_bad_schema_string_is_a_clear_error():
    with pytest.raises(UnsupportedSchema, match="neither JSON nor an existing file"):
        json_schema_to_grammar("/no/such/file.json")


def test_support_matrix_doc_is_current():
    from glrmask.json_schema.support import render_markdown
    doc = Path(__file__).resolve().parents[1] / "docs" / "json_schema_support.md"
    assert doc.read_text(encoding="utf-8") == render_markdown()


def test_all_of_pattern_properties_meet_other_branch_additional_properties():
    s = {"allOf": [{"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
                   {"properties": {"xa": {}}, "additionalProperties": {"minimum": 5}}]}
    check(s, [{"xa": 1}, {"xb": 7}, {}], [{"xb": 1}, {"xb": "s"}])


def test_empty_pattern_matches_every_string():
    check({"type": "string", "pattern": ""}, ["", "abc"])
    check({"type": "object", "patternProperties": {"": {"type": "integer"}}}, [{"a": 1}], [{"a": "s"}])


def test_number_with_an_integral_multiple_of_accepts_fraction_zero_spellings():
    s = {"type": "number", "minimum": 0, "maximum": 99999999, "multipleOf": 1}
    check(s, [6000.0, 6000, 0], [1.5, -1])
    check_text(s, ["6000.00"], ["6000.01", "1e3"])
