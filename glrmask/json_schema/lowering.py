"""JSON Schema → Lark grammar text.

Each schema node becomes a rule; strings and numbers become single terminals whose regex carries
every string/number constraint (so a terminal's `re.match` end is always the end of the JSON value:
strings include their quotes, numbers end in a guard). Objects follow the schema's property order;
arrays count items with a chain of rules. `$ref`s become rule references (recursion is free),
`allOf` is merged into one schema, `anyOf`/`oneOf` become alternatives.

Whitespace is an explicit grammar symbol at every gap between tokens, never ``%ignore``, so that a
run can be bounded: ``WS: /[ \\t\\n\\r]{1,k}(?![ \\t\\n\\r])/`` is optional at each gap, and gaps are
never adjacent, so each gap holds exactly 0..k whitespace characters.
"""
from __future__ import annotations

import json
import math
import re
import urllib.parse
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import GrammarTooComplex, UnsupportedSchema
from . import charset as cs
from . import ecma_regex, formats, numbers
from .builder import GrammarBuilder

ALL_TYPES = ('null', 'boolean', 'object', 'array', 'string', 'number')
ANNOTATIONS = frozenset({
    'title', 'description', 'default', 'examples', 'example', '$schema', '$id', 'id', '$comment',
    'readOnly', 'writeOnly', 'deprecated', 'contentMediaType', 'contentEncoding', 'contentSchema',
    '$anchor', '$dynamicAnchor', '$recursiveAnchor', '$defs', 'definitions', '$vocabulary',
})
UNSUPPORTED = ('not', 'if', 'then', 'else', 'dependentRequired', 'dependentSchemas', 'dependencies',
               'uniqueItems', 'contains', 'minContains', 'maxContains', 'unevaluatedProperties',
               'unevaluatedItems', 'propertyNames', '$dynamicRef', '$recursiveRef')
STRUCTURAL = frozenset({
    'type', 'enum', 'const', 'properties', 'required', 'additionalProperties', 'patternProperties',
    'items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'minLength', 'maxLength',
    'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
    'minProperties', 'maxProperties', 'anyOf', 'oneOf', 'allOf', '$ref', 'nullable',
    '__patterns', '__formats',
}) | frozenset(UNSUPPORTED)

DEFAULT_MAX_WHITESPACE = 4
MAX_ANY_ORDER_PROPERTIES = 8
MAX_INDENT_DEPTH = 24
MAX_ENUM_VALUES = 5000
MAX_ITEM_CHAIN = 1000
MAX_COUNT_STATES = 20000
MAX_DISTRIBUTION = 256
MAX_MERGE_DEPTH = 64


@dataclass(frozen=True)
class Options:
    whitespace: str = 'flexible'
    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    indent: int | None = None
    property_order: str = 'schema'
    lenient: bool = False
    max_rules: int = 50_000
    max_chars: int = 8_000_000


@dataclass
class _Ctx:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_schema(schema: Any) -> Any:
    """Accept a dict/bool, a pathlib.Path, or a str (JSON text if it parses, else a file path)."""
    if isinstance(schema, Path):
        return json.loads(schema.read_text(encoding='utf-8'))
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError:
            p = Path(schema)
            if p.is_file():
                return json.loads(p.read_text(encoding='utf-8'))
            raise UnsupportedSchema(f"schema string is neither JSON nor an existing file: {schema[:80]!r}")
    if isinstance(schema, (dict, bool)):
        return schema
    raise UnsupportedSchema(f"schema must be a dict, bool, JSON text or path, not {type(schema).__name__}")


