"""Language-preserving normalization of the grammar IR (DESIGN §4.2).

Why: at runtime one terminal triggers a chain of reductions before it is shifted. Each reduction
without an intervening shift follows an edge of the *right-end graph* (``X → Y`` iff some rule
``Y -> γ X``), and an ε-rule can fire without consuming anything. With no ε-rules and an acyclic
right-end graph the chain is bounded, so every terminal's stack effect is a finite language and the
GLR reduce closure terminates without a depth guard.

Steps, repeated until nothing changes (each under the ``max_rules`` budget):

1. drop unproductive and unreachable symbols (an empty language is a :class:`GrammarError`);
2. ε-elimination: every nonterminal ``A`` is redefined to derive ``L(A) \\ {ε}``; each right-hand
   side is expanded into the alternatives that omit some of its nullable symbols. Rules with few
   nullable symbols are expanded directly (≤ 2^3 variants); longer ones are split into a balanced
   tree of fresh "non-empty span" nonterminals (3 rules per tree node), so the size stays linear;
3. unit cycles (``A -> B``, ``B -> A`` …) are collapsed onto one representative; ``A -> A`` dropped;
4. right recursion is broken per strongly connected component C of the right-end graph. Usually
   by *hubs*: a few members meeting every cycle are kept, the others are inlined at right ends,
   earlier hubs are inlined into later ones, and each hub's direct recursion becomes left recursion
   (``A -> α A | β`` ⇒ ``A -> N β | β``, ``N -> α | N α``). On dense components that can blow up,
   so it is capped at the size of the *right-corner* construction (O(|C| · rules + |C|²), see
   ``_break_by_right_corners``), which is used instead when the cap is hit;
5. duplicate rules are removed;
6. after the fixed point, terminal aliases — nonterminals whose only rule is ``A -> t`` — are
   replaced by their terminal (:func:`inline_terminal_aliases`).

The empty string: if ``ε ∈ L(G)`` the result has a fresh start symbol ``S0`` with exactly the rules
``S0 -> start`` and ``S0 -> ε`` (``S0`` occurs on no right-hand side). That ε-rule of the start symbol
is the only one allowed by :func:`check_normalized`; an LR table reduces it only at the bottom of the
stack with lookahead ``$END``.

Terminal definitions, the ignore list, the source name and warnings pass through unchanged.

Two implementations compute the same grammar, rule for rule and name for name:
:mod:`glrmask_ext.normalize` (the default; symbols as ints, ~5x faster on large JSON Schemas) and
:class:`_Normalizer` below, the reference it is tested against (``normalize(g, native=False)``).
"""
from __future__ import annotations

import re
from collections import defaultdict

from glrmask.budget import current_budget
from glrmask.errors import GlrmaskError, GrammarError, GrammarTooComplex
from glrmask.grammar.gc_pause import cyclic_gc_paused
from glrmask.grammar.ir import Grammar, Rule

_DIRECT_EXPANSION_LIMIT = 3  # nullable symbols per rhs expanded as 2^k variants; longer → tree


class NormalFormViolation(GlrmaskError):
    """Internal error: a grammar handed to the LR builder is not in normal form (a bug upstream)."""


# ---------------------------------------------------------------------------------------------
# post-condition
# ---------------------------------------------------------------------------------------------
def check_normalized(grammar: Grammar, *, _structure_only: bool = False) -> None:
    """Raise :class:`NormalFormViolation` unless ``grammar`` is in the normal form above: every
    nonterminal on a right-hand side has rules, the only ε-rule is ``start -> ε`` with ``start`` on
    no right-hand side, and the right-end graph is acyclic (no ``A -> A``, no unit cycles, no
    direct or indirect right recursion).

    ``_structure_only`` (for :func:`normalize`, which has just searched the same rules for a
    right-end cycle) skips that search."""
    lhs_set = {r.lhs for r in grammar.rules}
    if grammar.start not in lhs_set:
        raise NormalFormViolation(f"start symbol {grammar.start!r} has no rules")
    on_rhs: set[str] = set()
    for r in grammar.rules:
        on_rhs.update(r.rhs)
    if not lhs_set.union(grammar.terminals).issuperset(on_rhs):  # then name the first offender
        for r in grammar.rules:
            for s in r.rhs:
                if s not in grammar.terminals and s not in lhs_set:
                    raise NormalFormViolation(f"{s!r} in rule {r} is neither a terminal nor defined")
    for r in grammar.rules:
        if not r.rhs and (r.lhs != grammar.start or grammar.start in on_rhs):
            raise NormalFormViolation(f"ε-rule {r} is not the start symbol's documented ε-rule")
    if not _structure_only:
        _check_acyclic(_find_cycle(_right_end_graph(grammar.rules, grammar.terminals)))


