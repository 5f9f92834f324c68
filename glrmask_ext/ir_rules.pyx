# cython: language_level=3, boundscheck=False, wraparound=False
"""Grammar IR rules (:class:`glrmask.grammar.ir.Rule`) made natively, for front-ends that make
thousands per grammar; and the JSON Schema lowering's rule store (:class:`GrammarBuilderCore`).

Why. ``Rule`` is a frozen dataclass: its generated ``__init__`` stores each field with a
Python-level ``object.__setattr__`` call, about a microsecond per rule, and a large JSON Schema
lowers to thousands of rules. :func:`new_rule` makes the same object (the same fields, equal and
hashing alike) with the generic attribute store the dataclass's own ``__init__`` ends in. A rule of
plain strings can be on no reference cycle, so it is also left out of the cyclic garbage
collector, as CPython leaves out tuples and dicts of atomic values: a grammar keeps its rules
alive for as long as its mask lives, and every full collection would otherwise scan them.
"""
from cpython.object cimport PyObject, PyObject_GenericSetAttr
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from glrmask.errors import GrammarTooComplex
from glrmask.grammar.ir import Rule, TerminalDef

__all__ = ["new_rule", "new_terminal", "emit_rules", "GrammarBuilderCore", "lark_read_regex", "canonical_text_memo"]


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(PyObject* op)
    bint PyUnicode_CheckExact(PyObject* op)
    bint PyTuple_CheckExact(PyObject* op)


cdef object _new = object.__new__
cdef object _Rule = Rule
cdef object _TerminalDef = TerminalDef


def new_rule(lhs, rhs):
    """``Rule(lhs, rhs)``; untracked by the cyclic collector when `lhs` is a ``str`` and `rhs` a
    ``tuple`` of ``str`` (exact types: nothing else can hold a reference back)."""
    r = _new(_Rule)
    PyObject_GenericSetAttr(r, "lhs", lhs)
    PyObject_GenericSetAttr(r, "rhs", rhs)
    cdef Py_ssize_t i
    if PyUnicode_CheckExact(<PyObject*>lhs) and PyTuple_CheckExact(<PyObject*>rhs):
        for i in range(PyTuple_GET_SIZE(rhs)):
            if not PyUnicode_CheckExact(PyTuple_GET_ITEM(rhs, i)):
                return r
        PyObject_GC_UnTrack(<PyObject*>rhs)
        PyObject_GC_UnTrack(<PyObject*>r)
    return r


def new_terminal(name, pattern):
    """``TerminalDef(name, pattern)`` (no literal), made as :func:`new_rule` makes a rule: the
    frozen dataclass's ``__init__`` costs three Python-level attribute stores per terminal."""
    t = _new(_TerminalDef)
    PyObject_GenericSetAttr(t, "name", name)
    PyObject_GenericSetAttr(t, "pattern", pattern)
    PyObject_GenericSetAttr(t, "literal", None)
    return t


def emit_rules(dict rules, str start):
    """``(rule list, size)`` of a builder's rules (name -> list of alternatives, each a list of
    symbol names): `start`'s rules first, then every other name in the dict's order, each name's
    alternatives in order without repeats; `size` counts one per rule and one per right-hand-side
    symbol (the ``grammar.max_symbols`` measure). The loop a large schema's thousands of rules
    went through in Python."""
    cdef list out = []
    cdef Py_ssize_t size = 0
    cdef set seen
    cdef tuple rhs
    cdef object name, alts
    for name in [start] + [r for r in rules if r != start]:
        alts = rules[name]
        if len(alts) == 1:
            rhs = tuple(alts[0])
            out.append(new_rule(name, rhs))
            size += 1 + len(rhs)
            continue
        seen = set()
        for alt in alts:
            rhs = tuple(alt)
            if rhs not in seen:
                seen.add(rhs)
                out.append(new_rule(name, rhs))
                size += 1 + len(rhs)
    return out, size


