"""Time to first mask of dynamic-mode JSON Schema masks, each schema in a fresh process.

Usage:
    python bench/dynamic_ttfm_bench.py [--per-split 5] [--data ../shared/data/jsonschemabench/maskbench]
        [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]

Why a fresh process per schema: a server meets a new schema in a process whose memory is not yet
touched for it, and on the largest schemas the first writes of fresh pages (the LR table's arrays)
were most of the time to the first mask; a loop in one process reuses freed pages and hides that.
Each child imports glrmask and loads the vocabulary outside the clock, then measures CPU time
(``time.process_time``: other processes share the cores) of ``compile_json_schema(schema, vocab,
mode="dynamic")`` + ``start()`` + the first ``get_mask``, and apart from that the LR table build
alone (lower + normalize outside the clock, ``LRTable.build`` timed) with the size of its stored
arrays; ``dense MB`` is what the mask's LR table holds in dense tables after the first mask
(``LRTable.dense_views_nbytes``; 0 with sparse rows).
One line per schema, then p50 / p90 / p99 / max of both over the schemas that compiled.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from maskbench_data import MASKBENCH, first_schemas

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = MASKBENCH
DEFAULT_TOKENIZER = ROOT.parent / "shared" / "data" / "tokenizers" / "llama-3.1" / "tokenizer.json"

_CHILD = r"""
import json, sys, time
import numpy as np
import glrmask
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir
from glrmask.lr import LRTable
schema = json.loads(sys.stdin.read())
vocab = glrmask.Vocab.from_tokenizer_json(sys.argv[1])
out = {}
try:
    t0 = time.process_time()
    mask = glrmask.compile_json_schema(schema, vocab, mode="dynamic")
    state = mask.start()
    mask.get_mask(state)
    out["ttfm_ms"] = (time.process_time() - t0) * 1e3
    held = getattr(mask.table, "dense_views_nbytes", None)  # None: a build that stores the dense tables
    if held is None:
        held = mask.table.shift_table.nbytes + mask.table.goto_table.nbytes + mask.table.reduce_offsets.nbytes
    out["dense_mb"] = held / 2**20
    grammar = normalize(lower_json_schema_ir(schema)[0])
    t0 = time.process_time()
    table = LRTable.build(grammar)
    out["lr_ms"] = (time.process_time() - t0) * 1e3
    out["states"] = table.n_states
    out["stored_mb"] = sum(a.nbytes for k, a in table.to_arrays().items() if k != "lr_meta") / 2**20
except glrmask.errors.GlrmaskError as e:
    out["error"] = f"{type(e).__name__}: {str(e)[:60]}"
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-split", type=int, default=5)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    args = ap.parse_args(argv)
    ttfm, lr = [], []
    print(f"{'schema':28s} {'states':>7s} {'ttfm ms':>9s} {'lr ms':>8s} {'stored MB':>9s} {'dense MB':>8s}")
    for split, i, schema in first_schemas(args.per_split, args.data):
        name = f"{split}[{i}]"
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(args.tokenizer)], input=json.dumps(schema),
                              capture_output=True, text=True, timeout=600)
        try:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            print(f"{name:28s} crashed: {proc.stderr.strip()[-200:]}")
            continue
        if "error" in r:
            print(f"{name:28s} {r['error']}")
            continue
        ttfm.append(r["ttfm_ms"])
        lr.append(r["lr_ms"])
        print(f"{name:28s} {r['states']:7d} {r['ttfm_ms']:9.1f} {r['lr_ms']:8.1f} {r['stored_mb']:9.2f} "
              f"{r['dense_mb']:8.2f}", flush=True)
    print()
    for label, xs in (("TTFM", ttfm), ("LR build", lr)):
        a = np.asarray(xs)
        if a.size:
            p50, p90, p99 = np.percentile(a, [50, 90, 99])
            print(f"{label:9s} n={a.size:3d}  p50 {p50:8.1f}  p90 {p90:8.1f}  p99 {p99:8.1f}  max {a.max():8.1f} ms CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
