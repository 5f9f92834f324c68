# cython: language_level=3, wraparound=True
"""The lexer compiler's hot paths in C: a sequence of parse-tree items compiled back to front
(:func:`seq_plain`, repeats included), and a parser for the regex subset JSON Schema lowerings
emit that builds exactly ``re``'s parse tree (:func:`quick_parse`); around them, what
``glrmask.lexer.program`` does per block, per terminal and per lexer step on the program's typed
arrays: a block's indexes (:func:`block_indexes`) and its copies (:func:`stamp`), class ids
(:func:`class_ids`), byte partitions (:func:`partition`) and :func:`advance`.

Why: compiling a large terminal (a JSON Schema "not a known key" guard is thousands of
literals and alternations) is mostly this loop — one CHAR instruction per single-character
node, a SPLIT per alternation, a recursion per group — and in Python each instruction costs
several hundred nanoseconds of interpreter overhead. :func:`seq_plain` does exactly what
``glrmask.lexer.program._Compiler.seq`` does for a terminal that never reads behind (no widths
tracked): the same instructions in the same order, the same budget checks (through
``Program._new`` at every 1024th instruction and at the limit), repeats as ``_Compiler.repeat``
builds them (:func:`_repeat`; their bodies copied through ``_Block`` as there), every other item
handed back to the compiler's own ``item``. Recursion is counted against Python's limit, as the
Python loop's would be. Instructions are written straight into the program's typed arrays
(``array('B')`` kinds, ``array('i')`` operands).

``re``'s own parser reads a pattern a character at a time through a tokenizer object; for the
large patterns of JSON Schema grammars that is the other half of the compile. The quick parser
handles literals, punctuation escapes, classes of literals and ranges, ``(?:...)``, lookaheads,
``|``, quantifiers and ``.``, with ``re``'s rewrites (a repeated group's body unwrapped, groups
inlined, a class of one literal made a literal, duplicate class items dropped, an
alternation's common first items factored out, an alternation of single characters made a
class); anything else, and anything ``re`` would warn about or refuse, is left to ``re``. It
follows ``re`` as of CPython 3.11: the compiler's module checks it against this Python's
``re`` at import and does not use it if they disagree.
"""

cdef extern from "Python.h":
    int Py_EnterRecursiveCall(const char *where) except -1
    void Py_LeaveRecursiveCall()

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.object cimport Py_SIZE
from libc.stdint cimport int32_t, INT32_MIN
from libc.stdlib cimport free, realloc
from glrmask_ext.ascii_refine cimport refine_ascii_labels


cdef object _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH, _CHAR, _SPLIT, _SUBP_TYPE
cdef object _node_class
cdef long _CLASS_FLAGS = 0
cdef long _F_IGNORECASE = 0, _F_DOTALL = 0, _F_ASCII = 0
cdef int _CHAR_K = 0, _SPLIT_K = 0


def configure(ops, flags, char_kind, split_kind, subpattern_type, node_class):
    """Bind the constants the loop compares with (sre's op singletons, the class flags
    ``(IGNORECASE, DOTALL, ASCII)``, the instruction kinds, ``SubPattern``,
    ``charsets.node_class``): the compiler's module calls it once at import."""
    global _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH, _CHAR, _SPLIT, _SUBP_TYPE
    global _node_class, _CLASS_FLAGS, _CHAR_K, _SPLIT_K, _F_IGNORECASE, _F_DOTALL, _F_ASCII
    _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH = ops
    _F_IGNORECASE, _F_DOTALL, _F_ASCII = flags
    _CLASS_FLAGS = _F_IGNORECASE | _F_DOTALL | _F_ASCII
    _CHAR = char_kind
    _SPLIT = split_kind
    _CHAR_K = char_kind
    _SPLIT_K = split_kind
    _SUBP_TYPE = subpattern_type
    _node_class = node_class
    global _ASCII_LITERALS
    _ASCII_LITERALS = tuple([(_LITERAL, c) for c in range(128)])


ASCII_CLASS_SLOTS = 8 * 128
"""``Program._ascii_cids``' size: a class id per ASCII literal under each of the 8 sets of the
flags a class depends on."""


cdef class _Seq:
    """What one compile of a sequence reads at every node, fetched once: the program's typed
    arrays, its instruction limit, and its class-id memos (``Program._node_cids``: node key ->
    class id; ``Program._ascii_cids``: the same for ASCII literals, -1 where not asked yet).

    A node's class id depends only on its key (``charsets.node_class`` returns the process-wide
    ByteClass of a key, and ``Program._class_id_of`` numbers ByteClasses in order of first
    use), so one memo serves every terminal of the program and ids come out in the order a
    compile that asks every node anew would give them."""
    cdef object comp, p
    cdef array.array kind, A, B, Cc, D, T, ascii
    cdef Py_ssize_t max_nodes
    cdef dict cids


cdef inline Py_ssize_t _push5(_Seq ctx, int k, int a, int b, int c, int d) except -1:
    """Append instruction ``(k, a, b, c, d)`` to the program's typed arrays; returns its pc."""
    cdef Py_ssize_t n = Py_SIZE(ctx.kind)
    array.resize_smart(ctx.kind, n + 1)
    array.resize_smart(ctx.A, n + 1)
    array.resize_smart(ctx.B, n + 1)
    array.resize_smart(ctx.Cc, n + 1)
    array.resize_smart(ctx.D, n + 1)
    ctx.kind.data.as_uchars[n] = <unsigned char>k
    ctx.A.data.as_ints[n] = a
    ctx.B.data.as_ints[n] = b
    ctx.Cc.data.as_ints[n] = c
    ctx.D.data.as_ints[n] = d
    return n


cdef inline Py_ssize_t _append(_Seq ctx, int k, int a, int b) except -1:
    """Append instruction ``(k, a, b, 0, 0)`` (no budget check: the caller made one)."""
    return _push5(ctx, k, a, b, 0, 0)


cdef int _class_id(_Seq ctx, object op, object av, long flags, long rel) except -1:
    """The program's class id of a single-character node (interned on first use)."""
    cdef object key, cid
    if op is _IN:
        key = (op, tuple(av), rel)
        try:
            cid = ctx.cids.get(key)
        except TypeError:  # an item not hashable as it stands (node_class freezes it)
            return ctx.p._class_id_of(_node_class(op, av, flags))
    else:
        key = (op, av, rel)
        cid = ctx.cids.get(key)
    if cid is None:
        cid = ctx.p._class_id_of(_node_class(op, av, flags))
        ctx.cids[key] = cid
    return cid