def _check_acyclic(cycle: list[str] | None) -> None:
    if cycle is not None:
        raise NormalFormViolation("right-end graph has a cycle: " + " → ".join(cycle))


def _right_end_graph(rules: list[Rule], terminals) -> dict[str, set[str]]:
    """X → Y iff some rule ``Y -> γ X`` (nonterminal X only; terminals are sinks)."""
    g: dict[str, set[str]] = {}
    for r in rules:
        rhs = r.rhs
        if rhs:
            x = rhs[-1]
            if x not in terminals:
                s = g.get(x)
                if s is None:
                    g[x] = {r.lhs}
                else:
                    s.add(r.lhs)
    return g


def _derivable(rules: list[Rule], needs: list) -> tuple[set[str], list[int]]:
    """The least set ``S`` of left-hand sides such that ``A ∈ S`` whenever some rule ``A → X1…Xn``
    has every symbol of ``needs[i]`` (its occurrences not given: the nonterminals for productive
    symbols, the whole right-hand side for nullable ones) in ``S``. A worklist over per-rule counts
    of unsatisfied occurrences, linear in the grammar's size — a round-robin fixpoint needs one
    round per link of a rule chain. Also returns those counts: rule ``i`` has all its symbols in
    ``S`` iff ``pending[i] == 0``.

    A first sweep from the last rule to the first settles every rule whose symbols are already
    known (front-ends list a rule before the ones it uses, so this is most of them, at the cost of
    one set test each); only the others wait in the worklist, counting what they still miss."""
    pending = [0] * len(needs)
    out: set[str] = set()
    waiting: list[int] = []
    for i in range(len(needs) - 1, -1, -1):
        if out.issuperset(needs[i]):
            out.add(rules[i].lhs)
        else:
            waiting.append(i)
    users: dict[str, list[int]] = {}
    work: list[str] = []
    for i in waiting:
        n = 0
        for x in needs[i]:
            if x not in out:
                n += 1
                u = users.get(x)
                if u is None:
                    users[x] = [i]
                else:
                    u.append(i)
        pending[i] = n
        if not n:
            lhs = rules[i].lhs
            if lhs not in out:
                out.add(lhs)
                work.append(lhs)
    # (symbols settled by the sweep are on no waiting rule's count, so they need no visit)
    while work:
        a = work.pop()
        for i in users.get(a, ()):
            pending[i] -= 1
            if not pending[i]:
                lhs = rules[i].lhs
                if lhs not in out:
                    out.add(lhs)
                    work.append(lhs)
    return out, pending


def _nonempty(rules: list[Rule], nullable: set[str]) -> set[str]:
    """The nullable symbols that derive a non-empty string too, in a grammar where every symbol is
    productive: those with a rule that has a terminal, a non-nullable nonterminal (productive, so
    non-empty strings only) or such a symbol."""
    nonempty: set[str] = set()
    users: dict[str, list[str]] = {}
    work: list[str] = []
    for r in rules:
        a = r.lhs
        if a not in nullable or a in nonempty:
            continue
        for s in r.rhs:
            if s not in nullable:
                nonempty.add(a)
                work.append(a)
                break
            users.setdefault(s, []).append(a)
    while work:
        for b in users.get(work.pop(), ()):
            if b not in nonempty:
                nonempty.add(b)
                work.append(b)
    return nonempty


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    for root in list(graph):
        if color.get(root):
            continue
        stack = [(root, iter(sorted(graph.get(root, ()))))]
        path = [root]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                path.pop()
                continue
            c = color.get(nxt, 0)
            if c == 1:
                return path[path.index(nxt):] + [nxt]
            if c == 0:
                succ = graph.get(nxt)
                if not succ:  # a sink is on no cycle: done at once
                    color[nxt] = 2
                    continue
                color[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(succ))))
    return None


