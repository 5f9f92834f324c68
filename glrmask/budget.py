"""Compile budgets (DESIGN §4.11): one wall-time deadline and per-stage size limits for a whole compile.

Why one shared object: a server compiles grammars it did not write, and every stage — front-end,
repetition expansion, normalization, LR closures, lexer NFA, lexer exploration and minimization,
stack effects, Terminal DWA, Parser DWA — can be made to run for hours or to fill the machine by a
few bytes of input. Each stage therefore checks the *same* deadline (started when ``compile`` was
called, so ``max_seconds`` bounds the whole call) and its own size limits, and ends the compile with
:class:`~glrmask.errors.GrammarTooComplex` naming the stage and the limit.

Size limits are counts (rules, symbols, states, closure items, transitions) rather than bytes so
that the same input always fails or succeeds the same way; their defaults are sized from measured
bytes per unit so that no single stage grows past a few GiB on a 24 GiB machine, and are several
times what the largest shipped grammars and benchmark schemas need (so a typical compile never
meets them). As a backstop against a stage whose count underestimates its memory, the stages also
check the growth of the process's resident memory since the compile started
(``max_memory_mb``; a process-wide figure, so concurrent compiles in one process share it).

The active budget travels in a :class:`contextvars.ContextVar`: ``glrmask.compile`` activates one
around the whole call, and stages read it with :func:`current_budget`. Code that calls a stage
directly (tests, tools) gets the default limits and no deadline.
"""
from __future__ import annotations

import contextvars
import math
import os
import time
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional

from glrmask.errors import GrammarTooComplex

__all__ = [
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_MAX_MEMORY_MB",
    "DEFAULT_SIZE_LIMITS",
    "CompileBudget",
    "activate_budget",
    "current_budget",
]

DEFAULT_MAX_SECONDS = 300.0
"""Whole-compile wall time (``limits["max_seconds"]``); ``None`` means no deadline."""

DEFAULT_MAX_MEMORY_MB = 12 * 1024
"""Resident-memory growth allowed during one compile (``limits["max_memory_mb"]``): half of a
24 GiB machine, leaving the rest to the serving process. ``None`` disables the check."""

DEFAULT_SIZE_LIMITS: dict[str, dict[str, int]] = {
    # front-ends: rules plus right-hand-side symbols of the grammar they produce (GBNF repetition
    # expansion, lark's EBNF expansion). Largest lowered benchmark schema: ~13k.
    "grammar": {"max_symbols": 500_000},
    # normalization: rules after each step (ε-elimination and right-recursion breaking add some).
    # Largest normalized benchmark schema: ~66k symbols in a few thousand rules.
    "normalize": {"max_rules": 200_000},
    # LR table: closure items, computed per nonterminal on first use (~80 bytes each); grammars
    # where every level of an n-deep chain follows a dot need n²/2. Largest shipped grammar or
    # benchmark schema: ~20k.
    "lr": {"max_closure_items": 1_000_000},
    # lazy lexer: memoized byte transitions (joint and per-terminal lane steps), ~175 bytes each
    # (8M: ~1.4 GiB); the dense export makes one per byte group (bytes every character class
    # treats alike) per lexer state and live terminal. A large benchmark schema (kubernetes,
    # 2,231 lexer states): 1.1M.
    "lexer": {"max_transitions": 8_000_000},
}
"""Size limits by stage (``limits[stage][name]`` overrides one). Stages with their own keyword
budgets (``lexer``'s ``max_states``/``max_conds``, ``terminal_dwa``, ``parser_dwa``, ``expand``)
keep them; these are the ones read through the shared budget."""

_CHECK_EVERY = 256
"""Hot loops check the clock once per this many iterations (a check costs ~0.1 µs; reading the
resident memory ~5 µs, done on every 16th clock check)."""

_ACTIVE: contextvars.ContextVar[Optional["CompileBudget"]] = contextvars.ContextVar(
    "glrmask_compile_budget", default=None)


