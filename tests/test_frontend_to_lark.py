"""Grammar.to_lark() must survive lark's escape processing, so lark can judge any IR grammar."""
from __future__ import annotations

import random
import re

from glrmask.grammar.ir import Grammar, Rule, TerminalDef

from _grammar_judge import judge

ATOMS = [
    r"\x41", r"\x2e", r"\x5d", r"\n", "\n", "\t", r"\\", r"\/", "/", r"\u00e9", r"\U0001F600",
    "a", ".", r"\d", r"\x5c", r"\x22", '"', "'", r"\'", '\\"', r"\\n", "[a-z]", r"[\x5d\x2d]",
    r"[^\n]", r"\-", "\\\n", "\x00", r"\x00", "(?i:a)", "(?x: a b)", "é",
]
TEXT_ALPHABET = 'aA.]-/\\"\n\t\x00é😀nx5\'#'


def _terminal_pattern_after_round_trip(t: TerminalDef) -> str:
    g = Grammar(rules=[Rule("start", (t.name,))], terminals={t.name: t}, start="start")
    (lark_terminal,) = judge(g.to_lark()).terminals
    return lark_terminal.pattern.to_regexp()


def test_random_regex_terminals_keep_their_matches():
    rng = random.Random(0)
    checked = 0
    while checked < 150:
        pattern = "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 4)))
        try:
            original = re.compile(pattern)
        except re.error:
            continue
        if original.match("") is not None:
            continue  # lark refuses zero-width terminals
        back = re.compile(_terminal_pattern_after_round_trip(TerminalDef("T", pattern)))
        for _ in range(30):
            s = "".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(0, 6)))
            m1, m2 = original.match(s), back.match(s)
            assert (m1 and m1.end()) == (m2 and m2.end()), (pattern, s)
        checked += 1


def test_literal_terminals_round_trip_exactly():
    rng = random.Random(1)
    for _ in range(100):
        literal = "".join(rng.choice('\\"\'xun0a\n /\té😀') for _ in range(rng.randint(1, 6)))
        t = TerminalDef("T", re.escape(literal), literal)
        g = Grammar(rules=[Rule("start", ("T",))], terminals={"T": t}, start="start")
        (lark_terminal,) = judge(g.to_lark()).terminals
        assert lark_terminal.pattern.value == literal


def test_empty_rule_renders_as_empty_alternative():
    g = Grammar(
        rules=[Rule("start", ()), Rule("start", ("A",))],
        terminals={"A": TerminalDef("A", "a", "a")},
        start="start",
    )
    parser = judge(g.to_lark())
    parser.parse("")
    parser.parse("a")
