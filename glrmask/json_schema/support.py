"""The JSON Schema support matrix, as data, and its Markdown rendering.

``docs/json_schema_support.md`` is generated from this module
(``python3 -m glrmask.json_schema.support > docs/json_schema_support.md``) and a test checks that
the file is current, so the documentation cannot drift from the code's keyword lists.
"""
from __future__ import annotations

from .formats import FORMATS
from .lowering import (ANNOTATIONS, DEFAULT_MAX_INDENT, DEFAULT_MAX_WHITESPACE, MAX_ANY_ORDER_PROPERTIES,
                       MAX_CONTAINS, MAX_COUNT_BOUND, MAX_DISTRIBUTION, MAX_ENUM_VALUES, MAX_INDENT_DEPTH, MAX_ITEM_CHAIN,
                       MAX_EXACT_ONE_OF, MAX_NESTING, MAX_REGIONS, MAX_UNIQUE_VALUES, UNSUPPORTED)

SUPPORTED = "supported"
PARTIAL = "partial"
IGNORED_LENIENT = "unsupported (ignored with lenient=True)"
IGNORED = "ignored (annotation)"

MATRIX: list[tuple[str, str, str]] = [
    ("type", SUPPORTED, "single type or list; `integer` ⊂ `number`; OpenAPI `nullable: true` adds null"),
    ("enum / const", SUPPORTED, f"values filtered by `type` and the string/number keywords; at most {MAX_ENUM_VALUES} values; strings in every JSON spelling"),
    ("properties", SUPPORTED, "in schema order (see deviations); a declared key also meets the patternProperties it matches"),
    ("required", SUPPORTED, "also draft-3 `required: true` on a property; required keys not in `properties` use the additional/pattern schemas"),
    ("additionalProperties", SUPPORTED, "true (default) / false / schema; extra keys come after declared ones; scoped to its own schema under allOf"),
    ("patternProperties", SUPPORTED, "a key meets every pattern it matches (ECMA semantics); patterns with the same schema form one class; "
     f"at most {MAX_REGIONS} combinations of possibly-overlapping classes (anchored patterns with different fixed prefixes are disjoint), else GrammarTooComplex"),
    ("propertyNames", SUPPORTED, "any string schema (the `not`/anyOf cases included); declared keys that fail it are forbidden"),
    ("minProperties / maxProperties", SUPPORTED, "counted in the grammar"),
    ("dependentRequired / dependentSchemas / dependencies", SUPPORTED,
     f"as (key absent) ∨ (key present ∧ rule), distributed with the other anyOfs (at most {MAX_DISTRIBUTION} combinations)"),
    ("items / prefixItems", SUPPORTED, "also draft-4 tuple `items` + `additionalItems`; merged by position under allOf"),
    ("minItems / maxItems", SUPPORTED, f"chains of at most {MAX_ITEM_CHAIN} items beyond the prefix/minimum (budget)"),
    ("contains / minContains / maxContains", SUPPORTED, f"items counted by a chain of states; maxContains needs the complement of `contains` (see `not`); up to {MAX_CONTAINS} contains on one array (allOf) counted together"),
    ("uniqueItems", PARTIAL, f"exact for items with finitely many values (booleans, null, enums of at most {MAX_UNIQUE_VALUES} scalars, no prefixItems); otherwise unsupported"),
    ("anyOf", SUPPORTED, "alternatives; sibling keywords are distributed into each branch"),
    ("oneOf", PARTIAL, "exact when the branches are provably disjoint (types, const/enum values, a required discriminator key with disjoint const/enum, or a closed object — additionalProperties false — against one requiring a key it does not declare), "
     f"or when every branch is one of the `not` cases (at most {MAX_EXACT_ONE_OF} branches: branch i ∧ not the others); otherwise lowered as anyOf with a warning in `mask.warnings`"),
    ("allOf", SUPPORTED, f"merged into one schema keeping each keyword's scope; combinations of anyOf under allOf are distributed (budget {MAX_DISTRIBUTION})"),
    ("not", PARTIAL, "complement within each JSON type, for type, enum/const, string keywords (pattern, format, min/maxLength), numeric bounds and multipleOf, "
     "required, min/maxProperties, properties, items or prefixItems (not both), contains/minContains/maxContains, min/maxItems, and anyOf/allOf/oneOf/not/$ref of these; "
     "dependentRequired/dependentSchemas; additionalProperties, patternProperties, propertyNames and uniqueItems under `not` are unsupported"),
    ("if / then / else", PARTIAL, "as (if ∧ then) ∨ (not-if ∧ else) when `if` is one of the `not` cases; `if` alone has no effect"),
    ("unevaluatedProperties / unevaluatedItems", PARTIAL, "where the evaluated set is static (properties/patternProperties/additionalProperties, prefixItems/items across allOf and $ref); "
     "over anyOf/oneOf/if/dependentSchemas branches only when those branches evaluate nothing, else unsupported"),
    ("$ref / $defs / definitions", SUPPORTED, "resolved by the `referencing` library against the nearest `$id` (embedded resources, `$anchor`, relative, `urn:` and absolute-path refs), recursion; sibling keywords apply as allOf (drafts 4–7, by `$schema`: `$ref` overrides its siblings)"),
    ("$dynamicRef / $dynamicAnchor", PARTIAL, "as $ref when the target does not depend on the dynamic scope (its name is declared by one $dynamicAnchor, or the target has none); otherwise unsupported"),
    ("remote $ref", IGNORED_LENIENT, "only refs into the same document (its embedded resources included)"),
    ("minLength / maxLength", SUPPORTED, f"count code points; an escape counts as the one character it denotes; bounds above {MAX_COUNT_BOUND} are GrammarTooComplex"),
    ("pattern", SUPPORTED, "ECMA-262 (`u` flag), unanchored search on the decoded value, ASCII `\\d \\w`; `\\p{…}`/`\\P{…}` general categories (Unicode data of the running Python), Any, ASCII, Assigned; "
     "backreferences, lookbehind, `\\b`, mid-branch `^`, scripts and unknown escapes rejected"),
    ("format", PARTIAL, "format_mode=\"assert\" (default) enforces: " + ", ".join(sorted(FORMATS)) + "; other formats are not enforced (a warning); format_mode=\"annotation\" enforces none (the specification's default)"),
    ("minimum / maximum / exclusiveMinimum / exclusiveMaximum", SUPPORTED, "exact regexes; draft-4 boolean exclusive forms too; must be finite numbers"),
    ("multipleOf", PARTIAL, "integers: any k over a bounded range (≤ 1000 values), else k = 1, 2, 5, 25, 10^j; numbers: 10^-j (decimal places) or integral k (an integral value may be written with a `.0` fraction)"),
]
MATRIX += [(k, IGNORED_LENIENT, "") for k in UNSUPPORTED]
MATRIX += [(", ".join(sorted(ANNOTATIONS)), IGNORED, "no effect on the language")]

