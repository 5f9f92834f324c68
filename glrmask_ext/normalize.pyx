# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: language = c++
# distutils: depends = glrmask_ext/normalize_core.hpp
"""Native grammar normalization (semantics and reference: :mod:`glrmask.grammar.normalize`).

Why native. For a large JSON Schema (Kubernetes, WashingtonPost: ~3,000 rules that ε-elimination
turns into ~10,000) the Python normalizer took 35-45 ms of the time to the first mask, spread thin
over set and dictionary operations on symbol names and tuples. Here (``normalize_core.hpp``) a
symbol is an int, a rule a slice of one int pool, a set a flag vector, and no Python object exists
per intermediate rule; only the output rules are made into :class:`~glrmask.grammar.ir.Rule`
objects (the input's own objects where a rule comes through unchanged).

Identical output. Every step visits rules, numbers and names fresh symbols, finds components and
concatenates results in the order of the Python ``_Normalizer``, which stays the test oracle
(``tests/test_normalize_native.py``, ``tests/test_front_end_equivalence.py``); where the Python
code iterates over ``sorted`` names, the native one compares their UTF-8 bytes, which is the same
order. Budget errors (``normalize.max_rules``) are raised at the same step with the same count,
and the compile deadline is checked at the same points (every 256th budgeted rule and at each
step), through the budget object's own ``check``.
"""
from libcpp.string cimport string
from libcpp.vector cimport vector
from libc.stdint cimport int32_t

from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject, PyObject_GenericSetAttr
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8

from glrmask.grammar.ir import Rule

__all__ = ["normalize_rules"]


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(PyObject* op)


cdef extern from "normalize_core.hpp" namespace "glrnorm":
    ctypedef int (*check_fn)(void* ctx, int stage)
    ctypedef int (*stem_fn)(void* ctx, const string& base, string* out)

    cdef struct NRule "glrnorm::Rule":
        int32_t lhs
        int32_t off
        int32_t n
        int32_t origin

    cdef cppclass Normalizer "glrnorm::Normalizer":
        vector[int32_t] pool
        vector[string] names
        vector[NRule] input
        vector[NRule] result
        int32_t start
        long max_rules
        void* ctx
        check_fn check_cb
        stem_fn stem_cb
        int fail_stage
        long fail_n
        int32_t fail_sym
        int32_t add_symbol(const string& name, bint is_term)
        void add_used(const string& name)
        int run() except +

    int OK "glrnorm::OK"
    int E_PYTHON "glrnorm::E_PYTHON"
    int E_TOO_COMPLEX "glrnorm::E_TOO_COMPLEX"
    int E_EMPTY "glrnorm::E_EMPTY"
    int E_NO_FIXED_POINT "glrnorm::E_NO_FIXED_POINT"
    int E_CHECK "glrnorm::E_CHECK"


# the Python normalizer's labels, by the core's Stage numbers
_BUDGET_STEPS = ("input", "ε-elimination", "right-recursion elimination",
                 "removing unproductive symbols", "fixed point")
_LABELS = tuple(f"normalize ({s})" for s in _BUDGET_STEPS)


cdef class _Context:
    """What the core's callbacks need: the compile budget, the stem function, and the exception a
    callback raised (re-raised once the core has unwound)."""
    cdef object clock
    cdef object stem
    cdef object error


cdef int _check(void* ctx, int stage) noexcept:
    c = <_Context>ctx
    try:
        c.clock.check(_LABELS[stage])
    except BaseException as exc:  # noqa: B036 - re-raised by normalize_rules
        c.error = exc
        return -1
    return 0


cdef int _stem(void* ctx, const string& base, string* out) noexcept:
    c = <_Context>ctx
    try:
        text = PyUnicode_DecodeUTF8(base.c_str(), <Py_ssize_t>base.size(), "surrogatepass")
        out[0] = _utf8(c.stem(text))
    except BaseException as exc:  # noqa: B036
        c.error = exc
        return -1
    return 0


cdef object _new_rule = object.__new__


cdef inline bytes _utf8(object s):
    return s.encode("utf-8", "surrogatepass")


