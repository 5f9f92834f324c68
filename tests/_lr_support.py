"""Shared helpers for the normalization / LR / GLR tests: a compact BNF reader, a random sentence
generator, near-miss mutations and lark Earley as the independent judge.

Compact BNF: one ``lhs: alt | alt`` per line, ``#`` comments, UPPERCASE names are terminals, an empty
alternative is ε. Each terminal ``NAME`` is a literal rendered as ``name;`` — a prefix-free code, so a
terminal sequence lexes unambiguously when the samples are concatenated.
"""
from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path

import lark
import pytest

from _maskbench import MASKBENCH, first_schemas
from glrmask.grammar.ir import Grammar, Rule, TerminalDef

DATA = Path(__file__).resolve().parent / "data"

#: the sparse rows of an :class:`~glrmask.lr.LRTable`, what two builds must agree on
SPARSE = ("act_ptr", "act_term", "act_shift", "act_roff", "reduce_rules", "goto_ptr", "goto_nt", "goto_tgt")


def sample(term: str) -> str:
    return term.lower() + ";"


def bnf(text: str, start: str | None = None, terminals: tuple[str, ...] = ()) -> Grammar:
    """Build IR from compact BNF; ``terminals`` adds terminals that no rule uses."""
    rules: list[Rule] = []
    terms: dict[str, TerminalDef] = {}

    def term(name: str) -> None:
        terms.setdefault(name, TerminalDef(name, re.escape(sample(name)), sample(name)))

    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        lhs, alts = line.split(":", 1)
        for alt in alts.split("|"):
            syms = tuple(alt.split())
            for s in syms:
                if s.isupper():
                    term(s)
            rules.append(Rule(lhs.strip(), syms))
    for t in terminals:
        term(t)
    return Grammar(rules, terms, start or rules[0].lhs)


def bnf_file(name: str, start: str | None = None) -> Grammar:
    return bnf((DATA / name).read_text(), start)


def lark_judge(grammar: Grammar):
    """A function ``terminal names -> bool`` deciding membership with lark Earley."""
    parser = lark.Lark(
        grammar.to_lark(), start=grammar.start, parser="earley", lexer="dynamic", regex=False
    )

    @lru_cache(maxsize=None)
    def accepts(seq: tuple[str, ...]) -> bool:
        try:
            parser.parse("".join(sample(t) for t in seq))
            return True
        except lark.exceptions.LarkError:
            return False

    return lambda seq: accepts(tuple(seq))


def random_sentence(grammar: Grammar, rng: random.Random, max_depth: int = 8,
                    max_len: int = 40) -> list[str] | None:
    """A random terminal sequence derived from the start symbol, preferring short alternatives
    once ``max_depth`` is reached; None if it grows past ``max_len``."""
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in grammar.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    height = _min_heights(grammar)
    out: list[str] = []

    def expand(sym: str, depth: int) -> bool:
        if grammar.is_terminal(sym):
            out.append(sym)
            return len(out) <= max_len
        alts = [a for a in by_lhs.get(sym, ()) if all(s in height for s in a)]
        if not alts:
            return False
        if depth >= max_depth:
            best = min(max((height[s] for s in a), default=0) for a in alts)
            alts = [a for a in alts if max((height[s] for s in a), default=0) == best]
        for s in rng.choice(alts):
            if not expand(s, depth + 1):
                return False
        return True

    return out if expand(grammar.start, 0) else None


def _min_heights(grammar: Grammar) -> dict[str, int]:
    h: dict[str, int] = {t: 0 for t in grammar.terminals}
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            if all(s in h for s in r.rhs):
                v = 1 + max((h[s] for s in r.rhs), default=0)
                if v < h.get(r.lhs, 1 << 30):
                    h[r.lhs] = v
                    changed = True
    return h


def mutations(seq: list[str], terminals: list[str], rng: random.Random, n: int = 3) -> list[list[str]]:
    """Near misses: drop, insert or swap a terminal."""
    out = []
    for _ in range(n):
        s = list(seq)
        kind = rng.randrange(3)
        if kind == 0 and s:
            del s[rng.randrange(len(s))]
        elif (kind == 1 or not s) and terminals:
            s.insert(rng.randrange(len(s) + 1), rng.choice(terminals))
        elif len(s) >= 2:
            i = rng.randrange(len(s) - 1)
            s[i], s[i + 1] = s[i + 1], s[i]
        out.append(s)
    return out


def sentences_and_near_misses(grammar: Grammar, seed: int, n: int = 40, max_depth: int = 8,
                              max_len: int = 40) -> list[list[str]]:
    rng = random.Random(seed)
    terms = sorted(grammar.terminals)
    out: list[list[str]] = [[]]
    for _ in range(n):
        s = random_sentence(grammar, rng, max_depth, max_len)
        if s is None:
            continue
        out.append(s)
        out.extend(mutations(s, terms, rng))
    uniq = list(dict.fromkeys(tuple(s) for s in out))
    return [list(s) for s in uniq]


