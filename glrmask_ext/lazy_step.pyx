# cython: boundscheck=True, wraparound=True
"""The lazy lexer's byte step in C: :meth:`glrmask.lexer.lexer.Lexer.step` compiled.

Why. A dynamic mask explores the lexer on demand (:mod:`glrmask.runtime.dynamic`), and nearly
half of a cold mask's time was the Python joint step and lane step — a few microseconds each of
interpreter overhead around dict lookups and small tuples. This module runs the *same* algorithm
over the *same* Python objects (the lexer's interning dicts, memo rows and instruction arrays),
so every state id, event and condition id is the one the Python code makes, in the same order;
only the common case is done here — lanes whose entries need no lookahead (condition set 0) and
no lookbehind trackers, closures already memoized, conditions and states already interned — and
every other piece (a lookahead's atoms, trackers, a new closure, a new condition, a new lane or
joint state) is handed to the lexer's own Python method at the point where the Python step would
call it. Bounds checks and negative indices keep Python's semantics (the directives above), so
even a bad argument behaves as in the reference, :func:`glrmask.lexer.lexer._python_step`.
"""

from glrmask_ext.lexer_compile import advance as _advance

cdef int _EMPTY_CS = 0
cdef int _CS_FAIL = -1
cdef int _FALSE = 1


cdef inline void _transition_added(object lexer) except *:
    """``Lexer._transition_added``: the count, and the budget check every 1024 (in Python)."""
    cdef long n = lexer._n_trans
    if (n + 1) & 1023:
        lexer._n_trans = n + 1
    else:
        lexer._transition_added()


cdef object _intern_lane(object lexer, list ts_lanes, list ts_rows, dict ids, int t, tuple entries):
    """``Lexer._intern_lane(t, entries, None)`` for non-empty ``entries`` (the budget's message,
    and its error, from the Python method)."""
    cdef tuple key = (entries, None)
    cdef object sid = ids.get(key)
    if sid is not None:
        return sid
    cdef long total = lexer._ts_total
    if total >= <long>lexer.max_states:
        return lexer._intern_lane(t, entries, None)  # raises GrammarTooComplex
    lexer._ts_total = total + 1
    cdef list lanes = <list?>ts_lanes[t]
    sid = len(lanes)
    lanes.append(key)
    (<list?>ts_rows[t]).append([None] * len(<tuple?>(<list?>lexer._grep)[t]))
    (<list?>(<list?>lexer._ts_live)[t]).append(None)
    ids[key] = sid
    return sid


cdef object _intern_joint(object lexer, tuple lanes):
    """``Lexer._intern_joint(lanes)``."""
    if not lanes:
        return -1
    cdef dict ids = lexer._js_ids
    cdef object sid = ids.get(lanes)
    if sid is not None:
        return sid
    cdef list js = lexer._js
    cdef Py_ssize_t n = len(js)
    if n >= <long>lexer.max_states:
        return lexer._intern_joint(lanes)  # raises GrammarTooComplex
    js.append(lanes)
    ids[lanes] = n
    (<list?>lexer._js_cls).append(None)
    (<list?>lexer._js_rows).append(None)
    return n


