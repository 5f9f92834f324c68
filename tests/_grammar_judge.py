"""Shared helpers for the front-end tests: lark as the independent judge of a grammar's language."""
from __future__ import annotations

import random
from functools import lru_cache

from lark import Lark
from lark.exceptions import LarkError

from glrmask.grammar.ir import Grammar


def judge(lark_text: str, start: str = "start") -> Lark:
    """The reference parser of DESIGN §2: Earley with the dynamic lexer, ``re`` regexes."""
    return Lark(lark_text, parser="earley", lexer="dynamic", regex=False, start=start)


@lru_cache(maxsize=None)
def _cached_judge(lark_text: str, start: str) -> Lark:
    return judge(lark_text, start)


def judge_ir(g: Grammar) -> Lark:
    """Lark parser for an IR grammar, via ``Grammar.to_lark()``."""
    return _cached_judge(g.to_lark(), g.start)


def accepts(parser: Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except LarkError:
        return False
    return True


def mutations(text: str, n: int, seed: int) -> list[str]:
    """``n`` near-misses of ``text``: one character deleted, inserted, replaced, or a truncation."""
    rng = random.Random(seed)
    alphabet = sorted(set(text)) or ["a"]
    out: list[str] = []
    for _ in range(n):
        i = rng.randrange(len(text) + 1)
        kind = rng.randrange(4)
        if kind == 0 and i < len(text):
            out.append(text[:i] + text[i + 1:])
        elif kind == 1:
            out.append(text[:i] + rng.choice(alphabet) + text[i:])
        elif kind == 2 and i < len(text):
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1:])
        else:
            out.append(text[:i])
    return out


def random_strings(alphabet: str, n: int, max_len: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len))) for _ in range(n)]
