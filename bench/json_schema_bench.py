"""MaskBench-style JSON Schema benchmark: glrmask side by side with llguidance, xgrammar and
GLRMask-Rust (PyPI ``glrmask==0.5.0``, in its own venv behind ``bench/rust_worker.py``), per schema.

For each schema of the ten JSONSchemaBench/MaskBench splits (streamed from
``../shared/data/jsonschemabench/maskbench/*.jsonl.gz``) and each engine, with the Llama-3.1
vocabulary, on one pinned core (the GLRMask-Rust worker pinned to the same one):

* compile the schema, then start a request and compute its first mask; compile time and TTFM
  (time to first mask = compile + start + first mask) are measured inside the engine's own
  process. Outcome: compiled / unsupported / over budget (budget error or ``--timeout``) / error;
* replay every test instance, ``json.dumps(data, ensure_ascii=False)`` tokenized without special
  tokens (keys reordered to schema order for every engine, since glrmask needs declared properties in
  schema order), through the shared loop of ``bench/peers.py``: per token, fill the mask, check the
  token's bit (not timed), commit it. TBM = mask time + commit time. A replay stops at the first token
  outside the mask. An instance is *accepted* when every token was in the mask and the engine says the
  request may end after the last one (its accepting state; xgrammar: the end token is in its mask);
* valid instances that are not accepted are false rejects; invalid instances that are not accepted
  are correctly rejected (only as good as the keywords each engine enforces).

No warm-up per schema: a serving engine meets a new schema per request, so the first replay's cold
caches are part of the measurement (each engine is warmed once on a trivial schema at set-up).

Reported per engine: outcome counts, compile and TTFM percentiles over compiled schemas, pooled TBM
percentiles over every replayed token, and the distribution over schemas of each schema's own TBM
p50 / p99 / max. One JSON line per schema and engine goes to
``bench/results/json_schema_per_schema.jsonl`` (compile_ms, ttfm_ms, tokens, tbm_p50/p90/p99/max_us,
false rejects; not committed) and the tables to ``bench/results/json_schema_bench.md``.

An engine that is not installed is reported with its install command and skipped. Peers' compile
errors count as "unsupported" (none distinguishes unsupported features from other compile errors in
a stable way). ``--timeout`` is enforced with SIGALRM for in-process engines (it interrupts Python
code at once, native code only when it returns; an overrun counts as over budget either way) and by
a deadline on the worker's answer for GLRMask-Rust (the worker is killed and restarted).

    python3 bench/json_schema_bench.py --max-per-split 10
    python3 bench/json_schema_bench.py --splits Github_easy,Kubernetes --engines glrmask,llguidance
"""
from __future__ import annotations

import argparse
import gzip
import json
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from peers import (  # noqa: E402  (bench/peers.py)
    ACCEPTED,
    SHARED,
    TOKENIZER,
    CompileRefused,
    Deadline,
    Engine,
    GlrmaskEngine,
    LlguidanceEngine,
    OverBudget,
    RustEngine,
    Unavailable,
    XgrammarEngine,
    pin_to_core,
)

DATA = SHARED / "jsonschemabench" / "maskbench"
RESULTS = ROOT / "bench" / "results"
EOS = 128009  # <|eot_id|>, the Llama-3.1-Instruct end token (tokenizer_config.json)
SPLITS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra",
          "Glaiveai2K", "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost"]
ENGINES = ["glrmask", "llguidance", "xgrammar", "glrmask-rust"]


def on_alarm(signum, frame):  # noqa: ARG001
    raise Deadline()


# ------------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------------

@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    compile_s: list[float] = field(default_factory=list)
    ttfm_s: list[float] = field(default_factory=list)
    tbm_ns: list[np.ndarray] = field(default_factory=list)
    schema_p50_ns: list[float] = field(default_factory=list)
    schema_p99_ns: list[float] = field(default_factory=list)
    schema_max_ns: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def all_tbm(self) -> np.ndarray:
        return np.concatenate(self.tbm_ns) if self.tbm_ns else np.zeros(0, np.int64)


