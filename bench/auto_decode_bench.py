"""``mode="auto"`` in a decode loop: what a request sees between a new schema's first mask and
the moment its masks turn static (issue #12), beside llguidance in the same loop.

Why this benchmark. ``bench/json_schema_bench.py`` replays documents back to back, with nothing
between tokens. A replay of a whole MaskBench schema then lasts ~0.1 s, less than most static
compiles, and a background worker that shares the decode loop's core never runs at all (it is
niced): every token there is a dynamic mask. A serving engine does something between two masks —
the model's forward pass, milliseconds during which the CPU is free — and that is when the worker
compiles. Here every token is followed by a simulated model step (``--step-ms``, a sleep, not
timed), so the replay runs at a decode loop's pace; everything else is as in
``bench/json_schema_bench.py`` (same documents: valid instances, keys in schema order, compact
``json.dumps``, Llama-3.1 tokens; TBM = the mask into a preallocated row + the commit, timed with
``perf_counter_ns``; the garbage collector off within a document; the process pinned to one core,
which the worker inherits — a serving box would give the worker a core of its own, so this is
the conservative case).

Per token it records whether the mask was already static (``mask.active_mode`` read before the
token, not timed) and reports, for glrmask: TTFM, the time until the mask turned static, the
share of tokens served static, and TBM percentiles over all tokens, over the dynamic-phase tokens
and over the static-phase ones; for llguidance (compiled synchronously, it has no phases): TTFM
and TBM over the same tokens, with the same model step.

    python bench/auto_decode_bench.py --per-split 2 --step-ms 10 --max-tokens 300
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
from json_schema_bench import DATA, EOS, SPLITS  # noqa: E402
from peers import TOKENIZER, LlguidanceEngine, Unavailable, pin_to_core  # noqa: E402


def documents(rec: dict, tokenizer, n_docs: int, max_tokens: int) -> list[list[int]]:
    """Valid instances of the schema as token ids, at most ``max_tokens`` in all."""
    from glrmask.json_schema.reorder import reorder_to_schema

    docs, left = [], max_tokens
    for t in rec.get("tests", []):
        if not t.get("valid") or len(docs) >= n_docs or left <= 0:
            continue
        text = json.dumps(reorder_to_schema(t["data"], rec["schema"]), ensure_ascii=False)
        ids = tokenizer.encode(text, add_special_tokens=False).ids[:left]
        docs.append(ids)
        left -= len(ids)
    return docs


def replay(docs, new_request, step_s: float, phase=None, keep_gc: bool = False):
    """Per committed token: (TBM ns, static?) — the model step slept after each, untimed.
    ``new_request()`` gives ``(fill, commit, words)``; ``phase()`` says whether masks are static.
    ``keep_gc``: leave the garbage collector on, as in a server (its pauses land in whichever
    token's TBM triggers them); by default it is off within a document and run between them."""
    clock = time.perf_counter_ns
    out: list[tuple[int, bool]] = []
    if not keep_gc:
        gc.disable()
    try:
        for ids in docs:
            fill, commit, words = new_request()
            for tok in ids:
                static = phase() if phase is not None else True
                t0 = clock()
                fill()
                if not (int(words[tok >> 5]) >> (tok & 31)) & 1:
                    break
                ok = commit(tok)
                t1 = clock()
                if not ok:
                    break
                out.append((t1 - t0, static))
                time.sleep(step_s)
            if not keep_gc:
                gc.collect()
    finally:
        gc.enable()
    return out


def pct(xs) -> str:
    if not len(xs):
        return "—"
    return " / ".join(f"{v / 1e3:.1f}" for v in np.percentile(np.asarray(xs, dtype=np.float64), [50, 90, 99, 99.9, 100]))


def ms(xs) -> str:
    return " / ".join(f"{v * 1e3:.1f}" for v in np.percentile(xs, [50, 90, 100])) if len(xs) else "—"


def schema_documents(args, tokenizer):
    """``(split, index, record, documents)`` of the schemas :func:`document_args` chose that have
    valid instances."""
    for split in [s for s in args.splits.split(",") if s]:
        with gzip.open(DATA / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if n >= args.per_split:
                    break
                rec = json.loads(line)
                docs = documents(rec, tokenizer, args.docs, args.max_tokens)
                if docs:
                    yield split, n, rec, docs


def document_args(ap: argparse.ArgumentParser) -> None:
    """The options that choose the schemas and documents (shared with the dynamic replay bench)."""
    ap.add_argument("--per-split", type=int, default=2, help="schemas per split")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--docs", type=int, default=3, help="valid instances per schema")
    ap.add_argument("--max-tokens", type=int, default=300, help="tokens per schema (all its documents)")
    ap.add_argument("--core", type=int, default=None, help="core to pin to (default: the last allowed one)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    document_args(ap)
    ap.add_argument("--step-ms", type=float, default=10.0, help="simulated model step after each token")
    ap.add_argument("--no-llguidance", action="store_true")
    ap.add_argument("--keep-gc", action="store_true",
                    help="leave the garbage collector on within documents (as in a server)")
    args = ap.parse_args()

    import glrmask

    core = pin_to_core(args.core)
    vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
    tokenizer = vocab.tokenizer
    ll = None
    if not args.no_llguidance:
        try:
            ll = LlguidanceEngine(eos=EOS)
        except Unavailable as e:
            print(f"# llguidance: not installed ({e.reason})", file=sys.stderr)
    warm = glrmask.compile_json_schema({"type": "object"}, vocab)
    warm.get_mask(warm.start())
    warm.wait_static(30)
    del warm
    step = args.step_ms / 1e3
    g_tok: list[tuple[int, bool]] = []
    l_tok: list[int] = []
    ttfm, to_static, l_ttfm, never = [], [], [], 0
    n_schemas = 0
    for split, n, rec, docs in schema_documents(args, tokenizer):
        t0 = time.perf_counter()
        try:
            mask = glrmask.compile_json_schema(rec["schema"], vocab)
            mask.get_mask(mask.start())
        except glrmask.errors.GlrmaskError as e:
            print(f"# {split} #{n}: glrmask refused ({type(e).__name__})", file=sys.stderr)
            continue
        ttfm.append(time.perf_counter() - t0)
        switched: list[float] = []

        def phase(mask=mask, switched=switched, t0=t0):
            static = mask.active_mode == "static"
            if static and not switched:
                switched.append(time.perf_counter() - t0)
            return static

        def new_request(mask=mask):
            st = mask.start()
            out = np.zeros((1, mask.n_words), np.int32)
            return (lambda: mask.fill_mask(st, out, 0)), st.commit, out[0].view(np.uint32)

        g_tok += replay(docs, new_request, step, phase, args.keep_gc)
        if switched:
            to_static.append(switched[0])
        else:
            never += 1
        mask.cancel_static()
        del mask
        n_schemas += 1
        if ll is not None:
            try:
                comp = ll.compile("json_schema", rec["schema"])
            except Exception as e:
                print(f"# {split} #{n}: llguidance refused ({type(e).__name__})", file=sys.stderr)
                continue
            l_ttfm.append(comp.ttfm_ns / 1e9)

            def ll_request(comp=comp):
                r = ll.request(comp.handle)
                return r.fill, r.commit, r.words

            l_tok += [t for t, _ in replay(docs, ll_request, step, keep_gc=args.keep_gc)]
        print(f"# {split} #{n} done", file=sys.stderr, flush=True)

    dyn = [t for t, s in g_tok if not s]
    sta = [t for t, s in g_tok if s]
    print(f"auto mode in a decode loop: {n_schemas} schemas, model step {args.step_ms:g} ms, "
          f"up to {args.max_tokens} tokens per schema, core {core}, "
          f"garbage collector {'on' if args.keep_gc else 'off within documents'}\n")
    print("| engine | tokens | TTFM p50 / p90 / max (ms) | TBM p50 / p90 / p99 / p99.9 / max (µs) |")
    print("|---|---:|---:|---:|")
    print(f"| glrmask (auto), all tokens | {len(g_tok)} | {ms(ttfm)} | {pct([t for t, _ in g_tok])} |")
    print(f"| glrmask (auto), still dynamic | {len(dyn)} | | {pct(dyn)} |")
    print(f"| glrmask (auto), static | {len(sta)} | | {pct(sta)} |")
    if ll is not None:
        print(f"| llguidance | {len(l_tok)} | {ms(l_ttfm)} | {pct(l_tok)} |")
    share = len(sta) / max(1, len(g_tok))
    print(f"\nglrmask: {share:.0%} of tokens served static; time to static p50 / p90 / max "
          f"{ms(to_static)} ms over {len(to_static)} schemas ({never} still dynamic when their tokens ended)")


if __name__ == "__main__":
    main()
