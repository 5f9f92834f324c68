# cython: boundscheck=True, wraparound=True
# distutils: language = c++
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

cimport cpython.array as carray
from libc.stdint cimport int32_t, uint8_t, INT32_MIN
from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from libcpp.unordered_set cimport unordered_set
from libcpp.vector cimport vector
from cython.operator cimport dereference

from glrmask_ext.lexer_compile cimport advance as _advance, advance_int as _advance_int
from glrmask.lexer import program as _program

cdef int K_CHAR = _program.CHAR
cdef int K_MID = _program.MID
cdef int K_SPLIT = _program.SPLIT
cdef int K_ACCEPT = _program.ACCEPT
cdef int K_SUBACCEPT = _program.SUBACCEPT
cdef int K_LOOK = _program.LOOK
cdef int K_LB = _program.LB
cdef int K_BOUND = _program.BOUND
cdef int K_REP_ENTER = _program.REP_ENTER
cdef int K_REP_CHECK = _program.REP_CHECK
cdef int _ATOM_TRUE = -1
cdef int _ATOM_FALSE = -2
cdef object _NO_FLAGS = frozenset()
cdef object _ONE = 1

cdef int _EMPTY_CS = 0
cdef int _CS_FAIL = -1
cdef int _FALSE = 1


cdef class _Tables:
    """The lexer's tables the steps read (its lists and dicts are created once, in
    ``Lexer.__init__``, and only grow), fetched once per lexer instead of ~20 attribute
    lookups per step; held for the lexer stepped last, dropped when it goes."""
    cdef object ref  # weak reference to the lexer
    cdef object prog
    cdef list ts_rows, gid, ts, ts_ids, cs, js_rows, js_cls, js, grep, ts_live
    cdef dict closures, cond_ids, js_ids, parts
    cdef _Plain plain  # the native mirror of the plain lanes (:func:`step_plain`), made on first use
    cdef carray.array kind, A, B, Cc, D, T  # the program's arrays (made once, they only grow)
    cdef long pending  # transitions not yet added to the lexer's count (_transition_added)


cdef _Tables _last = None  # the tables of the lexer stepped last (one lexer explores at a time)


def _forget(ref) -> None:
    """The lexer of the cached tables is gone: drop them (they hold its memos)."""
    global _last
    if _last is not None and _last.ref is ref:
        _last = None


cdef _Tables _tables(object lexer):
    global _last
    cdef _Tables z = _last
    cdef object prev
    if z is not None:
        prev = z.ref()
        if prev is lexer:
            return z
        if prev is not None and z.pending:
            _flush_transitions(prev, z)
    import weakref
    z = _Tables.__new__(_Tables)
    z.ref = weakref.ref(lexer, _forget)
    z.prog = lexer.prog
    z.kind = z.prog.kind
    z.A = z.prog.a
    z.B = z.prog.b
    z.Cc = z.prog.c
    z.D = z.prog.d
    z.T = z.prog.targets
    z.ts_rows = lexer._ts_rows
    z.gid = lexer._gid
    z.ts = lexer._ts
    z.ts_ids = lexer._ts_ids
    z.cs = lexer._cs
    z.js_rows = lexer._js_rows
    z.js_cls = lexer._js_cls
    z.js = lexer._js
    z.grep = lexer._grep
    z.ts_live = lexer._ts_live
    z.closures = lexer._closures
    z.cond_ids = lexer._cond_ids
    z.js_ids = lexer._js_ids
    z.parts = lexer._parts
    _last = z
    return z


DEF TRANS_BATCH = 64  # transitions counted here before the lexer's own count is updated


cdef inline void _transition_added(object lexer, _Tables z) except *:
    """``Lexer._transition_added``, counted in ``z`` and added to the lexer's count every
    :data:`TRANS_BATCH` transitions (two attribute accesses per lane step were a tenth of a cold
    mask's native steps): the budget is still checked where the count passes a multiple of 1024,
    at most a batch later."""
    z.pending += 1
    if z.pending >= TRANS_BATCH:
        _flush_transitions(lexer, z)


cdef void _flush_transitions(object lexer, _Tables z) except *:
    cdef long n = lexer._n_trans, k = z.pending, total = n + k
    z.pending = 0
    if (total >> 10) != (n >> 10):
        # the count passes a multiple of 1024: Lexer._transition_added lands on it (it counts
        # one itself) and checks the budget there
        lexer._n_trans = (total & ~(<long>1023)) - 1
        lexer._transition_added()
    lexer._n_trans = total


cdef object _intern_lane(object lexer, _Tables z, dict ids, int t, tuple entries):
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
    cdef list lanes = <list?>z.ts[t]
    sid = len(lanes)
    lanes.append(key)
    (<list?>z.ts_rows[t]).append([None] * len(<tuple?>z.grep[t]))
    (<list?>z.ts_live[t]).append(None)
    ids[key] = sid
    return sid


cdef object _intern_joint(object lexer, _Tables z, tuple lanes):
    """``Lexer._intern_joint(lanes)``."""
    if not lanes:
        return -1
    cdef dict ids = z.js_ids
    cdef object sid = ids.get(lanes)
    if sid is not None:
        return sid
    cdef list js = z.js
    cdef Py_ssize_t n = len(js)
    if n >= <long>lexer.max_states:
        return lexer._intern_joint(lanes)  # raises GrammarTooComplex
    js.append(lanes)
    ids[lanes] = n
    z.js_cls.append(None)
    z.js_rows.append(None)
    return n