DEVIATIONS = [
    "Declared properties must appear in schema order, followed by any other keys "
    "(`property_order=\"any\"` lifts this for objects with at most "
    f"{MAX_ANY_ORDER_PROPERTIES} declared properties). Keys merged in from allOf branches, $ref targets and "
    "matching patternProperties follow the schema's own keys, in that order.",
    "Integers are written without fraction or exponent: `1.0` and `1e0` are rejected for `type: integer`.",
    "Numbers constrained by bounds, `multipleOf` or a `not` of those are written without exponent (`1e-07` is rejected there); "
    "unconstrained numbers accept any JSON number.",
    "`oneOf` whose branches are neither provably disjoint nor complementable is treated as `anyOf` (with a warning).",
    "Patterns use code-point semantics (the ECMA `u` flag) with ASCII `\\d`, `\\w`, `\\s` per ECMA-262, "
    "so they can differ from Python's `re` (used by the `jsonschema` package) on non-ASCII text.",
    "Lone surrogate escapes (`\\ud800` not followed by a low surrogate) are not accepted inside strings.",
    "Enum values that are strings or numbers must also meet the string/number keywords beside the enum; "
    "object and array enum values are filtered by `type` only.",
    f"Whitespace (flexible mode): each gap between tokens holds at most max_whitespace (default {DEFAULT_MAX_WHITESPACE}) spaces/tabs, "
    f"optionally one line break and then at most max_indent (default {DEFAULT_MAX_INDENT}) spaces/tabs, so `json.dumps(indent=2|4)` "
    "output is accepted and runaway whitespace is bounded by structure; none before or after the document. "
    "`whitespace=\"compact\"` allows none; `indent=N` requires exactly `json.dumps(value, indent=N)` layout, nested at most "
    f"{MAX_INDENT_DEPTH} levels.",
    "Unknown (non-standard) keywords are ignored, as the specification requires.",
    "Malformed schemas (a keyword value of the wrong kind: `maxLength: \"10\"`, `minimum: NaN`, `enum: null`) raise "
    "`UnsupportedSchema` naming the pointer, also with lenient=True.",
    f"Budgets end in `GrammarTooComplex` naming the pointer: huge enums, long item chains, giant numeric bounds, count keywords above {MAX_COUNT_BOUND}, "
    f"schemas nested more than {MAX_NESTING} levels, too many property-count or pattern states, grammars over the rule/size limits.",
]


def render_markdown() -> str:
    lines = ["# JSON Schema support", "",
             "Generated by `python3 -m glrmask.json_schema.support` from `glrmask/json_schema/support.py`.", "",
             "API: `glrmask.json_schema.json_schema_to_grammar(schema, *, whitespace=\"flexible\", "
             f"max_whitespace={DEFAULT_MAX_WHITESPACE}, max_indent={DEFAULT_MAX_INDENT}, indent=None, property_order=\"schema\", "
             "lenient=False, format_mode=\"assert\")` → Lark grammar text (start rule `start`); `lower_json_schema(...)` → "
             "`(text, warnings)`; `lower_json_schema_ir(...)` → `(grammar IR, warnings)`, the grammar the text prints "
             "(built directly, without parsing text); `glrmask.compile_json_schema(schema, vocab, **the same options)` "
             "→ a mask of that IR.", "",
             "| keyword | status | notes |", "|---|---|---|"]
    for k, status, note in MATRIX:
        lines.append(f"| {k} | {status} | {note} |")
    lines += ["", "## Documented deviations", ""]
    lines += [f"- {d}" for d in DEVIATIONS]
    lines += ["", "Unsupported keywords raise `glrmask.errors.UnsupportedSchema` listing each occurrence with its "
              "JSON pointer; `lenient=True` ignores them and returns them as warnings.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown(), end="")
