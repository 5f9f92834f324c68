"""Static masks: a configuration set's allowed tokens from the compiled Parser DWA, with no scan of
the vocabulary (DESIGN §4.8, §5 get_mask).

Why. The dynamic masker walks the vocabulary trie through the recognizer for every new
configuration set. Here the per-token work was done once at compile time (Terminal DWA, stack
effects, their determinized composition); a mask only walks the Parser DWA over the parser stacks
of each configuration, so its cost depends on the stacks, not on the vocabulary.

Per configuration ``(lex, frontier, conds)``:

* the tokens allowed are at most ``all − fail(c)`` for each pending condition ``c`` (a token that
  drives a pending condition to FALSE kills the configuration whatever it lexes to);
* the Parser-DWA root is the one of ``lexer.initial`` at a lexeme start (``BOUNDARY``: the
  unrestricted lexer admits the same tokens once the parser filters the terminals) or of the lane's
  lexer state mid-lexeme;
* the Parser DWA is walked over every stack of the frontier and the accepted classes are OR-ed.

The class bitset is expanded to internal token ids and then to original ids like the dynamic
masker's, so the two are comparable byte for byte. End tokens are not included (the caller adds
them when the set accepts).

The compiled automaton has a root for every lexer state a *token boundary* can reach and a
failure seed for every condition pending there. Bytes committed outside token boundaries
(``State.commit_bytes``) or a recognizer whose lexer is restricted by the parser can lead to a
lane the automaton has no root for; such a configuration set is answered by the dynamic masker
(exact, just slower) instead of rebuilding anything.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Iterable, Optional

import numpy as np

from glrmask.dynamic import DynamicMasker
from glrmask.recognizer import BOUNDARY, ConfigSet
from glrmask.trie import VocabTrie

from .parser_dwa import ParserDWA
from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA, terminal_labels
from .token_classes import TokenClasses

__all__ = ["StaticMasker", "CompiledMasks", "compile_masks"]


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
                  deadline: Optional[float] = None, on_stage=None) -> CompiledMasks:
    """Build stack effects, Terminal DWA, token classes and Parser DWA, and determinize the Parser
    DWA eagerly up to ``expand_states`` states / ``expand_seconds`` (the rest is built on first
    use). ``deadline`` (a ``time.perf_counter()`` value) bounds the whole build: a stage still
    running then raises :class:`GrammarTooComplex`. ``on_stage(name, seconds, info)`` is called
    after each stage (progress reports)."""
    stats: dict = {}

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
    pdwa = ParserDWA(tdwa, effects, class_sets, classes.n_classes, **(pdwa_budgets or {}))
    complete = pdwa.expand(max_states=expand_states, max_seconds=remaining(expand_seconds))
    done("parser DWA", t0, states=pdwa.n_states, closures=pdwa.n_closures, complete=complete)
    return CompiledMasks(pdwa, classes, stats)


class StaticMasker:
    """Static mask queries over :class:`CompiledMasks`, for configuration sets of ``recognizer``."""

    def __init__(self, compiled: CompiledMasks, recognizer, trie: Callable[[], VocabTrie], n_logits: int) -> None:
        """``trie`` returns the vocabulary trie (called on the first mask: loading a saved mask
        does not wait for it)."""
        self.compiled = compiled
        self.pdwa = compiled.pdwa
        self.classes = compiled.classes
        self.recognizer = recognizer
        self._trie = trie
        self.n_logits = int(n_logits)
        self.initial = int(recognizer.lexer.initial)
        self.full = (1 << self.classes.n_classes) - 1
        self._fallback: Optional[DynamicMasker] = None
        self.n_fallbacks = 0
        # Many configuration sets (the same lexeme at different nesting depths) allow the same
        # classes: their expanded words are shared, keyed by the class bitset (LRU, read-only).
        self._words: OrderedDict[int, np.ndarray] = OrderedDict()
        self.words_cache_size = 1024

    @classmethod
    def for_mask(cls, mask, **compile_options) -> "StaticMasker":
        """Compile the static automata for a ``Mask`` (any mode) and query them for its recognizer."""
        compiled = compile_masks(mask.lexer, mask.grammar, mask.table, mask.trie, **compile_options)
        return cls(compiled, mask.recognizer, lambda: mask.trie, mask.vocab.n_logits)

    def _root(self, cfg) -> int:
        return self.initial if cfg.lex == BOUNDARY else cfg.lex

    def covers(self, configs: ConfigSet) -> bool:
        """Every lane has a Parser-DWA root and every pending condition a failure seed."""
        pdwa = self.pdwa
        return all(pdwa.has_root(self._root(c)) and all(pdwa.has_cond(k) for k in c.conds) for c in configs)

    def class_bits(self, configs: ConfigSet) -> int:
        """The allowed classes of a covered configuration set (Python int bitset)."""
        pdwa = self.pdwa
        full = self.full
        memo: dict = {}
        bits = 0
        for cfg in configs:
            seed = full
            for c in cfg.conds:
                seed &= ~pdwa.fail_bits(c)
            q = self._root(cfg)
            for stack in cfg.frontier:
                if not seed & ~bits:
                    break
                bits |= seed & pdwa.accepted(q, stack, memo)
        return bits

    def token_words(self, configs: ConfigSet) -> np.ndarray:
        """Packed ``int32`` words over original ids (``ceil(n_logits / 32)`` of them), laid out as
        :meth:`glrmask.dynamic.DynamicMasker.token_words`; no end tokens."""
        if not self.covers(configs):
            self.n_fallbacks += 1
            if self._fallback is None:
                self._fallback = DynamicMasker(self.recognizer, self._trie(), self.n_logits)
            return np.array(self._fallback.token_words(configs))
        self.pdwa.trim()
        bits = self.class_bits(configs)
        words = self._words.get(bits)
        if words is not None:
            self._words.move_to_end(bits)
            return words
        words = self._trie().expand_to_orig_bitmask(self.classes.internal_words(bits), self.n_logits)
        words.flags.writeable = False
        self._words[bits] = words
        if len(self._words) > self.words_cache_size:
            self._words.popitem(last=False)
        return words
