# cython: language_level=3, boundscheck=False, wraparound=False
"""Grammar IR rules (:class:`glrmask.grammar.ir.Rule`) made natively, for front-ends that make
thousands per grammar.

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

from glrmask.grammar.ir import Rule

__all__ = ["new_rule"]


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(PyObject* op)
    bint PyUnicode_CheckExact(PyObject* op)
    bint PyTuple_CheckExact(PyObject* op)


cdef object _new = object.__new__
cdef object _Rule = Rule


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
