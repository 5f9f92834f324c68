"""Small test grammars covering the hard cases of DESIGN §2, each with a tiny vocabulary whose
pieces span terminal boundaries, and an alphabet for brute-force oracles."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    grammar: str
    pieces: tuple[str | bytes, ...]
    alphabet: bytes  # documentation of the bytes that matter; the oracle uses the pieces' bytes
    oracle_len: int = 6
    slack: int = 3  # every valid prefix completes within this many more bytes (0: no oracle)


CASES = [
    Case("ambiguous_expr", 'start: e\ne: e "+" e | e "*" e | "(" e ")" | /[0-9]/',
         ("1", "2", "+", "*", "(", ")", "1+", "+2", ")*", "(1", "1)"), b"1+*()", 6, 3),
    Case("non_lalr", 'start: "a" e "c" | "a" f "d" | "b" e "d" | "b" f "c"\ne: "x"\nf: "x"',
         ("a", "b", "x", "c", "d", "ax", "xc", "bxd"), b"abxcd", 4, 3),
    Case("right_recursive", 'start: item\nitem: "a" item | "b" | "a" "," item',
         ("a", "b", ",", "a,", "ab", "aa"), b"ab,", 6, 2),
    Case("nullable_heavy", 'start: x x x x "!"\nx: "a"?  | "b"',
         ("a", "b", "!", "ab", "a!", "ba"), b"ab!", 6, 1),
    Case("keywords_vs_names", 'start: stmt+\nstmt: "if" NAME | NAME "=" NAME\nNAME: /[a-z]+/\n%ignore " "',
         ("if", "i", "f", " ", "=", "x", "if ", "x=", "fi"), b"if =x", 6, 3),
    Case("lazy_quantifier", 'start: A B\nA: /x.*?y/\nB: /[a-z]+/', ("x", "y", "a", "xy", "ya", "xay"), b"xya", 5, 2),
    Case("trailing_lookahead", 'start: A B?\nA: /a+(?!b)/\nB: "ab"', ("a", "b", "aa", "ab", "ba"), b"ab", 6, 2),
    Case("number_list", 'start: "[" [NUMBER ("," NUMBER)*] "]"\nNUMBER: /-?[0-9]+(\\.[0-9]+)?/',
         ("[", "]", "1", ".", "-", ",", "1.", ".5", "1,", "[1", "2]"), b"[]1.,-", 7, 3),
    Case("escaped_string", 'start: STRING\n%import common.ESCAPED_STRING -> STRING',
         ('"', "\\", "a", '\\"', '"a', 'a"', '\\\\'), b'"\\a', 6, 2),
    Case("unicode_class", 'start: W+\nW: /[é-ü]+/ | "x"', ("é", "ü", "x", b"\xc3", b"\xa9", "éx"), "éüx".encode(), 6, 2),
    Case("ignore_ws", 'start: "(" NAME ")"\nNAME: /[a-z]+/\n%ignore /[ ]+/', ("(", ")", " ", "a", "b", " a", "( "),
         b"( )ab", 6, 3),
    Case("case_insensitive", 'start: "select"i NAME\nNAME: /[a-z]+(?![a-z])/\n%ignore " "',
         ("sel", "SEL", "ect", "ECT", " ", "x", "select "), b"sEelct x", 0, 0),
]

CASE_BY_NAME = {c.name: c for c in CASES}
