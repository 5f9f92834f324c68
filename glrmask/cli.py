"""``glrmask`` command line: compile, inspect, sample and check grammars against a tokenizer.

Every command defaults to the built-in tokenizer (GPT-2), so ``glrmask sample grammars/json.lark``
works on a fresh install with no downloads. ``sample`` and ``check`` take a compiled artifact
(``glrmask compile … -o out.glrm``) wherever they take a grammar.
"""
from __future__ import annotations

import argparse
import codecs
import random
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .errors import GlrmaskError

EXAMPLES = """examples:
  glrmask sample grammars/json.lark -n 3 --seed 1
  glrmask compile grammars/json.lark -o json.glrm && glrmask inspect json.glrm
  glrmask sample json.glrm -n 3
  glrmask check grammars/json.lark --text '{"a": [1, 2]}'
  glrmask sample grammars/sql.lark --tokenizer path/to/tokenizer.json --max-tokens 64
  glrmask sample --json-schema schema.json -n 3
  glrmask check --json-schema schema.json --text '{"name": "Ada"}'
"""


def _add_grammar_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("grammar", nargs="?", default=None,
                   help="grammar file (.lark, .gbnf/.ebnf) or grammar text; omit it with --json-schema")
    p.add_argument("--json-schema", dest="json_schema", metavar="SCHEMA", default=None,
                   help="constrain to a JSON Schema (a .json file or JSON text) instead of a grammar")
    p.add_argument("--lenient", action="store_true",
                   help="with --json-schema: ignore unsupported keywords (printed as warnings) instead of failing")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer.json (or a directory holding one, or a hub name); default: built-in GPT-2")
    p.add_argument("--start", default=None, help="start rule (default: 'start' for Lark, 'root' for GBNF)")
    p.add_argument("--format", default="auto", choices=["auto", "lark", "gbnf", "ebnf", "regex"])


def _is_artifact(path: Optional[str]) -> bool:
    from .artifact import MAGIC

    try:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            return f.read(len(MAGIC)) == MAGIC
    except (OSError, TypeError, ValueError):
        return False


