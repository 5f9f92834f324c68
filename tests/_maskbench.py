"""The JSONSchemaBench/MaskBench splits beside the repository for the tests that replay real
schemas (skipped by the caller when the shared data is absent)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

MASKBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "maskbench"


def first_schemas(per_split: int) -> Iterator[tuple[str, Any]]:
    """``("Split[i]", schema)`` for the first ``per_split`` schemas of every split, splits by name."""
    for path in sorted(MASKBENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= per_split:
                    break
                yield f"{path.name.split('.')[0]}[{i}]", json.loads(line)["schema"]
