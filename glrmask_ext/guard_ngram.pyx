# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The no-repeat-ngram guard's per-request index in C (DESIGN §9.2): push, rollback, bans, fill.

Why native: ``fill_banned`` runs on every decode step next to the grammar mask, so reading the
current ban list and clearing its bits must not loop over Python objects.

The index maps each ``(n-1)``-gram of the history to a count per follower, so pushing a token,
popping one (rollback) and sliding the window are O(n) with no scan of the history, and the current
ban list is one array read. Counts (not sets) make removal exact when an n-gram occurs twice.

Layout: the history and, per position ``p``, the interned id of the key ``h[p : p+n-1]`` (so the
key of a window position is never re-hashed); a key table (open addressing over the key tokens)
and a follower table (open addressing over ``(key, follower)``) whose live entries form one
doubly-linked list per key. Entries whose count drops to zero stay in the hash table, unlinked, and
come back to life if the pair reappears, so nothing is ever deleted from a probe sequence.
"""
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, qsort, realloc
from libc.string cimport memset

from glrmask_ext.guard_row cimport WordRow, acquire_word_row, clear_ids, row_is_empty, set_ids

from glrmask.guards.errors import NoRepeatNGramError
from glrmask.guards.fill_result import FillResult

cnp.import_array()

cdef enum:
    NOGIL_FOLLOWERS = 256  # ban lists at least this long are cleared without the GIL

_NOTHING = FillResult(0, False)
_RELAXED = FillResult(0, True)


cdef struct Ent:
    int64_t follower
    int64_t count
    int32_t key
    int32_t prev
    int32_t next


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    # splitmix64 finalizer: a cheap, well-spread hash of one 64-bit word.
    x ^= x >> 30
    x *= <uint64_t>0xBF58476D1CE4E5B9
    x ^= x >> 27
    x *= <uint64_t>0x94D049BB133111EB
    x ^= x >> 31
    return x


cdef inline void* _grow(void* p, Py_ssize_t* cap, Py_ssize_t need, size_t item) except NULL:
    cdef Py_ssize_t c = cap[0] if cap[0] > 0 else 16
    while c < need:
        c *= 2
    cdef void* q = realloc(p, c * item)
    if q == NULL:
        raise MemoryError()
    cap[0] = c
    return q


cdef int _cmp_i64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef class NoRepeatNGramState:
    """History and incremental index of one request (opened by :meth:`NoRepeatNGram.start`).

    Invariant: the index holds exactly the n-grams ``h[i:i+n]`` with ``lo <= i <= len(h) - n``,
    where ``lo = max(0, len(h) - window)`` (0 without a window), counted by ``(n-1)``-gram and
    follower.
    """

    cdef int _n
    cdef int64_t _window  # -1: the whole history
    cdef int64_t* _wl
    cdef Py_ssize_t _n_wl
    cdef int64_t* _h
    cdef int32_t* _key_at
    cdef Py_ssize_t _len, _hcap
    cdef int64_t _n_fixed
    cdef long long _relaxed
    # keys: tokens (n-1 per key), hash, first live follower entry, number of live followers
    cdef int64_t* _key_tok
    cdef uint64_t* _key_hash
    cdef int32_t* _key_first
    cdef int64_t* _key_live
    cdef Py_ssize_t _n_keys, _keys_cap, _key_tok_cap, _key_hash_cap, _key_first_cap, _key_live_cap
    cdef int32_t* _key_slots
    cdef Py_ssize_t _key_slot_cap
    # follower entries
    cdef Ent* _ents
    cdef Py_ssize_t _n_ents, _ents_cap
    cdef int32_t* _ent_slots
    cdef Py_ssize_t _ent_slot_cap
    cdef int64_t* _scratch
    cdef Py_ssize_t _scratch_cap

    def __cinit__(self):
        self._wl = self._h = self._key_tok = self._key_live = self._scratch = NULL
        self._key_at = self._key_first = self._key_slots = self._ent_slots = NULL
        self._key_hash = NULL
        self._ents = NULL

    def __dealloc__(self):
        free(self._wl)
        free(self._h)
        free(self._key_at)
        free(self._key_tok)
        free(self._key_hash)
        free(self._key_first)
        free(self._key_live)
        free(self._key_slots)
        free(self._ents)
        free(self._ent_slots)
        free(self._scratch)

    def __init__(self, config, prompt_tokens=()):
        """``config``: a :class:`glrmask.guards.NoRepeatNGram`; the prompt is pushed when it counts."""
        self._n = config.n
        self._window = -1 if config.window is None else config.window
        self._relaxed = 0
        self._len = self._hcap = 0
        self._n_keys = self._keys_cap = 0
        self._key_tok_cap = self._key_hash_cap = self._key_first_cap = self._key_live_cap = 0
        self._n_ents = self._ents_cap = 0
        self._scratch_cap = 0
        cdef Py_ssize_t wl_cap = 0, k
        whitelist = sorted(config.whitelist)
        self._n_wl = len(whitelist)
        if self._n_wl:
            self._wl = <int64_t*>_grow(NULL, &wl_cap, self._n_wl, sizeof(int64_t))
            for k in range(self._n_wl):
                self._wl[k] = whitelist[k]
        self._key_slot_cap = 64
        self._key_slots = <int32_t*>_grow(NULL, &self._key_slot_cap, 64, sizeof(int32_t))
        memset(self._key_slots, 0xFF, self._key_slot_cap * sizeof(int32_t))
        self._ent_slot_cap = 64
        self._ent_slots = <int32_t*>_grow(NULL, &self._ent_slot_cap, 64, sizeof(int32_t))
        memset(self._ent_slots, 0xFF, self._ent_slot_cap * sizeof(int32_t))
        if self._n == 1:
            self._new_key(0)  # the empty key, id 0: every token follows it
        if config.include_prompt:
            for tok in prompt_tokens:
                self.push(tok)
        self._n_fixed = self._len

    # ----------------------------------------------------------------------------- inspection
    @property
    def relaxed_steps(self) -> int:
        """Steps where the ban was skipped so as not to empty the mask."""
        return self._relaxed

    @relaxed_steps.setter
    def relaxed_steps(self, long long value):
        self._relaxed = value

    @property
    def n_generated(self) -> int:
        """Tokens pushed after the prompt (what ``rollback`` may undo)."""
        return self._len - self._n_fixed

    # ----------------------------------------------------------------------------- history
    def push(self, int64_t token_id):
        """Append one token to the history."""
        cdef int n = self._n
        cdef Py_ssize_t cap
        if n == 0:
            return
        if self._len == self._hcap:
            cap = self._hcap
            self._h = <int64_t*>_grow(self._h, &self._hcap, self._len + 1, sizeof(int64_t))
            self._key_at = <int32_t*>_grow(self._key_at, &cap, self._len + 1, sizeof(int32_t))
        self._h[self._len] = token_id
        self._len += 1
        cdef int64_t length = self._len, lo = 0, old_lo, i
        if n > 1 and length >= n - 1:
            self._key_at[length - n + 1] = self._intern(length - n + 1)
        if self._window >= 0:
            old_lo = self._lo(length - 1)
            lo = self._lo(length)
            if lo > old_lo and old_lo <= length - 1 - n:
                self._remove(old_lo)
        i = length - n
        if i >= lo:
            self._add(i)

    def rollback(self, int64_t k):
        """Undo the last ``k`` pushes (the prompt cannot be rolled back)."""
        if self._n == 0:
            return
        if k < 0 or k > self._len - self._n_fixed:
            raise NoRepeatNGramError(
                f"cannot roll back {k} tokens: {self._len - self._n_fixed} were generated"
            )
        cdef int64_t length, lo, new_lo, i, step, n = self._n
        for step in range(k):
            length = self._len
            lo = self._lo(length)
            i = length - n
            if i >= lo:
                self._remove(i)
            self._len -= 1
            if self._window >= 0:
                new_lo = self._lo(length - 1)
                if new_lo < lo and new_lo <= length - 1 - n:
                    self._add(new_lo)

    # ----------------------------------------------------------------------------- bans
    def banned(self) -> list:
        """Tokens that would repeat an n-gram of the history if sampled now (sorted)."""
        cdef int32_t kid = self._current_key()
        if kid < 0 or self._key_live[kid] == 0:
            return []
        cdef Py_ssize_t m = self._collect(kid)
        qsort(self._scratch, m, sizeof(int64_t), _cmp_i64)
        return [self._scratch[k] for k in range(m)]

    def fill_banned(self, out_words):
        """Clear the banned tokens' bits in one packed int32 mask row, unless that empties it.

        Returns ``(cleared, relaxed)``. When every token the row allows is banned, the row is left
        as it was, ``relaxed`` is True and :attr:`relaxed_steps` grows by one.
        """
        cdef int32_t kid = self._current_key()
        if kid < 0 or self._key_live[kid] == 0:
            return _NOTHING
        cdef WordRow row
        keep = acquire_word_row(out_words, &row)
        cdef Py_ssize_t m, cleared
        cdef bint empty
        if self._key_live[kid] >= NOGIL_FOLLOWERS:
            with nogil:
                m = self._collect(kid)
                cleared = clear_ids(&row, self._scratch, m, self._scratch + m)
                empty = cleared > 0 and row_is_empty(&row)
                if empty:
                    set_ids(&row, self._scratch + m, cleared)
        else:
            m = self._collect(kid)
            cleared = clear_ids(&row, self._scratch, m, self._scratch + m)
            empty = cleared > 0 and row_is_empty(&row)
            if empty:
                set_ids(&row, self._scratch + m, cleared)
        if empty:
            self._relaxed += 1
            return _RELAXED
        return FillResult(cleared, False) if cleared else _NOTHING

    # ----------------------------------------------------------------------------- internals
    cdef inline int64_t _lo(self, int64_t length) noexcept nogil:
        cdef int64_t w = self._window
        return 0 if w < 0 or length <= w else length - w

    cdef int32_t _current_key(self) noexcept:
        """Key id of the last ``n-1`` tokens; -1 when there is none (off, or history too short)."""
        cdef int n = self._n
        if n == 0 or self._len < n - 1:
            return -1
        if n == 1:
            return 0
        return self._key_at[self._len - n + 1]

    cdef Py_ssize_t _collect(self, int32_t kid) noexcept nogil:
        """Write the key's live, non-whitelisted followers to the scratch buffer; return how many.

        The scratch buffer has room for twice the key's followers (ids, then cleared ids)."""
        cdef Py_ssize_t m = 0, lo, hi, mid
        cdef int32_t e = self._key_first[kid]
        cdef int64_t f
        while e >= 0:
            f = self._ents[e].follower
            e = self._ents[e].next
            if self._n_wl:
                lo = 0
                hi = self._n_wl
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if self._wl[mid] < f:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < self._n_wl and self._wl[lo] == f:
                    continue
            self._scratch[m] = f
            m += 1
        return m

    cdef uint64_t _hash_key(self, int64_t p) noexcept nogil:
        cdef uint64_t h = 0x9E3779B97F4A7C15
        cdef int64_t k
        for k in range(self._n - 1):
            h = _mix(h ^ <uint64_t>self._h[p + k])
        return h

    cdef bint _same_key(self, int32_t kid, int64_t p) noexcept nogil:
        cdef int64_t k, width = self._n - 1
        cdef const int64_t* a = self._key_tok + kid * width
        for k in range(width):
            if a[k] != self._h[p + k]:
                return False
        return True

    cdef int32_t _new_key(self, int64_t p) except -1:
        """A new key with the tokens ``h[p : p+n-1]`` (no followers yet)."""
        cdef int64_t width = self._n - 1, k
        cdef int32_t kid = <int32_t>self._n_keys
        cdef Py_ssize_t need
        if self._n_keys == self._keys_cap:
            need = self._n_keys + 1
            self._key_hash = <uint64_t*>_grow(self._key_hash, &self._key_hash_cap, need, sizeof(uint64_t))
            self._key_first = <int32_t*>_grow(self._key_first, &self._key_first_cap, need, sizeof(int32_t))
            self._key_live = <int64_t*>_grow(self._key_live, &self._key_live_cap, need, sizeof(int64_t))
            self._keys_cap = self._key_first_cap
            if width:
                self._key_tok = <int64_t*>_grow(
                    self._key_tok, &self._key_tok_cap, self._keys_cap * width, sizeof(int64_t)
                )
        for k in range(width):
            self._key_tok[kid * width + k] = self._h[p + k]
        self._key_hash[kid] = self._hash_key(p) if width else 0
        self._key_first[kid] = -1
        self._key_live[kid] = 0
        self._n_keys += 1
        return kid

    cdef int32_t _intern(self, int64_t p) except -1:
        """Id of the key ``h[p : p+n-1]``, created when new."""
        cdef uint64_t h = self._hash_key(p)
        cdef Py_ssize_t mask = self._key_slot_cap - 1
        cdef Py_ssize_t s = <Py_ssize_t>(h & <uint64_t>mask)
        cdef int32_t kid
        while True:
            kid = self._key_slots[s]
            if kid < 0:
                break
            if self._key_hash[kid] == h and self._same_key(kid, p):
                return kid
            s = (s + 1) & mask
        kid = self._new_key(p)
        self._key_slots[s] = kid
        if 2 * self._n_keys > self._key_slot_cap:
            self._rehash_keys()
        return kid

    cdef int _rehash_keys(self) except -1:
        cdef Py_ssize_t cap = self._key_slot_cap * 2, mask = cap - 1, s
        cdef Py_ssize_t c = 0
        cdef int32_t* slots = <int32_t*>_grow(NULL, &c, cap, sizeof(int32_t))
        memset(slots, 0xFF, c * sizeof(int32_t))
        cdef int32_t kid
        for kid in range(<int32_t>self._n_keys):
            s = <Py_ssize_t>(self._key_hash[kid] & <uint64_t>mask)
            while slots[s] >= 0:
                s = (s + 1) & mask
            slots[s] = kid
        free(self._key_slots)
        self._key_slots = slots
        self._key_slot_cap = c
        return 0

    cdef inline uint64_t _hash_ent(self, int32_t kid, int64_t f) noexcept nogil:
        return _mix((<uint64_t>kid * <uint64_t>0x9E3779B97F4A7C15) ^ _mix(<uint64_t>f))

    cdef int32_t _entry(self, int32_t kid, int64_t f) except -2:
        """Entry of the pair ``(key, follower)``, created (with count 0) when new."""
        cdef Py_ssize_t mask = self._ent_slot_cap - 1
        cdef Py_ssize_t s = <Py_ssize_t>(self._hash_ent(kid, f) & <uint64_t>mask)
        cdef int32_t e
        while True:
            e = self._ent_slots[s]
            if e < 0:
                break
            if self._ents[e].key == kid and self._ents[e].follower == f:
                return e
            s = (s + 1) & mask
        if self._n_ents == self._ents_cap:
            self._ents = <Ent*>_grow(self._ents, &self._ents_cap, self._n_ents + 1, sizeof(Ent))
        e = <int32_t>self._n_ents
        self._n_ents += 1
        self._ents[e].follower = f
        self._ents[e].count = 0
        self._ents[e].key = kid
        self._ents[e].prev = self._ents[e].next = -1
        self._ent_slots[s] = e
        if 2 * self._n_ents > self._ent_slot_cap:
            self._rehash_ents()
        return e

    cdef int _rehash_ents(self) except -1:
        cdef Py_ssize_t cap = self._ent_slot_cap * 2, mask = cap - 1, s
        cdef Py_ssize_t c = 0
        cdef int32_t* slots = <int32_t*>_grow(NULL, &c, cap, sizeof(int32_t))
        memset(slots, 0xFF, c * sizeof(int32_t))
        cdef int32_t e
        for e in range(<int32_t>self._n_ents):
            s = <Py_ssize_t>(self._hash_ent(self._ents[e].key, self._ents[e].follower) & <uint64_t>mask)
            while slots[s] >= 0:
                s = (s + 1) & mask
            slots[s] = e
        free(self._ent_slots)
        self._ent_slots = slots
        self._ent_slot_cap = c
        return 0

    cdef inline int32_t _key_of(self, int64_t i) noexcept:
        return 0 if self._n == 1 else self._key_at[i]

    cdef int _add(self, int64_t i) except -1:
        """Count the n-gram starting at history position ``i``."""
        cdef int32_t kid = self._key_of(i)
        cdef int32_t e = self._entry(kid, self._h[i + self._n - 1])
        cdef Ent* ent = &self._ents[e]
        if ent.count == 0:
            ent.prev = -1
            ent.next = self._key_first[kid]
            if ent.next >= 0:
                self._ents[ent.next].prev = e
            self._key_first[kid] = e
            self._key_live[kid] += 1
            if self._key_live[kid] * 2 > self._scratch_cap:
                self._scratch = <int64_t*>_grow(
                    self._scratch, &self._scratch_cap, self._key_live[kid] * 2, sizeof(int64_t)
                )
        ent.count += 1
        return 0

    cdef int _remove(self, int64_t i) except -1:
        """Uncount the n-gram starting at history position ``i`` (it is in the index)."""
        cdef int32_t kid = self._key_of(i)
        cdef int32_t e = self._entry(kid, self._h[i + self._n - 1])
        cdef Ent* ent = &self._ents[e]
        if ent.count <= 0:
            raise AssertionError("n-gram index out of step with the history")
        ent.count -= 1
        if ent.count == 0:
            if ent.prev >= 0:
                self._ents[ent.prev].next = ent.next
            else:
                self._key_first[kid] = ent.next
            if ent.next >= 0:
                self._ents[ent.next].prev = ent.prev
            ent.prev = ent.next = -1
            self._key_live[kid] -= 1
        return 0
