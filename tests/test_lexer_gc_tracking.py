"""A lexer's compiled program gives the cyclic garbage collector nothing to walk per instruction:
the instructions are typed arrays, not lists of ints, and the process-wide cache of compiled
terminals keeps them as bytes. A large JSON Schema's program is a hundred thousand instructions
that live as long as its lexer; as lists, every full collection of a serving process walked each
of their slots.

What is counted: the references held by the *tracked* objects reachable from a value (what a full
collection traverses), after a collection, not descending into modules, classes and functions,
nor into the character classes (``ByteClass``), which are interned process-wide and shared by
every program (their memos grow with whatever any lexer of the process has read)."""
from __future__ import annotations


from _gc_support import tracked_references as _tracked_references
from glrmask.lexer import Lexer
from glrmask.lexer import program as program_module
from glrmask.lexer.charsets import ByteClass


def tracked_references(root: object) -> int:
    """References the collector walks from ``root`` (character classes are shared by programs)."""
    return _tracked_references(root, (ByteClass,))


def _lexer(n: int) -> Lexer:
    """One terminal of about ``2n`` instructions: a string of up to ``n`` escaped characters."""
    return Lexer([("S", f'"(?:[^"\\\\]|\\\\["\\\\/bfnrt]){{0,{n}}}"')])


def test_a_lexer_program_adds_no_tracked_references_per_instruction():
    small, large = _lexer(10), _lexer(4000)
    assert len(large.prog.kind) > 100 * len(small.prog.kind)
    assert tracked_references(large.prog) == tracked_references(small.prog)


def test_half_read_characters_made_while_lexing_add_no_tracked_references():
    small, large = _lexer(10), _lexer(4000)
    before = tracked_references(large.prog)
    state = large.initial
    for byte in '"é€😀ab'.encode():  # multibyte characters intern MID instructions
        state, _ = large.step(state, byte)
    assert state != large.DEAD
    assert tracked_references(large.prog) == before == tracked_references(small.prog)


def test_cached_terminals_add_no_tracked_references_per_instruction():
    program_module.clear_terminal_cache()
    _lexer(10)
    small = tracked_references(program_module._TERMINAL_CACHE)
    program_module.clear_terminal_cache()
    _lexer(4000)
    assert tracked_references(program_module._TERMINAL_CACHE) == small
