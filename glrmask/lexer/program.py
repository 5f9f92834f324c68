"""Python ``re`` patterns -> one byte-level NFA program with ordered (priority) epsilon edges.

Why a custom compiler: the lexer must reproduce ``re.match``'s leftmost-first answer, byte by
byte, across token boundaries. Patterns are parsed with Python's own parser (``re._parser``), so
the accepted syntax and flag scoping are exactly Python's; every supported node is compiled to
instructions whose epsilon-successor order is ``re``'s backtracking order.

Instructions (``Program.kind[pc]``, operands ``Program.a[pc]`` .. ``Program.d[pc]``; an operand
an instruction does not have is 0, flags are 0 or 1):

* ``CHAR(cls, next)`` consumes one character of a code point set (a :class:`ByteClass`);
  ``MID(cls, cstate, next)`` is the same character half read (interned lazily).
* ``SPLIT(first, count)`` ordered alternatives: the pcs ``Program.targets[first:first + count]``;
  ``ACCEPT`` the terminal's match end; ``SUBACCEPT`` the end of a lookaround body.
* ``LOOK(look, positive, next)`` a lookahead (its body runs as a condition on the bytes that
  follow; the body may itself contain lookaheads, and lookbehinds / ``\\b`` that stay inside
  the text read since the lexeme start); ``LB(slot, positive, next)`` a lookbehind, answered by
  the terminal's tracker ``slot`` (lookbehind bodies contain no assertions);
  ``BOUND(slot, look, is_boundary, next)`` ``\\b``/``\\B``: the tracker says whether the previous
  character is a word character, which turns the boundary into a lookahead on the next one.
* ``REP_ENTER(rep, next)`` / ``REP_CHECK(rep, body, exit, greedy)`` bracket the optional
  iterations of a repeat. They reproduce sre's zero-width-iteration rule: an optional iteration
  that consumed nothing is not followed by another one; the repeat's tail is taken instead.
  The closure tracks "iteration of ``rep`` started at this position" as a path flag.

Storage: each field is one typed array (``array('B')`` for the kinds, ``array('i')`` for the
operands and the SPLIT targets), not a list of ints. A large schema's program is a hundred
thousand instructions that live as long as its lexer; as lists, every full collection of the
cyclic garbage collector walked each of their half a million slots (the collector does not track
an array's items, there are none to walk), and copying a block is a ``memcpy``, not an object per
slot.

Construction speed (a new JSON Schema's lexer is on the path to its first mask): the program
is always exactly what compiling every node of every parse tree would build, but work is
reused where the result is provably the same — a counted repeat's body is compiled once and
copied (:class:`_Block`), a terminal seen before in this process is copied from
:data:`_TERMINAL_CACHE`, a large top-level lookahead seen before (the lowering's key guards)
from :data:`_SEGMENT_CACHE`; patterns of the lowering's regex subset are parsed by a quick
parser that builds ``re``'s own tree, and the hot paths run in C (``glrmask_ext.lexer_compile``:
the compile loop with its repeats, block copies, per-terminal byte partitions, and
:meth:`Program.advance` for the lexer's steps). The Python versions remain, as the fallback and
as the reference the tests compare with: ``Program(copy_blocks=False)`` for the compile,
:func:`_byte_partition` for the partitions, ``_python_advance`` for the steps.
"""
from __future__ import annotations

import re
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import numpy as np

from glrmask.budget import current_budget
from glrmask.errors import GrammarTooComplex, RegexError

from . import charsets
from .charsets import DEAD as CLS_DEAD, FINAL as CLS_FINAL, ByteClass

CHAR, MID, SPLIT, ACCEPT, SUBACCEPT, LOOK, LB, BOUND, REP_ENTER, REP_CHECK = range(10)
WAITING = (CHAR, MID)

_AT_NAMES = {
    C.AT_BEGINNING: "'^' anchor",
    C.AT_BEGINNING_LINE: "'^' anchor",
    C.AT_BEGINNING_STRING: "'\\A' anchor",
    C.AT_END: "'$' anchor",
    C.AT_END_LINE: "'$' anchor",
    C.AT_END_STRING: "'\\Z' anchor",
}
_SINGLE_CHAR_OPS = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)
_CLASS_FLAGS = charsets.FLAG_IGNORECASE | charsets.FLAG_DOTALL | charsets.FLAG_ASCII
"""The flags a single-character node's code point set depends on (:func:`charsets.node_set`)."""
MAX_LOOK_DEPTH = 32
"""Lookaheads nested deeper than this end in GrammarTooComplex (conditions recurse once per level
when they are stepped, interned and resolved)."""


@dataclass
class TerminalProgram:
    """What the lexer needs to know about one compiled terminal."""

    name: str
    pattern: str
    start: int
    tracker_starts: tuple[int, ...] = ()  # one per lookbehind slot (a tuple: not tracked)
    word_slots: dict[bool, tuple[int, int]] = field(default_factory=dict)  # ascii -> (slot, look)
    classes: tuple[int, ...] = ()
    """The character classes (``Program.classes`` ids) of this terminal's instructions, its
    lookaround bodies included: the only ones its lane, atoms, trackers and conditions ever read."""


