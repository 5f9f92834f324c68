"""Does a background static compile slow down decoding? TBM of decode loops while ``mode="auto"``
compiles run, next to the same loops without one (issue #12, item 3).

``mode="auto"`` (the default of ``glrmask.compile_json_schema``) serves masks at once and runs the
static compile in a worker process (``python -m glrmask.background_compile``) so that the compile
never holds the decode loop's GIL. What is left to interfere is the machine: cores, caches, memory
bandwidth. This benchmark measures that, with the Llama-3.1 vocabulary and MaskBench documents:

**A. A static decode loop beside other requests' compiles.** ``grammars/json.lark`` compiled with
``mode="static"`` replays ``--docs`` valid MaskBench instances (compact ``json.dumps``, tokenized
without special tokens) token by token: per token ``mask.fill_mask(state, out, 0)``, the token's bit
checked (not timed), ``state.commit(token)``; TBM = fill + commit, ``time.perf_counter_ns``, the
garbage collector off within a document. ``--compiles`` (M) ``compile_json_schema(schema, vocab,
mode="auto")`` masks on heavy MaskBench schemas (``--load-splits``) keep their workers compiling;
one that ends (its 30 s budget, a failure or a finished artifact) is replaced between chunks.

  (1) *quiet*: the workers frozen with ``SIGSTOP`` (they use no CPU; ``/proc/PID/stat`` confirms);
  (2) *loaded*: the workers running (``SIGCONT``), each with ``mask.static_compile_pid`` set and
      CPU time accruing across the chunk — a chunk during which a compile ended is dropped.

  The two conditions alternate every ``--chunk-ms`` (ABBA order; both chunks of a pair replay the
  same documents, taken cyclically) for ``--seconds``, so both see the same machine: other
  processes' load moves on a scale of seconds (the 2-core box this was written on is shared with
  other agents) and would otherwise land in one condition only. Freezing a worker is the
  benchmark's doing, not the library's; the workers are always continued before they are cancelled.
  Per condition: p50/p90/p99/p99.9/max/mean TBM, the tokens over 1 ms (an interval that holds a
  scheduler preemption) and the ratio (2)/(1).

**B. The auto-mode masks' own requests while their compile runs (the dynamic path).** For each of
``--own-schemas`` schemas with valid instances: ``compile_json_schema(schema, vocab, mode="auto")``,
then every valid instance (keys in schema order, as ``bench/json_schema_bench.py`` replays them)
replayed on that mask while its compile runs — each token tagged by whether the compile was still
running and the mask still dynamic, read before and after the token (not timed) — and, right after
each document, the same document on llguidance (``bench/peers.py``'s engine: a compiled
``LLMatcher`` deep-copied per request, the same Llama-3.1 tokenizer), so both engines see the same
compile. Then the compile is cancelled (``mask.cancel_static()``; the benchmark checks that the
worker process is gone) and the documents replay again without it: on a fresh ``mode="dynamic"``
mask (the same engine; a fresh mask because the dynamic engine memoises per mask) and a freshly
compiled llguidance matcher. No warm-up per schema (a served schema meets its first request cold).

Placement (``--placement``): ``os`` (default) leaves every process to the scheduler; ``split`` pins
the decode loop to one core and the workers to the others; ``same`` pins them all to one core (the
worst case: the loop gets a share of one core). ``--worker-sched`` lowers the workers' priority
(``nice`` 19 or ``SCHED_IDLE``) to show what that would buy; the library itself does neither.

Output: the tables on stdout and in ``bench/results/compile_interference.md`` (``--out``; with
``--append`` a run is added to the file instead of replacing it).

    python bench/compile_interference_bench.py                        # defaults: about 3 minutes
    python bench/compile_interference_bench.py --compiles 1 --placement same --seconds 20
    python bench/compile_interference_bench.py --skip-own             # part A only
"""
from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from peers import SHARED, TOKENIZER, LlguidanceEngine, Unavailable  # noqa: E402  (bench/peers.py)

MASKBENCH = SHARED / "jsonschemabench" / "maskbench"
SPLITS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra",
          "Glaiveai2K", "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost"]
LOAD_SPLITS = ["Github_ultra", "Kubernetes", "JsonSchemaStore"]
JSON_GRAMMAR = ROOT / "grammars" / "json.lark"
EOS = 128009  # <|eot_id|>, the Llama-3.1-Instruct end token (tokenizer_config.json)
RESULTS = BENCH / "results"
QUANTILES = (50, 90, 99, 99.9)
CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# Replay outcome of one document.
ACCEPTED, NOT_IN_MASK, COMMIT_REFUSED = "accepted", "not in mask", "commit refused"


