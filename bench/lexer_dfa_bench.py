"""The static compile's dense-lexer stage alone, per JSONSchemaBench schema (issue #12, item 4).

Usage:
    python bench/lexer_dfa_bench.py [--n 3] [--reference] [--max-states 65536]
        [--data ../shared/data/jsonschemabench/maskbench] [--out bench/results/lexer_dfa.md]

For the first ``--n`` schemas of each split, in a fresh forked process per schema and path: the
schema is lowered, parsed and normalized (not timed), a fresh lazy lexer is built over its
terminals (not timed), and ``LexerDFA.explore`` — what ``DenseLexer.from_lexer`` runs in
``compile_json_schema(..., mode="static")`` — is timed in CPU seconds (``time.process_time``:
the machine is shared, and the stage is single-threaded, so CPU time is the stable measure).
``--reference`` also times the Python reference loops (``native=False``) and checks that both give
the same arrays. The lazy lexer's lane steps are Python either way; ``native`` moves the
exploration, futures and minimization loops to :mod:`glrmask_ext.lexer_dfa`.

Output: a markdown table (per schema: explored / minimized states, ms per path) with p50 / p90 /
p99 / max, printed and written to ``--out``, plus the rows as JSON lines beside it.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

import glrmask_ext.lexer_dfa  # noqa: E402,F401  (imported before the forks: not timed per schema)
from glrmask.errors import GlrmaskError  # noqa: E402
from glrmask.grammar.lark_frontend import grammar_from_lark  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema  # noqa: E402
from glrmask.lexer import Lexer, LexerDFA  # noqa: E402
from maskbench_data import MASKBENCH, first_schemas  # noqa: E402


def _measure(schema, native: bool, max_states: int) -> dict:
    try:
        text, _ = lower_json_schema(schema)
        grammar = normalize(grammar_from_lark(text, source_name="<json-schema>"))
        lexer = Lexer([(t.name, t.pattern) for t in grammar.terminals.values()])
    except GlrmaskError as e:
        return {"outcome": "front-end error", "error": f"{type(e).__name__}: {str(e)[:200]}"}
    t = time.process_time()
    try:
        dfa = LexerDFA.explore(lexer, max_states=max_states, native=native)
    except GlrmaskError as e:
        return {"outcome": "error", "cpu": time.process_time() - t, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    row = {"outcome": "ok", "cpu": time.process_time() - t, "explored": dfa.n_explored_states,
           "states": dfa.n_states, "conds": dfa.n_conds}
    row["digest"] = _digest(dfa)
    return row


def _digest(dfa: LexerDFA) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, arr in sorted(dfa.arrays().items()):
        h.update(name.encode())
        h.update(str(arr.dtype).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def _child(conn, schema, native: bool, max_states: int) -> None:
    try:
        conn.send(_measure(schema, native, max_states))
    except BaseException as e:  # a crash is a finding: report it
        conn.send({"outcome": "error", "error": f"{type(e).__name__}: {e}"[:300]})
    finally:
        conn.close()


def run_one(ctx, schema, native: bool, max_states: int) -> dict:
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, schema, native, max_states))
    proc.start()
    child.close()
    try:
        row = parent.recv()
    except EOFError:
        row = {"outcome": "error", "error": f"child exited with {proc.exitcode}"}
    proc.join()
    return row


def percentiles(xs: list[float]) -> str:
    if not xs:
        return "-"
    p = np.percentile(np.asarray(xs) * 1000, [50, 90, 99])
    return f"{p[0]:.0f} / {p[1]:.0f} / {p[2]:.0f} / {max(xs) * 1000:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3, help="schemas per split (the first ones)")
    ap.add_argument("--reference", action="store_true", help="also time the Python reference (native=False)")
    ap.add_argument("--max-states", type=int, default=65_536, help="the export's max_states")
    ap.add_argument("--data", default=str(MASKBENCH))
    ap.add_argument("--out", default=str(ROOT / "bench/results/lexer_dfa.md"))
    args = ap.parse_args()
    ctx = mp.get_context("fork")
    paths = [("native", True)] + ([("python", False)] if args.reference else [])
    rows = []
    for split, i, schema in first_schemas(args.n, Path(args.data)):
        row = {"split": split, "index": i}
        for label, native in paths:
            row[label] = run_one(ctx, schema, native, args.max_states)
        if args.reference and row["native"].get("digest") != row["python"].get("digest"):
            row["mismatch"] = True
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items()}, default=str)[:300], flush=True)

    lines = [f"`python bench/lexer_dfa_bench.py --n {args.n}{' --reference' if args.reference else ''}` "
             f"(CPU ms of `LexerDFA.explore` on a fresh lazy lexer, one process per schema and path)", "",
             "| schema | explored | states | " + " | ".join(f"{p} ms" for p, _ in paths) + " |",
             "|---|---:|---:|" + "---:|" * len(paths)]
    for r in rows:
        first = r["native"]
        cells = []
        for p, _ in paths:
            x = r[p]
            cells.append(f"{x['cpu'] * 1000:.0f}" if x["outcome"] == "ok" else x["outcome"])
        lines.append(f"| {r['split']} #{r['index']} | {first.get('explored', '-')} | {first.get('states', '-')} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    for p, _ in paths:
        ok = [r[p]["cpu"] for r in rows if r[p]["outcome"] == "ok"]
        lines.append(f"* {p}: p50 / p90 / p99 / max = {percentiles(ok)} ms over {len(ok)} schemas")
    bad = [r for r in rows if r["native"]["outcome"] != "ok"]
    for r in bad:
        lines.append(f"* {r['split']} #{r['index']}: {r['native'].get('error', '')[:160]}")
    if args.reference:
        mism = [f"{r['split']} #{r['index']}" for r in rows if r.get("mismatch")]
        lines.append(f"* arrays identical on every schema: {'yes' if not mism else 'NO: ' + ', '.join(mism)}")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Dense lexer export (issue #12, item 4)\n\n" + text)
    with open(out.with_suffix(".jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
