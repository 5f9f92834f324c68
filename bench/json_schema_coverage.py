"""JSONSchemaBench coverage of the JSON Schema front-end (lowering + lark as the judge).

For every schema of the ten MaskBench splits (streamed from ../shared/data/jsonschemabench):
lowered / unsupported / over budget (strict and lenient), how many lowered schemas keep a oneOf as
anyOf (not provably exclusive), and whether every valid test instance (json.dumps,
ensure_ascii=False, keys in schema order) parses with lark under the generated grammar.

    python3 bench/json_schema_coverage.py [--max-per-split N] [--instances K] [--lenient]
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from glrmask.errors import GrammarTooComplex, UnsupportedSchema  # noqa: E402
from glrmask.json_schema import lower_json_schema  # noqa: E402
from glrmask.json_schema.reorder import reorder_to_schema  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "jsonschemabench" / "maskbench"
SPLITS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra",
          "Glaiveai2K", "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-per-split", type=int, default=0, help="schemas per split (0 = all)")
    ap.add_argument("--instances", type=int, default=2, help="valid instances parsed per schema (0 = none)")
    ap.add_argument("--lenient", action="store_true", help="lower with lenient=True")
    ap.add_argument("--show-failures", type=int, default=5)
    ap.add_argument("--max-grammar-chars", type=int, default=0,
                    help="skip the lark check for grammars longer than this (0 = no limit); counted as not_judged")
    args = ap.parse_args()
    import lark
    totals: Counter = Counter()
    reasons: Counter = Counter()
    failures: list[str] = []
    for split in SPLITS:
        c: Counter = Counter()
        t0 = time.time()
        with gzip.open(DATA / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if args.max_per_split and n >= args.max_per_split:
                    break
                rec = json.loads(line)
                c["schemas"] += 1
                try:
                    text, warnings = lower_json_schema(rec["schema"], lenient=args.lenient)
                except UnsupportedSchema as e:
                    c["unsupported"] += 1
                    for ln in str(e).splitlines()[1:]:
                        reasons[ln.split(": ", 1)[-1].split(" (")[0][:60]] += 1
                    continue
                except GrammarTooComplex:
                    c["over_budget"] += 1
                    continue
                except Exception as e:  # a bug: count and show
                    c["crash"] += 1
                    failures.append(f"CRASH {rec['file']}: {type(e).__name__}: {e}"[:300])
                    continue
                c["lowered"] += 1
                if any("lowered as anyOf" in w for w in warnings):
                    c["oneof_as_anyof"] += 1  # a oneOf neither provably disjoint nor complementable
                if not args.instances:
                    continue
                valid = [t["data"] for t in rec.get("tests", []) if t.get("valid")][: args.instances]
                if not valid:
                    continue
                if args.max_grammar_chars and len(text) > args.max_grammar_chars:
                    c["not_judged"] += 1
                    continue
                try:
                    parser = lark.Lark(text, parser="earley", lexer="dynamic", regex=False)
                except Exception as e:
                    c["lark_error"] += 1
                    failures.append(f"LARK {rec['file']}: {e}"[:300])
                    continue
                for inst in valid:
                    doc = json.dumps(reorder_to_schema(inst, rec["schema"]), ensure_ascii=False)
                    c["instances"] += 1
                    try:
                        parser.parse(doc)
                        c["accepted"] += 1
                    except Exception:
                        c["false_reject"] += 1
                        failures.append(f"REJECT {rec['file']}: {doc[:200]}")
        totals.update(c)
        print(f"{split:16s} schemas {c['schemas']:5d} lowered {c['lowered']:5d} unsupported {c['unsupported']:4d} "
              f"over_budget {c['over_budget']:3d} crash {c['crash']:3d} | instances {c['instances']:4d} "
              f"accepted {c['accepted']:4d} false_reject {c['false_reject']:3d} lark_err {c['lark_error']} "
              f"not_judged {c['not_judged']} oneOf->anyOf {c['oneof_as_anyof']} "
              f"({time.time() - t0:.1f}s)", flush=True)
    s = totals["schemas"] or 1
    print(f"TOTAL schemas {totals['schemas']} lowered {totals['lowered']} ({100 * totals['lowered'] / s:.1f}%) "
          f"unsupported {totals['unsupported']} over_budget {totals['over_budget']} crash {totals['crash']} | "
          f"instances {totals['instances']} accepted {totals['accepted']} false_reject {totals['false_reject']} "
          f"not_judged(schemas) {totals['not_judged']} | schemas with a oneOf lowered as anyOf {totals['oneof_as_anyof']}")
    print("top unsupported reasons:")
    for r, k in reasons.most_common(12):
        print(f"  {k:5d}  {r}")
    for f in failures[: args.show_failures]:
        print(f)


if __name__ == "__main__":
    main()
