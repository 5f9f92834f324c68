"""JSON Schema → grammar IR.

Each schema node becomes a rule; strings and numbers become single terminals whose regex carries
every string/number constraint (so a terminal's `re.match` end is always the end of the JSON value:
strings include their quotes, numbers end in a guard). Objects follow the schema's property order;
arrays count items with a chain of rules. `$ref`s become rule references (recursion is free),
`allOf` is merged into one schema, `anyOf` becomes alternatives, `oneOf` too when its branches are
provably disjoint.

Merging keeps every keyword in its own scope. Object keywords are kept as *layers* (one per merged
schema: its `patternProperties` and `additionalProperties`), so an undeclared key meets every
layer's applicable schemas, and a declared key meets the patterns of its own layer and the
patterns/additional schema of the layers that do not declare it. Array keywords are merged by
position (`items` of a schema without `prefixItems` applies to every position).

`not` is lowered by complementing within each JSON type, which is regular for type, enum/const,
string constraints (a negative lookahead on the whole string), numeric bounds (a negative lookahead
on the number), `required` and the property/item counts; `if`/`then`/`else`, the dependency keywords
and `contains` are built from that. Anything else raises :class:`UnsupportedSchema` with its JSON
pointer.

Whitespace is an explicit grammar symbol at every gap between tokens, never ``%ignore``, so that a
run can be bounded by structure: a gap holds at most `max_whitespace` spaces/tabs, optionally one
line break and then at most `max_indent` spaces/tabs (what ``json.dumps(indent=N)`` writes), and
gaps are never adjacent.
"""
from __future__ import annotations

import itertools
import json
from functools import lru_cache
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import GrammarTooComplex, UnsupportedSchema
from ..grammar.ir import Grammar
from . import charset as cs
from . import ecma_regex, formats, numbers
from .builder import GrammarBuilder
from .canonical import canonical_text, memoized_texts
from .refs import RefError, SchemaRefs, ptr_join

ALL_TYPES = ('null', 'boolean', 'object', 'array', 'string', 'number')
ANNOTATIONS = frozenset({
    'title', 'description', 'default', 'examples', 'example', '$schema', '$id', 'id', '$comment',
    'readOnly', 'writeOnly', 'deprecated', 'contentMediaType', 'contentEncoding', 'contentSchema',
    '$anchor', '$dynamicAnchor', '$recursiveAnchor', '$defs', 'definitions', '$vocabulary',
})
UNSUPPORTED = ('$recursiveRef',)
INTERNAL = frozenset({'__patterns', '__formats', '__extras', '__notstr', '__notnum', '__contains', '__unique'})
STRUCTURAL = frozenset({
    'type', 'enum', 'const', 'properties', 'required', 'additionalProperties', 'patternProperties',
    'items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'minLength', 'maxLength',
    'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
    'minProperties', 'maxProperties', 'anyOf', 'oneOf', 'allOf', '$ref', 'nullable', 'not', 'if', 'then',
    'else', 'dependentRequired', 'dependentSchemas', 'dependencies', 'propertyNames', 'contains',
    'minContains', 'maxContains', 'uniqueItems', 'unevaluatedProperties', 'unevaluatedItems', '$dynamicRef',
}) | INTERNAL | frozenset(UNSUPPORTED)

COUNT_KEYWORDS = ('minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
                  'minContains', 'maxContains')
NUMBER_KEYWORDS = ('minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf')
SCHEMA_KEYWORDS = ('additionalProperties', 'additionalItems', 'not', 'if', 'then', 'else', 'contains',
                   'propertyNames', 'unevaluatedProperties', 'unevaluatedItems')
SCHEMA_MAP_KEYWORDS = ('properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions')
SCHEMA_LIST_KEYWORDS = ('allOf', 'anyOf', 'oneOf', 'prefixItems')
# what `not` can complement: keywords of these, and nothing else, may appear in a negated schema
NEGATABLE = frozenset({'type', 'enum', '__patterns', '__formats', 'minLength', 'maxLength', 'minimum',
                       'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'required',
                       'minProperties', 'maxProperties', 'minItems', 'maxItems', '__notstr', '__notnum',
                       'anyOf'})
# the JSON type a keyword without a built complement constrains (its complement is unknown there only)
KEYWORD_TYPE = {'__extras': 'object', '__unique': 'array', 'prefixItems': 'array', '__contains': 'array'}
STRING_KEYS = ('__patterns', '__formats', 'minLength', 'maxLength', '__notstr')
NUMBER_KEYS = ('minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', '__notnum')

DEFAULT_MAX_WHITESPACE = 4
DEFAULT_MAX_INDENT = 64
MAX_ANY_ORDER_PROPERTIES = 8
MAX_INDENT_DEPTH = 24
MAX_ENUM_VALUES = 5000
MAX_ITEM_CHAIN = 1000
MAX_COUNT_STATES = 20000
MAX_DISTRIBUTION = 256
MAX_MERGE_DEPTH = 64
MAX_NESTING = 400
MAX_COUNT_BOUND = 10 ** 6
MAX_REGIONS = 64
MAX_UNIQUE_VALUES = 10
MAX_EXACT_ONE_OF = 6
MAX_CONTAINS = 3
FORMAT_MODES = ('assert', 'annotation')


@dataclass(frozen=True)
class Options:
    whitespace: str = 'flexible'
    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    max_indent: int = DEFAULT_MAX_INDENT
    indent: int | None = None
    property_order: str = 'schema'
    lenient: bool = False
    format_mode: str = 'assert'
    max_rules: int = 50_000
    max_chars: int = 8_000_000


@dataclass
class _Ctx:
    problems: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _NotRegular(Exception):
    """Raised inside negation: the negated schema uses a keyword whose complement is not built."""

    def __init__(self, ptr: str, what: str) -> None:
        super().__init__(f"#{ptr}: {what}")
        self.ptr, self.what = ptr, what


def load_schema(schema: Any) -> Any:
    """Accept a dict/bool, a pathlib.Path, or a str (JSON text if it parses, else a file path)."""
    try:
        if isinstance(schema, Path):
            return json.loads(schema.read_text(encoding='utf-8'))
        if isinstance(schema, str):
            try:
                return json.loads(schema)
            except json.JSONDecodeError:
                p = Path(schema)
                if len(schema) < 4096 and p.is_file():
                    return json.loads(p.read_text(encoding='utf-8'))
                raise UnsupportedSchema(
                    f"schema string is neither JSON nor an existing file: {schema[:80]!r}") from None
    except RecursionError:
        raise UnsupportedSchema("schema JSON nested too deeply for the JSON parser") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedSchema(f"schema file cannot be read as JSON: {e}") from None
    if isinstance(schema, (dict, bool)):
        return schema
    raise UnsupportedSchema(f"schema must be a dict, bool, JSON text or path, not {type(schema).__name__}")


_ptr_join = ptr_join

# keywords _normalize applies itself (the others are the node's own, see _normalize_own)
_APPLICATORS = frozenset({'$ref', '$dynamicRef', 'allOf', 'not', 'if', 'then', 'else', 'dependentRequired',
                          'dependentSchemas', 'dependencies', 'unevaluatedProperties', 'unevaluatedItems'})
_DEPENDENCY_KEYWORDS = frozenset({'dependentRequired', 'dependentSchemas', 'dependencies'})
# the keywords _normalize_own rewrites, but for type, properties and required (checked on every node)
_OWN_REWRITES = frozenset({'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength', 'minItems', 'maxItems',
                           'minProperties', 'maxProperties', 'minContains', 'maxContains', 'pattern', 'format',
                           'const', 'items', 'additionalItems', 'nullable', 'oneOf', 'patternProperties',
                           'additionalProperties', 'propertyNames', 'contains', 'uniqueItems'})


_canon = canonical_text  # schemas equal as the lowering sees them iff these texts are equal


def _and(a: Any, b: Any) -> Any:
    """Conjunction of two schemas, simplifying `true`/`false`."""
    if a is False or b is False:
        return False
    if a is True or (isinstance(a, dict) and not a):
        return b
    if b is True or (isinstance(b, dict) and not b):
        return a
    if a is b or _canon(a) == _canon(b):  # e.g. a property and a pattern with copies of one schema
        return a
    return {'allOf': [a, b]}


def _and_all(parts: list[Any]) -> Any:
    out: Any = True
    for p in parts:
        out = _and(out, p)
    return out