def seq_plain(comp, items, long flags, nxt, inside):
    """``_Compiler.seq(items, flags, nxt, 0, inside)`` for a compiler with ``track_mb`` off."""
    cdef _Seq ctx = _Seq.__new__(_Seq)
    cdef object p = comp.p
    ctx.comp = comp
    ctx.p = p
    ctx.kind = p.kind
    ctx.A = p.a
    ctx.B = p.b
    ctx.Cc = p.c
    ctx.D = p.d
    ctx.T = p.targets
    ctx.max_nodes = p.max_nodes
    ctx.cids = p._node_cids
    ctx.ascii = p._ascii_cids
    if Py_SIZE(ctx.ascii) != ASCII_CLASS_SLOTS:
        raise ValueError("Program._ascii_cids has the wrong size")
    return _seq(ctx, items, flags, nxt, inside)


cdef Py_ssize_t _seq(_Seq ctx, object items, long flags, Py_ssize_t nxt,
                     object inside) except -1:
    cdef list data = items.data if type(items) is _SUBP_TYPE else items
    cdef long rel = flags & _CLASS_FLAGS
    cdef int code = 0
    cdef int *ascii = ctx.ascii.data.as_ints
    cdef Py_ssize_t k, n, j, m, first, lit
    cdef Py_ssize_t pc = nxt
    cdef int cid
    cdef object op, av, alt
    cdef tuple node
    cdef list alts, targets
    if rel & _F_IGNORECASE:
        code |= 1
    if rel & _F_DOTALL:
        code |= 2
    if rel & _F_ASCII:
        code |= 4
    Py_EnterRecursiveCall(" while compiling a regex")
    try:
        for k in range(len(data) - 1, -1, -1):
            node = data[k]
            op = node[0]
            av = node[1]
            if op is _LITERAL or op is _IN or op is _NOT_LITERAL or op is _ANY:
                lit = av if op is _LITERAL else -1
                if 0 <= lit < 128:
                    lit += code * 128
                    cid = ascii[lit]
                    if cid < 0:
                        cid = _class_id(ctx, op, av, flags, rel)
                        ascii[lit] = cid
                else:
                    cid = _class_id(ctx, op, av, flags, rel)
                n = Py_SIZE(ctx.kind)
                if n >= ctx.max_nodes or not n & 1023:
                    pc = ctx.p._new(_CHAR, cid, pc)
                else:
                    pc = _append(ctx, _CHAR_K, cid, <int>pc)
            elif op is _SUBPATTERN and not av[1] and not av[2]:  # a group, same flags
                pc = _seq(ctx, av[3], flags, pc, inside)
            elif op is _BRANCH:
                alts = av[1]
                targets = [_seq(ctx, alt, flags, pc, inside) for alt in alts]
                n = Py_SIZE(ctx.kind)
                if n >= ctx.max_nodes or not n & 1023:
                    pc = ctx.p._split(targets)
                else:
                    m = len(targets)
                    first = Py_SIZE(ctx.T)
                    pc = _append(ctx, _SPLIT_K, <int>first, <int>m)
                    array.resize_smart(ctx.T, first + m)
                    for j in range(m):
                        ctx.T.data.as_ints[first + j] = targets[j]
            elif (op is _MAX_REPEAT_OP or op is _MIN_REPEAT_OP) and _BLOCK is not None:
                pc = _repeat(ctx, av, op is _MAX_REPEAT_OP, flags, pc, inside)
            else:
                pc = ctx.comp.item(op, av, flags, pc, 0, inside)
    finally:
        Py_LeaveRecursiveCall()
    return pc


# ------------------------------------------------------------------ repeats
cdef object _BLOCK = None
cdef object _current_budget = None
cdef Py_ssize_t _MIN_COPIES_TO_STAMP = 0


def configure_repeat(block_type, current_budget, Py_ssize_t min_copies_to_stamp):
    """Bind ``_Block`` (whose ``capture``/``stamp`` copy a repeat's body), the budget getter and
    ``_MIN_COPIES_TO_STAMP`` (the compiler's module calls it; until then repeats go through the
    compiler's own ``item``)."""
    global _BLOCK, _current_budget, _MIN_COPIES_TO_STAMP
    _BLOCK = block_type
    _current_budget = current_budget
    _MIN_COPIES_TO_STAMP = min_copies_to_stamp


cdef inline Py_ssize_t _new5(_Seq ctx, int k, int a, int b, int c, int d) except -1:
    """``Program._new(k, a, b, c, d)``: through it at every 1024th instruction and at the limit
    (its budget checks and errors), appended here otherwise."""
    cdef Py_ssize_t n = Py_SIZE(ctx.kind)
    if n >= ctx.max_nodes or not n & 1023:
        return ctx.p._new(k, a, b, c, d)
    return _push5(ctx, k, a, b, c, d)


cdef class _Copies:
    """``glrmask.lexer.program._BodyCopies`` for the native compile (no widths tracked): the
    copies of one repeat's body, the first compiled, the others stamped from it when the body
    holds no assertion (and there are more than ``_MIN_COPIES_TO_STAMP`` of them)."""
    cdef object body, inside, block
    cdef long flags
    cdef Py_ssize_t entry, copies, checks
    cdef bint tried
    cdef bint direct  # the block creates no lookahead: copied here, not through Python
    cdef bytes kinds, ba, bb, bc, bd, bt, chars, reps, pcs_c, looks_a, looks_b, splits
    cdef Py_ssize_t b_size, b_base, b_t0, b_cont  # b_cont: -1 when the block continues nowhere
    cdef Py_ssize_t b_rep0, b_nreps

    cdef Py_ssize_t copy(self, _Seq ctx, Py_ssize_t cont) except -1:
        cdef object p = ctx.p
        cdef Py_ssize_t base, entry, rep0, look0, total, i
        cdef const unsigned char *kinds
        cdef bint plain
        if self.block is not None:
            if self.direct:
                base = self._stamp(ctx, cont)
            else:
                base = self.block.stamp(p, cont)
            return base + self.entry if self.entry >= 0 else cont
        base = Py_SIZE(ctx.kind)
        rep0 = p.n_reps
        look0 = len(p.look_starts)
        entry = _seq(ctx, self.body, self.flags, cont, self.inside)
        if not self.tried:
            self.tried = True
            plain = len(p.look_starts) == look0
            kinds = ctx.kind.data.as_uchars
            i = base
            while plain and i < Py_SIZE(ctx.kind):
                if kinds[i] == _K_LOOK or kinds[i] == _K_LB or kinds[i] == _K_BOUND:
                    plain = False
                i += 1
            if plain:
                self.block = _BLOCK.capture(p, base, cont, rep0, look0, False)
                self.entry = entry - base if entry >= base else -1
                self._take_fields()
                # the copies to come have a known size: when they cannot fit, fail now with
                # the error the last instruction that fits would end in (after a deadline check)
                total = Py_SIZE(ctx.kind) + (self.copies - 1) * <Py_ssize_t>self.block.size \
                    + self.checks + 1
                if total > ctx.max_nodes:
                    _current_budget().check(f"lexer NFA (terminal {p._budget_owner})")
                    raise p._nodes_error()
        return entry


    cdef void _take_fields(self) except *:
        """Keep the block's fields for :meth:`_stamp` when it creates no lookahead (a block that
        does goes through ``_Block.stamp``, which also lists the copy's lookaheads)."""
        blk = self.block
        self.direct = not blk.looks and blk.classes is None
        if not self.direct:
            return
        self.kinds, self.ba, self.bb, self.bc, self.bd, self.bt = blk.kinds, blk.a, blk.b, blk.c, blk.d, blk.targets
        self.chars, self.reps, self.pcs_c, self.splits = blk.chars, blk.reps, blk.pcs_c, blk.splits
        self.looks_a, self.looks_b = blk.looks_a, blk.looks_b
        self.b_size, self.b_base, self.b_t0 = blk.size, blk.base, blk.t0
        self.b_cont = -1 if blk.cont is None else blk.cont
        self.b_rep0, self.b_nreps = blk.rep0, blk.n_reps

    cdef Py_ssize_t _stamp(self, _Seq ctx, Py_ssize_t cont) except -1:
        """``_Block.stamp(ctx.p, cont)`` without the Python call (a ``maxLength: 65535`` string is
        65,535 copies): the same deadline checks and limit, the same relocation."""
        cdef Py_ssize_t base = Py_SIZE(ctx.kind)
        cdef Py_ssize_t end = base + self.b_size
        cdef Py_ssize_t top = end if end < ctx.max_nodes else ctx.max_nodes
        cdef Py_ssize_t delta = base - self.b_base
        cdef bint pure = self.b_cont < 0 or cont - self.b_cont == delta
        cdef object p = ctx.p
        cdef Py_ssize_t rep_shift = <Py_ssize_t>p.n_reps - self.b_rep0
        if base < top and ((base & 1023) == 0 or ((top - 1) >> 10) > (base >> 10)):
            _current_budget().check(f"lexer NFA (terminal {p._budget_owner})")
        if end > ctx.max_nodes:
            raise p._nodes_error()
        _stamp_arrays(ctx.kind, ctx.A, ctx.B, ctx.Cc, ctx.D, ctx.T, self.kinds, self.ba, self.bb, self.bc,
                      self.bd, self.bt, self.chars, self.reps, self.pcs_c, self.looks_a, self.looks_b,
                      self.splits, <int>delta, <int>self.b_base, <int>cont, pure, <int>rep_shift, 0,
                      <int>(Py_SIZE(ctx.T) - self.b_t0), None)
        if self.b_nreps:
            p.n_reps = p.n_reps + self.b_nreps
        return base