# ---------------------------------------------------------------------------------------------
# the transformation
# ---------------------------------------------------------------------------------------------
def normalize(grammar: Grammar, *, max_rules: int | None = None, native: bool = True) -> Grammar:
    """Return an equivalent grammar satisfying :func:`check_normalized` (see the module docstring).
    ``max_rules`` defaults to the compile budget's ``limits["normalize"]["max_rules"]``
    (:mod:`glrmask.budget`). ``native=False`` runs the Python reference (the same grammar, name
    for name and rule for rule, or the same error; about 5x slower on large grammars)."""
    if max_rules is None:
        max_rules = current_budget().size_limit("normalize", "max_rules")
    with cyclic_gc_paused():  # tens of thousands of cycle-free rules and tuples
        out = _normalize_native(grammar, max_rules) if native else _Normalizer(grammar, max_rules).run()
        out.rules = inline_terminal_aliases(out.rules, out.start, out.terminals)
        return out


def inline_terminal_aliases(rules: list[Rule], start: str, terminals) -> list[Rule]:
    """Replace every nonterminal whose only rule is ``A -> t`` (``t`` a terminal; ``A`` not the
    start) by ``t`` on every right-hand side, and drop its rule (step 6 of the module docstring).

    Why. Such an alias (JSON Schema's optional whitespace ``_w -> WS`` after ε-elimination, Lark's
    ``string: ESCAPED_STRING``) adds an LR state ``A -> t .`` shared by every context ``A`` occurs
    in, and under LALR(1) that state reduces on the union of all those contexts' lookaheads: for
    ``_w`` every terminal of the grammar. A stack whose top is that state then tells a
    terminal's stack effect nothing, every terminal reads one state deeper, and the Parser DWA
    keeps a row of thousands of labels per boundary lexer state for it (Kubernetes schemas: 16 of
    52 million edges). With ``t`` in place of ``A``, the state after ``t`` is the item of its own
    context. The language is unchanged, and so is the normal form: no ε-rule appears, and a right
    end ``A`` (with no outgoing right-end edge) becomes a terminal. Aliases of aliases resolve in
    the same pass (``B -> A``, ``A -> t`` ⇒ ``B -> t`` ⇒ ``t``)."""
    by_lhs = _by_lhs(rules)
    alias = {a: rs[0].rhs[0] for a, rs in by_lhs.items()
             if a != start and len(rs) == 1 and len(rs[0].rhs) == 1 and rs[0].rhs[0] in terminals}
    if not alias:
        return rules
    changed = True
    while changed:  # a rule B -> A whose A is an alias makes B one too once A is replaced
        changed = False
        for b, rs in by_lhs.items():
            if b not in alias and b != start and len(rs) == 1 and len(rs[0].rhs) == 1 and rs[0].rhs[0] in alias:
                alias[b] = alias[rs[0].rhs[0]]
                changed = True
    from glrmask_ext.ir_rules import new_rule  # untracked by the cyclic collector, as the normalizer's

    return _dedupe([r if not any(x in alias for x in r.rhs) else new_rule(r.lhs, tuple([alias.get(x, x) for x in r.rhs]))
                    for r in rules if r.lhs not in alias])


def _normalize_native(grammar: Grammar, max_rules: int) -> Grammar:
    """:class:`_Normalizer` in :mod:`glrmask_ext.normalize`; its outcomes worded as the Python
    normalizer words them."""
    from glrmask_ext.normalize import normalize_rules

    status, rules, start, detail = normalize_rules(
        grammar.rules, grammar.terminals, grammar.start, max_rules, current_budget(), _stem)
    if status == 2:
        step, n = detail
        raise GrammarTooComplex(
            f"normalize: step '{step}' exceeded max_rules={max_rules} ({n} rules; limit "
            "normalize.max_rules)"
        )
    if status == 3:
        raise GrammarError(
            f"{grammar.source_name}: the grammar's language is empty "
            f"(start symbol {detail!r} derives no terminal string)"
        )
    if status == 4:  # pragma: no cover - the steps cannot undo each other
        raise NormalFormViolation("normalize did not reach a fixed point")
    out = Grammar(
        rules=rules,
        terminals=dict(grammar.terminals),
        start=start,
        ignore=grammar.ignore,
        source_name=grammar.source_name,
        warnings=list(grammar.warnings),
    )
    if status == 5:  # pragma: no cover - a bug: the post-condition names what is wrong
        check_normalized(out)
        raise NormalFormViolation("normalize: the native post-condition failed")
    return out