cdef object _lane_step(object lexer, object prog, list ts_rows, list gid, list ts_lanes, list ts_ids,
                       dict closures, dict cond_ids, list sets, int t, int ts, int byte):
    """``Lexer._lane_step(t, ts, byte)`` (see its code: this is it, statement by statement)."""
    cdef list memo = <list?>(<list?>ts_rows[t])[ts]
    cdef int g = (<tuple?>gid[t])[byte]
    cdef object hit = memo[g]
    if hit is not None:
        return hit
    cdef tuple lane = <tuple?>(<list?>ts_lanes[t])[ts]
    cdef tuple entries = <tuple?>lane[0]
    cdef object trackers = lane[1]
    cdef object tr2 = None if trackers is None else lexer._trackers_advance(trackers, byte)
    cdef list new = []
    cdef list events = []
    cdef bint cut = False
    cdef bint plain = True  # every entry of ``new`` has condition set 0
    cdef tuple ent, qe, pe
    cdef int pc, cs, cs2, nxt, q, qcs, cond
    cdef object cl, cid, key, sid
    cdef Py_ssize_t i
    cdef bint dup
    for ent in entries:
        pc = ent[0]
        cs = ent[1]
        cs2 = cs
        if cs:
            cs2 = lexer._cs_advance(cs, byte)
        if cs2 == _CS_FAIL:
            continue
        if pc == -1:
            if cs2 == _EMPTY_CS:  # an earlier candidate's lookaheads all passed: it wins
                break
            lexer._place(new, -1, cs2)
            plain = False
            continue
        nxt = _advance(prog, pc, byte)
        if nxt < 0:
            continue
        cl = closures.get((nxt, cs2, tr2))
        if cl is None:
            cl = lexer._closure(nxt, cs2, tr2)
        for qe in <tuple?>cl:
            q = qe[0]
            qcs = qe[1]
            if q == -1:
                cond = -2
                if tr2 is None and qcs == _EMPTY_CS and plain:
                    # ``_make_cond``: no blocker ahead, the entries ahead are distinct pcs under
                    # no condition (none dominates another), no trackers to keep
                    if not new:
                        cond = 0
                    else:
                        cid = cond_ids.get((t, None, frozenset(new), _EMPTY_CS))
                        if cid is not None:
                            cond = cid
                if cond == -2:
                    cond = lexer._make_cond(t, tr2, new, qcs)
                if cond != _FALSE:
                    events.append((t, cond))
                if qcs == _EMPTY_CS:
                    cut = True
                    break
                lexer._place(new, -1, qcs)
                plain = False
            elif qcs == _EMPTY_CS:
                # ``_place``: only an entry ahead with the same pc and the empty set beats it
                dup = False
                for pe in new:
                    if <int>pe[0] == q and (<int>pe[1] == 0 or not sets[<int>pe[1]]):
                        dup = True
                        break
                if not dup:
                    new.append(qe)
            else:
                if lexer._place(new, q, qcs):
                    plain = False
        if cut:
            break
    cdef tuple new_t = tuple(new)
    if tr2 is None:
        sid = _intern_lane(lexer, ts_lanes, ts_rows, <dict?>ts_ids[t], t, new_t) if new_t else -1
    else:
        sid = lexer._intern_lane(t, new_t, lexer._canon_trackers(tr2, new))
    cdef tuple res = (sid, tuple(events))
    memo[g] = res
    _transition_added(lexer)
    return res


def lane_step(lexer, t, ts, byte):
    """``Lexer._lane_step(t, ts, byte)``: one terminal's lane state after a byte, and its events."""
    return _lane_step(lexer, lexer.prog, lexer._ts_rows, lexer._gid, lexer._ts, lexer._ts_ids, lexer._closures,
                      lexer._cond_ids, lexer._cs, t, ts, byte)


def step(lexer, state, byte):
    """``Lexer.step(state, byte)``: ``(next state or DEAD, events)`` (the lexer's own memo rows,
    filled as the Python step fills them)."""
    cdef list js_rows = lexer._js_rows
    cdef list js_cls = lexer._js_cls
    if state < 0:
        return -1, ()
    cdef object row = js_rows[state]
    cdef tuple lanes_in = <tuple?>lexer._js[state]
    if row is None:  # ``Lexer._partition(state)``: the classes of the state's live terminals
        terms = tuple([(<tuple?>x)[0] for x in lanes_in])
        cls_reps = (<dict?>lexer._parts).get(terms)
        if cls_reps is None:
            cls_reps = lexer._partition_of(terms)
        row = js_rows[state] = [None] * len(<tuple?>cls_reps[1])
        js_cls[state] = cls_reps[0]
    cdef object k = js_cls[state][byte]
    cdef object hit = (<list?>row)[k]
    if hit is not None:
        return hit
    cdef int b = byte
    cdef object prog = lexer.prog
    cdef list ts_rows = lexer._ts_rows
    cdef list gid = lexer._gid
    cdef list ts_lanes = lexer._ts
    cdef list ts_ids = lexer._ts_ids
    cdef dict closures = lexer._closures
    cdef dict cond_ids = lexer._cond_ids
    cdef list sets = lexer._cs
    cdef list nxt = []
    cdef list events = []
    cdef tuple lane_res
    cdef int t, ts2
    for pair in lanes_in:
        t = (<tuple?>pair)[0]
        lane_res = <tuple?>_lane_step(lexer, prog, ts_rows, gid, ts_lanes, ts_ids, closures, cond_ids, sets,
                                     t, (<tuple?>pair)[1], b)
        ts2 = lane_res[0]
        if ts2 >= 0:
            nxt.append((t, ts2))
        events.extend(<tuple?>lane_res[1])
    cdef tuple res = (_intern_joint(lexer, tuple(nxt)), tuple(events))
    (<list?>row)[k] = res
    _transition_added(lexer)
    return res