# ------------------------------------------------------------------------------------------------
# The timing loop
# ------------------------------------------------------------------------------------------------

@dataclass
class DocReplay:
    """One document's samples: ``tbm_ns`` per committed token; ``tags`` (when a probe was given)
    whether the probe held both before and after that token."""

    tbm_ns: np.ndarray
    tags: Optional[np.ndarray]
    outcome: str


def replay_document(fill: Callable[[], Any], commit: Callable[[int], bool], words: np.ndarray, ids: Sequence[int],
                    probe: Optional[Callable[[], bool]] = None) -> DocReplay:
    """Per token: time ``fill()``, check the token's bit in ``words`` (not timed), time ``commit``.
    ``probe()`` runs between the timed intervals, never inside one. The garbage collector is off
    for the document (a collection would land in one sample); the caller collects between them."""
    clock = time.perf_counter_ns
    tbm = np.zeros(len(ids), np.int64)
    tags = np.zeros(len(ids), bool) if probe is not None else None
    outcome = ACCEPTED
    k = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for tok in ids:
            before = probe() if probe is not None else True
            t0 = clock()
            fill()
            t1 = clock()
            if not (int(words[tok >> 5]) >> (tok & 31)) & 1:
                outcome = NOT_IN_MASK
                break
            t2 = clock()
            ok = commit(tok)
            t3 = clock()
            if not ok:
                outcome = COMMIT_REFUSED
                break
            tbm[k] = (t1 - t0) + (t3 - t2)
            if tags is not None:
                tags[k] = before and probe()
            k += 1
    finally:
        if was_enabled:
            gc.enable()
    return DocReplay(tbm[:k].copy(), None if tags is None else tags[:k].copy(), outcome)


def glrmask_request(mask) -> tuple[Callable[[], Any], Callable[[int], bool], np.ndarray]:
    """A fresh glrmask request: fill into a preallocated row, commit on the state (public API only)."""
    import functools

    state = mask.start()
    out = np.zeros((1, mask.n_words), np.int32)
    return functools.partial(mask.fill_mask, state, out, 0), state.commit, out[0].view(np.uint32)


def llguidance_request(engine: LlguidanceEngine, proto) -> tuple[Callable[[], Any], Callable[[int], bool], np.ndarray]:
    req = engine.request(proto)
    return req.fill, req.commit, req.words


# ------------------------------------------------------------------------------------------------
# Background compiles
# ------------------------------------------------------------------------------------------------

