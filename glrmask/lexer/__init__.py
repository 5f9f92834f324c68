"""Byte-level lexer reproducing ``re.match`` per terminal, with delayed decisions (DESIGN §2, §4.3)."""
from .dfa import LexerDFA
from .lexer import Lexer
from .reference import Outcome, Settler, match_end, settle

__all__ = ["Lexer", "LexerDFA", "Outcome", "Settler", "match_end", "settle"]
