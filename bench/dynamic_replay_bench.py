"""Dynamic masks alone: the decode-loop bench's documents replayed back to back in ``mode="dynamic"``.

Why this benchmark. ``bench/auto_decode_bench.py`` measures what a request sees in ``mode="auto"``,
where most tokens turn static after a fraction of a second; its dynamic tail is a few dozen cold
masks per schema. This replays the same documents (same schemas, valid instances in schema key
order, compact ``json.dumps``, Llama-3.1 tokens) with no static compile at all, so every token is a
dynamic mask, and says where the time goes: the share spent in the lazy lexer's exploration (the
Python side of a cold mask), the explore round trips, the lexeme memos' trie walks (the native
side: nodes visited), the lazy lexer's new states (what exploring creates in Python objects), and
the worst tokens with their schema and position (counted across its documents). TBM = the mask + the
commit, ``perf_counter_ns``, one pinned core, the garbage collector off within a document
(``--gc-on`` leaves it on, as in a serving process: what the collector adds to cold masks).

    python bench/dynamic_replay_bench.py --per-split 2 --max-tokens 300 [--repeat 3]
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from auto_decode_bench import document_args, pct, schema_documents  # noqa: E402
from json_schema_bench import EOS  # noqa: E402
from peers import TOKENIZER, pin_to_core  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    document_args(ap)
    ap.add_argument("--worst", type=int, default=10, help="worst tokens to list")
    ap.add_argument("--gc-on", action="store_true", help="leave the garbage collector on within documents")
    ap.add_argument("--repeat", type=int, default=1,
                    help="replay each schema this many times, each on a new mask (cold again), and keep "
                         "each token's fastest run: on a noisy machine, what two builds differ by")
    args = ap.parse_args()

    import glrmask
    from glrmask.runtime import dynamic

    core = pin_to_core(args.core)
    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    spent = {"ns": 0, "calls": 0}
    explore = dynamic.LexerExplorer.explore

    def timed_explore(self, missing, first=True):  # the Python side of a cold mask
        t0 = time.perf_counter_ns()
        try:
            return explore(self, missing, first)
        finally:
            spent["ns"] += time.perf_counter_ns() - t0
            spent["calls"] += 1

    dynamic.LexerExplorer.explore = timed_explore
    rows, n_schemas, transfers, relabels, walks = [], 0, [0, 0, 0], [0, 0, 0], [0, 0]
    def replay(mask, split, n, docs) -> list[tuple]:
        """One row per token of the documents: TBM, exploring, calls, where, memo walks, states."""
        out = np.zeros((1, mask.n_words), np.int32)
        walked = mask.dynamic_stats["memo_walks"]
        states = mask.dynamic_stats["lexer_states"]
        got = []
        for ids in docs:
            state = mask.start()
            was_on = gc.isenabled()
            if not args.gc_on:
                gc.disable()
            try:
                for tok in ids:
                    spent.update(ns=0, calls=0)
                    t0 = time.perf_counter_ns()
                    mask.fill_mask(state, out, 0)
                    ok = state.commit(tok)
                    dt = time.perf_counter_ns() - t0
                    now = mask.dynamic_stats["memo_walks"]  # (outside the timing)
                    lexed = mask.dynamic_stats["lexer_states"]
                    got.append((dt, spent["ns"], spent["calls"], split, n, len(got), now[0] - walked[0],
                                now[1] - walked[1], lexed[0] - states[0], lexed[1] - states[1]))
                    walked, states = now, lexed
                    if not ok:
                        print(f"# {split} #{n}: token {len(got) - 1} rejected", file=sys.stderr)
                        break
            finally:
                if was_on:
                    gc.enable()
        return got

    for split, n, rec, docs in schema_documents(args, vocab.tokenizer):
        best = None
        for _ in range(max(1, args.repeat)):
            try:
                mask = glrmask.compile_json_schema(rec["schema"], vocab, mode="dynamic")
            except glrmask.errors.GlrmaskError as e:
                print(f"# {split} #{n}: glrmask refused ({type(e).__name__})", file=sys.stderr)
                break
            got = replay(mask, split, n, docs)
            best = got if best is None else [min(x, y) for x, y in zip(best, got)]  # (by TBM first)
            if best is got:  # (the memo and lexer counts of the first run)
                stats = mask.dynamic_stats
                for k, v in enumerate(stats["memo_transfers"]):
                    transfers[k] += v
                for k, v in enumerate(stats["memo_relabels"]):
                    relabels[k] += v
                for k, v in enumerate(stats["memo_walks"]):
                    walks[k] += v
        if best is not None:
            n_schemas += 1
            rows.extend(best)
    tbm = [r[0] for r in rows]
    total, explored = sum(tbm), sum(r[1] for r in rows)
    print(f"dynamic masks replayed back to back: {n_schemas} schemas, {len(rows)} tokens, core {core}, "
          f"garbage collector {'on' if args.gc_on else 'off'} within documents\n")
    print("| tokens | TBM p50 / p90 / p99 / p99.9 / max (µs) | total (ms) | exploring (ms) | explore calls |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {len(rows)} | {pct(tbm)} | {total / 1e6:.1f} | {explored / 1e6:.1f} | {sum(r[2] for r in rows)} |")
    print(f"\nlexeme memos transferred: {transfers[1]}, {transfers[2]} of them for the short tokens only "
          f"(tried and not shown: {transfers[0]}); relabelled from other terminals' memos: {relabels[1]}, "
          f"{relabels[2]} of them for the short tokens only (tried and not shown: {relabels[0]}); "
          f"memo walks: {walks[0]}, {walks[1]:,} trie nodes visited")
    print(f"new lazy-lexer states: {sum(r[8] for r in rows):,} joint, {sum(r[9] for r in rows):,} lane")
    print(f"\nworst {args.worst} tokens: TBM µs (exploring µs, calls; memo walks, trie nodes; new joint, "
          "lane states) — schema, position")
    for r in sorted(rows, key=lambda r: -r[0])[:args.worst]:
        print(f"  {r[0] / 1e3:9.1f} ({r[1] / 1e3:.1f}, {r[2]}; {r[6]}, {r[7]:,}; {r[8]}, {r[9]}) — "
              f"{r[3]} #{r[4]}, token {r[5]}")


if __name__ == "__main__":
    main()