def proc_stat(pid: int) -> Optional[tuple[str, float]]:
    """``(state letter, CPU seconds)`` of ``pid`` from ``/proc/PID/stat``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return fields[0], (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def process_gone(pid: int) -> bool:
    st = proc_stat(pid)
    return st is None or st[0] in ("Z", "X")


@dataclass
class Placement:
    """Where the decode loop and the compile workers may run (``None``: left to the scheduler)."""

    decode: Optional[set[int]]
    workers: Optional[set[int]]

    @classmethod
    def named(cls, name: str) -> "Placement":
        if name == "os" or not hasattr(os, "sched_setaffinity"):
            return cls(None, None)
        allowed = sorted(os.sched_getaffinity(0))
        core = allowed[-1]
        if name == "same":
            return cls({core}, {core})
        if name == "split":
            if len(allowed) < 2:
                raise SystemExit("--placement split needs at least two cores")
            return cls({core}, set(allowed[:-1]))
        raise ValueError(name)

    def describe(self) -> str:
        if self.decode is None:
            return "left to the scheduler (nothing pinned)"
        return f"decode loop on core(s) {sorted(self.decode)}, compile workers on core(s) {sorted(self.workers)}"


def place_worker(pid: int, placement: Placement, worker_sched: str) -> None:
    """Apply ``placement`` and ``worker_sched`` to a compile worker right after it was spawned
    (through its public pid; it has not started compiling yet)."""
    try:
        if placement.workers is not None:
            os.sched_setaffinity(pid, placement.workers)
        if worker_sched == "nice":
            os.setpriority(os.PRIO_PROCESS, pid, 19)
        elif worker_sched == "idle":
            os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except ProcessLookupError:  # ended already; a refill replaces it
        pass


@dataclass
class Slot:
    """One auto-mode mask whose worker the pool keeps compiling."""

    name: str
    mask: Any
    pid: int
    started: float
    chars: int


@dataclass
class PoolLog:
    started: int = 0
    refused: int = 0
    ended: list[str] = field(default_factory=list)
    setup_s: list[float] = field(default_factory=list)
    leaked: list[int] = field(default_factory=list)


class CompilePool:
    """Keeps ``size`` background static compiles of heavy schemas running (``mode="auto"``), can
    freeze and continue their workers, and cancels them at the end, checking each process is gone.

    A schema's front-end (lowering, LR table, the dynamic engine) runs in this process when its
    mask is created; :meth:`refill` is only called between timed chunks."""

    def __init__(self, vocab, schemas: Iterator[tuple[str, dict]], size: int, placement: Placement,
                 worker_sched: str, max_seconds: Optional[float]):
        import glrmask

        self.glrmask = glrmask
        self.vocab = vocab
        self.schemas = schemas
        self.size = size
        self.placement = placement
        self.worker_sched = worker_sched
        self.limits = None if max_seconds is None else {"max_seconds": max_seconds}
        self.slots: list[Slot] = []
        self.paused = False
        self.log = PoolLog()

    def _start_one(self) -> None:
        from glrmask.errors import GlrmaskError

        for name, schema in self.schemas:
            t0 = time.perf_counter()
            try:
                mask = self.glrmask.compile_json_schema(schema, self.vocab, mode="auto", limits=self.limits)
            except GlrmaskError:
                self.log.refused += 1
                continue
            self.log.setup_s.append(time.perf_counter() - t0)
            pid = mask.static_compile_pid
            if pid is None:  # compiled already (a cache hit) or failed at once: no load from it
                self.log.ended.append(f"{name}: no worker ({mask.active_mode})")
                continue
            if pid == os.getpid():
                raise RuntimeError("the background compile runs in the decode loop's own process")
            place_worker(pid, self.placement, self.worker_sched)
            if self.paused:
                os.kill(pid, signal.SIGSTOP)
            self.slots.append(Slot(name, mask, pid, time.monotonic(), len(json.dumps(schema))))
            self.log.started += 1
            return
        raise RuntimeError("ran out of load schemas (widen --load-splits)")

    def running(self) -> int:
        """Workers the library reports (``static_compile_pid``) whose process still exists."""
        return sum(1 for s in self.slots if s.mask.static_compile_pid == s.pid and not process_gone(s.pid))

    def refill(self) -> None:
        keep = []
        for s in self.slots:
            if s.mask.static_compile_pid == s.pid and not process_gone(s.pid):
                keep.append(s)
                continue
            s.mask.wait_static(5)
            why = s.mask.active_mode if s.mask.static_error is None else str(s.mask.static_error).splitlines()[0]
            self.log.ended.append(f"{s.name}: after {time.monotonic() - s.started:.0f}s: {why[:120]}")
        self.slots = keep
        while len(self.slots) < self.size:
            self._start_one()

    def cpu_seconds(self) -> float:
        total = 0.0
        for s in self.slots:
            st = proc_stat(s.pid)
            if st is not None:
                total += st[1]
        return total

    def pause(self) -> None:
        """Freeze every worker and wait until each is stopped (state ``T``)."""
        self.paused = True
        for s in self.slots:
            try:
                os.kill(s.pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2.0
        for s in self.slots:
            while time.monotonic() < deadline:
                st = proc_stat(s.pid)
                if st is None or st[0] in ("T", "t", "Z", "X"):
                    break
                time.sleep(0.0002)

    def resume(self) -> None:
        self.paused = False
        for s in self.slots:
            try:
                os.kill(s.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """Continue, cancel and drop every compile; record any worker still there 10 s later."""
        self.resume()
        pids = [s.pid for s in self.slots]
        for s in self.slots:
            s.mask.cancel_static()
        for s in self.slots:  # joins the watcher, which removes the compile's job folder
            s.mask.wait_static(10)
        self.slots = []
        gc.collect()
        deadline = time.monotonic() + 10
        for pid in pids:
            while not process_gone(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if not process_gone(pid):
                self.log.leaked.append(pid)


# ------------------------------------------------------------------------------------------------
# Documents and schemas
# ------------------------------------------------------------------------------------------------

def maskbench_records(splits: Sequence[str]) -> Iterator[tuple[str, dict]]:
    for split in splits:
        with gzip.open(MASKBENCH / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                yield split, json.loads(line)


def valid_instances(limit: int) -> list[object]:
    """``limit`` valid MaskBench instances taken evenly over the ten splits (as bench/mask_bench.py)."""
    out: list[object] = []
    for _split, rec in maskbench_records(SPLITS):
        out.extend(t["data"] for t in rec.get("tests", []) if t["valid"])
    if limit and limit < len(out):
        picks = np.linspace(0, len(out) - 1, limit).round().astype(int)
        out = [out[i] for i in picks]
    return out


def heavy_records(splits: Sequence[str], min_chars: int, max_chars: int) -> Iterator[tuple[str, dict]]:
    """``(split/file, record)`` for the schemas of ``splits`` whose JSON text is ``min_chars``..
    ``max_chars`` long, the splits taken in turn (big schemas compile for long: many properties,
    long strings, deep nesting)."""
    iters = [maskbench_records([s]) for s in splits]
    while iters:
        for it in list(iters):
            for split, rec in it:
                n = len(json.dumps(rec["schema"]))
                if min_chars <= n <= max_chars:
                    yield f"{split}/{rec['file']}", rec
                    break
            else:
                iters.remove(it)


def heavy_schemas(splits: Sequence[str], min_chars: int, max_chars: int) -> Iterator[tuple[str, dict]]:
    for name, rec in heavy_records(splits, min_chars, max_chars):
        yield name, rec["schema"]


# ------------------------------------------------------------------------------------------------
# Part A: a static decode loop beside M compiles
# ------------------------------------------------------------------------------------------------

@dataclass
class PartA:
    quiet: list[np.ndarray] = field(default_factory=list)
    loaded: list[np.ndarray] = field(default_factory=list)
    quiet_s: float = 0.0
    loaded_s: float = 0.0
    quiet_worker_cpu_s: float = 0.0
    loaded_worker_cpu_s: float = 0.0
    dropped_chunks: int = 0
    running_seen: list[int] = field(default_factory=list)
    pids_seen: set[int] = field(default_factory=set)
    rejects: int = 0
    load_before: tuple = ()
    load_after: tuple = ()


def part_a(mask, docs: list[list[int]], pool: CompilePool, seconds: float, chunk_s: float) -> PartA:
    """Alternate quiet and loaded chunks for ``seconds``. A pair of chunks replays the same
    documents (the first of the pair runs for ``chunk_s``, the second replays what it did), the
    documents taken cyclically; the pair's order alternates (ABBA) so neither condition always
    comes right after a switch."""
    res = PartA(load_before=os.getloadavg())
    # warm-up: every document once, nothing compiling (first touches of the mask's arrays)
    gc.freeze()  # what is alive now (vocabulary, masks) stays out of the collections between documents
    pool.pause()
    for ids in docs:
        replay_document(*glrmask_request(mask), ids)

    def enter(cond: str) -> None:
        if cond == "loaded":
            pool.refill()
            gc.freeze()  # a new load mask's objects: out of the per-document collections
            pool.resume()
            res.running_seen.append(pool.running())
            res.pids_seen.update(s.pid for s in pool.slots)
        else:
            pool.pause()

    def replay(start: int, n: Optional[int]) -> tuple[list[np.ndarray], int]:
        samples, t_stop, i = [], time.perf_counter() + chunk_s, start
        while (n is None and time.perf_counter() < t_stop) or (n is not None and i - start < n):
            r = replay_document(*glrmask_request(mask), docs[i % len(docs)])
            res.rejects += r.outcome != ACCEPTED
            samples.append(r.tbm_ns)
            gc.collect()
            i += 1
        return samples, i - start

    t_end = time.monotonic() + seconds
    pos, pair = 0, 0
    while time.monotonic() < t_end:
        n = None
        for cond in (("quiet", "loaded") if pair % 2 == 0 else ("loaded", "quiet")):
            enter(cond)
            pids0 = [s.pid for s in pool.slots]
            cpu0, t0 = pool.cpu_seconds(), time.perf_counter()
            samples, n = replay(pos, n)
            wall, cpu = time.perf_counter() - t0, pool.cpu_seconds() - cpu0
            if cond == "loaded":
                if pool.running() < pool.size or [s.pid for s in pool.slots] != pids0:
                    res.dropped_chunks += 1  # a compile ended inside the chunk: not M throughout
                    continue
                res.loaded += samples
                res.loaded_s += wall
                res.loaded_worker_cpu_s += cpu
            else:
                res.quiet += samples
                res.quiet_s += wall
                res.quiet_worker_cpu_s += cpu
        pos = (pos + n) % len(docs)
        pair += 1
    pool.resume()
    res.load_after = os.getloadavg()
    return res


# ------------------------------------------------------------------------------------------------
# Part B: auto-mode requests while their own compile runs, and llguidance
# ------------------------------------------------------------------------------------------------

@dataclass
class SchemaRun:
    name: str
    chars: int
    docs: int
    setup_s: float
    glr_running: list[np.ndarray] = field(default_factory=list)   # auto mask, compile running, dynamic
    glr_after: list[np.ndarray] = field(default_factory=list)     # auto mask, tokens after the compile ended
    ll_running: list[np.ndarray] = field(default_factory=list)
    glr_quiet: list[np.ndarray] = field(default_factory=list)     # fresh dynamic mask, no compile
    ll_quiet: list[np.ndarray] = field(default_factory=list)
    rejects: dict = field(default_factory=dict)
    compile_s: Optional[float] = None                             # when it ended by itself
    compile_end: str = "cancelled while running"
    order: str = ""
    worker_gone: Optional[bool] = None
    load: tuple = ()


def own_candidates(splits: Sequence[str], vocab, ll: Optional[LlguidanceEngine], want: int, min_chars: int,
                   max_chars: int, max_docs: int, max_tokens: int) -> Iterator[tuple[str, dict, list[list[int]]]]:
    """Heavy schemas with valid instances that llguidance compiles (when installed): the next such
    schema of each split in turn, ``want`` in all; each with its tokenized instances."""
    from glrmask.json_schema.reorder import reorder_to_schema

    tok = vocab.tokenizer

    def usable(split: str) -> Iterator[tuple[str, dict]]:
        for name, rec in heavy_records([split], min_chars, max_chars):
            if not any(t["valid"] for t in rec.get("tests", [])):
                continue
            if ll is not None:
                try:
                    ll.release(ll.compile("json_schema", rec["schema"]))
                except Exception:  # llguidance refuses it: no comparison possible
                    continue
            yield name, rec

    iters = [usable(s) for s in splits]
    while iters and want > 0:
        for it in list(iters):
            got = next(it, None)
            if got is None:
                iters.remove(it)
                continue
            name, rec = got
            schema = rec["schema"]
            valid = [t["data"] for t in rec["tests"] if t["valid"]][:max_docs]
            texts = [json.dumps(reorder_to_schema(d, schema), ensure_ascii=False) for d in valid]
            yield name, schema, [tok.encode(t, add_special_tokens=False).ids[:max_tokens or None] for t in texts]
            want -= 1
            if want <= 0:
                return


def part_b_schema(name: str, schema: dict, docs: list[list[int]], vocab, ll: Optional[LlguidanceEngine],
                  placement: Placement, worker_sched: str, quiet_first: bool) -> SchemaRun:
    """One schema's part B. Every engine object is built before the timed passes, the auto mask
    last (its compile starts with it, so it only runs while measured); ``quiet_first`` puts the
    pass without a compile first (the caller alternates it, so neither pass is always the colder
    one), the auto mask then being created right before its pass."""
    import glrmask

    rejects = {"glrmask auto": 0, "llguidance": 0, "glrmask dynamic": 0, "llguidance quiet": 0}
    ll_running = ll.compile("json_schema", schema).handle if ll is not None else None
    ll_quiet = ll.compile("json_schema", schema).handle if ll is not None else None
    quiet_mask = glrmask.compile_json_schema(schema, vocab, mode="dynamic")
    gc.freeze()

    def quiet_pass(run: SchemaRun) -> None:
        for ids in docs:
            r = replay_document(*glrmask_request(quiet_mask), ids)
            rejects["glrmask dynamic"] += r.outcome != ACCEPTED
            run.glr_quiet.append(r.tbm_ns)
            if ll is not None:
                r = replay_document(*llguidance_request(ll, ll_quiet), ids)
                rejects["llguidance quiet"] += r.outcome != ACCEPTED
                run.ll_quiet.append(r.tbm_ns)
            gc.collect()

    pending: list[SchemaRun] = []
    if quiet_first:
        pending.append(SchemaRun(name, len(json.dumps(schema)), len(docs), 0.0))
        quiet_pass(pending[0])
    t0 = time.perf_counter()
    auto = glrmask.compile_json_schema(schema, vocab, mode="auto")
    run = pending[0] if pending else SchemaRun(name, len(json.dumps(schema)), len(docs), 0.0)
    run.setup_s, run.load = time.perf_counter() - t0, os.getloadavg()
    run.order = "quiet first" if quiet_first else "compile first"
    pid = auto.static_compile_pid
    if pid is None:
        run.compile_end = f"no background compile ({auto.active_mode})"
    else:
        if pid == os.getpid():
            raise RuntimeError("the background compile runs in the decode loop's own process")
        place_worker(pid, placement, worker_sched)
    t_compile = time.monotonic()
    gc.freeze()

    def compiling() -> bool:
        return auto.static_compile_pid is not None and auto.active_mode == "dynamic"

    for ids in docs:
        r = replay_document(*glrmask_request(auto), ids, probe=compiling)
        rejects["glrmask auto"] += r.outcome != ACCEPTED
        run.glr_running.append(r.tbm_ns[r.tags])
        run.glr_after.append(r.tbm_ns[~r.tags])
        if ll is not None:
            still = compiling()
            r = replay_document(*llguidance_request(ll, ll_running), ids)
            rejects["llguidance"] += r.outcome != ACCEPTED
            if still and compiling():
                run.ll_running.append(r.tbm_ns)
        gc.collect()
    if pid is not None:
        if auto.static_compile_pid is None:
            auto.wait_static(5)
            run.compile_s = time.monotonic() - t_compile
            run.compile_end = ("finished: requests now static" if auto.active_mode == "static"
                               else f"failed: {str(auto.static_error).splitlines()[0][:100]}")
        auto.cancel_static()
        auto.wait_static(10)  # joins the watcher, which removes the compile's job folder
        deadline = time.monotonic() + 10
        while not process_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        run.worker_gone = process_gone(pid)
    if not quiet_first:
        quiet_pass(run)
    run.rejects = rejects
    return run


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def us(ns: float) -> str:
    if ns != ns:
        return "–"
    v = ns / 1e3
    return f"{v:,.0f}" if v >= 1000 else f"{v:.1f}"


def row(label: str, ns: np.ndarray) -> list[str]:
    if not len(ns):
        return [label, "0"] + ["–"] * (len(QUANTILES) + 3)
    qs = np.percentile(ns, QUANTILES)
    return ([label, f"{len(ns):,}"] + [us(q) for q in qs] + [us(float(ns.max())), us(float(ns.mean())),
                                                             f"{int(np.count_nonzero(ns > 1_000_000)):,}"])


def ratio_row(label: str, num: np.ndarray, den: np.ndarray) -> list[str]:
    if not len(num) or not len(den):
        return [label, ""] + ["–"] * (len(QUANTILES) + 3)
    qn, qd = np.percentile(num, QUANTILES), np.percentile(den, QUANTILES)
    return ([label, ""] + [f"{a / b:.2f}×" for a, b in zip(qn, qd)]
            + [f"{num.max() / den.max():.2f}×", f"{num.mean() / den.mean():.2f}×", ""])


def md_table(rows: list[list[str]]) -> str:
    header = ["condition", "tokens"] + [f"p{q:g}" for q in QUANTILES] + ["max", "mean", "tokens > 1 ms"]
    ws = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    out = ["| " + " | ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, ws))) + " |",
           "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(ws)) + "|"]
    for r in rows:
        out.append("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, ws)))
                   + " |")
    return "\n".join(out)


def fmt_load(t: tuple) -> str:
    return "/".join(f"{x:.2f}" for x in t) if t else "?"


def checkout() -> str:
    """The commit measured and whether the library's sources differ from it (a shared working tree)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "glrmask", "glrmask_ext"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "commit unknown"
    changed = [line[3:] for line in dirty if line.strip()]
    return f"commit {head or '?'}" + (f" plus uncommitted changes to {', '.join(changed)}" if changed else "")


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def report_a(a: PartA, pool: CompilePool, args, n_docs: int) -> str:
    q, l = cat(a.quiet), cat(a.loaded)
    lines = [
        f"### A. static json.lark decode loop, {args.compiles} background compile(s) beside it",
        "",
        f"{n_docs} valid MaskBench documents (compact), replayed cyclically in chunks of {args.chunk_ms:g} ms "
        f"alternating quiet/loaded (ABBA, both chunks of a pair on the same documents) for "
        f"{args.seconds:g} s; {a.rejects} rejected replays (must be 0). Load average (1/5/15 min) "
        f"{fmt_load(a.load_before)} before, {fmt_load(a.load_after)} after.",
        "",
        "**TBM = fill_mask + commit (µs)**",
        "",
        md_table([row("(1) quiet: workers frozen", q), row("(2) loaded: workers compiling", l),
                  ratio_row("(2) / (1)", l, q)]),
        "",
        f"- compile workers: {pool.log.started} started (each in its own process: pid ≠ the decode loop's "
        f"{os.getpid()}), {len(a.pids_seen)} distinct pids seen during loaded chunks; running at the start of "
        f"each loaded chunk: {_counts(a.running_seen)}; loaded chunks dropped because a compile ended inside: "
        f"{a.dropped_chunks}.",
        f"- worker CPU while loaded: {a.loaded_worker_cpu_s:.1f} s in {a.loaded_s:.1f} s of loaded chunks "
        f"({a.loaded_worker_cpu_s / max(a.loaded_s, 1e-9):.2f} cores busy compiling); while quiet: "
        f"{a.quiet_worker_cpu_s:.2f} s in {a.quiet_s:.1f} s (frozen).",
        "- front-end time per load schema in the decode process (untimed, between chunks): "
        + (f"median {np.median(pool.log.setup_s):.1f} s, max {max(pool.log.setup_s):.1f} s"
           if pool.log.setup_s else "–")
        + f"; schemas refused by the front-end: {pool.log.refused}.",
        f"- compiles that ended during the run: {len(pool.log.ended)}"
        + ("".join(f"\n  - {e}" for e in pool.log.ended[:12])),
        f"- workers still alive 10 s after cancel_static(): {pool.log.leaked or 'none'}.",
    ]
    return "\n".join(lines)