cdef Py_ssize_t _repeat(_Seq ctx, object av, bint greedy, long flags, Py_ssize_t nxt,
                        object inside) except -1:
    """``glrmask.lexer.program._Compiler.repeat`` for the native compile: the same
    instructions in the same order (REP_CHECKs and copies of the body back to front, then the
    REP_ENTER)."""
    cdef object p = ctx.p
    cdef object lo_o = av[0], hi_o = av[1]
    cdef int rep = p.n_reps
    cdef bint unbounded = hi_o is _MAXREPEAT
    cdef Py_ssize_t lo = lo_o
    cdef Py_ssize_t hi = 0 if unbounded else <Py_ssize_t>hi_o
    cdef Py_ssize_t k, check, entry
    cdef Py_ssize_t cur
    cdef _Copies cp = _Copies.__new__(_Copies)
    p.n_reps = rep + 1
    cp.body = av[2]
    cp.inside = inside
    cp.block = None
    cp.flags = flags
    cp.entry = 0
    cp.checks = 0 if unbounded else hi - lo
    cp.copies = (1 if unbounded else hi - lo) + lo
    cp.tried = not (cp.copies > _MIN_COPIES_TO_STAMP)
    if unbounded:
        check = _new5(ctx, _K_REP_CHECK, rep, 0, <int>nxt, greedy)
        entry = cp.copy(ctx, check)
        ctx.B.data.as_ints[check] = <int>entry
        cur = check
    else:
        cur = nxt
        for k in range(hi - lo):
            entry = cp.copy(ctx, cur)
            cur = _new5(ctx, _K_REP_CHECK, rep, <int>entry, <int>nxt, greedy)
    for k in range(lo):
        cur = cp.copy(ctx, cur)
    return _new5(ctx, _K_REP_ENTER, rep, <int>cur, 0, 0)


# ------------------------------------------------------------------ the quick parser
cdef object _MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE
cdef object _RANGE, _MAXREPEAT, _State
cdef long _STR_FLAGS = 0
cdef object _OBJECT_NEW = object.__new__
cdef tuple _ASCII_LITERALS = ()


cdef inline tuple _literal(long c):
    """The parse-tree item ``(LITERAL, c)``; one shared tuple per ASCII character (items are
    immutable, and a large pattern is mostly literals: no allocation per character)."""
    if 0 <= c < 128:
        return <tuple>_ASCII_LITERALS[c]
    return (_LITERAL, c)
cdef bint _PLAIN_SUBPATTERN = False


def configure_parser(ops, maxrepeat, state_type, long str_flags):
    """Bind the constants the parser builds trees from (the compiler's module calls it)."""
    global _MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE
    global _RANGE, _MAXREPEAT, _State, _STR_FLAGS
    (_MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE,
     _RANGE) = ops
    _MAXREPEAT = maxrepeat
    _State = state_type
    _STR_FLAGS = str_flags
    global _PLAIN_SUBPATTERN
    probe = _SUBP_TYPE(_State(), [])
    _PLAIN_SUBPATTERN = sorted(vars(probe)) == ["data", "state", "width"] and probe.width is None


cdef object _subpattern(object state, list data):
    """``SubPattern(state, data)`` without running its Python ``__init__`` (which sets just
    these three attributes, as :func:`configure_parser` checks): a large pattern's tree has
    tens of thousands of them."""
    if not _PLAIN_SUBPATTERN:
        return _SUBP_TYPE(state, data)
    cdef object sp = _OBJECT_NEW(_SUBP_TYPE)
    sp.state = state
    sp.data = data
    sp.width = None
    return sp


class _Bail(Exception):
    pass


cdef inline bint _escapable(Py_UCS4 c):
    # "\\" and one of these is that character; ASCII letters and digits escape into classes,
    # categories, anchors, code points and group references (left to re)
    if c >= 128:
        return False
    return not (u'0' <= c <= u'9' or u'a' <= c <= u'z' or u'A' <= c <= u'Z')


DEF MAX_QUICK_DEPTH = 200  # deeper groups are left to re (its parser words the error)


DEF MAX_MEMO_GROUP = 512  # longer groups are parsed each time


