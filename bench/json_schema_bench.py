"""MaskBench-style JSON Schema benchmark: glrmask side by side with llguidance and xgrammar.

For each schema of the ten JSONSchemaBench/MaskBench splits (streamed from
``../shared/data/jsonschemabench/maskbench/*.jsonl.gz``) and each engine, with the Llama-3.1
vocabulary:

* compile the schema (timed: TTFM = compile time); outcome compiled / unsupported / over budget
  (budget error or ``--timeout``) / error;
* replay every test instance, ``json.dumps(data, ensure_ascii=False)`` tokenized without special
  tokens (keys reordered to schema order for every engine, since glrmask needs declared properties in
  schema order): per token, compute the mask, check the token is in it, commit it. TBM = mask time +
  commit time (the bit check is not timed). A replay stops at the first token outside the mask.
  An instance is *accepted* when every token was in the mask and the end token is allowed after
  the last one (uniform across engines: the end token is in the mask exactly when the engine is in
  an accepting state);
* valid instances that are not accepted are false rejects; invalid instances that are not accepted
  are correctly rejected (only as good as the keywords each engine enforces).

Peers run in the same process when importable (``pip install llguidance xgrammar``); an engine that
cannot be set up is reported and skipped. Peers' compile errors count as "unsupported" (neither
distinguishes unsupported features from other compile errors in a stable way). ``--timeout`` is
enforced with SIGALRM, which interrupts Python code at once but native code (the peers' compilers)
only when it returns; an overrun is counted as over budget either way.

    python3 bench/json_schema_bench.py --max-per-split 10
    python3 bench/json_schema_bench.py --splits Github_easy,Kubernetes --engines glrmask,llguidance
"""
from __future__ import annotations

import argparse
import gzip
import json
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peers import LlguidanceMatcher, XgrammarMatcher  # noqa: E402  (bench/peers.py)

SHARED = ROOT.parent / "shared" / "data"
DATA = SHARED / "jsonschemabench" / "maskbench"
TOKENIZER = SHARED / "tokenizers" / "llama-3.1" / "tokenizer.json"
EOS = 128009  # <|eot_id|>, the Llama-3.1-Instruct end token (tokenizer_config.json)
SPLITS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra",
          "Glaiveai2K", "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost"]


class CompileRefused(Exception):
    """The engine declined the schema (unsupported feature, or a compile error for peers)."""


class OverBudget(Exception):
    """The engine hit a size/time budget while compiling."""


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):  # noqa: ARG001
    raise _Timeout()


def bit(words: np.ndarray, token: int) -> bool:
    return bool((int(words.view(np.uint32).reshape(-1)[token >> 5]) >> (token & 31)) & 1)


# ------------------------------------------------------------------------------------------------
# Engines: compile(schema) -> a factory of per-instance matchers with mask() / commit(tok)
# ------------------------------------------------------------------------------------------------

class Matcher:
    """One replay: ``mask()`` returns packed int32 words (timed), ``commit(tok)`` advances (timed)."""

    def mask(self) -> np.ndarray: ...

    def commit(self, token: int) -> bool: ...


class Engine:
    name = "?"

    def compile(self, schema: Any) -> Callable[[], Matcher]: ...


class GlrmaskEngine(Engine):
    name = "glrmask"

    def __init__(self, lenient: bool, mode: str = "dynamic"):
        import glrmask

        self.glrmask = glrmask
        self.vocab = glrmask.Vocab.from_tokenizer_json(TOKENIZER, eos_token_ids=[EOS])
        self.lenient = lenient
        self.mode = mode

    def compile(self, schema):
        from glrmask.errors import GrammarTooComplex, UnsupportedSchema

        try:
            mask = self.glrmask.compile_json_schema(schema, self.vocab, lenient=self.lenient, mode=self.mode)
        except UnsupportedSchema as e:
            raise CompileRefused(str(e).splitlines()[-1]) from e
        except GrammarTooComplex as e:
            raise OverBudget(str(e)) from e

        class M(Matcher):
            def __init__(self):
                self.state = mask.start()

            def mask(self):
                return mask.get_mask(self.state)

            def commit(self, token):
                return self.state.commit(token)

        return M


class LlguidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, lenient: bool):
        import llguidance
        import llguidance.hf
        import transformers

        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER))
        self.ll = llguidance
        self.tok = llguidance.hf.from_tokenizer(hf, eos_token=EOS)
        self.n = self.tok.vocab_size
        self.lenient = lenient

    def compile(self, schema):
        overrides = {"lenient": True} if self.lenient else None
        grammar = self.ll.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides)
        proto = self.ll.LLMatcher(self.tok, grammar, log_level=0)
        if proto.is_error():
            err = proto.get_error()
            if any(w in err.lower() for w in ("limit", "fuel", "too many", "too large", "too big")):
                raise OverBudget(err)
            raise CompileRefused(err)
        n = self.n
        return lambda: LlguidanceMatcher(proto, n)


class XgrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, lenient: bool):  # noqa: ARG002 - xgrammar has no lenient mode
        import transformers
        import xgrammar as xgr

        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER))
        self.info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=len(hf), stop_token_ids=[EOS])
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)

    def compile(self, schema):
        try:
            # strict_mode=False: JSON Schema semantics (extra properties/items allowed unless forbidden)
            compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)
        except _Timeout:
            raise
        except Exception as e:  # xgrammar raises RuntimeError/ValueError for unsupported schemas
            raise CompileRefused(f"{type(e).__name__}: {str(e)[:200]}") from e
        vocab_size = self.info.vocab_size
        return lambda: XgrammarMatcher(compiled, vocab_size)


ENGINES = {"glrmask": GlrmaskEngine, "llguidance": LlguidanceEngine, "xgrammar": XgrammarEngine}


# ------------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------------

@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    compile_s: list[float] = field(default_factory=list)
    tbm_ns: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def replay(factory: Callable[[], Matcher], ids: list[int], tbm: list[int]) -> tuple[bool, bool]:
    """(every token was in the mask, end token allowed after the last). Appends TBM samples."""
    m = factory()
    clock = time.perf_counter_ns
    for tok in ids:
        t0 = clock()
        words = m.mask()
        t1 = clock()
        if not bit(words, tok):
            return False, False
        t2 = clock()
        ok = m.commit(tok)
        t3 = clock()
        if not ok:
            return False, False
        tbm.append((t1 - t0) + (t3 - t2))
    return True, bit(m.mask(), EOS)


def run_schema(engine: Engine, rec: dict, docs: list[tuple[bool, list[int], str]], tally: Tally,
               timeout: float) -> None:
    c = tally.counts
    c["schemas"] += 1
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        t0 = time.perf_counter()
        try:
            factory = engine.compile(rec["schema"])
        finally:
            dt = time.perf_counter() - t0
        if dt > timeout:
            raise _Timeout()
        tally.compile_s.append(dt)
        c["compiled"] += 1
        samples: list[int] = []
        results = []
        for valid, ids, text in docs:
            allowed, eos = replay(factory, ids, samples)
            results.append((valid, allowed and eos, text))
    except CompileRefused:
        c["unsupported"] += 1
        return
    except (OverBudget, _Timeout):
        c["over_budget"] += 1
        return
    except Exception as e:  # an engine bug: count and show
        c["errors"] += 1
        tally.notes.append(f"ERROR {rec['file']}: {type(e).__name__}: {e}"[:300])
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    tally.tbm_ns.extend(samples)
    for valid, accepted, text in results:
        if valid:
            c["valid"] += 1
            c["valid_accepted"] += accepted
            if not accepted:
                c["false_rejects"] += 1
                tally.notes.append(f"FALSE REJECT {rec['file']}: {text[:160]}")
        else:
            c["invalid"] += 1
            c["invalid_rejected"] += not accepted