def setup_engine(name: str, vocab, lenient: bool, glrmask_mode: str, core) -> Engine:
    if name == "glrmask":
        return GlrmaskEngine(vocab, mode=glrmask_mode, lenient=lenient)
    if name == "llguidance":
        return LlguidanceEngine(TOKENIZER, eos=EOS, lenient=lenient)
    if name == "xgrammar":
        return XgrammarEngine(TOKENIZER, eos=EOS)
    if name == "glrmask-rust":
        return RustEngine(vocab, core=core)
    raise ValueError(f"unknown engine {name!r}")


def run_schema(engine: Engine, split: str, rec: dict, docs: list[tuple[bool, list[int], str]], tally: Tally,
               timeout: float) -> dict:
    """Compile ``rec``'s schema and replay its instances; fold the outcome into ``tally`` and return
    the per-schema record (compile and TTFM in ms, this schema's TBM percentiles in µs)."""
    c = tally.counts
    c["schemas"] += 1
    row: dict[str, Any] = {"split": split, "file": rec["file"], "engine": engine.name, "outcome": "compiled"}
    out_of_process = isinstance(engine, RustEngine)
    compiled = None
    if not out_of_process:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    t_begin = time.perf_counter()
    try:
        compiled = (engine.compile("json_schema", rec["schema"], timeout=timeout) if out_of_process
                    else engine.compile("json_schema", rec["schema"]))
        row.update(compile_ms=compiled.compile_ns / 1e6, ttfm_ms=compiled.ttfm_ns / 1e6)
        left = timeout - (time.perf_counter() - t_begin)
        if compiled.compile_ns / 1e9 > timeout or left <= 0:
            raise Deadline()
        ids = [d[1] for d in docs]
        result = (engine.replay(compiled, ids, timeout=left) if out_of_process else engine.replay(compiled, ids))
    except CompileRefused as e:
        c["unsupported"] += 1
        row.update(outcome="unsupported", error=str(e)[:300])
        return row
    except (OverBudget, Deadline) as e:
        c["over_budget"] += 1
        row.update(outcome="over budget", error=str(e)[:300])
        return row
    except Exception as e:  # an engine bug: count and show
        c["errors"] += 1
        tally.notes.append(f"ERROR {rec['file']}: {type(e).__name__}: {e}"[:300])
        row.update(outcome="error", error=f"{type(e).__name__}: {e}"[:300])
        return row
    finally:
        if not out_of_process:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if compiled is not None:
            try:
                engine.release(compiled)
            except Exception:  # the worker may have been restarted after a deadline
                pass
    c["compiled"] += 1
    tally.compile_s.append(compiled.compile_ns / 1e9)
    tally.ttfm_s.append(compiled.ttfm_ns / 1e9)
    tbm = result.tbm_ns
    tally.tbm_ns.append(tbm)
    row["tokens"] = int(len(tbm))
    if len(tbm):
        p50, p90, p99 = np.percentile(tbm, [50, 90, 99])
        row.update(tbm_p50_us=p50 / 1e3, tbm_p90_us=p90 / 1e3, tbm_p99_us=p99 / 1e3, tbm_max_us=tbm.max() / 1e3)
        tally.schema_p50_ns.append(p50)
        tally.schema_p99_ns.append(p99)
        tally.schema_max_ns.append(float(tbm.max()))
    accepted_all = (result.outcome == ACCEPTED) & result.at_end
    for (valid, _ids, text), accepted in zip(docs, accepted_all.tolist()):
        if valid:
            c["valid"] += 1
            c["valid_accepted"] += accepted
            if not accepted:
                c["false_rejects"] += 1
                tally.notes.append(f"FALSE REJECT {rec['file']}: {text[:160]}")
        else:
            c["invalid"] += 1
            c["invalid_rejected"] += not accepted
    row.update(valid=sum(v for v, _, _ in docs), false_rejects=int(sum(v and not a for (v, _, _), a in
                                                                      zip(docs, accepted_all.tolist()))))
    return row


