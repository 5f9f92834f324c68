"""The runtime: what serves masks once a grammar is compiled (DESIGN §5).

The hot path is native (``glrmask_ext.runtime``): per-request state in C arenas, ``commit`` and the
Parser-DWA walk without the GIL, batch fill over threads. This package assembles and validates the
tables that code reads (:mod:`.tables`) and wraps them with the reference fallback for the rare
configuration the compiled automaton does not cover (:mod:`.engine`).
"""
from .engine import NativeEngine
from .tables import build_tables, runtime_arrays_from_stored, stored_arrays

__all__ = ["NativeEngine", "build_tables", "runtime_arrays_from_stored", "stored_arrays"]