cdef bint _place(list sets, list entries, int pc, int cs) except -1:
    """``Lexer._place``: append ``(pc, cs)`` unless an entry ahead with the same pc needs a subset
    of its conditions (half a million calls in a large schema's dense lexer: no Python frame)."""
    cdef object mine = sets[cs]
    cdef tuple e
    cdef int qcs
    for e in entries:
        if <int>e[0] == pc:
            qcs = e[1]
            if qcs == cs or sets[qcs] <= mine:
                return False
    entries.append((pc, cs))
    return True


cdef object _lane_step(object lexer, _Tables z, int t, int ts, int byte):
    """``Lexer._lane_step(t, ts, byte)`` (see its code: this is it, statement by statement)."""
    cdef list memo = <list?>(<list?>z.ts_rows[t])[ts]
    cdef int g = (<tuple?>z.gid[t])[byte]
    cdef object hit = memo[g]
    if hit is not None:
        return hit
    cdef object prog = z.prog
    cdef dict closures = z.closures
    cdef dict cond_ids = z.cond_ids
    cdef list sets = z.cs
    cdef tuple lane = <tuple?>(<list?>z.ts[t])[ts]
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
            cs2 = _cs_advance(lexer, cs, byte)
        if cs2 == _CS_FAIL:
            continue
        if pc == -1:
            if cs2 == _EMPTY_CS:  # an earlier candidate's lookaheads all passed: it wins
                break
            _place(sets, new, -1, cs2)
            plain = False
            continue
        nxt = _advance(prog, pc, byte)
        if nxt < 0:
            continue
        cl = closures.get((nxt, cs2, tr2))
        if cl is None:
            cl = _closure(lexer, closures, nxt, cs2, tr2)
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
                _place(sets, new, -1, qcs)
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
                if _place(sets, new, q, qcs):
                    plain = False
        if cut:
            break
    cdef tuple new_t = tuple(new)
    if tr2 is None:
        sid = _intern_lane(lexer, z, <dict?>z.ts_ids[t], t, new_t) if new_t else -1
    else:
        sid = lexer._intern_lane(t, new_t, lexer._canon_trackers(tr2, new))
    cdef tuple res = (sid, tuple(events))
    memo[g] = res
    _transition_added(lexer, z)
    return res


def lane_step(lexer, t, ts, byte):
    """``Lexer._lane_step(t, ts, byte)``: one terminal's lane state after a byte, and its events."""
    return _lane_step(lexer, _tables(lexer), t, ts, byte)


def step(lexer, state, byte):
    """``Lexer.step(state, byte)``: ``(next state or DEAD, events)`` (the lexer's own memo rows,
    filled as the Python step fills them)."""
    cdef _Tables z = _tables(lexer)
    cdef list js_rows = z.js_rows
    cdef list js_cls = z.js_cls
    if state < 0:
        return -1, ()
    cdef object row = js_rows[state]
    cdef tuple lanes_in = <tuple?>z.js[state]
    if row is None:  # ``Lexer._partition(state)``: the classes of the state's live terminals
        terms = tuple([(<tuple?>x)[0] for x in lanes_in])
        cls_reps = z.parts.get(terms)
        if cls_reps is None:
            cls_reps = lexer._partition_of(terms)
        row = js_rows[state] = [None] * len(<tuple?>cls_reps[1])
        js_cls[state] = cls_reps[0]
    cdef object k = js_cls[state][byte]
    cdef object hit = (<list?>row)[k]
    if hit is not None:
        return hit
    cdef int b = byte
    cdef list nxt = []
    cdef list events = []
    cdef tuple lane_res
    cdef int t, ts2
    for pair in lanes_in:
        t = (<tuple?>pair)[0]
        lane_res = <tuple?>_lane_step(lexer, z, t, (<tuple?>pair)[1], b)
        ts2 = lane_res[0]
        if ts2 >= 0:
            nxt.append((t, ts2))
        events.extend(<tuple?>lane_res[1])
    cdef tuple res = (_intern_joint(lexer, z, tuple(nxt)), tuple(events))
    (<list?>row)[k] = res
    _transition_added(lexer, z)
    return res


cdef bint _counts(object lexer, tuple events) except -1:
    """Whether one of a lane step's events is a match end that can stand: unconditional, or
    with a condition that can still hold."""
    cdef int ci
    for c in events:
        ci = (<tuple?>c)[1]
        if ci == 0 or (ci >= 2 and lexer.cond_satisfiable(ci)):
            return True
    return False


cdef void _future_push(object lexer, int t, list lanes, list live, object x, list path, list listed_of,
                       list mask_of, list at) except *:
    """Put lane state ``x`` on :func:`lane_future`'s path: its listed steps when the export listed
    them, else the groups where it survives or reports (``Lexer._future_steps``), from the first."""
    cdef object listed = live[x]
    path.append(x)
    listed_of.append(listed)
    mask_of.append(None if listed is not None else _entries_groups(lexer, t, (<tuple?>lanes[x])[0]))
    at.append(0)


