# cython: language_level=3, wraparound=True
"""The lexer compiler's hot paths in C: a sequence of parse-tree items compiled back to front
(:func:`seq_plain`), and a parser for the regex subset JSON Schema lowerings emit that builds
exactly ``re``'s parse tree (:func:`quick_parse`).

Why: compiling a large terminal (a JSON Schema "not a known key" guard is thousands of
literals and alternations) is mostly this loop — one CHAR instruction per single-character
node, a SPLIT per alternation, a recursion per group — and in Python each instruction costs
several hundred nanoseconds of interpreter overhead. :func:`seq_plain` does exactly what
``glrmask.lexer.program._Compiler.seq`` does for a terminal that never reads behind (no widths
tracked): the same instructions in the same order, the same budget checks (through
``Program._new`` at every 1024th instruction and at the limit), every other item handed back
to the compiler's own ``item``. Recursion is counted against Python's limit, as the Python
loop's would be.

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


cdef object _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH, _CHAR, _SPLIT, _SUBP_TYPE
cdef object _node_class
cdef long _CLASS_FLAGS = 0


def configure(ops, long class_flags, char_kind, split_kind, subpattern_type, node_class):
    """Bind the constants the loop compares with (sre's op singletons, the instruction kinds,
    ``SubPattern``, ``charsets.node_class``): the compiler's module calls it once at import."""
    global _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH, _CHAR, _SPLIT, _SUBP_TYPE
    global _node_class, _CLASS_FLAGS
    _LITERAL, _NOT_LITERAL, _ANY, _IN, _SUBPATTERN, _BRANCH = ops
    _CLASS_FLAGS = class_flags
    _CHAR = char_kind
    _SPLIT = split_kind
    _SUBP_TYPE = subpattern_type
    _node_class = node_class


def seq_plain(comp, items, long flags, nxt, inside):
    """``_Compiler.seq(items, flags, nxt, 0, inside)`` for a compiler with ``track_mb`` off."""
    return _seq(comp, items, flags, nxt, inside)


cdef object _seq(object comp, object items, long flags, object nxt, object inside):
    cdef list data = items.data if type(items) is _SUBP_TYPE else items
    cdef object p = comp.p
    cdef list kind = p.kind
    cdef list A = p.a
    cdef list B = p.b
    cdef list Cc = p.c
    cdef list D = p.d
    cdef Py_ssize_t max_nodes = p.max_nodes
    cdef dict classes = comp._classes
    cdef long rel = flags & _CLASS_FLAGS
    cdef Py_ssize_t k, n
    cdef object pc = nxt
    cdef object op, av, key, cid, targets, alt
    cdef list alts
    Py_EnterRecursiveCall(" while compiling a regex")
    try:
        for k in range(len(data) - 1, -1, -1):
            op, av = data[k]
            if op is _LITERAL or op is _IN or op is _NOT_LITERAL or op is _ANY:
                key = (op, id(av) if op is _IN else av, rel)
                cid = classes.get(key)
                if cid is None:
                    cid = p._class_id_of(_node_class(op, av, flags))
                    classes[key] = cid
                n = len(kind)
                if n >= max_nodes or not n & 1023:
                    pc = p._new(_CHAR, cid, pc)
                else:
                    kind.append(_CHAR)
                    A.append(cid)
                    B.append(pc)
                    Cc.append(None)
                    D.append(None)
                    pc = n
            elif op is _SUBPATTERN and not av[1] and not av[2]:  # a group, same flags
                pc = _seq(comp, av[3], flags, pc, inside)
            elif op is _BRANCH:
                alts = av[1]
                targets = tuple([_seq(comp, alt, flags, pc, inside) for alt in alts])
                n = len(kind)
                if n >= max_nodes or not n & 1023:
                    pc = p._new(_SPLIT, targets)
                else:
                    kind.append(_SPLIT)
                    A.append(targets)
                    B.append(None)
                    Cc.append(None)
                    D.append(None)
                    pc = n
            else:
                pc = comp.item(op, av, flags, pc, 0, inside)
    finally:
        Py_LeaveRecursiveCall()
    return pc


