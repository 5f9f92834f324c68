"""Batch fill and commit over a thread pool, the GIL released in the native loops.

Why Python threads and not OpenMP: a serving process shares its cores with the model (and often
pins itself to a few); OpenMP's spinning barriers then burn the very core the other thread needs
(measured: 25 ms for a 16-row fill with two threads on one pinned core). Pool threads block
instead of spinning, and a batch is split into one contiguous chunk per thread — the calling
thread takes the first — so small batches pay no hand-off at all.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

import numpy as np

from glrmask_ext.runtime import CommitBatch, FillBatch

__all__ = ["default_threads", "fill_native", "commit_native"]

_ROWS_PER_THREAD = 16
"""A thread is worth its hand-off from about this many rows (a row costs ~1 µs, a hand-off ~20)."""

_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def default_threads(n_rows: int) -> int:
    """One thread per core this process may run on, at most one per ``_ROWS_PER_THREAD`` rows."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_rows // _ROWS_PER_THREAD))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 1)), thread_name_prefix="glrmask-batch")
        return _pool


def _run(batch, n: int, n_threads: int) -> None:
    n_threads = max(1, min(int(n_threads), n))
    if n_threads == 1:
        batch.run(0, n)
        return
    bounds = [n * k // n_threads for k in range(n_threads + 1)]
    futures = [_executor().submit(batch.run, bounds[k], bounds[k + 1]) for k in range(1, n_threads)]
    batch.run(bounds[0], bounds[1])
    for f in futures:
        f.result()


def fill_native(impls: Sequence, out_u32: np.ndarray, n_threads: int) -> list[int]:
    """Fill row ``i`` of ``out_u32`` (uint32 view) from native state ``impls[i]``; returns the rows
    that need the reference fallback or (dynamic states) a lexer entry explored first."""
    batch = FillBatch(list(impls), out_u32)
    _run(batch, len(impls), n_threads)
    return batch.finish()


def commit_native(impls: Sequence, tokens: np.ndarray, n_threads: int) -> np.ndarray:
    """Commit ``tokens[i]`` on native state ``impls[i]``; uint8 results (1 committed, 0 refused)."""
    impls = list(impls)
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    batch = CommitBatch(impls, tokens)
    _run(batch, len(impls), n_threads)
    res = batch.finish()
    for k in np.flatnonzero(res == 2).tolist():  # a dynamic lexer entry to explore first (with the GIL)
        res[k] = impls[k].commit(int(tokens[k]))
    return res