def lane_future(lexer, t, ts):
    """``Lexer._lane_future(t, ts)``: whether terminal ``t``'s lane state ``ts`` still reaches a
    match end whose condition can hold — the same depth-first search, taking the same lane steps
    in the same order (one at a time, descending into the first new successor; it stops at the
    first event that counts, so it explores exactly as far as the Python search)."""
    if lexer.always_has_future(t):
        return True
    cdef dict memo = <dict?>(<list?>lexer._ts_future)[t]
    cdef object hit = memo.get(ts)
    if hit is not None:
        return hit
    cdef _Tables z = _tables(lexer)
    cdef list live = <list?>z.ts_live[t]
    cdef list lanes = <list?>z.ts[t]
    cdef tuple groups = <tuple?>(<list?>lexer._grep)[t]
    cdef set seen = {ts}
    # per state on the path: the state, its listed steps (or None) and its survival mask, and the
    # next step to take (an index into the listed steps, or the next group)
    cdef list path = [], listed_of = [], mask_of = [], at = []
    cdef object x, y, known, listed, mask
    cdef tuple item, res, ev
    cdef bint found = False, took
    cdef Py_ssize_t k, ng = len(groups), top
    _future_push(lexer, t, lanes, live, ts, path, listed_of, mask_of, at)
    while path and not found:
        top = len(path) - 1
        x = path[top]
        listed = listed_of[top]
        mask = mask_of[top]
        k = <Py_ssize_t>at[top]
        took = False
        while True:
            if listed is not None:
                if k >= len(<list?>listed):
                    break
                item = <tuple?>(<list?>listed)[k]
                k += 1
                y = item[1]
                ev = <tuple?>item[2]
            else:
                while k < ng and not (mask >> k) & 1:
                    k += 1
                if k >= ng:
                    break
                res = <tuple?>_lane_step(lexer, z, t, x, groups[k])
                k += 1
                y = res[0]
                ev = <tuple?>res[1]
            if _counts(lexer, ev):
                found = True
                break
            if y < 0 or y in seen:
                continue
            seen.add(y)
            known = memo.get(y)
            if known is False:
                continue
            at[top] = k
            if known is True:
                path.append(y)
                found = True
            else:
                _future_push(lexer, t, lanes, live, y, path, listed_of, mask_of, at)
            took = True
            break
        if found or took:
            continue
        path.pop()  # every step of the last state taken: back up
        listed_of.pop()
        mask_of.pop()
        at.pop()
    if found:
        for x in path:  # every state on the path reaches the match end: later queries hit
            memo[x] = True
        return True
    for x in seen:  # the search was exhaustive: nothing reachable from here has a future
        memo[x] = False
    return False


cdef object _closure(object lexer, dict closures, object pc0, object cs0, object trackers):
    """``Lexer._closure(pc0, cs0, trackers)``: the epsilon closure in ``re``'s priority order
    (memoized in the lexer's own dict; lookaheads, lookbehinds and boundaries through the
    lexer's atom and tracker methods, as the Python closure calls them)."""
    cdef tuple key = (pc0, cs0, trackers)
    cdef object hit = closures.get(key)
    if hit is not None:
        return hit
    cdef _Tables z = _tables(lexer)
    cdef carray.array kind = z.kind, A = z.A, B = z.B, Cc = z.Cc, D = z.D, T = z.T
    cdef list out = []
    cdef set seen_out = set()
    cdef set visited = set()
    cdef list stack = [(pc0, cs0, _NO_FLAGS)]
    cdef tuple item, o
    cdef object cs, fl, rep, r, holds
    cdef int pc, k, first, j, n
    while stack:
        item = <tuple?>stack.pop()
        if item in visited:
            continue
        visited.add(item)
        pc = item[0]
        cs = item[1]
        fl = item[2]
        k = kind.data.as_uchars[pc]
        if k == K_CHAR or k == K_MID:
            o = (pc, cs)
            if o not in seen_out:
                seen_out.add(o)
                out.append(o)
        elif k == K_ACCEPT or k == K_SUBACCEPT:
            o = (-1, cs)
            if o not in seen_out:
                seen_out.add(o)
                out.append(o)
        elif k == K_SPLIT:
            first = A.data.as_ints[pc]
            n = B.data.as_ints[pc]
            for j in range(first + n - 1, first - 1, -1):
                stack.append((T.data.as_ints[j], cs, fl))
        elif k == K_REP_ENTER:
            rep = A.data.as_ints[pc]
            stack.append((B.data.as_ints[pc], cs, fl - {rep} if rep in fl else fl))
        elif k == K_REP_CHECK:
            rep = A.data.as_ints[pc]
            if rep in fl:  # the iteration just finished consumed nothing: take the tail
                stack.append((Cc.data.as_ints[pc], cs, fl - {rep}))
            elif D.data.as_ints[pc]:  # greedy: body first
                stack.append((Cc.data.as_ints[pc], cs, fl))
                stack.append((B.data.as_ints[pc], cs, fl | {rep}))
            else:
                stack.append((B.data.as_ints[pc], cs, fl | {rep}))
                stack.append((Cc.data.as_ints[pc], cs, fl))
        elif k == K_LOOK:
            r = lexer._make_atom(A.data.as_ints[pc], B.data.as_ints[pc], trackers)
            if r == _ATOM_TRUE:
                stack.append((Cc.data.as_ints[pc], cs, fl))
            elif r != _ATOM_FALSE:
                stack.append((Cc.data.as_ints[pc], lexer._cs_with(cs, r), fl))
        elif k == K_LB:
            holds = (<tuple?>(<list?>lexer._trk)[trackers[A.data.as_ints[pc]]])[2]
            if holds == B.data.as_ints[pc]:
                stack.append((Cc.data.as_ints[pc], cs, fl))
        elif k == K_BOUND:
            holds = (<tuple?>(<list?>lexer._trk)[trackers[A.data.as_ints[pc]]])[2]
            r = lexer._make_atom(B.data.as_ints[pc], holds != Cc.data.as_ints[pc], None)
            if r == _ATOM_TRUE:
                stack.append((D.data.as_ints[pc], cs, fl))
            elif r != _ATOM_FALSE:
                stack.append((D.data.as_ints[pc], lexer._cs_with(cs, r), fl))
        else:
            raise AssertionError(f"unexpected instruction {k} at pc {pc}")
    cdef tuple res = tuple(out)
    closures[key] = res
    return res


