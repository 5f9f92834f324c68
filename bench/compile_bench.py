"""Offline compile: time per stage, artifact size, load time, for the shipped grammars.

Usage:
    python bench/compile_bench.py [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]
                                  [--grammars json arithmetic csv tinylang sql]

First the vocabulary trie, uncached and then from its disk cache (it is shared by every grammar of
a tokenizer). Then per grammar: front-end, normalization, LR table, lazy lexer, then the stages of
the static compile as ``glrmask.compile`` reports them (dense lexer, stack effects, Terminal DWA,
token classes, Parser DWA — eagerly determinized up to its default budget), the total compile time
with the trie cached, ``Mask.save`` (size on disk), ``Mask.load`` and the first mask after a load
(which builds the runtime caches lazily). Ends with the peak resident memory of the process.
DESIGN targets (Llama-3.1, json.lark, trie cached): compile ≤ 1 s, artifact ≤ 5 MB, load ≤ 10 ms.
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import glrmask  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.lr.table import LRTable  # noqa: E402
from glrmask.trie import VocabTrie  # noqa: E402


def timed(label: str, fn, row: dict):
    t = time.perf_counter()
    out = fn()
    row[label] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tokenizers/llama-3.1/tokenizer.json"))
    ap.add_argument("--grammars", nargs="*", default=["json", "arithmetic", "csv", "tinylang", "sql"])
    args = ap.parse_args()
    vocab = glrmask.Vocab.load(args.tokenizer)
    print(f"vocabulary {vocab.name} ({vocab.size} tokens)")
    row: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        VocabTrie.clear_memory_cache()
        timed("trie (uncached)", lambda: VocabTrie.for_vocab(vocab, cache_dir=tmp), row)
        VocabTrie.clear_memory_cache()
        timed("trie (disk cache)", lambda: VocabTrie.for_vocab(vocab, cache_dir=tmp), row)
    VocabTrie.for_vocab(vocab)  # the default cache, used by the compiles below
    print("  " + "  ".join(f"{k} {v:.3f}s" for k, v in row.items()))
    for name in args.grammars:
        row = {}
        path = ROOT / "grammars" / f"{name}.lark"
        g = timed("front-end", lambda: load_grammar(path), row)
        n = timed("normalize", lambda: normalize(g), row)
        table = timed("LR table", lambda: LRTable.build(n), row)
        timed("lazy lexer", lambda: Lexer([(t.name, t.pattern) for t in n.terminals.values()]), row)
        stages: list[str] = []
        mask = timed("compile (total)", lambda: glrmask.compile(
            path, vocab, on_stage=lambda s, dt, info: stages.append(
                f"{s} {dt:.3f}s ({', '.join(f'{k} {v}' for k, v in info.items())})")), row)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"{name}.glrm"
            timed("save", lambda: mask.save(out), row)
            size = out.stat().st_size
            loaded = timed("load", lambda: glrmask.Mask.load(out, vocab), row)
            timed("first mask after load", lambda: loaded.get_mask(loaded.start()), row)
        print(f"{name}: LR states {table.n_states}, artifact {size / 1e6:.3f} MB")
        print("  " + "  ".join(f"{k} {v:.3f}s" for k, v in row.items()))
        for s in stages:
            print(f"    {s}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
