"""Static compile of JSONSchemaBench schemas: where the time goes, stage by stage (issue #12, item 4).

Usage:
    python bench/compile_stages_bench.py [--n 3] [--max-seconds 20] [--label before]
        [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]
        [--data ../shared/data/jsonschemabench/maskbench] [--out bench/results/compile_stages.md]

For the first ``--n`` schemas of each split (``*.jsonl.gz``, one JSON object with a ``"schema"``
per line), in a fresh forked process per schema (so no schema profits from another's caches, and
one that overruns its budget by far can be killed): the front-end (``lower_json_schema_ir``, the
lowering straight to grammar IR that ``compile_json_schema`` runs), normalization, the LR table
and the lazy lexer are timed directly, then the whole
``glrmask.compile_json_schema(schema, vocab, mode="static", limits={"max_seconds": S})`` is timed,
and its own stage reports (``on_stage``: dense lexer, stack effects, Terminal DWA, token classes,
Parser DWA) fill the remaining columns. ``total`` is the wall time of that public call (its
front-end, normalization and LR included, so the first columns are measured twice: once for the
column, once inside the total).

Why a process per schema and a hard kill: the budget (``max_seconds``) is checked cooperatively by
every stage; a stage that failed to check would hang the whole run. A child that outlives
``2 * max_seconds + 30`` s is killed and counted past the timeout like a budget error.

Output: one markdown table (per stage p50 / p90 / p99 / max in milliseconds over the schemas whose
stage ran, and the number of schemas past the timeout and with other errors), printed and written
into ``--out`` as a section named ``--label`` (a section of the same label is replaced, others are
kept, so before/after runs sit side by side), and the per-schema rows as JSON lines next to it.
Targets (issue #12, Llama-3.1, one core): total p50 ≤ 200 ms, p99 ≤ 5 s, no schema past 60 s.
"""
from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import glrmask  # noqa: E402
from glrmask.budget import activate_budget  # noqa: E402
from glrmask.errors import GlrmaskError, GrammarTooComplex  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.lr.table import LRTable  # noqa: E402
from glrmask.trie import VocabTrie  # noqa: E402

STAGES = ("front-end", "normalize", "LR", "lazy lexer", "dense lexer", "stack effects", "terminal DWA",
          "token classes", "restricted roots", "parser DWA", "total")
REPORTED = ("dense lexer", "stack effects", "terminal DWA", "token classes", "restricted roots", "parser DWA")
"""The stages ``compile_json_schema`` reports through ``on_stage``."""

_VOCAB = None  # set in the parent before forking; the children share it copy-on-write


def _measure(schema, max_seconds: float) -> dict:
    """Time one schema's static compile (runs in the child). Seconds per stage, sizes, and the
    outcome: ``ok``, ``timeout`` (a budget error naming ``max_seconds``), or ``error``."""
    row: dict = {"seconds": {}, "info": {}}
    secs = row["seconds"]
    limits = {"max_seconds": max_seconds}
    try:
        with activate_budget(limits):
            t = time.perf_counter()
            grammar, _ = lower_json_schema_ir(schema)  # what compile_json_schema lowers to
            secs["front-end"] = time.perf_counter() - t
            t = time.perf_counter()
            ng = normalize(grammar)
            secs["normalize"] = time.perf_counter() - t
            t = time.perf_counter()
            table = LRTable.build(ng)
            secs["LR"] = time.perf_counter() - t
            t = time.perf_counter()
            Lexer([(x.name, x.pattern) for x in ng.terminals.values()])
            secs["lazy lexer"] = time.perf_counter() - t
            row["info"]["LR states"] = int(table.n_states) if hasattr(table, "n_states") else None
            row["info"]["terminals"] = len(ng.terminals)

        def on_stage(name: str, seconds: float, info: dict) -> None:
            secs[name] = seconds
            row["info"][name] = {k: v for k, v in info.items() if isinstance(v, (int, float, bool))}

        t = time.perf_counter()
        glrmask.compile_json_schema(schema, _VOCAB, mode="static", limits=limits, on_stage=on_stage)
        secs["total"] = time.perf_counter() - t
        row["outcome"] = "ok"
    except GrammarTooComplex as e:
        row["outcome"] = "timeout" if "max_seconds" in str(e) else "error"
        row["error"] = str(e)[:300]
    except GlrmaskError as e:
        row["outcome"] = "error"
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return row


def _child(conn, schema, max_seconds: float) -> None:
    try:
        conn.send(_measure(schema, max_seconds))
    except BaseException as e:  # report anything (a crash is a finding), then exit
        conn.send({"seconds": {}, "info": {}, "outcome": "error", "error": f"{type(e).__name__}: {e}"[:300]})
    finally:
        conn.close()


def run_one(ctx, schema, max_seconds: float) -> dict:
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, schema, max_seconds))
    t = time.perf_counter()
    proc.start()
    child.close()
    hard = 2 * max_seconds + 30
    row = None
    if parent.poll(hard):
        try:
            row = parent.recv()
        except EOFError:
            row = None
    if row is None:
        killed = proc.is_alive()
        if killed:
            proc.kill()
        row = {"seconds": {}, "info": {}, "outcome": "timeout" if killed else "error",
               "error": "killed after the hard limit" if killed else f"child exited with {proc.exitcode}"}
    proc.join()
    row["wall"] = time.perf_counter() - t
    return row


