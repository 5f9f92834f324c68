"""lark's ``common.lark`` terminals (the patterns lark itself compiles) behave as ``re`` says."""
from __future__ import annotations

import random
import re

import lark
import pytest

from glrmask.lexer import Lexer, Settler

COMMON = [
    "ESCAPED_STRING", "SIGNED_NUMBER", "NUMBER", "DECIMAL", "FLOAT", "INT", "SIGNED_INT", "WORD",
    "CNAME", "WS", "NEWLINE", "WS_INLINE", "SH_COMMENT", "CPP_COMMENT", "C_COMMENT",
    "SQL_COMMENT", "HEXDIGIT", "LETTER", "SIGNED_FLOAT",
]
ALPHABET = list('0123456789.eE+-"\\ab_ \t\n\r/*#xé中') + ["\\\\", '\\"', "12", "1.5e"]


def lark_pattern(name: str) -> str:
    parser = lark.Lark(f"%import common.{name}\nstart: {name}", parser="lalr")
    (term,) = [t for t in parser.terminals if t.name == name]
    return term.pattern.to_regexp()


@pytest.fixture(scope="module")
def common_lexer():
    return Lexer([(name, lark_pattern(name)) for name in COMMON])


def re_end(pattern: str, text: str) -> int | None:
    m = re.match(pattern, text)
    return None if m is None else len(text[: m.end()].encode())


def samples(rnd: random.Random, n: int) -> list[str]:
    return ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 12))) for _ in range(n)]


@pytest.mark.parametrize("name", COMMON)
def test_common_terminal_matches_like_re(common_lexer, name):
    rnd = random.Random(name)
    t = common_lexer.terminal_names.index(name)
    pattern = lark_pattern(name)
    texts = samples(rnd, 300) + ['"a\\"b"c"', '"\\\\"x"', "1.x", "1e5", "/* a */ */", "12.5e+3x"]
    for text in texts:
        s = Settler(common_lexer, t)
        data = text.encode()
        cut = rnd.randint(0, len(data))
        s.feed(data[:cut])
        early = s.outcome()
        s.feed(data[cut:])
        expected = re_end(pattern, text)
        if early.decided:
            assert early.end == expected, (text, cut)
        assert s.finish().end == expected, text


def test_escaped_string_stays_small_on_json_like_input(common_lexer):
    lx = Lexer([("ESCAPED_STRING", lark_pattern("ESCAPED_STRING"))])
    rnd = random.Random(0)
    for _ in range(200):
        body = "".join(rnd.choice(['a', ' ', '\\"', '\\\\', 'é', '中', '\\n', '😀']) for _ in range(20))
        lx.scan(lx.initial, f'"{body}" , "x"'.encode())
    assert lx.n_states < 50
