"""Byte-level lexer reproducing ``re.match`` per terminal, with delayed decisions (DESIGN §2, §4.3)."""
from .lexer import Lexer
from .reference import Outcome, Settler, match_end, settle

__all__ = ["Lexer", "Outcome", "Settler", "match_end", "settle"]
