"""A property name matches a ``patternProperties`` pattern exactly when the pattern's content
regex (the one the grammar's key terminals are built from) matches the name's JSON encoding.

The lowering decides which declared properties a pattern covers by testing the decoded name
(``ecma_regex.searches_into``) instead of compiling every content regex; these tests hold the two
to the same answer on random patterns and names, astral characters and surrogates included."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask.json_schema import ecma_regex


def _by_content_regex(pattern: str, key: str) -> bool:
    return re.fullmatch(ecma_regex.content_regex(pattern) + '\\x22', json.dumps(key)[1:-1] + '"') is not None


_ATOMS = st.sampled_from([
    "a", "b", "-", ".", "\\d", "\\w", "\\s", "\\D", "[a-c]", "[^a]", "[\\u00e9-\\u00ff]", "\\u00e9",
    "[😀-😂]", "😀", "\\\\", '"', "/", "\\n", "[\\ud800-\\udfff]", "\\p{L}", "$", "(?=a)", "(?!b)",
])
_PATTERNS = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,}"])).map(lambda t: f"(?:{t[0]}){t[1]}"),
    ),
    max_leaves=6,
).flatmap(lambda p: st.sampled_from([p, "^" + p, p + "$", "^" + p + "$", p + "|^b"]))
_KEYS = st.text(alphabet=st.sampled_from(list('ab-_é"\\/\n\t 0😀😁') + ['\ud83d', '\ude00', '\ud800']), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_PATTERNS, _KEYS)
def test_a_name_matches_a_pattern_as_its_content_regex_says(pattern, key):
    try:
        expected = _by_content_regex(pattern, key)
    except ecma_regex.PatternUnsupported:
        with pytest.raises(ecma_regex.PatternUnsupported):
            ecma_regex.searches_into(pattern, key)
        return
    assert ecma_regex.searches_into(pattern, key) == expected


@pytest.mark.parametrize("pattern,key,matches", [
    ("^x-", "x-rate", True),
    ("^x-", "ax-rate", False),
    ("rate$", "x-rate", True),
    ("^.$", "😀", True),                # one astral character is one character
    ("^..$", "\ud83d\ude00", False),    # a surrogate pair in a str is that astral character too
    (".*", "a\ud800", False),           # a lone surrogate is no character: nothing matches it
])
def test_examples(pattern, key, matches):
    assert ecma_regex.searches_into(pattern, key) is matches
    assert _by_content_regex(pattern, key) is matches


def test_an_unsupported_pattern_is_refused_for_every_name():
    for key in ("a", "a\ud800"):
        with pytest.raises(ecma_regex.PatternUnsupported):
            ecma_regex.searches_into("(a)\\1", key)