def _check_source_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exactly one of GRAMMAR and --json-schema; the grammar-only options make no sense with a schema."""
    if args.json_schema is None:
        if args.grammar is None:
            parser.error("give a GRAMMAR or --json-schema SCHEMA")
        if args.lenient:
            parser.error("--lenient only applies to --json-schema")
        return
    if args.grammar is not None:
        parser.error("give either a GRAMMAR or --json-schema, not both")
    if args.start is not None or args.format != "auto":
        parser.error("--start and --format do not apply to --json-schema")


def _load(args: argparse.Namespace):
    from .api import compile as compile_grammar
    from .api import compile_json_schema
    from .vocab import Vocab

    vocab = Vocab.load(args.tokenizer)
    t0 = time.perf_counter()
    mode = getattr(args, "mode", None)
    modes = {"mode": mode} if mode else {}  # else each front-end's default (schemas: auto)
    verb = "compiled"
    if args.json_schema is not None:
        source = f"JSON Schema {args.json_schema[:60]}"
        mask = compile_json_schema(args.json_schema, vocab, lenient=args.lenient, **modes)
    elif _is_artifact(args.grammar):
        from .api import Mask

        source, verb = args.grammar, "loaded"
        mask = Mask.load(args.grammar, vocab)
    else:
        source = args.grammar
        mask = compile_grammar(args.grammar, vocab, format=args.format, start=args.start,
                               on_stage=getattr(args, "on_stage", None), **modes)
    dt = time.perf_counter() - t0
    print(f"# {verb} {source} for {vocab.name} ({vocab.size} tokens) in {dt:.2f}s", file=sys.stderr)
    for w in mask.warnings:
        print(f"# warning: {w}", file=sys.stderr)
    return vocab, mask


def allowed_ids(bits: np.ndarray) -> np.ndarray:
    """Token ids whose bit is set in a packed int32 mask."""
    u = np.unpackbits(bits.view(np.uint8), bitorder="little")
    return np.flatnonzero(u)


def _pick(ids: np.ndarray, vocab, rng: random.Random, finishing: bool) -> int:
    """Uniform over the allowed tokens; once past --max-tokens, steer towards an end: take an end
    token when one is allowed, else a uniformly chosen allowed token of the fewest bytes."""
    if finishing:
        ends = [int(t) for t in ids if int(t) in vocab.eos_token_ids]
        if ends:
            return ends[0]
        lengths = [len(vocab.token_bytes(int(t))) for t in ids]
        shortest = min(lengths)
        ids = np.asarray([t for t, n in zip(ids, lengths) if n == shortest])
    return int(ids[rng.randrange(len(ids))])


def cmd_sample(args: argparse.Namespace) -> int:
    vocab, mask = _load(args)
    rng = random.Random(args.seed)
    limit = args.max_tokens * (1 + args.finish_factor)
    for k in range(args.n):
        state = mask.start()
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        out = sys.stdout
        n_tok = 0
        ended = "token limit reached"
        while n_tok < limit:
            ids = allowed_ids(mask.get_mask(state))
            accepting = state.is_accepting()
            if len(ids) == 0:
                ended = "end of grammar" if accepting else "dead end (see warnings)"
                break
            finishing = n_tok >= args.max_tokens
            if accepting and not vocab.eos_token_ids and (finishing or rng.random() < 1.0 / (len(ids) + 1)):
                ended = "end of grammar"
                break
            tok = _pick(ids, vocab, rng, finishing)
            state.commit(tok)
            n_tok += 1
            if state.is_terminated():
                ended = "end token" + (" (steered to an end after --max-tokens)" if finishing else "")
                break
            out.write(dec.decode(vocab.token_bytes(tok)))
            out.flush()
        out.write(dec.decode(b"", final=True))
        out.write("\n")
        print(f"# sample {k + 1}: {n_tok} tokens, {ended}, accepting={state.is_accepting()}", file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    vocab, mask = _load(args)
    text = args.text if args.text is not None else Path(args.file).read_text(encoding="utf-8")
    ids = vocab.encode(text)
    state = mask.start()
    pos = 0
    for i, tok in enumerate(ids):
        data = vocab.token_bytes(tok)
        if not state.commit(tok):
            raw = text.encode("utf-8")
            before = raw[max(0, pos - 30):pos].decode("utf-8", "replace")
            after = raw[pos:pos + 30].decode("utf-8", "replace")
            print(f"rejected: token {i} (id {tok}, {data!r}) at byte {pos}")
            print(f"  context: {before!r} >>> {after!r}")
            return 1
        pos += len(data)
    if state.is_accepting():
        print(f"ok: {len(ids)} tokens, complete")
        return 0
    print(f"incomplete: all {len(ids)} tokens allowed, but the text is not a complete sentence")
    return 2


def _stage_printer(t_start: float):
    """Progress per compile stage on stderr, as each one ends."""
    def on_stage(name: str, seconds: float, info: dict) -> None:
        detail = ", ".join(f"{k} {v}" for k, v in info.items())
        print(f"#   {name:<14} {seconds:7.2f} s   {detail}   (elapsed {time.perf_counter() - t_start:.2f} s)",
              file=sys.stderr, flush=True)
    return on_stage


def cmd_compile(args: argparse.Namespace) -> int:
    if args.json_schema is None and _is_artifact(args.grammar):
        print("error: already a compiled artifact (use `glrmask inspect`)", file=sys.stderr)
        return 2
    args.mode = "static"
    args.on_stage = _stage_printer(time.perf_counter())
    print("# compiling (stage, time, sizes):", file=sys.stderr)
    if args.json_schema is not None:  # stage reports come from compile_grammar only
        args.on_stage = None
    _vocab, mask = _load(args)
    out = args.output or (Path(args.grammar).stem if args.grammar and Path(args.grammar).is_file()
                          else "grammar") + ".glrm"
    t0 = time.perf_counter()
    mask.save(out)
    size = Path(out).stat().st_size
    print(f"wrote {out}: {size / 1e6:.2f} MB in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    _print_summary(mask.stats, sys.stdout)
    return 0


def _print_summary(stats: dict, out) -> None:
    total = 0.0
    for name, info in stats.items():
        if not isinstance(info, dict):
            continue
        secs = float(info.get("seconds", 0.0))
        total += secs
        detail = ", ".join(f"{k}={v}" for k, v in info.items() if k != "seconds")
        out.write(f"{name:<16} {secs:8.3f} s  {detail}\n")
    out.write(f"{'total':<16} {total:8.3f} s\n")


def cmd_inspect(args: argparse.Namespace) -> int:
    import json

    from .artifact import read_artifact
    from .grammar.ir import Grammar
    from .mask_artifact import ARTIFACT_KIND

    art = read_artifact(args.artifact, kind=ARTIFACT_KIND)
    meta, header = art.meta, art.header
    grammar = Grammar.from_json(meta["grammar"])
    nbytes = sum(int(a.nbytes) for a in art.arrays.values())
    print(f"artifact      {args.artifact} ({Path(args.artifact).stat().st_size / 1e6:.2f} MB, "
          f"{len(art.arrays)} arrays, {nbytes / 1e6:.2f} MB of array data)")
    print(f"format        {header.get('format_version')} (glrmask {art.glrmask_version}, "
          f"python {art.python_version}, unicodedata {art.unicodedata_version})")
    print(f"vocabulary    fingerprint {meta['vocab_fingerprint']}, {meta['vocab_size']} tokens, "
          f"{meta['n_logits']} logits")
    print(f"grammar       start {grammar.start!r}, {len(grammar.rules)} rules (normalized), "
          f"{len(grammar.terminals)} terminals, ignore {sorted(grammar.ignore)}")
    for w in meta.get("warnings", []):
        print(f"warning       {w}")
    print("stages:")
    _print_summary(dict(meta.get("stages", [])), sys.stdout)
    if args.arrays:
        for name, a in sorted(art.arrays.items()):
            print(f"  {name:<28} {str(a.dtype):<8} {json.dumps(list(a.shape)):<16} {a.nbytes:>10} B")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="glrmask", description="Grammar-constrained decoding masks.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    k = sub.add_parser("compile", help="compile a grammar for a tokenizer into an artifact (.glrm)",
                       epilog="examples:\n  glrmask compile grammars/json.lark -o json.glrm\n"
                              "  glrmask compile --json-schema schema.json --tokenizer tok.json -o s.glrm",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_grammar_args(k)
    k.add_argument("-o", "--output", default=None, help="artifact path (default: GRAMMAR's stem + .glrm)")
    k.set_defaults(func=cmd_compile)

    i = sub.add_parser("inspect", help="describe a compiled artifact (no tokenizer needed)")
    i.add_argument("artifact")
    i.add_argument("--arrays", action="store_true", help="list every stored array")
    i.set_defaults(func=cmd_inspect)

    s = sub.add_parser("sample", help="stream random valid outputs (uniform over allowed tokens)",
                       epilog="examples:\n  glrmask sample grammars/json.lark -n 3 --seed 1\n"
                              "  glrmask sample --json-schema schema.json -n 3",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_grammar_args(s)
    s.add_argument("-n", type=int, default=3, help="number of samples")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-tokens", type=int, default=100,
                   help="tokens sampled uniformly; after that, sampling steers towards an end")
    s.add_argument("--mode", default=None, choices=["static", "dynamic", "auto"],
                   help="how masks are computed, same masks either way (default: static for a grammar, "
                        "auto for a JSON Schema)")
    s.add_argument("--finish-factor", type=int, default=4,
                   help="steering lasts at most this many times --max-tokens more tokens (0: cut off)")
    s.set_defaults(func=cmd_sample)

    c = sub.add_parser("check", help="replay a text through the masks; report the first disallowed token",
                       epilog="examples:\n  glrmask check grammars/json.lark --text '[1, 2]'\n"
                              "  glrmask check --json-schema schema.json --file doc.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_grammar_args(c)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--text")
    g.add_argument("--file")
    c.add_argument("--mode", default=None, choices=["static", "dynamic", "auto"],
                   help="default: static for a grammar, auto for a JSON Schema")
    c.set_defaults(func=cmd_check)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "inspect":
        _check_source_args(parser, args)
    try:
        return args.func(args)
    except GlrmaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
