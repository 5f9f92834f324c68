"""The lookahead-collision check: a pair is reported exactly when masks can lead into a dead end.

Each true positive below is a grammar whose masks really allow bytes after which nothing completes;
each false positive is an ordinary lookahead (a keyword boundary, a greedy run, a line comment)
that the masks settle at once and that must not be reported.
"""
from __future__ import annotations

import numpy as np
import pytest

import glrmask
from glrmask.collisions import find_lookahead_collisions
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.lexer import Lexer

from conftest import byte_vocab


def collisions(source: str, **limits) -> list[str]:
    grammar = normalize(load_grammar(source, format="lark"))
    lexer = Lexer([(t.name, t.pattern) for t in grammar.terminals.values()])
    return find_lookahead_collisions(grammar, lexer, **limits)


# -- true positives --------------------------------------------------------------------------------

def test_greedy_run_before_its_own_letter_is_reported():
    """``re.match`` takes every ``a`` into A, so no text is A then B: the language is empty."""
    (w,) = collisions('start: A B\nA: /a+/\nB: "a"')
    assert "A" in w and "B" in w and "lead nowhere" in w


def test_boundary_that_no_follower_can_pass_is_reported():
    """A number may not touch a letter, and a word must follow it with nothing in between."""
    (w,) = collisions("start: NUM WORD\nNUM: /[0-9]+(?![a-z])/\nWORD: /[a-z]+/")
    assert "NUM" in w and "WORD" in w


def test_follower_whose_next_byte_undoes_the_match_is_reported():
    """After ``x`` then ``a``, B needs ``b``, which makes ``x`` not an X (its lookahead fails)."""
    (w,) = collisions('start: X B\nX: /x(?!ab)/\nB: "ab"')
    assert "X followed by B" in w and "b'a'" in w


CASELESS = '''start: KW NAME
KW: /and(?![a-z])/i
NAME: /[a-z]+/i
%ignore " "
'''


def test_caseless_keyword_before_a_caseless_name_is_reported():
    """Under ``re.I`` the dotless ``ı`` is a letter: its first UTF-8 byte keeps ``and`` undecided
    while the name has started, and the second byte ends the keyword's match."""
    (w,) = collisions(CASELESS)
    assert "KW followed by NAME" in w and r"b'\xc4'" in w


NEWLINE_TOKENS = r'''start: stmt (NL stmt)*
stmt: NAME "=" NAME
NL: "\n"
NAME: /[a-z]+/
COMMENT: /#[^\n]*/
%ignore COMMENT
%ignore " "
'''


def test_comment_where_no_newline_may_follow_is_reported():
    """A comment ends only at a newline, and after ``=`` only a name may come: ``x = #c`` can never
    be completed, yet the masks allow the comment."""
    (w,) = collisions(NEWLINE_TOKENS)
    assert "every match COMMENT can still make" in w
    assert "where only EQUAL" in w and "(and 1 more such places)" in w  # after NAME, after "="


def test_the_comment_dead_end_is_real():
    mask = glrmask.compile(NEWLINE_TOKENS, byte_vocab(), mode="dynamic")
    state = mask.start()
    assert state.commit_bytes(b"x = #c")
    assert not state.fork().commit_bytes(b"\n") and not state.is_accepting()


def test_a_reported_collision_is_a_real_dead_end():
    mask = glrmask.compile(CASELESS, byte_vocab(), mode="dynamic")
    state = mask.start()
    assert state.commit_bytes(b"and\xc4")  # allowed: every component can still go on
    assert not np.any(mask.get_mask(state)) and not state.is_accepting()


# -- false positives -------------------------------------------------------------------------------

@pytest.mark.parametrize("grammar", [
    # a keyword boundary before a name: the keyword's match fails at once, the text is one name
    'start: KW NAME\nKW: /and(?![a-z])/\nNAME: /[a-z]+/\n%ignore " "',
    # the standard line-comment idiom
    'start: pair*\npair: KEY "=" KEY\nKEY: /[a-z]+/\nCOMMENT: /#[^\\n]*/\n%ignore COMMENT\n'
    '%ignore /[ \\t\\n]+/',
    # a greedy number before an operator
    'start: NUM ("+" NUM)*\nNUM: /[0-9]+/',
    # a number that may not touch a letter, with whitespace allowed in between
    "start: NUM WORD\nNUM: /[0-9]+(?![a-z])/\nWORD: /[a-z]+/\n%ignore / +/",
    # a lazy quantifier ended by its follower
    'start: A B\nA: /a+?/\nB: "b"',
    # a comment that is a token of its own, in a run of newlines and comments
    'start: (pair _nl)*\n_nl: (NL | COMMENT)+\npair: KEY "=" KEY\nNL: "\\n"\nKEY: /[a-z]+/\n'
    'COMMENT: /#[^\\n]*/',
    # a value running to the end of the line, where a newline may (but need not) follow
    'start: entry*\nentry: KEY "=" VALUE NL?\nNL: "\\n"\nKEY: /[a-z]+/\nVALUE: /[^\\n=]+/',
], ids=["keyword-name", "line-comment", "greedy-number", "boundary-with-space", "lazy", "comment-token",
        "optional-newline"])
def test_ordinary_lookaheads_are_not_reported(grammar):
    assert collisions(grammar) == []


def test_shipped_grammars_have_no_collisions():
    """The shipped grammars are collision-free (SQL's keyword guards are case-sensitive ASCII
    lookaheads, so the ``ı``/``İ`` case fold of ``/i`` cannot undo a keyword)."""
    for name in ("json", "arithmetic", "csv", "tinylang", "sql"):
        assert collisions(f"grammars/{name}.lark") == [], name


# -- the budget -------------------------------------------------------------------------------------

def test_a_check_past_its_step_budget_says_which_terminals_it_did_not_reach():
    """Lookaround terminals go first, long patterns last: the counted string is what is left."""
    grammar = 'start: NUM LONG\nNUM: /[0-9]+(?![0-9])/\nLONG: /"[a-z]{0,300}"/'
    *found, stopped = collisions(grammar, max_steps=100)
    assert "stopped at its budget (100 lexer steps)" in stopped and stopped.endswith("not checked: LONG")


def test_a_check_within_its_budget_reports_nothing_about_it():
    assert collisions('start: NUM LONG\nNUM: /[0-9]+(?![0-9])/\nLONG: /"[a-z]{0,300}"/') == []
