"""pytest plugin that records every schema the JSON Schema tests lower, with its options, into
``tests/data/jsonschema/lowering_corpus.jsonl`` (the corpus of tests/test_json_schema_ir.py).

Regenerate after adding JSON Schema tests (the file is rewritten; entries are deduplicated, the
MaskBench sample that has its own data file and schemas over 20,000 characters of JSON are left out):

    rm tests/data/jsonschema/lowering_corpus.jsonl
    PYTHONPATH=tests python -m pytest -q -p json_schema_corpus_recorder tests/test_json_schema_*.py
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import glrmask.json_schema as front_end

DATA = Path(__file__).resolve().parent / "data" / "jsonschema"
CORPUS = DATA / "lowering_corpus.jsonl"
OPTION_NAMES = ("whitespace", "max_whitespace", "max_indent", "indent", "property_order", "lenient",
                "format_mode")
MAX_CHARS = 20_000

_lower = front_end.lower
_seen: set[str] = set()
_sample = {json.dumps(json.loads(line)["schema"], sort_keys=True)
           for line in (DATA / "maskbench_sample.jsonl").read_text(encoding="utf-8").splitlines()}


def _record(schema: Any, opts: Any) -> None:
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
        line = json.dumps({"schema": schema, "options": {k: getattr(opts, k) for k in OPTION_NAMES}},
                          ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # not JSON (a hostile test's Python object)
        return
    if key in _sample or len(line) > MAX_CHARS or line in _seen:
        return
    _seen.add(line)
    with CORPUS.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _recording_lower(schema: Any, opts: Any):
    _record(schema, opts)
    return _lower(schema, opts)


front_end.lower = _recording_lower