def _resident_mb() -> Optional[float]:
    """The process's resident memory in MiB (Linux ``/proc``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * _PAGE_MB


try:
    _PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
    _PAGE_MB = 4096 / (1024 * 1024)


class CompileBudget:
    """The deadline and limits of one compile. See the module docstring.

    ``limits`` is the user's ``limits=`` dict: ``max_seconds`` (float or None), ``max_memory_mb``
    (int or None) and per-stage dicts of counts (:data:`DEFAULT_SIZE_LIMITS`); keys this object does
    not read are left to the stages that own them."""

    __slots__ = ("max_seconds", "deadline", "max_memory_mb", "_rss0", "_limits", "_ticks", "active")

    def __init__(self, limits: Optional[Mapping] = None, *, start: Optional[float] = None) -> None:
        limits = dict(limits or {})
        max_seconds = limits.get("max_seconds", DEFAULT_MAX_SECONDS)
        if max_seconds is not None:
            if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or not (
                    max_seconds > 0 and not math.isnan(max_seconds)):
                raise ValueError(f"limits['max_seconds'] must be a positive number or None, got {max_seconds!r}")
            max_seconds = float(max_seconds)
        max_memory = limits.get("max_memory_mb", DEFAULT_MAX_MEMORY_MB)
        if max_memory is not None and (isinstance(max_memory, bool) or not isinstance(max_memory, (int, float))
                                       or not max_memory > 0):
            raise ValueError(f"limits['max_memory_mb'] must be a positive number or None, got {max_memory!r}")
        self.max_seconds: Optional[float] = max_seconds
        t0 = time.perf_counter() if start is None else start
        self.deadline: Optional[float] = None if max_seconds is None or math.isinf(max_seconds) else t0 + max_seconds
        self.max_memory_mb: Optional[float] = max_memory
        self._rss0 = _resident_mb() if max_memory is not None else None
        self._limits = limits
        self._ticks = 0
        self.active = False  # True while a compile runs under it (see activate_budget)
        for stage, names in DEFAULT_SIZE_LIMITS.items():
            given = limits.get(stage)
            if given is None:
                continue
            if not isinstance(given, Mapping):
                raise ValueError(f"limits[{stage!r}] must be a dict of limits, got {type(given).__name__}")
            for name in names:
                v = given.get(name)
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                    raise ValueError(f"limits[{stage!r}][{name!r}] must be a positive integer, got {v!r}")

    # ------------------------------------------------------------------ limits
    def size_limit(self, stage: str, name: str) -> int:
        """The limit ``name`` of ``stage`` (the user's, else the default)."""
        given = self._limits.get(stage)
        if isinstance(given, Mapping) and given.get(name) is not None:
            return int(given[name])
        return DEFAULT_SIZE_LIMITS[stage][name]

    def check_size(self, stage: str, value: int, limit_stage: str, limit_name: str, what: str) -> None:
        """Raise when ``value`` (a count of ``what``) exceeds ``limits[limit_stage][limit_name]``."""
        limit = self.size_limit(limit_stage, limit_name)
        if value > limit:
            raise GrammarTooComplex(
                f"{stage}: more than {limit} {what} (limit {limit_stage}.{limit_name}); "
                "simplify the grammar or raise the limit")

    # ------------------------------------------------------------------ time and memory
    def seconds_left(self) -> Optional[float]:
        """Seconds until the deadline (may be negative), None without one."""
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def check(self, stage: str) -> None:
        """Raise when the deadline has passed or memory grew past ``max_memory_mb`` (the latter is
        read on every 16th call: it costs a small file read)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise GrammarTooComplex(
                f"{stage}: compile took more than {self.max_seconds:g} s (limit max_seconds)")
        self._ticks += 1
        if self._rss0 is not None and not self._ticks & 15:
            rss = _resident_mb()
            if rss is not None and rss - self._rss0 > self.max_memory_mb:
                raise GrammarTooComplex(
                    f"{stage}: resident memory grew by more than {self.max_memory_mb:g} MiB during the "
                    "compile (limit max_memory_mb)")

    def tick(self, stage: str, i: int) -> None:
        """:meth:`check` on every ``_CHECK_EVERY``-th value of a loop counter ``i``."""
        if not i % _CHECK_EVERY:
            self.check(stage)


_DEFAULT = CompileBudget({"max_seconds": None})


def current_budget() -> CompileBudget:
    """The budget of the compile running in this context, or the default limits without a
    deadline when no compile activated one."""
    b = _ACTIVE.get()
    return _DEFAULT if b is None else b


@contextmanager
def activate_budget(limits: Optional[Mapping] = None) -> Iterator[CompileBudget]:
    """Make a budget for ``limits`` the current one for the duration of the block. Nested
    activations (``compile`` → ``compile_grammar`` → ``Mask``) keep the outermost one: one compile,
    one deadline."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    b = CompileBudget(limits)
    b.active = True
    token = _ACTIVE.set(b)
    try:
        yield b
    finally:
        # ``b`` stays active for work that copied this context (mode="auto"'s background compile)
        _ACTIVE.reset(token)
