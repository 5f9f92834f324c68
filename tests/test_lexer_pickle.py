"""A lexer pickles (its program's typed arrays as they are; the native compile's class-id memos,
whose keys hold ``re``'s op constants, are left out) and the copy steps as the original does,
interning half-read characters (MID instructions) as the original would."""
from __future__ import annotations

import pickle

from glrmask.lexer import Lexer

TERMINALS = [("WORD", r"[a-zé]+"), ("KEY", '"(?:k|\\\\u006[Bb])ey"'), ("NUM", r"\d{1,3}(?![0-9])"),
             ("LB", r"xx+(?<=xx)\b")]
TEXTS = ["abc", "é", '"\\u006Bey"', "12", "1234", "xx ", "x", "中"]


def run(lx: Lexer, text: str) -> list:
    out = []
    state = lx.initial
    for byte in text.encode():
        state, events = lx.step(state, byte)
        out.append((state, events))
    return out


def test_an_unpickled_lexer_steps_as_the_original():
    lx = Lexer(TERMINALS)
    run(lx, TEXTS[0])  # some transitions memoized before pickling
    copy = pickle.loads(pickle.dumps(lx))
    assert [run(copy, t) for t in TEXTS] == [run(lx, t) for t in TEXTS]
    p, q = lx.prog, copy.prog
    assert (q.kind, q.a, q.b, q.c, q.d, q.targets) == (p.kind, p.a, p.b, p.c, p.d, p.targets)

