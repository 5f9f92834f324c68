"""Lexer construction reuses compiled instructions (a repeat's body compiled once and copied, a
terminal compiled once per process and copied into later lexers): the programs must be exactly
what compiling everything from the parse tree builds, the errors the same, and the lexers must
still agree with ``re.match`` — on hand-picked patterns and on the JSONSchemaBench sample."""
from __future__ import annotations

import json
import random
import re
import sys
import warnings
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lexer_patterns import ReTooSlow, full, nested, plain, re_end, sample_texts  # noqa: E402

from glrmask.budget import activate_budget  # noqa: E402
from glrmask.errors import GlrmaskError, GrammarTooComplex, RegexError  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lexer import Lexer, Settler  # noqa: E402
from glrmask.lexer.program import Program, _quick_parse, clear_terminal_cache  # noqa: E402

SAMPLE = Path(__file__).resolve().parent / "data" / "jsonschema" / "maskbench_sample.jsonl"

TRICKY = [
    r"[a-z]{0,40}x",
    r"(?:ab|c){2,7}?d",
    r"(?:a(?:b|c){1,3}){0,4}e",
    r"(?:x{2}){3,}y",
    r"(?:a|b)*c{2,}",
    r"(?:(?:)|a){0,3}b",
    r"(?:a?){0,5}b",
    r"(?:a(?=b)){1,4}b",
    r"(?:(?!ab)[ab]){0,6}c",
    r"x(?:y(?<=xy)){1,3}",
    r"a(?:\b[a ]){1,3}",
    r"(?i:k[a-f]{2,4})(?a:\w{1,3})",
    r"(?s:.){1,5}",
    r'"[^"\\]{0,8}(?:\\["\\]){0,2}"',
    r"\-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+\-]?[0-9]+)?(?![0-9.eE+\-])",
    r"(?:[ \t]{1,4}|[ \t]{0,4}(?:\r?\n|\r)[ \t]{0,64})(?![ \t\n\r])",
    r'"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})){0,20}"',
    r"(?:é|ǅ|😀){2,3}\w",
]
"""Counted repeats of every shape (lazy, nested, unbounded after a minimum, empty or nullable
bodies), bodies holding lookaheads, lookbehinds and \\b (those are compiled per copy), flags."""


KEYS = "|".join([f"(?:{k[0]}|\\\\u00{ord(k[0]):02x}){k[1:]}" for k in
                ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "iota", "kappa",
                 "lambda", "omicron", "sigma", "upsilon", "omega", "aleph", "bet", "gimel")] * 3)
GUARD = f'(?!(?:{KEYS})")'
"""A large top-level lookahead like the JSON Schema lowering's "not a known key" guard (long
enough to be parsed and compiled once per process, then copied)."""

GUARDED = [
    '"' + GUARD + r'[a-z\\]{1,12}"',
    '"' + GUARD + "(?=[a-z])" + GUARD.replace("(?!", "(?=") + r'\w+"',
    r"(x)?" + GUARD + r"[a-z]+(?<=[a-z])\b",
    '"' + GUARD + r"(a|b)[c-f]{0,3}",
    GUARD + "a" + GUARD + "b",
    '"' + GUARD + "*a",
    "a|" + GUARD + "b",
    r"(a)" + GUARD + r"\1",
    "(?i:a)" + GUARD + "b",
    '"' + GUARD + "(?P<n>a)(?P<n>b)",
    '"' + GUARD + "(?=a)",
    '"' + GUARD + "a)",
    '"' + GUARD + "[a",
    '"(' + GUARD + "a",
    '"' + GUARD + "$",
]
"""Patterns split around their guards (also with lookbehinds and \\b elsewhere: widths
tracked) and patterns that must not be (a quantifier on the guard, a top-level ``|``,
backreferences, flags, named groups) or that ``re`` refuses (the error must be the whole
pattern's)."""


def program_of(prog: Program, terms) -> tuple:
    """Everything compilation produced, in a comparable form."""
    return (prog.kind, prog.a, prog.b, prog.c, prog.d, prog.targets, [id(bc) for bc in prog.classes],
            prog.look_starts, prog.n_reps,
            [(t.name, t.pattern, t.start, t.tracker_starts, t.word_slots, t.classes) for t in terms])


def compile_all(terminals, copy_blocks: bool, max_nodes: int = 200_000):
    """The whole program of ``terminals``, or the error (type and message) compiling raised."""
    prog = Program(max_nodes, copy_blocks=copy_blocks)
    try:
        terms = [prog.add_terminal(name, pattern) for name, pattern in terminals]
    except GlrmaskError as e:
        return type(e).__name__, str(e)
    return program_of(prog, terms)