cdef Py_ssize_t _group_end(str p, Py_ssize_t j, Py_ssize_t n):
    """The index of the ``)`` closing a group whose text starts at ``j``, or -1 when the group
    holds a lookaround, runs past :data:`MAX_MEMO_GROUP` characters or is not closed. Skips
    escapes and whole classes as the parser reads them (``[^]...]``); the parser itself confirms
    the end before a group is remembered."""
    cdef Py_ssize_t start = j, depth = 1
    cdef Py_UCS4 c
    while j < n and j - start <= MAX_MEMO_GROUP:
        c = p[j]
        if c == u'\\':
            j += 2
        elif c == u'[':
            j += 1
            if j < n and p[j] == u'^':
                j += 1
            if j < n and p[j] == u']':
                j += 1
            while j < n and p[j] != u']':
                j += 2 if p[j] == u'\\' else 1
            j += 1
        elif c == u'(':
            if j + 1 < n and p[j + 1] == u'?' and j + 2 < n and p[j + 2] != u':':
                return -1  # a lookaround (or a construct the parser leaves to re)
            depth += 1
            j += 1
        elif c == u')':
            depth -= 1
            if depth == 0:
                return j
            j += 1
        else:
            j += 1
    return -1


cdef inline bint _comparable(tuple item):
    """Whether ``re``'s parser could find ``item`` equal to another alternative's first item:
    items holding a SubPattern (alternations, repeats, groups, lookarounds) compare by that
    SubPattern's identity, and ``re`` builds a new one for every occurrence, so they are never
    factored out. (Trees here may share a group's items between occurrences: the same object
    in two alternatives must not be mistaken for a common prefix.)"""
    cdef object op = item[0]
    return not (op is _BRANCH or op is _MAX_REPEAT_OP or op is _MIN_REPEAT_OP
                or op is _SUBPATTERN or op is _ASSERT or op is _ASSERT_NOT)


cdef class _Parser:
    cdef str p
    cdef Py_ssize_t i, n, depth
    cdef object state
    cdef dict groups

    def __init__(self, str pattern, dict groups):
        self.p = pattern
        self.i = 0
        self.depth = 0
        self.n = len(pattern)
        self.state = _State()
        self.state.flags = _STR_FLAGS
        self.state.str = pattern
        self.groups = groups

    cdef object alternation(self):
        return _subpattern(self.state, self.alternation_items())

    cdef list alternation_items(self):
        # an explicit bound: a group's C frames are large, and the interpreter's recursion limit
        # (which callers may raise) does not bound the C stack
        if self.depth >= MAX_QUICK_DEPTH:
            raise _Bail
        self.depth += 1
        Py_EnterRecursiveCall(" while parsing a regex")
        try:
            return self._alternation_items()
        finally:
            Py_LeaveRecursiveCall()
            self.depth -= 1

    cdef list _alternation_items(self):
        cdef Py_ssize_t k
        """The items of an alternation's SubPattern (a lone sequence's own items)."""
        cdef list first = self.sequence_items()
        if self.i >= self.n or self.p[self.i] != u'|':
            return first
        cdef list datas = [first]
        while self.i < self.n and self.p[self.i] == u'|':
            self.i += 1
            datas.append(self.sequence_items())
        cdef list out = []
        cdef list d, items
        cdef object head, op, av
        cdef bint singles
        while True:  # every alternative starts alike: factor the first item out
            first = datas[0]
            if not first:
                break
            head = first[0]
            if not _comparable(head):
                break
            for k in range(1, len(datas)):
                d = datas[k]
                if not d or d[0] != head:
                    break
            else:
                out.append(head)
                for d in datas:
                    del d[0]
                continue
            break
        singles = True
        for d in datas:
            if len(d) != 1:
                singles = False
                break
        if singles:  # alternatives of one character each: a class
            items = []
            for d in datas:
                op, av = d[0]
                if op is _LITERAL:
                    items.append((op, av))
                elif op is _IN and av[0][0] is not _NEGATE:
                    items.extend(av)
                else:
                    break
            else:
                out.append((_IN, list(dict.fromkeys(items))))
                return out
        out.append((_BRANCH, (None, [_subpattern(self.state, d) for d in datas])))
        return out

    cdef list sequence_items(self):
        """The items of one alternative, groups inlined as ``re`` inlines them (a group not
        followed by a quantifier is inlined as soon as it closes; one that may be quantified is
        kept as an item until the quantifier is read, and inlined at the end if it was not)."""
        cdef str p = self.p
        cdef Py_ssize_t n = self.n
        cdef Py_ssize_t i = self.i
        cdef Py_ssize_t k
        cdef list data = []
        cdef list sub_items
        cdef Py_ssize_t end
        cdef object key
        cdef bint groups = False
        cdef bint positive
        cdef Py_UCS4 c, c2
        cdef object sub, op, av
        while i < n:
            c = p[i]
            if c == u'|' or c == u')':
                break
            elif c == u'\\':
                if i + 1 >= n or not _escapable(p[i + 1]):
                    raise _Bail
                data.append(_literal(<long>p[i + 1]))
                i += 2
            elif c == u'[':
                i = self.char_class(i + 1, data)
            elif c == u'(':
                if i + 2 >= n or p[i + 1] != u'?':
                    raise _Bail
                c2 = p[i + 2]
                if c2 == u':':
                    sub_items = None
                    end = _group_end(p, i + 3, n) if self.groups is not None else -1
                    if end >= 0:
                        key = p[i + 3:end]
                        sub_items = self.groups.get(key)
                    if sub_items is not None:
                        i = end + 1
                    else:
                        self.i = i + 3
                        sub_items = self.alternation_items()
                        i = self.close()
                        if end >= 0 and i == end + 1:
                            self.groups[key] = sub_items
                    if i < n and (p[i] == u'*' or p[i] == u'+' or p[i] == u'?' or p[i] == u'{'):
                        data.append((_SUBPATTERN, (None, 0, 0, _subpattern(self.state, sub_items))))
                        groups = True
                    else:
                        data.extend(sub_items)
                elif c2 == u'=' or c2 == u'!':
                    positive = c2 == u'='
                    self.i = i + 3
                    sub = self.alternation()
                    i = self.close()
                    if not sub.data:
                        raise _Bail  # (?!) is FAILURE
                    data.append((_ASSERT if positive else _ASSERT_NOT, (1, sub)))
                else:
                    raise _Bail
            elif c == u'.':
                data.append((_ANY, None))
                i += 1
            elif c == u'*' or c == u'+' or c == u'?' or c == u'{':
                i = self.repeat(i, data)
            elif c == u'^' or c == u'$':
                raise _Bail
            else:
                data.append(_literal(<long>c))
                i += 1
        self.i = i
        if groups:  # a group that is still an item (not repeated) is inlined, as re does
            for k in range(len(data) - 1, -1, -1):
                op, av = data[k]
                if op is _SUBPATTERN:
                    data[k:k + 1] = av[3].data
        return data

    cdef Py_ssize_t close(self) except -1:
        if self.i >= self.n or self.p[self.i] != u')':
            raise _Bail
        return self.i + 1

    cdef Py_ssize_t char_class(self, Py_ssize_t i, list data) except -1:
        cdef str p = self.p
        cdef Py_ssize_t n = self.n
        cdef list items = []
        cdef bint negate = i < n and p[i] == u'^'
        cdef bint first = True
        cdef Py_UCS4 c, d
        cdef long lo, hi
        if negate:
            i += 1
        if i < n and p[i] == u'[':  # re warns (a possible nested set)
            raise _Bail
        if i == n:
            raise _Bail
        while True:
            if i >= n:
                raise _Bail
            c = p[i]
            i += 1
            if c == u']' and not first:
                break
            first = False
            if c == u'\\':
                if i >= n or not _escapable(p[i]):
                    raise _Bail
                lo = <long>p[i]
                i += 1
            elif (c == u'-' or c == u'&' or c == u'~' or c == u'|') and items and i < n and p[i] == c:
                raise _Bail  # re warns (a possible set operation)
            else:
                lo = <long>c
            if i < n and p[i] == u'-':
                i += 1
                if i >= n:
                    raise _Bail
                d = p[i]
                i += 1
                if d == u']':
                    items.append(_literal(lo))
                    items.append(_literal(45))  # "-"
                    break
                if d == u'\\':
                    if i >= n or not _escapable(p[i]):
                        raise _Bail
                    hi = <long>p[i]
                    i += 1
                elif d == u'-':
                    raise _Bail  # re warns
                else:
                    hi = <long>d
                if hi < lo:
                    raise _Bail
                items.append((_RANGE, (lo, hi)))
            else:
                items.append(_literal(lo))
        items = list(dict.fromkeys(items))
        if len(items) == 1 and items[0][0] is _LITERAL:
            data.append((_NOT_LITERAL, items[0][1]) if negate else items[0])
        else:
            if negate:
                items.insert(0, (_NEGATE, None))
            data.append((_IN, items))
        return i

    cdef Py_ssize_t repeat(self, Py_ssize_t i, list data) except -1:
        cdef str p = self.p
        cdef Py_ssize_t n = self.n
        cdef Py_UCS4 c = p[i]
        cdef Py_ssize_t j, k
        cdef object lo, hi, op, av, body
        cdef str a, b
        i += 1
        if c == u'?':
            lo, hi = 0, 1
        elif c == u'*':
            lo, hi = 0, _MAXREPEAT
        elif c == u'+':
            lo, hi = 1, _MAXREPEAT
        else:  # "{"
            j = i
            while j < n and u'0' <= p[j] <= u'9':
                j += 1
            a = p[i:j]
            if j < n and p[j] == u',':
                k = j + 1
                while k < n and u'0' <= p[k] <= u'9':
                    k += 1
                b = p[j + 1:k]
            else:
                k = j
                b = a
            if k >= n or p[k] != u'}' or (not a and not b and k == i):
                data.append(_literal(123))  # "{" is a literal ("{}" too)
                return i
            lo = int(a) if a else 0
            hi = int(b) if b else _MAXREPEAT
            if lo >= _MAXREPEAT or (b and hi >= _MAXREPEAT) or hi < lo:
                raise _Bail
            i = k + 1
        if not data:
            raise _Bail
        op, av = data[-1]
        if op is _AT or op is _MAX_REPEAT_OP or op is _MIN_REPEAT_OP or op is _POSSESSIVE_OP:
            raise _Bail
        if op is _SUBPATTERN and av[0] is None and not av[1] and not av[2]:
            body = av[3]
        else:
            body = _subpattern(self.state, [data[-1]])
        if i < n and p[i] == u'?':
            data[-1] = (_MIN_REPEAT_OP, (lo, hi, body))
            i += 1
        elif i < n and p[i] == u'+':
            raise _Bail  # possessive
        else:
            data[-1] = (_MAX_REPEAT_OP, (lo, hi, body))
        return i


