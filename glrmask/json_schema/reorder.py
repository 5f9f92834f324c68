"""Put an instance's object keys in the order the grammar expects (schema order).

Used by tests and benchmarks to serialize valid instances: declared `properties` first in schema
order, then the remaining keys in their original order. Follows `$ref` (through the same resolver
as the lowering, :class:`.refs.SchemaRefs`), `allOf`, `anyOf`/`oneOf` (first branch the instance
is valid under) to find nested schemas; a best effort that never fails.
"""
from __future__ import annotations

from typing import Any

from .ecma_regex import PatternUnsupported
from .lowering import _encoded_matches
from .refs import RefError, SchemaRefs


class _Walk:
    def __init__(self, root: Any) -> None:
        self.root = root
        try:
            self.refs: SchemaRefs | None = SchemaRefs(root)
        except (RefError, RecursionError):
            self.refs = None
        try:
            import jsonschema
            self.validator: Any = jsonschema.Draft202012Validator(root)
        except Exception:
            self.validator = None

    def resolve(self, s: Any) -> Any:
        """`s` with its `$ref` chain replaced by ``allOf: [rest, target]``."""
        for _ in range(50):
            if not (isinstance(s, dict) and isinstance(s.get('$ref'), str)) or self.refs is None:
                return s
            try:
                target, _ptr = self.refs.resolve(s['$ref'], s)
            except RefError:
                return {}
            rest = {k: v for k, v in s.items() if k != '$ref'}
            s = {'allOf': [rest, target]} if rest and not self.refs.ref_overrides_siblings else target
        return s

    def valid_under(self, branch: Any, inst: Any) -> bool:
        if self.validator is None:
            return True
        try:
            return self.validator.evolve(schema=branch).is_valid(inst)
        except Exception:
            return True

    def patterns_for(self, s: Any, key: str) -> list[Any]:
        """The patternProperties schemas of `s` whose ECMA pattern matches `key` (the lowering merges
        them into the key's value, so their declared properties come in that merged order)."""
        out = []
        for part in self.parts(s):
            pp = part.get('patternProperties')
            for pat, sub in (pp.items() if isinstance(pp, dict) else ()):
                try:
                    if _encoded_matches(pat, key):
                        out.append(sub)
                except (PatternUnsupported, TypeError):
                    continue
        return out

    def parts(self, s: Any, depth: int = 0) -> list[dict]:
        """`s` and, recursively, its resolved allOf members."""
        s = self.resolve(s)
        if not isinstance(s, dict) or depth > 30:
            return []
        out = [s]
        for sub in s.get('allOf', []) if isinstance(s.get('allOf'), list) else []:
            out += self.parts(sub, depth + 1)
        return out

    def additional(self, s: Any) -> Any:
        addl = [p['additionalProperties'] for p in self.parts(s) if isinstance(p.get('additionalProperties'), dict)]
        return {'allOf': addl} if addl else {}

    def props(self, s: Any, depth: int = 0) -> list[tuple[str, Any]]:
        """(key, subschema) pairs in the order the lowering uses."""
        s = self.resolve(s)
        if not isinstance(s, dict) or depth > 30:
            return []
        out: list[tuple[str, Any]] = []
        seen: set[str] = set()

        def add(pairs):
            for k, v in pairs:
                if k not in seen:
                    seen.add(k)
                    out.append((k, v))
        if isinstance(s.get('properties'), dict):
            add(s['properties'].items())
        for sub in s.get('allOf', []) if isinstance(s.get('allOf'), list) else []:
            add(self.props(sub, depth + 1))
        if depth == 0:  # required keys that no part declares follow the declared ones
            add((r, {}) for part in self.parts(s) for r in (part.get('required') or [])
                if isinstance(part.get('required'), list) and isinstance(r, str))
        return out

    def pick(self, schema: Any, inst: Any, depth: int) -> Any:
        """`schema` with every anyOf/oneOf (also inside allOf) replaced by a branch `inst` is valid under."""
        s = self.resolve(schema)
        if not isinstance(s, dict) or depth > 20:
            return s
        parts: list[Any] = []
        rest = {k: v for k, v in s.items() if k not in ('anyOf', 'oneOf', 'allOf')}
        for key in ('anyOf', 'oneOf'):
            if isinstance(s.get(key), list):
                for b in s[key]:
                    if self.valid_under(b, inst):
                        parts.append(self.pick(b, inst, depth + 1))
                        break
        if isinstance(s.get('allOf'), list):
            parts += [self.pick(b, inst, depth + 1) for b in s['allOf']]
        return {'allOf': [rest] + parts} if parts else s

    def reorder(self, inst: Any, schema: Any, depth: int) -> Any:
        if depth > 60:
            return inst
        s = self.pick(schema, inst, 0)
        if isinstance(inst, dict):
            order = self.props(s)
            sub = dict(order)
            out = {}
            for k, _v in order:
                if k in inst:
                    pats = self.patterns_for(s, k)
                    out[k] = self.reorder(inst[k], {'allOf': [sub[k]] + pats} if pats else sub[k], depth + 1)
            for k, v in inst.items():
                if k not in out:
                    pats = self.patterns_for(s, k)
                    out[k] = self.reorder(v, {'allOf': pats} if pats else self.additional(s), depth + 1)
            return out
        if isinstance(inst, list):
            prefix: list[Any] = []
            rest: list[Any] = []
            for part in self.parts(s):
                items = part.get('items', {})
                prefix = part.get('prefixItems') or (items if isinstance(items, list) else []) or prefix
                if isinstance(items, dict) and items:
                    rest.append(items)
            rest_schema = {'allOf': rest} if len(rest) > 1 else rest[0] if rest else {}
            return [self.reorder(x, prefix[i] if i < len(prefix) else rest_schema, depth + 1)
                    for i, x in enumerate(inst)]
        return inst


def reorder_to_schema(inst: Any, schema: Any, root: Any = None) -> Any:
    """Copy of `inst` with object keys in schema order (declared first, others after)."""
    return _Walk(schema if root is None else root).reorder(inst, schema, 0)
