"""Counting what the cyclic garbage collector walks (the GC-tracking tests' shared measure)."""
from __future__ import annotations

import gc
import types

_SHARED = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def tracked_references(root: object, shared: tuple[type, ...] = ()) -> int:
    """References the cyclic collector walks among the tracked objects reachable from ``root``,
    after a collection (which untracks tuples of atomic values); modules, types, functions and
    instances of ``shared`` (objects every structure points to) are not counted."""
    gc.collect()
    skip = _SHARED + tuple(shared)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip) or not gc.is_tracked(obj):
            continue
        seen.add(id(obj))
        referents = gc.get_referents(obj)
        total += len(referents)
        stack.extend(referents)
    return total
