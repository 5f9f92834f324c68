"""Lexer construction time on JSONSchemaBench (``glrmask.lexer.Lexer(terminals)``), and a check
that the compiled programs did not change.

For the first ``--per-split`` schemas of each JSONSchemaBench/MaskBench split
(``../shared/data/jsonschemabench/maskbench/*.jsonl.gz``), the schema is lowered and normalized
(not timed) and its terminals ``[(name, pattern), ...]`` are handed to ``Lexer``. Two regimes:

* ``warm``: every schema once, in order, in this process: the process-wide caches (code point
  sets, byte automata, parsed patterns) hold what the schemas before it left, as in a server that
  has compiled other schemas already;
* ``cold``: every schema in a fresh forked child of a process that has only built the Unicode
  tables (``\\w``, ``\\d``, ``\\s``, case folding: a once-per-process cost, reported apart), as in
  ``bench/compile_stages_bench.py``'s ``lazy lexer`` column.

Prints p50 / p90 / p99 / max in milliseconds for each regime: CPU time of the constructing
process (``time.process_time``), which a machine shared with other jobs disturbs far less than
wall time (construction is single-threaded and does no I/O). ``--save FILE`` writes, per schema,
a fingerprint of the whole compiled program (every instruction, class, lookahead start, repeat
count, terminal program, byte groups and the initial lexer state) or the error's type and
message; ``--check FILE`` compares against such a file, so an optimization of the compiler can
prove it builds the very same programs (and raises the same errors) on the sample. Each entry
also holds a hash of the schema's terminals: a schema whose terminals changed since (the
lowering changed) is reported and not compared. Both run
under ``PYTHONHASHSEED=0`` (the script re-executes itself so): the JSON Schema lowering orders
some alternatives by set iteration, so a terminal's pattern can differ between processes.

    python bench/lexer_construction_bench.py --per-split 5 --save bench/results/lexer_programs.json
    python bench/lexer_construction_bench.py --per-split 5 --check bench/results/lexer_programs.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maskbench_data import MASKBENCH, first_schemas  # noqa: E402
from glrmask.errors import GlrmaskError  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.lexer import charsets  # noqa: E402

DATA = MASKBENCH


def load_terminals(per_split: int) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(label, terminals)`` of the first ``per_split`` schemas of each split that lower."""
    out = []
    for split, i, schema in first_schemas(per_split, DATA):
        try:
            g, _ = lower_json_schema_ir(schema)
            ng = normalize(g)
        except GlrmaskError:
            continue
        out.append((f"{split}#{i}", [(t.name, t.pattern) for t in ng.terminals.values()]))
    return out


def fingerprint(lx: Lexer) -> str:
    """sha256 over everything construction produced that the lexer later reads."""
    p = lx.prog
    h = hashlib.sha256()
    for part in (p.kind, p.a, p.b, p.c, p.d, [bc.cps for bc in p.classes], p.look_starts,
                 p.n_reps, [(t.name, t.pattern, t.start, t.tracker_starts,
                             sorted(t.word_slots.items()), t.classes) for t in lx.terms],
                 lx.byte_groups, [list(g) for g in lx._gid], lx._grep, lx.initial, lx._js,
                 lx._ts):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def terminals_hash(terms: list[tuple[str, str]]) -> str:
    return hashlib.sha256(repr(terms).encode()).hexdigest()[:16]


def construct(terms: list[tuple[str, str]]) -> tuple[float, str]:
    """CPU seconds to build the lexer, and its fingerprint (or ``error: Type: message``)."""
    t = time.process_time()
    try:
        lx = Lexer(terms)
    except GlrmaskError as e:
        return time.process_time() - t, f"error: {type(e).__name__}: {e}"
    secs = time.process_time() - t
    return secs, fingerprint(lx)


def _child(conn, terms) -> None:
    conn.send(construct(terms))
    conn.close()


def construct_forked(ctx, terms) -> tuple[float, str]:
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, terms))
    proc.start()
    child.close()
    res = parent.recv()
    proc.join()
    return res


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def summary(name: str, secs: list[float]) -> str:
    ms = [s * 1e3 for s in secs]
    return (f"{name:5s} n={len(ms)}  p50 {pct(ms, .5):8.2f}  p90 {pct(ms, .9):8.2f}  "
            f"p99 {pct(ms, .99):8.2f}  max {max(ms):8.2f}  sum {sum(ms):9.1f}  (ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-split", type=int, default=5, help="schemas per split (the first ones)")
    ap.add_argument("--regime", choices=("warm", "cold", "both"), default="both")
    ap.add_argument("--save", type=Path, help="write the per-schema fingerprints here")
    ap.add_argument("--check", type=Path, help="compare the fingerprints with this file")
    ap.add_argument("--slowest", type=int, default=5, help="list this many slowest schemas")
    args = ap.parse_args()
    if (args.save or args.check) and os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

    t = time.perf_counter()
    sample = load_terminals(args.per_split)
    print(f"{len(sample)} schemas lowered in {time.perf_counter() - t:.1f} s "
          f"({sum(len(ts) for _, ts in sample)} terminals)")
    t = time.perf_counter()
    for cat in ("CATEGORY_WORD", "CATEGORY_DIGIT", "CATEGORY_SPACE"):
        charsets.category_set(getattr(charsets.C, cat), False)
    charsets.cased_codepoints()
    print(f"Unicode tables (once per process): {(time.perf_counter() - t) * 1e3:.0f} ms")

    prints: dict[str, str] = {}
    inputs = {label: terminals_hash(terms) for label, terms in sample}
    regimes = ("cold", "warm") if args.regime == "both" else (args.regime,)
    for regime in regimes:
        ctx = mp.get_context("fork")
        secs, labels = [], []
        for label, terms in sample:
            s, fp = construct_forked(ctx, terms) if regime == "cold" else construct(terms)
            secs.append(s)
            labels.append(label)
            if prints.setdefault(label, fp) != fp:
                raise SystemExit(f"{label}: the {regime} program differs from the other regime's")
        print(summary(regime, secs))
        slow = sorted(zip(secs, labels), reverse=True)[: args.slowest]
        print("      slowest: " + ", ".join(f"{lb} {s * 1e3:.0f}" for s, lb in slow))

    n_err = sum(fp.startswith("error") for fp in prints.values())
    print(f"{n_err} schemas raise while constructing the lexer")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        saved = {lb: {"terminals": inputs[lb], "program": fp} for lb, fp in prints.items()}
        args.save.write_text(json.dumps(saved, indent=0, sort_keys=True) + "\n")
        print(f"fingerprints written to {args.save}")
    if args.check:
        want: dict[str, Any] = json.loads(args.check.read_text())
        missing = [lb for lb in prints if lb not in want]
        changed = [lb for lb in prints if lb in want and want[lb]["terminals"] != inputs[lb]]
        bad = [lb for lb in prints if lb in want and lb not in changed
               and want[lb]["program"] != prints[lb]]
        for lb in bad:
            print(f"  DIFFERENT {lb}: want {want[lb]['program'][:120]!r} got {prints[lb][:120]!r}")
        print(f"check against {args.check}: "
              f"{len(prints) - len(bad) - len(missing) - len(changed)} identical, "
              f"{len(bad)} different, {len(changed)} with other terminals now (not compared: "
              f"{', '.join(changed) or '-'}), {len(missing)} not in the file")
        if bad:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