def _stem(base: str) -> str:
    """The stem of the fresh symbols made for ``base``: its lower-case letters, digits and
    underscores (anything else an underscore), never empty, never starting with a digit."""
    stem = re.sub(r"[^a-z0-9_]", "_", base.lower()).strip("_") or "n"
    if not stem[0].isalpha():
        stem = "n" + stem
    return stem


class _Normalizer:
    def __init__(self, grammar: Grammar, max_rules: int) -> None:
        self.g = grammar
        self.terms = grammar.terminals
        self.max_rules = max_rules
        self.used: set[str] = {r.lhs for r in grammar.rules}
        for r in grammar.rules:
            self.used.update(r.rhs)
        self.used.update(grammar.terminals)
        self.counter = 0
        self.clock = current_budget()
        self.steps = 0
        self._labels: dict[str, str] = {}
        self._stems: dict[str, str] = {}
        self.corners_used = False  # whether the last break_right_recursion built right corners

    # -- helpers ---------------------------------------------------------------------------------
    def fresh(self, base: str, kind: str) -> str:
        stem = self._stems.get(base)
        if stem is None:
            stem = self._stems[base] = _stem(base)
        while True:
            self.counter += 1
            name = f"{stem}__{kind}{self.counter}"
            if name not in self.used:
                self.used.add(name)
                return name

    def tick(self, step: str) -> None:
        self.clock.check(f"normalize ({step})")

    def budget(self, n: int, step: str) -> None:
        self.steps += 1
        label = self._labels.get(step)
        if label is None:
            label = self._labels[step] = f"normalize ({step})"
        self.clock.tick(label, self.steps)
        if n > self.max_rules:
            raise GrammarTooComplex(
                f"normalize: step '{step}' exceeded max_rules={self.max_rules} ({n} rules; limit "
                "normalize.max_rules)"
            )

    # -- driver ----------------------------------------------------------------------------------
    def run(self) -> Grammar:
        start = self.g.start
        rules = _dedupe(self.g.rules)
        self.budget(len(rules), "input")
        rules = self.clean(rules, start)
        rules, start, empty = self.eliminate_epsilon(rules, start)
        self.tick("removing unproductive symbols")
        if empty:
            rules = self._without(rules, empty, start)
        acyclic = False
        for _ in range(100):
            self.tick("fixed point")
            before = rules
            rules = self.collapse_unit_cycles(rules, start)
            rules = self.break_right_recursion(rules, start)
            if rules == before:  # nothing to collapse or break: ``before`` is clean already
                break
            # (both steps return duplicate-free lists from duplicate-free ones)
            rules = self.clean(rules, start, all_productive=not self.corners_used)
            if rules == before:
                break
            # a unit cycle or an ``A -> A`` is a right-end cycle, so on an acyclic right-end graph
            # the next round would collapse and break nothing and return these rules unchanged;
            # the search is the post-condition's, done once here
            cycle = _find_cycle(_right_end_graph(rules, self.terms))
            if cycle is None:
                acyclic = True
                break
        else:  # pragma: no cover - the steps cannot undo each other
            raise NormalFormViolation("normalize did not reach a fixed point")
        out = Grammar(
            rules=rules,
            terminals=dict(self.g.terminals),
            start=start,
            ignore=self.g.ignore,
            source_name=self.g.source_name,
            warnings=list(self.g.warnings),
        )
        check_normalized(out, _structure_only=acyclic)
        return out

    # -- 1. unproductive / unreachable -------------------------------------------------------------
    def clean(self, rules: list[Rule], start: str, *, all_productive: bool = False) -> list[Rule]:
        """Drop unproductive rules, then unreachable ones. ``all_productive``: the caller knows
        every symbol and rule to be productive — rules that only collapsing unit cycles and the
        hub construction changed: both keep every old symbol's language, and a hub's fresh
        symbol derives prefixes of its rules — so only reachability is computed."""
        terms = self.terms
        self.tick("removing unproductive symbols")
        if all_productive:
            return self._reachable(rules, start)
        # each rule's nonterminal occurrences: productivity waits for them, reachability follows them
        nts = [[x for x in r.rhs if x not in terms] for r in rules]
        productive, pending = _derivable(rules, nts)
        if start not in productive:
            raise GrammarError(
                f"{self.g.source_name}: the grammar's language is empty "
                f"(start symbol {start!r} derives no terminal string)"
            )
        # a rule is kept iff all its symbols are productive (its lhs then is too)
        if any(pending):
            keep = [i for i, p in enumerate(pending) if not p]
            rules = [rules[i] for i in keep]
            nts = [nts[i] for i in keep]
        return self._reachable(rules, start)

    def _without(self, rules: list[Rule], empty: set[str], start: str) -> list[Rule]:
        """:meth:`clean` where the unproductive symbols are known to be ``empty``: the rules
        using none of them, then the reachable ones among those."""
        if start in empty:
            raise GrammarError(
                f"{self.g.source_name}: the grammar's language is empty "
                f"(start symbol {start!r} derives no terminal string)"
            )
        rules = [r for r in rules if r.lhs not in empty and empty.isdisjoint(r.rhs)]
        return self._reachable(rules, start)

    def _reachable(self, rules: list[Rule], start: str) -> list[Rule]:
        """The rules whose lhs is reachable from ``start`` (the terminals count as reached from
        the outset, so the search skips them with the same test)."""
        by_lhs: dict[str, list[tuple[str, ...]]] = {}
        for r in rules:
            u = by_lhs.get(r.lhs)
            if u is None:
                by_lhs[r.lhs] = [r.rhs]
            else:
                u.append(r.rhs)
        reach = set(self.terms)
        reach.add(start)
        work = [start]
        while work:
            for rhs in by_lhs.get(work.pop(), ()):
                for s in rhs:
                    if s not in reach:
                        reach.add(s)
                        work.append(s)
        if reach.issuperset(by_lhs):
            return rules
        return [r for r in rules if r.lhs in reach]

    # -- 2. ε-elimination --------------------------------------------------------------------------
    def eliminate_epsilon(self, rules: list[Rule], start: str) -> tuple[list[Rule], str, set[str]]:
        """``(rules, start, empty)`` for clean ``rules``: ``empty`` holds the nonterminals the
        result leaves without a language, so that ``_without(rules, empty, start)`` is what
        :meth:`clean` would return.

        Each symbol ``A`` now derives ``L(A) \\ {ε}``: it is unproductive iff it derived ε alone,
        and a span iff every symbol of its sequence did; every other symbol keeps a non-empty
        language. Every symbol of a right-hand side stays on one of its alternatives (the one
        omitting nothing), so only those unproductive symbols make rules go, and symbols become
        unreachable only through them."""
        terms = self.terms
        self.tick("ε-elimination")
        # (a rule with a terminal never derives ε)
        term_names = terms.keys()
        candidates = [r for r in rules if term_names.isdisjoint(r.rhs)]
        nullable, _ = _derivable(candidates, [r.rhs for r in candidates])
        if not nullable:
            return rules, start, set()
        only_empty = nullable - _nonempty(rules, nullable)
        out: list[Rule] = []
        spans: dict[tuple[str, ...], str] = {}
        empty = set(only_empty)

        def nonempty_alts(seq: tuple[str, ...]) -> list[tuple[str, ...]]:
            """Alternatives (each non-empty) whose union is L(seq) minus ε, where every symbol
            already stands for its ε-free language."""
            if nullable.isdisjoint(seq):
                return [seq] if seq else []
            k = sum(map(nullable.__contains__, seq))  # occurrences
            if k <= _DIRECT_EXPANSION_LIMIT:
                alts: list[tuple[str, ...]] = [()]
                for s in seq:
                    if s in nullable:
                        alts = [a + (s,) for a in alts] + alts
                    else:
                        alts = [a + (s,) for a in alts]
                return [a for a in alts if a]
            mid = len(seq) // 2
            left, right = seq[:mid], seq[mid:]
            lp, rp = span_symbol(left), span_symbol(right)
            alts = [lp + rp]
            if nullable.issuperset(right):
                alts.append(lp)
            if nullable.issuperset(left):
                alts.append(rp)
            return alts

        def span_symbol(seq: tuple[str, ...]) -> tuple[str, ...]:
            """The symbols standing for L(seq) minus ε: the span itself when it has no nullable
            symbol, else a fresh nonterminal (shared between equal spans)."""
            if len(seq) == 1 or nullable.isdisjoint(seq):
                return seq
            name = spans.get(seq)
            if name is None:
                name = self.fresh(next(s for s in seq if s not in terms), "span")
                spans[seq] = name
                if only_empty.issuperset(seq):
                    empty.add(name)
                for alt in nonempty_alts(seq):
                    out.append(Rule(name, alt))
                    self.budget(len(out), "ε-elimination")
            return (name,)

        try:
            for r in rules:
                if r.rhs and nullable.isdisjoint(r.rhs):
                    out.append(r)  # its only alternative is itself
                    self.budget(len(out), "ε-elimination")
                    continue
                for alt in nonempty_alts(r.rhs):
                    out.append(Rule(r.lhs, alt))
                    self.budget(len(out), "ε-elimination")
        finally:
            # the two closures call each other, a reference cycle that would keep this whole
            # step's state alive until the next garbage collection
            del nonempty_alts, span_symbol
        if start in nullable:
            s0 = self.fresh(start, "start")
            out.append(Rule(s0, (start,)))
            out.append(Rule(s0, ()))
            start = s0
        return _dedupe(out), start, empty

    # -- 3. unit cycles ----------------------------------------------------------------------------
    def collapse_unit_cycles(self, rules: list[Rule], start: str) -> list[Rule]:
        terms = self.terms
        unit: dict[str, set[str]] = defaultdict(set)
        self_loop = False
        for r in rules:
            rhs = r.rhs
            if len(rhs) == 1 and rhs[0] not in terms:
                unit[r.lhs].add(rhs[0])
                self_loop = self_loop or rhs[0] == r.lhs
        rep: dict[str, str] = {}
        # (a unit cycle runs through lhs's with unit rules only; which components, not their order)
        for comp in _sccs(sorted(unit), unit):
            if len(comp) > 1:
                # equal languages within a unit cycle (no ε-rules): keep one name, the start if
                # there, else the least
                keep = start if start in comp else min(comp)
                for a in comp:
                    rep[a] = keep
        if rep:
            rules = _dedupe([
                Rule(rep.get(r.lhs, r.lhs), tuple(rep.get(s, s) for s in r.rhs)) for r in rules
            ])
        elif not self_loop:
            return rules  # (duplicate-free already: it comes from clean)
        return [r for r in rules if len(r.rhs) != 1 or r.rhs[0] != r.lhs]

    # -- 4. right recursion ------------------------------------------------------------------------
    def break_right_recursion(self, rules: list[Rule], start: str) -> list[Rule]:
        terms = self.terms
        graph = _right_end_graph(rules, terms)
        nodes = list(dict.fromkeys([r.lhs for r in rules]))
        comps = [c for c in _sccs(nodes, graph) if len(c) > 1 or c[0] in graph.get(c[0], ())]
        self.corners_used = False
        if not comps:
            return rules
        by_lhs = _by_lhs(rules)
        order = {a: i for i, a in enumerate(nodes)}
        for comp in comps:
            members = sorted(comp, key=order.__getitem__)
            part = {a: list(by_lhs[a]) for a in members}
            comp_rules = sum(len(v) for v in part.values())
            # the right-corner construction is O(|C| · rules); the hub construction is usually far
            # smaller (one hub: statements, unary operators) but can blow up on dense components,
            # so it runs capped at the corner construction's size and loses if it exceeds that
            corner_size = len(members) * (2 * comp_rules + len(members))
            result = self._break_by_hubs(part, members, graph, cap=corner_size)
            if result is None:
                result = self._break_by_right_corners(part, members)
                self.corners_used = True
            # (duplicate-free: inlining deduplicates, a hub's new rules differ from each other and
            # from its old ones by the fresh symbol, the right corners deduplicate)
            total = len(rules) - comp_rules + sum(len(v) for v in result.values())
            self.budget(total, "right-recursion elimination")
            for a in members:
                del by_lhs[a]
            by_lhs.update(result)
        out: list[Rule] = []
        for rs in by_lhs.values():
            out.extend(rs)
        return out

    def _break_by_hubs(
        self, part: dict[str, list[Rule]], members: list[str], graph, cap: int
    ) -> dict[str, list[Rule]] | None:
        """Hub construction on one component (``part``: its members' rules). Returns the new rules
        (members and fresh symbols), or None as soon as they would exceed ``cap`` rules."""
        by_lhs = {a: list(rs) for a, rs in part.items()}
        total = sum(len(v) for v in by_lhs.values())
        hubs = _feedback_vertices(members, graph)
        try:
            # (a) inline every non-hub member at the right ends of the component's rules; a
            #     non-hub lies on no cycle avoiding the hubs, so afterwards it is a sink
            #     (members eliminated earlier are sinks already and are left alone)
            eliminated: set[str] = set()
            for x in members:
                if x in hubs:
                    continue
                for y in members:
                    if y == x or y in eliminated or not any(r.rhs[-1] == x for r in by_lhs[y]):
                        continue
                    total = _inline_right_end(by_lhs, y, x, total, cap)
                eliminated.add(x)
            # (b) among the hubs, inline earlier hubs into later ones (Paull, mirrored), then
            #     turn each hub's direct right recursion into left recursion
            ordered = [a for a in members if a in hubs]
            for i, a in enumerate(ordered):
                for b in ordered[:i]:
                    if any(r.rhs[-1] == b for r in by_lhs[a]):
                        total = _inline_right_end(by_lhs, a, b, total, cap)
                rec = [r for r in by_lhs[a] if r.rhs[-1] == a]
                if not rec:
                    continue
                base = [r for r in by_lhs[a] if r.rhs[-1] != a]
                n = self.fresh(a, "rr")
                alphas = [r.rhs[:-1] for r in rec]  # non-empty: A -> A was removed
                new = list(base) + [Rule(a, (n,) + r.rhs) for r in base]
                nrules = [Rule(n, al) for al in alphas] + [Rule(n, (n,) + al) for al in alphas]
                total += len(new) + len(nrules) - len(by_lhs[a])
                if total > cap:
                    return None
                by_lhs[a] = new
                by_lhs[n] = nrules
        except _OverCap:
            return None
        return by_lhs

    def _break_by_right_corners(
        self, part: dict[str, list[Rule]], members: list[str]
    ) -> dict[str, list[Rule]]:
        """Right-corner construction on one component C, size O(|C| · rules + |C|²).

        A right-spine derivation ``A ⇒ γ1 B1 ⇒ γ1 γ2 B2 ⇒ … ⇒ γ1…γk β`` uses internal rules
        ``X -> γ B`` (B ∈ C) and ends with an exit rule ``B -> β`` (β's last symbol ∉ C). With
        ``Q(A,B)`` deriving the non-empty spine strings ``γ1…γk`` from A to B:
        ``A -> Q(A,B) β`` and, when A reaches B by unit rules alone, ``A -> β``;
        ``Q(A,B) -> Q(A,X) γ`` for each internal ``X -> γ B`` and ``Q(A,B) -> γ`` when γ ≠ ε and
        A reaches X by unit rules. Q's are left-recursive and never at a right end except in unit
        rules following the (acyclic) unit edges, so the component's cycles are gone."""
        cset = set(members)
        internal: list[tuple[str, tuple[str, ...], str]] = []
        exits: dict[str, list[tuple[str, ...]]] = {a: [] for a in members}
        unit: dict[str, set[str]] = {a: set() for a in members}
        for a in members:
            for r in part[a]:
                if r.rhs[-1] in cset:
                    internal.append((a, r.rhs[:-1], r.rhs[-1]))
                    if len(r.rhs) == 1:
                        unit[a].add(r.rhs[0])
                else:
                    exits[a].append(r.rhs)
        out: dict[str, list[Rule]] = {}
        exit_sym: dict[str, tuple[str, ...]] = {}
        for b in members:
            if len(exits[b]) == 1:
                exit_sym[b] = exits[b][0]
            elif exits[b]:
                e = self.fresh(b, "exit")
                out[e] = [Rule(e, beta) for beta in exits[b]]
                exit_sym[b] = (e,)
        for a in members:
            by_unit = {a}
            work = [a]
            while work:
                x = work.pop()
                for y in unit[x]:
                    if y not in by_unit:
                        by_unit.add(y)
                        work.append(y)
            q = {b: self.fresh(f"{a}_{b}", "rc") for b in members}
            rules_a: list[Rule] = []
            for b in members:
                if b not in exit_sym:
                    continue
                rules_a.append(Rule(a, (q[b],) + exit_sym[b]))
                if b in by_unit:
                    rules_a.extend(Rule(a, beta) for beta in exits[b])
            out[a] = rules_a
            for b in members:
                out[q[b]] = []
            for x, gamma, b in internal:
                out[q[b]].append(Rule(q[b], (q[x],) + gamma))
                if gamma and x in by_unit:
                    out[q[b]].append(Rule(q[b], gamma))
        return {k: _dedupe(v) for k, v in out.items()}