def quick_parse(str pattern, dict groups=None):
    """re's parse tree of ``pattern`` (``re._parser.parse``), or None when the pattern is
    outside the subset this parser builds exactly (then re parses it, and words any error).

    ``groups``: a memo from the text inside ``(?:...)`` to its items, shared by the patterns
    parsed together (a JSON Schema grammar's terminals spell the same few dozen groups —
    ``(?:e|\\u0065)`` — thousands of times). A group's items depend on its text alone, so
    trees that share them are the trees parsing each would build; the items are never changed
    once built (every list the parser edits is its own), and groups holding a lookaround are
    not shared (the compiler gives each lookahead object its own condition)."""
    cdef _Parser parser = _Parser(pattern, groups)
    try:
        tree = parser.alternation()
        if parser.i != parser.n:  # a ")" with no group open
            return None
        return tree
    except (_Bail, RecursionError):
        return None


# ------------------------------------------------------------------ shape and block indexes
cdef object _POSSESSIVE_REPEAT, _ATOMIC_GROUP, _GROUPREF_EXISTS, _AT_BOUNDARY, _AT_NON_BOUNDARY
cdef int _K_CHAR, _K_SPLIT, _K_REP_ENTER, _K_REP_CHECK, _K_LOOK, _K_LB, _K_BOUND


def configure_shape(ops, kinds):
    """Bind the remaining sre constants and the instruction kinds (the compiler's module)."""
    global _POSSESSIVE_REPEAT, _ATOMIC_GROUP, _GROUPREF_EXISTS, _AT_BOUNDARY, _AT_NON_BOUNDARY
    global _K_CHAR, _K_SPLIT, _K_REP_ENTER, _K_REP_CHECK, _K_LOOK, _K_LB, _K_BOUND
    _POSSESSIVE_REPEAT, _ATOMIC_GROUP, _GROUPREF_EXISTS, _AT_BOUNDARY, _AT_NON_BOUNDARY = ops
    _K_CHAR, _K_SPLIT, _K_REP_ENTER, _K_REP_CHECK, _K_LOOK, _K_LB, _K_BOUND = kinds


def shape(items):
    """``glrmask.lexer.program._shape``: ``(minimum width, reads behind)`` of a parse tree."""
    return _shape(items)


cdef tuple _shape(object items):
    cdef list data = items.data if type(items) is _SUBP_TYPE else items
    cdef object width = 0
    cdef bint reads = False
    cdef object op, av, w, best, alt
    cdef bint r
    cdef tuple sub
    Py_EnterRecursiveCall(" while measuring a regex")
    try:
        for op, av in data:
            if op is _LITERAL or op is _IN or op is _NOT_LITERAL or op is _ANY:
                width += 1
            elif op is _SUBPATTERN:
                sub = _shape(av[-1])
                width += sub[0]
                reads = reads or sub[1]
            elif op is _BRANCH:
                best = None
                r = False
                for alt in av[1]:
                    sub = _shape(alt)
                    if best is None or sub[0] < best:
                        best = sub[0]
                    r = r or sub[1]
                width += best
                reads = reads or r
            elif op is _MAX_REPEAT_OP or op is _MIN_REPEAT_OP or op is _POSSESSIVE_REPEAT:
                sub = _shape(av[2])
                width += av[0] * sub[0]
                reads = reads or sub[1]
            elif op is _ATOMIC_GROUP:
                sub = _shape(av)
                width += sub[0]
                reads = reads or sub[1]
            elif op is _ASSERT or op is _ASSERT_NOT:
                reads = reads or av[0] != 1 or _shape(av[1])[1]
            elif op is _AT:
                reads = reads or av is _AT_BOUNDARY or av is _AT_NON_BOUNDARY
            elif op is _GROUPREF_EXISTS:
                reads = reads or _shape(av[1])[1] or (av[2] is not None and _shape(av[2])[1])
    finally:
        Py_LeaveRecursiveCall()
    return width, reads


