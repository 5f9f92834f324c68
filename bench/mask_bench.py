"""Time between masks (get_mask + commit per token) replaying valid JSON documents, MaskBench style,
glrmask side by side with llguidance and xgrammar in the same process.

Usage:
    python bench/mask_bench.py [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]
                               [--grammar grammars/json.lark] [--docs tests/data/json_documents.jsonl]
                               [--limit N] [--modes static dynamic] [--engines glrmask llguidance xgrammar]

Every engine replays the same token ids (the tokenizer's own encoding of each document). Printed per
engine: TTFM (compile + first mask), the per-token TBM percentiles p50/p90/p99/p99.9/max and mean,
and false rejects (a valid document whose token an engine refused). Peers, when importable: llguidance
compiles the same Lark grammar text; xgrammar uses its built-in JSON grammar (its EBNF dialect differs,
and the built-in one is the same language for valid documents).
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
from peers import LlguidanceMatcher, XgrammarMatcher  # noqa: E402  (bench/peers.py)


def percentiles(samples_us: list[float]) -> str:
    a = np.asarray(samples_us)
    ps = np.percentile(a, [50, 90, 99, 99.9])
    return (f"p50 {ps[0]:8.1f}  p90 {ps[1]:8.1f}  p99 {ps[2]:8.1f}  p99.9 {ps[3]:8.1f}  "
            f"max {a.max():8.1f}  mean {a.mean():8.1f}  (µs, n={len(a)})")


def replay(name: str, make, token_docs: list[list[int]]) -> None:
    """``make()`` compiles and returns ``new_matcher``; a matcher has ``mask()`` and ``commit(t)``."""
    t0 = time.perf_counter()
    new_matcher = make()
    m = new_matcher()
    m.mask()
    ttfm = time.perf_counter() - t0
    samples: list[float] = []
    rejected = 0
    for ids in token_docs:
        m = new_matcher()
        for tok in ids:
            t = time.perf_counter()
            m.mask()
            ok = m.commit(tok)
            samples.append((time.perf_counter() - t) * 1e6)
            if not ok:
                rejected += 1
                break
    print(f"{name:<22} TTFM {ttfm * 1e3:8.1f} ms   false rejects {rejected}/{len(token_docs)}")
    print(f"  TBM {percentiles(samples)}")


def glrmask_engine(grammar: Path, vocab, mode: str):
    def make():
        mask = glrmask.compile(grammar, vocab, mode=mode)

        class M:
            def __init__(self):
                self.state = mask.start()

            def mask(self):
                return mask.get_mask(self.state)

            def commit(self, tok):
                return self.state.commit(tok)
        return M
    return make


def llguidance_engine(grammar: Path, tokenizer: str):
    import llguidance
    import llguidance.hf
    import transformers

    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=tokenizer)
    tok = llguidance.hf.from_tokenizer(hf)

    def make():
        g = llguidance.LLMatcher.grammar_from_lark(grammar.read_text(encoding="utf-8"))
        proto = llguidance.LLMatcher(tok, g, log_level=0)
        if proto.is_error():
            raise RuntimeError(proto.get_error())
        return lambda: LlguidanceMatcher(proto, tok.vocab_size)
    return make


def xgrammar_engine(tokenizer: str):
    import transformers
    import xgrammar as xgr

    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=len(hf))

    def make():
        compiled = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_builtin_json_grammar()
        return lambda: XgrammarMatcher(compiled, info.vocab_size)
    return make


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tokenizers/llama-3.1/tokenizer.json"))
    ap.add_argument("--grammar", default=str(ROOT / "grammars/json.lark"))
    ap.add_argument("--docs", default=str(ROOT / "tests/data/json_documents.jsonl"))
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--modes", nargs="*", choices=["static", "dynamic"], default=["static", "dynamic"])
    ap.add_argument("--engines", nargs="*", default=["glrmask", "llguidance", "xgrammar"])
    args = ap.parse_args()
    vocab = glrmask.Vocab.load(args.tokenizer)
    docs = [json.loads(l) for l in Path(args.docs).read_text(encoding="utf-8").splitlines()][: args.limit]
    token_docs = [vocab.encode(d) for d in docs]
    grammar = Path(args.grammar)
    print(f"{len(docs)} documents, {sum(map(len, token_docs))} tokens, vocabulary {vocab.name} "
          f"({vocab.size} tokens), grammar {grammar.name}")
    if "glrmask" in args.engines:
        for mode in args.modes:
            replay(f"glrmask ({mode})", glrmask_engine(grammar, vocab, mode), token_docs)
    peers = {"llguidance": lambda: llguidance_engine(grammar, args.tokenizer),
             "xgrammar": lambda: xgrammar_engine(args.tokenizer)}
    for name in args.engines:
        if name in peers:
            try:
                make = peers[name]()
            except ImportError as e:
                print(f"{name:<22} skipped: {e}")
                continue
            if name == "xgrammar" and grammar.name != "json.lark":
                print(f"{name:<22} skipped: only its built-in JSON grammar is wired")
                continue
            replay(name, make, token_docs)


if __name__ == "__main__":
    main()
