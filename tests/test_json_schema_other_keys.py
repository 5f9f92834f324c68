"""An object's "any other key" terminal matches exactly the keys whose decoded name is not a
declared property, in every JSON spelling, as the lookahead it replaced did.

``charset.encode_string_except`` spells "none of these names" over the trie of the names, with
no lookahead (so the lexer's native steps and its future shortcut apply to the key); these tests
hold it to ``re`` running the lookahead form — ``(?!(?:name|…)")`` before any string content —
on random name sets and on random spellings of names, of their prefixes and of their
extensions: escapes (short, ``\\u``, upper- and lower-case hex, surrogate pairs), astral and
non-Latin characters, quotes and backslashes in the names, and texts cut inside an escape."""
from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask.json_schema import charset as cs
from glrmask.json_schema import json_schema_to_grammar

_CHARS = st.sampled_from(["a", "b", "é", "Ω", "😀", '"', "\\", "/", "\n", "x", "\x00", "\u2028"])
_NAMES = st.lists(st.text(_CHARS, max_size=4), max_size=5, unique=True).map(tuple)


@lru_cache(maxsize=None)
def _lookahead_form(names: tuple[str, ...]) -> re.Pattern:
    excl = '(?!(?:' + '|'.join(cs.encode_string_literal(k) for k in names) + ')\\x22)' if names else ''
    return re.compile('\\x22' + excl + '(?:' + cs.ANY_CHAR + ')*\\x22')


@lru_cache(maxsize=None)
def _trie_form(names: tuple[str, ...]) -> re.Pattern:
    return re.compile('\\x22' + cs.encode_string_except(names) + '\\x22')


@st.composite
def _spelling(draw, text: str) -> str:
    """One JSON spelling of ``text``'s content: each character raw (where JSON allows it), as a
    short escape, or as ``\\u`` escapes in either case."""
    out = []
    for c in text:
        forms = [json.dumps(c, ensure_ascii=True)[1:-1]]
        if c not in '"\\' and ord(c) >= 0x20:
            forms.append(c)
        if ord(c) < 0x10000:
            forms += ['\\u%04x' % ord(c), '\\u%04X' % ord(c)]
        out.append(draw(st.sampled_from(forms)))
    return ''.join(out)


@st.composite
def _case(draw):
    names = draw(_NAMES)
    if names and draw(st.booleans()):
        base = draw(st.sampled_from(names))
        base = base[:draw(st.integers(0, len(base)))] + draw(st.text(_CHARS, max_size=2))
    else:
        base = draw(st.text(_CHARS, max_size=5))
    text = '"' + draw(_spelling(base)) + '"' + draw(st.sampled_from(['', '": 1', '"', 'x']))
    if draw(st.integers(0, 9)) == 0:  # cut somewhere, an escape's middle included
        text = text[:draw(st.integers(0, len(text)))] + draw(st.sampled_from(['\\', '"', '\\u00', '\\ud83d']))
    return names, text


@settings(max_examples=300, deadline=None)
@given(_case())
def test_the_other_keys_are_the_keys_the_lookahead_let_through(case):
    names, text = case
    old, new = _lookahead_form(names).match(text), _trie_form(names).match(text)
    assert (old and old.end()) == (new and new.end())


@pytest.mark.parametrize("names", [[], [""], ["a", "ab", "abc"], ["😀x", "Ω"], ['"', "\\", "/"]])
def test_examples_hold_with_no_lookahead(names):
    pattern = cs.encode_string_except(names)
    assert "(?!" not in pattern and "(?=" not in pattern
    for name in names:
        assert not _trie_form(tuple(names)).fullmatch(json.dumps(name))
    assert _trie_form(tuple(names)).fullmatch('"zz"')


def test_a_name_too_long_to_spell_keeps_the_lookahead():
    assert cs.encode_string_except(["k" * (cs.MAX_EXCEPT_NAME + 1)]) is None
    schema = {"type": "object", "properties": {"k" * (cs.MAX_EXCEPT_NAME + 1): {"type": "integer"}}}
    assert "(?!" in json_schema_to_grammar(schema)


def test_an_open_object_spells_its_other_keys_without_a_lookahead():
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "id": {"type": "integer"}}}
    akey = [line for line in json_schema_to_grammar(schema).splitlines() if line.startswith("AKEY")]
    assert akey and "(?!" not in akey[0]
