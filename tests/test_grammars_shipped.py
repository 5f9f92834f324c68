"""The grammars shipped in grammars/: they load, re-render, and mean what their README says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from glrmask.grammar.loader import load_grammar

from _grammar_judge import accepts, judge, judge_ir, mutations

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"


def _parsers(name: str):
    path = GRAMMARS / f"{name}.lark"
    return judge(path.read_text()), judge_ir(load_grammar(path))


def test_every_shipped_grammar_is_listed_in_the_readme():
    readme = (GRAMMARS / "README.md").read_text()
    for path in GRAMMARS.glob("*.lark"):
        assert f"`{path.name}`" in readme


def _strict_json(text: str) -> bool:
    """RFC 8259 via the json module, minus its extensions (NaN/Infinity) and its wider whitespace."""
    def no_constants(name: str):
        raise ValueError(name)

    if text.strip(" \t\r\n") != text.strip():
        return False
    try:
        json.loads(text, parse_constant=no_constants)
    except ValueError:
        return False
    return True


JSON_SAMPLES = [
    '{"a": [1, -2.5e+3, true, false, null, "x\\u00e9\\n"], "b": {}}',
    "[]", " 0 ", "-0.0E-0", '"\\/\\b\\f\\r\\t\\\\\\""', "[[[]]]", '{"k":{"k":{"k":[1,2]}}}',
    "1.", ".5", "01", "+1", "-", "1e", "[1,]", '{"a" 1}', "{,}", "'x'", '"\x01"', '"\\x41"',
    "[1 2]", "truefalse", "NaN", "Infinity", '"\\u12"', "\u00a0 1", '{"a":1}{"b":2}', "",
]


@pytest.mark.parametrize("text", JSON_SAMPLES)
def test_json_grammar_is_exactly_rfc_8259(text):
    original, converted = _parsers("json")
    assert accepts(original, text) == _strict_json(text)
    assert accepts(converted, text) == _strict_json(text)


def test_json_grammar_agrees_with_json_module_on_near_misses():
    original, _ = _parsers("json")
    for i, doc in enumerate(JSON_SAMPLES[:7]):
        for text in mutations(doc, 25, seed=i):
            assert accepts(original, text) == _strict_json(text), repr(text)


# name -> (accepted, rejected)
EXAMPLES = {
    "arithmetic": (
        ["1+2*3", "-(a+b)^2^3", "max(1, 2.5e3, x)", "f()", ".5 + 1.", "2 % 3 / 4"],
        ["1 2", "1.5.5", "2x", "a b", "(1", "1 +", "f(,)"],
    ),
    "csv": (
        ["a,b,c\r\n1,2,3\r\n", 'x,"a,b",""""\n', "", ",,", 'q,"multi\nline"', "a b,c"],
        ['a"b', '"a"b', '"open', 'x,"y"z'],
    ),
    "sql": (
        [
            "SELECT * FROM users",
            "select a, b as c from t where x = 1 and y <> 'it''s' order by a desc limit 10",
            "SELECT u.name, COUNT(*) FROM users u LEFT JOIN orders o ON o.uid = u.id "
            "GROUP BY u.name HAVING COUNT(*) > 2;",
            "INSERT INTO t (a, b) VALUES (1, 'x'), (2, NULL)",
            "UPDATE t SET a = a + 1 WHERE id IN (1,2,3)",
            "DELETE FROM t WHERE name LIKE 'a%'",
            "SELECT fromage FROM t",
        ],
        ["SELECTa FROM t", "SELECT from FROM t", "SELECT 10abc FROM t", "SELECT a FROM", "DELETE t"],
    ),
    "tinylang": (
        [
            "fn fib(n) { if n < 2 { return n; } return fib(n - 1) + fib(n - 2); }\n"
            "let x = fib(10); while x > 0 { x = x - 1; } print(x);",
            "letx = 1;", 'let s = [1, "a\\"b"][0];', "if a { } else if b { } else { }", "",
        ],
        ["let let = 1;", "fnf() {}", "let x = 1.5.2;", "let x = 1", "while { }"],
    ),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_shipped_grammar_examples(name):
    accepted, rejected = EXAMPLES[name]
    for parser in _parsers(name):
        for text in accepted:
            assert accepts(parser, text), repr(text)
        for text in rejected:
            assert not accepts(parser, text), repr(text)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_shipped_grammar_conversion_agrees_on_near_misses(name):
    original, converted = _parsers(name)
    for i, doc in enumerate(EXAMPLES[name][0][:3]):
        for text in mutations(doc[:80], 6, seed=i):
            assert accepts(converted, text) == accepts(original, text), repr(text)
