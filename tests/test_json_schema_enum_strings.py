"""An enum's string values are kept exactly when they meet the string keywords beside the enum,
as the encoded string regex of those keywords says (formats, patterns, lengths, excluded strings).

The lowering decides this on the decoded value (``ecma_regex.searches_into`` per format and
pattern, the length in code points) instead of compiling the keywords' content regex for every
schema; the reference below matches the value's JSON encoding with that regex, built the way the
lowering builds it."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask.errors import UnsupportedSchema
from glrmask.json_schema import charset, ecma_regex, formats, lower_json_schema_ir


def _meets_by_regex(value: str, patterns: list[str], fmt: str | None, lo: int, hi: int | None,
                    excluded: list[str] = ()) -> bool:
    if excluded and re.fullmatch('\\x22(?:' + '|'.join(charset.encode_string_literal(x) for x in excluded)
                                 + ')\\x22', json.dumps(value)):
        return False
    contents = []
    if fmt is not None:
        contents.append(ecma_regex.content_regex(formats.format_pattern(fmt)))
    contents += [ecma_regex.content_regex(p) for p in patterns]
    if lo > 0 or hi is not None:
        contents.append('(?:' + charset.ANY_CHAR + ')' + ('{%d}' % lo if lo == hi else '{%d,%s}' % (lo, '' if hi is None else hi)))
    if not contents:
        contents.append('(?:' + charset.ANY_CHAR + ')*')
    regex = '\\x22' + ''.join('(?=' + c + '\\x22)' for c in contents[:-1]) + contents[-1] + '\\x22'
    return re.fullmatch(regex, json.dumps(value)) is not None


def _kept(value: str, schema: dict) -> bool:
    try:
        lower_json_schema_ir({"enum": [value], **schema})
    except UnsupportedSchema as exc:
        assert "admits no JSON value" in str(exc)
        return False
    return True


_PATTERNS = st.sampled_from(["^a", "b$", "^[a-z]+$", "\\d", "^.{2}$", "😀", "^(?:a|é)*$", "-"])
_VALUES = st.text(alphabet=st.sampled_from(list("ab-1é😀 \"\\") + ["\ud800"]), max_size=5)
_FORMATS = st.sampled_from([None, "date", "ipv4", "uuid", "email"])


_EXCLUDED = st.lists(st.text(alphabet=st.sampled_from(list("ab-1é😀 \"\\")), max_size=3), max_size=3)


@settings(max_examples=200, deadline=None)
@given(_VALUES, st.lists(_PATTERNS, max_size=2), _FORMATS, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 4)),
       _EXCLUDED)
def test_an_enum_string_is_kept_iff_the_string_keywords_regex_matches_it(value, patterns, fmt, lo, hi, excluded):
    if hi is not None and hi < lo:
        hi = lo
    schema: dict = {"minLength": lo}
    if excluded:
        schema["not"] = {"enum": excluded + [0]}
    if hi is not None:
        schema["maxLength"] = hi
    if fmt is not None:
        schema["format"] = fmt
    if patterns:
        schema["allOf"] = [{"pattern": p} for p in patterns]
    assert _kept(value, schema) == _meets_by_regex(value, patterns, fmt, lo, hi, excluded)


@pytest.mark.parametrize("value,schema,kept", [
    ("2024-01-31", {"format": "date"}, True),
    ("2024-1-31", {"format": "date"}, False),
    ("😀😀", {"maxLength": 2}, True),        # lengths count code points
    ("😀😀", {"maxLength": 1}, False),
    ("a\ud800", {"pattern": "a"}, False),    # a lone surrogate: no pattern reads it
])
def test_examples(value, schema, kept):
    assert _kept(value, schema) is kept
