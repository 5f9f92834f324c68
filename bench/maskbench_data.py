"""The JSONSchemaBench/MaskBench splits beside the repository, read the one way the benchmarks need.

Why a module: every benchmark that samples "the first N schemas of each split" (lowering, lexer
construction, LR build, dynamic time to first mask) must see the same schemas in the same order,
so their numbers line up schema by schema.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

MASKBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "maskbench"
"""``../shared/data/jsonschemabench/maskbench`` next to the repository (``*.jsonl.gz``, one JSON
object per line with a ``"schema"``)."""


def first_schemas(per_split: int, data: Path = MASKBENCH) -> Iterator[tuple[str, int, Any]]:
    """``(split, index, schema)`` for the first ``per_split`` schemas of every split, splits by name."""
    for path in sorted(Path(data).glob("*.jsonl.gz")):
        split = path.name.split(".")[0]
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= per_split:
                    break
                yield split, i, json.loads(line)["schema"]
