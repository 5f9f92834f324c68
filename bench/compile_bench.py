"""Compile time per stage for the shipped grammars (offline compiler, as far as it exists).

Usage:
    python bench/compile_bench.py [--tokenizer ../shared/data/tokenizers/llama-3.1/tokenizer.json]
                                  [--grammars json arithmetic csv tinylang sql]

Stages: front-end, normalization, LR table, lexer, vocabulary trie (uncached, then cached), stack
effects, Terminal DWA, minimized lexer export; then the first static mask. Prints seconds per stage,
automaton sizes and the peak resident memory of the process. The artifact on disk (and so its size
and load time) does not exist yet.
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
from glrmask.compiler.stack_effects import StackEffects  # noqa: E402
from glrmask.compiler.terminal_dwa import TerminalDWA, terminal_labels  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.lexer import Lexer, LexerDFA  # noqa: E402
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
        trie = timed("trie (disk cache)", lambda: VocabTrie.for_vocab(vocab, cache_dir=tmp), row)
    print("  " + "  ".join(f"{k} {v:.3f}s" for k, v in row.items()))
    for name in args.grammars:
        row = {}
        path = ROOT / "grammars" / f"{name}.lark"
        g = timed("front-end", lambda: load_grammar(path), row)
        n = timed("normalize", lambda: normalize(g), row)
        table = timed("LR table", lambda: LRTable.build(n), row)
        lexer = timed("lexer", lambda: Lexer([(t.name, t.pattern) for t in n.terminals.values()]), row)
        effects = timed("stack effects", lambda: StackEffects.build(table, ignore=n.ignore), row)
        ignored, label_of = terminal_labels(lexer, n, table)
        tdwa = timed("terminal DWA", lambda: TerminalDWA.build(lexer, trie, ignored=ignored, label_of=label_of), row)
        dfa = timed("lexer export", lambda: LexerDFA.explore(lexer), row)
        mask = timed("static Mask (all stages again)", lambda: glrmask.compile(path, vocab, mode="static"), row)
        timed("first mask", lambda: mask.get_mask(mask.start()), row)
        eff = effects.summary() if hasattr(effects, "summary") else {}
        print(f"{name}: LR states {table.n_states}, lexer DFA {dfa.n_states} states / {dfa.n_conds} conds, "
              f"TDWA {tdwa.n_nodes} nodes / {tdwa.n_weights} weights, effects {eff.get('states', '?')} states")
        print("  " + "  ".join(f"{k} {v:.3f}s" for k, v in row.items()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
