# cython: language_level=3
"""C-level face of the Aho–Corasick automaton, so the phrase-guard journal (guard_phrase) steps it
byte by byte without the GIL and without a Python call per byte."""
from libc.stdint cimport int32_t, uint8_t


cdef class PhraseAutomaton:
    cdef int32_t[::1] _root
    cdef int32_t[::1] _edge_start
    cdef uint8_t[::1] _edge_label
    cdef int32_t[::1] _edge_target
    cdef int32_t[::1] _fail
    cdef int32_t[::1] _depth
    cdef int32_t[::1] _out_id
    cdef int32_t[::1] _phrase_len
    cdef int32_t[::1] _delta       # dense transitions, states × byte classes (when _n_classes)
    cdef int32_t[::1] _byte_class  # byte → class; 0 = a byte that occurs in no phrase
    cdef int _n_classes            # 0: no dense table, step through the trie and failure links
    cdef readonly int n_states
    cdef readonly tuple phrases

    cdef int32_t step(self, int32_t s, uint8_t c) noexcept nogil
    cdef void _check_state(self, int state) except *
    cdef _build_dense(self, const int32_t[::1] order, list used_bytes)
