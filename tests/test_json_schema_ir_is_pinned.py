"""Every test schema lowers to exactly the IR recorded for it (rules, terminal names and patterns,
in order, and the warnings), or is refused with exactly the recorded message and pointers.

The lowering's speed work (memo tables, native rule stores, skipped re-checks) must not change what
it makes: tests/json_schema_ir_digests.py holds the digests and says how to record them again
after a change meant to alter the IR.
"""
from __future__ import annotations

import json

import pytest

from json_schema_ir_digests import DIGESTS, case_key, in_repo_cases, maskbench_cases, outcome_digest

RECORDED: dict[str, str] = json.loads(DIGESTS.read_text(encoding="utf-8"))
IN_REPO = list(in_repo_cases())


@pytest.mark.parametrize("case", IN_REPO, ids=[name for name, _s, _o in IN_REPO])
def test_each_test_schema_lowers_to_its_recorded_ir(case):
    _name, schema, options = case
    assert outcome_digest(schema, options) == RECORDED[case_key(schema, options)]


def test_the_first_maskbench_schemas_lower_to_their_recorded_ir():
    cases = list(maskbench_cases())
    if not cases:
        pytest.skip("no JSONSchemaBench data beside the repository")
    changed = [name for name, schema, options in cases
               if outcome_digest(schema, options) != RECORDED[case_key(schema, options)]]
    assert changed == []
