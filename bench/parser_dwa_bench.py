"""The Parser-DWA stage alone: complete native determinization, and optionally the Python
construction it replaced (the test oracle ``tests/_parser_dwa_reference.py``), per grammar.

Usage:
    python bench/parser_dwa_bench.py [--grammars json sql tinylang c_subset ...] [--reference]
                                     [--reference-seconds 300] [--tokenizer PATH]

A name is a shipped grammar (``grammars/NAME.lark``) or a corpus grammar
(``tests/data/grammars/NAME/grammar.lark``); the default is the shipped json, sql, tinylang and
every corpus grammar. The vocabulary is GPT-2 (``glrmask.Vocab.default()``) unless ``--tokenizer``
names a ``tokenizer.json``. For each grammar the inputs (dense lexer, stack effects, Terminal DWA,
token classes) are built first and not timed; then the native build is timed (wall and CPU
seconds: on a shared machine CPU seconds are the fairer figure) with its state, closure and explicit-edge counts; with ``--reference`` the Python
construction runs in a child process killed after ``--reference-seconds`` (reported as ``>N s``)
and its arrays are compared with the native ones.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import pickle
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import glrmask  # noqa: E402
from glrmask.compiler.parser_dwa import ParserDWA  # noqa: E402
from glrmask.compiler.stack_effects import StackEffects  # noqa: E402
from glrmask.compiler.terminal_dwa import TerminalDWA, terminal_labels  # noqa: E402
from glrmask.compiler.token_classes import TokenClasses  # noqa: E402
from glrmask.lexer.dense import DenseLexer  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.lr.table import LRTable  # noqa: E402
from glrmask.trie import VocabTrie  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "grammars"


def grammar_path(name: str) -> Path:
    shipped = ROOT / "grammars" / f"{name}.lark"
    return shipped if shipped.exists() else CORPUS / name / "grammar.lark"


def build_inputs(path: Path, vocab) -> tuple:
    """(Terminal DWA, stack effects, class sets, number of classes): what ``ParserDWA`` takes."""
    grammar = normalize(load_grammar(path))
    table = LRTable.build(grammar)
    dense = DenseLexer.from_lexer(Lexer([(t.name, t.pattern) for t in grammar.terminals.values()]))
    effects = StackEffects.build(table, ignore=grammar.ignore)
    ignored, label_of = terminal_labels(dense, grammar, table)
    tdwa = TerminalDWA.build(dense, VocabTrie.for_vocab(vocab), ignored=ignored, label_of=label_of)
    classes, class_sets = TokenClasses.from_weights(tdwa.weight_ptr, tdwa.weight_bounds, tdwa.n_tokens)
    return tdwa, effects, class_sets, classes.n_classes


def _reference_child(payload: bytes, conn) -> None:
    from _parser_dwa_reference import reference_arrays

    args = pickle.loads(payload)
    t0, c0 = time.perf_counter(), time.process_time()
    arrays = reference_arrays(*args)
    conn.send(((time.perf_counter() - t0, time.process_time() - c0), {k: np.asarray(v) for k, v in arrays.items()}))


def reference(args: tuple, seconds: float):
    """((wall, CPU seconds), arrays) of the Python construction, or (None, None) when it ran out
    of (wall) time."""
    parent, child = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_reference_child, args=(pickle.dumps(args), child))
    proc.start()
    child.close()
    got = parent.recv() if parent.poll(seconds) else (None, None)
    proc.kill()
    proc.join()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = ["json", "sql", "tinylang"] + sorted(p.name for p in CORPUS.iterdir() if (p / "grammar.lark").exists())
    ap.add_argument("--grammars", nargs="*", default=default)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--reference", action="store_true", help="also time the Python construction and compare")
    ap.add_argument("--reference-seconds", type=float, default=300.0)
    args = ap.parse_args()
    vocab = glrmask.Vocab.default() if args.tokenizer is None else glrmask.Vocab.load(args.tokenizer)
    print(f"vocabulary {vocab.name} ({vocab.size} tokens)")
    print(f"{'grammar':<12} {'classes':>7} {'states':>8} {'closures':>9} {'edges':>10} {'native s':>9} "
          f"{'cpu s':>7}" + (f" {'python s':>9} {'cpu s':>7} {'same':>5}" if args.reference else ""), flush=True)
    for name in args.grammars:
        inputs = build_inputs(grammar_path(name), vocab)
        w0, c0 = time.perf_counter(), time.process_time()
        pdwa = ParserDWA(*inputs)
        arrays = pdwa.arrays()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        line = (f"{name:<12} {inputs[3]:>7} {pdwa.n_states:>8} {pdwa.n_closures:>9} {len(arrays['edge_label']):>10} "
                f"{wall:>9.2f} {cpu:>7.2f}")
        if args.reference:
            secs, want = reference(inputs, args.reference_seconds)
            if secs is None:
                line += f" {'>' + format(args.reference_seconds, 'g'):>9} {'-':>7} {'-':>5}"
            else:
                same = sorted(want) == sorted(arrays) and all(
                    want[k].dtype == arrays[k].dtype and np.array_equal(want[k], arrays[k]) for k in want)
                line += f" {secs[0]:>9.2f} {secs[1]:>7.2f} {'yes' if same else 'NO':>5}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
