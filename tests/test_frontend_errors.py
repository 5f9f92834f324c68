"""Malformed grammars → GrammarError whose message says what and where."""
from __future__ import annotations

import pytest

from glrmask.errors import GrammarError, RegexError
from glrmask.grammar.loader import load_grammar

# (format, text, start, fragments the message must contain)
CASES = [
    ("lark", 'start: "a" |\nfoo: :: bar\n', None, ["g.x:2:6", "Expecting a value"]),
    ("lark", 'start: "a\n', None, ["g.x:1:8"]),
    ("lark", "start: x\n", None, ["g.x:1:8", "'x'", "not defined"]),
    ("lark", 'start: A _INDENT\nA: "a"\n%declare _INDENT\n', None, ["%declare", "_INDENT"]),
    ("lark", 'a: "x"\nb: "y"\n', None, ["unknown start rule 'start'", "a, b"]),
    ("lark", 'a: "x"\n', "zzz", ["'zzz'", "available rules: a"]),
    ("lark", "start: A\nA: /[a/\n", None, ["g.x:2:1", "A", "invalid regex"]),
    ("lark", 'start: "a"\nstart: "b"\n', None, ["more than once"]),
    ("gbnf", "root ::= foo\n", None, ["g.x:1:10", "'foo'", "not defined"]),
    ("gbnf", 'root ::= "a\n', None, ["g.x:1:12", "unterminated string"]),
    ("gbnf", "root ::= [b-a]\n", None, ["g.x:1:11", "reversed"]),
    ("gbnf", 'root ::= ("a"\nx ::= "b"\n', None, ["g.x:2:1", "')'"]),
    ("gbnf", 'root ::= "\\q"\n', None, ["g.x:1:11", "unknown escape"]),
    ("gbnf", 'root ::= "\\x4"\n', None, ["g.x:1:11", "hex digits"]),
    ("gbnf", 'x ::= "a"\n', None, ["start rule 'root'", "rules: x"]),
    ("gbnf", 'root ::= "a"{3,1}\n', None, ["g.x:1:13", "max < min"]),
    ("gbnf", 'root "a"\n', None, ["g.x:1:6", "'::='"]),
    ("gbnf", 'root ::= "a"\nroot ::= "b"\n', None, ["g.x:2:1", "defined twice", "1:1"]),
    ("gbnf", "root ::= []\n", None, ["g.x:1:10", "empty character class"]),
    ("gbnf", 'root ::= "a" )\n', None, ["g.x:1:14", "unbalanced"]),
    ("gbnf", "root ::= @\n", None, ["g.x:1:10", "unexpected character"]),
    ("regex", "(a", None, ["invalid regex"]),
    ("regex", "a[", None, ["invalid regex"]),
]


@pytest.mark.parametrize("fmt,text,start,fragments", CASES)
def test_malformed_grammar_message(tmp_path, fmt, text, start, fragments):
    suffix = {"lark": ".lark", "gbnf": ".gbnf", "regex": ".x"}[fmt]
    path = tmp_path / f"g{suffix}"
    path.write_text(text)
    source = path if fmt != "regex" else text
    with pytest.raises(GrammarError) as info:
        load_grammar(source, format=fmt, start=start)
    message = str(info.value).replace(str(tmp_path) + "/g" + suffix, "g.x")
    for fragment in fragments:
        assert fragment in message


def test_bad_terminal_regex_is_a_regex_error():
    with pytest.raises(RegexError):
        load_grammar("start: A\nA: /(?<=/\n", format="lark")


def test_regex_grammar_cannot_choose_a_start():
    with pytest.raises(GrammarError, match="start"):
        load_grammar("a+", format="regex", start="x")
