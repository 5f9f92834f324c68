"""What other extensions call in ``glrmask_ext.lazy_step`` as C functions."""
from libc.stdint cimport int32_t

cdef tuple step_plain_c(object lexer, int state, int byte, int32_t* q2)