# ---------------------------------------------------------------------------------------------
# the grammars every equivalence test runs on
# ---------------------------------------------------------------------------------------------
CORPUS: dict[str, str] = {
    "ambiguous_sum": "e: e PLUS e | A",
    "not_lalr": """
        s: A e C | A f D | B e D | B f C
        e: X Z
        f: X Z""",
    "right_recursive": "s: A s | B",
    "right_recursive_list": """
        s: LB items RB | LB RB
        items: item COMMA items | item
        item: N | s""",
    "indirect_right_recursion": """
        a: X b | Y
        b: Z a | W c
        c: V a | U""",
    "nullable_run": """
        s: b b b b b b b b X
        b: B |""",
    "nullable_mixed": """
        s: A o o B o o o o C o
        o: p | q
        p: P |
        q: Q q |""",
    "start_nullable": "s: A s |",
    "start_nullable_via_children": """
        s: b c
        b: B |
        c: C |""",
    "only_empty_string": "s: b b\nb:",
    "unit_cycles": """
        s: a | X
        a: b | Y
        b: s | Z | b""",
    "self_unit_and_epsilon": "s: s | A |",
    "hidden_left_recursion": """
        s: b s A | X
        b: B |""",
    "hidden_right_recursion": """
        s: A s b | X
        b: B |""",
    "palindromes": "p: A p A | B p B | A | B |",
    "dangling_else": """
        stmt: IF E THEN stmt | IF E THEN stmt ELSE stmt | OTHER""",
    "expressions": """
        expr: expr PLUS term | expr MINUS term | term
        term: term STAR factor | factor
        factor: MINUS factor | LP expr RP | NUM | NUM POW factor""",
    "json_like": """
        value: object | array | STR | NUM | TRUE
        object: LB RB | LB members RB
        members: pair | pair COMMA members
        pair: STR COLON value
        array: LK RK | LK elements RK
        elements: value | elements COMMA value""",
    "reduce_reduce": """
        s: a X | b X | a Y
        a: A Z
        b: A Z""",
    "unreachable_and_unproductive": """
        s: A t | B
        t: C | t D | u
        u: u E
        dead: A""",
}


def corpus_grammar(name: str) -> Grammar:
    return bnf(CORPUS[name])


# ---------------------------------------------------------------------------------------------
# JSONSchemaBench schemas as LR grammars (the largest real builds)
# ---------------------------------------------------------------------------------------------
needs_maskbench = pytest.mark.skipif(not MASKBENCH.is_dir(), reason="JSONSchemaBench data (../shared) missing")


@lru_cache(maxsize=None)
def maskbench_sample(per_split: int) -> list[tuple[str, object]]:
    """``("Split[i]", schema)`` for the first ``per_split`` schemas of every split, read once per
    test session (the LR tests of several modules replay the same sample)."""
    return list(first_schemas(per_split))


def schema_grammar(schema) -> Grammar:
    """The normalized grammar a JSON Schema lowers to (every schema of the samples lowers: a
    refusal fails the calling test)."""
    from glrmask.grammar.normalize import normalize
    from glrmask.json_schema import lower_json_schema_ir

    return normalize(lower_json_schema_ir(schema)[0])


# ---------------------------------------------------------------------------------------------
# an independent Earley recognizer (handles ε) for viable-prefix questions
# ---------------------------------------------------------------------------------------------
class Earley:
    """Textbook Earley over terminal names, with the nullable-advance fix for ε-rules. After a
    prefix, ``expected()`` is the set of terminals that extend it to a prefix of some sentence
    (exact once unproductive rules are dropped), plus ``END`` when the prefix is a sentence."""

    END = "$END"

    def __init__(self, grammar: Grammar) -> None:
        h = _min_heights(grammar)
        self.rules = [r for r in grammar.rules if all(s in h for s in r.rhs)]
        self.start = grammar.start
        self.terms = grammar.terminals
        self.by_lhs: dict[str, list[int]] = {}
        for i, r in enumerate(self.rules):
            self.by_lhs.setdefault(r.lhs, []).append(i)
        nullable: set[str] = set()
        changed = True
        while changed:
            changed = False
            for r in self.rules:
                if r.lhs not in nullable and all(s in nullable for s in r.rhs):
                    nullable.add(r.lhs)
                    changed = True
        self.nullable = nullable

    def _close(self, items: set, chart: list[set], i: int) -> set:
        work = list(items)
        while work:
            r, d, o = work.pop()
            rhs = self.rules[r].rhs
            if d == len(rhs):
                lhs = self.rules[r].lhs
                src = chart[o] if o < i else items
                for r2, d2, o2 in list(src):
                    rhs2 = self.rules[r2].rhs
                    if d2 < len(rhs2) and rhs2[d2] == lhs:
                        it = (r2, d2 + 1, o2)
                        if it not in items:
                            items.add(it)
                            work.append(it)
                continue
            sym = rhs[d]
            if sym in self.terms:
                continue
            new = [(r2, 0, i) for r2 in self.by_lhs.get(sym, ())]
            if sym in self.nullable:
                new.append((r, d + 1, o))
            for it in new:
                if it not in items:
                    items.add(it)
                    work.append(it)
        return items

    def chart(self, seq: list[str]) -> list[set]:
        chart: list[set] = []
        cur = {(r, 0, 0) for r in self.by_lhs.get(self.start, ())}
        chart.append(self._close(cur, chart, 0))
        for i, t in enumerate(seq, 1):
            nxt = {
                (r, d + 1, o)
                for r, d, o in chart[-1]
                if d < len(self.rules[r].rhs) and self.rules[r].rhs[d] == t
            }
            chart.append(self._close(nxt, chart, i))
        return chart

    def expected(self, seq: list[str]) -> set[str]:
        last = self.chart(seq)[-1]
        out = set()
        for r, d, o in last:
            rhs = self.rules[r].rhs
            if d < len(rhs) and rhs[d] in self.terms:
                out.add(rhs[d])
            if d == len(rhs) and o == 0 and self.rules[r].lhs == self.start:
                out.add(self.END)
        return out


def earley_accepts(earley: Earley, seq: list[str]) -> bool:
    return Earley.END in earley.expected(seq)
