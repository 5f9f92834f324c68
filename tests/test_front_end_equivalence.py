"""The JSON Schema lowering and the normalizer produce exactly the grammars they produced before
they were made faster.

Every downstream id (LR states and actions, lexer terminals, artifact contents) depends on the
order of rules, on the fresh nonterminal names and on the terminal order, so "the same language"
is not enough: the lowered IR and the normalized grammar must be the same objects, field for field.
``bench/results/front_end_snapshot.json`` holds a digest of both (sha256 of ``Grammar.to_json()``),
or the error each stage raised, for the first 25 schemas of every JSONSchemaBench split, every
schema of the JSON Schema tests (tests/data/jsonschema/lowering_corpus.jsonl, with its options)
and every Lark grammar shipped or in the test corpus; it was recorded by
``bench/front_end_bench.py --snapshot`` from the code before the speed-up.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from _maskbench import MASKBENCH, first_schemas
from glrmask.grammar.ir import Grammar
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = json.loads((ROOT / "bench" / "results" / "front_end_snapshot.json").read_text())["cases"]
CORPUS = [json.loads(line) for line in
          (ROOT / "tests" / "data" / "jsonschema" / "lowering_corpus.jsonl").read_text(encoding="utf-8").splitlines()]
LARK = sorted((ROOT / "grammars").glob("*.lark")) + sorted((ROOT / "tests" / "data" / "grammars").glob("*/grammar.lark"))


def _digest(run: Callable[[], Grammar]) -> tuple[str, Grammar | None]:
    try:
        g = run()
    except Exception as exc:  # noqa: BLE001 - a refusal must stay the same refusal, whatever its kind
        return f"!{type(exc).__name__}: {exc}", None
    # the repository's own path (a Lark grammar's source name) is not part of what is compared
    return hashlib.sha256(g.to_json().replace(str(ROOT), "<repo>").encode()).hexdigest(), g


def _assert_as_recorded(name: str, front: Callable[[], Grammar]) -> None:
    lowered, g = _digest(front)
    got = {"lowered": lowered}
    if g is not None:
        got["normalized"] = _digest(lambda: normalize(g))[0]
    assert got == SNAPSHOT[name], name


def _maskbench(per_split: int) -> Iterator[tuple[str, Any]]:
    if not MASKBENCH.is_dir():
        pytest.skip(f"no JSONSchemaBench data at {MASKBENCH}")
    return first_schemas(per_split)


def test_the_snapshot_covers_every_tested_schema_and_grammar():
    assert all(f"corpus[{i}]" in SNAPSHOT for i in range(len(CORPUS)))
    assert all(str(p.relative_to(ROOT)) in SNAPSHOT for p in LARK)


def test_every_tested_schema_lowers_and_normalizes_as_recorded():
    for i, rec in enumerate(CORPUS):
        _assert_as_recorded(f"corpus[{i}]", lambda: lower_json_schema_ir(rec["schema"], **rec["options"])[0])


@pytest.mark.parametrize("path", LARK, ids=[str(p.relative_to(ROOT)) for p in LARK])
def test_every_lark_grammar_normalizes_as_recorded(path):
    _assert_as_recorded(str(path.relative_to(ROOT)), lambda: load_grammar(path))


def test_the_first_maskbench_schemas_lower_and_normalize_as_recorded():
    for name, schema in _maskbench(3):
        _assert_as_recorded(name, lambda: lower_json_schema_ir(schema)[0])


@pytest.mark.slow
def test_twenty_five_schemas_per_maskbench_split_lower_and_normalize_as_recorded():
    for name, schema in _maskbench(25):
        _assert_as_recorded(name, lambda: lower_json_schema_ir(schema)[0])
