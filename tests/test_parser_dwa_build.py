"""The native Parser-DWA determinization (``glrmask_ext.pdwa_build``) builds exactly the automaton
of the Python construction it replaced (``tests/_parser_dwa_reference.py``): the same flat arrays —
same state numbering, same edges, same weights in the same order — on every shipped grammar and
every hard test grammar; the same arrays in every process whatever its hash seed; and the budgets
end the build with an error that names the limit, while the time and state limits only pause it.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _grammars import CASE_BY_NAME
from _parser_dwa_reference import reference_arrays
from conftest import tiny_vocab
from glrmask.compiler.parser_dwa import ParserDWA
from glrmask.compiler.stack_effects import StackEffects
from glrmask.compiler.terminal_dwa import TerminalDWA, terminal_labels
from glrmask.compiler.token_classes import TokenClasses
from glrmask.errors import GrammarTooComplex

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.stem for p in (ROOT / "grammars").glob("*.lark"))
SLOW_REFERENCE = {"sql"}  # the Python construction takes seconds here
HARD = sorted(CASE_BY_NAME)


def shipped_pieces(name: str) -> list[str]:
    """A small vocabulary for a shipped grammar: its quoted literals, every printable ASCII
    character and a few pieces that span terminal boundaries."""
    text = (ROOT / "grammars" / f"{name}.lark").read_text(encoding="utf-8")
    literals = sorted({m for m in re.findall(r'"((?:[^"\\\n]|\\.)+)"', text) if "\\" not in m})
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    spans = ["a1", " x", "1,", "1.5", "ab ", ", ", ") ", "\"a", "a\"", "x=1", "\n  "]
    return sorted(set(literals) | set(chars) | set(spans))


@lru_cache(maxsize=None)
def inputs(kind: str, name: str):
    """(Terminal DWA, stack effects, class sets, number of classes) of a grammar with a tiny vocabulary."""
    if kind == "shipped":
        source, pieces = str(ROOT / "grammars" / f"{name}.lark"), shipped_pieces(name)
    else:
        source, pieces = CASE_BY_NAME[name].grammar, list(CASE_BY_NAME[name].pieces)
    mask = glrmask.compile(source, tiny_vocab(pieces), format="lark", mode="static")
    ignored, label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
    tdwa = TerminalDWA.build(mask.lexer, mask.trie, ignored=ignored, label_of=label_of)
    classes, class_sets = TokenClasses.from_weights(tdwa.weight_ptr, tdwa.weight_bounds, tdwa.n_tokens)
    return tdwa, StackEffects.build(mask.table, ignore=mask.grammar.ignore), class_sets, classes.n_classes


def assert_same_arrays(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert np.array_equal(got[k], want[k]), k


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_REFERENCE else n
                                  for n in SHIPPED])
def test_native_arrays_equal_the_python_construction_on_every_shipped_grammar(name):
    tdwa, effects, class_sets, n_classes = inputs("shipped", name)
    pdwa = ParserDWA(tdwa, effects, class_sets, n_classes)
    assert_same_arrays(pdwa.arrays(), reference_arrays(tdwa, effects, class_sets, n_classes))
    assert pdwa.n_states > 0


@pytest.mark.parametrize("name", HARD)
def test_native_arrays_equal_the_python_construction_on_every_hard_test_grammar(name):
    tdwa, effects, class_sets, n_classes = inputs("hard", name)
    pdwa = ParserDWA(tdwa, effects, class_sets, n_classes)
    assert_same_arrays(pdwa.arrays(), reference_arrays(tdwa, effects, class_sets, n_classes))


def test_a_paused_build_continues_to_the_same_automaton():
    tdwa, effects, class_sets, n_classes = inputs("shipped", "sql")
    whole = ParserDWA(tdwa, effects, class_sets, n_classes).arrays()
    paused = ParserDWA(tdwa, effects, class_sets, n_classes)
    assert paused.expand(max_seconds=0) is False
    steps = 0
    while not paused.expand(max_states=paused.n_states + 7):
        steps += 1
    assert steps > 3
    assert_same_arrays(paused.arrays(), whole)


def test_a_build_stopped_by_its_deadline_anywhere_continues_to_the_same_automaton():
    """Deadline stops fall inside closures, also while the roots' start states are made: a
    stopped root's start entries are dropped and redone, never repeated."""
    tdwa, effects, class_sets, n_classes = inputs("shipped", "sql")
    whole = ParserDWA(tdwa, effects, class_sets, n_classes).arrays()
    stopped = ParserDWA(tdwa, effects, class_sets, n_classes)
    calls = 1
    while not stopped.expand(max_seconds=0):
        calls += 1
    assert calls > 1
    assert_same_arrays(stopped.arrays(), whole)