class Program:
    """All terminals' instructions in one array (pcs are global), plus lookahead bodies."""

    def __init__(self, max_nodes: int = 200_000, copy_blocks: bool = True):
        """``copy_blocks=False`` parses every pattern whole and compiles every terminal and
        every copy of a repeat's body from the parse tree, ignoring the process-wide caches
        (terminals, large lookaheads): the reference that the copies (:class:`_Block`) are
        tested against; the instructions are the same either way."""
        self.max_nodes = max_nodes
        self.copy_blocks = copy_blocks
        self.kind = array("B")
        self.a = array("i")
        self.b = array("i")
        self.c = array("i")
        self.d = array("i")
        self.targets = array("i")  # every SPLIT's alternatives, in the order SPLITs were made
        self.classes: list[ByteClass] = []
        self._class_ids: dict[int, int] = {}
        self._mid_ids: dict[tuple[int, int, int], int] = {}
        self.look_starts: list[int] = []  # look id -> pc of its body's start
        self.n_reps = 0
        self._budget_owner = "?"
        self._reach_lb: dict[int, bool] = {}
        self._advanced: dict[int, int] = {}  # pc << 8 | byte -> advance(pc, byte)
        # the native compile's class ids by node key (a node's class id depends on its key
        # alone), and of ASCII literals by (flag set, code point), -1 where not asked yet
        self._node_cids: dict[tuple, int] = {}
        self._ascii_cids = array("i", [-1]) * (8 * 128)
        # the quick parser's memo of group texts -> items, for the terminals parsed together
        # (glrmask_ext.lexer_compile.quick_parse): a schema's terminals spell the same groups
        self._group_items: dict[str, list] = {}

    def __getstate__(self) -> dict:
        """Pickled without the class-id memos of the native compile: their keys hold ``re``'s
        op constants, which do not unpickle, and they are only a cache (a program pickled
        mid-compile is not a use case; one unpickled compiles its next terminals with fresh
        memos, to the same ids)."""
        state = self.__dict__.copy()
        state["_node_cids"] = {}
        state["_ascii_cids"] = array("i", [-1]) * (8 * 128)
        state["_group_items"] = {}
        return state

    def drop_compile_memos(self) -> None:
        """Forget what was kept to compile terminals faster — the parse trees of groups, the
        class ids by node key (the lexer calls it once all of its terminals are compiled: a
        long-lived program should hold nothing the cyclic collector walks). A terminal added
        later compiles with fresh memos, to the same instructions."""
        self._group_items = {}
        self._node_cids = {}
        self._ascii_cids = array("i", [-1]) * (8 * 128)

    # -- node construction -------------------------------------------------------------------
    def _new(self, kind: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
        if len(self.kind) >= self.max_nodes:
            raise self._nodes_error()
        if not len(self.kind) & 1023:
            current_budget().check(f"lexer NFA (terminal {self._budget_owner})")
        self.kind.append(kind)
        self.a.append(a)
        self.b.append(b)
        self.c.append(c)
        self.d.append(d)
        return len(self.kind) - 1

    def _split(self, targets) -> int:
        """A SPLIT over ``targets`` (pcs, in priority order), charged as :meth:`_new` charges."""
        first = len(self.targets)
        pc = self._new(SPLIT, first, len(targets))
        self.targets.extend(targets)
        return pc

    def split_targets(self, pc: int) -> array:
        """The alternatives of SPLIT ``pc``, highest priority first."""
        first = self.a[pc]
        return self.targets[first:first + self.b[pc]]

    def _class_id(self, cps: charsets.Intervals) -> int:
        return self._class_id_of(charsets.byte_class(cps))

    # -- bytes that no instruction tells apart ----------------------------------------------
    def byte_groups(self, classes=None) -> tuple[tuple[int, ...], ...]:
        """A partition of the 256 byte values such that every instruction — hence every lexer
        state, lookaround and condition — steps identically on the bytes of one group
        (``classes``: only instructions over these class ids, e.g. one terminal's
        :attr:`TerminalProgram.classes`; default all). The lexer reads bytes only through
        :meth:`advance`, i.e. through each character class's UTF-8 automaton, so two bytes are
        alike when every class gives the same answer for them in every class state:

        * ASCII bytes finish a character or die from the start state (by membership) and die in
          every mid-character state: alike when every class agrees on membership;
        * lead bytes of multibyte characters (and the bytes that never occur in UTF-8) die in
          mid-character states: alike when every class goes to the same state from the start;
        * continuation bytes die from the start state and are told apart by their payload bits
          in mid-character states: alike when every class steps them to the same state from each
          of its mid-character states (:meth:`ByteClass.continuation_keys`; ``[^"]`` does not
          tell any two apart) — and when no class holds a non-ASCII code point, every byte above
          0x7F dies everywhere.

        Groups are ordered by their smallest byte (the representative, listed first), so a walk
        over the representatives meets successor states in the order a walk over all 256 bytes
        would. Exploring a state then costs one step per group instead of 256: two for
        ``/a{100000}/``.

        The answer depends only on the set of classes, hence a cache shared by all programs
        (keyed by the classes' ids; an entry keeps its classes alive, so no id is reused)."""
        return self._partition(classes).groups

    def byte_partition(self, classes=None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """:meth:`byte_groups` as ``(group of each byte, representative of each group)``
        (shared by every caller with the same classes)."""
        part = self._partition(classes)
        return part.group_of, part.representatives

    def _partition(self, classes) -> "_Partition":
        classes = self.classes if classes is None else [self.classes[c] for c in classes]
        key = frozenset(map(id, classes))
        hit = _BYTE_GROUPS.get(key)
        if hit is None:
            hit = _Partition(classes)
            if len(_BYTE_GROUPS) >= _BYTE_GROUPS_MAX:
                _BYTE_GROUPS.clear()
            _BYTE_GROUPS[key] = hit
        return hit


    # -- byte stepping of waiting instructions ----------------------------------------------
    def advance(self, pc: int, byte: int) -> int:
        """Feed one byte to a CHAR/MID instruction: -1 (dies), the pc after the character, or a
        MID pc (character not finished). Does not follow epsilon edges. Memoized: the lexer asks
        the same (pc, byte) for every lane, atom and condition holding the pc."""
        key = pc << 8 | byte
        hit = self._advanced.get(key)
        if hit is None:
            hit = self._advanced[key] = self._advance(pc, byte)
        return hit

    def _advance(self, pc: int, byte: int) -> int:
        k = self.kind[pc]
        if k == CHAR:
            cls, cstate, nxt = self.a[pc], 0, self.b[pc]
        else:
            cls, cstate, nxt = self.a[pc], self.b[pc], self.c[pc]
        r = self.classes[cls].step(cstate, byte)
        if r == CLS_DEAD:
            return -1
        if r == CLS_FINAL:
            return nxt
        key = (cls, r, nxt)
        mid = self._mid_ids.get(key)
        if mid is None:
            self.kind.append(MID)
            self.a.append(cls)
            self.b.append(r)
            self.c.append(nxt)
            self.d.append(0)
            mid = len(self.kind) - 1
            self._mid_ids[key] = mid
        return mid

    def after_char(self, pc: int) -> int:
        """The instruction a waiting pc continues with once its character is complete."""
        return self.b[pc] if self.kind[pc] == CHAR else self.c[pc]

    # -- plain reachability closure (lookaround bodies, trackers, nullability) ---------------
    def set_closure(self, pcs, assertions_pass: bool = False) -> tuple[frozenset[int], bool]:
        """Waiting pcs reachable by epsilon edges, and whether (SUB)ACCEPT is reachable.
        For assertion-free code (lookbehind bodies); ``assertions_pass`` treats assertions as
        true (the nullability check)."""
        out: set[int] = set()
        seen: set[int] = set()
        stack = list(pcs)
        accepted = False
        kind = self.kind
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            k = kind[pc]
            if k == CHAR or k == MID:
                out.add(pc)
            elif k == ACCEPT or k == SUBACCEPT:
                accepted = True
            elif k == SPLIT:
                stack.extend(self.split_targets(pc))
            elif k == REP_ENTER:
                stack.append(self.b[pc])
            elif k == REP_CHECK:
                stack.append(self.b[pc])
                stack.append(self.c[pc])
            elif assertions_pass and k in (LOOK, LB):
                stack.append(self.c[pc])
            elif assertions_pass and k == BOUND:
                stack.append(self.d[pc])
            else:  # pragma: no cover - lookbehind bodies are validated to contain no assertions
                raise AssertionError(f"assertion inside a lookbehind body at pc {pc}")
        return frozenset(out), accepted

    def reaches_lookbehind(self, pc: int) -> bool:
        """Whether some path from waiting pc ``pc`` meets an LB/BOUND instruction, also inside
        the bodies of lookaheads it meets (then the terminal's lookbehind trackers must be kept
        for the thread)."""
        if self.kind[pc] == MID:
            pc_key = self.c[pc]
        else:
            pc_key = self.b[pc] if self.kind[pc] == CHAR else pc
        hit = self._reach_lb.get(pc_key)
        if hit is None:
            hit = False
            seen: set[int] = set()
            stack = [pc_key]
            while stack:
                p = stack.pop()
                if p in seen:
                    continue
                seen.add(p)
                k = self.kind[p]
                if k in (LB, BOUND):
                    hit = True
                    break
                if k == CHAR:
                    stack.append(self.b[p])
                elif k == MID:
                    stack.append(self.c[p])
                elif k == SPLIT:
                    stack.extend(self.split_targets(p))
                elif k == REP_ENTER:
                    stack.append(self.b[p])
                elif k == REP_CHECK:
                    stack.extend((self.b[p], self.c[p]))
                elif k == LOOK:
                    stack.append(self.c[p])
                    stack.append(self.look_starts[self.a[p]])
            self._reach_lb[pc_key] = hit
        return hit

    # -- compilation ---------------------------------------------------------------------------
    def _nodes_error(self) -> GrammarTooComplex:
        return GrammarTooComplex(
            f"lexer NFA: terminal {self._budget_owner} needs more than {self.max_nodes} "
            "instructions (limit max_nfa_nodes); simplify its regex (large counted repeats?)"
        )

    def _class_id_of(self, bc: ByteClass) -> int:
        cid = self._class_ids.get(id(bc))
        if cid is None:
            cid = len(self.classes)
            self.classes.append(bc)
            self._class_ids[id(bc)] = cid
        return cid

    def add_terminal(self, name: str, pattern: str) -> TerminalProgram:
        """Parse, validate and compile one terminal; raises RegexError for unsupported input.

        A pattern compiled before (by any program of this process) is not parsed again: its
        instructions are copied from :data:`_TERMINAL_CACHE` with their pcs, lookahead ids,
        repeat ids and class ids relocated, which yields the very instructions a fresh compile
        would (JSON Schema grammars share most of their terminals: strings, numbers, keys)."""
        self._budget_owner = repr(name)
        cacheable = self.copy_blocks and isinstance(pattern, str)
        if cacheable:
            cached = _TERMINAL_CACHE.get(pattern)
            if cached is not None:
                return cached.instantiate(self, name, pattern)
        parsed, reads_behind = self._parse(name, pattern)
        term = TerminalProgram(name=name, pattern=pattern, start=-1)
        comp = _Compiler(self, term, track_mb=reads_behind)
        first_pc = len(self.kind)
        first_look = len(self.look_starts)
        first_rep = self.n_reps
        accept = self._new(ACCEPT)
        try:
            term.start = comp.seq(parsed.data, parsed.state.flags, accept, 0, None)
        except RecursionError:
            raise RegexError(f"terminal {name!r}: /{pattern}/ is nested too deeply") from None
        _, nullable = self.set_closure([term.start], assertions_pass=True)
        if nullable:
            raise RegexError(
                f"terminal {name!r}: /{pattern}/ can match the empty string (when its "
                "lookarounds hold); a terminal must consume at least one character"
            )
        # every instruction of the terminal (lookaround bodies and \b helpers included) is
        # created while it is compiled; MID instructions made later reuse these classes
        if cacheable and len(self.kind) - first_pc <= _TERMINAL_CACHE.max_instructions // 4:
            block = _Block.capture(self, first_pc, None, first_rep, first_look, True)
            term.classes = tuple(sorted(block.class_order))
            _TERMINAL_CACHE.put(pattern, _CachedTerminal(block, term))
        else:
            # (a terminal too large for the cache is a long counted repeat: millions of pcs)
            kinds = np.frombuffer(self.kind, dtype=np.uint8)[first_pc:]
            operands = np.frombuffer(self.a, dtype=np.intc)[first_pc:]
            term.classes = tuple(np.unique(operands[kinds == CHAR]).tolist())
        return term

    def _parse(self, name: str, pattern: str) -> tuple[sre_parse.SubPattern, bool]:
        """The pattern's parse tree, after the checks ``re`` itself makes: what ``re.compile``
        refuses is a RegexError, and so is a pattern ``re.match(p, '')`` accepts; and whether
        the tree may read behind (a lookbehind or ``\\b``: then widths matter to the compile).

        ``re.compile`` (a second parse, and sre code generation) runs only when its answer is
        not already known from the tree: when a lookbehind is present (the only construct whose
        errors sre raises after parsing: variable width, too far behind) or when the tree's
        minimum width is 0 (then whether ``''`` matches depends on the assertions). A tree
        whose every path consumes a character cannot match the empty string (a lookbehind, or
        ``\\b``, is detected by :func:`_shape` together with the width, in one walk)."""
        bad = (re.error, TypeError, ValueError, OverflowError, RecursionError)
        reads_behind = True
        if not isinstance(pattern, str):
            compiled = None
            try:
                compiled = re.compile(pattern)
                parsed = sre_parse.parse(pattern)
            except bad as e:
                raise RegexError(f"terminal {name!r}: invalid regex /{pattern}/: {e}") from None
        else:
            parsed = None
            if self.copy_blocks:
                if len(pattern) >= _MIN_SEGMENT:
                    parsed = _parse_by_segments(pattern, self._group_items)
                if parsed is None:
                    parsed = _quick_parse(pattern, self._group_items)
            if parsed is None:
                try:
                    parsed = sre_parse.parse(pattern)
                except bad as e:
                    raise RegexError(
                        f"terminal {name!r}: invalid regex /{pattern}/: {e}") from None
            try:
                shape = _native.shape if _native is not None and self.copy_blocks else _shape
                width, reads_behind = shape(parsed.data)
                settled = width > 0 and not reads_behind
            except RecursionError:
                settled = False
                reads_behind = True
            compiled = None
            if not settled:
                try:
                    compiled = re.compile(pattern)
                except bad as e:
                    raise RegexError(
                        f"terminal {name!r}: invalid regex /{pattern}/: {e}") from None
        if compiled is not None and compiled.match("") is not None:
            raise RegexError(
                f"terminal {name!r}: /{pattern}/ can match the empty string (re.match(p, '') "
                "succeeds); a terminal must consume at least one character"
            )
        return parsed, reads_behind



class _Block:
    """A contiguous run of compiled instructions, kept so that it can be appended again
    elsewhere: :meth:`stamp` appends a copy that is exactly what compiling its source again at
    the end of a program would append — pcs inside the run shifted, the one pc before it that
    the run continues with (its *continuation*) replaced, the repeat and lookahead ids it
    created renumbered, and (copies into another program) its classes interned.

    Why: a counted repeat ``X{0,80}`` is 80 copies of the same instructions, and the same
    terminal recurs across grammars; a copy costs a few list operations per instruction where
    compiling costs a walk over the parse tree. A run refers to nothing before it but its
    continuation: a compile only links what it creates, and the blocks taken are assertion-free
    repeat bodies (no lookahead bodies made elsewhere) or whole terminals."""

    __slots__ = ("kinds", "a", "b", "c", "d", "targets", "t0", "base", "cont", "rep0", "n_reps",
                 "look0", "looks", "chars", "splits", "reps", "looks_a", "looks_b", "pcs_c",
                 "class_order", "classes", "size")

    @classmethod
    def capture(cls, prog: Program, base: int, cont: int | None, rep0: int, look0: int,
                with_classes: bool) -> "_Block":
        """The instructions from ``base`` to the end of ``prog``, which continue with ``cont``
        (None: with nothing before them) and created the repeats from ``rep0`` and the
        lookaheads from ``look0`` on. ``with_classes``: remember the character classes (for
        copies into other programs)."""
        blk = cls()
        # bytes, not lists or arrays: a cached block is kept for long, and the collector tracks
        # neither its buffers nor anything in them
        blk.kinds = prog.kind[base:].tobytes()
        blk.a = prog.a[base:].tobytes()
        blk.b = prog.b[base:].tobytes()
        blk.c = prog.c[base:].tobytes()
        blk.d = prog.d[base:].tobytes()
        blk.base, blk.cont, blk.rep0, blk.look0 = base, cont, rep0, look0
        blk.n_reps = prog.n_reps - rep0
        blk.looks = tuple(prog.look_starts[look0:])
        blk.size = len(blk.kinds)
        if MID in blk.kinds:  # pragma: no cover - MIDs are made while lexing, never in a compile
            raise AssertionError("MID instruction inside a compiled block")
        # the indexes (uint32 bytes) of the CHARs, SPLITs, repeat instructions, LOOKs, BOUNDs
        # and of the instructions whose c is a pc (REP_CHECK, LOOK, LB), and the classes of the
        # CHARs in order of first use
        if _native is not None:  # in one pass in C
            (blk.chars, blk.splits, blk.reps, blk.looks_a, blk.looks_b, blk.pcs_c,
             class_order) = _native.block_indexes(blk.kinds, blk.a)
        else:
            by_kind: dict[int, list[int]] = {}
            for i, k in enumerate(blk.kinds):
                hit = by_kind.get(k)
                if hit is None:
                    by_kind[k] = [i]
                else:
                    hit.append(i)
            none: list[int] = []

            def indexes(*ks: int) -> bytes:
                return array("I", [i for k in ks for i in by_kind.get(k, none)]).tobytes()

            (blk.chars, blk.splits, blk.reps, blk.looks_a, blk.looks_b, blk.pcs_c) = (
                indexes(CHAR), indexes(SPLIT), indexes(REP_ENTER, REP_CHECK), indexes(LOOK),
                indexes(BOUND), indexes(REP_CHECK, LOOK, LB))
            a = prog.a
            class_order = tuple(dict.fromkeys([a[base + i] for i in by_kind.get(CHAR, none)]))
        # the block's SPLITs were made after every SPLIT before it: their targets are the end of
        # the pool, from its first SPLIT's on
        blk.t0 = prog.a[base + _uint32s(blk.splits)[0]] if blk.splits else len(prog.targets)
        blk.targets = prog.targets[blk.t0:].tobytes()
        if with_classes:
            blk.class_order = class_order
            blk.classes = tuple([prog.classes[c] for c in class_order])
        else:
            blk.class_order = blk.classes = None
        return blk

    def stamp(self, prog: Program, cont: int | None = None) -> int:
        """Append a copy continuing with ``cont``; returns the copy's first pc. The instruction
        budget is charged as ``_new`` charges it (same errors, same deadline checks)."""
        return self._stamp(prog, cont)[0]

    def _stamp(self, prog: Program, cont: int | None) -> tuple[int, list[int] | None]:
        """:meth:`stamp`, and the program's ids of the block's classes (None: no classes kept)."""
        base = len(prog.kind)
        end = base + self.size
        top = min(end, prog.max_nodes)
        if base < top and (base & 1023 == 0 or (top - 1) >> 10 > base >> 10):
            current_budget().check(f"lexer NFA (terminal {prog._budget_owner})")
        if end > prog.max_nodes:
            raise prog._nodes_error()
        delta = base - self.base
        pure = self.cont is None or cont - self.cont == delta  # every pc moves by delta
        class_map = ids = None
        if self.classes is not None:
            if _native is not None:
                ids = _native.class_ids(prog, self.classes)
            else:
                ids = [prog._class_id_of(bc) for bc in self.classes]
            if ids != list(self.class_order):
                class_map = array("i", bytes(4 * (max(self.class_order) + 1)))
                for old, new in zip(self.class_order, ids):
                    class_map[old] = new
        args = (self.kinds, self.a, self.b, self.c, self.d, self.targets, self.chars, self.reps,
                self.pcs_c, self.looks_a, self.looks_b, self.splits, delta, self.base,
                -1 if cont is None else cont, pure, prog.n_reps - self.rep0,
                len(prog.look_starts) - self.look0, len(prog.targets) - self.t0, class_map)
        if _native is not None:
            _native.stamp(prog.kind, prog.a, prog.b, prog.c, prog.d, prog.targets, *args)
        else:
            _stamp_python(prog, *args)
        if self.n_reps:
            prog.n_reps += self.n_reps
        if self.looks:
            prog.look_starts.extend([s + delta for s in self.looks])
        return base, ids


def _uint32s(raw: bytes) -> memoryview:
    """A block's index bytes as the uint32 values they hold."""
    return memoryview(raw).cast("I")


def _stamp_python(prog: Program, kinds: bytes, ba: bytes, bb: bytes, bc: bytes, bd: bytes,
                  bt: bytes, chars: bytes, reps: bytes, pcs_c: bytes, looks_a: bytes,
                  looks_b: bytes, splits: bytes, delta: int, lo: int, cont: int, pure: bool,
                  rep_shift: int, look_shift: int, target_shift: int, class_map) -> None:
    """:meth:`_Block.stamp`'s appending and relocation without the extension
    (``glrmask_ext.lexer_compile.stamp`` does the same in C)."""
    a, b, c, d, targets = (array("i", x) for x in (ba, bb, bc, bd, bt))

    def moved(v: int) -> int:
        return v + delta if pure or v >= lo else cont

    for i in _uint32s(chars):
        b[i] = moved(b[i])
        if class_map is not None:
            a[i] = class_map[a[i]]
    for i in _uint32s(reps):
        b[i] = moved(b[i])
        a[i] += rep_shift
    for i in _uint32s(pcs_c):
        c[i] = moved(c[i])
    for i in _uint32s(looks_a):
        a[i] += look_shift
    for i in _uint32s(looks_b):
        b[i] += look_shift
        d[i] = moved(d[i])
    for i in _uint32s(splits):
        a[i] += target_shift
    for j in range(len(targets)):
        targets[j] = moved(targets[j])
    prog.kind.frombytes(kinds)
    prog.a.extend(a)
    prog.b.extend(b)
    prog.c.extend(c)
    prog.d.extend(d)
    prog.targets.extend(targets)


class _CachedTerminal:
    """A compiled terminal, as :meth:`Program.add_terminal` left it, ready to be copied into
    another program (or into the same one under another name)."""

    __slots__ = ("block", "term")

    def __init__(self, block: _Block, term: TerminalProgram):
        self.block = block
        self.term = TerminalProgram(  # a copy: the compiled one belongs to its lexer
            name=term.name, pattern=term.pattern, start=term.start,
            tracker_starts=term.tracker_starts, word_slots=dict(term.word_slots),
            classes=term.classes)

    def instantiate(self, prog: Program, name: str, pattern: str) -> TerminalProgram:
        blk, src = self.block, self.term
        look_shift = len(prog.look_starts) - blk.look0
        base, ids = blk._stamp(prog, None)
        delta = base - blk.base
        return TerminalProgram(
            name=name, pattern=pattern, start=src.start + delta,
            tracker_starts=tuple([s + delta for s in src.tracker_starts]),
            word_slots={k: (slot, look + look_shift) for k, (slot, look) in src.word_slots.items()},
            classes=tuple(sorted(set(ids))),
        )


class _TerminalCache:
    """Process-wide LRU of compiled terminals by pattern, bounded by entries and by the
    instructions held (a terminal's compile depends on its pattern alone; its name only appears
    in error messages, and failing patterns are not kept). Locked: lexers are built in
    background compile threads too."""

    def __init__(self, max_entries: int, max_instructions: int):
        self.max_entries = max_entries
        self.max_instructions = max_instructions
        self._entries: OrderedDict[str, _CachedTerminal] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, pattern: str) -> "_CachedTerminal | None":
        with self._lock:
            hit = self._entries.get(pattern)
            if hit is not None:
                self._entries.move_to_end(pattern)
            return hit

    def put(self, pattern: str, entry: _CachedTerminal) -> None:
        size = entry.block.size
        if size > self.max_instructions // 4:
            return  # one huge terminal would evict everything else
        with self._lock:
            old = self._entries.pop(pattern, None)
            if old is not None:
                self._held -= old.block.size
            self._entries[pattern] = entry
            self._held += size
            while len(self._entries) > self.max_entries or self._held > self.max_instructions:
                _, gone = self._entries.popitem(last=False)
                self._held -= gone.block.size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0


_TERMINAL_CACHE = _TerminalCache(max_entries=4096, max_instructions=400_000)
"""Compiled terminals of this process: about 25 bytes per instruction held (as bytes: the kinds,
four int32 operands, the SPLIT targets and the index lists), so at most some 10 MB; a terminal
of more than a quarter of that is not kept (a JSON string of up to 2000 characters is some
78 000 instructions)."""


def clear_terminal_cache() -> None:
    """Forget the compiled terminals kept by pattern, and the large lookaheads kept by source
    text (to release their memory; the next lexers parse and compile them again)."""
    _TERMINAL_CACHE.clear()
    _SEGMENT_CACHE.clear()


def _byte_groups(classes: list[ByteClass]) -> tuple[tuple[int, ...], ...]:
    """:meth:`Program.byte_groups` of a list of classes (uncached)."""
    return _byte_partition(classes)[0]


def _byte_partition(classes: list[ByteClass]) -> tuple[tuple[tuple[int, ...], ...], list[int]]:
    """``(groups, group of each byte)`` of a list of classes (uncached).

    Computed in two independent halves, because no class ever puts an ASCII byte and a byte
    above 0x7F together (their :meth:`ByteClass.byte_signature` values lie in disjoint ranges):

    * ASCII bytes are alike iff every class agrees on their membership: :func:`_ascii_groups`
      (in C when built, ``glrmask_ext.byte_groups``), from each class's few toggle points
      (:meth:`ByteClass.ascii_edges`) rather than 128 signature entries per class.
    * Bytes above 0x7F: a class with no non-ASCII code point kills all of them from every state
      and tells apart only continuation bytes from the others, which every class that holds a
      non-ASCII code point tells apart too (continuation and other bytes have signature values
      in disjoint ranges). So only those classes' signature columns are compared
      (:func:`_high_groups`), and with none of them every byte above 0x7F is in one group.

    Both halves list their groups by first byte, with each group's bytes in increasing order,
    and every ASCII group precedes the others: the order :meth:`Program.byte_groups` promises
    (what grouping the 256 signature columns in byte order gives)."""
    if not classes:
        return (tuple(range(256)),), [0] * 256
    wide = [bc for bc in classes if bc.cps and bc.cps[-1][1] >= 0x80]
    if _native_groups is not None:
        low, group_of = _native_groups.ascii_groups([bc.ascii_edges() for bc in classes])
    else:
        low = _ascii_groups(classes)
        group_of = [0] * 0x80
        for k, g in enumerate(low):
            for b in g:
                group_of[b] = k
    n = len(low)
    if wide:
        high, high_of = _high_groups(wide)
        group_of.extend([n + k for k in high_of])
        return low + high, group_of
    group_of.extend([n] * 0x80)
    return low + (_HIGH_BYTES,), group_of


def _ascii_groups(classes: list[ByteClass]) -> tuple[tuple[int, ...], ...]:
    """The groups of bytes 0..127 (by membership in every class), by first byte: the merged
    toggle points of all classes, swept with one bit per class, give each segment between two
    points its membership vector as an int; segments with the same vector form a group. The
    cost is the number of points, not 128 bytes per class (a key literal's classes are a dozen
    single characters). ``glrmask_ext.byte_groups.ascii_groups`` computes the same in C."""
    toggles: dict[int, int] = {0: 0}  # byte -> the classes whose membership flips there
    get = toggles.get
    for j, bc in enumerate(classes):
        bit = 1 << j
        for b in bc.ascii_edges():
            toggles[b] = get(b, 0) ^ bit
    cuts = sorted(toggles)
    cuts.append(0x80)
    groups: dict[int, list[int]] = {}
    member = 0  # one bit per class: whether the segment's bytes are in it
    for i in range(len(cuts) - 1):
        lo = cuts[i]
        member ^= toggles[lo]
        hit = groups.get(member)
        if hit is None:
            groups[member] = list(range(lo, cuts[i + 1]))
        else:
            hit.extend(range(lo, cuts[i + 1]))
    return tuple([tuple(g) for g in groups.values()])


def _high_groups(wide: list[ByteClass]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """The groups of the bytes above 0x7F for the classes ``wide`` that hold a non-ASCII code
    point (:func:`_byte_partition`), by first byte, and the group of each of those 128 bytes.
    Cached by the set of classes: most terminals of a JSON Schema grammar read the same one or
    two string-content classes, whatever their ASCII classes are."""
    key = frozenset(map(id, wide))
    hit = _HIGH_GROUPS.get(key)
    if hit is not None:
        return hit[1]
    high: dict[tuple, list[int]] = {}
    rows = [bc.signature_row(False)[0x80:] for bc in wide]
    columns = zip(*rows) if len(rows) > 1 else rows[0]
    for b, column in enumerate(columns, 0x80):
        group = high.get(column)
        if group is None:
            high[column] = [b]
        else:
            group.append(b)
    groups = tuple([tuple(g) for g in high.values()])
    high_of = [0] * 0x80
    for k, g in enumerate(groups):
        for b in g:
            high_of[b - 0x80] = k
    out = (groups, tuple(high_of))
    if len(_HIGH_GROUPS) >= _BYTE_GROUPS_MAX:
        _HIGH_GROUPS.clear()
    _HIGH_GROUPS[key] = (tuple(wide), out)  # the classes kept alive: no id in a key is reused
    return out


_HIGH_GROUPS: dict[frozenset[int], tuple[tuple[ByteClass, ...], tuple]] = {}
_HIGH_BYTES = tuple(range(0x80, 0x100))


class _Partition:
    """The byte groups of a set of classes, in the forms their users read (the classes are
    kept alive with it, so that no ``id`` in its cache key is reused)."""

    __slots__ = ("classes", "_groups", "group_of", "representatives")

    def __init__(self, classes: list[ByteClass]):
        self.classes = tuple(classes)
        if _native is not None:  # group_of and representatives in one call in C
            self.group_of, self.representatives = _native.partition(self.classes, _high_groups)
            self._groups = None
        else:
            self._groups, group_of = _byte_partition(classes)
            self.group_of = tuple(group_of)  # immutable and, once collected, not tracked
            self.representatives = tuple([g[0] for g in self._groups])

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """The groups themselves, by smallest byte (made when first asked: a lexer reads only
        ``group_of`` and ``representatives`` of its terminals' partitions)."""
        if self._groups is None:
            buckets: list[list[int]] = [[] for _ in self.representatives]
            for b, g in enumerate(self.group_of):
                buckets[g].append(b)
            self._groups = tuple([tuple(x) for x in buckets])
        return self._groups


_BYTE_GROUPS: dict[frozenset[int], _Partition] = {}
_BYTE_GROUPS_MAX = 8192
"""Byte groups by set of class ids (``id`` of the process-wide ByteClass objects); emptied
when full (an entry is a few hundred bytes)."""


def _reads_behind(items) -> bool:
    """Whether a parsed (sub)pattern contains a lookbehind or ``\\b``/``\\B`` at any depth."""
    for op, av in _data(items):
        if op in (C.ASSERT, C.ASSERT_NOT):
            if av[0] != 1 or _reads_behind(av[1].data):
                return True
        elif op is C.AT:
            if av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                return True
        elif op is C.SUBPATTERN:
            if _reads_behind(av[-1]):
                return True
        elif op is C.BRANCH:
            if any(_reads_behind(alt) for alt in av[1]):
                return True
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if _reads_behind(av[2]):
                return True
        elif op is C.ATOMIC_GROUP:
            if _reads_behind(av):
                return True
    return False


def _shape(items) -> tuple[int, bool]:
    """``(minimum width, reads behind)`` of a parsed (sub)pattern in one walk: the fewest
    characters a match consumes (assertions and group references count 0), and whether a lookbehind or ``\\b``/``\\B`` occurs at any depth (as
    :func:`_reads_behind`, conditional groups' branches included)."""
    width = 0
    reads = False
    for op, av in _data(items):
        if op in _SINGLE_CHAR_OPS:
            width += 1
        elif op is C.SUBPATTERN:
            w, r = _shape(av[-1])
            width += w
            reads = reads or r
        elif op is C.BRANCH:
            shapes = [_shape(alt) for alt in av[1]]
            width += min(w for w, _ in shapes)
            reads = reads or any(r for _, r in shapes)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            w, r = _shape(av[2])
            width += av[0] * w
            reads = reads or r
        elif op is C.ATOMIC_GROUP:
            w, r = _shape(av)
            width += w
            reads = reads or r
        elif op in (C.ASSERT, C.ASSERT_NOT):
            reads = reads or av[0] != 1 or _shape(av[1])[1]
        elif op is C.AT:
            reads = reads or av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY)
        elif op is C.GROUPREF_EXISTS:
            reads = reads or _shape(av[1])[1] or (av[2] is not None and _shape(av[2])[1])
        # _LOOK_SEGMENT: a lookahead (width 0) whose body never reads behind
    return width, reads


_STR_FLAGS = sre_parse.parse("").state.flags
"""The flags ``re`` gives a str pattern without inline flags (``re.UNICODE``)."""


def _parse_piece(text: str, groups: dict | None = None) -> sre_parse.SubPattern:
    """``re``'s parse tree of ``text``, by the quick parser when it can."""
    return _quick_parse(text, groups) or sre_parse.parse(text)


def _quick_parse(pattern: str, groups: dict | None = None) -> "sre_parse.SubPattern | None":
    """``re``'s parse tree of ``pattern`` by the native quick parser
    (``glrmask_ext.lexer_compile.quick_parse``), or None (then ``re`` parses it). ``groups``:
    the parse memo of the patterns parsed together (``Program._group_items``)."""
    if _native is None or not _QUICK_PARSER_AGREES:
        return None
    return _native.quick_parse(pattern, groups)


def _tree(x):
    if isinstance(x, sre_parse.SubPattern):
        return ("SubPattern", _tree(x.data))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *map(_tree, x))
    return (type(x).__name__, x)


