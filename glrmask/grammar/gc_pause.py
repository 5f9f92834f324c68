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

When the last pause ends, the objects allocated meanwhile are moved straight to the oldest
generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices) instead of being left young.
Left young, they are what the collector scans next: re-enabled after the dense lexer of a large
schema (two million memo tuples, lists and frozensets that live as long as the lexer), the first
young collection took 0.34 s and the middle-generation one that followed another 0.33 s, freeing
nothing. Promoted, they wait for the next full collection, which the collector runs only once the
old generation has grown by a quarter since the last one, and any cyclic garbage among them
(there is none by design) is collected then, not leaked. A process that froze objects itself
(``glrmask serve`` freezes its model before serving) keeps them frozen: unfreezing is all or
nothing, so there the pause promotes nothing; its compile workers are fresh interpreters.
Knowing that costs a walk of the frozen objects (``gc.get_freeze_count()``: 7 ms for a million),
and the dynamic engine pauses around every lexer exploration, thousands per new schema, while
serving engines freeze their process once after start-up (vLLM does): so once frozen objects
are seen, pauses promote nothing and ask no more, until :func:`frozen_objects_released` says
the process unfroze them.
"""
from __future__ import annotations

import gc
import threading

__all__ = ["cyclic_gc_paused", "frozen_objects_released"]

_LOCK = threading.Lock()
_depth = 0
_was_enabled = False
_frozen_seen = False  # a pause found objects some owner froze: promote nothing, ask no more


class _Pause:
    """The pause as a plain context manager (a generator-based one cost twice as much, and the
    dynamic engine enters one per lexer exploration). Its state is the module's: one instance."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _was_enabled
        with _LOCK:
            if _depth == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc) -> None:
        global _depth, _frozen_seen
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                if not _frozen_seen:
                    if gc.get_freeze_count() == 0:  # (else unfreezing would undo the owner's freeze)
                        gc.freeze()  # every tracked object to the permanent generation...
                        gc.unfreeze()  # ...and from there into the oldest: the young ones skip two scans
                    else:
                        _frozen_seen = True
                if _was_enabled:
                    gc.enable()


_PAUSE = _Pause()


def cyclic_gc_paused() -> _Pause:
    """A context manager that disables the cyclic collector for the duration of the block (see
    the module docstring); nested and concurrent blocks share one pause."""
    return _PAUSE


def frozen_objects_released() -> None:
    """Tell the pauses that the process unfroze its objects (``gc.unfreeze()``): they look for
    frozen objects again and, finding none, promote what was allocated during them."""
    global _frozen_seen
    with _LOCK:
        _frozen_seen = False