def _counts(xs: list[int]) -> str:
    if not xs:
        return "–"
    vals, cnt = np.unique(np.asarray(xs), return_counts=True)
    return ", ".join(f"{v} ×{c}" for v, c in zip(vals.tolist(), cnt.tolist()))


def p50_p999(ns: np.ndarray) -> str:
    if not len(ns):
        return "–"
    a, b = np.percentile(ns, [50, 99.9])
    return f"{us(a)} / {us(b)}"


def report_b(runs: list[SchemaRun], ll: Optional[LlguidanceEngine], ll_missing: str, args) -> str:
    gr, ga, lr = cat(sum((r.glr_running for r in runs), [])), cat(sum((r.glr_after for r in runs), [])), \
        cat(sum((r.ll_running for r in runs), []))
    gq, lq = cat(sum((r.glr_quiet for r in runs), [])), cat(sum((r.ll_quiet for r in runs), []))
    rows = [row("glrmask auto, own compile running (dynamic)", gr),
            row("llguidance, same docs, same compile running", lr),
            ratio_row("glrmask auto / llguidance (compile running)", gr, lr),
            row("glrmask dynamic, no compile", gq),
            row("llguidance, no compile", lq),
            ratio_row("glrmask: compile running / none", gr, gq),
            ratio_row("llguidance: compile running / none", lr, lq)]
    if len(ga):
        rows.insert(1, row("glrmask auto, after its compile ended", ga))
    lines = [
        "### B. auto-mode requests while their own compile runs (the dynamic path), beside llguidance",
        "",
        f"Up to {args.own_docs} valid instances per schema (keys in schema order), the first "
        f"{args.own_max_tokens or 'all'} tokens of each; glrmask tokens count as \"compile running\" when the "
        f"worker was alive and the mask dynamic both before and after the token; llguidance "
        f"{ll.version if ll is not None else '–'} replays each document right after glrmask, and counts when the "
        f"compile was running before and after that document. No compile: the compile cancelled, a fresh "
        f"`mode=\"dynamic\"` mask and a freshly compiled llguidance matcher.",
        "",
        "**TBM (µs), pooled over the schemas below**",
        "",
        md_table(rows),
        "",
        "| schema | chars | docs | order | auto front-end (s) | compile | worker gone after cancel | load avg | rejects "
        "| glrmask p50 / p99.9 (µs, compile running) | llguidance p50 / p99.9 (µs, compile running) |",
        "|---|---:|---:|---|---:|---|---|---|---|---:|---:|",
    ]
    for r in runs:
        end = r.compile_end if r.compile_s is None else f"{r.compile_end} after {r.compile_s:.0f} s"
        rej = ", ".join(f"{k} {v}" for k, v in r.rejects.items() if v) or "none"
        lines.append(f"| {r.name} | {r.chars:,} | {r.docs} | {r.order} | {r.setup_s:.1f} | {end} | {r.worker_gone} | "
                     f"{fmt_load(r.load)} | {rej} | {p50_p999(cat(r.glr_running))} | {p50_p999(cat(r.ll_running))} |")
    if ll is None:
        lines += ["", f"llguidance not measured: {ll_missing}"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=400, help="K: documents of the static decode loop (part A)")
    ap.add_argument("--compiles", type=int, default=1, help="M: background compiles kept running in part A")
    ap.add_argument("--seconds", type=float, default=30.0, help="part A: how long quiet/loaded chunks alternate")
    ap.add_argument("--chunk-ms", type=float, default=250.0,
                    help="part A: length of a quiet or loaded chunk (both of a pair replay the same documents)")
    ap.add_argument("--load-splits", default=",".join(LOAD_SPLITS), help="MaskBench splits of the heavy schemas")
    ap.add_argument("--min-chars", type=int, default=20_000, help="heavy schema: JSON text at least this long")
    ap.add_argument("--max-chars", type=int, default=200_000, help="heavy schema: JSON text at most this long")
    ap.add_argument("--compile-max-seconds", type=float, default=None,
                    help="part A: the load compiles' max_seconds (default: compile_json_schema's 30 s)")
    ap.add_argument("--own-schemas", type=int, default=6, help="part B: schemas replayed on their own auto mask")
    ap.add_argument("--own-docs", type=int, default=2, help="part B: valid instances per schema at most")
    ap.add_argument("--own-max-tokens", type=int, default=800,
                    help="part B: replay each instance's first N tokens (0: all; the dynamic path is slow)")
    ap.add_argument("--placement", choices=["os", "split", "same"], default="os",
                    help="os: nothing pinned; split: decode loop and workers on different cores; same: one core")
    ap.add_argument("--worker-sched", choices=["default", "nice", "idle"], default="default",
                    help="lower the compile workers' priority (nice 19 / SCHED_IDLE) — the library does neither")
    ap.add_argument("--skip-own", action="store_true", help="part A only")
    ap.add_argument("--skip-static", action="store_true", help="part B only")
    ap.add_argument("--out", default=str(RESULTS / "compile_interference.md"), help="markdown report")
    ap.add_argument("--append", action="store_true", help="append the report to --out instead of replacing it")
    args = ap.parse_args()
    if not MASKBENCH.exists() or not TOKENIZER.exists():
        sys.exit(f"shared data not found under {SHARED}")
    load_splits = [s for s in args.load_splits.split(",") if s]
    unknown = set(load_splits) - set(SPLITS)
    if unknown:
        sys.exit(f"unknown splits: {sorted(unknown)}")
    if args.compiles < 1:
        sys.exit("--compiles must be at least 1")
    # the workers are fresh interpreters (python -m glrmask.background_compile): make this checkout
    # importable for them even where it is not the installed glrmask
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])

    import glrmask
    from glrmask.errors import GlrmaskError

    placement = Placement.named(args.placement)
    if placement.decode is not None:
        os.sched_setaffinity(0, placement.decode)
    t_start = time.time()
    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    argv = " ".join(sys.argv[1:])
    sections = [
        "## TBM while background compiles run (issue #12, item 3)",
        "",
        f"`python bench/compile_interference_bench.py{' ' + argv if argv else ''}` — {stamp}; {machine()}; "
        f"load average at start {fmt_load(os.getloadavg())} (other processes on the machine count in it); "
        f"placement: {placement.describe()}; worker priority: {args.worker_sched}; "
        f"glrmask {glrmask.__version__} (this repo, {checkout()}), Llama-3.1 vocabulary.",
    ]

    if not args.skip_static:
        mask = glrmask.compile(str(JSON_GRAMMAR), vocab, mode="static")
        docs = [e.ids for e in vocab.tokenizer.encode_batch(
            [json.dumps(d, ensure_ascii=False) for d in valid_instances(args.docs)], add_special_tokens=False)]
        pool = CompilePool(vocab, heavy_schemas(load_splits, args.min_chars, args.max_chars), args.compiles,
                           placement, args.worker_sched, args.compile_max_seconds)
        try:
            print(f"# part A: starting {args.compiles} background compile(s)", file=sys.stderr, flush=True)
            pool.refill()
            a = part_a(mask, docs, pool, args.seconds, args.chunk_ms / 1e3)
        finally:
            pool.close()
        sections += ["", report_a(a, pool, args, len(docs))]
        print(f"# part A done ({time.time() - t_start:.0f}s)", file=sys.stderr, flush=True)

    if not args.skip_own:
        ll, ll_missing = None, ""
        try:
            ll = LlguidanceEngine(TOKENIZER, eos=EOS)
        except Unavailable as e:
            ll_missing = f"{e.reason}; install: {e.install}"
        runs = []
        for i, (name, schema, docs) in enumerate(own_candidates(load_splits, vocab, ll, args.own_schemas, args.min_chars,
                                                 args.max_chars, args.own_docs, args.own_max_tokens)):
            print(f"# part B: {name} ({len(docs)} docs)", file=sys.stderr, flush=True)
            try:
                runs.append(part_b_schema(name, schema, docs, vocab, ll, placement, args.worker_sched,
                                          quiet_first=i % 2 == 1))
            except GlrmaskError as e:
                print(f"# part B: glrmask refused {name}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        sections += ["", report_b(runs, ll, ll_missing, args)]
        print(f"# part B done ({time.time() - t_start:.0f}s)", file=sys.stderr, flush=True)

    sections += ["", f"Whole run {time.time() - t_start:.0f} s; load average at the end {fmt_load(os.getloadavg())}."]
    report = "\n".join(sections) + "\n"
    print(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sep = "\n" if args.append and out.exists() and out.stat().st_size else ""
    with out.open("a" if args.append else "w", encoding="utf-8") as f:
        f.write(sep + report)


if __name__ == "__main__":
    main()
