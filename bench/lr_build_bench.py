"""LR table build time on JSONSchemaBench: the Python reference builder against the native one.

Usage:
    python bench/lr_build_bench.py [--per-split 5] [--builders python,native] [--repeat 1]
        [--data ../shared/data/jsonschemabench/maskbench] [--check]

For the first ``--per-split`` schemas of each split (``*.jsonl.gz``, one JSON object with a
``"schema"`` per line), the schema is lowered (:func:`glrmask.json_schema.lower_json_schema_ir`)
and normalized outside the clock; then ``LRTable.build`` is timed once per builder (the best of
``--repeat`` runs). Schemas the lowering refuses are skipped. ``--check`` also asserts that both
builders produce identical arrays (``to_arrays()``), so a speed-up is never an accident of a
different table.

The stage writes the table's sparse rows (``act_*``, ``goto_*``, ``reduce_rules``), listed as
``MB``; ``dense MB`` is what the dense views (``shift_table``, ``goto_table``,
``reduce_offsets``, computed on first access) would take, and ``held`` the bytes of dense views
the built table holds (``LRTable.dense_views_nbytes``), which must be 0 (the bench fails otherwise: a build that
materializes a dense view pays for it in page faults — on the largest schemas that was most of the
native time, and the first touch of fresh memory in a process can cost several times a later one).
``--warm-mb`` therefore touches that much memory once before timing, so whichever builder runs
first does not pay the process's first page faults alone.

Why this stage alone: the LR table is the largest part of the time to the first mask for a new
schema (canonical LR(1) over a few thousand terminals, LALR(1) past 20,000 states). The output is
one line per schema (states, method, milliseconds per builder) and the p50 / p90 / p99 / max per
builder over all schemas.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from glrmask.errors import GlrmaskError
from maskbench_data import MASKBENCH, first_schemas
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir
from glrmask.lr import LRTable

DEFAULT_DATA = MASKBENCH


def schemas(data: Path, per_split: int) -> Iterator[tuple[str, object]]:
    for split, i, schema in first_schemas(per_split, data):
        yield f"{split}[{i}]", schema


def timed_build(grammar, native: bool, repeat: int) -> tuple[float, LRTable]:
    best, table = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        table = LRTable.build(grammar, native=native)
        best = min(best, time.perf_counter() - t0)
    return best, table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-split", type=int, default=5, help="schemas per split file")
    ap.add_argument("--builders", default="python,native", help="comma-separated: python, native")
    ap.add_argument("--repeat", type=int, default=1, help="runs per builder (the best is kept)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--check", action="store_true", help="assert that the builders' arrays agree")
    ap.add_argument("--warm-mb", type=int, default=1024, help="memory touched once before timing (0: none)")
    args = ap.parse_args(argv)
    if args.warm_mb > 0:
        np.ones(args.warm_mb << 18, dtype=np.int32)  # MiB -> int32 cells, freed at once
    builders = [b.strip() for b in args.builders.split(",") if b.strip()]
    if not set(builders) <= {"python", "native"} or not builders:
        ap.error("--builders takes python and/or native")
    times: dict[str, list[float]] = {b: [] for b in builders}
    print(f"{'schema':28s} {'T':>5s} {'states':>7s} {'MB':>6s} {'dense MB':>8s} {'held':>4s} {'method':6s} "
          + " ".join(f"{b + ' ms':>10s}" for b in builders))
    for name, schema in schemas(args.data, args.per_split):
        try:
            grammar = normalize(lower_json_schema_ir(schema)[0])
        except (GlrmaskError, ValueError, RecursionError):
            continue
        tables = {}
        for b in builders:
            try:
                dt, tables[b] = timed_build(grammar, b == "native", args.repeat)
            except GlrmaskError as e:
                print(f"{name:28s} {b}: {type(e).__name__}: {str(e)[:80]}")
                break
            times[b].append(dt)
        else:
            t = tables[builders[0]]
            if args.check and len(tables) == 2:
                a, c = tables["python"].to_arrays(), tables["native"].to_arrays()
                assert a.keys() == c.keys() and all(np.array_equal(a[k], c[k]) for k in a), name
            sparse = {k: a for k, a in t.to_arrays().items() if k != "lr_meta"}
            mb = sum(a.nbytes for a in sparse.values()) / 2**20
            held = t.dense_views_nbytes
            assert held == 0, f"{name}: the build materialized {held} bytes of dense views"
            dense_mb = 4 * t.n_states * (2 * t.n_terminals + len(t.nonterminals)) / 2**20
            print(f"{name:28s} {t.n_terminals:5d} {t.n_states:7d} {mb:6.1f} {dense_mb:8.0f} {held:4d} {t.method:6s} "
                  + " ".join(f"{times[b][-1] * 1e3:10.2f}" for b in builders), flush=True)
    print()
    for b in builders:
        a = np.asarray(times[b]) * 1e3
        if a.size:
            p50, p90, p99 = np.percentile(a, [50, 90, 99])
            print(f"{b:7s} n={a.size:3d}  p50 {p50:8.2f}  p90 {p90:8.2f}  p99 {p99:8.2f}  max {a.max():8.2f} ms"
                  f"  sum {a.sum():9.1f} ms")
    if len(builders) == 2 and times["python"] and len(times["python"]) == len(times["native"]):
        r = np.asarray(times["python"]) / np.asarray(times["native"])
        print(f"speed-up (python / native per schema): p50 {np.percentile(r, 50):.1f}x  min {r.min():.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
