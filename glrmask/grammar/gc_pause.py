"""Pausing Python's cyclic garbage collector around the allocation-heavy front-end stages.

Why: lowering a large JSON Schema and normalizing the grammar allocate tens of thousands of small
objects (rules, tuples, lists, sets) that form no reference cycles and mostly live until the stage
returns. Every 700 net allocations the cyclic collector scans the young objects, and now and then
every tracked object of the process (a serving process holds large vocabularies), which on the
largest JSONSchemaBench schemas was a fifth of these stages' CPU time while freeing nothing.
Reference counting still frees everything as usual; only the cycle scans wait until the stage ends.

The pause is process-wide (the collector has no per-thread switch), so it is counted: concurrent
or nested stages share one pause, and the collector is re-enabled when the last one ends, and only
if it was enabled when the first one began.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["cyclic_gc_paused"]

_LOCK = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the duration of the block (see the module docstring)."""
    global _depth, _was_enabled
    with _LOCK:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