# ------------------------------------------------------------------ the quick parser
cdef object _MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE
cdef object _RANGE, _MAXREPEAT, _State
cdef long _STR_FLAGS = 0


def configure_parser(ops, maxrepeat, state_type, long str_flags):
    """Bind the constants the parser builds trees from (the compiler's module calls it)."""
    global _MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE
    global _RANGE, _MAXREPEAT, _State, _STR_FLAGS
    (_MAX_REPEAT_OP, _MIN_REPEAT_OP, _POSSESSIVE_OP, _AT, _ASSERT, _ASSERT_NOT, _NEGATE,
     _RANGE) = ops
    _MAXREPEAT = maxrepeat
    _State = state_type
    _STR_FLAGS = str_flags


class _Bail(Exception):
    pass


cdef inline bint _escapable(Py_UCS4 c):
    # "\\" and one of these is that character; ASCII letters and digits escape into classes,
    # categories, anchors, code points and group references (left to re)
    if c >= 128:
        return False
    return not (u'0' <= c <= u'9' or u'a' <= c <= u'z' or u'A' <= c <= u'Z')


DEF MAX_QUICK_DEPTH = 200  # deeper groups are left to re (its parser words the error)


cdef class _Parser:
    cdef str p
    cdef Py_ssize_t i, n, depth
    cdef object state

    def __init__(self, str pattern):
        self.p = pattern
        self.i = 0
        self.depth = 0
        self.n = len(pattern)
        self.state = _State()
        self.state.flags = _STR_FLAGS
        self.state.str = pattern

    cdef object alternation(self):
        # an explicit bound: a group's C frames are large, and the interpreter's recursion limit
        # (which callers may raise) does not bound the C stack
        if self.depth >= MAX_QUICK_DEPTH:
            raise _Bail
        self.depth += 1
        Py_EnterRecursiveCall(" while parsing a regex")
        try:
            return self._alternation()
        finally:
            Py_LeaveRecursiveCall()
            self.depth -= 1

    cdef object _alternation(self):
        cdef list alts = [self.sequence()]
        while self.i < self.n and self.p[self.i] == u'|':
            self.i += 1
            alts.append(self.sequence())
        if len(alts) == 1:
            return alts[0]
        cdef list out = []
        cdef list datas = [a.data for a in alts]
        cdef list first, d, items
        cdef object head, op, av
        while True:  # every alternative starts alike: factor the first item out
            first = datas[0]
            if not first:
                break
            head = first[0]
            for d in datas:
                if not d or d[0] != head:
                    break
            else:
                out.append(head)
                for d in datas:
                    del d[0]
                continue
            break
        items = []
        for d in datas:  # alternatives of one character each: a class
            if len(d) != 1:
                break
            op, av = d[0]
            if op is _LITERAL:
                items.append((op, av))
            elif op is _IN and av[0][0] is not _NEGATE:
                items.extend(av)
            else:
                break
        else:
            out.append((_IN, list(dict.fromkeys(items))))
            return _SUBP_TYPE(self.state, out)
        out.append((_BRANCH, (None, alts)))
        return _SUBP_TYPE(self.state, out)

    cdef object sequence(self):
        cdef str p = self.p
        cdef Py_ssize_t n = self.n
        cdef Py_ssize_t i = self.i
        cdef Py_ssize_t k
        cdef list data = []
        cdef bint groups = False
        cdef bint positive
        cdef Py_UCS4 c
        cdef object sub, op, av
        while i < n:
            c = p[i]
            if c == u'|' or c == u')':
                break
            elif c == u'\\':
                if i + 1 >= n or not _escapable(p[i + 1]):
                    raise _Bail
                data.append((_LITERAL, <long>p[i + 1]))
                i += 2
            elif c == u'[':
                i = self.char_class(i + 1, data)
            elif c == u'(':
                if p.startswith(u"(?:", i):
                    self.i = i + 3
                    sub = self.alternation()
                    i = self.close()
                    data.append((_SUBPATTERN, (None, 0, 0, sub)))
                    groups = True
                elif p.startswith(u"(?=", i) or p.startswith(u"(?!", i):
                    positive = p[i + 2] == u'='
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
                data.append((_LITERAL, <long>c))
                i += 1
        self.i = i
        if groups:  # a group that is still an item (not repeated) is inlined, as re does
            for k in range(len(data) - 1, -1, -1):
                op, av = data[k]
                if op is _SUBPATTERN:
                    data[k:k + 1] = av[3].data
        return _SUBP_TYPE(self.state, data)

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
                    items.append((_LITERAL, lo))
                    items.append((_LITERAL, 45))  # "-"
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
                items.append((_LITERAL, lo))
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
                data.append((_LITERAL, 123))  # "{" is a literal ("{}" too)
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
            body = _SUBP_TYPE(self.state, [data[-1]])
        if i < n and p[i] == u'?':
            data[-1] = (_MIN_REPEAT_OP, (lo, hi, body))
            i += 1
        elif i < n and p[i] == u'+':
            raise _Bail  # possessive
        else:
            data[-1] = (_MAX_REPEAT_OP, (lo, hi, body))
        return i