def load_schemas(data: Path, n: int) -> list[tuple[str, int, object]]:
    out = []
    for f in sorted(data.glob("*.jsonl.gz")):
        split = f.name[: -len(".jsonl.gz")]
        with gzip.open(f, "rt") as fh:
            for i, line in enumerate(fh):
                if i >= n:
                    break
                out.append((split, i, json.loads(line)["schema"]))
    return out


def percentiles(xs: list[float]) -> tuple[float, float, float, float]:
    a = np.asarray(xs, dtype=float) * 1000.0
    return (float(np.percentile(a, 50)), float(np.percentile(a, 90)), float(np.percentile(a, 99)),
            float(a.max()))


def table(rows: list[dict], max_seconds: float) -> str:
    n = len(rows)
    timeouts = sum(r["outcome"] == "timeout" for r in rows)
    errors = sum(r["outcome"] == "error" for r in rows)
    lines = [
        f"{n} schemas, {n - timeouts - errors} compiled, {timeouts} past the {max_seconds:g} s timeout, "
        f"{errors} other errors. Milliseconds; each stage over the schemas where it ran to the end "
        "(`total`: the compiled ones).",
        "",
        "| stage | n | p50 | p90 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for stage in STAGES:
        xs = [r["seconds"][stage] for r in rows if stage in r["seconds"]]
        if not xs:
            lines.append(f"| {stage} | 0 | | | | |")
            continue
        p50, p90, p99, mx = percentiles(xs)
        lines.append(f"| {stage} | {len(xs)} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {mx:.1f} |")
    bad = [r for r in rows if r["outcome"] != "ok"]
    if bad:
        lines += ["", "Not compiled:", ""]
        for r in bad:
            lines.append(f"* {r['split']} #{r['index']} ({r['outcome']}): {r.get('error', '')[:160]}")
    slow = sorted((r for r in rows if r["outcome"] == "ok"), key=lambda r: -r["seconds"]["total"])[:5]
    if slow:
        lines += ["", "Slowest compiled (ms: total; largest stages):", ""]
        for r in slow:
            top = sorted(((v, k) for k, v in r["seconds"].items() if k != "total"), reverse=True)[:3]
            parts = ", ".join(f"{k} {v * 1000:.0f}" for v, k in top)
            lines.append(f"* {r['split']} #{r['index']}: {r['seconds']['total'] * 1000:.0f} ({parts})")
    return "\n".join(lines)


def write_section(out: Path, label: str, body: str) -> None:
    """Replace (or append) the section ``## label`` of ``out``, keeping the others."""
    text = out.read_text() if out.exists() else (
        "# Static compile per stage (JSONSchemaBench)\n\n"
        "Written by `bench/compile_stages_bench.py`; one section per labelled run.\n")
    head = f"## {label}\n"
    pat = re.compile(rf"^## {re.escape(label)}\n.*?(?=^## |\Z)", re.S | re.M)
    section = head + "\n" + body.rstrip() + "\n\n"
    text = pat.sub(lambda _m: section, text) if pat.search(text) else text.rstrip() + "\n\n" + section
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


def main() -> None:
    global _VOCAB
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3, help="schemas per split (the first ones)")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="limits['max_seconds'] of each compile")
    ap.add_argument("--label", default="run", help="section name in --out")
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tokenizers/llama-3.1/tokenizer.json"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/jsonschemabench/maskbench"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/compile_stages.md"))
    args = ap.parse_args()

    _VOCAB = glrmask.Vocab.from_tokenizer_json(args.tokenizer)
    VocabTrie.for_vocab(_VOCAB)  # the per-tokenizer trie, shared by every compile (not timed)
    glrmask.compile_json_schema({"type": "object"}, _VOCAB, mode="static")  # imports, lark warm-up
    ctx = mp.get_context("fork")
    rows = []
    t_all = time.perf_counter()
    for split, i, schema in load_schemas(Path(args.data), args.n):
        row = run_one(ctx, schema, args.max_seconds)
        row.update(split=split, index=i)
        rows.append(row)
        tot = row["seconds"].get("total")
        shown = f"{tot * 1000:.0f} ms" if tot is not None else row["outcome"]
        dense = row["info"].get("dense lexer", {}).get("states")
        print(f"{split} #{i}: {shown}" + (f" (lexer states {dense})" if dense is not None else ""),
              file=sys.stderr, flush=True)
    body = table(rows, args.max_seconds)
    commit = os.popen(f"git -C {ROOT} rev-parse --short HEAD 2>/dev/null").read().strip()
    meta = (f"`python bench/compile_stages_bench.py --n {args.n} --max-seconds {args.max_seconds:g} "
            f"--label {args.label}` at {commit or '?'}, {platform.python_implementation()} "
            f"{platform.python_version()}, vocabulary {Path(args.tokenizer).parent.name} "
            f"({_VOCAB.size} tokens), one process at a time; whole run "
            f"{time.perf_counter() - t_all:.0f} s.\n\n")
    print(body)
    out = Path(args.out)
    write_section(out, args.label, meta + body)
    per = out.with_name(out.stem + f"_{re.sub(r'[^A-Za-z0-9_-]+', '_', args.label)}.jsonl")
    with open(per, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
