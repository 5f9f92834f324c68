"""Digests of what ``lower_json_schema_ir`` makes of the test schemas, for
tests/test_json_schema_ir_is_pinned.py: the IR (``Grammar.to_json()``: rules, terminal names and
patterns, in order) with the warnings, or the refusal (error type and message, pointers included).

The lowering is tuned for speed again and again; each change must leave every one of these
outcomes as it was. After a change that is *meant* to alter the IR, record the digests again:

    PYTHONPATH=tests python tests/json_schema_ir_digests.py
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from glrmask.errors import GlrmaskError
from glrmask.json_schema import lower_json_schema_ir

DATA = Path(__file__).resolve().parent / "data" / "jsonschema"
DIGESTS = DATA / "lowered_ir_digests.json"
MASKBENCH_PER_SPLIT = 12


def case_key(schema: Any, options: dict) -> str:
    """A schema and its options, as one key (the same case wherever it comes from)."""
    text = json.dumps({"schema": schema, "options": options}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def outcome_digest(schema: Any, options: dict) -> str:
    """sha256 of the lowered IR and warnings, or of the error's type and message."""
    try:
        grammar, warnings = lower_json_schema_ir(schema, **options)
        outcome: dict = {"ir": grammar.to_json(), "warnings": warnings}
    except (GlrmaskError, ValueError) as e:
        outcome = {"error": type(e).__name__, "message": str(e)}
    return hashlib.sha256(json.dumps(outcome, ensure_ascii=True).encode()).hexdigest()


def in_repo_cases() -> Iterator[tuple[str, Any, dict]]:
    """``(name, schema, options)``: the schemas of the JSON Schema tests with their options, and the
    JSONSchemaBench sample with the defaults and with a few other option sets."""
    for i, line in enumerate((DATA / "lowering_corpus.jsonl").read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        yield f"corpus[{i}]", rec["schema"], rec["options"]
    others = ({}, {"lenient": True}, {"whitespace": "compact"}, {"indent": 2},
              {"property_order": "any", "lenient": True}, {"format_mode": "annotation"})
    for line in (DATA / "maskbench_sample.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for options in others:
            yield f"{rec['file']}{options or ''}", rec["schema"], options


def maskbench_cases() -> Iterator[tuple[str, Any, dict]]:
    """The first schemas of every MaskBench split (when the shared data is present), defaults."""
    from _maskbench import MASKBENCH, first_schemas

    if MASKBENCH.is_dir():
        for name, schema in first_schemas(MASKBENCH_PER_SPLIT):
            yield name, schema, {}


if __name__ == "__main__":
    digests = {case_key(s, o): outcome_digest(s, o) for cases in (in_repo_cases(), maskbench_cases())
               for _name, s, o in cases}
    DIGESTS.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n", encoding="utf-8")
