"""A tiny BNF builder whose product is the grammar IR (:class:`glrmask.grammar.ir.Grammar`).

Lowering creates rules (lists of alternatives, each a list of symbol names) and regex terminals
(deduplicated by pattern). Before emission, unproductive symbols (e.g. from `false` schemas or
unsatisfiable keyword combinations) and unreachable rules are pruned, so the emitted grammar never
contains a rule without alternatives.

The builder emits the IR directly rather than Lark text that the Lark front-end would parse again:
on large schemas that reparse costs up to a second, a large part of the time to the first mask.
The IR is, field for field, what :func:`glrmask.grammar.lark_frontend.grammar_from_lark` reads from
the builder's Lark rendering (:meth:`GrammarBuilder.to_lark`, kept as the reference that the tests
hold the IR to): the same rule and terminal order, names and patterns (see :func:`lark_pattern`).
"""
from __future__ import annotations

from functools import lru_cache

from glrmask_ext.grammar_prune import prune_rules
from glrmask_ext.ir_rules import GrammarBuilderCore, emit_rules, lark_read_regex, new_terminal

from ..budget import current_budget
from ..errors import UnsupportedSchema
from ..grammar.ir import Grammar, Rule


def lark_regex_literal(regex: str) -> str:
    """Wrap a regex (restricted escape vocabulary, see :mod:`.charset`) as a Lark ``/.../`` literal.

    Lark unescapes ``\\x``/``\\u``/``\\U``/``\\n``... into literal characters and leaves other
    escapes alone; our regexes only use those for characters that are not regex-special, and never
    contain a raw quote, slash or newline, so the meaning is unchanged.
    """
    assert '\n' not in regex and '"' not in regex
    out = []
    i = 0
    while i < len(regex):
        c = regex[i]
        if c == '\\' and i + 1 < len(regex):
            out.append(regex[i:i + 2])
            i += 2
            continue
        if c == '/':
            out.append('\\/')
        else:
            out.append(c)
        i += 1
    return '/' + ''.join(out) + '/'


@lru_cache(maxsize=4096)
def lark_pattern(regex: str) -> str:
    """The ``re`` pattern lark reads from :func:`lark_regex_literal` (`regex`), computed directly.

    Lark evaluates the escapes ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``, ``\\n``, ``\\f``,
    ``\\t`` and ``\\r`` of a ``/.../`` literal into the characters they name and keeps every other
    backslash pair as it is (so the ``\\/`` that the literal needs for a slash stays in the
    pattern). Producing the same string lets the IR of the direct path equal, character for
    character, the one the Lark front-end would have built; the escapes of the lowering's regex
    vocabulary name only characters that are not regex-special, so the meaning is unchanged.
    (One native pass, :func:`glrmask_ext.ir_rules.lark_read_regex`: terminal regexes run to
    kilobytes of escapes and character classes, every new terminal of a schema is read, and a
    ``re`` scan with a Python replacement per escape was a tenth of lowering a large schema.
    Memoized: most schemas share their string, number and punctuation terminals.)
    """
    if '\\' not in regex and '/' not in regex:
        return regex
    return lark_read_regex(regex)


class GrammarBuilder(GrammarBuilderCore):
    """Rules and terminals (see :class:`glrmask_ext.ir_rules.GrammarBuilderCore`: ``rules``,
    ``terminals``, ``terminal(regex, hint)``, ``new_rule(hint)``, ``set_alts(name, alts)``),
    pruned and emitted as IR or Lark text."""

    def prune(self, start: str, *, native: bool = True) -> None:
        """Drop unproductive alternatives and unreachable rules (linear worklist, no fixpoint sweeps).
        ``native=False`` runs the Python reference below (the same result,
        :func:`glrmask_ext.grammar_prune.prune_rules` is held to it)."""
        if native:
            pruned = prune_rules(self.rules, self.terminals, start)
            if pruned is None:
                raise UnsupportedSchema("the schema admits no JSON value (it is unsatisfiable)")
            self.rules, self.terminals = pruned
            return
        productive = set(self.terminals)
        # an alternative becomes productive when its last unproductive symbol does; ``missing[k]``
        # counts those of the k-th alternative that waits (``owner[k]`` its rule)
        missing: list[int] = []
        owner: list[str] = []
        users: dict[str, list[int]] = {}
        todo: list[str] = []
        for name, alts in self.rules.items():
            for a in alts:
                if productive.issuperset(a):
                    if name not in productive:
                        productive.add(name)
                        todo.append(name)
                    continue
                need = {s for s in a if s not in productive}
                k = len(missing)
                missing.append(len(need))
                owner.append(name)
                for s in need:
                    u = users.get(s)
                    if u is None:
                        users[s] = [k]
                    else:
                        u.append(k)
        while todo:
            for k in users.get(todo.pop(), ()):
                missing[k] -= 1
                if not missing[k]:
                    name = owner[k]
                    if name not in productive:
                        productive.add(name)
                        todo.append(name)
        if start not in productive:
            raise UnsupportedSchema("the schema admits no JSON value (it is unsatisfiable)")
        for name, alts in self.rules.items():
            if name in productive:
                kept = [a for a in alts if productive.issuperset(a)]
                if len(kept) < len(alts):
                    self.rules[name] = kept
        reach, todo = {start}, [start]
        while todo:
            for a in self.rules.get(todo.pop(), ()):
                for s in a:
                    if s not in reach:
                        reach.add(s)
                        if s in self.rules:
                            todo.append(s)
        self.rules = {k: v for k, v in self.rules.items() if k in reach}
        self.terminals = {k: v for k, v in self.terminals.items() if k in reach}

    def to_grammar(self, start: str, source_name: str = '<json-schema>') -> Grammar:
        """The pruned grammar as IR: `start`'s rule first, then the others in creation order, each
        rule's alternatives in order without repeats, terminals in creation order, nothing ignored
        (whitespace is explicit in the rules). Checks the compile's deadline and counts against its
        ``grammar.max_symbols`` budget like any front-end's output."""
        budget = current_budget()
        budget.check("front-end (JSON Schema)")
        self.prune(start)
        rules: list[Rule]
        rules, size = emit_rules(self.rules, start)  # (natively: thousands of rules on a large schema)
        budget.check_size("front-end (JSON Schema)", size, "grammar", "max_symbols",
                            "rules and right-hand-side symbols")
        terminals = {name: new_terminal(name, lark_pattern(regex)) for name, regex in self.terminals.items()}
        return Grammar(rules=rules, terminals=terminals, start=start, source_name=source_name)

    def to_lark(self, start: str) -> str:
        """The pruned grammar as Lark text in the lowering's own regex vocabulary: the reference
        that :meth:`to_grammar` is held to (lark reading this text yields the same IR)."""
        self.prune(start)
        lines = []
        order = [start] + [r for r in self.rules if r != start]
        for name in order:
            alts = self.rules[name]
            body = '\n    | '.join(' '.join(a) for a in alts)
            lines.append(f"{name}: {body}")
        lines.append('')
        for name, regex in self.terminals.items():
            lines.append(f"{name}: {lark_regex_literal(regex)}")
        return '\n'.join(lines) + '\n'
