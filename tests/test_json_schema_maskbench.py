"""JSONSchemaBench sample (tests/data/jsonschema): compile rate and zero false rejects.

Valid instances are serialized with ``json.dumps(ensure_ascii=False)`` after putting keys in schema
order and must parse with lark under the generated grammar. The default run checks one instance per
schema on the smaller grammars (lark's Earley parser is slow on big ones); the slow run checks all.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_helpers import accepts, _parser  # noqa: E402

from glrmask.errors import GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.json_schema import json_schema_to_grammar  # noqa: E402
from glrmask.json_schema.reorder import reorder_to_schema  # noqa: E402

SAMPLE = Path(__file__).resolve().parent / "data" / "jsonschema" / "maskbench_sample.jsonl"
RECORDS = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
MIN_COMPILE_RATE = 0.85


def _lower(rec):
    try:
        return json_schema_to_grammar(rec["schema"])
    except (UnsupportedSchema, GrammarTooComplex):
        return None


_GRAMMARS = {}


def grammar(rec):
    if rec["file"] not in _GRAMMARS:
        _GRAMMARS[rec["file"]] = _lower(rec)
    return _GRAMMARS[rec["file"]]


def test_sample_covers_all_ten_splits():
    assert len({r["split"] for r in RECORDS}) == 10


def test_compile_rate():
    ok = sum(grammar(r) is not None for r in RECORDS)
    rate = ok / len(RECORDS)
    assert rate >= MIN_COMPILE_RATE, f"compile rate {ok}/{len(RECORDS)} = {rate:.1%}"


def test_lenient_never_reports_unsupported_keywords():
    for r in RECORDS:
        try:
            json_schema_to_grammar(r["schema"], lenient=True)
        except GrammarTooComplex:
            pass


def _check(rec, max_instances, max_doc):
    text = grammar(rec)
    if text is None:
        return 0
    n = 0
    for t in rec["tests"]:
        if not t["valid"] or n >= max_instances:
            continue
        doc = json.dumps(reorder_to_schema(t["data"], rec["schema"]), ensure_ascii=False)
        if len(doc) > max_doc:
            continue
        assert accepts(_parser(text), doc), (rec["file"], doc[:300])
        n += 1
    return n


def test_no_false_rejects_on_small_grammars():
    checked = 0
    for rec in RECORDS:
        text = grammar(rec)
        if text is not None and len(text) < 12_000:
            checked += _check(rec, 1, 1000)
    assert checked >= 40


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GLRMASK_FULL_MASKBENCH"),
                    reason="about 2 minutes of lark parsing; set GLRMASK_FULL_MASKBENCH=1")
def test_no_false_rejects_on_every_valid_instance():
    for rec in RECORDS:
        _check(rec, 10 ** 6, 10 ** 9)