cdef bytes _uint32_bytes(Py_ssize_t n, unsigned int **out):
    cdef bytes raw = PyBytes_FromStringAndSize(NULL, n * 4)
    out[0] = <unsigned int *>PyBytes_AS_STRING(raw)
    return raw


def block_indexes(bytes kinds, bytes a):
    """The indexes, in a block's kind bytes, of its CHARs, SPLITs, repeat instructions
    (REP_ENTERs then REP_CHECKs), LOOKs, BOUNDs, and of the instructions whose ``c`` is a pc
    (REP_CHECKs, LOOKs, LBs), each as uint32 bytes, and the class ids (``a``, int32 bytes) of
    the CHARs in order of first use: what ``glrmask.lexer.program._Block.capture`` keeps."""
    cdef Py_ssize_t i, n = len(kinds)
    cdef const unsigned char *view = <const unsigned char *>PyBytes_AS_STRING(kinds)
    cdef const int *cls = <const int *>PyBytes_AS_STRING(a)
    cdef Py_ssize_t counts[16]
    cdef unsigned int *chars
    cdef unsigned int *splits
    cdef unsigned int *reps
    cdef unsigned int *looks
    cdef unsigned int *bounds
    cdef unsigned int *pcs_c
    cdef Py_ssize_t nc = 0, ns = 0, nr = 0, nl = 0, nb = 0, np_ = 0, ne, nk
    cdef int k
    cdef int c
    cdef int seen_max = -1
    cdef bytearray seen = bytearray()
    cdef list order = []
    cdef Py_ssize_t nlook = 0, nlb = 0, nchk = 0
    if len(a) != 4 * n:
        raise ValueError("kinds and operands of unequal lengths")
    for i in range(16):
        counts[i] = 0
    for i in range(n):
        k = view[i]
        if k < 16:
            counts[k] += 1
    out_chars = _uint32_bytes(counts[_K_CHAR], &chars)
    out_splits = _uint32_bytes(counts[_K_SPLIT], &splits)
    out_reps = _uint32_bytes(counts[_K_REP_ENTER] + counts[_K_REP_CHECK], &reps)
    out_looks = _uint32_bytes(counts[_K_LOOK], &looks)
    out_bounds = _uint32_bytes(counts[_K_BOUND], &bounds)
    out_pcs_c = _uint32_bytes(counts[_K_REP_CHECK] + counts[_K_LOOK] + counts[_K_LB], &pcs_c)
    ne = counts[_K_REP_ENTER]  # REP_ENTERs first, then REP_CHECKs
    nk = counts[_K_REP_CHECK]  # REP_CHECKs first, then LOOKs, then LBs
    for i in range(n):
        k = view[i]
        if k == _K_CHAR:
            chars[nc] = <unsigned int>i
            nc += 1
            c = cls[i]
            if c > seen_max:
                seen.extend(bytes(c - seen_max))
                seen_max = c
            if not seen[c]:
                seen[c] = 1
                order.append(c)
        elif k == _K_SPLIT:
            splits[ns] = <unsigned int>i
            ns += 1
        elif k == _K_REP_ENTER:
            reps[nr] = <unsigned int>i
            nr += 1
        elif k == _K_REP_CHECK:
            reps[ne + nchk] = <unsigned int>i
            pcs_c[nchk] = <unsigned int>i
            nchk += 1
        elif k == _K_LOOK:
            looks[nl] = <unsigned int>i
            nl += 1
            pcs_c[nk + nlook] = <unsigned int>i
            nlook += 1
        elif k == _K_LB:
            pcs_c[nk + counts[_K_LOOK] + nlb] = <unsigned int>i
            nlb += 1
        elif k == _K_BOUND:
            bounds[nb] = <unsigned int>i
            nb += 1
    return out_chars, out_splits, out_reps, out_looks, out_bounds, out_pcs_c, tuple(order)


# ------------------------------------------------------------------ copies of blocks
cdef inline int _moved(int v, int delta, int lo, int cont, bint pure) noexcept nogil:
    if pure or v >= lo:
        return v + delta
    return cont


cdef inline const unsigned int *_u32(bytes raw, Py_ssize_t *n):
    n[0] = len(raw) // 4
    return <const unsigned int *>PyBytes_AS_STRING(raw)


def stamp(array.array kind, array.array a, array.array b, array.array c, array.array d,
          array.array targets, bytes kinds, bytes ba, bytes bb, bytes bc, bytes bd, bytes bt,
          bytes chars, bytes reps, bytes pcs_c, bytes looks_a, bytes looks_b, bytes splits,
          int delta, int lo, int cont, bint pure, int rep_shift, int look_shift,
          int target_shift, array.array class_map):
    """:func:`_stamp_arrays` for ``glrmask.lexer.program._Block.stamp``."""
    _stamp_arrays(kind, a, b, c, d, targets, kinds, ba, bb, bc, bd, bt, chars, reps, pcs_c, looks_a,
                  looks_b, splits, delta, lo, cont, pure, rep_shift, look_shift, target_shift, class_map)


