"""The static compile pipeline: stack effects, Terminal DWA, token classes, restricted roots and Parser DWA
(DESIGN §4.5–§4.9), each stage timed and bounded.

Why. The dynamic masker walks the vocabulary trie through the recognizer for every new
configuration set. Here the per-token work is done once: the Terminal DWA, the stack effects and
their determinized composition, so that a mask only walks the Parser DWA over the parser stacks
(the native runtime, :mod:`glrmask.runtime`), at a cost that depends on the stacks, not on the
vocabulary. The runtime needs the *complete* automaton (``complete=True``): it never determinizes
on a request's path.
"""
from __future__ import annotations

import time
from typing import Iterable, Optional

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex

from .parser_dwa import ParserDWA
from .restricted_roots import restricted_roots
from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA, terminal_labels
from .token_classes import TokenClasses

__all__ = ["CompiledMasks", "compile_masks"]


class CompiledMasks:
    """What a static mask needs and an artifact stores: the Parser DWA and the token classes its
    weights range over (plus the build statistics, for reports)."""

    def __init__(self, pdwa: ParserDWA, classes: TokenClasses, stats: Optional[dict] = None) -> None:
        self.pdwa = pdwa
        self.classes = classes
        self.stats: dict = dict(stats or {})


def compile_masks(lexer, grammar, table, trie, *, start_states: Iterable[int] = (),
                  tdwa_budgets: Optional[dict] = None, pdwa_budgets: Optional[dict] = None,
                  expand_states: int = 20_000, expand_seconds: Optional[float] = 2.0,
                  deadline: Optional[float] = None, on_stage=None, complete: bool = False) -> CompiledMasks:
    """Build stack effects, Terminal DWA, token classes and Parser DWA, and determinize the Parser
    DWA eagerly up to ``expand_states`` states / ``expand_seconds`` (the rest is built on first
    use; ``complete=True``: determinize everything, within ``deadline`` and the Parser-DWA state
    budget, else :class:`GrammarTooComplex` — the native runtime needs the complete automaton).
    ``deadline`` (a ``time.perf_counter()`` value) bounds the whole build: a stage still
    running then raises :class:`GrammarTooComplex`. ``on_stage(name, seconds, info)`` is called
    after each stage (progress reports)."""
    stats: dict = {}
    whole = current_budget().deadline  # the whole compile's deadline (front-ends included)
    if whole is not None:
        deadline = whole if deadline is None else min(deadline, whole)

    def remaining(limit: Optional[float] = None) -> Optional[float]:
        left = None if deadline is None else max(0.0, deadline - time.perf_counter())
        return limit if left is None else left if limit is None else min(limit, left)

    def done(name: str, t0: float, **info) -> None:
        dt = time.perf_counter() - t0
        stats[name] = {"seconds": dt, **info}
        if on_stage is not None:
            on_stage(name, dt, info)

    t0 = time.perf_counter()
    effects = StackEffects.build(table, ignore=grammar.ignore, max_seconds=remaining())
    done("stack effects", t0, automata=len(effects.automata),
         states=sum(a.n_states for a in effects.automata))
    t0 = time.perf_counter()
    ignored, label_of = terminal_labels(lexer, grammar, table)
    tdwa_limits = dict(tdwa_budgets or {})
    tdwa_limits["max_seconds"] = remaining(tdwa_limits.get("max_seconds"))
    tdwa = TerminalDWA.build(lexer, trie, ignored=ignored, label_of=label_of,
                             start_states=sorted({int(q) for q in start_states if q >= 0}), **tdwa_limits)
    done("terminal DWA", t0, roots=len(tdwa.roots), nodes=tdwa.n_nodes, edges=len(tdwa.edge_label),
         weights=tdwa.n_weights)
    t0 = time.perf_counter()
    classes, class_sets = TokenClasses.from_weights(tdwa.weight_ptr, tdwa.weight_bounds, tdwa.n_tokens)
    done("token classes", t0, classes=classes.n_classes, tokens=classes.n_internal)
    t0 = time.perf_counter()
    dfa = getattr(lexer, "dfa", None)  # a dense lexer (lazy ones: small grammars in tests)
    restrictions = restricted_roots(tdwa, dfa, class_sets) if dfa is not None else []
    done("restricted roots", t0, roots=len(restrictions))
    t0 = time.perf_counter()
    pdwa = ParserDWA(tdwa, effects, class_sets, classes.n_classes, restrictions, **(pdwa_budgets or {}))
    if complete:
        if not pdwa.expand(max_seconds=remaining()):
            raise GrammarTooComplex(
                f"parser DWA: determinization did not finish within the time budget after "
                f"{pdwa.n_states} states (limit max_seconds)")
    else:
        complete = pdwa.expand(max_states=expand_states, max_seconds=remaining(expand_seconds))
    done("parser DWA", t0, states=pdwa.n_states, closures=pdwa.n_closures, complete=complete)
    return CompiledMasks(pdwa, classes, stats)