def closure(lexer, pc0, cs0, trackers):
    """``Lexer._closure(pc0, cs0, trackers)``."""
    return _closure(lexer, lexer._closures, pc0, cs0, trackers)


cdef object _cs_advance(object lexer, object cs, object byte):
    """``Lexer._cs_advance(cs, byte)``: a condition set after one byte (``_CS_FAIL`` when one of
    its lookaheads failed), memoized in the lexer's dict."""
    if cs == _EMPTY_CS:
        return _EMPTY_CS
    cdef dict memo = lexer._cs_step
    cdef tuple key = (cs, byte)
    cdef object hit = memo.get(key)
    if hit is not None:
        return hit
    cdef set out = set()
    cdef object r
    for aid in <frozenset?>(<list?>lexer._cs)[cs]:
        r = _atom_advance(lexer, aid, byte)
        if r == _ATOM_FALSE:
            hit = _CS_FAIL
            break
        if r != _ATOM_TRUE:
            out.add(r)
    if hit is None:
        hit = lexer._intern_cs(frozenset(out))
    memo[key] = hit
    return hit


def cs_advance(lexer, cs, byte):
    """``Lexer._cs_advance(cs, byte)``."""
    return _cs_advance(lexer, cs, byte)


cdef object _atom_advance(object lexer, object aid, object byte):
    """``Lexer._atom_advance(aid, byte)``: a lookahead's open body paths after one byte."""
    cdef dict memo = lexer._atom_step
    cdef tuple key = (aid, byte)
    cdef object hit = memo.get(key)
    if hit is not None:
        return hit
    cdef tuple atom = <tuple?>(<list?>lexer._atoms)[aid]
    cdef object positive = atom[0]
    cdef object trackers = atom[2]
    cdef object tr2 = None if trackers is None else lexer._trackers_advance(trackers, byte)
    cdef object prog = lexer.prog
    cdef dict closures = lexer._closures
    cdef list out = []
    cdef tuple path
    cdef object pc, cs, cs2, nxt
    for path in <frozenset?>atom[1]:
        pc = path[0]
        cs = path[1]
        cs2 = cs and _cs_advance(lexer, cs, byte)  # (the empty set stays empty)
        if cs2 == _CS_FAIL:
            continue
        if pc == -1:
            out.append((-1, cs2))
            continue
        nxt = _advance(prog, pc, byte)
        if nxt >= 0:
            out.extend(<tuple?>_closure(lexer, closures, nxt, cs2, tr2))
    hit = lexer._resolve_body(positive, out, tr2)
    memo[key] = hit
    return hit


def atom_advance(lexer, aid, byte):
    """``Lexer._atom_advance(aid, byte)``."""
    return _atom_advance(lexer, aid, byte)


cdef object _entries_groups(object lexer, int t, tuple entries):
    """``Lexer._entries_groups(t, entries)``: the bitmask of terminal ``t``'s byte groups on which
    a lane holding ``entries`` can survive or report (per-pc masks memoized in the lexer)."""
    cdef dict memo = <dict?>(<list?>lexer._pc_groups)[t]
    cdef object mask = 0, m
    cdef tuple ent
    for ent in entries:
        pc = ent[0]
        if pc < 0:
            return (_ONE << len(<tuple?>(<list?>lexer._grep)[t])) - 1  # (a Python int: 256 groups at most)
        m = memo.get(pc)
        if m is None:
            m = lexer._pc_group_mask(t, pc)
            memo[pc] = m
        mask |= m
    return mask


def entries_groups(lexer, t, entries):
    """``Lexer._entries_groups(t, entries)``."""
    return _entries_groups(lexer, t, entries)