def _is_count(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or \
        (isinstance(v, float) and math.isfinite(v) and v.is_integer() and v >= 0)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (not isinstance(v, float) or math.isfinite(v))


def _is_schema(v: Any) -> bool:
    return isinstance(v, (dict, bool))


def _is_int(v: Any) -> bool:
    """An int that is also a valid repeat count of ``re`` (string_regex writes lengths as one)."""
    return type(v) is int and 0 <= v <= 65535


def _excluded_strings(nots: Any) -> set[str] | None:
    """The strings the ``__notstr`` schemas `nots` exclude, where each is a plain enum (keys
    ``enum`` and ``type`` only, the type naming ``string`` among known types, the enum's strings
    free of surrogates): ``string_regex_of`` makes such a schema the alternation of its strings'
    literal encodings, so a value is excluded iff it is one of them. None for any other shape
    (the caller then matches the compiled regex)."""
    out: set[str] = set()
    for c in nots:
        if not isinstance(c, dict) or not set(c) <= {'enum', 'type'} or not isinstance(c.get('enum'), list):
            return None
        t = c.get('type')
        tlist = [] if t is None else (t if isinstance(t, list) else [t])
        if not all(isinstance(x, str) and x in ALL_TYPES + ('integer',) for x in tlist):
            return None
        if t is not None and 'string' not in tlist:
            continue  # (a schema of no strings excludes none)
        lits = [x for x in c['enum'] if isinstance(x, str)]
        if any(ecma_regex.has_lone_surrogate(x) for x in lits):
            return None
        out.update(lits)
    return out


def _string_meets(s: dict, v: str) -> bool:
    """``re.fullmatch(string_regex(s), json.dumps(v))`` without its ``__notstr`` lookaheads, for
    integer lengths, decided on the decoded string: every format and supported pattern searches
    into it (:func:`.ecma_regex.searches_into`) and its length in code points is within the
    bounds — the regex is one lookahead per format or pattern and one for the length, each
    reading the whole content, and compiling it cost milliseconds per enum value's schema."""
    decoded = ecma_regex.json_read_back(v)
    if ecma_regex.has_lone_surrogate(decoded):
        return False  # (no character class of the content regex reads one)
    for f in s.get('__formats', []):
        pat = formats.format_pattern(f) if isinstance(f, str) else None
        if pat is not None and not ecma_regex.searches_into(pat, v):
            return False
    for p in s.get('__patterns', []):
        try:
            if not ecma_regex.searches_into(p, v):
                return False
        except ecma_regex.PatternUnsupported:
            pass  # reported by string_regex, and left out of it
    lo, hi = s.get('minLength', 0), s.get('maxLength')
    return lo <= len(decoded) and (hi is None or len(decoded) <= hi)


def _encoded_matches(pattern: str, key: str) -> bool:
    """Does the string `key` (JSON-encoded) match the content regex of the ECMA ``pattern``
    (:func:`.ecma_regex.content_regex`; raises its ``PatternUnsupported``)? Answered on the
    decoded key (:func:`.ecma_regex.searches_into`): lowering asks it for every declared key and
    every layer, and compiling the content regexes cost a sixth of lowering the large schemas."""
    return ecma_regex.searches_into(pattern, key)


class Lowerer:
    def __init__(self, root: Any, opts: Options) -> None:
        self.root = root
        self.opts = opts
        self.ctx = _Ctx()
        self.g = GrammarBuilder(opts.max_rules, opts.max_chars)
        self.memo: dict[tuple, str] = {}
        self.keep: list[Any] = []
        self.ptrs: dict[int, str] = {}
        self.indent_mode = opts.indent is not None
        self.flex = opts.whitespace == 'flexible' and not self.indent_mode
        if opts.whitespace not in ('flexible', 'compact'):
            raise ValueError("whitespace must be 'flexible' or 'compact'")
        if opts.property_order not in ('schema', 'any'):
            raise ValueError("property_order must be 'schema' or 'any'")
        if opts.format_mode not in FORMAT_MODES:
            raise ValueError(f"format_mode must be one of {FORMAT_MODES}")
        for name in ('max_whitespace', 'max_indent'):
            v = getattr(opts, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if name == 'max_whitespace' else 0):
                raise ValueError(f"{name} must be an integer >= {1 if name == 'max_whitespace' else 0}")
        if opts.indent is not None and (not isinstance(opts.indent, int) or opts.indent < 0):
            raise ValueError("indent must be an integer >= 0")
        bad, checked = _malformed_keywords(root)
        if bad:
            raise UnsupportedSchema("invalid JSON Schema:\n  " + "\n  ".join(bad))
        # the document's schema nodes that walk reached: every keyword value well-formed, so the
        # per-node checks below skip them (most nodes of a large schema)
        self._well_formed = checked
        try:
            self.refs = SchemaRefs(root)
        except RefError as e:
            raise UnsupportedSchema(f"#: {e}") from None
        self._doc_nodes = self.refs.node_paths  # (id -> path of every document node)
        self._punct: dict[str, str] = {}
        self._commas: dict[int, list[str]] = {}
        self._key_terms: dict[str, str] = {}  # property name -> its KEY terminal
        self._colon: list[str] | None = None
        self._nesting = 0
        self._validated: set[int] = set()
        self._normalized: dict[int, tuple[Any, Any]] = {}
        self._not_regular: dict[str, tuple[str, str]] = {}  # type -> (pointer, keyword) its complement lacks

    # ------------------------------------------------------------------ problems

    def problem(self, ptr: str, msg: str) -> None:
        text = f"#{ptr}: {msg}"
        if self.opts.lenient:
            self.ctx.warnings.append(text + " (ignored)")
        else:
            self.ctx.problems.append(text)

    def invalid(self, ptr: str, msg: str) -> None:
        """A malformed schema (a keyword with a value of the wrong kind): refused even when lenient."""
        self.ctx.invalid.append(f"#{ptr}: {msg}")

    def warn(self, ptr: str, msg: str) -> None:
        self.ctx.warnings.append(f"#{ptr}: {msg}")

    # ------------------------------------------------------------------ layout symbols

    def punct(self, text: str) -> str:
        name = self._punct.get(text)
        if name is None:
            name = self._punct[text] = self.g.terminal(*_punct_terminal(text))
        return name

    def gap(self) -> list[str]:
        if not self.flex:
            return []
        if '_w' not in self.g.rules:
            h, i = self.opts.max_whitespace, self.opts.max_indent
            indent = '[ \\t]{0,%d}' % i if i else ''
            regex = '(?:[ \\t]{1,%d}|[ \\t]{0,%d}(?:\\r?\\n|\\r)%s)(?![ \\t\\n\\r])' % (h, h, indent)
            ws = self.g.terminal(regex, 'WS')
            self.g.rules['_w'] = [[ws], []]
        return ['_w']

    def newline(self, depth: int) -> list[str]:
        regex = '\\n' + ' ' * (depth * (self.opts.indent or 0))
        return [self.g.terminal(regex, 'NL')]

    def open_gap(self, depth: int) -> list[str]:
        return self.newline(depth + 1) if self.indent_mode else self.gap()

    def close_gap(self, depth: int) -> list[str]:
        return self.newline(depth) if self.indent_mode else self.gap()

    def comma(self, depth: int) -> list[str]:
        """The symbols between two members or items at `depth`: one list per depth, made (with
        its terminals) on first use and then shared, as :meth:`colon`'s (callers concatenate it
        into new alternatives and never change it)."""
        got = self._commas.get(depth)
        if got is None:
            if self.indent_mode:
                got = [self.punct(',')] + self.newline(depth + 1)
            else:
                got = self.gap() + [self.punct(',')] + self.gap()
            self._commas[depth] = got
        return got

    def colon(self) -> list[str]:
        """The symbols between a key and its value (shared, see :meth:`comma`)."""
        got = self._colon
        if got is None:
            got = self._colon = [self.punct(': ')] if self.indent_mode else self.gap() + [self.punct(':')] + self.gap()
        return got

    def empty_container(self, open_: str, close: str) -> list[str]:
        if self.indent_mode:
            return [self.punct(open_), self.punct(close)]
        return [self.punct(open_)] + self.gap() + [self.punct(close)]

    def child_depth(self, depth: int) -> int:
        return depth + 1 if self.indent_mode else 0

    # ------------------------------------------------------------------ refs

    def resolve_ref(self, ref: str, at: Any, ptr: str, dynamic: bool = False) -> tuple[Any, str] | None:
        """Target and pointer of the `$ref` found in document node `at`; None (reported) if unresolvable."""
        try:
            return self.refs.resolve_dynamic(ref, at) if dynamic else self.refs.resolve(ref, at)
        except RefError as e:
            self.problem(ptr, str(e))
            return None

    # ------------------------------------------------------------------ keyword checks

    def check_keywords(self, schema: dict, ptr: str) -> None:
        """Report unsupported keywords and malformed keyword values (once per schema node)."""
        i = id(schema)
        if i in self._validated:
            return
        self._validated.add(i)
        self.keep.append(schema)
        for k in UNSUPPORTED:
            if k in schema:
                self.problem(_ptr_join(ptr, k), f"keyword {k!r} is not supported")
        if i in self._well_formed:
            return
        for k, v in schema.items():
            msg = _malformed(k, v)
            if msg is not None:
                self.invalid(_ptr_join(ptr, k), msg)

    # ------------------------------------------------------------------ normalization / merging

    def normalize(self, schema: Any, ptr: str, depth: int = 0) -> Any:
        """Resolve $ref, allOf and the in-place applicators into one dict (or bool)."""
        if depth > MAX_MERGE_DEPTH:
            raise UnsupportedSchema(f"#{_shorten(ptr)}: $ref/allOf/not chain too deep (a cycle through allOf?)")
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            self.invalid(ptr, f"schema must be an object or boolean, got {type(schema).__name__}")
            return True
        # the same node always normalizes to the same object, so rules memoized by id stay finite
        cached = self._normalized.get(id(schema))
        if cached is not None:
            return cached[1]
        out = self._normalize(schema, ptr, depth)
        self._normalized[id(schema)] = (schema, out)
        return out

    def _normalize(self, schema: dict, ptr: str, depth: int) -> Any:
        self.check_keywords(schema, ptr)
        orig = schema
        if self.refs.ref_overrides_siblings and isinstance(schema.get('$ref'), str):
            schema = {'$ref': schema['$ref']}
        user = id(orig) in self._doc_nodes  # internal keywords are the lowering's own, never the user's
        if id(orig) not in self._well_formed:
            schema = {k: v for k, v in schema.items() if _malformed(k, v) is None and not (user and k in INTERNAL)}
        elif not INTERNAL.isdisjoint(schema):  # (a well-formed node is a document node: user)
            schema = {k: v for k, v in schema.items() if k not in INTERNAL}
        own = self._normalize_own({k: v for k, v in schema.items() if k not in _APPLICATORS}, ptr)
        parts: list[Any] = [own]
        if '$ref' in schema:
            r = self.resolve_ref(schema['$ref'], orig, _ptr_join(ptr, '$ref'))
            if r is not None:
                parts.append(self.normalize(r[0], r[1], depth + 1))
        if '$dynamicRef' in schema:
            r = self.resolve_ref(schema['$dynamicRef'], orig, _ptr_join(ptr, '$dynamicRef'), dynamic=True)
            if r is not None:
                parts.append(self.normalize(r[0], r[1], depth + 1))
        for i, s in enumerate(schema.get('allOf', ())):
            parts.append(self.normalize(s, _ptr_join(ptr, 'allOf', i), depth + 1))
        if 'not' in schema:
            parts.append(self.negate(schema['not'], _ptr_join(ptr, 'not'), depth + 1))
        if 'if' in schema and ('then' in schema or 'else' in schema):
            cond = schema['if']
            neg = self.negate(cond, _ptr_join(ptr, 'if'), depth + 1)
            parts.append({'anyOf': [_and(cond, schema.get('then', True)), _and(neg, schema.get('else', True))]})
        if not _DEPENDENCY_KEYWORDS.isdisjoint(schema):
            parts += self._dependencies(schema, ptr)
        out: Any = parts[0]
        for p in parts[1:]:
            out = self.merge(out, p, ptr)
        if isinstance(out, dict) and ('unevaluatedProperties' in schema or 'unevaluatedItems' in schema):
            out = self._unevaluated(out, schema, ptr)
        return out

    def _dependencies(self, schema: dict, ptr: str) -> list[Any]:
        """dependentRequired/dependentSchemas/draft-7 dependencies as anyOf parts (absent key, or the rule)."""
        parts = []
        deps: list[tuple[str, Any, str]] = []
        for k, v in (schema.get('dependentRequired') or {}).items():
            deps.append((k, {'required': list(v)}, _ptr_join(ptr, 'dependentRequired', k)))
        for k, v in (schema.get('dependentSchemas') or {}).items():
            deps.append((k, v, _ptr_join(ptr, 'dependentSchemas', k)))
        for k, v in (schema.get('dependencies') or {}).items():
            deps.append((k, {'required': list(v)} if isinstance(v, list) else v, _ptr_join(ptr, 'dependencies', k)))
        for k, rule, _p in deps:
            if rule is True or rule == {'required': []}:
                continue
            parts.append({'anyOf': [{'properties': {k: False}}, _and({'required': [k]}, rule)]})
        return parts

    def _unevaluated(self, s: dict, schema: dict, ptr: str) -> Any:
        """unevaluatedProperties/Items where the evaluated set is static: no alternatives left to pick."""
        if 'anyOf' in s and not all(self._evaluates_nothing(b, ptr) for b in s['anyOf']):
            for k in ('unevaluatedProperties', 'unevaluatedItems'):
                if k in schema:
                    self.problem(_ptr_join(ptr, k), f"{k} over anyOf/oneOf/if/dependentSchemas branches "
                                 "that declare properties or items is not supported (the evaluated set depends "
                                 "on the branch)")
            return s
        s = dict(s)
        u = schema.get('unevaluatedProperties')
        if u is not None:
            layers = s.get('__extras', [])
            if not any(l[1] is not None for l in layers):
                pats = {p: True for l in layers for p in l[0]}
                s['__extras'] = list(layers) + [[pats, u, None]]
        u = schema.get('unevaluatedItems')
        if u is not None:
            if '__contains' in s:
                self.problem(_ptr_join(ptr, 'unevaluatedItems'), "unevaluatedItems with contains is not supported")
            elif 'items' not in s:
                s['items'] = u
        self.keep.append(s)
        return s

    def _exclusive_branches(self, branches: list, ptr: str) -> list | None:
        """oneOf as anyOf of (branch i ∧ no other branch), when every branch is one of the `not` cases
        and the complements stay within budget; None otherwise (the caller falls back to anyOf)."""
        if len(branches) > MAX_EXACT_ONE_OF:
            return None
        out = []
        for i, b in enumerate(branches):
            others = {'anyOf': [x for j, x in enumerate(branches) if j != i]}
            self.keep.append(others)
            nb = self.normalize(b, ptr)
            only = None if not isinstance(nb, dict) or 'anyOf' in nb else _signature_types(nb)
            try:
                by_type = self._negate(self.normalize(others, ptr), ptr, 0)
                out.append(_and(b, self._union_of(by_type, only)))
            except (_NotRegular, GrammarTooComplex):
                return None
        return out

    def _evaluates_nothing(self, branch: Any, ptr: str, depth: int = 0) -> bool:
        """Does this branch leave the evaluated properties/items unchanged, whichever way it goes?"""
        n = self.normalize(branch, ptr)
        if isinstance(n, bool):
            return True
        if depth > 8 or any(k in n for k in ('prefixItems', 'items', '__contains')) or n.get('properties') \
                or n.get('__extras'):
            return False
        return all(self._evaluates_nothing(b, ptr, depth + 1) for b in n.get('anyOf', ()))

    def _normalize_own(self, s: dict, ptr: str) -> dict:
        """`s` (a fresh dict of a node's own keywords, rewritten in place) in the lowering's terms."""
        # (a node without any keyword rewritten below but type, properties and required, most
        # nodes of a large schema, skips their checks)
        rewrites = not _OWN_REWRITES.isdisjoint(s)
        if rewrites:
            # draft-4 boolean exclusive bounds
            for ex, base in (('exclusiveMinimum', 'minimum'), ('exclusiveMaximum', 'maximum')):
                if isinstance(s.get(ex), bool):
                    if s[ex] and base in s:
                        s[ex] = s.pop(base)
                    else:
                        del s[ex]
            for k in COUNT_KEYWORDS:
                if k in s:
                    s[k] = int(s[k])
                    if s[k] > MAX_COUNT_BOUND:
                        shown = s[k] if s[k] < 10 ** 15 else f"{float(s[k]):.3g}"
                        raise GrammarTooComplex(f"#{_ptr_join(ptr, k)}: {k} {shown} is above the lowering's "
                                                f"bound ({MAX_COUNT_BOUND})")
            if 'pattern' in s:
                s['__patterns'] = list(s.get('__patterns', ())) + [s.pop('pattern')]
            if 'format' in s:
                f = s.pop('format')
                if self.opts.format_mode == 'assert':
                    s['__formats'] = list(s.get('__formats', ())) + [f]
            if 'const' in s:
                c = s.pop('const')
                s['enum'] = [v for v in s['enum'] if _canon(v) == _canon(c)] if 'enum' in s else [c]
            if isinstance(s.get('items'), list):
                s['prefixItems'] = s.pop('items')
                if 'additionalItems' in s:
                    s['items'] = s.pop('additionalItems')
            else:
                s.pop('additionalItems', None)
        if s.get('type') == 'any':
            del s['type']
        if isinstance(s.get('type'), list) and 'any' in s['type']:
            del s['type']
        if rewrites:
            if s.get('nullable') is True and 'type' in s:
                t = s['type'] if isinstance(s['type'], list) else [s['type']]
                s['type'] = list(t) + ['null']
            s.pop('nullable', None)
            if 'oneOf' in s:
                one = s.pop('oneOf')
                optr = _ptr_join(ptr, 'oneOf')
                if len(one) > 1 and not self._disjoint(one, optr, _signature_types(s)):
                    exclusive = self._exclusive_branches(one, optr)
                    if exclusive is None:
                        self.warn(optr, "oneOf branches are not provably disjoint and not all complementable: "
                                  "lowered as anyOf (an instance valid under several branches is accepted)")
                    else:
                        one = exclusive
                if 'anyOf' in s:
                    s['anyOf'] = [{'allOf': [{'anyOf': s.pop('anyOf')}, {'anyOf': one}]}]
                else:
                    s['anyOf'] = one
        # draft-3 per-property `required: true`
        props = s.get('properties')
        if isinstance(props, dict):
            extra_req = [k for k, v in props.items() if isinstance(v, dict) and v.get('required') is True]
            if extra_req:
                req = s.get('required') if isinstance(s.get('required'), list) else []
                s['required'] = list(req) + [k for k in extra_req if k not in req]
        if 'required' in s and not isinstance(s['required'], list):
            del s['required']
        if rewrites:
            # object keywords: one layer (patternProperties, additionalProperties) per schema
            if 'patternProperties' in s or 'additionalProperties' in s:
                pp = s.pop('patternProperties', None) or {}
                addl = s.pop('additionalProperties', None)
                if 'properties' in s:
                    s['properties'] = {k: _and_all([v] + [sub for pat, sub in pp.items() if self._key_matches(pat, k, ptr)])
                                       for k, v in s['properties'].items()}
                s['__extras'] = list(s.get('__extras', ())) + [[pp, addl, None]]
            if 'propertyNames' in s:
                self._property_names(s, s.pop('propertyNames'), _ptr_join(ptr, 'propertyNames'))
            if 'contains' in s:
                c = s.pop('contains')
                lo = s.pop('minContains', 1)
                hi = s.pop('maxContains', None)
                s['__contains'] = list(s.get('__contains', ())) + [[c, lo, hi, _ptr_join(ptr, 'contains')]]
            s.pop('minContains', None)
            s.pop('maxContains', None)
            if s.get('uniqueItems') is True:
                s['__unique'] = True
            s.pop('uniqueItems', None)
        self.ptrs[id(s)] = ptr
        self.keep.append(s)
        return s

    def _property_names(self, s: dict, names: Any, ptr: str) -> None:
        """propertyNames: declared keys that fail it are forbidden; other keys meet it in their key regex."""
        n = self.normalize(names, ptr)
        if n is True:
            return
        regex = None if n is False else self.string_regex_of(n, ptr)
        if regex is None:  # no string satisfies it: no key at all
            s['maxProperties'] = 0
            return
        if 'properties' in s:
            s['properties'] = {k: (v if re.fullmatch(regex, json.dumps(k)) else False)
                               for k, v in s['properties'].items()}
        # a layer whose keys are restricted: undeclared keys must match `regex`
        s['__extras'] = list(s.get('__extras', ())) + [[{}, None, regex]]

    def _key_matches(self, pat: str, key: str, ptr: str) -> bool:
        try:
            return _encoded_matches(pat, key)
        except ecma_regex.PatternUnsupported:
            return False  # reported where the pattern's key terminal is built

    def extras_value(self, layers: list, key: str, ptr: str) -> Any:
        """Schema an undeclared key's value meets: per layer, its matching patterns, else its additional."""
        parts = []
        for pp, addl, keyregex in layers:
            matched = [sub for pat, sub in pp.items() if self._key_matches(pat, key, ptr)]
            if keyregex is not None and not re.fullmatch(keyregex, json.dumps(key)):
                return False
            parts += matched if matched else [True if addl is None else addl]
        return _and_all(parts)

    def _disjoint(self, branches: list, ptr: str, context: set[str] | None) -> bool:
        """Provably disjoint oneOf branches: distinct types, distinct const/enum, or a discriminator key.

        `context` is the type set the sibling keywords allow (None: every type).
        """
        sigs = []
        for i, b in enumerate(branches):
            n = self.normalize(b, _ptr_join(ptr, i))
            if n is False:
                continue
            if n is True or 'anyOf' in n:
                return False
            disc = {}
            for k in n.get('required', ()):
                sub = (n.get('properties') or {}).get(k)
                if sub is None:
                    continue
                ns = self.normalize(sub, ptr)
                if isinstance(ns, dict) and 'enum' in ns and 'anyOf' not in ns:
                    disc[k] = {_value_key(v) for v in ns['enum']}
            enum = None if 'enum' not in n else {_value_key(v) for v in n['enum']}
            # a closed object (additionalProperties false, no patterns) allows only its declared keys
            closed = None
            if any(addl is False and not pp and kr is None for pp, addl, kr in n.get('__extras', ())):
                closed = {k for k, v in (n.get('properties') or {}).items() if v is not False}
            required = {r for r in n.get('required', ()) if isinstance(r, str)}
            sigs.append((_signature_types(n), enum, disc, closed, required))
        for i in range(len(sigs)):
            for j in range(i + 1, len(sigs)):
                (ta, ea, da, ca, ra), (tb, eb, db, cb, rb) = sigs[i], sigs[j]
                if ta is not None and tb is not None and not ta & tb:
                    continue
                if ea is not None and eb is not None and not ea & eb:
                    continue
                common = (ta if ta is not None else set(ALL_TYPES)) & (tb if tb is not None else set(ALL_TYPES)) \
                    & (context if context is not None else set(ALL_TYPES))
                if common <= {'object'} and (any(not da[k] & db[k] for k in da.keys() & db.keys())
                                             or (ca is not None and rb - ca) or (cb is not None and ra - cb)):
                    continue
                return False
        return True

    def merge(self, a: Any, b: Any, ptr: str) -> Any:
        if a is False or b is False:
            return False
        if a is True:
            return b
        if b is True:
            return a
        out = dict(a)
        for k, vb in b.items():
            if k in ('properties', '__extras', 'items', 'prefixItems'):
                continue  # merged below, by scope
            if k not in out:
                out[k] = vb
                continue
            va = out[k]
            if k == 'type':
                out[k] = _intersect_types(va, vb)
            elif k == 'enum':
                kb = {_canon(x) for x in vb}
                out[k] = [x for x in va if _canon(x) in kb]
            elif k == 'required':
                out[k] = list(va) + [x for x in vb if x not in va]
            elif k in ('__patterns', '__formats', '__notstr', '__notnum', '__contains'):
                out[k] = list(va) + list(vb)
            elif k in ('minimum', 'minLength', 'minItems', 'minProperties', 'exclusiveMinimum'):
                out[k] = max(va, vb)
            elif k in ('maximum', 'maxLength', 'maxItems', 'maxProperties', 'exclusiveMaximum'):
                out[k] = min(va, vb)
            elif k == 'multipleOf':
                fa, fb = Fraction(str(va)), Fraction(str(vb))
                out[k] = _frac_to_num(Fraction(math.lcm(fa.numerator, fb.numerator),
                                               math.gcd(fa.denominator, fb.denominator)))
            elif k == 'anyOf':
                if len(va) * len(vb) > MAX_DISTRIBUTION:
                    raise GrammarTooComplex(f"#{ptr}: allOf of anyOfs has more than {MAX_DISTRIBUTION} combinations")
                out[k] = [{'allOf': [x, y]} for x in va for y in vb]
            elif k in ANNOTATIONS or k not in STRUCTURAL or k in UNSUPPORTED:
                pass  # annotations, unknown keywords; unsupported ones were reported already
            elif _canon(va) != _canon(vb):
                self.problem(ptr, f"cannot merge differing {k!r} under allOf")
        # objects: a key declared on one side meets the other side's patterns / additional schema
        if 'properties' in a or 'properties' in b:
            pa, pb = a.get('properties') or {}, b.get('properties') or {}
            ea, eb = a.get('__extras', []), b.get('__extras', [])
            merged = {}
            for pk in list(pa) + [x for x in pb if x not in pa]:
                va = pa[pk] if pk in pa else self.extras_value(ea, pk, ptr)
                vb = pb[pk] if pk in pb else self.extras_value(eb, pk, ptr)
                merged[pk] = _and(va, vb)
            out['properties'] = merged
        if '__extras' in a or '__extras' in b:
            out['__extras'] = list(a.get('__extras', [])) + list(b.get('__extras', []))
        # arrays: merged by position; `items` of a side without prefixItems covers every position
        if 'prefixItems' in a or 'prefixItems' in b:
            pa, pb = a.get('prefixItems') or [], b.get('prefixItems') or []
            ia, ib = a.get('items', True), b.get('items', True)
            out['prefixItems'] = [_and(pa[i] if i < len(pa) else ia, pb[i] if i < len(pb) else ib)
                                  for i in range(max(len(pa), len(pb)))]
            if 'items' in a or 'items' in b:
                out['items'] = _and(ia, ib)
        elif 'items' in a or 'items' in b:
            out['items'] = _and(a.get('items', True), b.get('items', True))
        self.keep.append(out)
        self.ptrs[id(out)] = ptr
        return out

    # ------------------------------------------------------------------ negation

    def negate(self, schema: Any, ptr: str, depth: int = 0) -> Any:
        """A schema for the complement of `schema` (its regular cases); reported and `true` otherwise."""
        try:
            return self._union_of(self._negate(self.normalize(schema, ptr, depth), ptr, depth))
        except _NotRegular as e:
            self.problem(e.ptr, f"not: {e.what} cannot be complemented (not a regular case)")
            return True

    def _union_of(self, by_type: dict[str, list[Any] | None], only: set[str] | None = None) -> Any:
        """One schema for a per-type complement; the types outside `only` are dropped (None = keep all).

        A type whose complement is unknown (None) raises :class:`_NotRegular` unless it is dropped.
        """
        alts = []
        for t in ALL_TYPES:
            if only is not None and t not in only:
                continue
            v = by_type.get(t, [])
            if v is None:
                ptr, what = self._not_regular.get(t, ('', f'a keyword on {t} values'))
                raise _NotRegular(ptr, what)
            alts += v
        for a in alts:
            self.keep.append(a)
        if not alts:
            return False
        return {'anyOf': alts} if len(alts) > 1 else alts[0]

    def _negate(self, n: Any, ptr: str, depth: int) -> dict[str, list[Any] | None]:
        """The complement of normalized `n`, per JSON type: type → alternatives (each of that type), or
        None where the complement within that type is not built (a non-regular keyword on it).

        Keeping the alternatives apart by type makes the conjunction of complements (from
        ``not: {anyOf: …}``) a product within each type only, and lets a caller that needs the
        complement on some types only (exact oneOf) ignore the others.
        """
        if n is True:
            return {}
        if n is False:
            return {t: [{'type': t}] for t in ALL_TYPES}
        if depth > MAX_MERGE_DEPTH:
            raise UnsupportedSchema(f"#{_shorten(ptr)}: not/$ref chain too deep")
        unknown: set[str] = set()
        for k in n:
            if k not in STRUCTURAL or (k in NEGATABLE and k != '__extras') or k in ('properties', 'items') \
                    or k in ('prefixItems', '__contains'):
                continue  # complemented below (_negate_object/_negate_array); their siblings are checked here
            if not self._vacuous(k, n[k]):
                what = 'additionalProperties/patternProperties/propertyNames' if k == '__extras' else repr(k)
                t = KEYWORD_TYPE.get(k)
                if t is None:
                    raise _NotRegular(self.ptrs.get(id(n), ptr), f"keyword {what}")
                unknown.add(t)
                self._not_regular.setdefault(t, (self.ptrs.get(id(n), ptr), f"keyword {what}"))
        if 'anyOf' in n:
            rest = {k: v for k, v in n.items() if k != 'anyOf'}
            out = self._negate(rest, ptr, depth + 1)
            both: dict[str, list[Any] | None] | None = None
            for i, b in enumerate(n['anyOf']):
                nb = self._negate(self.normalize(b, _ptr_join(ptr, 'anyOf', i), depth + 1), ptr, depth + 1)
                if both is None:
                    both = nb
                    continue
                inter: dict[str, list[Any] | None] = {}
                for t in ALL_TYPES:
                    xs, ys = both.get(t, []), nb.get(t, [])
                    if xs == [] or ys == []:
                        continue  # one side has no values of this type: neither has the conjunction
                    if xs is None or ys is None:
                        inter[t] = None
                        continue
                    if len(xs) * len(ys) > MAX_DISTRIBUTION:
                        raise GrammarTooComplex(f"#{ptr}: not over anyOf: more than {MAX_DISTRIBUTION} combinations")
                    merged = [self.merge(x, y, ptr) for x in xs for y in ys]
                    merged = [m for m in merged if m is not False]
                    if merged:
                        inter[t] = merged
                both = inter
            for t, alts in (both or {}).items():
                mine = out.get(t, [])
                out[t] = None if mine is None or alts is None else mine + alts
            return out
        tlist = n.get('type')
        allowed = set(ALL_TYPES) | {'integer'} if tlist is None else set(tlist if isinstance(tlist, list) else [tlist])
        enum = n.get('enum')
        out: dict[str, list[Any]] = {}
        for t in ALL_TYPES:
            if t == 'number':
                alts = self._negate_numbers(n, allowed, enum)
                if alts:
                    out[t] = alts
                continue
            if t not in allowed:
                out[t] = [{'type': t}]
                continue
            alts = []
            vals = None if enum is None else [v for v in enum if _type_ok(v, [t])]
            if t == 'null':
                if vals is not None and not vals:
                    alts.append({'type': 'null'})
            elif t == 'boolean':
                if vals is not None:
                    rest = [x for x in (True, False) if not any(v is x for v in vals)]
                    if rest:
                        alts.append({'type': 'boolean', 'enum': rest})
            elif t == 'string':
                c = {k: n[k] for k in STRING_KEYS if k in n and k != '__notstr'}
                if vals is not None:
                    c['enum'] = vals
                if c:
                    alts.append({'type': 'string', '__notstr': [dict(c, type='string')]})
                alts += [dict(x, type='string') for x in n.get('__notstr', ())]
            elif t in ('object', 'array'):
                if vals:
                    self._not_regular.setdefault(t, (ptr, f"an enum/const of {t}s"))
                    out[t] = None
                    continue
                if vals is not None:
                    alts.append({'type': t})
                elif t in unknown:
                    out[t] = None
                    continue
                else:
                    try:
                        alts += (self._negate_object if t == 'object' else self._negate_array)(n, ptr, depth)
                    except _NotRegular as e:
                        self._not_regular.setdefault(t, (e.ptr, e.what))
                        out[t] = None
                        continue
            if alts:
                out[t] = alts
        return out

    def _negate_object(self, n: dict, ptr: str, depth: int) -> list[Any]:
        """Objects failing `n`: a required key missing, a count out of range, or a declared key's value
        failing its schema."""
        alts: list[Any] = []
        for r in n.get('required', ()):
            alts.append({'type': 'object', 'properties': {r: False}})
        if n.get('minProperties', 0) > 0:
            alts.append({'type': 'object', 'maxProperties': n['minProperties'] - 1})
        if 'maxProperties' in n:
            alts.append({'type': 'object', 'minProperties': n['maxProperties'] + 1})
        for k, sub in (n.get('properties') or {}).items():
            neg = self._union_of(self._negate(self.normalize(sub, _ptr_join(ptr, 'properties', k), depth + 1),
                                              ptr, depth + 1))
            if neg is not False:
                alts.append({'type': 'object', 'required': [k], 'properties': {k: neg}})
        return alts

    def _negate_array(self, n: dict, ptr: str, depth: int) -> list[Any]:
        """Arrays failing `n`: a length out of range or some item failing `items`."""
        alts: list[Any] = []
        if n.get('minItems', 0) > 0:
            alts.append({'type': 'array', 'maxItems': n['minItems'] - 1})
        if 'maxItems' in n:
            alts.append({'type': 'array', 'minItems': n['maxItems'] + 1})
        if 'items' in n and n['items'] is not True:
            if n.get('prefixItems'):
                raise _NotRegular(ptr, "items after prefixItems")
            neg = self._union_of(self._negate(self.normalize(n['items'], _ptr_join(ptr, 'items'), depth + 1),
                                              ptr, depth + 1))
            if neg is not False:
                alts.append({'type': 'array', '__contains': [[neg, 1, None, _ptr_join(ptr, 'items')]]})
        for i, p in enumerate(n.get('prefixItems') or ()):
            # item i exists and fails its prefix schema
            neg = self._union_of(self._negate(self.normalize(p, _ptr_join(ptr, 'prefixItems', i), depth + 1),
                                              ptr, depth + 1))
            if neg is not False:
                alts.append({'type': 'array', 'minItems': i + 1, 'prefixItems': [True] * i + [neg]})
        for c, lo, hi, cptr in n.get('__contains', ()):
            # too few or too many items meet `contains`
            if lo > 0:
                alts.append({'type': 'array', '__contains': [[c, 0, lo - 1, cptr]]})
            if hi is not None:
                alts.append({'type': 'array', '__contains': [[c, hi + 1, None, cptr]]})
        return alts

    def _negate_numbers(self, n: dict, allowed: set, enum: list | None) -> list[Any]:
        """Numbers outside `n`: its number constraints (and integer-ness) complemented."""
        if 'number' not in allowed and 'integer' not in allowed:
            return [{'type': 'number'}]
        integer = 'number' not in allowed
        c = {k: n[k] for k in NUMBER_KEYS if k in n and k != '__notnum'}
        vals = None if enum is None else [v for v in enum if _type_ok(v, ['integer' if integer else 'number'])]
        if vals is not None:
            c['enum'] = vals
        out: list[Any] = []
        if c or integer:
            out.append({'type': 'number', '__notnum': [dict(c, __integer=integer)]})
        for x in n.get('__notnum', ()):  # double negation: the negated constraints themselves
            y = {k: v for k, v in x.items() if k != '__integer'}
            out.append(dict(y, type='integer' if x['__integer'] else 'number'))
        return out

    @staticmethod
    def _vacuous(k: str, v: Any) -> bool:
        """A keyword that constrains nothing (e.g. `properties: {}` or `items: true`)."""
        if k in ('properties', 'prefixItems') and not v:
            return True
        if k == 'items' and v is True:
            return True
        if k == '__extras' and all(not pp and addl in (None, True) and kr is None for pp, addl, kr in v):
            return True
        return False

    # ------------------------------------------------------------------ lowering

    def lower(self, schema: Any, ptr: str, depth: int) -> str:
        """Rule name for values valid under `schema` at nesting `depth` (depth only in indent mode)."""
        if depth > MAX_INDENT_DEPTH:
            name = self.memo.get(('deep',))
            if name is None:
                name = self.memo[('deep',)] = self.g.new_rule('too_deep')
            return name
        if schema is True or (isinstance(schema, dict) and STRUCTURAL.isdisjoint(schema)):
            if isinstance(schema, dict):
                self.check_keywords(schema, ptr)
            return self.any_value(depth)
        # document nodes are memoized by identity; schemas built by merging, by content
        key = ('id', id(schema), depth) if id(schema) in self._doc_nodes or isinstance(schema, bool) \
            else ('canon', _canon(schema), depth)
        name = self.memo.get(key)
        if name is not None:
            return name
        if not isinstance(schema, (dict, bool)):
            self.invalid(ptr, f"schema must be an object or boolean, got {type(schema).__name__}")
            return self.any_value(depth)
        self.keep.append(schema)
        name = self.memo[key] = self.g.new_rule(_hint(ptr))
        if schema is False:
            return name
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise GrammarTooComplex(f"#{_shorten(ptr)}: schema nested more than {MAX_NESTING} levels deep")
        try:
            alts = self.lower_body(schema, ptr, depth)
        finally:
            self._nesting -= 1
        self.g.set_alts(name, alts)
        return name

    def lower_body(self, schema: dict, ptr: str, depth: int) -> list[list[str]]:
        # A bare $ref: just point at the target's rule (keeps recursion finite).
        if isinstance(schema.get('$ref'), str) and (self.refs.ref_overrides_siblings
                                                    or set(schema) - ANNOTATIONS == {'$ref'}):
            self.check_keywords(schema, ptr)
            r = self.resolve_ref(schema['$ref'], schema, _ptr_join(ptr, '$ref'))
            if r is None:
                return [[self.any_value(depth)]]
            return [[self.lower(r[0], r[1], depth)]]
        if '$dynamicRef' in schema and set(schema) - ANNOTATIONS == {'$dynamicRef'} \
                and isinstance(schema['$dynamicRef'], str):
            self.check_keywords(schema, ptr)
            r = self.resolve_ref(schema['$dynamicRef'], schema, _ptr_join(ptr, '$dynamicRef'), dynamic=True)
            if r is None:
                return [[self.any_value(depth)]]
            return [[self.lower(r[0], r[1], depth)]]
        s = self.normalize(schema, ptr)
        return self.lower_normalized(s, ptr, depth)

    def lower_normalized(self, s: Any, ptr: str, depth: int) -> list[list[str]]:
        if s is False:
            return []
        if s is True:
            return [[self.any_value(depth)]]
        if 'anyOf' in s:
            branches = s['anyOf']
            rest = {k: v for k, v in s.items() if k != 'anyOf'}
            bare = not (set(rest) & STRUCTURAL)
            alts = []
            for i, b in enumerate(branches):
                # a branch of the document is named by its own pointer; built ones (not, if, dependencies)
                # by the schema they came from
                bptr = self.refs.pointer_of(b, ptr)
                if bare:
                    alts.append([self.lower(b, bptr, depth)])
                else:
                    merged = self.merge(rest, self.normalize(b, bptr), bptr)
                    alts.append([self.lower_merged(merged, bptr, depth)])
            return alts
        return self.lower_typed(s, ptr, depth)

    def lower_merged(self, s: Any, ptr: str, depth: int) -> str:
        if s is False:
            return self.g.new_rule('never')
        if s is True:
            return self.any_value(depth)
        key = ('canon', _canon(s), depth)
        name = self.memo.get(key)
        if name is None:
            name = self.memo[key] = self.g.new_rule(_hint(ptr))
            self.g.set_alts(name, self.lower_normalized(s, ptr, depth))
        return name

    def type_set(self, s: dict, ptr: str) -> list[str]:
        types = s.get('type')
        if types is None:
            return list(ALL_TYPES)
        tlist = types if isinstance(types, list) else [types]
        tset = []
        for t in tlist:
            if t not in ALL_TYPES + ('integer',):
                self.problem(_ptr_join(ptr, 'type'), f"unknown type {t!r}")
                continue
            if t not in tset:
                tset.append(t)
        if 'number' in tset and 'integer' in tset:
            tset.remove('integer')
        return tset

    def lower_typed(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        tset = self.type_set(s, ptr)
        if 'enum' in s:
            return self.lower_enum(s, tset, ptr, depth)
        alts: list[list[str]] = []
        for t in tset:
            if t == 'null':
                alts.append([self.punct('null')])
            elif t == 'boolean':
                alts.append([self.punct('true')])
                alts.append([self.punct('false')])
            elif t == 'string':
                regex = self.string_regex(s, ptr)
                if regex is not None:
                    alts.append([self.g.terminal(regex, 'STR')])
            elif t in ('number', 'integer'):
                regex = self.number_regex(s, ptr, t == 'integer')
                if regex is not None:
                    alts.append([self.g.terminal(regex, 'NUM')])
            elif t == 'object':
                alts += self.object_alts(s, ptr, depth)
            elif t == 'array':
                alts += self.array_alts(s, ptr, depth)
        return alts

    # ------------------------------------------------------------------ any value

    def any_value(self, depth: int) -> str:
        if depth > MAX_INDENT_DEPTH:
            return self.lower(True, '', depth)
        key = ('any', depth)
        name = self.memo.get(key)
        if name is not None:
            return name
        name = self.memo[key] = self.g.new_rule('value' if not self.indent_mode else f'value_d{depth}')
        d1 = self.child_depth(depth)
        string = self.g.terminal('\\x22(?:' + cs.ANY_CHAR + ')*\\x22', 'STRING')
        number = self.g.terminal(numbers.NUMBER, 'NUMBER')
        alts = [[self.punct('null')], [self.punct('true')], [self.punct('false')], [string], [number]]
        if d1 <= MAX_INDENT_DEPTH:
            # object
            members = self.g.new_rule('members' if not self.indent_mode else f'members_d{depth}')
            member = [string] + self.colon() + [self.any_value(d1)]
            self.g.set_alts(members, [member, [members] + self.comma(depth) + member])
            alts.append([self.punct('{')] + self.open_gap(depth) + [members] + self.close_gap(depth) + [self.punct('}')])
            alts.append(self.empty_container('{', '}'))
            items = self.g.new_rule('elements' if not self.indent_mode else f'elements_d{depth}')
            elem = [self.any_value(d1)]
            self.g.set_alts(items, [elem, [items] + self.comma(depth) + elem])
            alts.append([self.punct('[')] + self.open_gap(depth) + [items] + self.close_gap(depth) + [self.punct(']')])
            alts.append(self.empty_container('[', ']'))
        self.g.set_alts(name, alts)
        return name

    # ------------------------------------------------------------------ enum / const

    def lower_enum(self, s: dict, tset: list[str], ptr: str, depth: int) -> list[list[str]]:
        values = s['enum']
        if len(values) > MAX_ENUM_VALUES:
            raise GrammarTooComplex(f"#{ptr}: enum with {len(values)} values (limit {MAX_ENUM_VALUES})")
        strings: list[str] = []
        alts: list[list[str]] = []
        seen = set()
        for v in values:
            if not _type_ok(v, tset) or not self._scalar_meets(s, v, tset, ptr):
                continue
            c = _canon(v)
            if c in seen:
                continue
            seen.add(c)
            if isinstance(v, str):
                strings.append(v)
            else:
                alts.append(self.literal(v, depth))
        if strings:
            body = '|'.join(cs.encode_string_literal(x) for x in sorted(strings, key=len, reverse=True))
            alts.insert(0, [self.g.terminal('\\x22(?:' + body + ')\\x22', 'ENUM')])
        return alts

    def _scalar_meets(self, s: dict, v: Any, tset: list[str], ptr: str) -> bool:
        """Does the enum value `v` meet the string/number keywords beside the enum? (Structured values
        are filtered by type only.)"""
        if isinstance(v, str) and any(k in s for k in STRING_KEYS):
            regex = self.string_regex(s, ptr)  # (also reports what it cannot enforce)
            if regex is None:
                return False
            excluded = _excluded_strings(s.get('__notstr', ()))
            if excluded is None or not _is_int(s.get('minLength', 0)) or not _is_int(s.get('maxLength', 0)):
                return re.fullmatch(regex, json.dumps(v)) is not None
            return ecma_regex.json_read_back(v) not in excluded and _string_meets(s, v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and any(k in s for k in NUMBER_KEYS):
            integer = 'number' not in tset
            regex = self.number_regex(s, ptr, integer)
            if isinstance(v, float) and v.is_integer():
                text = str(int(v))
            else:
                text = str(v) if isinstance(v, int) else format(Decimal(repr(v)), 'f')
            return regex is not None and re.fullmatch(regex, text) is not None
        return True

    def literal(self, v: Any, depth: int) -> list[str]:
        if v is None:
            return [self.punct('null')]
        if v is True:
            return [self.punct('true')]
        if v is False:
            return [self.punct('false')]
        if isinstance(v, str):
            return [self.g.terminal('\\x22' + cs.encode_string_literal(v) + '\\x22', 'LIT')]
        if isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                raise UnsupportedSchema(f"enum/const value {v!r} is not a JSON number")
            return [self.g.terminal(_number_literal_regex(v), 'NUMLIT')]
        d1 = self.child_depth(depth)
        if isinstance(v, list):
            if not v:
                return self.empty_container('[', ']')
            syms = [self.punct('[')] + self.open_gap(depth)
            for i, x in enumerate(v):
                if i:
                    syms += self.comma(depth)
                syms += self.literal(x, d1)
            return syms + self.close_gap(depth) + [self.punct(']')]
        if isinstance(v, dict):
            if not v:
                return self.empty_container('{', '}')
            syms = [self.punct('{')] + self.open_gap(depth)
            for i, (k, x) in enumerate(v.items()):
                if i:
                    syms += self.comma(depth)
                syms += self.literal(k, d1) + self.colon() + self.literal(x, d1)
            return syms + self.close_gap(depth) + [self.punct('}')]
        raise UnsupportedSchema(f"unexpected enum value {v!r}")

    # ------------------------------------------------------------------ strings

    def string_regex(self, s: dict, ptr: str) -> str | None:
        """Regex (quotes included) of the strings meeting `s`'s string keywords; None if there are none."""
        contents: list[str] = []
        for f in s.get('__formats', []):
            pat = formats.format_pattern(f) if isinstance(f, str) else None
            if pat is None:
                self.warn(_ptr_join(ptr, 'format'), f"format {f!r} is not enforced")
                continue
            contents.append(ecma_regex.content_regex(pat))
        for p in s.get('__patterns', []):
            try:
                contents.append(ecma_regex.content_regex(p))
            except ecma_regex.PatternUnsupported as e:
                self.problem(_ptr_join(ptr, 'pattern'), f"pattern not supported: {e}")
        lo = s.get('minLength', 0)
        hi = s.get('maxLength')
        if hi is not None and hi < lo:
            return None
        if lo > 0 or hi is not None:
            q = '{%d,%s}' % (lo, '' if hi is None else hi)
            if lo == hi:
                q = '{%d}' % lo
            contents.append('(?:' + cs.ANY_CHAR + ')' + q)
        if not contents:
            contents.append('(?:' + cs.ANY_CHAR + ')*')
        negs = []
        for c in s.get('__notstr', ()):
            r = self.string_regex_of(c, ptr)
            if r is not None:
                negs.append('(?!' + r + ')')
        return ''.join(negs) + '\\x22' + ''.join('(?=' + c + '\\x22)' for c in contents[:-1]) + contents[-1] + '\\x22'

    def string_regex_of(self, n: Any, ptr: str) -> str | None:
        """Regex (quotes included) of exactly the strings a normalized schema accepts; None if none."""
        if n is True:
            return '\\x22(?:' + cs.ANY_CHAR + ')*\\x22'
        if n is False:
            return None
        if 'anyOf' in n:
            rest = {k: v for k, v in n.items() if k != 'anyOf'}
            alts = [self.string_regex_of(self.merge(rest, self.normalize(b, ptr), ptr), ptr) for b in n['anyOf']]
            alts = [a for a in alts if a is not None]
            return None if not alts else '(?:' + '|'.join(alts) + ')'
        if 'string' not in self.type_set(n, ptr):
            return None
        base = self.string_regex(n, ptr)
        if base is None:
            return None
        if 'enum' in n:
            lits = [v for v in n['enum'] if isinstance(v, str)]
            if not lits:
                return None
            body = '|'.join(cs.encode_string_literal(x) for x in sorted(dict.fromkeys(lits), key=len, reverse=True))
            base = '(?=\\x22(?:' + body + ')\\x22)' + base
        return base

    # ------------------------------------------------------------------ numbers

    def number_regex(self, s: dict, ptr: str, integer: bool) -> str | None:
        """Regex of the JSON numbers meeting `s`'s number keywords (and its `not`s); None if none."""
        base = self._bounded_number_regex(s, ptr, integer)
        if base is None or not s.get('__notnum'):
            return base
        if base == numbers.NUMBER:  # complements are exact over numbers written without exponent
            base = '\\-?' + numbers.UNUMBER + numbers.GUARD
        negs = []
        for c in s['__notnum']:
            r = self.number_regex_of(c, ptr)
            if r is not None:
                negs.append('(?!' + r + ')')
        return ''.join(negs) + base

    def number_regex_of(self, c: dict, ptr: str) -> str | None:
        """All no-exponent spellings of the numbers a negated number constraint `c` accepts."""
        integer = c.get('__integer', False)
        parts = []
        if 'enum' in c:
            lits = [_number_literal_regex(v) for v in c['enum'] if _is_number(v)]
            if not lits:
                return None
            parts.append('(?=(?:' + '|'.join(lits) + '))')
        r = self._bounded_number_regex({k: v for k, v in c.items() if k not in ('enum', '__integer')}, ptr, integer,
                                       integer_spellings=True)
        if r is None:
            return None
        return ''.join(parts) + r

    def _bounded_number_regex(self, s: dict, ptr: str, integer: bool, integer_spellings: bool = False) -> str | None:
        lo = s.get('minimum')
        hi = s.get('maximum')
        xlo = s.get('exclusiveMinimum')
        xhi = s.get('exclusiveMaximum')
        mult = s.get('multipleOf')
        # tightest lower/upper bound as (Decimal, strict)
        lower = _tighter([(lo, False), (xlo, True)], max)
        upper = _tighter([(hi, False), (xhi, True)], min)
        try:
            if integer or (mult is not None and Fraction(str(mult)).denominator == 1):
                ilo = None if lower is None else _int_lo(*lower)
                ihi = None if upper is None else _int_hi(*upper)
                if mult is not None:
                    f = Fraction(str(mult))
                    regex = numbers.int_multiple_regex(f.numerator, ilo, ihi, 1000)
                else:
                    regex = numbers.int_range_regex(ilo, ihi)
                if regex is None:
                    return None
                if integer_spellings or not integer:
                    # an integer is also written 5.0 / 5.00 (a number that is a multiple of an integer is
                    # one): every guard ends an integer part
                    regex = regex.replace(numbers.GUARD, '(?:\\.0+)?' + numbers.GUARD)
                return regex
            frac_digits = None
            if mult is not None:
                frac_digits = numbers.decimal_places_of_power_of_ten(Decimal(str(mult)))
                if frac_digits is None:
                    self.problem(_ptr_join(ptr, 'multipleOf'), f"multipleOf {mult} on numbers is not supported")
                    mult = None
            if lower is None and upper is None and frac_digits is None:
                return numbers.NUMBER
            return numbers.number_range_regex(
                None if lower is None else lower[0], bool(lower and lower[1]),
                None if upper is None else upper[0], bool(upper and upper[1]), frac_digits)
        except numbers.NumberTooComplex as e:
            if mult is not None and 'multipleOf' in str(e):
                # not a budget question: the constraint is outside what we spell as a regex
                self.problem(_ptr_join(ptr, 'multipleOf'), str(e))
                return self._bounded_number_regex({k: v for k, v in s.items() if k != 'multipleOf'}, ptr, integer,
                                                  integer_spellings)
            raise GrammarTooComplex(f"#{ptr}: {e}") from None

    # ------------------------------------------------------------------ objects

    def object_alts(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        d1 = self.child_depth(depth)
        props = s.get('properties') or {}
        layers = s.get('__extras', [])
        required = [r for r in s.get('required', []) if isinstance(r, str)]
        min_p = s.get('minProperties', 0)
        max_p = s.get('maxProperties')
        if max_p is not None and max_p < min_p:
            return []
        names = list(props)
        pptr = _ptr_join(ptr, 'properties')
        schemas = {k: (props[k], _ptr_join(pptr, k)) for k in names}
        for r in required:
            if r not in schemas:
                names.append(r)
                schemas[r] = (self.extras_value(layers, r, ptr), _ptr_join(ptr, 'required'))
        req = set(required)
        # members of declared properties
        member: dict[str, list[str]] = {}
        key_terms = self._key_terms
        for k in names:
            sub, sptr = schemas[k]
            key_term = key_terms.get(k)
            if key_term is None:  # (a name recurs across a schema's objects; its terminal is one)
                key_term = key_terms[k] = self.g.terminal('\\x22' + cs.encode_string_literal(k) + '\\x22', 'KEY')
            member[k] = [key_term] + self.colon() + [self.lower(sub, sptr, d1)]
        extras = self._extra_members(layers, names, ptr, d1)
        empty_ok = not req and min_p == 0
        if self.opts.property_order == 'any':
            if len(names) > MAX_ANY_ORDER_PROPERTIES:
                raise UnsupportedSchema(f"#{ptr}: property_order='any' supports at most "
                                        f"{MAX_ANY_ORDER_PROPERTIES} properties, this object has {len(names)}")
            first = self._any_order(names, req, member, extras, min_p, max_p, depth)
        else:
            first = self._schema_order(names, req, member, extras, min_p, max_p, depth)
        alts = []
        if first is not None:
            alts.append([self.punct('{')] + self.open_gap(depth) + [first] + self.close_gap(depth) + [self.punct('}')])
        if empty_ok:
            alts.append(self.empty_container('{', '}'))
        return alts

    def _extra_members(self, layers: list, names: list[str], ptr: str, d1: int) -> list[list[str]]:
        """Members for undeclared keys, one per region of the key space the patterns cut out.

        A key meets, in every layer, all the patternProperties schemas whose pattern it matches, or
        the layer's additionalProperties when it matches none. Patterns with the same schema form one
        class; each subset of classes (the key matches a pattern of each class in it and of no other)
        is one region with one value schema, spelled with lookaheads on the key.
        """
        excl = ''
        if names:
            excl = '(?!(?:' + '|'.join([cs.encode_string_literal(k) for k in names]) + ')\\x22)'
        if not layers:
            # (what the general case below makes of no layer: one region, of every other key, whose
            # value is any value)
            key_term = self.g.terminal('\\x22' + excl + '(?:' + cs.ANY_CHAR + ')*' + '\\x22', 'AKEY')
            return [[key_term] + self.colon() + [self.lower(True, _ptr_join(ptr, 'additionalProperties'), d1)]]
        key_looks = ''.join('(?=' + kr + ')' for _pp, _addl, kr in layers if kr is not None)
        classes: list[tuple[int, Any, list[str], str, list[str]]] = []
        for li, (pp, _addl, _kr) in enumerate(layers):
            groups: dict[str, list] = {}
            for pat, sub in pp.items():
                pptr = _ptr_join(ptr, 'patternProperties', pat)
                try:
                    c = ecma_regex.content_regex(pat)
                except ecma_regex.PatternUnsupported as e:
                    self.problem(pptr, f"pattern not supported: {e}")
                    continue
                g = groups.setdefault(_canon(_structural(sub)), [sub, [], pptr, []])
                g[1].append(c)
                g[3].append(pat)
            classes += [(li, sub, regs, pptr, pats) for sub, regs, pptr, pats in groups.values()]
        n = len(classes)
        overlap = [[i == j or not all(ecma_regex.provably_disjoint(p, q) for p in classes[i][4] for q in classes[j][4])
                    for j in range(n)] for i in range(n)]
        regions = _cliques(overlap, MAX_REGIONS)
        if regions is None:
            raise GrammarTooComplex(f"#{_ptr_join(ptr, 'patternProperties')}: {n} patterns with different schemas "
                                    f"that may overlap: more than {MAX_REGIONS} combinations a key could match")
        any_char = '(?:' + cs.ANY_CHAR + ')*'
        out = []
        for region in regions:
            parts: list[Any] = []
            for li, (_pp, addl, _kr) in enumerate(layers):
                mine = [classes[i][1] for i in region if classes[i][0] == li]
                parts += mine if mine else [True if addl is None else addl]
            value = _and_all(parts)
            if value is False:
                continue
            pos = [_alt_regex(classes[i][2]) for i in region]
            # exclude the other classes a key of this region could still match
            others = [i for i in range(n) if i not in region and all(overlap[i][j] for j in region)]
            neg = ''.join('(?!' + _alt_regex(classes[i][2]) + '\\x22)' for i in others)
            body = (''.join('(?=' + p + '\\x22)' for p in pos[:-1]) + neg + pos[-1]) if pos else neg + any_char
            key_term = self.g.terminal(key_looks + '\\x22' + excl + body + '\\x22', 'PKEY' if pos else 'AKEY')
            vptr = classes[region[0]][3] if region else _ptr_join(ptr, 'additionalProperties')
            out.append([key_term] + self.colon() + [self.lower(value, vptr, d1)])
        return out

    def _count_cap(self, min_p: int, max_p: int | None) -> int:
        return max_p + 1 if max_p is not None else min_p

    def _schema_order(self, names, req, member, extras, min_p, max_p, depth) -> str | None:
        n = len(names)
        cap = self._count_cap(min_p, max_p)
        if (n + 2) * (cap + 1) * 2 > MAX_COUNT_STATES:
            raise GrammarTooComplex("object with too many properties × property-count states")
        comma = self.comma(depth)
        if max_p is None and min_p == 0:
            return self._schema_order_uncounted(names, req, member, extras, comma)
        rules: dict[tuple, str] = {}

        def state(i: int, c: int, first: bool) -> str:
            key = (i, c, first)
            if key in rules:
                return rules[key]
            name = rules[key] = self.g.new_rule('props')
            alts = []
            sep = [] if first else comma
            c1 = min(c + 1, cap)
            can_add = max_p is None or c + 1 <= max_p
            if i < n:
                k = names[i]
                if can_add:
                    alts.append(sep + member[k] + [state(i + 1, c1, False)])
                if k not in req:
                    alts.append([state(i + 1, c, first)])
            else:
                if can_add:
                    for e in extras:
                        alts.append(sep + e + [state(n, c1, False)])
                if not first and c >= min_p:
                    alts.append([])
            self.g.set_alts(name, alts)
            return name

        try:
            return state(0, 0, True)
        finally:
            del state  # a recursive closure is a reference cycle: broken here, refcounting frees it

    def _schema_order_uncounted(self, names, req, member, extras, comma) -> str:
        """:meth:`_schema_order` where no property count is bounded (most objects), built without
        its recursion: the same rules, made and filled in the same order.

        With no count the states are (i, first): ``later[i]`` reads properties i.. after a member
        was written, ``firsts[i]`` before any. The recursion makes ``firsts[0]``, then every
        ``later[i]`` (one descent through the members), fills them from the last, then makes the
        ``firsts`` the optional properties lead to (up to the first required one) and fills them
        from the last."""
        new_rule, set_alts = self.g.new_rule, self.g.set_alts
        n = len(names)
        top = new_rule('props')
        if n == 0:
            if not extras:
                set_alts(top, [])
                return top
            last = new_rule('props')
            set_alts(last, [comma + e + [last] for e in extras] + [[]])
            set_alts(top, [e + [last] for e in extras])
            return top
        later: list[str] = [top] + [new_rule('props') for _ in range(n)]  # (later[0] is never used)
        set_alts(later[n], [comma + e + [later[n]] for e in extras] + [[]])
        for i in range(n - 1, 0, -1):
            k = names[i]
            alts = [comma + member[k] + [later[i + 1]]]
            if k not in req:
                alts.append([later[i + 1]])
            set_alts(later[i], alts)
        firsts = [top]
        while len(firsts) <= n and names[len(firsts) - 1] not in req:
            firsts.append(new_rule('props'))
        for j in range(len(firsts) - 1, -1, -1):
            if j == n:
                alts = [e + [later[n]] for e in extras]
            else:
                k = names[j]
                alts = [member[k] + [later[j + 1]]]
                if k not in req:
                    alts.append([firsts[j + 1]])
            set_alts(firsts[j], alts)
        return top

    def _any_order(self, names, req, member, extras, min_p, max_p, depth) -> str | None:
        cap = self._count_cap(min_p, max_p)
        req_mask = sum(1 << i for i, k in enumerate(names) if k in req)
        rules: dict[tuple, str] = {}
        comma = self.comma(depth)
        budget = [MAX_COUNT_STATES]

        def state(mask: int, c: int, first: bool) -> str:
            key = (mask, c, first)
            if key in rules:
                return rules[key]
            budget[0] -= 1
            if budget[0] < 0:
                raise GrammarTooComplex("property_order='any': too many states")
            name = rules[key] = self.g.new_rule('anyprops')
            alts = []
            sep = [] if first else comma
            c1 = min(c + 1, cap)
            if max_p is None or c + 1 <= max_p:
                for i, k in enumerate(names):
                    if not mask & (1 << i):
                        alts.append(sep + member[k] + [state(mask | (1 << i), c1, False)])
                for e in extras:
                    alts.append(sep + e + [state(mask, c1, False)])
            if not first and c >= min_p and (mask & req_mask) == req_mask:
                alts.append([])
            self.g.set_alts(name, alts)
            return name

        try:
            return state(0, 0, True)
        finally:
            del state  # a recursive closure is a reference cycle: broken here, refcounting frees it

    # ------------------------------------------------------------------ arrays

    def array_alts(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        d1 = self.child_depth(depth)
        prefix = s.get('prefixItems') or []
        rest = s.get('items', True)
        m = s.get('minItems', 0)
        M = s.get('maxItems')
        if M is not None and M < m:
            return []
        if s.get('__unique'):
            return self._unique_array_alts(s, prefix, rest, m, M, ptr, depth)
        contains = s.get('__contains', [])
        cons = [c for c in contains if not (c[1] == 0 and c[2] is None)]
        if len(cons) > MAX_CONTAINS:
            raise GrammarTooComplex(f"#{cons[0][3]}: more than {MAX_CONTAINS} contains on one array (after allOf)")
        if any(hi is not None and hi < lo for _c, lo, hi, _p in cons):
            return []
        if not cons and not prefix and m == 0 and M is None:
            return self._uncounted_array_alts(rest, ptr, depth, d1)
        # counted contains: lo..hi each; a count with no maximum saturates at its minimum
        caps = [hi if hi is not None else lo for _c, lo, hi, _p in cons]
        negs = [None if hi is None else self.negate(c, cptr) for c, _lo, hi, cptr in cons]
        loop_from = max(len(prefix), m)
        if loop_from > MAX_ITEM_CHAIN or (M is not None and M - loop_from > MAX_ITEM_CHAIN):
            raise GrammarTooComplex(f"#{ptr}: minItems/maxItems need a chain of more than {MAX_ITEM_CHAIN} items")
        count_states = math.prod(c + 1 for c in caps)
        if (loop_from + 2) * count_states > MAX_COUNT_STATES:
            raise GrammarTooComplex(f"#{ptr}: items × contains-count states over budget")
        elem_cache: dict[tuple, str | None] = {}

        def elem(j: int, kinds: tuple[str, ...]) -> str | None:
            """The element at position j that is in / out of / either for each contains."""
            pos = j if j < len(prefix) else -1
            key = (pos, kinds)
            if key not in elem_cache:
                base = prefix[j] if pos >= 0 else rest
                bptr = _ptr_join(ptr, 'prefixItems', j) if pos >= 0 else _ptr_join(ptr, 'items')
                for kind, (c, _lo, _hi, cptr), neg in zip(kinds, cons, negs):
                    if kind == 'in':
                        base, bptr = _and(base, c), cptr
                    elif kind == 'out':
                        base = _and(base, neg)
                elem_cache[key] = None if base is False else self.lower(base, bptr, d1)
            return elem_cache[key]

        def choices(j: int, c: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
            """(element rule, counts after it) for the element at position j."""
            options = []
            for i, (_c, _lo, hi, _p) in enumerate(cons):
                opts = []
                if hi is None or c[i] + 1 <= hi:
                    opts.append(('in', min(c[i] + 1, caps[i])))
                opts.append(('any' if hi is None else 'out', c[i]))
                options.append(opts)
            out = []
            for combo in itertools.product(*options):
                e = elem(j, tuple(k for k, _ in combo))
                if e is not None:
                    out.append((e, tuple(n for _, n in combo)))
            return out

        lows = tuple(lo for _c, lo, _hi, _p in cons)
        zero = tuple(0 for _ in cons)
        comma = self.comma(depth)
        rules: dict[tuple, str] = {}

        def after(j: int, c: tuple[int, ...]) -> str:
            """Continuation after j >= 1 elements, c[i] of them counted by contains i."""
            if M is None and j > loop_from:
                j = loop_from if loop_from >= 1 else 1
            if (j, c) in rules:
                return rules[(j, c)]
            name = rules[(j, c)] = self.g.new_rule('items')
            alts = []
            if j >= m and all(x >= lo for x, lo in zip(c, lows)):
                alts.append([])
            if M is None or j < M:
                nxt = j + 1
                if M is None and nxt > max(loop_from, 1):
                    nxt = max(loop_from, 1)
                for e, c2 in choices(j, c):
                    alts.append(comma + [e, after(nxt, c2)])
            self.g.set_alts(name, alts)
            return name

        alts = []
        try:
            if M is None or M >= 1:
                for e0, c1 in choices(0, zero):
                    alts.append([self.punct('[')] + self.open_gap(depth) + [e0, after(1, c1)]
                                + self.close_gap(depth) + [self.punct(']')])
        finally:
            del elem, choices, after  # (recursive closures: see _schema_order)
        if m == 0 and not any(lows):
            alts.append(self.empty_container('[', ']'))
        return alts

    def _uncounted_array_alts(self, rest: Any, ptr: str, depth: int, d1: int) -> list[list[str]]:
        """:meth:`array_alts` of an array with `items` only (no prefix, count or contains; most
        arrays), without its state machinery: the same rules and terminals, made in the same order
        (one rule for the items after the first)."""
        comma = self.comma(depth)
        alts = []
        if rest is not False:
            e = self.lower(rest, _ptr_join(ptr, 'items'), d1)
            open_ = [self.punct('[')] + self.open_gap(depth)
            more = self.g.new_rule('items')
            self.g.set_alts(more, [[], comma + [e, more]])
            alts.append(open_ + [e, more] + self.close_gap(depth) + [self.punct(']')])
        alts.append(self.empty_container('[', ']'))
        return alts

    def _unique_array_alts(self, s: dict, prefix: list, rest: Any, m: int, M: int | None,
                           ptr: str, depth: int) -> list[list[str]]:
        """uniqueItems over a finite item language: the set of values used so far is the state."""
        uptr = _ptr_join(ptr, 'uniqueItems')
        n = self.normalize(rest, _ptr_join(ptr, 'items'))
        values = None
        if prefix or s.get('__contains'):
            self.problem(uptr, "uniqueItems with prefixItems/contains is not supported")
        elif isinstance(n, dict) and 'enum' in n and 'anyOf' not in n:
            tset = self.type_set(n, ptr)
            values = [v for v in n['enum'] if _type_ok(v, tset) and not isinstance(v, (dict, list))]
        elif isinstance(n, dict) and 'anyOf' not in n and set(self.type_set(n, ptr)) <= {'null', 'boolean'}:
            values = [v for v, t in ((None, 'null'), (True, 'boolean'), (False, 'boolean')) if t in self.type_set(n, ptr)]
        else:
            self.problem(uptr, "uniqueItems is supported for items with finitely many values "
                         f"(booleans, null, enums of at most {MAX_UNIQUE_VALUES} scalars)")
        if values is None:
            return self.array_alts({k: v for k, v in s.items() if k != '__unique'}, ptr, depth)
        distinct: dict[Any, Any] = {}
        for v in values:
            distinct.setdefault(_value_key(v), v)
        vals = list(distinct.values())
        if len(vals) > MAX_UNIQUE_VALUES:
            raise GrammarTooComplex(f"#{uptr}: uniqueItems over {len(vals)} values (limit {MAX_UNIQUE_VALUES})")
        d1 = self.child_depth(depth)
        lits = [self.literal(v, d1) for v in vals]
        comma = self.comma(depth)
        rules: dict[int, str] = {}

        def after(used: int) -> str:
            if used in rules:
                return rules[used]
            name = rules[used] = self.g.new_rule('uniq')
            count = bin(used).count('1')
            alts = [[]] if count >= m else []
            if M is None or count < M:
                for i, lit in enumerate(lits):
                    if not used >> i & 1:
                        alts.append(comma + lit + [after(used | 1 << i)])
            self.g.set_alts(name, alts)
            return name

        alts = []
        try:
            if M is None or M >= 1:
                for i, lit in enumerate(lits):
                    alts.append([self.punct('[')] + self.open_gap(depth) + lit + [after(1 << i)]
                                + self.close_gap(depth) + [self.punct(']')])
        finally:
            del after  # (a recursive closure: see _schema_order)
        if m == 0:
            alts.append(self.empty_container('[', ']'))
        return alts


# ---------------------------------------------------------------------- helpers


def _malformed(k: str, v: Any) -> str | None:
    """Why the value of keyword `k` is not what the specification allows (None when it is fine)."""
    if k not in _CHECKED_KEYWORDS:  # annotations and unknown keywords: most keys of a large schema
        return None
    if k in COUNT_KEYWORDS:
        return None if _is_count(v) else f"{k} must be a non-negative integer, got {v!r}"[:200]
    if k in NUMBER_KEYWORDS:
        if k in ('exclusiveMinimum', 'exclusiveMaximum') and isinstance(v, bool):
            return None  # draft 4
        if not _is_number(v):
            return f"{k} must be a finite number, got {v!r}"[:200]
        if k == 'multipleOf' and v <= 0:
            return f"multipleOf must be greater than 0, got {v!r}"
        return None
    if k == 'type':
        ok = isinstance(v, str) or (isinstance(v, list) and all(isinstance(t, str) for t in v))
        return None if ok else "type must be a string or a list of strings"
    if k == 'enum':
        return None if isinstance(v, list) else "enum must be an array"
    if k == 'required':
        ok = isinstance(v, bool) or (isinstance(v, list) and all(isinstance(r, str) for r in v))
        return None if ok else "required must be an array of strings"
    if k in SCHEMA_MAP_KEYWORDS:
        ok = isinstance(v, dict) and all(_is_schema(x) for x in v.values())
        return None if ok else f"{k} must be an object whose values are schemas"
    if k in SCHEMA_KEYWORDS:
        return None if _is_schema(v) else f"{k} must be a schema (object or boolean)"
    if k == 'items':
        ok = _is_schema(v) or (isinstance(v, list) and all(_is_schema(x) for x in v))
        return None if ok else "items must be a schema or an array of schemas"
    if k in SCHEMA_LIST_KEYWORDS:
        ok = isinstance(v, list) and all(_is_schema(x) for x in v) and (bool(v) or k == 'prefixItems')
        return None if ok else f"{k} must be a non-empty array of schemas"
    if k in ('pattern', 'format', '$ref', '$dynamicRef'):
        return None if isinstance(v, str) else f"{k} must be a string"
    if k == 'dependentRequired':
        ok = isinstance(v, dict) and all(isinstance(x, list) and all(isinstance(r, str) for r in x) for x in v.values())
        return None if ok else "dependentRequired must map names to arrays of strings"
    if k == 'dependencies':
        ok = isinstance(v, dict) and all(_is_schema(x) or (isinstance(x, list) and all(isinstance(r, str) for r in x))
                                         for x in v.values())
        return None if ok else "dependencies must map names to schemas or arrays of strings"
    if k in ('uniqueItems', 'nullable'):
        return None if isinstance(v, bool) else f"{k} must be a boolean"
    return None


_CHECKED_KEYWORDS = frozenset().union(
    COUNT_KEYWORDS, NUMBER_KEYWORDS, SCHEMA_MAP_KEYWORDS, SCHEMA_KEYWORDS, SCHEMA_LIST_KEYWORDS,
    ('type', 'enum', 'required', 'items', 'pattern', 'format', '$ref', '$dynamicRef', 'dependentRequired',
     'dependencies', 'uniqueItems', 'nullable'))
"""The keywords whose values :func:`_malformed` checks."""


def _malformed_keywords(root: Any, limit: int = 50) -> tuple[list[str], set[int]]:
    """Every malformed keyword value in the document's schema positions, with its JSON pointer,
    and the ids of the schema nodes visited (when there is none, each of them is well-formed)."""
    out: list[str] = []
    # a node's path is (parent's path, key) and its pointer is written only for a message
    todo: list[tuple[Any, Any]] = [(root, None)]
    seen: set[int] = set()
    while todo and len(out) < limit:
        node, path = todo.pop()
        if not isinstance(node, dict) or id(node) in seen:
            if not isinstance(node, (dict, bool)):
                out.append(f"#{_shorten(_pointer(path))}: schema must be an object or boolean, got {type(node).__name__}")
            continue
        seen.add(id(node))
        for k, v in node.items():
            if k not in _CHECKED_KEYWORDS:  # (nothing to check nor to walk into: most keys)
                continue
            msg = _malformed(k, v)
            if msg is not None:
                out.append(f"#{_shorten(_pointer((path, k)))}: {msg}")
                continue
            if k in SCHEMA_KEYWORDS or (k == 'items' and isinstance(v, dict)):
                todo.append((v, (path, k)))
            elif k in SCHEMA_MAP_KEYWORDS or k == 'dependencies':
                p = (path, k)
                todo += [(x, (p, name)) for name, x in v.items() if not isinstance(x, list)]
            elif k in SCHEMA_LIST_KEYWORDS or (k == 'items' and isinstance(v, list)):
                p = (path, k)
                todo += [(x, (p, i)) for i, x in enumerate(v)]
    return out, seen


def _pointer(path: Any) -> str:
    """The JSON pointer of a ``(parent path, key)`` chain (None: the root)."""
    keys = []
    while path is not None:
        path, k = path
        keys.append(k)
    return ptr_join('', *reversed(keys))


def _structural(s: Any) -> Any:
    """`s` without its top-level annotations and unknown keywords (which do not change its language)."""
    if not isinstance(s, dict):
        return s
    return {k: v for k, v in s.items() if k in STRUCTURAL}


def _cliques(overlap: list[list[bool]], limit: int) -> list[list[int]] | None:
    """Every set of pairwise-overlapping classes (the empty set first); None past `limit` sets."""
    n = len(overlap)
    out: list[list[int]] = []

    def grow(current: list[int], start: int) -> bool:
        out.append(current)
        if len(out) > limit:
            return False
        for i in range(start, n):
            if all(overlap[i][j] for j in current) and not grow(current + [i], i + 1):
                return False
        return True

    try:
        return out if grow([], 0) else None
    finally:
        del grow  # (a recursive closure: see Lowerer._schema_order)


def _shorten(ptr: str, keep: int = 160) -> str:
    return ptr if len(ptr) <= keep else ptr[:keep] + '…'


def _alt_regex(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else '(?:' + '|'.join(parts) + ')'


def _value_key(v: Any) -> tuple:
    """Equality of JSON values as JSON Schema sees it (1 == 1.0, true != 1)."""
    if v is None:
        return ('null',)
    if isinstance(v, bool):
        return ('bool', v)
    if isinstance(v, (int, float)):
        return ('num', Fraction(v) if isinstance(v, int) or math.isfinite(v) else repr(v))
    if isinstance(v, str):
        return ('str', v)
    return ('json', _canon(v))


def _signature_types(n: dict) -> set[str] | None:
    t = n.get('type')
    if t is None:
        types = None
    else:
        types = {('number' if x == 'integer' else x) for x in (t if isinstance(t, list) else [t])}
    if 'enum' in n:
        et = set()
        for v in n['enum']:
            et.add('null' if v is None else 'boolean' if isinstance(v, bool) else 'number'
                   if isinstance(v, (int, float)) else 'string' if isinstance(v, str) else
                   'array' if isinstance(v, list) else 'object')
        types = et if types is None else types & et
    return types


_NOT_ASCII_ALNUM = re.compile('[^0-9A-Za-z]')


@lru_cache(maxsize=64)
def _punct_terminal(text: str) -> tuple[str, str]:
    """(regex, name hint) of the punctuation or keyword `text` (the same in every lowering)."""
    regex = ''.join(cs.char_regex(ord(c)) for c in text)
    hint = {'{': 'LBRACE', '}': 'RBRACE', '[': 'LSQB', ']': 'RSQB', ',': 'COMMA', ':': 'COLON',
            'true': 'TRUE', 'false': 'FALSE', 'null': 'NULL', ': ': 'COLON_SP'}.get(text, 'P')
    return regex, hint


def _hint(ptr: str) -> str:
    """A rule-name hint from a pointer's last token."""
    return _token_hint(ptr[ptr.rfind('/') + 1:] if ptr else 'root')


@lru_cache(maxsize=16384)
def _token_hint(tail: str) -> str:
    """:func:`_hint` of a pointer token (memoized: a rule is named for each node, and the tokens,
    property names mostly, recur within a schema and across schemas)."""
    tail = tail.lower()
    if not (tail.isascii() and tail.isalnum()):
        tail = _NOT_ASCII_ALNUM.sub('_', tail)
    tail = tail[:24].strip('_')
    if not tail or not tail[0].isalpha():
        tail = 's_' + tail
    return tail


def _intersect_types(a: Any, b: Any) -> list[str]:
    la = set(a if isinstance(a, list) else [a])
    lb = set(b if isinstance(b, list) else [b])
    out = la & lb
    if 'integer' in la and 'number' in lb or 'number' in la and 'integer' in lb:
        out.add('integer')
    return sorted(out)


def _frac_to_num(f: Fraction) -> int | float:
    return f.numerator if f.denominator == 1 else float(f)


def _type_ok(v: Any, tset: list[str]) -> bool:
    if v is None:
        return 'null' in tset
    if isinstance(v, bool):
        return 'boolean' in tset
    if isinstance(v, int):
        return 'number' in tset or 'integer' in tset
    if isinstance(v, float):
        return 'number' in tset or ('integer' in tset and v.is_integer())
    if isinstance(v, str):
        return 'string' in tset
    if isinstance(v, list):
        return 'array' in tset
    if isinstance(v, dict):
        return 'object' in tset
    return False


def _number_literal_regex(v: int | float) -> str:
    """All plain decimal spellings of the number v (trailing fraction zeros allowed)."""
    d = Decimal(str(v)) if isinstance(v, float) else Decimal(v)
    neg = d < 0
    ip, fp = numbers._split(d)
    frac = '(?:\\.' + fp + '0*)' if fp else '(?:\\.0+)?'
    body = str(ip) + frac
    if d == 0:
        return '\\-?' + body + numbers.GUARD
    return ('\\-' if neg else '') + body + numbers.GUARD


def _tighter(cands: list[tuple[Any, bool]], pick) -> tuple[Decimal, bool] | None:
    best = None
    for v, strict in cands:
        if v is None:
            continue
        d = Decimal(str(v))
        if best is None or d != best[0] and pick(d, best[0]) == d:
            best = (d, strict)
        elif d == best[0] and strict:
            best = (d, True)
    return best


def _int_lo(d: Decimal, strict: bool) -> int:
    f = math.floor(d)
    return f + 1 if (strict or f != d) else f


def _int_hi(d: Decimal, strict: bool) -> int:
    c = math.ceil(d)
    return c - 1 if (strict or c != d) else c


def build(schema: Any, opts: Options) -> tuple[GrammarBuilder, list[str]]:
    """Lower a loaded schema into a :class:`GrammarBuilder` (start rule ``start``, pruned when it is
    emitted) and the warnings; raise on unsupported keywords. :func:`lower` emits the IR."""
    import sys
    low = Lowerer(schema, opts)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 12_000))  # item/property chains recurse once per element
    try:
        with memoized_texts():  # (the lowering never changes a schema value it has built)
            top = low.lower(schema, '', 0)
    except RecursionError:
        raise GrammarTooComplex("JSON Schema lowering: schema nesting too deep") from None
    finally:
        sys.setrecursionlimit(old_limit)
    if low.ctx.invalid:
        raise UnsupportedSchema("invalid JSON Schema:\n  " + "\n  ".join(low.ctx.invalid))
    if low.ctx.problems:
        raise UnsupportedSchema("unsupported JSON Schema features:\n  " + "\n  ".join(low.ctx.problems))
    low.g.rules['start'] = [[top]]
    return low.g, low.ctx.warnings


def lower(schema: Any, opts: Options) -> tuple[Grammar, list[str]]:
    """Lower a loaded schema to (grammar IR with start rule ``start``, warnings); raise on
    unsupported keywords."""
    builder, warnings = build(schema, opts)
    return builder.to_grammar('start'), warnings
