# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Native pruning of the JSON Schema lowering's rules (semantics and reference:
:meth:`glrmask.json_schema.builder.GrammarBuilder.prune`).

Why native. A large schema's lowering builds thousands of rules, many of them unproductive (the
complements and exclusive branches it tries) or unreachable, and the Python prune spent a
microsecond per alternative on set tests, per-symbol sets and user lists: 8 ms of the largest
schema's lowering. Here every symbol is an int once (one dictionary lookup per occurrence) and
the productive-symbol worklist and the reachability search run over int arrays.
"""
from libcpp.vector cimport vector

__all__ = ["prune_rules"]


def prune_rules(dict rules, dict terminals, start):
    """``(rules, terminals)`` pruned, or None when `start` derives no terminal string.

    `rules` maps each rule name to its alternatives (lists of symbol names), `terminals` each
    terminal name to its regex. A rule is productive when some alternative has only terminals and
    productive rules (names that are neither never are); productive rules keep their productive
    alternatives (the same list object when they keep all), and then only the rules and terminals
    reachable from `start` through them are kept, in their order. Exactly what the Python
    reference computes."""
    cdef dict ids = {}
    cdef list names = list(rules)
    cdef list tnames = list(terminals)
    cdef Py_ssize_t nr = len(names), nt = len(tnames), n = nr + nt
    cdef Py_ssize_t i, j, k, a, s, na
    cdef object alts, alt, sym, got
    for i in range(nr):
        ids[names[i]] = i
    for j in range(nt):
        ids[tnames[j]] = nr + j
    cdef vector[int] owner, off, syms
    for i in range(nr):
        for alt in <list>rules[names[i]]:
            owner.push_back(<int>i)
            off.push_back(<int>syms.size())
            for sym in alt:
                got = ids.get(sym)
                syms.push_back(-1 if got is None else <int>got)
    na = <Py_ssize_t>owner.size()
    off.push_back(<int>syms.size())
    # productive symbols: each alternative counts its occurrences not yet known productive
    cdef vector[char] prod = vector[char](n, 0)
    cdef vector[int] pending = vector[int](na, 0)
    cdef vector[int] head = vector[int](n, -1)
    cdef vector[int] nxt, user, work
    for j in range(nr, n):
        prod[j] = 1
    for a in range(na):
        for k in range(off[a], off[a + 1]):
            s = syms[k]
            if s < 0:
                pending[a] = -1  # an undefined name: never productive
                break
            if s < nr:
                pending[a] += 1
                user.push_back(<int>a)
                nxt.push_back(head[s])
                head[s] = <int>user.size() - 1
        if pending[a] == 0 and not prod[owner[a]]:
            prod[owner[a]] = 1
            work.push_back(owner[a])
    while not work.empty():
        s = work.back()
        work.pop_back()
        k = head[s]
        while k >= 0:
            a = user[k]
            if pending[a] > 0:
                pending[a] -= 1
                if pending[a] == 0 and not prod[owner[a]]:
                    prod[owner[a]] = 1
                    work.push_back(owner[a])
            k = nxt[k]
    got = ids.get(start)
    if got is None or not prod[<Py_ssize_t>got]:
        return None
    # an alternative is kept iff all its symbols are productive
    cdef vector[char] kept = vector[char](na, 0)
    cdef vector[int] first = vector[int](nr + 1, 0)
    for a in range(na):
        first[owner[a] + 1] = <int>(a + 1)
        if pending[a] != 0:
            continue
        kept[a] = 1
        for k in range(off[a], off[a + 1]):
            if not prod[syms[k]]:
                kept[a] = 0
                break
    for i in range(1, nr + 1):  # first[i]..first[i + 1]: the alternatives of rule i
        if first[i] < first[i - 1]:
            first[i] = first[i - 1]
    # reachable from start through kept alternatives
    cdef vector[char] reach = vector[char](n, 0)
    reach[<Py_ssize_t>got] = 1
    work.push_back(<int>got)
    while not work.empty():
        s = work.back()
        work.pop_back()
        if s >= nr:
            continue
        for a in range(first[s], first[s + 1]):
            if not kept[a]:
                continue
            for k in range(off[a], off[a + 1]):
                if not reach[syms[k]]:
                    reach[syms[k]] = 1
                    work.push_back(syms[k])
    cdef dict out_rules = {}
    cdef list some
    for i in range(nr):
        if not reach[i]:
            continue
        alts = rules[names[i]]
        if first[i + 1] - first[i] == sum_kept(kept, first[i], first[i + 1]):
            out_rules[names[i]] = alts
        else:
            some = []
            for a in range(first[i], first[i + 1]):
                if kept[a]:
                    some.append((<list>alts)[a - first[i]])
            out_rules[names[i]] = some
    cdef dict out_terms = {}
    for j in range(nt):
        if reach[nr + j]:
            out_terms[tnames[j]] = terminals[tnames[j]]
    return out_rules, out_terms


cdef inline Py_ssize_t sum_kept(vector[char]& kept, Py_ssize_t lo, Py_ssize_t hi):
    cdef Py_ssize_t a, c = 0
    for a in range(lo, hi):
        c += kept[a]
    return c