def records(splits: list[str], max_per_split: int) -> Iterator[tuple[str, dict]]:
    for split in splits:
        with gzip.open(DATA / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if max_per_split and n >= max_per_split:
                    break
                yield split, json.loads(line)


def pct(xs, q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


def table(tallies: dict[str, Tally]) -> str:
    names = list(tallies)
    pooled = {n: tallies[n].all_tbm for n in names}
    rows: list[tuple[str, list[str]]] = []
    for key in ("schemas", "compiled", "unsupported", "over_budget", "errors", "valid", "valid_accepted",
                "false_rejects", "invalid", "invalid_rejected"):
        rows.append((key, [str(tallies[n].counts[key]) for n in names]))
    rows.append(("tokens timed", [str(len(pooled[n])) for n in names]))
    for label, attr in (("compile", "compile_s"), ("TTFM", "ttfm_s")):
        for q in (50, 90, 99, 100):
            name = "max" if q == 100 else f"p{q}"
            rows.append((f"{label} {name} (ms)", [f"{1e3 * pct(getattr(tallies[n], attr), q):.1f}" for n in names]))
    for q in (50, 90, 99, 99.9, 100):
        label = "max" if q == 100 else f"p{q:g}"
        rows.append((f"TBM {label} (us)", [f"{pct(pooled[n], q) / 1e3:.1f}" for n in names]))
    rows.append(("TBM mean (us)", [f"{pooled[n].mean() / 1e3:.1f}" if len(pooled[n]) else "nan" for n in names]))
    for label, attr in (("per-schema TBM p50", "schema_p50_ns"), ("per-schema TBM p99", "schema_p99_ns"),
                        ("per-schema TBM max", "schema_max_ns")):
        for q, qn in ((50, "median"), (90, "p90"), (100, "worst")):
            rows.append((f"{label}: {qn} (us)", [f"{pct(getattr(tallies[n], attr), q) / 1e3:.1f}" for n in names]))
    w0 = max(len(r[0]) for r in rows)
    ws = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    out = ["| " + "metric".ljust(w0) + " | " + " | ".join(n.rjust(w) for n, w in zip(names, ws)) + " |",
           "|" + "-" * (w0 + 2) + "|" + "|".join("-" * (w + 1) + ":" for w in ws) + "|"]
    for label, vals in rows:
        out.append("| " + label.ljust(w0) + " | " + " | ".join(v.rjust(w) for v, w in zip(vals, ws)) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-per-split", type=int, default=10, help="schemas per split (0 = all)")
    ap.add_argument("--splits", default=",".join(SPLITS), help="comma-separated split names")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema and engine (compile + replays)")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: " + ", ".join(ENGINES))
    ap.add_argument("--lenient", action="store_true", help="glrmask and llguidance ignore unsupported keywords")
    ap.add_argument("--glrmask-mode", choices=["dynamic", "static", "auto"], default="dynamic",
                    help="glrmask's masks: dynamic (nothing compiled ahead), static (the offline compiler "
                         "inside the timeout) or auto (its default: dynamic at once, static when a "
                         "background compile ends — that compile shares the timed replay's CPU)")
    ap.add_argument("--max-instances", type=int, default=0, help="test instances per schema (0 = all)")
    ap.add_argument("--core", type=int, default=None, help="core to pin to (default: the last allowed one)")
    ap.add_argument("--out", default=str(RESULTS), help="folder for the per-schema JSONL and the markdown table")
    ap.add_argument("--show-notes", type=int, default=8, help="false rejects / errors to print per engine")
    args = ap.parse_args()
    if not DATA.exists() or not TOKENIZER.exists():
        sys.exit(f"shared data not found under {SHARED}")
    splits = [s for s in args.splits.split(",") if s]
    unknown = set(splits) - set(SPLITS)
    if unknown:
        sys.exit(f"unknown splits: {sorted(unknown)}")
    names = [e for e in args.engines.split(",") if e]
    unknown = set(names) - set(ENGINES)
    if unknown:
        sys.exit(f"unknown engines: {sorted(unknown)}; choose from {ENGINES}")

    import glrmask
    from glrmask.json_schema.reorder import reorder_to_schema

    core = pin_to_core(args.core)
    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    tokenizer = vocab.tokenizer
    engines: dict[str, Engine] = {}
    missing: list[str] = []
    for name in names:
        try:
            t0 = time.perf_counter()
            eng = setup_engine(name, vocab, args.lenient, args.glrmask_mode, core)
            warm = eng.compile("json_schema", {"type": "object", "properties": {"a": {"type": "integer"}}})
            eng.release(warm)
            engines[eng.name] = eng
            print(f"# {eng.name} {eng.version}: ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        except Unavailable as e:
            missing.append(f"{name}: not installed — {e.reason}; install: {e.install}")
            print(f"# {name}: not installed — {e.install}", file=sys.stderr)
        except Exception as e:
            missing.append(f"{name}: set-up failed ({type(e).__name__}: {e})")
            print(f"# {name}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
    if not engines:
        sys.exit("no engine could be set up:\n" + "\n".join(missing))
    signal.signal(signal.SIGALRM, on_alarm)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_schema = (out_dir / "json_schema_per_schema.jsonl").open("w", encoding="utf-8")
    tallies = {n: Tally() for n in engines}
    per_split: dict[str, dict[str, Counter]] = {}
    t_start = time.time()
    try:
        for split, rec in records(splits, args.max_per_split):
            tests = rec.get("tests", [])[: args.max_instances or None]
            docs = []
            for t in tests:
                text = json.dumps(reorder_to_schema(t["data"], rec["schema"]), ensure_ascii=False)
                docs.append((bool(t["valid"]), tokenizer.encode(text, add_special_tokens=False).ids, text))
            for name, eng in engines.items():
                before = Counter(tallies[name].counts)
                row = run_schema(eng, split, rec, docs, tallies[name], args.timeout)
                per_schema.write(json.dumps(row) + "\n")
                per_split.setdefault(split, {}).setdefault(name, Counter()).update(tallies[name].counts - before)
            print(f"# {split} {rec['file']} done ({time.time() - t_start:.0f}s)", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # Ctrl-C: report what was measured so far
        print("# interrupted: partial results", file=sys.stderr)
    finally:
        per_schema.close()
        for eng in engines.values():
            eng.close()

    header = (f"JSONSchemaBench/MaskBench, splits {', '.join(splits)}, up to {args.max_per_split or 'all'} schemas "
              f"per split, Llama-3.1 vocabulary, one pinned core ({core}), timeout {args.timeout:g}s, "
              f"lenient={args.lenient}, glrmask mode {args.glrmask_mode}; engines: "
              + ", ".join(f"{n} {e.version}" for n, e in engines.items()))
    lines = [header, "", table(tallies), "", "per split (compiled/schemas, false rejects):"]
    for split, by_engine in per_split.items():
        cells = [f"{n} {c['compiled']}/{c['schemas']} fr={c['false_rejects']}" for n, c in by_engine.items()]
        lines.append(f"  {split:16s} " + "; ".join(cells))
    if missing:
        lines += ["", "not measured:"] + [f"  {m}" for m in missing]
    report = "\n".join(lines)
    print("\n" + report)
    (out_dir / "json_schema_bench.md").write_text(report + "\n", encoding="utf-8")
    for name, t in tallies.items():
        for note in t.notes[: args.show_notes]:
            print(f"[{name}] {note}")
    print(f"# per-schema records: {out_dir / 'json_schema_per_schema.jsonl'}", file=sys.stderr)


if __name__ == "__main__":
    main()