def _ptr_join(ptr: str, *parts: object) -> str:
    for p in parts:
        ptr += '/' + str(p).replace('~', '~0').replace('/', '~1')
    return ptr


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(',', ':'))


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
        if opts.indent is not None and opts.indent < 0:
            raise ValueError("indent must be >= 0")
        if opts.max_whitespace < 1:
            raise ValueError("max_whitespace must be >= 1")
        self._anchors: dict[str, Any] | None = None
        self._punct: dict[str, str] = {}

    # ------------------------------------------------------------------ problems

    def problem(self, ptr: str, msg: str) -> None:
        text = f"#{ptr}: {msg}"
        if self.opts.lenient:
            self.ctx.warnings.append(text + " (ignored)")
        else:
            self.ctx.problems.append(text)

    def warn(self, ptr: str, msg: str) -> None:
        self.ctx.warnings.append(f"#{ptr}: {msg}")

    # ------------------------------------------------------------------ layout symbols

    def punct(self, text: str) -> str:
        name = self._punct.get(text)
        if name is None:
            regex = ''.join(cs.char_regex(ord(c)) for c in text)
            hint = {'{': 'LBRACE', '}': 'RBRACE', '[': 'LSQB', ']': 'RSQB', ',': 'COMMA', ':': 'COLON',
                    'true': 'TRUE', 'false': 'FALSE', 'null': 'NULL', ': ': 'COLON_SP'}.get(text, 'P')
            name = self._punct[text] = self.g.terminal(regex, hint)
        return name

    def gap(self) -> list[str]:
        if not self.flex:
            return []
        if '_w' not in self.g.rules:
            ws = self.g.terminal('[ \\t\\n\\r]{1,%d}(?![ \\t\\n\\r])' % self.opts.max_whitespace, 'WS')
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
        if self.indent_mode:
            return [self.punct(',')] + self.newline(depth + 1)
        return self.gap() + [self.punct(',')] + self.gap()

    def colon(self) -> list[str]:
        if self.indent_mode:
            return [self.punct(': ')]
        return self.gap() + [self.punct(':')] + self.gap()

    def empty_container(self, open_: str, close: str) -> list[str]:
        if self.indent_mode:
            return [self.punct(open_), self.punct(close)]
        return [self.punct(open_)] + self.gap() + [self.punct(close)]

    def child_depth(self, depth: int) -> int:
        return depth + 1 if self.indent_mode else 0

    # ------------------------------------------------------------------ refs

    def resolve_ref(self, ref: str, ptr: str) -> tuple[Any, str] | None:
        base = ''
        root_id = self.root.get('$id', self.root.get('id')) if isinstance(self.root, dict) else None
        if '#' in ref:
            base, frag = ref.split('#', 1)
        else:
            base, frag = ref, None
        if base and not (isinstance(root_id, str) and base == root_id.split('#')[0]):
            self.problem(ptr, f"remote $ref {ref!r} is not supported")
            return None
        if frag is None or frag == '':
            return self.root, ''
        frag = urllib.parse.unquote(frag)
        if not frag.startswith('/'):
            target = self.anchors().get(frag)
            if target is None:
                self.problem(ptr, f"$ref anchor {ref!r} not found")
                return None
            return target
        node = self.root
        for part in frag.split('/')[1:]:
            part = part.replace('~1', '/').replace('~0', '~')
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                self.problem(ptr, f"$ref {ref!r} does not resolve")
                return None
        return node, frag

    def anchors(self) -> dict[str, Any]:
        if self._anchors is None:
            self._anchors = {}
            stack: list[tuple[Any, str]] = [(self.root, '')]
            while stack:
                node, p = stack.pop()
                if isinstance(node, dict):
                    for key in ('$anchor',):
                        if isinstance(node.get(key), str):
                            self._anchors.setdefault(node[key], (node, p))
                    i = node.get('id', node.get('$id'))
                    if isinstance(i, str) and i.startswith('#'):
                        self._anchors.setdefault(i[1:], (node, p))
                    for k, v in node.items():
                        if k not in ('enum', 'const', 'default', 'examples'):
                            stack.append((v, _ptr_join(p, k)))
                elif isinstance(node, list):
                    for i2, v in enumerate(node):
                        stack.append((v, _ptr_join(p, i2)))
        return self._anchors

    # ------------------------------------------------------------------ keyword checks

    def check_keywords(self, schema: dict, ptr: str) -> None:
        for k in UNSUPPORTED:
            if k in schema:
                v = schema[k]
                if k == 'uniqueItems' and v is not True:
                    continue
                if k in ('minContains', 'maxContains') and 'contains' in schema:
                    continue
                self.problem(_ptr_join(ptr, k), f"keyword {k!r} is not supported")

    # ------------------------------------------------------------------ normalization / merging

    def normalize(self, schema: Any, ptr: str, depth: int = 0) -> Any:
        """Resolve top-level $ref and allOf into one dict (or bool); check keywords on the way."""
        if depth > MAX_MERGE_DEPTH:
            raise UnsupportedSchema(f"#{ptr}: $ref/allOf chain too deep (a cycle through allOf?)")
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            self.problem(ptr, f"schema must be an object or boolean, got {type(schema).__name__}")
            return True
        self.check_keywords(schema, ptr)
        parts: list[Any] = []
        own = {k: v for k, v in schema.items() if k not in ('$ref', 'allOf')}
        own = self._normalize_own(own, ptr)
        parts.append(own)
        if '$ref' in schema:
            ref = schema['$ref']
            if not isinstance(ref, str):
                self.problem(_ptr_join(ptr, '$ref'), "$ref must be a string")
            else:
                r = self.resolve_ref(ref, _ptr_join(ptr, '$ref'))
                if r is not None:
                    parts.append(self.normalize(r[0], r[1], depth + 1))
        if 'allOf' in schema:
            subs = schema['allOf']
            if not isinstance(subs, list):
                self.problem(_ptr_join(ptr, 'allOf'), "allOf must be a list")
            else:
                for i, s in enumerate(subs):
                    parts.append(self.normalize(s, _ptr_join(ptr, 'allOf', i), depth + 1))
        if len(parts) == 1:
            return own
        out: Any = parts[0]
        for p in parts[1:]:
            out = self.merge(out, p, ptr)
        return out

    def _normalize_own(self, s: dict, ptr: str) -> dict:
        s = dict(s)
        # draft-4 boolean exclusive bounds
        for ex, base in (('exclusiveMinimum', 'minimum'), ('exclusiveMaximum', 'maximum')):
            if isinstance(s.get(ex), bool):
                if s[ex] and base in s:
                    s[ex] = s.pop(base)
                else:
                    del s[ex]
        if 'pattern' in s:
            s['__patterns'] = [s.pop('pattern')]
        if 'format' in s:
            s['__formats'] = [s.pop('format')]
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
        if s.get('nullable') is True and 'type' in s:
            t = s['type'] if isinstance(s['type'], list) else [s['type']]
            s['type'] = list(t) + ['null']
        s.pop('nullable', None)
        if 'oneOf' in s:
            one = s.pop('oneOf')
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
        self.ptrs[id(s)] = ptr
        self.keep.append(s)
        return s

    def merge(self, a: Any, b: Any, ptr: str) -> Any:
        if a is False or b is False:
            return False
        if a is True:
            return b
        if b is True:
            return a
        out = dict(a)
        for k, vb in b.items():
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
            elif k in ('__patterns', '__formats'):
                out[k] = list(va) + list(vb)
            elif k in ('minimum', 'minLength', 'minItems', 'minProperties', 'exclusiveMinimum'):
                out[k] = max(va, vb)
            elif k in ('maximum', 'maxLength', 'maxItems', 'maxProperties', 'exclusiveMaximum'):
                out[k] = min(va, vb)
            elif k == 'multipleOf':
                fa, fb = Fraction(str(va)), Fraction(str(vb))
                out[k] = _frac_to_num(Fraction(math.lcm(fa.numerator, fb.numerator),
                                               math.gcd(fa.denominator, fb.denominator)))
            elif k in ('items', 'additionalProperties'):
                out[k] = {'allOf': [va, vb]}
            elif k == 'prefixItems':
                n = max(len(va), len(vb))
                out[k] = [{'allOf': [va[i] if i < len(va) else a.get('items', True),
                                     vb[i] if i < len(vb) else b.get('items', True)]} for i in range(n)]
            elif k == 'properties':
                merged = {}
                for pk in list(va) + [x for x in vb if x not in va]:
                    merged[pk] = {'allOf': [self._prop_schema(a, pk), self._prop_schema(b, pk)]}
                out[k] = merged
            elif k == 'patternProperties':
                pass  # merged below, together with additionalProperties
            elif k == 'anyOf':
                if len(va) * len(vb) > MAX_DISTRIBUTION:
                    raise GrammarTooComplex(f"#{ptr}: allOf of anyOfs has more than {MAX_DISTRIBUTION} combinations")
                out[k] = [{'allOf': [x, y]} for x in va for y in vb]
            elif k in ANNOTATIONS or k not in STRUCTURAL or k in UNSUPPORTED:
                pass  # annotations, unknown keywords; unsupported ones were reported already
            elif _canon(va) != _canon(vb):
                self.problem(ptr, f"cannot merge differing {k!r} under allOf")
        # properties present on one side only meet the other side's additional/pattern schema
        for side, other in ((a, b), (b, a)):
            if 'properties' in side and 'properties' not in other and _restricts_extras(other):
                out['properties'] = {pk: {'allOf': [self._prop_schema(a, pk), self._prop_schema(b, pk)]}
                                     for pk in side['properties']}
        # an undeclared key matching one side's pattern meets the other side's additionalProperties
        pa, pb = a.get('patternProperties') or {}, b.get('patternProperties') or {}
        if pa or pb:
            pp: dict[str, Any] = {}
            for mine, other in ((pa, b), (pb, a)):
                for pk, pv in mine.items():
                    extra = other.get('additionalProperties', True)
                    if pk in (other.get('patternProperties') or {}):
                        extra = other['patternProperties'][pk]
                    v = pv if extra is True else {'allOf': [pv, extra]}
                    pp[pk] = v if pk not in pp else {'allOf': [pp[pk], v]}
            out['patternProperties'] = pp
        self.keep.append(out)
        self.ptrs[id(out)] = ptr
        return out

    def _prop_schema(self, s: dict, key: str) -> Any:
        props = s.get('properties') or {}
        if key in props:
            return props[key]
        for pat, sub in (s.get('patternProperties') or {}).items():
            try:
                if re.search(pat, key):
                    return sub
            except Exception:
                pass
        return s.get('additionalProperties', True)

    # ------------------------------------------------------------------ lowering

    def lower(self, schema: Any, ptr: str, depth: int) -> str:
        """Rule name for values valid under `schema` at nesting `depth` (depth only in indent mode)."""
        if depth > MAX_INDENT_DEPTH:
            name = self.memo.get(('deep',))
            if name is None:
                name = self.memo[('deep',)] = self.g.new_rule('too_deep')
            return name
        if schema is True or (isinstance(schema, dict) and not (set(schema) & STRUCTURAL)):
            return self.any_value(depth)
        key = ('id', id(schema), depth)
        name = self.memo.get(key)
        if name is not None:
            return name
        if not isinstance(schema, (dict, bool)):
            self.problem(ptr, f"schema must be an object or boolean, got {type(schema).__name__}")
            return self.any_value(depth)
        self.keep.append(schema)
        name = self.memo[key] = self.g.new_rule(_hint(ptr))
        if schema is False:
            return name
        alts = self.lower_body(schema, ptr, depth)
        self.g.set_alts(name, alts)
        return name

    def lower_body(self, schema: dict, ptr: str, depth: int) -> list[list[str]]:
        # A bare $ref: just point at the target's rule (keeps recursion finite).
        if set(schema) - ANNOTATIONS == {'$ref'} and isinstance(schema['$ref'], str):
            self.check_keywords(schema, ptr)
            r = self.resolve_ref(schema['$ref'], _ptr_join(ptr, '$ref'))
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
            if not isinstance(branches, list):
                self.problem(_ptr_join(ptr, 'anyOf'), "anyOf must be a list")
                return [[self.any_value(depth)]]
            rest = {k: v for k, v in s.items() if k != 'anyOf'}
            bare = not (set(rest) & STRUCTURAL)
            alts = []
            for i, b in enumerate(branches):
                bptr = _ptr_join(ptr, 'anyOf', i)
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

    def lower_typed(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        types = s.get('type')
        if types is None:
            tset = list(ALL_TYPES)
        else:
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
                term = self.string_terminal(s, ptr)
                if term is not None:
                    alts.append([term])
            elif t in ('number', 'integer'):
                term = self.number_terminal(s, ptr, t == 'integer')
                if term is not None:
                    alts.append([term])
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
        if not isinstance(values, list):
            self.problem(_ptr_join(ptr, 'enum'), "enum must be a list")
            return []
        if len(values) > MAX_ENUM_VALUES:
            raise GrammarTooComplex(f"#{ptr}: enum with {len(values)} values (limit {MAX_ENUM_VALUES})")
        strings: list[str] = []
        alts: list[list[str]] = []
        seen = set()
        for v in values:
            if not _type_ok(v, tset):
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

    def string_terminal(self, s: dict, ptr: str) -> str | None:
        contents: list[str] = []
        for f in s.get('__formats', []):
            pat = formats.format_pattern(f) if isinstance(f, str) else None
            if pat is None:
                self.warn(_ptr_join(ptr, 'format'), f"format {f!r} is not enforced")
                continue
            contents.append(ecma_regex.content_regex(pat))
        for p in s.get('__patterns', []):
            if not isinstance(p, str):
                self.problem(_ptr_join(ptr, 'pattern'), "pattern must be a string")
                continue
            try:
                contents.append(ecma_regex.content_regex(p))
            except ecma_regex.PatternUnsupported as e:
                self.problem(_ptr_join(ptr, 'pattern'), f"pattern not supported: {e}")
        lo = s.get('minLength', 0)
        hi = s.get('maxLength')
        if not isinstance(lo, int) or (hi is not None and not isinstance(hi, int)):
            lo, hi = _int_or(lo, 0), (None if hi is None else _int_or(hi, None))
        if hi is not None and hi < lo:
            return None
        if lo > 0 or hi is not None:
            q = '{%d,%s}' % (lo, '' if hi is None else hi) if (lo, hi) != (0, None) else '*'
            if lo == hi:
                q = '{%d}' % lo
            contents.append('(?:' + cs.ANY_CHAR + ')' + q)
        if not contents:
            contents.append('(?:' + cs.ANY_CHAR + ')*')
        regex = '\\x22' + ''.join('(?=' + c + '\\x22)' for c in contents[:-1]) + contents[-1] + '\\x22'
        return self.g.terminal(regex, 'STR')

    # ------------------------------------------------------------------ numbers

    def number_terminal(self, s: dict, ptr: str, integer: bool) -> str | None:
        lo = s.get('minimum')
        hi = s.get('maximum')
        xlo = s.get('exclusiveMinimum')
        xhi = s.get('exclusiveMaximum')
        mult = s.get('multipleOf')
        for k, v in (('minimum', lo), ('maximum', hi), ('exclusiveMinimum', xlo), ('exclusiveMaximum', xhi),
                     ('multipleOf', mult)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                self.problem(_ptr_join(ptr, k), f"{k} must be a number")
                return self.g.terminal(numbers.NUMBER, 'NUMBER')
        # tightest lower/upper bound as (Decimal, strict)
        lower = _tighter([(lo, False), (xlo, True)], max)
        upper = _tighter([(hi, False), (xhi, True)], min)
        try:
            if integer or (mult is not None and Fraction(str(mult)).denominator == 1):
                ilo = None if lower is None else _int_lo(*lower)
                ihi = None if upper is None else _int_hi(*upper)
                if mult is not None:
                    f = Fraction(str(mult))
                    if f <= 0:
                        self.problem(_ptr_join(ptr, 'multipleOf'), "multipleOf must be positive")
                        return None
                    regex = numbers.int_multiple_regex(f.numerator, ilo, ihi, 1000)
                else:
                    regex = numbers.int_range_regex(ilo, ihi)
                return None if regex is None else self.g.terminal(regex, 'INT')
            frac_digits = None
            if mult is not None:
                frac_digits = numbers.decimal_places_of_power_of_ten(Decimal(str(mult)))
                if frac_digits is None:
                    self.problem(_ptr_join(ptr, 'multipleOf'), f"multipleOf {mult} on numbers is not supported")
                    mult = None
            if lower is None and upper is None and frac_digits is None:
                return self.g.terminal(numbers.NUMBER, 'NUMBER')
            regex = numbers.number_range_regex(
                None if lower is None else lower[0], bool(lower and lower[1]),
                None if upper is None else upper[0], bool(upper and upper[1]), frac_digits)
        except numbers.NumberTooComplex as e:
            if mult is not None and 'multipleOf' in str(e):
                # not a budget question: the constraint is outside what we spell as a regex
                self.problem(_ptr_join(ptr, 'multipleOf'), str(e))
                return self.number_terminal({k: v for k, v in s.items() if k != 'multipleOf'}, ptr, integer)
            raise GrammarTooComplex(f"#{ptr}: {e}") from None
        return None if regex is None else self.g.terminal(regex, 'NUM')

    # ------------------------------------------------------------------ objects

    def object_alts(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        d1 = self.child_depth(depth)
        props = s.get('properties') or {}
        if not isinstance(props, dict):
            self.problem(_ptr_join(ptr, 'properties'), "properties must be an object")
            props = {}
        required = [r for r in s.get('required', []) if isinstance(r, str)]
        addl = s.get('additionalProperties', True)
        pattern_props = s.get('patternProperties') or {}
        min_p = _int_or(s.get('minProperties', 0), 0)
        max_p = s.get('maxProperties')
        max_p = None if max_p is None else _int_or(max_p, None)
        if max_p is not None and max_p < min_p:
            return []
        names = list(props)
        schemas = {k: (props[k], _ptr_join(ptr, 'properties', k)) for k in names}
        for r in required:
            if r not in schemas:
                names.append(r)
                sub = self._prop_schema({'patternProperties': pattern_props, 'additionalProperties': addl}, r)
                schemas[r] = (sub, _ptr_join(ptr, 'required'))
        req = set(required)
        # members of declared properties
        member: dict[str, list[str]] = {}
        for k in names:
            sub, sptr = schemas[k]
            key_term = self.g.terminal('\\x22' + cs.encode_string_literal(k) + '\\x22', 'KEY')
            member[k] = [key_term] + self.colon() + [self.lower(sub, sptr, d1)]
        # members of other keys
        extras: list[list[str]] = []
        excl = ''
        if names:
            excl = '(?!(?:' + '|'.join(cs.encode_string_literal(k) for k in names) + ')\\x22)'
        pat_regexes = []
        for pat, sub in pattern_props.items():
            try:
                c = ecma_regex.content_regex(pat)
            except ecma_regex.PatternUnsupported as e:
                self.problem(_ptr_join(ptr, 'patternProperties', pat), f"pattern not supported: {e}")
                continue
            pat_regexes.append(c)
            key_term = self.g.terminal('\\x22' + excl + c + '\\x22', 'PKEY')
            extras.append([key_term] + self.colon() + [self.lower(sub, _ptr_join(ptr, 'patternProperties', pat), d1)])
        if len(pat_regexes) > 1:
            self.warn(_ptr_join(ptr, 'patternProperties'),
                      "a key matching several patternProperties is checked against one of them only")
        if addl is not False:
            neg = ''.join('(?!' + c + '\\x22)' for c in pat_regexes)
            key_term = self.g.terminal('\\x22' + excl + neg + '(?:' + cs.ANY_CHAR + ')*\\x22', 'AKEY')
            extras.append([key_term] + self.colon() + [self.lower(addl, _ptr_join(ptr, 'additionalProperties'), d1)])
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

    def _count_cap(self, min_p: int, max_p: int | None) -> int:
        return max_p + 1 if max_p is not None else min_p

    def _schema_order(self, names, req, member, extras, min_p, max_p, depth) -> str | None:
        n = len(names)
        cap = self._count_cap(min_p, max_p)
        if (n + 2) * (cap + 1) * 2 > MAX_COUNT_STATES:
            raise GrammarTooComplex("object with too many properties × property-count states")
        rules: dict[tuple, str] = {}
        comma = self.comma(depth)

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

        return state(0, 0, True)

    def _any_order(self, names, req, member, extras, min_p, max_p, depth) -> str | None:
        n = len(names)
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

        return state(0, 0, True)

    # ------------------------------------------------------------------ arrays

    def array_alts(self, s: dict, ptr: str, depth: int) -> list[list[str]]:
        d1 = self.child_depth(depth)
        prefix = s.get('prefixItems') or []
        if not isinstance(prefix, list):
            self.problem(_ptr_join(ptr, 'prefixItems'), "prefixItems must be a list")
            prefix = []
        rest = s.get('items', True)
        m = _int_or(s.get('minItems', 0), 0)
        M = s.get('maxItems')
        M = None if M is None else _int_or(M, None)
        if M is not None and M < m:
            return []
        elem_cache: dict[int, str | None] = {}

        def elem(j: int) -> str | None:
            key = j if j < len(prefix) else -1
            if key not in elem_cache:
                if key >= 0:
                    elem_cache[key] = self.lower(prefix[j], _ptr_join(ptr, 'prefixItems', j), d1)
                else:
                    elem_cache[key] = None if rest is False else self.lower(rest, _ptr_join(ptr, 'items'), d1)
            return elem_cache[key]

        loop_from = max(len(prefix), m)
        if M is not None and M - loop_from > MAX_ITEM_CHAIN:
            raise GrammarTooComplex(f"#{ptr}: maxItems {M} needs a chain longer than {MAX_ITEM_CHAIN}")
        comma = self.comma(depth)
        rules: dict[int, str] = {}

        def after(j: int) -> str:
            """Continuation after j >= 1 elements."""
            if M is None and j > loop_from:
                j = loop_from if loop_from >= 1 else 1
            if j in rules:
                return rules[j]
            name = rules[j] = self.g.new_rule('items')
            alts = []
            if j >= m:
                alts.append([])
            if M is None or j < M:
                e = elem(j)
                if e is not None:
                    nxt = j + 1
                    if M is None and nxt > max(loop_from, 1):
                        nxt = max(loop_from, 1)
                    alts.append(comma + [e, after(nxt)])
            self.g.set_alts(name, alts)
            return name

        alts = []
        if M is None or M >= 1:
            e0 = elem(0)
            if e0 is not None:
                alts.append([self.punct('[')] + self.open_gap(depth) + [e0, after(1)] + self.close_gap(depth) + [self.punct(']')])
        if m == 0:
            alts.append(self.empty_container('[', ']'))
        return alts


# ---------------------------------------------------------------------- helpers


def _hint(ptr: str) -> str:
    tail = ptr.rsplit('/', 1)[-1] if ptr else 'root'
    tail = ''.join(ch if ch.isascii() and ch.isalnum() else '_' for ch in tail.lower())[:24].strip('_')
    if not tail or not tail[0].isalpha():
        tail = 's_' + tail
    return tail


def _int_or(v: Any, default: Any) -> Any:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return default


def _intersect_types(a: Any, b: Any) -> list[str]:
    la = set(a if isinstance(a, list) else [a])
    lb = set(b if isinstance(b, list) else [b])
    out = la & lb
    if 'integer' in la and 'number' in lb or 'number' in la and 'integer' in lb:
        out.add('integer')
    return sorted(out)


def _restricts_extras(s: Any) -> bool:
    return isinstance(s, dict) and (s.get('additionalProperties', True) is not True or bool(s.get('patternProperties')))


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


def lower(schema: Any, opts: Options) -> tuple[str, list[str]]:
    """Lower a loaded schema to (Lark grammar text, warnings); raise on unsupported keywords."""
    import sys
    low = Lowerer(schema, opts)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 12_000))  # item/property chains recurse once per element
    try:
        top = low.lower(schema, '', 0)
    except RecursionError:
        raise GrammarTooComplex("JSON Schema lowering: schema nesting too deep") from None
    finally:
        sys.setrecursionlimit(old_limit)
    if low.ctx.problems:
        raise UnsupportedSchema("unsupported JSON Schema features:\n  " + "\n  ".join(low.ctx.problems))
    low.g.rules['start'] = [[top]]
    text = low.g.to_lark('start')
    return text, low.ctx.warnings
