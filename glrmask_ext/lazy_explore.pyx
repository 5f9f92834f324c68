"""The dynamic engine's exploration loop in C (:meth:`glrmask.runtime.dynamic.LexerExplorer.explore`).

Why. A cold dynamic mask hands its explorer tens of thousands of lexer entries, nine in ten of
them byte steps; the Python loop around each (unpacking a row, the step, its conditions, the
setter) cost about as much as the step itself. This loop does the byte steps (with the lanes
that carry no lookahead stepped on native tables: :func:`glrmask_ext.lazy_step.step_plain`, called
as a C function), live
terminals and condition verdicts here, in the order of the rows, exactly as
:meth:`~glrmask.runtime.dynamic.LexerExplorer.explore_one` does them, and hands every other kind
(futures, lexeme starts, condition steps: a few in a hundred) to that method.
"""

from libc.stdint cimport int32_t

from glrmask_ext.lazy_step cimport step_plain_c

DEF M_STEP = 0
DEF M_ALIVE = 1
DEF M_COND_INFO = 3


cdef inline void _cond(object lexer, object nat, int c) except *:
    """``LexerExplorer._cond(c)``: publish a pending condition's verdicts before any entry names it."""
    if c >= 2 and not nat.has_cond(c):
        nat.set_cond(c, lexer.cond_at_end(c), lexer.cond_satisfiable(c))


cdef void _alive(object lexer, object nat, int q) except *:
    """``explore_one(M_ALIVE, q)``: the live terminals of ``q``, and the futures known without a
    search."""
    cdef tuple lanes = <tuple?>lexer._js[q]
    cdef dict plain = lexer._plain_terms
    cdef list alive = [(<tuple?>x)[0] for x in lanes]
    cdef list with_future = []
    cdef object hit, term, x
    for term in alive:
        hit = plain.get(term)
        if hit is None:
            hit = lexer.always_has_future(term)
        if hit:
            with_future.append(term)
    nat.set_alive_terms(q, alive, with_future)


def explore_rows(explorer, const int32_t[:, ::1] rows) -> int:
    """Compute and publish the entries ``rows`` (``(kind, a, b)``, distinct) names, in order
    (the explorer's lock held); ``explorer.n_explored`` counts each one started, and the steps
    explored ahead (returned)."""
    cdef object lexer = explorer.lexer
    cdef object nat = explorer.native
    cdef object set_step_events = nat.set_step_events
    cdef object has_alive = nat.has_alive
    cdef object has_step = nat.has_step
    cdef list states = lexer._js
    cdef Py_ssize_t i, n = rows.shape[0], done = 0, k, roomy = lexer.max_states // 2, extra = 0
    cdef Py_ssize_t ahead = explorer.explore_ahead
    cdef int kind, a, b, x
    cdef int32_t q2
    cdef tuple evs, ev
    try:
        for i in range(n):
            done = i + 1
            kind = rows[i, 0]
            a = rows[i, 1]
            b = rows[i, 2]
            if kind == M_STEP:
                evs = step_plain_c(lexer, a, b, &q2)
                for ev in evs:
                    _cond(lexer, nat, ev[1])
                set_step_events(a, b, q2, evs)  # b's whole byte group
                if q2 < 0:
                    continue
                if not has_alive(q2):
                    # the walk asks next whether a lane in q2 survives: answered now, not in
                    # another round trip (a long lexeme is a chain of new states)
                    _alive(lexer, nat, q2)
                # the chain ahead on b's group (LexerExplorer.explore_ahead)
                x = a
                k = 0
                while not evs and 0 <= q2 != x and k < ahead and len(states) < roomy:
                    x = q2
                    if has_step(x, b):
                        break
                    evs = step_plain_c(lexer, x, b, &q2)
                    for ev in evs:
                        _cond(lexer, nat, ev[1])
                    set_step_events(x, b, q2, evs)
                    k += 1
                    extra += 1
                    if q2 >= 0 and not has_alive(q2):
                        _alive(lexer, nat, q2)
            elif kind == M_COND_INFO:
                _cond(lexer, nat, a)
            elif kind == M_ALIVE and a >= 0:
                _alive(lexer, nat, a)
            else:
                extra += explorer.explore_one(kind, a, b)
    finally:
        explorer.n_explored += done + extra
    return extra