def _quick_parser_agrees() -> bool:
    """Whether the quick parser builds this Python's ``re`` trees on patterns that go through
    each of its rewrites (it follows ``re``'s parser as of CPython 3.11; another version may
    rewrite differently, and then every pattern is left to ``re``)."""
    if _native is None:
        return False
    probes = (r'"(?:i|\\u0069)(?:d|\\u0064)"', "(?:ab|ac|a)", "(?:a|b|[cd])", "(?:a|[^b])x",
              "(?:xy){2,}?z", "a{,3}b{3}c{}d{2", "[]a-c]-[^]]", r"[\]\-a-]", "(?=a|b)(?!c)d",
              "(?:a|)|.|(?:)", '"[ \\!\\#-\\[\\]-\U0010ffff]{0,8}"')
    for probe in probes:
        quick = _native.quick_parse(probe)
        want = sre_parse.parse(probe)
        if quick is None or _tree(quick) != _tree(want) or quick.state.flags != want.state.flags:
            return False
    return True


class _LookSegment:
    """A top-level lookahead of at least :data:`_MIN_SEGMENT` characters whose body never reads
    behind, by its source text: parsed once per process, and its body compiled once (then
    copied). JSON Schema lowerings guard keys with one large ``(?!"(?:known|keys)")`` that
    recurs in many terminals of a schema (and across schemas of a family): parsing and
    compiling it is most of those terminals' cost."""

    __slots__ = ("positive", "body", "block", "start", "flags")

    def __init__(self, positive: bool, body: sre_parse.SubPattern):
        self.positive = positive
        self.body: sre_parse.SubPattern | None = body
        self.block: _Block | None = None
        self.start = 0  # the body's entry, relative to the block
        self.flags = -1  # the flags the block was compiled under