cdef list _lane_live(object lexer, int t, int ts):
    """``Lexer._lane_live(t, ts)``: the lane's transitions that matter, ``(groups, lane state',
    events)`` per set of byte groups it steps alike, each set stepped once on its first group."""
    cdef list live = <list?>(<list?>lexer._ts_live)[t]
    cdef object hit = live[ts]
    if hit is not None:
        return <list?>hit
    cdef list out = []
    cdef tuple lane = <tuple?>(<list?>(<list?>lexer._ts)[t])[ts]
    cdef tuple entries = <tuple?>lane[0]
    cdef object trackers = lane[1]
    cdef list ts_rows = lexer._ts_rows
    cdef list memo = <list?>(<list?>ts_rows[t])[ts]
    cdef tuple grep = <tuple?>(<list?>lexer._grep)[t]
    cdef object mask = _entries_groups(lexer, t, entries)
    cdef object sets
    if not mask & (mask - 1):  # ``_read_groups``: none, or one group
        sets = [(mask.bit_length() - 1,)] if mask else []
    else:
        sets = lexer._read_groups(t, entries, trackers)
    cdef _Tables z = _tables(lexer)
    cdef tuple gs, res
    cdef Py_ssize_t j
    for gs in sets:
        res = <tuple?>_lane_step(lexer, z, t, ts, grep[gs[0]])
        for j in range(1, len(gs)):
            memo[gs[j]] = res
        if <int>res[0] >= 0 or res[1]:
            out.append((gs, res[0], res[1]))
    live[ts] = out
    return out


def lane_live(lexer, t, ts):
    """``Lexer._lane_live(t, ts)``."""
    return _lane_live(lexer, t, ts)


def row(lexer, state):
    """``Lexer.row(state)``: ``(class of each byte, result of each class)``, every class's
    result from the live lanes' transitions that matter (the Python row, statement by statement)."""
    if state < 0:  # DEAD (the initial state of a lexer without terminals) stays DEAD
        return [0] * 256, [(-1, ())]
    cls_reps = lexer.byte_classes(state)
    cdef tuple reps = <tuple?>cls_reps[1]
    cdef list row = <list?>(<list?>lexer._js_rows)[state]
    cdef Py_ssize_t k, n = len(reps), i = 0
    for k in range(n):
        if row[k] is None:
            break
    else:
        return cls_reps[0], row
    cdef tuple lanes = <tuple?>(<list?>lexer._js)[state]
    cdef list spread = lexer._spread(tuple([(<tuple?>x)[0] for x in lanes]))
    cdef list nxt = [[] for _ in range(n)]
    cdef list evs = [[] for _ in range(n)]
    cdef list to_classes, targets
    cdef tuple pair, item, gs, ev, lane_ts
    cdef object ts2
    cdef int t
    for pair in lanes:
        t = pair[0]
        to_classes = <list?>spread[i]
        i += 1
        for item in _lane_live(lexer, t, pair[1]):
            gs = <tuple?>item[0]
            ts2 = item[1]
            ev = <tuple?>item[2]
            lane_ts = (t, ts2)
            for g in gs:
                for kk in <list?>to_classes[g]:
                    if ts2 >= 0:
                        (<list?>nxt[kk]).append(lane_ts)
                    if ev:
                        (<list?>evs[kk]).extend(ev)
    cdef _Tables z = _tables(lexer)
    for k in range(n):
        if row[k] is None:
            row[k] = (_intern_joint(lexer, z, tuple(<list?>nxt[k])), tuple(<list?>evs[k]))
            _transition_added(lexer, z)
    return cls_reps[0], row


# ------------------------------------------------------------------ plain lanes, natively
cdef inline string _packed(const int32_t* xs, Py_ssize_t n):
    return string(<const char*>xs, n * sizeof(int32_t))


cdef inline void _append_new(vector[int32_t]* v, int32_t x):
    """Append ``x`` unless ``v`` holds it (the short lists of a closure or a lane's entries)."""
    cdef size_t i
    for i in range(v.size()):
        if v[0][i] == x:
            return
    v.push_back(x)


