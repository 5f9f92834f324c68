"""Put an instance's object keys in the order the grammar expects (schema order).

Used by tests and benchmarks to serialize valid instances: declared `properties` first in schema
order, then the remaining keys in their original order. Follows local `$ref`, `allOf`, `anyOf`/
`oneOf` (first branch that declares the key) to find nested schemas; a best effort that never fails.
"""
from __future__ import annotations

from typing import Any
import urllib.parse


def _resolve(root: Any, s: Any, depth: int = 0) -> Any:
    while isinstance(s, dict) and isinstance(s.get('$ref'), str) and s['$ref'].startswith('#') and depth < 50:
        node = root
        frag = urllib.parse.unquote(s['$ref'][1:])
        for part in frag.split('/')[1:] if frag else []:
            part = part.replace('~1', '/').replace('~0', '~')
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return {}
        rest = {k: v for k, v in s.items() if k != '$ref'}
        s = {'allOf': [rest, node]} if rest else node
        depth += 1
    return s


def _props(root: Any, s: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """(key, subschema) pairs in the order the lowering uses."""
    s = _resolve(root, s)
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
        add(_props(root, sub, depth + 1))
    return out


def _validator(root: Any) -> Any:
    try:
        import jsonschema
        return jsonschema.Draft202012Validator(root)
    except Exception:
        return None


def _valid_under(validator: Any, branch: Any, inst: Any) -> bool:
    if validator is None:
        return True
    try:
        return validator.evolve(schema=branch).is_valid(inst)
    except Exception:
        return True


def reorder_to_schema(inst: Any, schema: Any, root: Any = None, depth: int = 0, _v: Any = None) -> Any:
    """Copy of `inst` with object keys in schema order (declared first, others after)."""
    if root is None:
        root = schema
        _v = _validator(root)
    s = _resolve(root, schema)
    if depth > 60:
        return inst
    if isinstance(s, dict):
        for key in ('anyOf', 'oneOf'):
            if isinstance(s.get(key), list):
                for b in s[key]:
                    if _valid_under(_v, b, inst):
                        rest = {k: v for k, v in s.items() if k not in ('anyOf', 'oneOf')}
                        s = {'allOf': [rest, b]}
                        break
    if isinstance(inst, dict):
        order = _props(root, s)
        names = [k for k, _ in order]
        sub = dict(order)
        out = {}
        for k in names:
            if k in inst:
                out[k] = reorder_to_schema(inst[k], sub[k], root, depth + 1, _v)
        for k, v in inst.items():
            if k not in out:
                addl = s.get('additionalProperties', {}) if isinstance(s, dict) else {}
                out[k] = reorder_to_schema(v, addl if isinstance(addl, dict) else {}, root, depth + 1, _v)
        return out
    if isinstance(inst, list) and isinstance(s, dict):
        items = s.get('items', {})
        prefix = s.get('prefixItems') or (items if isinstance(items, list) else [])
        rest = items if isinstance(items, dict) else {}
        return [reorder_to_schema(x, prefix[i] if i < len(prefix) else rest, root, depth + 1, _v)
                for i, x in enumerate(inst)]
    return inst
