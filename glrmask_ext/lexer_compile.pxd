"""What other extensions call in ``glrmask_ext.lexer_compile`` as C functions."""

cpdef object advance(object prog, Py_ssize_t pc, int byte)
cdef int advance_int(object prog, Py_ssize_t pc, int byte) except -3