cdef int _stamp_arrays(array.array kind, array.array a, array.array b, array.array c, array.array d,
                       array.array targets, bytes kinds, bytes ba, bytes bb, bytes bc, bytes bd, bytes bt,
                       bytes chars, bytes reps, bytes pcs_c, bytes looks_a, bytes looks_b, bytes splits,
                       int delta, int lo, int cont, bint pure, int rep_shift, int look_shift,
                       int target_shift, array.array class_map) except -1:
    """Append a block's copy to a program's arrays (``kind`` .. ``targets``) and relocate it in
    place: ``glrmask.lexer.program._Block.stamp`` — every pc at or after ``lo`` (the block's
    first pc) moved by ``delta``, the one before it replaced by ``cont`` (or, ``pure``, every
    pc moved by ``delta``); repeat, lookahead and target-pool ids shifted; class ids mapped
    through ``class_map`` (None: unchanged). The block's fields are bytes (its operands int32,
    its index lists uint32)."""
    cdef Py_ssize_t size = len(kinds)
    cdef Py_ssize_t base = Py_SIZE(a)
    cdef Py_ssize_t tbase = Py_SIZE(targets)
    cdef Py_ssize_t nt = len(bt) // 4
    cdef Py_ssize_t j, i, n
    cdef int *pa
    cdef int *pb
    cdef int *pc_
    cdef int *pd
    cdef int *pt
    cdef const unsigned int *idx
    cdef int *cmap = NULL
    if len(ba) != 4 * size or len(bb) != 4 * size or len(bc) != 4 * size or len(bd) != 4 * size:
        raise ValueError("block fields of unequal lengths")
    if Py_SIZE(kind) != base or Py_SIZE(b) != base or Py_SIZE(c) != base or Py_SIZE(d) != base:
        raise ValueError("program fields of unequal lengths")
    array.extend_buffer(kind, PyBytes_AS_STRING(kinds), size)
    array.extend_buffer(a, PyBytes_AS_STRING(ba), size)
    array.extend_buffer(b, PyBytes_AS_STRING(bb), size)
    array.extend_buffer(c, PyBytes_AS_STRING(bc), size)
    array.extend_buffer(d, PyBytes_AS_STRING(bd), size)
    array.extend_buffer(targets, PyBytes_AS_STRING(bt), nt)
    pa = a.data.as_ints + base
    pb = b.data.as_ints + base
    pc_ = c.data.as_ints + base
    pd = d.data.as_ints + base
    pt = targets.data.as_ints + tbase
    if class_map is not None:
        cmap = class_map.data.as_ints
    idx = _u32(chars, &n)
    for j in range(n):
        i = idx[j]
        pb[i] = _moved(pb[i], delta, lo, cont, pure)
        if cmap != NULL:
            pa[i] = cmap[pa[i]]
    idx = _u32(reps, &n)
    for j in range(n):
        i = idx[j]
        pb[i] = _moved(pb[i], delta, lo, cont, pure)
        pa[i] += rep_shift
    idx = _u32(pcs_c, &n)
    for j in range(n):
        i = idx[j]
        pc_[i] = _moved(pc_[i], delta, lo, cont, pure)
    idx = _u32(looks_a, &n)
    for j in range(n):
        pa[idx[j]] += look_shift
    idx = _u32(looks_b, &n)
    for j in range(n):
        i = idx[j]
        pb[i] += look_shift
        pd[i] = _moved(pd[i], delta, lo, cont, pure)
    idx = _u32(splits, &n)
    for j in range(n):
        pa[idx[j]] += target_shift
    for j in range(nt):
        pt[j] = _moved(pt[j], delta, lo, cont, pure)
    return 0


# ------------------------------------------------------------------ large top-level lookaheads
def segment_cuts(str p, Py_ssize_t min_len):
    """``(start, end)`` of each top-level lookahead of at least ``min_len`` characters, or
    None where ``glrmask.lexer.program._parse_by_segments`` must not split the pattern (a
    top-level ``|``, a group it does not split around, unbalanced parentheses, a quantifier
    on a large lookahead, or none found). Skips escapes and whole character classes, as the
    scanner regex ``_SEGMENT_TOKENS`` there does."""
    cdef Py_ssize_t n = len(p)
    cdef Py_ssize_t i = 0, j, depth = 0, start = -1, end
    cdef Py_UCS4 c, c2, e
    cdef list cuts = []
    cdef bint closed
    while i < n:
        c = p[i]
        if c == u'\\':
            i += 2 if i + 1 < n else 1
        elif c == u'[':
            j = i + 1  # a whole class: [^]...] with escapes; otherwise "[" is a plain character
            if j < n and p[j] == u'^':
                j += 1
            if j < n and p[j] == u']':
                j += 1
            closed = False
            while j < n:
                e = p[j]
                if e == u'\\':
                    if j + 1 >= n:
                        break
                    j += 2
                elif e == u']':
                    closed = True
                    break
                else:
                    j += 1
            i = j + 1 if closed else i + 1
        elif c == u'(':
            if i + 2 < n and p[i + 1] == u'?':
                c2 = p[i + 2]
                if c2 == u'=' or c2 == u'!':
                    if depth == 0:
                        start = i
                    depth += 1
                    i += 3
                elif c2 == u'<':
                    if i + 3 < n and (p[i + 3] == u'=' or p[i + 3] == u'!'):
                        depth += 1
                        i += 4
                    else:
                        return None
                elif c2 == u':':
                    depth += 1
                    i += 1
                else:
                    return None  # (?i: (?P< (?# (?( (?> ...
            else:
                depth += 1
                i += 1
        elif c == u')':
            depth -= 1
            if depth < 0:
                return None
            i += 1
            if depth == 0 and start >= 0:
                end = i
                if end - start >= min_len:
                    if end < n and p[end] in u"*+?{":
                        return None
                    cuts.append((start, end))
                start = -1
        elif c == u'|':
            if depth == 0:
                return None
            i += 1
        else:
            i += 1
    if depth != 0 or not cuts:
        return None
    return cuts


# ------------------------------------------------------------------ byte partitions
def partition(tuple classes, high_groups):
    """``(group of each byte, representative of each group)`` of a set of ByteClasses, each a
    tuple: ``glrmask.lexer.program._byte_partition`` (the reference, in Python) in one call.
    ASCII bytes are grouped by their membership in every class (refined class by class from
    its ``ascii_edges`` toggle points, labels numbered by smallest byte); the bytes above 0x7F
    by ``high_groups(wide)`` (the classes holding a non-ASCII code point; one group when there
    is none), numbered after the ASCII ones. No class at all: one group."""
    cdef int label[128]
    cdef int n_labels = 1
    cdef int b, n_high, g
    cdef object bc, pts, cps, high_of
    cdef list wide = []
    cdef list group_of
    cdef list reps
    if not classes:
        return (0,) * 256, (0,)
    for b in range(128):
        label[b] = 0
    for bc in classes:
        cps = bc.cps
        if cps and cps[-1][1] >= 0x80:
            wide.append(bc)
        pts = bc._edges
        if pts is None:
            pts = bc.ascii_edges()
        n_labels = refine_ascii_labels(label, n_labels, pts)
    group_of = [0] * 256
    reps = []
    for b in range(128):
        g = label[b]
        group_of[b] = g
        if g == len(reps):
            reps.append(b)
    if wide:
        high_of = high_groups(wide)[1]
        for b in range(128):
            g = n_labels + <int>high_of[b]
            group_of[128 + b] = g
            if g == len(reps):
                reps.append(128 + b)
    else:
        for b in range(128, 256):
            group_of[b] = n_labels
        reps.append(128)
    return tuple(group_of), tuple(reps)


# ------------------------------------------------------------------ stepping a waiting pc
cdef int _MID_K = -1
cdef int _CLS_DEAD = -1, _CLS_FINAL = -2


def configure_advance(int mid_kind, int dead, int final):
    """Bind the MID kind and the class automaton's DEAD / FINAL results (the compiler's module)."""
    global _MID_K, _CLS_DEAD, _CLS_FINAL
    _MID_K = mid_kind
    _CLS_DEAD = dead
    _CLS_FINAL = final


