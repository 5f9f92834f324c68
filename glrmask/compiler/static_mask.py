"""Static masks: a configuration set's allowed tokens from the compiled automata, with no scan of
the vocabulary (DESIGN §4.8, §5 get_mask).

Why. The dynamic masker walks the vocabulary trie through the recognizer for every new
configuration set. Here the per-token work was done once at compile time (Terminal DWA, stack
effects); a mask only walks the Parser DWA over the parser stacks of each configuration, so its
cost depends on the stacks, not on the vocabulary.

Per configuration ``(lex, frontier, conds)``:

* the tokens allowed are at most ``all − fail_seed(c)`` for each pending condition ``c`` (a token
  that drives a pending condition to FALSE kills the configuration whatever it lexes to);
* the Terminal-DWA root is the one of ``lexer.initial`` at a lexeme start (``BOUNDARY``: the
  unrestricted lexer admits the same tokens once the parser filters the terminals) or of the lane's
  lexer state mid-lexeme;
* the Parser DWA is walked over every stack of the frontier and the accepted token sets are OR-ed.

The result is expanded from internal to original ids like the dynamic masker's, so the two are
comparable byte for byte. End tokens are not included (the caller adds them when the set accepts).

Mid-lexeme lanes hold lexer states *restricted* by the parser, which the Terminal DWA only has a
root for when they are among its ``start_states``; a configuration in an unknown state makes
:class:`StaticMasker` rebuild the Terminal DWA with that state added (pass the states up front via
``start_states`` to avoid rebuilds).
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from glrmask.recognizer import BOUNDARY, ConfigSet

from .parser_dwa import DEFAULT_MAX_CLOSURES, ParserDWA
from .stack_effects import StackEffects
from .terminal_dwa import TerminalDWA, terminal_labels

__all__ = ["StaticMasker", "static_token_words"]


class StaticMasker:
    """The compiled pieces of one ``Mask`` (``mode="dynamic"`` is fine: it reads ``.lexer``,
    ``.grammar``, ``.table``, ``.trie``, ``.vocab``) and the static mask query over them."""

    def __init__(self, mask, *, start_states: Iterable[int] = (),
                 max_closures: int = DEFAULT_MAX_CLOSURES, **tdwa_budgets) -> None:
        self.mask = mask
        self.lexer = mask.lexer
        self.trie = mask.trie
        self.n_logits = int(mask.vocab.n_logits)
        self.n_internal = int(mask.trie.n_internal)
        self.max_closures = max_closures
        self._tdwa_budgets = dict(tdwa_budgets)
        self.ignored, self.label_of = terminal_labels(mask.lexer, mask.grammar, mask.table)
        self.effects = StackEffects.build(mask.table, ignore=mask.grammar.ignore)
        self._starts: set[int] = {int(q) for q in start_states if q >= 0}
        self._fail: dict[int, int] = {}
        self._build()

    def _build(self) -> None:
        self.tdwa = TerminalDWA.build(self.lexer, self.trie, ignored=self.ignored, label_of=self.label_of,
                                      start_states=sorted(self._starts), **self._tdwa_budgets)
        self.pdwa = ParserDWA(self.tdwa, self.effects, max_closures=self.max_closures)
        self._fail.clear()

    def fail_bits(self, cond: int) -> int:
        """Tokens (int bitset over internal ids) whose bytes drive pending condition ``cond`` to
        FALSE: the Terminal DWA's seed when it has one, else a direct scan of the trie."""
        b = self._fail.get(cond)
        if b is None:
            idx = self.tdwa._cond_index.get(int(cond))
            if idx is not None:
                b = self.pdwa.weight_bits(int(self.tdwa.fail_seed[idx]))
            else:
                b = _scan_fail(self.lexer, self.trie, int(cond))
            self._fail[cond] = b
        return b

    def internal_bits(self, configs: ConfigSet) -> int:
        """The allowed byte tokens of a configuration set, as an int bitset over internal ids."""
        # make sure every lane's lexer state has a root first: a rebuild renumbers the nodes
        states = {self.lexer.initial if cfg.lex == BOUNDARY else cfg.lex for cfg in configs}
        missing = {q for q in states if q not in self.tdwa._root_of}
        if missing:
            self._starts |= missing
            self._build()
        pdwa = self.pdwa
        full = pdwa.full
        roots = [(cfg, self.tdwa.root_of(self.lexer.initial if cfg.lex == BOUNDARY else cfg.lex))
                 for cfg in configs]
        memo: dict = {}
        bits = 0
        for cfg, root in roots:
            seed = full
            for c in cfg.conds:
                seed &= ~self.fail_bits(c)
            for stack in cfg.frontier:
                if not seed & ~bits:
                    break
                bits |= seed & pdwa.accepted(root, stack, memo)
        return bits

    def token_words(self, configs: ConfigSet) -> np.ndarray:
        """Packed ``int32`` words over original ids (``ceil(n_logits / 32)`` of them), laid out as
        :meth:`glrmask.dynamic.DynamicMasker.token_words`; no end tokens."""
        bits = self.internal_bits(configs)
        n_words = (self.n_internal + 63) // 64
        raw = bits.to_bytes(max(n_words, 1) * 8, "little")
        internal = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
        return self.trie.expand_to_orig_bitmask(internal, self.n_logits)


def static_token_words(mask, configs: ConfigSet, *, masker: Optional[StaticMasker] = None) -> np.ndarray:
    """One-shot form of :meth:`StaticMasker.token_words` (compiles the pieces unless ``masker``
    is given; reuse a :class:`StaticMasker` for more than one query)."""
    if masker is None:
        masker = StaticMasker(mask, start_states=[c.lex for c in configs if c.lex != BOUNDARY])
    return masker.token_words(configs)


def _scan_fail(lexer, trie, cond: int) -> int:
    """Tokens whose bytes, stepped from ``cond``, reach FALSE (a whole subtree at once)."""
    cp = trie.child_ptr.tolist()
    cb = trie.child_byte.tolist()
    cn = trie.child_node.tolist()
    lo_of = trie.node_subtree_lo.tolist()
    hi_of = trie.node_subtree_hi.tolist()
    out = 0
    stack = [(cn[j], cb[j], cond) for j in range(cp[0], cp[1])]
    while stack:
        node, byte, c = stack.pop()
        c2 = lexer.cond_step(c, byte)
        if c2 == lexer.FALSE:
            out |= (1 << hi_of[node]) - (1 << lo_of[node])
        elif c2 != lexer.TRUE:
            stack.extend((cn[j], cb[j], c2) for j in range(cp[node], cp[node + 1]))
    return out