class _OverCap(Exception):
    """The hub construction exceeded its cap (the right-corner construction is used instead)."""


def _inline_right_end(by_lhs: dict[str, list[Rule]], y: str, x: str, total: int, cap: int) -> int:
    """Replace every rule ``y -> γ x`` by ``y -> γ δ`` for each rule ``x -> δ``."""
    new: list[Rule] = []
    for r in by_lhs[y]:
        if r.rhs[-1] == x:
            new.extend(Rule(y, r.rhs[:-1] + d.rhs) for d in by_lhs[x])
        else:
            new.append(r)
        if total + len(new) - len(by_lhs[y]) > cap:
            raise _OverCap
    new = _dedupe([r for r in new if r.rhs != (y,)])
    total += len(new) - len(by_lhs[y])
    by_lhs[y] = new
    return total


def _feedback_vertices(members: list[str], graph: dict[str, set[str]]) -> set[str]:
    """A small set of vertices meeting every cycle of the component (greedy: self-loops first,
    then the vertex with the most in×out edges in each remaining cyclic component)."""
    hubs = {v for v in members if v in graph.get(v, ())}
    if len(members) == 1:
        return hubs  # a component of one member is one by its self-loop
    position = {v: i for i, v in enumerate(members)}
    while True:
        rest = [v for v in members if v not in hubs]
        rest_set = set(rest)
        sub = {v: graph.get(v, set()) & rest_set for v in rest}
        cyclic = [c for c in _sccs(rest, sub) if len(c) > 1]
        if not cyclic:
            return hubs
        for comp in cyclic:
            cs = set(comp)

            def score(v: str) -> tuple[int, int]:
                outd = len(sub[v] & cs)
                ind = sum(1 for u in comp if v in sub[u])
                return (ind * outd, -position[v])

            hubs.add(max(comp, key=score))


def _by_lhs(rules: list[Rule]) -> dict[str, list[Rule]]:
    d: dict[str, list[Rule]] = {}
    for r in rules:
        u = d.get(r.lhs)
        if u is None:
            d[r.lhs] = [r]
        else:
            u.append(r)
    return d


def _dedupe(rules: list[Rule]) -> list[Rule]:
    return list(dict.fromkeys(rules))


def _sccs(nodes: list[str], graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), over ``nodes`` and edges ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    # a node without edges is its own component, found as soon as it is visited: it is settled
    # on the spot (same order and numbering as the general step; most nodes of a grammar's
    # right-end graph are such sinks)
    for root in nodes:
        if root in index:
            continue
        succ = graph.get(root)
        if not succ:
            index[root] = low[root] = counter
            counter += 1
            out.append([root])
            continue
        work = [(root, iter(sorted(succ)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    succ = graph.get(w)
                    if not succ:
                        out.append([w])
                        continue
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                out.append(comp)
    return out


__all__ = ["NormalFormViolation", "check_normalized", "normalize"]
