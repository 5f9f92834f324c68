"""The stack-effects stage alone on JSONSchemaBench schemas: native builder versus the Python reference.

Usage:
    python bench/stack_effects_bench.py [--n 3] [--python] [--python-max-states 5000]
        [--data ../shared/data/jsonschemabench/maskbench] [--out bench/results/stack_effects.md]

For the first ``--n`` schemas of each split: lower, normalize and build the LR table (not timed),
then time ``StackEffects.build(table, native=True)`` in CPU seconds (``time.process_time``: the
benchmark machines are shared, wall time is noisy). ``--python`` also times ``native=False`` (the
reference) on tables of at most ``--python-max-states`` LR states (the largest take ~40 s in Python)
and checks that both give the same arrays. Prints a markdown table (one row per schema: LR states,
terminals, automaton states, milliseconds) and writes it to ``--out``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from glrmask.compiler.stack_effects import StackEffects  # noqa: E402
from glrmask.errors import GlrmaskError  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lr.table import LRTable  # noqa: E402

FIELDS = ("edge_ptr", "edge_label", "edge_target", "default_target", "final_ptr", "final_writes", "write_ptr",
          "write_states")


def same(a: StackEffects, b: StackEffects) -> bool:
    return len(a.automata) == len(b.automata) and all(
        np.array_equal(getattr(x, f), getattr(y, f)) for x, y in zip(a.automata, b.automata) for f in FIELDS)


def cpu(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3, help="schemas per split (the first ones)")
    ap.add_argument("--python", action="store_true", help="also time the Python reference and compare")
    ap.add_argument("--python-max-states", type=int, default=5000)
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/jsonschemabench/maskbench"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/stack_effects.md"))
    args = ap.parse_args()
    lines = ["| schema | LR states | terminals | automaton states | native ms | python ms | same |",
             "|---|---:|---:|---:|---:|---:|---|"]
    native_ms = []
    for f in sorted(Path(args.data).glob("*.jsonl.gz")):
        split = f.name[: -len(".jsonl.gz")]
        with gzip.open(f, "rt") as fh:
            rows = [json.loads(line)["schema"] for _, line in zip(range(args.n), fh)]
        for i, schema in enumerate(rows):
            name = f"{split} #{i}"
            try:
                grammar = normalize(lower_json_schema_ir(schema)[0])
                table = LRTable.build(grammar)
            except GlrmaskError as e:
                lines.append(f"| {name} | {type(e).__name__} | | | | | |")
                continue
            effects, dt = cpu(lambda: StackEffects.build(table, ignore=grammar.ignore))
            native_ms.append(dt * 1000)
            py, agree = "", ""
            if args.python and table.n_states <= args.python_max_states:
                ref, pt = cpu(lambda: StackEffects.build(table, ignore=grammar.ignore, native=False))
                py, agree = f"{pt * 1000:.1f}", str(same(effects, ref))
            states = sum(a.n_states for a in effects.automata)
            lines.append(f"| {name} | {table.n_states} | {table.n_terminals} | {states} | {dt * 1000:.1f} | {py} | "
                         f"{agree} |")
            print(lines[-1], file=sys.stderr, flush=True)
    a = np.asarray(native_ms)
    summary = (f"native: {len(a)} schemas, p50 {np.percentile(a, 50):.1f} ms, p99 {np.percentile(a, 99):.1f} ms, "
               f"max {a.max():.1f} ms (CPU time)") if len(a) else "no schema built"
    text = ("# Stack effects per schema (JSONSchemaBench)\n\n"
            f"`python bench/stack_effects_bench.py --n {args.n}{' --python' if args.python else ''}`\n\n"
            + summary + "\n\n" + "\n".join(lines) + "\n")
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
