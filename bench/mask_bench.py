"""The headline benchmark: time between masks (TBM) on MaskBench documents, glrmask side by side
with llguidance, xgrammar and GLRMask-Rust in the same run.

Method (MaskBench's, with one grammar): ``grammars/json.lark`` replays the *valid* instances of
``../shared/data/jsonschemabench/maskbench/*.jsonl.gz`` (all ten splits, in file order) with the
Llama-3.1 vocabulary, in two layouts — ``compact`` (MaskBench's own serialisation,
``json.dumps(data, ensure_ascii=False)``: one line, ``", "`` and ``": "``) and ``indent2``
(``indent=2``). Every engine gets the same token ids (the tokenizer's encoding, no special tokens)
and replays every document from a fresh request: per token, fill the mask into a preallocated
buffer, check the token's bit (not timed), commit the token; mask and commit are timed apart with
``time.perf_counter_ns`` (TBM = mask + commit), with the garbage collector off during a document.
A token outside the mask (or a refused commit) ends its document and counts as a false reject
(every document is valid). The process is pinned to one core (``os.sched_setaffinity``); the
GLRMask-Rust worker (``bench/rust_worker.py``, its own venv, see ``bench/README.md``) is pinned to
the same core and times inside itself, so the pipe is never measured.

Warm-up: before the timed pass each engine replays the first ``--warmup`` documents of each layout
once; those samples are reported apart ("warm-up" table) and the timed pass then replays every
document, the warm-up ones included.

Also measured: TTFM (compile + start + first mask) of json.lark per engine; glrmask's
``Mask.save`` size and ``glrmask.load`` time in a fresh process plus the first mask after it
(GLRMask-Rust: ``Constraint.load``); ``glrmask.fill_masks`` throughput at batch 1/16/128 with
``n_threads`` 1 and 2 on decode-like batches (each row a document mid-replay; llguidance's
``fill_next_token_bitmask_par`` beside it), on all the process's cores.

Outputs: a markdown report on stdout and in ``bench/results/mask_bench.md``, a CDF plot per engine
in ``bench/results/mask_bench_tbm_cdf.png`` (matplotlib, Agg) and the raw samples in
``bench/results/mask_bench_samples.npz`` (not committed).

    python bench/mask_bench.py                       # everything (several minutes)
    python bench/mask_bench.py --limit 200           # 200 documents spread over all splits
    python bench/mask_bench.py --engines glrmask glrmask-rust --layouts compact
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from peers import (  # noqa: E402  (bench/peers.py)
    INSTALL,
    SHARED,
    TOKENIZER,
    Compiled,
    Engine,
    GlrmaskEngine,
    LlguidanceEngine,
    ReplayResult,
    RustEngine,
    Unavailable,
    XgrammarEngine,
    pin_to_core,
)

MASKBENCH = SHARED / "jsonschemabench" / "maskbench"
SPLITS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra",
          "Glaiveai2K", "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost"]
EOS = 128009  # <|eot_id|>, the Llama-3.1-Instruct end token (tokenizer_config.json)
LAYOUTS = {"compact": None, "indent2": 2}
ENGINES = ["glrmask", "llguidance", "xgrammar", "glrmask-rust"]
RESULTS = BENCH / "results"
QUANTILES = (50, 90, 99, 99.9)
CHUNK = 1000  # documents per replay call (bounds one worker answer)


# ------------------------------------------------------------------------------------------------
# Documents
# ------------------------------------------------------------------------------------------------

def valid_instances(limit: int) -> list[object]:
    """Every valid MaskBench instance of the ten splits in file order, or ``limit`` of them taken
    evenly spaced (so a short run still spans every split)."""
    out: list[object] = []
    for split in SPLITS:
        with gzip.open(MASKBENCH / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                out.extend(t["data"] for t in json.loads(line).get("tests", []) if t["valid"])
    if limit and limit < len(out):
        picks = np.linspace(0, len(out) - 1, limit).round().astype(int)
        out = [out[i] for i in picks]
    return out


def tokenize(vocab, instances: Sequence[object], indent: Optional[int]) -> list[list[int]]:
    texts = [json.dumps(d, indent=indent, ensure_ascii=False) for d in instances]
    return [e.ids for e in vocab.tokenizer.encode_batch(texts, add_special_tokens=False)]


# ------------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------------

@dataclass
class Run:
    engine: str
    layout: str
    warm: ReplayResult
    timed: ReplayResult


def replay_all(engine: Engine, compiled: Compiled, docs: list[list[int]], passes: int = 1) -> ReplayResult:
    """Replay ``docs`` (in chunks of ``CHUNK``). With ``passes`` > 1 every document is replayed that
    many times and each token keeps its fastest mask and commit (the GLRMask reports' convention,
    which filters out other processes' interference); 1 is MaskBench's single pass."""
    best: Optional[ReplayResult] = None
    for _ in range(max(1, passes)):
        r = ReplayResult.concat([engine.replay(compiled, docs[i:i + CHUNK]) for i in range(0, len(docs), CHUNK)])
        if best is None:
            best = r
        elif not np.array_equal(best.doc_tokens, r.doc_tokens):
            raise RuntimeError(f"{engine.name}: a second pass replayed different tokens (non-deterministic engine)")
        else:
            best.mask_ns = np.minimum(best.mask_ns, r.mask_ns)
            best.commit_ns = np.minimum(best.commit_ns, r.commit_ns)
    return best


def setup_engine(name: str, vocab, core: Optional[int], glrmask_mode: str) -> Engine:
    if name == "glrmask":
        return GlrmaskEngine(vocab, mode=glrmask_mode)
    if name == "llguidance":
        return LlguidanceEngine(TOKENIZER, eos=EOS)
    if name == "xgrammar":
        return XgrammarEngine(TOKENIZER, eos=EOS)
    if name == "glrmask-rust":
        return RustEngine(vocab, core=core)
    raise ValueError(f"unknown engine {name!r}; choose from {ENGINES}")


def load_probe(artifact: str, core: Optional[int], repeats: int) -> None:
    """``--load-probe``: in this fresh process, time ``glrmask.load`` (the vocabulary is read first,
    untimed: a server has it already) and the first mask after it; print one JSON line."""
    pin_to_core(core)
    import glrmask

    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    loads, first_mask_ns = [], None
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        mask = glrmask.load(artifact, vocab)
        t1 = time.perf_counter_ns()
        loads.append(t1 - t0)
        if first_mask_ns is None:
            state = mask.start()
            out = np.zeros((1, mask.n_words), np.int32)
            t2 = time.perf_counter_ns()
            mask.fill_mask(state, out, 0)
            first_mask_ns = time.perf_counter_ns() - t2
    print(json.dumps({"load_ns": loads, "first_mask_ns": first_mask_ns}))


def glrmask_load(compiled: Compiled, core: Optional[int], repeats: int = 5) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "json.glrm"
        compiled.handle.save(path)
        size = path.stat().st_size
        cmd = [sys.executable, str(Path(__file__).resolve()), "--load-probe", str(path),
               "--repeats", str(repeats)] + (["--core", str(core)] if core is not None else [])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"load probe failed: {r.stderr.strip()[-500:]}")
        return {"bytes": size, **json.loads(r.stdout.strip().splitlines()[-1])}


def batch_docs(docs: list[list[int]], min_len: int = 8) -> list[list[int]]:
    return [d for d in docs if len(d) >= min_len] or docs


def glrmask_batch(mask, docs: list[list[int]], batch: int, threads: int, min_masks: int) -> dict:
    """Decode-like batches: row ``i`` replays a document; each step fills every row's mask with one
    ``glrmask.fill_masks`` call (timed) and commits one token per row with ``commit_many`` (timed
    apart); a finished row starts the next document."""
    import glrmask

    out = np.zeros((batch, mask.n_words), np.int32)
    cursor = 0
    rows: list[tuple[object, list[int], int]] = []

    def fresh():
        nonlocal cursor
        d = docs[cursor % len(docs)]
        cursor += 1
        return [mask.start(), d, 0]

    rows = [fresh() for _ in range(batch)]
    steps = max(50, -(-min_masks // batch))
    fill_ns, commit_ns = [], []
    clock = time.perf_counter_ns
    glrmask.fill_masks([r[0] for r in rows], out, n_threads=threads)  # warm-up step, not timed
    for _ in range(steps):
        states = [r[0] for r in rows]
        toks = [r[1][r[2]] for r in rows]
        t0 = clock()
        glrmask.fill_masks(states, out, n_threads=threads)
        t1 = clock()
        ok = glrmask.commit_many(states, toks)
        t2 = clock()
        if not all(ok):
            raise RuntimeError("a valid document's token was refused in the batch run")
        fill_ns.append(t1 - t0)
        commit_ns.append(t2 - t1)
        for i, r in enumerate(rows):
            r[2] += 1
            if r[2] == len(r[1]):
                rows[i] = fresh()
    return summarize_batch(fill_ns, commit_ns, batch)


def llguidance_batch(engine: LlguidanceEngine, proto, docs: list[list[int]], batch: int, threads: int,
                     min_masks: int) -> dict:
    """The same decode-like batches through ``llguidance.numpy.fill_next_token_bitmask_par``."""
    import llguidance
    import llguidance.numpy

    executor = llguidance.LLExecutor(num_threads=threads)
    out = np.zeros((batch, engine.n_words), np.int32)
    cursor = 0

    def fresh():
        nonlocal cursor
        d = docs[cursor % len(docs)]
        cursor += 1
        return [proto.deep_copy(), d, 0]

    rows = [fresh() for _ in range(batch)]
    steps = max(50, -(-min_masks // batch))
    fill_ns, commit_ns = [], []
    clock = time.perf_counter_ns
    par = llguidance.numpy.fill_next_token_bitmask_par
    par(executor, [(r[0], i) for i, r in enumerate(rows)], out)
    for _ in range(steps):
        pairs = [(r[0], i) for i, r in enumerate(rows)]
        t0 = clock()
        par(executor, pairs, out)
        t1 = clock()
        for r in rows:
            if not r[0].consume_token(r[1][r[2]]):
                raise RuntimeError("llguidance refused a valid document's token in the batch run")
        t2 = clock()
        fill_ns.append(t1 - t0)
        commit_ns.append(t2 - t1)
        for i, r in enumerate(rows):
            r[2] += 1
            if r[2] == len(r[1]):
                rows[i] = fresh()
    return summarize_batch(fill_ns, commit_ns, batch)


def summarize_batch(fill_ns: list[int], commit_ns: list[int], batch: int) -> dict:
    f = np.asarray(fill_ns)
    return {"steps": len(f), "fill_p50_us": float(np.median(f)) / 1e3, "fill_p99_us": float(np.percentile(f, 99)) / 1e3,
            "per_mask_us": float(np.median(f)) / 1e3 / batch, "masks_per_s": batch * len(f) / (f.sum() / 1e9),
            "commit_p50_us": float(np.median(commit_ns)) / 1e3}


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def us(ns) -> str:
    v = float(ns) / 1e3
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def stats_cells(ns: np.ndarray) -> list[str]:
    if len(ns) == 0:
        return ["–"] * (len(QUANTILES) + 2)
    qs = np.percentile(ns, QUANTILES)
    return [us(q) for q in qs] + [us(ns.max()), us(ns.mean())]


def md_table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.rjust(w) if i >= right_from else c.ljust(w)  # noqa: E731
                                            for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    sep = "|" + "|".join("-" * (w + 1) + (":" if i >= right_from else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def latency_tables(runs: list[Run], n_docs: dict[str, int]) -> str:
    head = ["engine", "layout", "docs", "tokens", "false rejects"] + [f"p{q:g}" for q in QUANTILES] + ["max", "mean"]
    parts = []
    for title, pick in (("TBM = mask + commit (µs per token)", lambda r: r.tbm_ns),
                        ("mask alone (µs)", lambda r: r.mask_ns), ("commit alone (µs)", lambda r: r.commit_ns)):
        rows = [[r.engine, r.layout, str(n_docs[r.layout]), f"{len(r.timed.mask_ns):,}", str(r.timed.rejects)]
                + stats_cells(pick(r.timed)) for r in runs]
        parts.append(f"**{title}**\n\n" + md_table(head, rows, right_from=2))
    rows = [[r.engine, r.layout, str(len(r.warm.outcome)), f"{len(r.warm.mask_ns):,}", str(r.warm.rejects)]
            + stats_cells(r.warm.tbm_ns) for r in runs]
    parts.append("**warm-up pass, TBM (µs)** (the first documents of each layout right after the compile; "
                 "not in the tables above)\n\n" + md_table(head, rows, right_from=2))
    return "\n\n".join(parts)


def plot_cdf(runs: list[Run], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(r.layout for r in runs))
    fig, axes = plt.subplots(2, len(layouts), figsize=(6.5 * len(layouts), 8), squeeze=False)
    engines = list(dict.fromkeys(r.engine for r in runs))
    colors = {e: f"C{i}" for i, e in enumerate(engines)}
    for j, layout in enumerate(layouts):
        top, bottom = axes[0][j], axes[1][j]
        for r in (r for r in runs if r.layout == layout):
            x = np.sort(r.timed.tbm_ns) / 1e3
            n = len(x)
            if n == 0:
                continue
            idx = np.unique(np.concatenate([np.linspace(0, n - 1, 2000), n - np.geomspace(1, n, 2000)]).astype(int))
            xs, ps = x[idx], (idx + 1) / n
            label = f"{r.engine} (p50 {np.percentile(x, 50):.1f}, p99.9 {np.percentile(x, 99.9):.0f} µs)"
            top.plot(xs, ps, color=colors[r.engine], label=label)
            bottom.plot(xs, np.maximum(1 - ps + 1 / n, 1 / n), color=colors[r.engine], label=r.engine)
        top.set(xscale="log", xlabel="TBM per token (µs, log)", ylabel="fraction of tokens ≤ x",
                title=f"{layout}: CDF")
        bottom.set(xscale="log", yscale="log", xlabel="TBM per token (µs, log)", ylabel="fraction of tokens > x",
                   title=f"{layout}: tail (1 − CDF)")
        for ax in (top, bottom):
            ax.grid(True, which="both", alpha=0.3)
        top.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = ", load average {:.1f} (other processes share the cores)".format(os.getloadavg()[0])
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}{load}"


# ------------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="documents, evenly spread over all splits (0 = all)")
    ap.add_argument("--layouts", nargs="*", choices=list(LAYOUTS), default=list(LAYOUTS))
    ap.add_argument("--engines", nargs="*", choices=ENGINES, default=ENGINES)
    ap.add_argument("--glrmask-mode", choices=["static", "dynamic"], default="static")
    ap.add_argument("--grammar", default=str(ROOT / "grammars" / "json.lark"))
    ap.add_argument("--passes", type=int, default=1,
                    help="timed passes; each token keeps its fastest (default 1: MaskBench's single pass)")
    ap.add_argument("--warmup", type=int, default=20, help="documents per layout replayed before timing")
    ap.add_argument("--core", type=int, default=None, help="core to pin to (default: the last allowed one)")
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 16, 128])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--batch-masks", type=int, default=4000, help="masks per batch configuration (at least 50 steps)")
    ap.add_argument("--out", default=str(RESULTS), help="folder for the report, plot and samples")
    ap.add_argument("--load-probe", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_probe:
        load_probe(args.load_probe, args.core, args.repeats)
        return
    if not MASKBENCH.exists() or not TOKENIZER.exists():
        sys.exit(f"shared data not found under {SHARED}")

    import glrmask

    all_cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    core = pin_to_core(args.core)
    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    instances = valid_instances(args.limit)
    docs = {layout: tokenize(vocab, instances, LAYOUTS[layout]) for layout in args.layouts}
    n_docs = {layout: len(d) for layout, d in docs.items()}
    grammar_path = Path(args.grammar)
    grammar_text = grammar_path.read_text(encoding="utf-8")
    log = lambda msg: print(f"# {msg}", file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(instances)} documents; tokens " + ", ".join(f"{k} {sum(map(len, v)):,}" for k, v in docs.items())
        + f"; pinned to core {core}")

    machine_line = machine()
    runs: list[Run] = []
    compile_rows: list[list[str]] = []
    missing: list[str] = []
    versions: dict[str, str] = {}
    batch_rows: list[list[str]] = []
    for name in args.engines:
        try:
            engine = setup_engine(name, vocab, core, args.glrmask_mode)
        except Unavailable as e:
            missing.append(f"- **{name}**: not installed — {e.reason}. Install: `{e.install or INSTALL.get(name, '')}`")
            log(f"{name}: not installed — {e.install}")
            continue
        versions[engine.name] = engine.version
        try:
            log(f"{engine.name} {engine.version}: compiling {grammar_path.name}")
            compiled = engine.compile("lark", grammar_text)
            load = "–"
            if name == "glrmask" and args.glrmask_mode == "static":
                info = glrmask_load(compiled, core)
                load = (f"{info['load_ns'][0] / 1e6:.1f} ms fresh process (then {np.median(info['load_ns'][1:] or info['load_ns']) / 1e6:.1f}); "
                        f"first mask {us(info['first_mask_ns'])} µs; {info['bytes'] / 1e6:.1f} MB")
            elif name == "glrmask-rust":
                info = engine.save_load(compiled)
                load = (f"{info['load_ns'][0] / 1e6:.1f} ms (then {np.median(info['load_ns'][1:] or info['load_ns']) / 1e6:.1f}); "
                        f"first mask {us(info['first_mask_ns'])} µs; {info['bytes'] / 1e6:.1f} MB")
            compile_rows.append([engine.name, engine.version, f"{compiled.compile_ns / 1e6:,.1f}",
                                 us(compiled.first_mask_ns), f"{compiled.ttfm_ns / 1e6:,.1f}", load])
            for layout, layout_docs in docs.items():
                t0 = time.time()
                warm = replay_all(engine, compiled, layout_docs[: args.warmup])
                timed = replay_all(engine, compiled, layout_docs, args.passes)
                runs.append(Run(engine.name, layout, warm, timed))
                log(f"{engine.name} {layout}: {len(timed.mask_ns):,} tokens in {time.time() - t0:.0f}s, "
                    f"TBM p50 {np.median(timed.tbm_ns) / 1e3:.1f} µs, false rejects {timed.rejects}")
            if all_cores and name in ("glrmask", "llguidance") and args.batches:
                os.sched_setaffinity(0, all_cores)
                bdocs = batch_docs(docs[args.layouts[0]])
                for b in args.batches:
                    for th in args.threads:
                        r = (glrmask_batch(compiled.handle, bdocs, b, th, args.batch_masks) if name == "glrmask"
                             else llguidance_batch(engine, compiled.handle, bdocs, b, th, args.batch_masks))
                        batch_rows.append([engine.name, str(b), str(th), str(r["steps"]), us(r["fill_p50_us"] * 1e3),
                                           us(r["fill_p99_us"] * 1e3), f"{r['per_mask_us']:.2f}",
                                           f"{r['masks_per_s']:,.0f}", us(r["commit_p50_us"] * 1e3)])
                pin_to_core(core)
        except Exception as e:  # one engine failing must not lose the others' numbers
            log(f"{engine.name}: failed — {type(e).__name__}: {e}")
            missing.append(f"- **{engine.name}**: failed during the run ({type(e).__name__}: {str(e)[:300]})")
        finally:
            engine.close()

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = "python bench/mask_bench.py " + " ".join(sys.argv[1:])
    tokens = ", ".join(f"{k} {sum(map(len, v)):,} tokens" for k, v in docs.items())
    lines = [
        f"## MaskBench TBM: {grammar_path.name}, Llama-3.1 vocabulary",
        "",
        f"`{cmd.strip()}` — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {machine_line}; "
        f"pinned to core {core}; {args.passes} timed pass{'es (per-token minimum)' if args.passes > 1 else ''}. {len(instances):,} valid MaskBench instances "
        f"({'all' if not args.limit else f'{args.limit} evenly spread'} over the 10 splits); {tokens}. "
        "Engines: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".",
        "",
        latency_tables(runs, n_docs) if runs else "_no engine ran_",
        "",
        "**compile and load** (TTFM = compile + start + first mask, in the engine's own process)",
        "",
        md_table(["engine", "version", "compile (ms)", "first mask (µs)", "TTFM (ms)", "load"], compile_rows,
                 right_from=2) if compile_rows else "",
    ]
    if batch_rows:
        lines += ["", f"**batch fill throughput** (decode-like batches; on {len(all_cores or [])} cores; "
                  "fill = one `glrmask.fill_masks` / `fill_next_token_bitmask_par` call per step)", "",
                  md_table(["engine", "batch", "threads", "steps", "fill p50 (µs)", "fill p99 (µs)",
                            "µs per mask", "masks/s", "commit step p50 (µs)"], batch_rows)]
    if missing:
        lines += ["", "**not measured**", ""] + missing
    lines += ["", "Notes: samples are per committed token; a token outside an engine's mask ends its document "
              "(a false reject: every document is valid). xgrammar runs its built-in JSON grammar (Lark is not "
              "its input language, and its EBNF dialect with json.lark's exact language masked ~45 ms per token "
              "here); that grammar takes only an object or an array at the top level, so the 82 top-level scalars "
              "of the full set count among its false rejects (in the compact layout also documents whose tokens "
              "close several brackets at once after a string, e.g. `}],`). GLRMask-Rust is timed inside its worker process, pinned to the "
              "same core."]
    report = "\n".join(lines) + "\n"
    print(report)
    (out_dir / "mask_bench.md").write_text(report, encoding="utf-8")
    if runs:
        np.savez_compressed(out_dir / "mask_bench_samples.npz",
                            **{f"{r.engine}|{r.layout}|{k}": getattr(r.timed, k) for r in runs
                               for k in ("mask_ns", "commit_ns")})
        plot = out_dir / "mask_bench_tbm_cdf.png"
        plot_cdf(runs, plot, f"MaskBench TBM, {grammar_path.name}, Llama-3.1, {len(instances):,} documents, "
                             f"one pinned core — {datetime.date.today()}")
        log(f"wrote {out_dir / 'mask_bench.md'} and {plot}")


if __name__ == "__main__":
    main()
