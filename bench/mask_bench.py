"""Time between masks (get_mask + commit per token) replaying valid JSON documents, MaskBench style.

Usage:
    python bench/mask_bench.py [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]
                               [--grammar grammars/json.lark] [--docs tests/data/json_documents.jsonl]
                               [--limit N] [--mode dynamic|static]

Prints p50/p90/p99/p99.9/max and mean of the per-token time, and compile time (TTFM includes the
first mask). Peers (llguidance, xgrammar, outlines-core) are not wired in yet: they belong with
the static-mask benchmark of the offline compiler.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import glrmask  # noqa: E402


def percentiles(samples_us: list[float]) -> str:
    a = np.asarray(samples_us)
    ps = np.percentile(a, [50, 90, 99, 99.9])
    return (f"p50 {ps[0]:8.1f}  p90 {ps[1]:8.1f}  p99 {ps[2]:8.1f}  p99.9 {ps[3]:8.1f}  "
            f"max {a.max():8.1f}  mean {a.mean():8.1f}  (µs, n={len(a)})")


def bench_glrmask(grammar: Path, vocab, docs: list[str], mode: str = "dynamic") -> None:
    t0 = time.perf_counter()
    mask = glrmask.compile(grammar, vocab, mode=mode)
    state = mask.start()
    mask.get_mask(state)
    ttfm = time.perf_counter() - t0
    samples: list[float] = []
    rejected = 0
    for text in docs:
        state = mask.start()
        for tok in vocab.encode(text):
            t = time.perf_counter()
            mask.get_mask(state)
            ok = state.commit(tok)
            samples.append((time.perf_counter() - t) * 1e6)
            if not ok:
                rejected += 1
                break
    print(f"glrmask ({mode})  TTFM {ttfm * 1e3:.1f} ms   false rejects {rejected}/{len(docs)}")
    print(f"  TBM {percentiles(samples)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tokenizers/llama-3.1/tokenizer.json"))
    ap.add_argument("--grammar", default=str(ROOT / "grammars/json.lark"))
    ap.add_argument("--docs", default=str(ROOT / "tests/data/json_documents.jsonl"))
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--mode", choices=glrmask.api.MODES, default="dynamic")
    args = ap.parse_args()
    vocab = glrmask.Vocab.load(args.tokenizer)
    docs = [json.loads(l) for l in Path(args.docs).read_text(encoding="utf-8").splitlines()][: args.limit]
    print(f"{len(docs)} documents, vocabulary {vocab.name} ({vocab.size} tokens)")
    bench_glrmask(Path(args.grammar), vocab, docs, args.mode)


if __name__ == "__main__":
    main()
