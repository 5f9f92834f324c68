"""The byte groups of a set of character classes (``Program.byte_groups``) are what their
definition says — bytes are together iff every class's UTF-8 automaton steps them alike, read off
the classes' byte signatures column by column, groups ordered by their smallest byte — however
they are computed (an ASCII sweep, in C or in Python, and a cached non-ASCII half), on random
class sets, on every shipped grammar and on real JSON Schema lexers."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _maskbench import MASKBENCH, first_schemas  # noqa: E402

from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.lexer import program as program_module  # noqa: E402
from glrmask.lexer.program import Program  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_FILES = sorted((ROOT / "grammars").glob("*.lark"))


def groups_by_definition(prog: Program, class_ids) -> tuple[tuple[int, ...], ...]:
    """Group the 256 bytes by their column of class signatures, in byte order; when no class
    holds a non-ASCII code point, every byte above 0x7F dies everywhere and is one group."""
    classes = [prog.classes[c] for c in class_ids]
    if not classes:
        return (tuple(range(256)),)
    ascii_only = all(not bc.cps or bc.cps[-1][1] < 0x80 for bc in classes)
    width = 0x80 if ascii_only else 0x100
    rows = [bc.byte_signature().tolist()[:width] for bc in classes]
    groups: dict[tuple[int, ...], list[int]] = {}
    for b, column in enumerate(zip(*rows)):
        groups.setdefault(column, []).append(b)
    out = tuple(tuple(g) for g in groups.values())
    return out + ((tuple(range(0x80, 0x100)),) if ascii_only else ())


def assert_partitions_by_definition(prog: Program, class_ids) -> None:
    want = groups_by_definition(prog, class_ids)
    assert prog.byte_groups(class_ids) == want
    group_of, reps = prog.byte_partition(class_ids)
    assert reps == tuple(g[0] for g in want)
    assert group_of == tuple(next(k for k, g in enumerate(want) if b in g) for b in range(256))


CLASS_PATTERNS = [
    "a", "z", '"', "\\\\", "\x00", "\x7f", "é", "中", "😀", "\u212a", "[a-f]", "[^a]", "[^\"\\\\]",
    "[\x00-\x1f]", "[ -~]", "\\d", "\\w", "\\s", "\\W", "(?a:\\w)", ".", "(?s:.)", "[é-ǅ]",
    "[中-😀]", "(?i:k)", "(?i:s)", "[^\\x00-\\x7f]", "[\x80-\xff]", "[\u0800-\uffff]", "[^\"]",
]
"""Single characters and classes: ASCII-only ones (singletons, runs touching 0x00 and 0x7F) and
ones reaching into 2-, 3- and 4-byte UTF-8 characters, whose continuation bytes they tell apart."""


class_sets = st.tuples(
    st.lists(st.sampled_from(CLASS_PATTERNS), min_size=1, max_size=12, unique=True), st.data())


def check_random_class_set(patterns, data) -> None:
    program_module._BYTE_GROUPS.clear()  # computed afresh, not recalled
    prog = Program()
    terms = [prog.add_terminal(f"T{i}", p) for i, p in enumerate(patterns)]
    ids = sorted({c for t in terms for c in t.classes})
    subset = data.draw(st.lists(st.sampled_from(ids), unique=True))
    assert_partitions_by_definition(prog, ids)
    assert_partitions_by_definition(prog, subset)


@settings(max_examples=300, deadline=None)
@given(class_sets)
def test_random_class_sets_group_bytes_by_definition(case):
    check_random_class_set(*case)


@pytest.mark.skipif(program_module._native_groups is None, reason="glrmask_ext.byte_groups not built")
@settings(max_examples=150, deadline=None)
@given(class_sets)
def test_without_the_extension_the_python_sweep_groups_bytes_by_definition(case):
    native, native_compile = program_module._native_groups, program_module._native
    program_module._native_groups = program_module._native = None  # (native partitions too)
    try:
        check_random_class_set(*case)
    finally:
        program_module._native_groups, program_module._native = native, native_compile
        program_module._BYTE_GROUPS.clear()


def test_no_classes_is_one_group():
    prog = Program()
    assert prog.byte_groups(()) == (tuple(range(256)),)


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_shipped_grammars_group_bytes_by_definition(path):
    g = normalize(load_grammar(str(path)))
    lexer = Lexer([(t.name, t.pattern) for t in g.terminals.values()])
    assert_partitions_by_definition(lexer.prog, range(len(lexer.prog.classes)))
    for term in lexer.terms:
        assert_partitions_by_definition(lexer.prog, term.classes)


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="JSONSchemaBench data not present")
@pytest.mark.parametrize("name,schema", list(first_schemas(1)) if MASKBENCH.is_dir() else [],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_schema_lexers_group_bytes_by_definition(name, schema):
    g, _ = lower_json_schema_ir(schema)
    terminals = [(t.name, t.pattern) for t in normalize(g).terminals.values()]
    lexer = Lexer(terminals)  # every first schema's lexer builds (a refusal fails)
    assert_partitions_by_definition(lexer.prog, range(len(lexer.prog.classes)))
    for term in lexer.terms:
        assert_partitions_by_definition(lexer.prog, term.classes)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 7), min_size=256, max_size=256), max_size=6))
def test_a_lexer_states_byte_classes_are_the_columns_of_its_terminals_groups(rows):
    from glrmask.lexer.lexer import _joint_classes, _joint_classes_py

    assert _joint_classes(rows) == _joint_classes_py(rows)


@pytest.mark.parametrize("name, schema", list(first_schemas(1)), ids=lambda x: x if isinstance(x, str) else "")
def test_schema_lexer_states_byte_classes_step_alike(name, schema):
    """Every byte of one of a state's classes steps that state alike (states a few bytes deep)."""
    grammar = normalize(lower_json_schema_ir(schema)[0])
    lexer = Lexer([(t.name, t.pattern) for t in grammar.terminals.values()])
    frontier, seen = [lexer.initial], {lexer.initial}
    for _depth in range(2):
        nxt = []
        for q in frontier:
            cls, reps = lexer.byte_classes(q)
            assert [cls[r] for r in reps] == list(range(len(reps))) and all(cls[b] < len(reps) for b in range(256))
            for b in range(256):
                assert lexer.step(q, b) == lexer.step(q, reps[cls[b]])
            for r in reps:
                q2, _ = lexer.step(q, r)
                if q2 >= 0 and q2 not in seen and len(seen) < 40:
                    seen.add(q2)
                    nxt.append(q2)
        frontier = nxt