cdef class GrammarBuilderCore:
    """The rule and terminal store of :class:`glrmask.json_schema.builder.GrammarBuilder`
    (which adds pruning and emission): fresh names from hints, terminals deduplicated by regex,
    and the size budgets. Native because a large schema's lowering makes thousands of rules and
    terminals, and these four small methods were a tenth of its time in Python.

    ``rules`` maps a rule name to its alternatives (lists of symbol names) in creation order;
    ``terminals`` a terminal name to its regex, in creation order.
    """
    cdef public dict rules
    cdef public dict terminals
    cdef dict _by_regex
    cdef dict _counts
    cdef set _used
    cdef public Py_ssize_t max_rules
    cdef public Py_ssize_t max_chars
    cdef public Py_ssize_t chars

    def __init__(self, Py_ssize_t max_rules, Py_ssize_t max_chars):
        self.rules = {}
        self.terminals = {}
        self._by_regex = {}
        self._counts = {}
        self.max_rules = max_rules
        self.max_chars = max_chars
        self.chars = 0
        self._used = {'start', '_w'}

    cdef str _fresh(self, str hint):
        """`hint` itself the first time (never ``start``/``START``), then ``hint_N``, skipping
        names already taken."""
        cdef object got = self._counts.get(hint)
        cdef Py_ssize_t n = 0 if got is None else <Py_ssize_t>got
        cdef str name
        if n == 0 and hint != 'start' and hint != 'START':
            name = hint
        else:
            name = hint + '_' + str(n)
        while name in self._used:
            n += 1
            name = hint + '_' + str(n)
        self._counts[hint] = n + 1
        self._used.add(name)
        return name

    def fresh(self, str hint):
        """A new name from `hint` (see the class)."""
        return self._fresh(hint)

    def terminal(self, str regex, str hint='T'):
        """The terminal of `regex`: the one made before, or a new one named from ``hint.upper()``."""
        cdef object name = self._by_regex.get(regex)
        if name is None:
            name = self._fresh(hint.upper())
            self._by_regex[regex] = name
            self.terminals[name] = regex
            self.chars += len(regex)
            self._check()
        return name

    def new_rule(self, str hint):
        """A new rule without alternatives yet, named from ``hint.lower()``."""
        cdef str name = self._fresh(hint.lower())
        self.rules[name] = []
        if len(self.rules) > self.max_rules:
            raise GrammarTooComplex(f"JSON Schema lowering: more than {self.max_rules} grammar rules")
        return name

    def set_alts(self, name, alts):
        """Set a rule's alternatives (each counts eight characters per symbol against the budget)."""
        self.rules[name] = alts
        cdef Py_ssize_t n = 0
        cdef object a
        for a in alts:
            n += len(a)
        self.chars += n * 8
        self._check()

    cdef int _check(self) except -1:
        if self.chars > self.max_chars:
            raise GrammarTooComplex(f"JSON Schema lowering: grammar larger than {self.max_chars} characters")
        return 0


cdef inline bint _is_hex(Py_UCS4 c):
    return (c >= u'0' and c <= u'9') or (c >= u'a' and c <= u'f') or (c >= u'A' and c <= u'F')


def lark_read_regex(str regex):
    """The ``re`` pattern lark reads from a ``/.../`` literal of `regex` whose slashes are escaped
    (:func:`glrmask.json_schema.builder.lark_pattern`): each ``\\xHH``, ``\\uHHHH`` and
    ``\\UHHHHHHHH`` becomes the character it names, ``\\n \\f \\t \\r`` the control character,
    a bare ``/`` stays escaped as ``\\/``, and every other backslash pair is kept. A truncated hex
    escape or a backslash that ends the regex raises ``ValueError``. One pass over the characters
    (terminal regexes run to kilobytes of escapes, and every new terminal of a schema is read)."""
    cdef Py_ssize_t n = len(regex), i = 0, start = 0, k, j
    cdef Py_UCS4 c, d
    cdef list out = []
    while i < n:
        c = regex[i]
        if c == u'/':
            out.append(regex[start:i])
            out.append('\\/')
            i += 1
            start = i
            continue
        if c != u'\\':
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError(f"regex ends in a lone backslash: {regex!r}")
        d = regex[i + 1]
        if d == u'x' or d == u'u' or d == u'U':
            k = 2 if d == u'x' else (4 if d == u'u' else 8)
            if i + 2 + k > n:
                raise ValueError(f"truncated \\{d} escape in regex {regex!r}")
            for j in range(i + 2, i + 2 + k):
                if not _is_hex(regex[j]):
                    raise ValueError(f"truncated \\{d} escape in regex {regex!r}")
            out.append(regex[start:i])
            out.append(chr(int(regex[i + 2:i + 2 + k], 16)))
            i += 2 + k
            start = i
        elif d == u'n' or d == u'f' or d == u't' or d == u'r':
            out.append(regex[start:i])
            out.append('\n' if d == u'n' else ('\f' if d == u'f' else ('\t' if d == u't' else '\r')))
            i += 2
            start = i
        else:
            i += 2
    if start == 0:
        return regex
    out.append(regex[start:])
    return ''.join(out)


