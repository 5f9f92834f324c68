"""GBNF front-end: structure of the IR and, above all, the exact language (judged by ``re``)."""
from __future__ import annotations

import re

import pytest

from glrmask.grammar.ebnf_frontend import grammar_from_gbnf

from _grammar_judge import accepts, judge_ir, random_strings


def test_literals_and_classes_become_deduplicated_terminals():
    g = grammar_from_gbnf('root ::= "ab" [0-9] "ab" [0-9]\n')
    assert len(g.terminals) == 2
    (rule,) = g.rules
    assert rule.rhs[0] == rule.rhs[2] and rule.rhs[1] == rule.rhs[3]


def test_literal_terminal_pattern_is_escaped_literal():
    g = grammar_from_gbnf('root ::= "a.b"\n')
    (t,) = g.terminals.values()
    assert (t.literal, t.pattern) == ("a.b", re.escape("a.b"))


def test_class_terminal_is_a_one_character_regex():
    g = grammar_from_gbnf("root ::= [^a-c\\n]\n")
    (t,) = g.terminals.values()
    assert t.literal is None
    assert re.fullmatch(t.pattern, "d") and not re.fullmatch(t.pattern, "b")
    assert not re.fullmatch(t.pattern, "\n") and not re.fullmatch(t.pattern, "dd")


def test_dot_matches_newline():
    g = grammar_from_gbnf("root ::= .\n")
    (t,) = g.terminals.values()
    assert re.fullmatch(t.pattern, "\n")


def test_start_defaults_to_root_and_names_are_sanitized():
    g = grammar_from_gbnf('root ::= json-value\njson-value ::= "x"\n')
    assert g.start == "root"
    assert "json_value" in g.nonterminals


def test_no_ignore_terminals():
    assert grammar_from_gbnf('root ::= "a" " " "b"\n').ignore == ()


def test_empty_literal_is_epsilon():
    g = grammar_from_gbnf('root ::= "" | "a"\n')
    assert {r.rhs for r in g.rules} == {(), (next(iter(g.terminals)),)}


def test_bounded_repetition_grows_linearly():
    g = grammar_from_gbnf('root ::= "a"{0,400}\n')
    assert len(g.rules) <= 2 * 400 + 2
    assert max(len(r.rhs) for r in g.rules) <= 2


def test_repeated_subexpressions_share_rules():
    g = grammar_from_gbnf('root ::= [0-9]* "," [0-9]*\n')
    assert len(g.rules) == 3  # root, and ε | X* X once


def test_rules_may_span_lines_and_have_comments():
    g = grammar_from_gbnf('root ::= "a" # first\n   | "b"\n   "c"  # more\nother ::= "d"\n')
    assert len(g.rules_for("root")) == 2


# (gbnf grammar, reference regex for re.fullmatch (None: _balanced), alphabet, known members)
LANGUAGES = [
    ('root ::= "ab" | "a" "b"* "c"', r"ab|ab*c", "abc", ["ab", "ac", "abbc"]),
    ('root ::= [a-c]+ "-"? [0-9]{2,3}', r"[a-c]+-?[0-9]{2,3}", "ab-019", ["a-01", "cb999"]),
    ('root ::= ("x" | "yz")* "!"', r"(?:x|yz)*!", "xyz!", ["!", "xyzx!"]),
    ('root ::= [^"\\\\]{1,3}', r'[^"\\]{1,3}', 'a"\\\n', ["a", "\n\na"]),
    ('root ::= "a"{3} "b"{2,}', r"a{3}b{2,}", "ab", ["aaabb", "aaabbbbb"]),
    ('root ::= "\\x41\\u00e9\\n\\t\\"\\\\"', 'A\u00e9\n\t"\\\\', 'Aé\n\t"\\x', ['Aé\n\t"\\']),
    ('root ::= . "." .?', r"(?s:.)\.(?s:.)?", "a.\n", ["\n.", "a.a"]),
    ('root ::= item ("," item)*\nitem ::= [0-9] | "[" root? "]"', None, "0[],", ["[0,[]]"]),
    ('root ::= ("a" ("b" | "")){1,2} [\\]\\-]', r"(?:ab?){1,2}[\]\-]", "ab]-", ["aab-", "a]"]),
    ('root ::= [a-zA-Z_] [a-zA-Z0-9_-]{0,4}', r"[a-zA-Z_][a-zA-Z0-9_-]{0,4}", "aZ_-9.", ["_", "a-9Z_"]),
]


def _balanced(s: str) -> bool:
    """Hand-written recognizer for the recursive list grammar above."""
    pos = 0

    def item() -> bool:
        nonlocal pos
        if pos < len(s) and s[pos].isdigit():
            pos += 1
            return True
        if pos < len(s) and s[pos] == "[":
            pos += 1
            if pos < len(s) and s[pos] == "]":
                pos += 1
                return True
            if not root():
                return False
            if pos < len(s) and s[pos] == "]":
                pos += 1
                return True
        return False

    def root() -> bool:
        nonlocal pos
        if not item():
            return False
        while pos < len(s) and s[pos] == ",":
            pos += 1
            if not item():
                return False
        return True

    return root() and pos == len(s)


@pytest.mark.parametrize("gbnf,regex,alphabet,members", LANGUAGES)
def test_language_matches_reference(gbnf, regex, alphabet, members):
    parser = judge_ir(grammar_from_gbnf(gbnf + "\n"))
    reference = (lambda s: re.fullmatch(regex, s) is not None) if regex else _balanced
    assert all(reference(m) for m in members)
    samples = members + random_strings(alphabet, 200, 8, seed=len(gbnf))
    for s in samples:
        assert accepts(parser, s) == reference(s), repr(s)
