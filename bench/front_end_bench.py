"""Front-end CPU time of ``compile_json_schema``: the JSON Schema lowering and the normalizer.

For every new schema, ``compile_json_schema`` first lowers it to the grammar IR
(:func:`glrmask.json_schema.lower_json_schema_ir`) and then normalizes that IR
(:func:`glrmask.grammar.normalize.normalize`, native by default) before the LR table and the lexer
are built; on the large JSONSchemaBench schemas these two stages were a large part of the time to
the first mask. ``--python-normalize`` also times the Python reference normalizer on each schema.

For the first ``--per-split`` schemas (default 10) of each JSONSchemaBench/MaskBench split
(``../shared/data/jsonschemabench/maskbench/*.jsonl.gz``), each stage runs ``--repeat`` times
(the least CPU time is kept: ``time.process_time``, since the machine is shared) and the script
prints p50 / p90 / p99 / max CPU milliseconds of each stage over the schemas, plus the slowest
ones. Schemas the lowering or the normalizer refuses are counted apart (the time of a refusal is
still a time the caller waits, so it is included).

``--snapshot PATH`` instead records, for the sample and the grammars of ``grammars/`` and
``tests/data/grammars/``, a digest of each lowered IR and each normalized grammar (or the error
each stage raised): the reference that ``tests/test_front_end_equivalence.py`` holds the current
code to, so that a speed-up can be shown to change no rule, name or order.

    python3 bench/front_end_bench.py
    python3 bench/front_end_bench.py --per-split 25 --repeat 3
    python3 bench/front_end_bench.py --per-split 20 --python-normalize
    python3 bench/front_end_bench.py --snapshot bench/results/front_end_snapshot.json --per-split 25
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from maskbench_data import MASKBENCH, first_schemas  # noqa: E402
from glrmask.errors import GlrmaskError  # noqa: E402
from glrmask.grammar.ir import Grammar  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402

DATA = MASKBENCH
CORPUS = ROOT / "tests" / "data" / "jsonschema" / "lowering_corpus.jsonl"


def maskbench(per_split: int) -> Iterator[tuple[str, Any]]:
    """``(name, schema)`` for the first ``per_split`` schemas of every split, splits sorted."""
    for split, i, schema in first_schemas(per_split, DATA):
        yield f"{split}[{i}]", schema


def digest(run: Callable[[], Grammar]) -> tuple[str, Grammar | None]:
    """The sha256 of the grammar's exact JSON form, or ``"!Type: message"`` when ``run`` raises
    (a refusal must stay the same refusal, whatever its kind)."""
    try:
        g = run()
    except Exception as exc:  # noqa: BLE001 - every refusal is recorded as it is
        return f"!{type(exc).__name__}: {exc}", None
    # the repository's own path (a Lark grammar's source name) is not part of what is compared
    return hashlib.sha256(g.to_json().replace(str(ROOT), "<repo>").encode()).hexdigest(), g


def snapshot(per_split: int) -> dict[str, dict[str, str]]:
    """Digests of the lowered and normalized grammar of every case (see the module docstring)."""
    out: dict[str, dict[str, str]] = {}

    def add(name: str, front: Callable[[], Grammar]) -> None:
        lowered, g = digest(front)
        rec = {"lowered": lowered}
        if g is not None:
            rec["normalized"] = digest(lambda: normalize(g))[0]
        out[name] = rec

    for name, schema in maskbench(per_split):
        add(name, lambda: lower_json_schema_ir(schema)[0])
    for i, line in enumerate(CORPUS.read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        add(f"corpus[{i}]", lambda: lower_json_schema_ir(rec["schema"], **rec["options"])[0])
    paths = sorted((ROOT / "grammars").glob("*.lark")) + sorted((ROOT / "tests" / "data" / "grammars").glob("*/grammar.lark"))
    for path in paths:
        add(str(path.relative_to(ROOT)), lambda: load_grammar(path))
    return out


def cpu_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        try:
            result = fn()
        except GlrmaskError as exc:
            result = exc
        best = min(best, (time.process_time() - t0) * 1000.0)
    return best, result


def percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (the value below which a fraction ``q`` of the sample lies)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))
    return s[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-split", type=int, default=10, help="schemas per split (default 10)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per stage and schema; the least CPU time is kept")
    ap.add_argument("--slowest", type=int, default=6, help="list this many slowest schemas per stage")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="cProfile both stages on the N slowest schemas (by lowering + normalize) and print the top")
    ap.add_argument("--python-normalize", action="store_true",
                    help="also time the Python reference normalizer (normalize(native=False)) on each schema, "
                         "interleaved with the native one, as the row 'normalize (python)'")
    ap.add_argument("--snapshot", type=Path, help="write the equivalence snapshot to this path instead")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no JSONSchemaBench data at {DATA}", file=sys.stderr)
        return 1
    if args.snapshot:
        snap = snapshot(args.per_split)
        args.snapshot.write_text(json.dumps({"per_split": args.per_split, "cases": snap}, indent=1) + "\n")
        print(f"{len(snap)} cases written to {args.snapshot}")
        return 0
    rows = []
    refused = {"lowering": 0, "normalize": 0}
    for name, schema in maskbench(args.per_split):
        t_low, g = cpu_ms(lambda: lower_json_schema_ir(schema)[0], args.repeat)
        if isinstance(g, GlrmaskError):
            refused["lowering"] += 1
            rows.append((name, schema, t_low, None, None))
            continue
        t_norm, n = cpu_ms(lambda: normalize(g), args.repeat)
        if isinstance(n, GlrmaskError):
            refused["normalize"] += 1
        t_py = cpu_ms(lambda: normalize(g, native=False), args.repeat)[0] if args.python_normalize else None
        rows.append((name, schema, t_low, t_norm, t_py))
    print(f"{len(rows)} schemas ({args.per_split} per split), CPU ms, least of {args.repeat}; "
          f"refused: lowering {refused['lowering']}, normalize {refused['normalize']}")
    print(f"{'stage':<18} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'total':>9}")
    stages = [("lowering", 2), ("normalize", 3), ("both", None)]
    if args.python_normalize:
        stages.insert(2, ("normalize (python)", 4))
    for stage, col in stages:
        xs = [r[2] + (r[3] or 0.0) if col is None else r[col] for r in rows if col is None or r[col] is not None]
        print(f"{stage:<18} {percentile(xs, .5):8.2f} {percentile(xs, .9):8.2f} {percentile(xs, .99):8.2f} "
              f"{max(xs):8.2f} {sum(xs):9.1f}")
    for stage, col in (("lowering", 2), ("normalize", 3)):
        worst = sorted((r for r in rows if r[col] is not None), key=lambda r: -r[col])[:args.slowest]
        print(f"slowest {stage}: " + ", ".join(f"{r[0]} {r[col]:.1f}" for r in worst))
    if args.profile:
        worst = sorted(rows, key=lambda r: -(r[2] + (r[3] or 0.0)))[:args.profile]
        prof = cProfile.Profile(time.process_time)
        for _, schema, *_ in worst:
            prof.enable()
            try:
                normalize(lower_json_schema_ir(schema)[0])
            except GlrmaskError:
                pass
            prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
