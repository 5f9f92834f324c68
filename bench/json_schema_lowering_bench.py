"""JSON Schema front-end time: the lowering emitting the grammar IR directly, against the former
path that printed Lark text and parsed it again with the Lark front-end.

For the first ``--per-split`` schemas (default 5) of each of the ten JSONSchemaBench/MaskBench
splits (``../shared/data/jsonschemabench/maskbench/*.jsonl.gz``), each timed ``--repeat`` times
(the median is kept, to damp a shared machine's noise):

* ``text + lark``: lowering to Lark text, then ``grammar_from_lark`` (what ``compile_json_schema``
  did before the direct path), the text being the lowering's own rendering;
* ``direct IR``: :func:`glrmask.json_schema.lower_json_schema_ir` (what it does now);
* ``lowering only``: the lowering up to the pruned rule set, common to both (so the difference
  of the two above is the reparse, and emission's own cost is visible).

Prints p50 / p90 / max over schemas of each path and of the per-schema speed-up, and checks on
every schema that the two paths give the same IR. Schemas the lowering refuses are counted apart.

    python3 bench/json_schema_lowering_bench.py
    python3 bench/json_schema_lowering_bench.py --per-split 20 --repeat 5
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import maskbench_data  # noqa: E402
from glrmask.errors import GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.grammar.lark_frontend import grammar_from_lark  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.json_schema.lowering import Options, build, load_schema  # noqa: E402

DATA = maskbench_data.MASKBENCH


def first_schemas(per_split: int) -> list[tuple[str, int, Any]]:
    return list(maskbench_data.first_schemas(per_split, DATA))


def via_text(schema: Any):
    builder, _ = build(load_schema(schema), Options())
    return grammar_from_lark(builder.to_lark("start"), source_name="<json-schema>")


def direct(schema: Any):
    return lower_json_schema_ir(schema)[0]


def lowering_only(schema: Any):
    builder, _ = build(load_schema(schema), Options())
    builder.prune("start")
    return builder


def median_ms(fn: Callable[[Any], Any], schema: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(schema)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-split", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not DATA.is_dir():
        sys.exit(f"no JSONSchemaBench data at {DATA}")
    rows: dict[str, list[float]] = {"text + lark": [], "direct IR": [], "lowering only": []}
    speedup: list[float] = []
    refused = 0
    worst = (0.0, "")
    for split, i, schema in first_schemas(args.per_split):
        try:
            ir = direct(schema)
        except (UnsupportedSchema, GrammarTooComplex):
            refused += 1
            continue
        ref = via_text(schema)
        if (ir.rules, ir.terminals, ir.start, ir.ignore) != (ref.rules, ref.terminals, ref.start, ref.ignore):
            sys.exit(f"{split}[{i}]: the direct IR differs from the text path's")
        old = median_ms(via_text, schema, args.repeat)
        new = median_ms(direct, schema, args.repeat)
        rows["text + lark"].append(old)
        rows["direct IR"].append(new)
        rows["lowering only"].append(median_ms(lowering_only, schema, args.repeat))
        speedup.append(old / new)
        worst = max(worst, (old, f"{split}[{i}]"))
    n = len(speedup)
    print(f"{n} schemas lowered ({refused} refused), median of {args.repeat} runs each; "
          f"identical IR on every one")
    print(f"{'path':<16}{'p50 ms':>10}{'p90 ms':>10}{'max ms':>10}")
    for name, xs in rows.items():
        print(f"{name:<16}{pct(xs, .5):>10.2f}{pct(xs, .9):>10.2f}{max(xs):>10.2f}")
    print(f"{'speed-up (x)':<16}{pct(speedup, .5):>10.1f}{pct(speedup, .9):>10.1f}{max(speedup):>10.1f}")
    print(f"slowest schema on the text path: {worst[1]} ({worst[0]:.1f} ms)")


if __name__ == "__main__":
    main()