_LOOK_SEGMENT = object()
"""The op of a parse-tree item ``(_LOOK_SEGMENT, _LookSegment)``."""
_MIN_SEGMENT = 512

_SEGMENT_TOKENS = re.compile(
    r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|\(\?[=!]|\(\?<[=!]|\(\?[^:=!<]|\(\?<|[()|]", re.S)
"""What the segment scanner stops at: an escape, a whole character class, the groups that
open a lookaround, groups it does not split around (flags, names, comments, conditionals:
then it gives up), any other parenthesis, and ``|``."""
_NO_SEGMENTS = re.compile(r"\\[1-9]")
"""Backreferences: their group numbers would change if the parts were parsed apart."""


class _SegmentCache:
    """Process-wide LRU of :class:`_LookSegment` by source text (locked: lexers are built in
    background compile threads too)."""

    def __init__(self, max_entries: int, max_chars: int):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: OrderedDict[str, _LookSegment] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> "_LookSegment | None":
        with self._lock:
            hit = self._entries.get(text)
            if hit is not None:
                self._entries.move_to_end(text)
            return hit

    def put(self, text: str, seg: _LookSegment) -> None:
        with self._lock:
            if text in self._entries:
                return
            self._entries[text] = seg
            self._chars += len(text)
            while len(self._entries) > self.max_entries or self._chars > self.max_chars:
                gone, _ = self._entries.popitem(last=False)
                self._chars -= len(gone)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


_SEGMENT_CACHE = _SegmentCache(max_entries=512, max_chars=300_000)
"""Large lookaheads of this process: a compiled body holds about 0.9 instructions per source
character (some 20 bytes, as a block's bytes), so at most some 6 MB."""


def _parse_by_segments(pattern: str, groups: dict | None = None) -> "sre_parse.SubPattern | None":
    """The parse tree of ``pattern`` with each large top-level lookahead replaced by its
    :class:`_LookSegment`, or None when the pattern is not split (then sre parses it whole).

    Why the pieces parse to the whole's tree: without a top-level ``|``, ``re``'s parser
    builds the top level item by item, each item from its own characters (a quantifier after
    a lookahead, which would bind to it, is refused here), and the lookahead's body is the
    parse of its own text. What would tie the pieces together is refused: global or scoped
    flags, named groups, conditionals, backreferences. Capturing groups are numbered from 1
    in each piece, which only changes numbers the compiler never reads. Any piece ``re``
    refuses sends the whole pattern to ``re`` (for its own error message)."""
    if "(?=" not in pattern and "(?!" not in pattern:
        return None
    if _NO_SEGMENTS.search(pattern):
        return None
    if _native is not None:
        cuts = _native.segment_cuts(pattern, _MIN_SEGMENT)
    else:
        cuts = _segment_cuts(pattern)
    return None if cuts is None else _join_segments(pattern, cuts, groups)


def _segment_cuts(pattern: str) -> "list[tuple[int, int]] | None":
    """``(start, end)`` of each top-level lookahead of at least :data:`_MIN_SEGMENT`
    characters, or None where the pattern must not be split (what
    ``glrmask_ext.lexer_compile.segment_cuts`` computes in C)."""
    depth = 0
    start = -1
    cuts: list[tuple[int, int]] = []
    for m in _SEGMENT_TOKENS.finditer(pattern):
        tok = m.group()
        c = tok[0]
        if c == "\\" or c == "[":
            continue
        if c == "(":
            if len(tok) > 1 and not (tok[2] in "=!" or tok[2:4] in ("<=", "<!")):
                return None  # (?i: (?P< (?# (?( (?> ...
            if depth == 0 and tok[2:3] in ("=", "!"):
                start = m.start()
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0 and start >= 0:
                end = m.end()
                if end - start >= _MIN_SEGMENT:
                    if end < len(pattern) and pattern[end] in "*+?{":
                        return None
                    cuts.append((start, end))
                start = -1
        elif depth == 0:  # "|"
            return None
    if depth != 0 or not cuts:
        return None
    return cuts


def _join_segments(pattern: str, cuts: list[tuple[int, int]],
                   groups: dict | None = None) -> "sre_parse.SubPattern | None":
    """The tree of ``pattern`` from its pieces around the large lookaheads at ``cuts``
    (:func:`_parse_by_segments`), or None when a piece does not parse as expected."""
    data: list = []
    pos = 0
    try:
        state = None
        for a, b in cuts:
            piece = _parse_piece(pattern[pos:a], groups)  # the first one even if empty: its state
            if state is None:
                state = piece.state
            elif piece.state.flags != state.flags:
                return None
            data.extend(piece.data)
            text = pattern[a:b]
            seg = _SEGMENT_CACHE.get(text)
            if seg is None:
                tree = _parse_piece(text, groups)
                if len(tree.data) != 1 or tree.state.flags != state.flags:
                    return None
                op, av = tree.data[0]
                shape = _native.shape if _native is not None else _shape
                if op not in (C.ASSERT, C.ASSERT_NOT) or av[0] != 1 or shape(av[1].data)[1]:
                    return None
                seg = _LookSegment(op is C.ASSERT, av[1])
                _SEGMENT_CACHE.put(text, seg)
            elif seg.flags not in (-1, state.flags):
                return None  # compiled under other flags (never, without inline flags)
            data.append((_LOOK_SEGMENT, seg))
            pos = b
        last = _parse_piece(pattern[pos:], groups)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return None
    if last.state.flags != state.flags:
        return None
    data.extend(last.data)
    return sre_parse.SubPattern(state, data)


def _data(items):
    """The item list of a parse (sub)tree: iterating a ``SubPattern`` itself goes through its
    Python-level ``__getitem__`` once per item."""
    return items.data if type(items) is _SubPattern else items


_SubPattern = sre_parse.SubPattern


class _Compiler:
    """Compiles one terminal's sre_parse tree into ``Program`` instructions (built back to front:
    every node is compiled knowing the pc it continues with)."""

    def __init__(self, prog: Program, term: TerminalProgram, track_mb: bool = True):
        self.p = prog
        self.t = term
        # Only lookbehinds and \b read the minimum width before them (and lookahead bodies
        # holding them): without any, every width is left uncomputed (mb stays 0).
        self.track_mb = track_mb
        self._classes: dict = {}  # single-character node key -> class id (this compile)
        # the hot loop in C when built (the reference compile keeps the Python one)
        self._native_seq = _native.seq_plain if _native is not None and prog.copy_blocks else None
        # Lookaround bodies are context-free: copies of a repeat share one compiled body, so
        # identical lookaheads become identical condition atoms (and lookbehinds one tracker).
        self._look_cache: dict[tuple[int, int, int | None], int] = {}
        self._behind_cache: dict[tuple[int, int], int] = {}
        self._look_depth = 0
        self._widths: dict[int, int] = {}  # id(item list) -> its minimum width

    def width(self, items) -> int:
        """The fewest characters a match of ``items`` consumes (as :func:`_shape` counts them),
        memoized per item list of the tree (a seq asks it of every item,
        and every enclosing seq again of the same subtrees)."""
        items = _data(items)
        w = self._widths.get(id(items))
        if w is None:
            w = self._widths[id(items)] = sum(self.item_width(op, av) for op, av in items)
        return w

    def item_width(self, op, av) -> int:
        if op in _SINGLE_CHAR_OPS:
            return 1
        if op is C.SUBPATTERN:
            return self.width(av[-1])
        if op is C.BRANCH:
            return min(self.width(alt) for alt in av[1])
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            return av[0] * self.width(av[2])
        if op is C.ATOMIC_GROUP:
            return self.width(av)
        return 0

    def reject(self, construct: str, why: str = "") -> RegexError:
        msg = f"terminal {self.t.name!r}: {construct} is not supported in /{self.t.pattern}/"
        return RegexError(msg + (f" ({why})" if why else ""))

    def seq(self, items, flags: int, nxt: int, min_before: int, inside: str | None) -> int:
        if not self.track_mb and self._native_seq is not None:
            return self._native_seq(self, items, flags, nxt, inside)
        if type(items) is _SubPattern:
            items = items.data
        if not self.track_mb:
            # the hot loop: single-character nodes (most of a pattern) are compiled inline
            pc = nxt
            item = self.item
            p = self.p
            kind, A, B, Cc, D, T = p.kind, p.a, p.b, p.c, p.d, p.targets
            max_nodes = p.max_nodes
            classes = self._classes
            rel = flags & _CLASS_FLAGS
            IN, SUBPATTERN, BRANCH = C.IN, C.SUBPATTERN, C.BRANCH
            for op, av in reversed(items):
                if op in _SINGLE_CHAR_OPS:
                    key = (op, id(av) if op is IN else av, rel)
                    cid = classes.get(key)
                    if cid is None:
                        cid = classes[key] = p._class_id_of(charsets.node_class(op, av, flags))
                    n = len(kind)
                    if n >= max_nodes or not n & 1023:
                        pc = p._new(CHAR, cid, pc)
                    else:
                        kind.append(CHAR)
                        A.append(cid)
                        B.append(pc)
                        Cc.append(0)
                        D.append(0)
                        pc = n
                elif op is SUBPATTERN and not av[1] and not av[2]:  # a group, same flags
                    pc = self.seq(av[3], flags, pc, 0, inside)
                elif op is BRANCH:
                    seq = self.seq
                    targets = [seq(alt, flags, pc, 0, inside) for alt in av[1]]
                    n = len(kind)
                    if n >= max_nodes or not n & 1023:
                        pc = p._split(targets)
                    else:
                        kind.append(SPLIT)
                        A.append(len(T))
                        B.append(len(targets))
                        Cc.append(0)
                        D.append(0)
                        T.extend(targets)
                        pc = n
                else:
                    pc = item(op, av, flags, pc, 0, inside)
            return pc
        befores = []
        acc = min_before
        item_width = self.item_width
        for op, av in items:
            befores.append(acc)
            acc += item_width(op, av)
        pc = nxt
        for (op, av), mb in zip(reversed(items), reversed(befores)):
            pc = self.item(op, av, flags, pc, mb, inside)
        return pc

    def item(self, op, av, flags: int, nxt: int, mb: int, inside: str | None) -> int:
        p = self.p
        if op in _SINGLE_CHAR_OPS:
            # an IN node's av is a list: its identity names it during this compile
            key = (op, id(av) if op is C.IN else av, flags & _CLASS_FLAGS)
            cid = self._classes.get(key)
            if cid is None:
                cid = self._classes[key] = p._class_id_of(charsets.node_class(op, av, flags))
            kind = p.kind
            n = len(kind)
            if n >= p.max_nodes or not n & 1023:
                return p._new(CHAR, cid, nxt)
            kind.append(CHAR)
            p.a.append(cid)
            p.b.append(nxt)
            p.c.append(0)
            p.d.append(0)
            return n
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            return self.seq(sub, (flags | add_flags) & ~del_flags, nxt, mb, inside)
        if op is C.BRANCH:
            seq = self.seq
            return p._split([seq(alt, flags, nxt, mb, inside) for alt in av[1]])
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            return self.repeat(av, op is C.MAX_REPEAT, flags, nxt, mb, inside)
        if op in (C.ASSERT, C.ASSERT_NOT):
            return self.lookaround(av, op is C.ASSERT, flags, nxt, mb, inside)
        if op is _LOOK_SEGMENT:
            return self.look_segment(av, flags, nxt)
        if op is C.AT:
            if av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                return self.boundary(av is C.AT_BOUNDARY, flags, nxt, mb, inside)
            raise self.reject(
                _AT_NAMES.get(av, f"anchor {av}"), "it depends on where the text starts or ends"
            )
        if op is C.GROUPREF:
            raise self.reject("backreference")
        if op is C.GROUPREF_EXISTS:
            raise self.reject("conditional group (?(id)yes|no)")
        if op is C.ATOMIC_GROUP:
            raise self.reject("atomic group (?>...)")
        if op is C.POSSESSIVE_REPEAT:
            raise self.reject("possessive quantifier (*+, ++, ?+, {m,n}+)")
        raise self.reject(f"regex construct {op}")

    def repeat(self, av, greedy: bool, flags, nxt, mb, inside) -> int:
        lo, hi, body = av
        p = self.p
        rep = p.n_reps
        p.n_reps += 1
        bmin = self.width(body) if self.track_mb else 0
        checks = 0 if hi is C.MAXREPEAT else hi - lo  # REP_CHECKs made after the first copy
        copies = (1 if hi is C.MAXREPEAT else hi - lo) + lo
        copy = _BodyCopies(self, body, flags, inside, copies, checks)
        if hi is C.MAXREPEAT:
            check = p._new(REP_CHECK, rep, 0, nxt, greedy)
            p.b[check] = copy(check, mb + lo * bmin)
            cur = check
        else:
            cur = nxt
            for k in reversed(range(hi - lo)):
                entry = copy(cur, mb + (lo + k) * bmin)
                cur = p._new(REP_CHECK, rep, entry, nxt, greedy)
        for j in reversed(range(lo)):
            cur = copy(cur, mb + j * bmin)
        return p._new(REP_ENTER, rep, cur)

    def lookaround(self, av, positive: bool, flags, nxt, mb, inside) -> int:
        """A lookahead anywhere (its body may nest further lookaheads, and lookbehinds / ``\\b``
        that stay inside the lexeme); a lookbehind whose fixed width fits in the characters
        certainly consumed before it (``mb`` counts from the lexeme start, through enclosing
        lookahead bodies). Lookbehind bodies may contain no assertions: the tracker that answers
        them is a plain automaton over the text read so far."""
        direction, body = av
        p = self.p
        what = ("lookahead " if direction == 1 else "lookbehind ") + (
            "(?=...)" if positive and direction == 1
            else "(?!...)" if direction == 1
            else "(?<=...)" if positive
            else "(?<!...)"
        )
        if inside == "lookbehind":
            raise self.reject(f"nested lookaround: {what} inside a lookbehind")
        if direction == 1:
            # A body is context-free except for how much text precedes it, which only matters to
            # the lookbehinds and \b it contains (their "reads before the lexeme" check).
            key = (id(body), flags,
                   mb if self.track_mb and _reads_behind(body.data) else None)
            look = self._look_cache.get(key)
            if look is None:
                if self._look_depth >= MAX_LOOK_DEPTH:
                    raise GrammarTooComplex(
                        f"lexer: terminal {self.t.name!r} nests lookaheads more than "
                        f"{MAX_LOOK_DEPTH} deep"
                    )
                self._look_depth += 1
                try:
                    start = self.seq(body.data, flags, p._new(SUBACCEPT), mb, "lookahead")
                finally:
                    self._look_depth -= 1
                look = len(p.look_starts)
                p.look_starts.append(start)
                self._look_cache[key] = look
            return p._new(LOOK, look, positive, nxt)
        lo, hi = body.getwidth()
        if lo != hi:  # pragma: no cover - re.compile already refuses variable-width lookbehinds
            raise self.reject(what, "variable width")
        if lo > mb:
            raise self.reject(
                what,
                f"it looks {lo} character(s) back but only {mb} are certainly consumed before it, "
                "so it would read text before the lexeme",
            )
        key = (id(body), flags)
        slot = self._behind_cache.get(key)
        if slot is None:
            start = self.seq(body.data, flags, p._new(SUBACCEPT), 0, "lookbehind")
            slot = len(self.t.tracker_starts)
            self.t.tracker_starts += (start,)
            self._behind_cache[key] = slot
        return p._new(LB, slot, positive, nxt)

    def look_segment(self, seg: "_LookSegment", flags: int, nxt: int) -> int:
        """A top-level lookahead met as a :class:`_LookSegment`: what :meth:`lookaround` does
        for it (its body is compiled, as a lookahead met once, at depth 1, right before its
        LOOK), its body's instructions copied when the same source text was compiled before."""
        p = self.p
        block = seg.block
        if block is None:
            body = seg.body
            if body is None:  # another thread compiled it meanwhile (block is set first)
                block = seg.block
        if block is not None:  # compiled under these flags (_parse_by_segments checks)
            start = block.stamp(p) + seg.start
        else:
            base = len(p.kind)
            look0 = len(p.look_starts)
            rep0 = p.n_reps
            self._look_depth += 1
            try:
                start = self.seq(body.data, flags, p._new(SUBACCEPT), 0, "lookahead")
            finally:
                self._look_depth -= 1
            if seg.block is None and p.copy_blocks:
                seg.start = start - base
                seg.flags = flags
                seg.block = _Block.capture(p, base, None, rep0, look0, True)
                seg.body = None  # the block replaces the tree (a big one: thousands of nodes)
        look = len(p.look_starts)
        p.look_starts.append(start)
        return p._new(LOOK, look, seg.positive, nxt)

    def boundary(self, is_boundary: bool, flags, nxt, mb, inside) -> int:
        what = "word boundary \\b" if is_boundary else "non-boundary \\B"
        if inside == "lookbehind":
            raise self.reject(f"{what} inside a lookbehind")
        if mb < 1:
            raise self.reject(
                what, "no character of the lexeme certainly precedes it, so it would read text "
                "before the lexeme"
            )
        ascii_only = bool(flags & charsets.FLAG_ASCII)
        if ascii_only not in self.t.word_slots:
            p = self.p
            cat = ((C.CATEGORY, C.CATEGORY_WORD),)
            cls = p._class_id(charsets.node_set(C.IN, cat, charsets.FLAG_ASCII if ascii_only else 0))
            look_start = p._new(CHAR, cls, p._new(SUBACCEPT))
            look = len(p.look_starts)
            p.look_starts.append(look_start)
            tracker_start = p._new(CHAR, cls, p._new(SUBACCEPT))
            slot = len(self.t.tracker_starts)
            self.t.tracker_starts += (tracker_start,)
            self.t.word_slots[ascii_only] = (slot, look)
        slot, look = self.t.word_slots[ascii_only]
        return self.p._new(BOUND, slot, look, is_boundary, nxt)


class _BodyCopies:
    """The copies of one repeat's body: the first is compiled, the others are stamped from it
    (:class:`_Block`) when that gives the same instructions — when the body holds no
    lookaround or ``\\b``, whose compile depends on what precedes it (its minimum width) and
    on caches the first copy fills."""

    __slots__ = ("comp", "body", "flags", "inside", "block", "entry", "tried", "copies", "checks")

    def __init__(self, comp: _Compiler, body, flags: int, inside: str | None, copies: int,
                 checks: int):
        """``copies`` of the body will be asked for, and the repeat makes ``checks``
        REP_CHECKs and one REP_ENTER after the first copy."""
        self.comp = comp
        self.body = body
        self.flags = flags
        self.inside = inside
        self.block: _Block | None = None
        self.entry = 0  # the first copy's entry, relative to its block (-1: its continuation)
        self.copies = copies
        self.checks = checks
        # True: compile every copy (a few copies of a small body cost less than taking one)
        self.tried = not (copies > _MIN_COPIES_TO_STAMP and comp.p.copy_blocks)

    def __call__(self, cont: int, mb: int) -> int:
        """A copy of the body continuing with ``cont`` (``mb`` characters certainly read before
        it); returns its entry pc."""
        blk = self.block
        if blk is not None:
            base = blk.stamp(self.comp.p, cont)
            return base + self.entry if self.entry >= 0 else cont
        p = self.comp.p
        base = len(p.kind)
        rep0 = p.n_reps
        look0 = len(p.look_starts)
        entry = self.comp.seq(self.body, self.flags, cont, mb, self.inside)
        if not self.tried:
            self.tried = True
            made = p.kind[base:].tobytes()
            if len(p.look_starts) == look0 and not any(k in made for k in _ASSERTION_KINDS):
                blk = self.block = _Block.capture(p, base, cont, rep0, look0, False)
                self.entry = entry - base if entry >= base else -1
                # the copies to come have a known size: when they cannot fit, fail now with the
                # error the last instruction that fits would end in (after a deadline check)
                total = len(p.kind) + (self.copies - 1) * blk.size + self.checks + 1
                if total > p.max_nodes:
                    current_budget().check(f"lexer NFA (terminal {p._budget_owner})")
                    raise p._nodes_error()
        return entry


_ASSERTION_KINDS = frozenset((LOOK, LB, BOUND))
_MIN_COPIES_TO_STAMP = 3
"""A repeat with at most this many copies of its body compiles each (``x{3}``): taking the
block costs about what compiling a small body twice does."""


try:
    from glrmask_ext import byte_groups as _native_groups
except ImportError:  # pragma: no cover - the extension is not built: the Python sweep
    _native_groups = None

try:
    from glrmask_ext import lexer_compile as _native
except ImportError:  # pragma: no cover - the extension is not built: Python loops, re's parser
    _native = None
else:
    _native.configure((C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.SUBPATTERN, C.BRANCH),
                      (charsets.FLAG_IGNORECASE, charsets.FLAG_DOTALL, charsets.FLAG_ASCII),
                      CHAR, SPLIT, _SubPattern, charsets.node_class)
    _native.configure_parser((C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT, C.AT, C.ASSERT,
                              C.ASSERT_NOT, C.NEGATE, C.RANGE), C.MAXREPEAT, sre_parse.State,
                             _STR_FLAGS)
    _native.configure_shape((C.POSSESSIVE_REPEAT, C.ATOMIC_GROUP, C.GROUPREF_EXISTS,
                             C.AT_BOUNDARY, C.AT_NON_BOUNDARY),
                            (CHAR, SPLIT, REP_ENTER, REP_CHECK, LOOK, LB, BOUND))
    _native.configure_advance(MID, CLS_DEAD, CLS_FINAL)
    _native.configure_repeat(_Block, current_budget, _MIN_COPIES_TO_STAMP)

_python_advance = Program.advance
"""The Python :meth:`Program.advance` (the reference the native one is tested against)."""
if _native is not None:
    # the same memo and MID interning, in C (the lexer's every byte step goes through it)
    Program.advance = _native.advance  # type: ignore[method-assign]

_QUICK_PARSER_AGREES = _quick_parser_agrees()
