"""Per-token overhead of the streaming guards (DESIGN §9): phrase bans and no-repeat-ngram.

Phrase guard: 2,048 phrases of 2–3 common words; the stream is text built from the same words, so
phrase prefixes are held often and phrases complete (and rewind) now and then. Timed: ``push`` per
token, and ``fill_banned`` on a full-vocabulary mask row at the position after it.
N-gram guard: ``push`` + ``fill_banned`` per token after a history of 1k / 8k / 32k tokens drawn
from a 500-token pool (so bans are non-empty); the cost must not grow with the history.

Run: ``python bench/guards_bench.py [--tokenizer PATH ...] [--tokens N] [--repeat R]`` (default:
GPT-2 and, when ``../shared/data/tokenizers/llama-3.1`` exists, the 128k Llama-3.1 vocabulary).
Timings include one ``perf_counter_ns`` pair (~50 ns). With ``--repeat R`` the same stream is
replayed R times and each percentile is the lowest of the R runs: on a shared machine a percentile
of one run measures the neighbours as much as the code. The CPU-time line (per token, all runs) is
immune to preemption.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from glrmask.guards import NoRepeatNGram, PhraseBanError, PhraseGuard
from glrmask.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOKENIZERS = [
    [ROOT / "tests/data/tokenizers/gpt2/tokenizer.json.gz", ROOT.parent / "shared/data/tokenizers/gpt2/tokenizer.json"],
    [ROOT.parent / "shared/data/tokenizers/llama-3.1/tokenizer.json"],
]


def percentiles(runs: list[list[int]]) -> str:
    """p50 / p99 / p99.9 / mean / max in µs, each the lowest over the runs."""
    stats = np.array([
        [*np.percentile(np.asarray(ns, dtype=np.float64), [50, 99, 99.9]), np.mean(ns), np.max(ns)]
        for ns in runs
    ]).min(axis=0) / 1000.0
    p50, p99, p999, mean, worst = stats
    best = f", best of {len(runs)}" if len(runs) > 1 else ""
    return (
        f"p50 {p50:6.2f} µs  p99 {p99:6.2f} µs  p99.9 {p999:7.2f} µs  "
        f"mean {mean:6.2f} µs  max {worst:8.2f} µs  (n={len(runs[0])}{best})"
    )


def word_pool(vocab: Vocab, rng: random.Random, size: int) -> list[str]:
    words = []
    for i in range(vocab.size):
        b = vocab.token_bytes(i)
        if len(b) >= 4 and b[:1] == b" " and b[1:].isalpha() and b[1:].islower():
            words.append(b.decode())
    rng.shuffle(words)
    return words[:size]


def bench_phrases(vocab: Vocab, n_tokens: int, rng: random.Random, repeat: int) -> None:
    words = word_pool(vocab, rng, 600)
    phrases = sorted({"".join(rng.sample(words, rng.randint(2, 3))).strip() for _ in range(2300)})[:2048]
    t0 = time.perf_counter()
    guard = PhraseGuard(phrases, max_rewinds=1_000_000)
    build_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    PhraseGuard(list(reversed(phrases)), max_rewinds=1_000_000)
    cached_ms = (time.perf_counter() - t0) * 1e3
    print(f"phrase guard: {len(phrases)} phrases, "
          f"{sum(len(p.encode()) for p in phrases)} bytes, automaton {guard._compiled.automaton.n_states} states; "
          f"compile {build_ms:.1f} ms, cached {cached_ms:.2f} ms")

    # Text: mostly phrase fragments and pool words, so holds and matches are frequent.
    parts = []
    while len(parts) < n_tokens:
        if rng.random() < 0.3:
            p = rng.choice(phrases)
            parts.append(" " + (p if rng.random() < 0.3 else p[: rng.randint(1, len(p))]))
        else:
            parts.append(rng.choice(words))
    source = vocab.encode("".join(parts))[:n_tokens]

    row = np.full((vocab.n_logits + 31) // 32, -1, dtype=np.int32)
    push_runs, fill_runs = [], []
    perf = time.perf_counter_ns
    cpu0 = time.thread_time_ns()
    for _ in range(repeat):
        req = guard.start(vocab)
        push_ns, fill_ns = [], []
        rewinds = released = 0
        for tok in source:
            if tok in req.banned_tokens(req.position):
                continue
            t0 = perf()
            ev = req.push(tok)
            t1 = perf()
            req.fill_banned(row, req.position)
            t2 = perf()
            row.fill(-1)
            push_ns.append(t1 - t0)
            fill_ns.append(t2 - t1)
            rewinds += ev.rewind > 0
            released += len(ev.released_tokens)
        push_runs.append(push_ns)
        fill_runs.append(fill_ns)
    cpu_us = (time.thread_time_ns() - cpu0) / 1000 / sum(map(len, push_runs))
    # The same pushes with no timer, no fill and no ban check: the guard's own mean cost.
    pushed = 0
    cpu0 = time.thread_time_ns()
    for _ in range(repeat):
        req = guard.start(vocab)
        push = req.push
        for tok in source:
            try:
                push(tok)
                pushed += 1
            except PhraseBanError:  # a token banned where it would go: skipped, as above
                pass
    push_only_us = (time.thread_time_ns() - cpu0) / 1000 / pushed
    print(f"  push         {percentiles(push_runs)}")
    print(f"  push alone (no timers, no fill; CPU time per token, mean): {push_only_us:.2f} µs")
    print(f"  fill_banned  {percentiles(fill_runs)}")
    print(f"  loop CPU time per token (push + fill_banned + timers + loop): {cpu_us:.2f} µs")
    print(f"  {rewinds} rewinds, {released} tokens released, {len(req.pending_tokens)} held at the end")


def bench_ngram(vocab: Vocab, n_tokens: int, rng: random.Random, repeat: int, n: int = 3) -> None:
    pool = [rng.randrange(vocab.size) for _ in range(500)]
    row = np.full((vocab.n_logits + 31) // 32, -1, dtype=np.int32)
    print(f"no-repeat-ngram guard (n={n}), push and fill_banned per token:")
    for length in (1_000, 8_000, 32_000):
        history = [rng.choice(pool) for _ in range(length)]
        stream = [rng.choice(pool) for _ in range(n_tokens)]
        push_runs, fill_runs = [], []
        banned = 0
        perf = time.perf_counter_ns
        cpu_ns = 0
        for _ in range(repeat):
            state = NoRepeatNGram(n).start(history)
            push_ns, fill_ns = [], []
            banned = 0
            cpu0 = time.thread_time_ns()
            for tok in stream:
                t0 = perf()
                state.push(tok)
                t1 = perf()
                cleared, _ = state.fill_banned(row)
                t2 = perf()
                push_ns.append(t1 - t0)
                fill_ns.append(t2 - t1)
                banned += cleared
                row.fill(-1)
            cpu_ns += time.thread_time_ns() - cpu0
            push_runs.append(push_ns)
            fill_runs.append(fill_ns)
        cpu_us = cpu_ns / 1000 / (n_tokens * repeat)
        print(f"  history {length:>6}: CPU/token (push + fill + timers + loop) {cpu_us:.2f} µs, "
              f"{banned / n_tokens:.2f} bans/token")
        print(f"    push         {percentiles(push_runs)}")
        print(f"    fill_banned  {percentiles(fill_runs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", type=Path, action="append", default=None)
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per stream; percentiles are the best run's")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    paths = args.tokenizer or [
        p for p in (next((c for c in group if c.is_file()), None) for group in DEFAULT_TOKENIZERS) if p
    ]
    if not paths:
        raise SystemExit("no tokenizer found; pass --tokenizer PATH")
    for path in paths:
        vocab = Vocab.from_tokenizer_json(path)
        print(f"vocab: {vocab}")
        rng = random.Random(args.seed)
        bench_phrases(vocab, args.tokens, rng, max(1, args.repeat))
        bench_ngram(vocab, args.tokens, rng, max(1, args.repeat))


if __name__ == "__main__":
    main()
