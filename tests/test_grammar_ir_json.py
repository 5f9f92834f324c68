"""Grammar.to_json / Grammar.from_json: an exact round trip of the grammar IR, with clear errors
on malformed input."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from glrmask.errors import ArtifactError
from glrmask.grammar.ir import Grammar, Rule, TerminalDef
from glrmask.grammar.ir_json import grammar_to_obj
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize

from _grammars import CASES

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "data" / "grammars"
SOURCES = (
    [str(p) for p in sorted((ROOT / "grammars").glob("*.lark"))]
    + [str(p) for p in sorted(CORPUS.glob("*/grammar.lark"))]
    + [c.grammar for c in CASES]
)


def odd_grammar() -> Grammar:
    """Every field set, with strings JSON must escape (quotes, control chars, non-ASCII, a lone
    surrogate) and an empty right-hand side."""
    return Grammar(
        rules=[Rule("start", ("A", "x")), Rule("x", ()), Rule("x", ("B", "x"))],
        terminals={
            "A": TerminalDef("A", '"\\n\t\x00é中', literal='"\n\t\x00é中'),
            "B": TerminalDef("B", "[\ud800-\udbff]+(?=\\u2028)"),
            "WS": TerminalDef("WS", "[ ]+"),
        },
        start="start",
        ignore=("WS",),
        source_name="dir/ödd \"name\".lark",
        warnings=["first warning", "second: \u2028"],
    )


@pytest.mark.parametrize("index", range(len(SOURCES)))
def test_loaded_and_normalized_grammars_round_trip_exactly(index):
    g = load_grammar(SOURCES[index])
    for grammar in (g, normalize(g)):
        back = Grammar.from_json(grammar.to_json())
        assert back == grammar
        assert list(back.terminals) == list(grammar.terminals)  # order fixes terminal ids


def test_every_field_and_awkward_strings_round_trip_exactly():
    g = odd_grammar()
    back = Grammar.from_json(g.to_json())
    assert back == g
    assert isinstance(back.ignore, tuple) and all(isinstance(r.rhs, tuple) for r in back.rules)


def test_the_json_names_every_dataclass_field():
    """Adding a field to Grammar or TerminalDef must extend the JSON form (this test then fails)."""
    obj = grammar_to_obj(odd_grammar())
    assert {f.name for f in dataclasses.fields(Grammar)} <= set(obj)
    assert {f.name for f in dataclasses.fields(TerminalDef)} == set(obj["terminals"][0])
    assert {f.name for f in dataclasses.fields(Rule)} == {"lhs", "rhs"}


def test_json_text_is_ascii_and_deterministic():
    text = odd_grammar().to_json()
    assert text.isascii()
    assert text == odd_grammar().to_json()


def test_bytes_input_is_accepted():
    g = odd_grammar()
    assert Grammar.from_json(g.to_json().encode()) == g


def test_invalid_json_is_an_artifact_error():
    with pytest.raises(ArtifactError, match="not valid JSON"):
        Grammar.from_json("{")


def test_other_format_or_version_is_an_artifact_error():
    obj = grammar_to_obj(odd_grammar())
    obj["version"] = 99
    with pytest.raises(ArtifactError, match="version"):
        Grammar.from_json(json.dumps(obj))


@pytest.mark.parametrize("field,value", [
    ("rules", [["start"]]),
    ("rules", [["start", "A"]]),
    ("terminals", [{"name": "A", "pattern": 3, "literal": None}]),
    ("terminals", [{"name": "A", "pattern": "a"}]),
    ("ignore", "WS"),
    ("warnings", [1]),
    ("start", None),
])
def test_malformed_fields_are_artifact_errors(field, value):
    obj = grammar_to_obj(odd_grammar())
    obj[field] = value
    with pytest.raises(ArtifactError):
        Grammar.from_json(json.dumps(obj))


def test_duplicate_terminal_is_an_artifact_error():
    obj = grammar_to_obj(odd_grammar())
    obj["terminals"].append(dict(obj["terminals"][0]))
    with pytest.raises(ArtifactError, match="twice"):
        Grammar.from_json(json.dumps(obj))
