"""The runtime: what serves masks (DESIGN §5).

The hot path is native (``glrmask_ext.runtime``): per-request state in C arenas, ``commit``, the
Parser-DWA walk and the vocabulary-trie walk without the GIL, batch fill over threads. This package
assembles and validates the tables that code reads (:mod:`.tables`), the static engine over a
compiled grammar (:mod:`.engine`) and the dynamic engine over a lexer explored on demand
(:mod:`.dynamic`).
"""
from .dynamic import DynamicEngine
from .engine import NativeEngine
from .tables import build_tables, dynamic_arrays, runtime_arrays_from_stored, stored_arrays

__all__ = ["DynamicEngine", "NativeEngine", "build_tables", "dynamic_arrays", "runtime_arrays_from_stored",
           "stored_arrays"]