def sample_terminals() -> list[list[tuple[str, str]]]:
    out = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        try:
            g, _ = lower_json_schema_ir(json.loads(line)["schema"])
        except GlrmaskError:
            continue
        out.append([(t.name, t.pattern) for t in normalize(g).terminals.values()])
    return out


@pytest.fixture(scope="module")
def sample() -> list[list[tuple[str, str]]]:
    return sample_terminals()


# ---------------------------------------------------------------- identical programs
@pytest.mark.parametrize("pattern", TRICKY)
def test_copied_repeat_bodies_equal_compiled_ones(pattern):
    assert compile_all([("T", pattern)], True) == compile_all([("T", pattern)], False)


@pytest.mark.parametrize("pattern", TRICKY)
def test_a_cached_terminal_equals_a_fresh_compile_at_another_offset(pattern):
    # a terminal before it shifts pcs, lookahead ids, repeat ids and class ids
    before = [("FIRST", r"(?=q)[q-t]{1,3}(?!z)"), ("SECOND", r"\d+(?<=5)")]
    clear_terminal_cache()
    Lexer([("T", pattern)])  # now cached at offset 0
    cached = compile_all(before + [("T2", pattern)], True)
    assert cached == compile_all(before + [("T2", pattern)], False)


@pytest.mark.parametrize("pattern", GUARDED)
def test_patterns_with_a_large_lookahead_compile_as_parsed_whole(pattern):
    clear_terminal_cache()
    reference = compile_all([("T", pattern)], False)
    assert compile_all([("T", pattern)], True) == reference  # the guard parsed and compiled
    clear_terminal_cache()
    compile_all([("G", '"' + GUARD + "q")], True)  # the guard alone, at another offset
    assert compile_all([("T", pattern)], True) == reference  # the guard's body copied


def test_the_native_segment_scanner_cuts_where_the_python_one_does(sample):
    import glrmask.lexer.program as program

    if program._native is None:
        pytest.skip("glrmask_ext.lexer_compile is not built")
    patterns = GUARDED + [p for terminals in sample for _, p in terminals] + [
        "(?!" + "a" * 600 + ")", "(?!" + "a" * 600 + ")*", "[(?!" + "a" * 600 + ")", "a\\",
        "(?!" + "[)]" * 300 + ")x", "(?" + "!" * 600, "(?<" + "a" * 600, "(?=" + "\\" * 600 + ")",
    ]
    for pattern in patterns:
        assert program._native.segment_cuts(pattern, program._MIN_SEGMENT) == \
            program._segment_cuts(pattern), pattern[:80]


def test_guarded_terminals_match_like_re():
    clear_terminal_cache()
    pattern = GUARDED[0]
    lx = Lexer([("A", '"' + GUARD + "z"), ("T", pattern)])
    for text in ('"alpha"', '"alphab"', '"\\u0061lpha"', '"omega\\"', '"zeta', '"q"', '"iotas"'):
        s = Settler(lx, 1)
        s.feed(text.encode())
        assert s.finish().end == re_end(pattern, text), text


@pytest.mark.parametrize("pattern", TRICKY + GUARDED[:5])
def test_without_the_extension_the_python_paths_build_the_same_program(pattern, monkeypatch):
    import glrmask.lexer.program as program

    reference = compile_all([("T", pattern)], False)
    monkeypatch.setattr(program, "_native", None)
    clear_terminal_cache()
    assert compile_all([("T", pattern)], True) == reference
    assert compile_all([("T", pattern)], True) == reference


def test_the_same_pattern_twice_in_one_lexer_compiles_twice_alike():
    terms = [("A", TRICKY[2]), ("B", TRICKY[9]), ("C", TRICKY[2]), ("D", TRICKY[9])]
    clear_terminal_cache()
    assert compile_all(terms, True) == compile_all(terms, False)


def test_sample_programs_equal_the_reference_compile(sample):
    for terminals in sample:
        reference = compile_all(terminals, False)
        clear_terminal_cache()
        assert compile_all(terminals, True) == reference  # block copies, terminals compiled
        assert compile_all(terminals, True) == reference  # terminals from the cache


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "grammars").glob("*.lark")),
                         ids=lambda p: p.name)
def test_shipped_grammar_programs_equal_the_reference_compile(path):
    from glrmask.grammar.loader import load_grammar

    terminals = [(t.name, t.pattern) for t in normalize(load_grammar(str(path))).terminals.values()]
    reference = compile_all(terminals, False)
    clear_terminal_cache()
    assert compile_all(terminals, True) == reference
    assert compile_all(terminals, True) == reference


def test_the_lexer_builds_the_reference_program(sample):
    terminals = max(sample, key=len)
    lx = Lexer(terminals)
    assert program_of(lx.prog, lx.terms) == compile_all(terminals, False)