cdef class _Plain:
    """A native mirror of the lexer's *plain* lanes — no lookahead condition on any entry, no
    lookbehind tracker, no pending candidate — and of its joint states, for :func:`step_plain`.

    Why. Nine in ten entries a cold dynamic mask explores are byte steps, and a byte step was
    ~2 µs of Python objects per lane state it had not stepped yet: a closure looked up under a
    3-tuple, the lane's entries rebuilt as a tuple of pairs and hashed to intern it, its memo row
    a Python list. A plain lane is just its list of pcs, so here it is one: interned under its
    packed pcs, its steps memoized in C arrays, its closures (when they are plain too) in C.
    Everything else — a lane with lookaheads or trackers, a closure through a lookahead, a new
    match condition — is the lexer's own code (:func:`_lane_step`, ``_make_cond``), and every
    lane or joint state is interned in the lexer's own tables first (the budget and the ids are
    the lexer's: :func:`_intern_lane`, :func:`_intern_joint`); the mirror reads them back in
    order (:meth:`sync_lanes`, :meth:`sync_joint`), so it never holds a state the lexer lacks."""
    cdef vector[int32_t] ng                    # per terminal: its byte groups
    cdef vector[vector[uint8_t]] gid           # per terminal: byte -> its group
    cdef vector[vector[int32_t]] lane_off      # per terminal, per lane: offset in pcs (-1: not plain)
    cdef vector[vector[int32_t]] lane_len
    cdef vector[int32_t] pcs
    cdef vector[vector[int32_t]] memo          # per terminal: (lane * ng + group) * 2 -> sid, cond
    cdef vector[unordered_map[string, int32_t]] lane_ids  # per terminal: packed pcs -> plain lane
    cdef vector[int32_t] js_off, js_len, js_pairs  # joint states: (terminal, lane) pairs
    cdef unordered_map[string, int32_t] js_ids
    cdef unordered_map[int32_t, int32_t] cl_off   # closure from a pc (plain): offset in cl, -1: not plain
    cdef vector[int32_t] cl                    # closures: length, then pcs (-1: a match end)
    cdef unordered_map[string, int32_t] conds  # terminal + the pcs ahead of a match end -> its condition
    cdef vector[int32_t] sc_entries, sc_new, sc_lanes, sc_nxt  # scratch (no allocation per step)
    cdef vector[int32_t] sc_stack, sc_pool, sc_out             # (and per closure: closure_plain)

    def __init__(self, lexer):
        cdef Py_ssize_t t, b, n = len(lexer._gid)
        cdef tuple g
        self.ng.resize(n)
        self.gid.resize(n)
        self.lane_off.resize(n)
        self.lane_len.resize(n)
        self.memo.resize(n)
        self.lane_ids.resize(n)
        for t in range(n):
            g = <tuple?>lexer._gid[t]
            self.ng[t] = len(<tuple?>lexer._grep[t])
            self.gid[t].resize(256)
            for b in range(256):
                self.gid[t][b] = <uint8_t>(<int>g[b])

    cdef void sync_lanes(self, _Tables z, int t) except *:
        """Mirror terminal ``t``'s lanes the lexer interned since the last call."""
        cdef list lanes = <list?>z.ts[t]
        cdef Py_ssize_t ts, n = len(lanes), ng = self.ng[t]
        cdef tuple lane, entries, e
        cdef bint plain
        cdef int32_t off
        for ts in range(self.lane_off[t].size(), n):
            lane = <tuple?>lanes[ts]
            entries = <tuple?>lane[0]
            plain = lane[1] is None
            if plain:
                for e in entries:
                    if <int>e[0] < 0 or <int>e[1] != 0:
                        plain = False
                        break
            if plain:
                off = self.pcs.size()
                for e in entries:
                    self.pcs.push_back(<int>e[0])
                self.lane_off[t].push_back(off)
                self.lane_len[t].push_back(len(entries))
                self.lane_ids[t][_packed(self.pcs.data() + off, len(entries))] = ts
            else:
                self.lane_off[t].push_back(-1)
                self.lane_len[t].push_back(0)
            self.memo[t].resize((ts + 1) * ng * 2, INT32_MIN)

    cdef void sync_joint(self, _Tables z) except *:
        """Mirror the joint states the lexer interned since the last call."""
        cdef list js = z.js
        cdef Py_ssize_t q, n = len(js)
        cdef tuple lanes, pair
        cdef int32_t off
        for q in range(self.js_off.size(), n):
            lanes = <tuple?>js[q]
            off = self.js_pairs.size()
            for pair in lanes:
                self.js_pairs.push_back(<int>pair[0])
                self.js_pairs.push_back(<int>pair[1])
            self.js_off.push_back(off)
            self.js_len.push_back(len(lanes))
            self.js_ids[_packed(self.js_pairs.data() + off, 2 * len(lanes))] = q

    cdef int32_t closure_of(self, object lexer, _Tables z, int nxt) except -2:
        """Offset in :attr:`cl` of the closure from ``nxt`` under no condition, or -1 when a path
        of it passes a lookahead (then the lane step is the lexer's)."""
        cdef unordered_map[int32_t, int32_t].iterator it = self.cl_off.find(nxt)
        if it != self.cl_off.end():
            return dereference(it).second
        cl = z.closures.get((nxt, _EMPTY_CS, None))
        if cl is None:
            if self.closure_plain(z, nxt) == 0:
                return self.cl_off[nxt]
            cl = _closure(lexer, z.closures, nxt, _EMPTY_CS, None)
        cdef int32_t off = self.cl.size()
        cdef tuple qe
        for qe in <tuple?>cl:
            if <int>qe[1] != _EMPTY_CS:
                self.cl.resize(off)
                self.cl_off[nxt] = -1
                return -1
        self.cl.push_back(len(<tuple?>cl))
        for qe in <tuple?>cl:
            self.cl.push_back(<int>qe[0])
        self.cl_off[nxt] = off
        return off

    cdef int closure_plain(self, _Tables z, int pc0) except -1:
        """:func:`_closure` from ``pc0`` under no condition and no tracker, in C — the same pcs in
        the same order, appended to :attr:`cl` (``cl_off[pc0]``) — or 1, nothing kept, when a path
        meets a lookahead, lookbehind or boundary (the lexer's closure makes their atoms).

        Why. Each count of a bounded string has pcs of its own, so each new count's step started a
        closure in Python objects (a tuple per visited item, sets of them): a twentieth of a cold
        first mask inside a ``maxLength`` string."""
        cdef carray.array kind = z.kind, A = z.A, B = z.B, Cc = z.Cc, D = z.D, T = z.T
        # the stack: (pc, offset and length of its path flags in pool: the reps whose optional
        # iteration started at this position, ascending)
        cdef vector[int32_t]* st = &self.sc_stack
        cdef vector[int32_t]* pool = &self.sc_pool
        cdef vector[int32_t]* out = &self.sc_out
        cdef unordered_set[string] visited
        cdef int32_t pc, fo, fl, k, rep, first, n, j, i, at
        cdef bint has
        st.clear()
        pool.clear()
        out.clear()
        st.push_back(pc0)
        st.push_back(0)
        st.push_back(0)
        while st.size():
            fl = st.back()
            st.pop_back()
            fo = st.back()
            st.pop_back()
            pc = st.back()
            st.pop_back()
            pool.push_back(pc)  # (the visited key: pc, then its flags)
            for i in range(fl):
                at = pool[0][fo + i]
                pool.push_back(at)
            if not visited.insert(_packed(pool.data() + pool.size() - fl - 1, fl + 1)).second:
                pool.resize(pool.size() - fl - 1)
                continue
            pool.resize(pool.size() - fl - 1)
            k = kind.data.as_uchars[pc]
            if k == K_CHAR or k == K_MID or k == K_ACCEPT or k == K_SUBACCEPT:
                _append_new(out, pc if k == K_CHAR or k == K_MID else -1)
            elif k == K_SPLIT:
                first = A.data.as_ints[pc]
                n = B.data.as_ints[pc]
                for j in range(first + n - 1, first - 1, -1):
                    st.push_back(T.data.as_ints[j])
                    st.push_back(fo)
                    st.push_back(fl)
            elif k == K_REP_ENTER or k == K_REP_CHECK:
                rep = A.data.as_ints[pc]
                has = False
                for i in range(fl):
                    if pool[0][fo + i] == rep:
                        has = True
                        break
                if k == K_REP_ENTER:
                    self._push_flags(B.data.as_ints[pc], fo, fl, rep, -1 if has else 0)
                elif has:  # the iteration just finished consumed nothing: take the tail
                    self._push_flags(Cc.data.as_ints[pc], fo, fl, rep, -1)
                elif D.data.as_ints[pc]:  # greedy: body first
                    self._push_flags(Cc.data.as_ints[pc], fo, fl, rep, 0)
                    self._push_flags(B.data.as_ints[pc], fo, fl, rep, 1)
                else:
                    self._push_flags(B.data.as_ints[pc], fo, fl, rep, 1)
                    self._push_flags(Cc.data.as_ints[pc], fo, fl, rep, 0)
            else:  # a lookahead, lookbehind or boundary (or what the lexer's closure refuses)
                return 1
        cdef int32_t off = self.cl.size()
        self.cl.push_back(out.size())
        self.cl.insert(self.cl.end(), out.begin(), out.end())
        self.cl_off[pc0] = off
        return 0

    cdef void _push_flags(self, int32_t pc, int32_t fo, int32_t fl, int32_t rep, int how):
        """Push ``pc`` with the flags at ``pool[fo:fo + fl]``: as they are (``how`` 0), without
        ``rep`` (-1), or with it (1, kept ascending)."""
        cdef vector[int32_t]* pool = &self.sc_pool
        cdef int32_t i, x, nfo = pool.size(), n = 0
        cdef bint put = how != 1
        if how == 0:
            nfo = fo
            n = fl
        else:
            for i in range(fl):
                x = pool[0][fo + i]
                if how == 1 and not put and rep < x:
                    pool.push_back(rep)
                    n += 1
                    put = True
                if how == -1 and x == rep:
                    continue
                pool.push_back(x)
                n += 1
            if not put:
                pool.push_back(rep)
                n += 1
        self.sc_stack.push_back(pc)
        self.sc_stack.push_back(nfo)
        self.sc_stack.push_back(n)

    cdef int step_lane(self, object lexer, _Tables z, int t, int ts, int byte, int32_t* out) except -1:
        """Plain lane ``ts`` of ``t`` after ``byte``: ``out = (lane or -1, condition of its match
        end or -1)``, memoized; returns 1 when the step is not plain (a closure through a
        lookahead: the caller asks :func:`_lane_step`). The algorithm of :func:`_lane_step` for a
        lane whose entries carry no conditions: the first match end cuts the rest."""
        cdef Py_ssize_t slot = ((<Py_ssize_t>ts) * self.ng[t] + self.gid[t][byte]) * 2
        cdef int32_t* m = self.memo[t].data() + slot
        if m[0] != INT32_MIN:
            out[0] = m[0]
            out[1] = m[1]
            return 0
        # (scratch vectors of the mirror: no allocation per step; the entries are a copy, as the
        # pcs may grow while the step runs)
        cdef vector[int32_t]* entries = &self.sc_entries
        cdef vector[int32_t]* new = &self.sc_new
        cdef int32_t off = self.lane_off[t][ts]
        entries.assign(self.pcs.data() + off, self.pcs.data() + off + self.lane_len[t][ts])
        new.clear()
        cdef int32_t cond = -1, c, q, k, j, n_cl
        cdef object prog = z.prog
        cdef int nxt
        cdef bint cut = False
        for k in range(<int32_t>entries.size()):
            nxt = _advance_int(prog, entries[0][k], byte)
            if nxt < 0:
                continue
            c = self.closure_of(lexer, z, nxt)
            if c < 0:
                return 1
            n_cl = self.cl[c]
            for j in range(n_cl):
                q = self.cl[c + 1 + j]
                if q == -1:
                    cond = self.cond_ahead(lexer, z, t, new[0])
                    if cond == _FALSE:
                        cond = -1
                    cut = True
                    break
                _append_new(new, q)
            if cut:
                break
        cdef int32_t sid = -1
        cdef unordered_map[string, int32_t].iterator it
        cdef string key
        if new.size():
            key = _packed(new.data(), new.size())
            it = self.lane_ids[t].find(key)
            if it != self.lane_ids[t].end():
                sid = dereference(it).second
            else:
                sid = _intern_lane(lexer, z, <dict?>z.ts_ids[t], t,
                                   tuple([(x, 0) for x in new[0]]))
                self.sync_lanes(z, t)
        m = self.memo[t].data() + slot  # (the memo grew when lanes were mirrored)
        m[0] = sid
        m[1] = cond
        out[0] = sid
        out[1] = cond
        _transition_added(lexer, z)
        return 0

    cdef int32_t cond_ahead(self, object lexer, _Tables z, int t, vector[int32_t]& ahead) except -2:
        """The condition of a match end of ``t`` with the plain entries ``ahead`` of it:
        ``TRUE`` with none, else the lexer's (``"every entry ahead fails"``, interned once)."""
        if ahead.size() == 0:
            return 0
        cdef vector[int32_t] key_pcs
        key_pcs.push_back(t)
        key_pcs.insert(key_pcs.end(), ahead.begin(), ahead.end())
        cdef string key = _packed(key_pcs.data(), key_pcs.size())
        cdef unordered_map[string, int32_t].iterator it = self.conds.find(key)
        if it != self.conds.end():
            return dereference(it).second
        cdef list new = [(x, 0) for x in ahead]
        cid = z.cond_ids.get((t, None, frozenset(new), _EMPTY_CS))
        if cid is None:
            cid = lexer._make_cond(t, None, new, _EMPTY_CS)
        self.conds[key] = <int32_t>cid
        return <int32_t>cid