@pytest.mark.parametrize("limit", ["max_states", "max_closures"])
def test_an_exceeded_budget_raises_grammar_too_complex_naming_the_limit(limit):
    tdwa, effects, class_sets, n_classes = inputs("shipped", "json")
    pdwa = ParserDWA(tdwa, effects, class_sets, n_classes, **{limit: 3})
    with pytest.raises(GrammarTooComplex, match=f"parser DWA: more than 3 .*limit {limit}"):
        pdwa.expand()
    with pytest.raises(GrammarTooComplex, match=limit):  # and keeps saying so
        pdwa.arrays()


def test_a_budget_the_build_fits_in_changes_nothing():
    tdwa, effects, class_sets, n_classes = inputs("shipped", "json")
    free = ParserDWA(tdwa, effects, class_sets, n_classes)
    arrays = free.arrays()
    tight = ParserDWA(tdwa, effects, class_sets, n_classes, max_states=free.n_states, max_closures=free.n_closures)
    assert_same_arrays(tight.arrays(), arrays)


def test_exporting_twice_gives_the_same_arrays_and_keeps_the_sizes():
    tdwa, effects, class_sets, n_classes = inputs("shipped", "tinylang")
    pdwa = ParserDWA(tdwa, effects, class_sets, n_classes)
    first = pdwa.arrays()
    sizes = (pdwa.n_states, pdwa.n_closures)
    assert sizes[0] == len(first["default_target"]) and sizes[1] > 0
    assert pdwa.expand() is True
    assert_same_arrays(pdwa.arrays(), first)
    assert (pdwa.n_states, pdwa.n_closures) == sizes


def test_an_unknown_budget_is_refused():
    tdwa, effects, class_sets, n_classes = inputs("shipped", "json")
    with pytest.raises(TypeError, match="max_nodes"):
        ParserDWA(tdwa, effects, class_sets, n_classes, max_nodes=1)


_DIGEST = r"""
import hashlib, pickle, sys
from glrmask.compiler.parser_dwa import ParserDWA
with open(sys.argv[1], "rb") as f:
    inputs = pickle.load(f)
for args in inputs:
    a = ParserDWA(*args).arrays()
    h = hashlib.sha256()
    for k in sorted(a):
        h.update(k.encode() + a[k].tobytes())
    print(h.hexdigest())
"""


def digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        h.update(k.encode() + arrays[k].tobytes())
    return h.hexdigest()


@pytest.mark.slow
def test_the_arrays_do_not_depend_on_the_hash_seed(tmp_path):
    """The same inputs, built in two processes with different ``PYTHONHASHSEED``: the same bytes."""
    grammars = [inputs("shipped", "sql"), inputs("shipped", "tinylang"), inputs("hard", "ambiguous_expr")]
    path = tmp_path / "inputs.pickle"
    path.write_bytes(pickle.dumps(grammars))
    runs = []
    for seed in ("1", "4242"):
        res = subprocess.run([sys.executable, "-c", _DIGEST, str(path)], env={**os.environ, "PYTHONHASHSEED": seed},
                             capture_output=True, text=True, timeout=600, check=False)
        assert res.returncode == 0, res.stderr[-2000:]
        runs.append(res.stdout.split())
    assert runs[0] == runs[1] == [digest(ParserDWA(*g).arrays()) for g in grammars]