# ---------------------------------------------------------------- the quick parser builds re's tree
def tree(x):
    """A parse tree as nested plain values (``SubPattern`` has no equality of its own)."""
    if isinstance(x, sre_parse.SubPattern):
        return ("SubPattern", tree(x.data))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *map(tree, x))
    return (type(x).__name__, x)


def assert_quick_parse_is_res(pattern: str, groups: dict | None = None) -> None:
    """``groups``: the parse memo shared with the patterns parsed before (a program's)."""
    quick = _quick_parse(pattern, groups)
    try:
        with warnings.catch_warnings():  # re warns of possible set operations: not the point
            warnings.simplefilter("ignore", FutureWarning)
            want = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        assert quick is None, pattern  # re refuses it: its own parser words the error
        return
    if quick is not None:
        assert tree(quick) == tree(want) and quick.state.flags == want.state.flags, pattern


@pytest.mark.parametrize("pattern", [
    "{", "a{", "a{}", "a{,}", "a{,3}", "a{3", "a{3,", "a{2,1}", "a{99999999999}", "a{3}?", "a{3}+",
    "[]a]", "[^]a]", "[a-]", "[-a]", r"[\]]", r"[a\-z]", "[]", "[a", "[[a]", "[a--b]", "[a&&b]",
    "[z-a]", "[aa]", "[a]", "[^a]", "[^ab]", r"[\w]", "(?:a|a)", "(?:ab|ac)", "(?:ab|ab)",
    "(?:a|b|[cd])", "(?:a|[^b])", "(?:)", "(?:a|)", "a||b", "(?:x)*", "(?:xy){2}", "(?:x)??",
    "(?=)", "(?!)", "(?=a|b)", "(?!a)b", "a)", "(a", "(?:a", "\\", r"\.", r"\d", r"\u0041",
    ".*", "^a", "a$", "*a", "a**", "(?:a*)*", "é|ǅ|😀", r'"(?:i|\\u0069)(?:d|\\u0064)"',
] + TRICKY + GUARDED)
def test_the_quick_parser_builds_res_tree_or_leaves_the_pattern_to_re(pattern):
    assert_quick_parse_is_res(pattern)


def test_the_quick_parser_agrees_with_this_pythons_re():
    # else every pattern is left to re's parser: still right, only slower
    from glrmask.lexer.program import _QUICK_PARSER_AGREES

    assert _QUICK_PARSER_AGREES


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(plain, full, nested))
def test_the_quick_parser_builds_res_tree_on_random_patterns(pattern):
    assert_quick_parse_is_res(pattern)


def test_the_quick_parser_builds_res_tree_on_the_sample(sample):
    for terminals in sample:
        for _name, pattern in terminals:
            assert_quick_parse_is_res(pattern)


SHARED_GROUPS = [
    "(?:(?:a|b)c|(?:a|b)d)", "(?:(?:a|b)c|(?:a|b)d)", "(?:a|b)(?:a|b)|(?:a|b)x",
    "(?:x{2}|y)(?:x{2}|y)|(?:x{2}|y)z", "(?:[ab]|c)+|(?:[ab]|c)q", "(?:a)(?:a)|(?:a)b",
    "(?:(?=a)a|b)|(?:(?=a)a|b)c", r'"(?:k|\\u006[Bb])(?:k|\\u006[Bb])"|"(?:k|\\u006[Bb])x"',
    "(?:)|(?:)a", "(?:a|)(?:a|)|(?:a|)", "(?:(?:a|b)|c)*(?:(?:a|b)|c)",
]
"""Patterns that repeat groups, also as the first item of several alternatives: a group's
items, shared between its occurrences, must not become a common prefix that ``re`` (whose
occurrences are distinct objects) would not factor out."""


def test_the_quick_parser_builds_res_tree_when_groups_are_shared():
    groups: dict = {}
    for pattern in SHARED_GROUPS + TRICKY + GUARDED + SHARED_GROUPS:
        assert_quick_parse_is_res(pattern, groups)
    assert groups  # the memo was used


_RANDOM_GROUPS: dict = {}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(plain, full, nested))
def test_the_quick_parser_builds_res_tree_on_random_patterns_sharing_groups(pattern):
    assert_quick_parse_is_res(pattern, _RANDOM_GROUPS)
    assert_quick_parse_is_res(pattern + "|" + pattern, _RANDOM_GROUPS)


def test_the_quick_parser_builds_res_tree_on_the_sample_sharing_groups(sample):
    for terminals in sample:
        groups: dict = {}
        for _name, pattern in terminals:
            assert_quick_parse_is_res(pattern, groups)


def test_a_lexer_keeps_no_compile_memos():
    lx = Lexer([("A", "(?:a|b)c"), ("B", "(?:a|b)d")])
    assert lx.prog._group_items == {} and lx.prog._node_cids == {}