def quick_parse(str pattern):
    """re's parse tree of ``pattern`` (``re._parser.parse``), or None when the pattern is
    outside the subset this parser builds exactly (then re parses it, and words any error)."""
    cdef _Parser parser = _Parser(pattern)
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


def block_indexes(bytes kinds):
    """The indexes, in a block's kind bytes, of its CHARs, SPLITs, repeat instructions
    (REP_ENTERs then REP_CHECKs), LOOKs, BOUNDs, and of the instructions whose ``c`` is a pc
    (REP_CHECKs, LOOKs, LBs): ``glrmask.lexer.program._Block.capture``'s six lists."""
    cdef list chars = [], splits = [], enters = [], checks = [], looks = [], lbs = [], bounds = []
    cdef Py_ssize_t i, n = len(kinds)
    cdef const unsigned char[:] view = kinds
    cdef int k
    for i in range(n):
        k = view[i]
        if k == _K_CHAR:
            chars.append(i)
        elif k == _K_SPLIT:
            splits.append(i)
        elif k == _K_REP_ENTER:
            enters.append(i)
        elif k == _K_REP_CHECK:
            checks.append(i)
        elif k == _K_LOOK:
            looks.append(i)
        elif k == _K_LB:
            lbs.append(i)
        elif k == _K_BOUND:
            bounds.append(i)
    return chars, splits, enters + checks, looks, bounds, checks + looks + lbs


# ------------------------------------------------------------------ copies of blocks
cdef inline object _moved(object v, Py_ssize_t delta, Py_ssize_t lo, object cont, bint pure):
    cdef Py_ssize_t x = v
    if pure or x >= lo:
        return x + delta
    return cont


def relocate(list a, list b, list c, list d, const unsigned int[:] chars,
             const unsigned int[:] reps, const unsigned int[:] pcs_c,
             const unsigned int[:] looks_b, const unsigned int[:] splits, Py_ssize_t delta,
             Py_ssize_t lo, cont, bint pure):
    """The pc fields of a block's copy (``a``..``d``, copies of the block's lists, changed in
    place): ``glrmask.lexer.program._Block.stamp``'s relocation — every pc at or after ``lo``
    (the block's first pc) moved by ``delta``, the one before it replaced by ``cont`` (or,
    ``pure``, every pc moved by ``delta``)."""
    cdef Py_ssize_t j, i
    for j in range(chars.shape[0]):
        i = chars[j]
        b[i] = _moved(b[i], delta, lo, cont, pure)
    for j in range(reps.shape[0]):
        i = reps[j]
        b[i] = _moved(b[i], delta, lo, cont, pure)
    for j in range(pcs_c.shape[0]):
        i = pcs_c[j]
        c[i] = _moved(c[i], delta, lo, cont, pure)
    for j in range(looks_b.shape[0]):
        i = looks_b[j]
        d[i] = _moved(d[i], delta, lo, cont, pure)
    for j in range(splits.shape[0]):
        i = splits[j]
        a[i] = tuple([_moved(t, delta, lo, cont, pure) for t in a[i]])


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