cdef extern from "Python.h":
    int Py_EnterRecursiveCall(const char *where) except -1
    void Py_LeaveRecursiveCall()


cdef object _encode_str = None
cdef object _dumps = None


def canonical_text_memo(v, dict memo, object encode_str, object dumps):
    """:func:`glrmask.json_schema.canonical.canonical_text` inside its memo (``id`` -> ``(value,
    text)``): ``json.dumps(v, sort_keys=True, separators=(',', ':'), default=repr)`` built from the
    texts of the parts, `encode_str` spelling strings and `dumps` the values of any other kind.

    The recursion counts against Python's limit as the Python version it replaces did, one level
    per call and one per container walked, so that a schema too deeply nested for that version
    still fails the same way (with ``RecursionError``)."""
    global _encode_str, _dumps
    _encode_str = encode_str
    _dumps = dumps
    return _text(v, memo, set())


cdef str _text(object v, dict memo, set open_):
    cdef object t = type(v)
    cdef object i, got
    cdef str s
    cdef list parts
    cdef bint plain
    Py_EnterRecursiveCall(" in canonical_text")
    try:
        if t is str:
            return _encode_str(v)
        if t is dict or t is list or t is tuple:
            i = id(v)
            got = memo.get(i)
            if got is not None and (<tuple>got)[0] is v:
                return (<tuple>got)[1]
            if i in open_:
                raise ValueError("Circular reference detected")
            open_.add(i)
            try:
                if t is dict:
                    Py_EnterRecursiveCall(" in canonical_text")  # (the key check's generator)
                    try:
                        plain = True
                        for k in v:
                            if type(k) is not str:
                                plain = False
                                break
                    finally:
                        Py_LeaveRecursiveCall()
                    if not plain:
                        s = _dumps(v)  # other keys: json's own conversions and errors
                    else:
                        if v:
                            Py_EnterRecursiveCall(" in canonical_text")
                            try:
                                parts = [_encode_str(k) + ':' + _text(v[k], memo, open_) for k in sorted(v)]
                            finally:
                                Py_LeaveRecursiveCall()
                            s = '{' + ','.join(parts) + '}'
                        else:
                            s = '{}'
                else:
                    Py_EnterRecursiveCall(" in canonical_text")
                    try:
                        parts = [_text(x, memo, open_) for x in v]
                    finally:
                        Py_LeaveRecursiveCall()
                    s = '[' + ','.join(parts) + ']'
            finally:
                open_.discard(i)
            memo[i] = (v, s)
            return s
        if v is None:
            return 'null'
        if v is True:
            return 'true'
        if v is False:
            return 'false'
        if t is int:
            return int.__repr__(v)
        if t is float:
            if v != v:
                return 'NaN'
            if v == _INF:
                return 'Infinity'
            if v == -_INF:
                return '-Infinity'
            return float.__repr__(v)
        return _dumps(v)  # subclasses, Decimal, anything else: exactly as json.dumps writes it
    finally:
        Py_LeaveRecursiveCall()


cdef object _INF = float("inf")