def step_plain(lexer, int state, int byte):
    """``Lexer.step(state, byte)`` — the same next state and events — with the plain lanes
    stepped natively (:class:`_Plain`) and the others by :func:`_lane_step`; the joint state is
    not memoized here (the dynamic engine's :class:`~glrmask_ext.runtime.LazyLexer` asks for each
    once) and the lexer's own joint memo row is left as it is."""
    cdef int32_t q2
    cdef tuple evs = step_plain_c(lexer, state, byte, &q2)
    return q2, evs


cdef tuple step_plain_c(object lexer, int state, int byte, int32_t* q2):
    """:func:`step_plain` for C callers (the explorer's loop, ``glrmask_ext.lazy_explore``): the
    next state in ``q2``, the events returned — no Python call, no result tuple to unpack."""
    q2[0] = -1
    if state < 0:
        return ()
    if not 0 <= byte < 256:
        raise IndexError("not a byte")  # (what Lexer.step's row lookup raises)
    cdef _Tables z = _tables(lexer)
    cdef _Plain nv = z.plain
    if nv is None:
        nv = z.plain = _Plain(lexer)
    if state >= <int>nv.js_off.size():
        nv.sync_joint(z)
        if state >= <int>nv.js_off.size():
            raise IndexError("lexer state out of range")
    cdef vector[int32_t]* lanes = &nv.sc_lanes  # (scratch: a lane step may intern joint states)
    cdef vector[int32_t]* nxt = &nv.sc_nxt
    cdef int32_t off = nv.js_off[state]
    lanes.assign(nv.js_pairs.data() + off, nv.js_pairs.data() + off + 2 * nv.js_len[state])
    nxt.clear()
    cdef list events = None
    cdef int32_t res[2]
    cdef int t, ts, i
    cdef tuple lane_res
    for i in range(<int>lanes.size() // 2):
        t = lanes[0][2 * i]
        ts = lanes[0][2 * i + 1]
        if ts >= <int>nv.lane_off[t].size():
            nv.sync_lanes(z, t)
        if nv.lane_off[t][ts] < 0 or nv.step_lane(lexer, z, t, ts, byte, res):
            lane_res = <tuple?>_lane_step(lexer, z, t, ts, byte)
            res[0] = lane_res[0]
            if lane_res[1]:
                if events is None:
                    events = []
                events.extend(<tuple?>lane_res[1])
        elif res[1] >= 0:
            if events is None:
                events = []
            events.append((t, res[1]))
        if res[0] >= 0:
            nxt.push_back(t)
            nxt.push_back(res[0])
    cdef tuple evs = () if events is None else tuple(events)
    _transition_added(lexer, z)
    if not nxt.size():
        return evs
    cdef string key = _packed(nxt.data(), nxt.size())
    cdef unordered_map[string, int32_t].iterator it = nv.js_ids.find(key)
    if it == nv.js_ids.end():
        nv.sync_joint(z)
        it = nv.js_ids.find(key)
    if it != nv.js_ids.end():
        q2[0] = dereference(it).second
        return evs
    q2[0] = _intern_joint(lexer, z, tuple([(nxt[0][2 * i], nxt[0][2 * i + 1]) for i in range(<int>nxt.size() // 2)]))
    nv.sync_joint(z)
    return evs