cdef class _ProgView:
    """The program's arrays, class list and memos, fetched once per program instead of eight
    attribute lookups per :func:`advance` (a cold dynamic mask advances ~200 pcs, most of them
    memo misses: the attribute lookups were half of each call). The objects are the program's
    own — its arrays grow in place, its dicts and class list are never rebound — so the view
    stays exact while the program lives; it is dropped when the program goes."""
    cdef object ref  # weak reference to the program
    cdef array.array kind, A, B, Cc, D
    cdef list classes
    cdef dict memo, mid_ids
    # per class id, its step from the start state on each byte (INT32_MIN: not asked yet): a
    # CHAR instruction's advance read in C, neither memo dict touched — the pcs of a repeat's
    # copies are all distinct, so the (pc, byte) memo misses once per copy, while the class is
    # one for every copy
    cdef int32_t* first_step
    cdef Py_ssize_t n_first

    def __dealloc__(self):
        free(self.first_step)

    cdef int32_t* first_row(self, Py_ssize_t cls) except NULL:
        """Class ``cls``'s row of :attr:`first_step`, the table grown to hold it."""
        cdef Py_ssize_t n, k
        cdef int32_t* grown
        if cls >= self.n_first:
            n = max(2 * self.n_first, cls + 64)
            grown = <int32_t*>realloc(self.first_step, n * 256 * sizeof(int32_t))
            if grown == NULL:
                raise MemoryError("lexer: out of memory")
            for k in range(self.n_first * 256, n * 256):
                grown[k] = INT32_MIN
            self.first_step = grown
            self.n_first = n
        return self.first_step + cls * 256


cdef _ProgView _view = None  # the view of the program advanced last


def _forget_view(ref) -> None:
    global _view
    if _view is not None and _view.ref is ref:
        _view = None


cdef _ProgView _prog_view(object prog):
    global _view
    cdef _ProgView v = _view
    if v is not None and v.ref() is prog:
        return v
    import weakref
    v = _ProgView.__new__(_ProgView)
    v.ref = weakref.ref(prog, _forget_view)
    v.kind = prog.kind
    v.A = prog.a
    v.B = prog.b
    v.Cc = prog.c
    v.D = prog.d
    v.classes = prog.classes
    v.memo = prog._advanced
    v.mid_ids = prog._mid_ids
    _view = v
    return v


cdef int advance_int(object prog, Py_ssize_t pc, int byte) except -3:
    """:func:`advance` as a C int, a CHAR instruction whose class row already answers the byte
    read without a Python object (the lazy lexer's native lane steps: ``glrmask_ext.lazy_step``)."""
    cdef _ProgView v = _prog_view(prog)
    cdef int cls
    cdef int32_t first
    if 0 <= pc < Py_SIZE(v.kind) and 0 <= byte < 256 and v.kind.data.as_uchars[pc] == _CHAR_K:
        cls = v.A.data.as_ints[pc]
        if 0 <= cls < v.n_first:
            first = v.first_step[cls * 256 + byte]
            if first == _CLS_DEAD:
                return -1
            if first == _CLS_FINAL:
                return v.B.data.as_ints[pc]
    return advance(prog, pc, byte)


cpdef object advance(object prog, Py_ssize_t pc, int byte):
    """``glrmask.lexer.program.Program.advance`` (MIDs interned in the same ``_mid_ids``, a MID's
    step memoized in the same ``_advanced`` dict): the program's arrays read in C, a CHAR's step
    from its class's row (:class:`_ProgView`), a MID's from the class's memoized step. Every
    lane, atom and condition step of the lexer goes through it (``glrmask_ext.lazy_step`` calls
    it as a C function: ``lexer_compile.pxd``)."""
    cdef _ProgView v = _prog_view(prog)
    cdef array.array kind = v.kind
    cdef array.array A = v.A
    cdef array.array B = v.B
    cdef array.array Cc = v.Cc
    cdef array.array D = v.D
    cdef Py_ssize_t n = Py_SIZE(kind)
    if not 0 <= pc < n:
        raise IndexError("pc out of range")
    if not 0 <= byte < 256:
        raise ValueError("not a byte")
    cdef int k = kind.data.as_uchars[pc]
    cdef int cls = A.data.as_ints[pc]
    cdef int cstate, nxt, r
    cdef int32_t first
    if not 0 <= cls < len(v.classes):  # (the row table is sized by class ids)
        raise IndexError("class id out of range")
    if k == _CHAR_K:
        first = v.first_row(cls)[byte]
        if first == _CLS_DEAD:
            return -1
        if first == _CLS_FINAL:
            return B.data.as_ints[pc]
    cdef dict memo = v.memo
    cdef object key = (pc << 8) | byte
    cdef object hit = memo.get(key)
    if hit is not None:
        return hit
    if k == _CHAR_K:
        cstate = 0
        nxt = B.data.as_ints[pc]
    else:
        cstate = B.data.as_ints[pc]
        nxt = Cc.data.as_ints[pc]
    cdef object bc = v.classes[cls]
    cdef object got = (<dict>(<list>bc._trans)[cstate]).get(byte)
    if got is None:
        r = bc.step(cstate, byte)
    else:
        r = got
    if k == _CHAR_K:
        v.first_row(cls)[byte] = r  # (the row read again: the step ran Python code)
        if r == _CLS_DEAD:
            return -1
        if r == _CLS_FINAL:
            return nxt
    cdef object res
    cdef object mkey, mid
    if r == _CLS_DEAD:
        res = -1
    elif r == _CLS_FINAL:
        res = nxt
    else:
        mkey = (cls, r, nxt)
        mid = v.mid_ids.get(mkey)
        if mid is None:
            array.resize_smart(kind, n + 1)
            array.resize_smart(A, n + 1)
            array.resize_smart(B, n + 1)
            array.resize_smart(Cc, n + 1)
            array.resize_smart(D, n + 1)
            kind.data.as_uchars[n] = <unsigned char>_MID_K
            A.data.as_ints[n] = cls
            B.data.as_ints[n] = r
            Cc.data.as_ints[n] = nxt
            D.data.as_ints[n] = 0
            mid = n
            v.mid_ids[mkey] = mid
        res = mid
    memo[key] = res
    return res


# ------------------------------------------------------------------ class ids
def class_ids(prog, classes):
    """``[prog._class_id_of(bc) for bc in classes]`` in one call: each ByteClass's id in the
    program, numbered in order of first use (a cached terminal's classes, interned each time it
    is copied into a program)."""
    cdef dict known = prog._class_ids
    cdef list table = prog.classes
    cdef list out = []
    cdef object bc, key, cid
    for bc in classes:
        key = id(bc)
        cid = known.get(key)
        if cid is None:
            cid = len(table)
            table.append(bc)
            known[key] = cid
        out.append(cid)
    return out
