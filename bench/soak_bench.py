"""A long-running decode loop: does memory plateau? (RSS over time, printed.)

Fresh requests, one after another, each a deep JSON document decoded token by token through the
json.lark mask (static, or ``--mode dynamic``) (get_mask + commit per token, like a serving loop), in a single process.
Every request's native memory must go when its state does, and every cache is bounded, so the
resident set should stop growing after the first requests.

    python bench/soak_bench.py                      # 1,000 requests, GPT-2, depth-40 documents
    python bench/soak_bench.py --requests 5000 --depth 200 --tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

import glrmask

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def deep_document(rng: random.Random, depth: int) -> str:
    """A valid JSON document nested ``depth`` levels: objects and arrays with numbers and strings."""
    value: object = rng.choice([1, -2.5, "leaf", True, None])
    for _ in range(depth):
        if rng.random() < 0.5:
            value = [value, rng.randint(0, 999), "x" * rng.randint(0, 8)]
        else:
            value = {"k%d" % rng.randint(0, 99): value, "n": rng.random()}
    return json.dumps(value, indent=rng.choice([None, 2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json (default: the built-in GPT-2)")
    ap.add_argument("--every", type=int, default=100, help="print RSS every N requests")
    ap.add_argument("--mode", choices=("static", "dynamic"), default="static",
                    help="dynamic: the same loop on dynamic masks (memos and caches must be bounded too)")
    args = ap.parse_args()
    vocab = glrmask.Vocab.default() if args.tokenizer is None else glrmask.Vocab.from_tokenizer_json(args.tokenizer)
    mask = glrmask.compile(str(ROOT / "grammars" / "json.lark"), vocab, mode=args.mode)
    rng = random.Random(0)
    docs = [vocab.encode(deep_document(rng, args.depth)) for _ in range(50)]
    out = np.empty((1, mask.n_words), dtype=np.int32)
    print(f"requests  tokens  RSS (MB)  µs/token  ({vocab.name}, depth {args.depth})")
    t0, tokens, first = time.perf_counter(), 0, None
    for n in range(1, args.requests + 1):
        state = mask.start()
        ids = docs[n % len(docs)]
        for t in ids:
            mask.fill_mask(state, out, 0)
            if not state.commit(t):
                raise SystemExit(f"request {n}: token {t} refused (a bug: every document is valid)")
        tokens += len(ids)
        if n % args.every == 0:
            rss = rss_mb()
            first = rss if first is None else first
            dt = (time.perf_counter() - t0) / tokens * 1e6
            print(f"{n:8d}  {tokens:6d}  {rss:8.1f}  {dt:8.2f}", flush=True)
    print(f"RSS growth after the first {args.every} requests: {rss_mb() - first:+.1f} MB")


if __name__ == "__main__":
    main()