def normalize_rules(list rules, terminals, start, long max_rules, clock, stem):
    """Normalize ``rules`` (a list of :class:`Rule`) with terminal names ``terminals`` and start
    symbol ``start``; returns ``(status, rules, start, detail)``.

    ``status`` 0: done, ``rules``/``start`` are the result. Otherwise nothing is raised here for
    the grammar's sake and the caller words the error as the Python normalizer does: 2, budget
    exceeded (``detail`` = ``(step, n)``); 3, empty language (``detail`` = the start symbol);
    4, no fixed point; 5, the post-condition failed on ``rules`` (the caller runs
    ``check_normalized`` on them for its message). ``clock`` is the compile budget (its ``check``
    is called with the Python normalizer's labels); ``stem(base)`` is the Python normalizer's stem
    of a fresh symbol's base name, called only for names that are not ASCII."""
    cdef Normalizer* nz = new Normalizer()
    cdef _Context ctx = _Context()
    cdef dict ids = {}
    cdef list names = []
    cdef int32_t i, k, n, sid, lhs, status
    cdef NRule nr
    cdef tuple rhs
    cdef object r, x
    cdef size_t j
    try:
        ctx.clock = clock
        ctx.stem = stem
        nz.ctx = <void*>ctx
        nz.check_cb = _check
        nz.stem_cb = _stem
        nz.max_rules = max_rules
        for name in terminals:
            if name not in ids:
                ids[name] = nz.add_symbol(_utf8(name), True)
                names.append(name)
        for i in range(len(rules)):
            r = rules[i]
            x = r.lhs
            sid = ids.get(x, -1)
            if sid < 0:
                sid = ids[x] = nz.add_symbol(_utf8(x), False)
                names.append(x)
            nr.lhs = sid
            nr.off = <int32_t>nz.pool.size()
            rhs = r.rhs
            nr.n = <int32_t>len(rhs)
            nr.origin = i
            for x in rhs:
                sid = ids.get(x, -1)
                if sid < 0:
                    sid = ids[x] = nz.add_symbol(_utf8(x), False)
                    names.append(x)
                nz.pool.push_back(sid)
            nz.input.push_back(nr)
        if start not in ids:
            ids[start] = nz.add_symbol(_utf8(start), False)
            names.append(start)
        nz.start = ids[start]
        for j in range(nz.names.size()):
            nz.add_used(nz.names[j])
        n_in = len(names)
        status = nz.run()
        if status == E_PYTHON:
            raise ctx.error
        if status == E_TOO_COMPLEX:
            return status, None, None, (_BUDGET_STEPS[nz.fail_stage], nz.fail_n)
        if status == E_EMPTY:
            return status, None, None, _name(nz, names, nz.fail_sym)
        if status == E_NO_FIXED_POINT:
            return status, None, None, None
        # fresh names, then the rules (the input's objects where a rule is one of them)
        for j in range(n_in, nz.names.size()):
            names.append(PyUnicode_DecodeUTF8(nz.names[j].c_str(), <Py_ssize_t>nz.names[j].size(),
                                              "surrogatepass"))
        out = PyList_New(<Py_ssize_t>nz.result.size())
        for j in range(nz.result.size()):
            nr = nz.result[j]
            if nr.origin >= 0:
                r = rules[nr.origin]
            else:
                rhs = PyTuple_New(nr.n)
                for k in range(nr.n):
                    x = <object>PyList_GET_ITEM(names, nz.pool[nr.off + k])
                    Py_INCREF(x)
                    PyTuple_SET_ITEM(rhs, k, x)
                # the frozen dataclass's __init__ sets each field by a Python-level
                # object.__setattr__ call; the generic setter is that same store, without the call
                r = _new_rule(Rule)
                PyObject_GenericSetAttr(r, "lhs", <object>PyList_GET_ITEM(names, nr.lhs))
                PyObject_GenericSetAttr(r, "rhs", rhs)
                # a rule holds strings only, so it can be on no reference cycle: untracked, like
                # CPython's own tuples and dicts of atomic values, the cyclic collector never
                # scans the tens of thousands of rules a large grammar keeps alive
                PyObject_GC_UnTrack(<PyObject*>rhs)
                PyObject_GC_UnTrack(<PyObject*>r)
            Py_INCREF(r)
            PyList_SET_ITEM(out, <Py_ssize_t>j, r)
        return status, out, names[nz.start], None
    finally:
        del nz


cdef str _name(Normalizer* nz, list names, int32_t sid):
    if sid < len(names):
        return names[sid]
    return PyUnicode_DecodeUTF8(nz.names[sid].c_str(), <Py_ssize_t>nz.names[sid].size(), "surrogatepass")