def records(splits: list[str], max_per_split: int) -> Iterator[tuple[str, dict]]:
    for split in splits:
        with gzip.open(DATA / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if max_per_split and n >= max_per_split:
                    break
                yield split, json.loads(line)


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def table(tallies: dict[str, Tally]) -> str:
    names = list(tallies)
    rows: list[tuple[str, list[str]]] = []
    for key in ("schemas", "compiled", "unsupported", "over_budget", "errors", "valid", "valid_accepted",
                "false_rejects", "invalid", "invalid_rejected"):
        rows.append((key, [str(tallies[n].counts[key]) for n in names]))
    rows.append(("tokens timed", [str(len(tallies[n].tbm_ns)) for n in names]))
    for q in (50, 99):
        rows.append((f"compile p{q} (ms)", [f"{1e3 * pct(tallies[n].compile_s, q):.1f}" for n in names]))
    rows.append(("compile max (ms)", [f"{1e3 * max(tallies[n].compile_s, default=float('nan')):.1f}" for n in names]))
    for q in (50, 90, 99, 99.9, 100):
        label = "max" if q == 100 else f"p{q:g}"
        rows.append((f"TBM {label} (us)", [f"{pct(tallies[n].tbm_ns, q) / 1e3:.1f}" for n in names]))
    rows.append(("TBM mean (us)", [f"{np.mean(tallies[n].tbm_ns) / 1e3:.1f}" if tallies[n].tbm_ns else "nan"
                                   for n in names]))
    w0 = max(len(r[0]) for r in rows)
    ws = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    out = ["| " + "metric".ljust(w0) + " | " + " | ".join(n.rjust(w) for n, w in zip(names, ws)) + " |",
           "|" + "-" * (w0 + 2) + "|" + "|".join("-" * (w + 1) + ":" for w in ws) + "|"]
    for label, vals in rows:
        out.append("| " + label.ljust(w0) + " | " + " | ".join(v.rjust(w) for v, w in zip(vals, ws)) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-per-split", type=int, default=10, help="schemas per split (0 = all)")
    ap.add_argument("--splits", default=",".join(SPLITS), help="comma-separated split names")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema and engine (compile + replays)")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: " + ", ".join(ENGINES))
    ap.add_argument("--lenient", action="store_true", help="glrmask and llguidance ignore unsupported keywords")
    ap.add_argument("--glrmask-mode", choices=["dynamic", "static"], default="dynamic",
                    help="glrmask's masks: dynamic (nothing compiled ahead) or static (the offline "
                         "compiler inside the timeout); auto is left out: its background compile "
                         "would share the timed replay's CPU")
    ap.add_argument("--max-instances", type=int, default=0, help="test instances per schema (0 = all)")
    ap.add_argument("--show-notes", type=int, default=8, help="false rejects / errors to print per engine")
    args = ap.parse_args()
    if not DATA.exists() or not TOKENIZER.exists():
        sys.exit(f"shared data not found under {SHARED}")
    splits = [s for s in args.splits.split(",") if s]
    unknown = set(splits) - set(SPLITS)
    if unknown:
        sys.exit(f"unknown splits: {sorted(unknown)}")

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    engines: dict[str, Engine] = {}
    for name in [e for e in args.engines.split(",") if e]:
        try:
            t0 = time.perf_counter()
            eng = (GlrmaskEngine(args.lenient, args.glrmask_mode) if name == "glrmask"
                   else ENGINES[name](args.lenient))
            eng.compile({"type": "object", "properties": {"a": {"type": "integer"}}})  # warm-up (vocab tables)
            engines[name] = eng
            print(f"# {name}: ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        except Exception as e:
            print(f"# {name}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
    if not engines:
        sys.exit("no engine could be set up")
    signal.signal(signal.SIGALRM, _on_alarm)

    from glrmask.json_schema.reorder import reorder_to_schema

    tallies = {n: Tally() for n in engines}
    per_split: dict[str, dict[str, Counter]] = {}
    t_start = time.time()
    try:
        for split, rec in records(splits, args.max_per_split):
            tests = rec.get("tests", [])[: args.max_instances or None]
            docs = []
            for t in tests:
                text = json.dumps(reorder_to_schema(t["data"], rec["schema"]), ensure_ascii=False)
                docs.append((bool(t["valid"]), tokenizer.encode(text, add_special_tokens=False).ids, text))
            for name, eng in engines.items():
                before = Counter(tallies[name].counts)
                run_schema(eng, rec, docs, tallies[name], args.timeout)
                per_split.setdefault(split, {}).setdefault(name, Counter()).update(tallies[name].counts - before)
            print(f"# {split} {rec['file']} done ({time.time() - t_start:.0f}s)", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # Ctrl-C: report what was measured so far
        print("# interrupted: partial results", file=sys.stderr)

    print(f"\nJSONSchemaBench/MaskBench, splits {', '.join(splits)}, up to {args.max_per_split or 'all'} schemas "
          f"per split, Llama-3.1 vocabulary, timeout {args.timeout:g}s, lenient={args.lenient}, "
          f"glrmask mode {args.glrmask_mode}\n")
    print(table(tallies))
    print("\nper split (compiled/schemas, false rejects):")
    for split, by_engine in per_split.items():
        cells = [f"{n} {c['compiled']}/{c['schemas']} fr={c['false_rejects']}" for n, c in by_engine.items()]
        print(f"  {split:16s} " + "; ".join(cells))
    for name, t in tallies.items():
        for note in t.notes[: args.show_notes]:
            print(f"[{name}] {note}")


if __name__ == "__main__":
    main()