def test_a_terminal_added_after_the_memos_are_dropped_compiles_to_the_reference():
    terminals = [("A", "(?:a|b)c"), ("B", TRICKY[16]), ("C", "(?:a|b)d" + GUARD)]
    clear_terminal_cache()
    prog = Program()
    terms = [prog.add_terminal(*terminals[0])]
    prog.drop_compile_memos()
    terms += [prog.add_terminal(*t) for t in terminals[1:]]
    assert program_of(prog, terms) == compile_all(terminals, False)


# ---------------------------------------------------------------- same errors
@pytest.mark.parametrize("pattern", [
    r"(", r"a{2,1}", r"(?<=a|bc)x", r"(?<!a+)x", r"a*", r"(?=a)", r"a|", r"(?:a|(?=b))",
    r"^a*", r"(a)\1", r"a*$", r"(?:x(?<=ab)){1,3}", r"(?:ab\b){0,2}c", r"(?:\bx){1,2}",
    "(" * 300 + "a" + ")" * 300,
])
def test_refused_patterns_raise_the_reference_error(pattern):
    clear_terminal_cache()
    fast = compile_all([("OK", "x"), ("BAD", pattern)], True)
    assert fast == compile_all([("OK", "x"), ("BAD", pattern)], False)
    if isinstance(fast[0], str):
        assert fast[0] == "RegexError"


def test_a_variable_width_lookbehind_is_refused_as_re_compile_refuses_it():
    with pytest.raises(RegexError, match="invalid regex.*look-behind requires fixed-width"):
        Lexer([("T", r"ab(?<=a|bc)x")])


@pytest.mark.parametrize("pattern", [r"(?:ab|c){0,5000}d", r"a(?:[bc]d){3000}", r"[a-z]{1,70000}"])
def test_the_instruction_budget_ends_copies_with_the_reference_error(pattern):
    fast = compile_all([("BIG", pattern)], True, max_nodes=4_000)
    assert fast[0] == "GrammarTooComplex" and "BIG" in fast[1] and "4000" in fast[1]
    assert fast == compile_all([("BIG", pattern)], False, max_nodes=4_000)


def test_copies_check_the_deadline():
    with activate_budget({"max_seconds": 0.01}):
        with pytest.raises(GrammarTooComplex, match="lexer NFA.*limit max_seconds"):
            Lexer([("LONG", r"(?:[a-z]|\d){1,400000}")], max_nfa_nodes=10**7)


def test_a_terminal_refused_under_a_small_budget_compiles_under_a_larger_one():
    clear_terminal_cache()
    with pytest.raises(GrammarTooComplex):
        Lexer([("BIG", r"[a-z]{1,70000}")], max_nfa_nodes=4_000)
    assert Lexer([("BIG", r"[a-z]{1,70000}")], max_nfa_nodes=200_000).terms[0].start > 0


# ---------------------------------------------------------------- behaviour against re.match
JSON_ALPHABET = ['"', "\\", "u", "0", "7", "9", "a", "F", "d", "D", "8", "-", ".", "e", "E", "+",
                 " ", "\n", "\t", "\r", ",", ":", "{", "}", "[", "]", "/", "n", "é", "😀"]
"""Characters JSON Schema terminals are made of (escapes, digits, hex, structure, non-ASCII)."""


def agrees_with_re(lx: Lexer, t: int, pattern: str, rnd: random.Random, n: int) -> None:
    for text in sample_texts(pattern, rnd, n, JSON_ALPHABET):
        try:
            want = re_end(pattern, text)
        except ReTooSlow:
            continue
        s = Settler(lx, t)
        s.feed(text.encode())
        assert s.finish().end == want, (pattern, text)


@pytest.mark.parametrize("pattern", TRICKY)
def test_copied_terminals_match_like_re(pattern):
    Lexer([("T", pattern)])
    lx = Lexer([("PAD", r"(?=q)[q-t]{1,3}"), ("T", pattern)])  # T copied from the cache
    agrees_with_re(lx, 1, pattern, random.Random(pattern), 60)


def _check_sample_behaviour(sample, every: int) -> None:
    rnd = random.Random(7)
    for k, terminals in enumerate(sample[::every]):
        try:
            lx = Lexer(terminals)
        except GrammarTooComplex:
            continue
        for t, (_name, pattern) in enumerate(terminals):
            agrees_with_re(lx, t, pattern, rnd, 4)


def test_sample_lexers_match_like_re(sample):
    _check_sample_behaviour(sample, every=6)


@pytest.mark.slow
def test_every_sample_lexer_matches_like_re(sample):
    _check_sample_behaviour(sample, every=1)