def lane_future(lexer, t, ts):
    """``Lexer._lane_future(t, ts)``: whether terminal ``t``'s lane state ``ts`` still reaches a
    match end whose condition can hold — the same depth-first search, stepping the same lane
    states in the same order (it stops at the first event that counts, so it explores exactly as
    far as the Python search)."""
    if lexer.always_has_future(t):
        return True
    cdef dict memo = <dict?>(<list?>lexer._ts_future)[t]
    cdef object hit = memo.get(ts)
    if hit is not None:
        return hit
    cdef object prog = lexer.prog
    cdef list ts_rows = lexer._ts_rows
    cdef list gid = lexer._gid
    cdef list ts_lanes = lexer._ts
    cdef list ts_ids = lexer._ts_ids
    cdef dict closures = lexer._closures
    cdef dict cond_ids = lexer._cond_ids
    cdef list sets = lexer._cs
    cdef list live = <list?>(<list?>lexer._ts_live)[t]
    cdef list lanes = <list?>ts_lanes[t]
    cdef tuple groups = <tuple?>(<list?>lexer._grep)[t]
    cdef set seen = {ts}
    cdef list path = []
    cdef list pending = []  # per state on the path: successors not descended into yet
    cdef list succ, top
    cdef object x = ts, known, listed, mask, y, ev, c
    cdef tuple item, res
    cdef bint found = False
    cdef Py_ssize_t g, ng = len(groups)
    cdef int ci
    while True:
        known = memo.get(x) if x != ts else None
        succ = []
        if known is True:
            found = True
        elif known is None:
            listed = live[x]
            if listed is not None:
                for item in <list?>listed:
                    y = item[1]
                    ev = item[2]
                    for c in <tuple?>ev:
                        ci = (<tuple?>c)[1]
                        if ci == 0 or (ci >= 2 and lexer.cond_satisfiable(ci)):
                            found = True
                            break
                    if found:
                        break
                    if y >= 0 and y not in seen:
                        seen.add(y)
                        succ.append(y)
            else:
                mask = lexer._entries_groups(t, (<tuple?>lanes[x])[0])
                for g in range(ng):
                    if not (mask >> g) & 1:
                        continue
                    res = <tuple?>_lane_step(lexer, prog, ts_rows, gid, ts_lanes, ts_ids, closures, cond_ids,
                                             sets, t, x, groups[g])
                    y = res[0]
                    for c in <tuple?>res[1]:
                        ci = (<tuple?>c)[1]
                        if ci == 0 or (ci >= 2 and lexer.cond_satisfiable(ci)):
                            found = True
                            break
                    if found:
                        break
                    if y >= 0 and y not in seen:
                        seen.add(y)
                        succ.append(y)
        path.append(x)
        if found:
            break
        succ.reverse()
        pending.append(succ)
        while path and not pending[len(pending) - 1]:
            path.pop()
            pending.pop()
        if not path:
            break
        top = pending[len(pending) - 1]
        x = top.pop()
    if found:
        for x in path:  # every state on the path reaches the match end: later queries hit
            memo[x] = True
        return True
    for x in seen:  # the search was exhaustive: nothing reachable from here has a future
        memo[x] = False
    return False
