# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The phrase-ban guard's per-request journal in C (DESIGN §9.1): push, rewind, release, bans.

Why native: the guard sees every sampled token of every request, next to a grammar mask that costs
a few microseconds, so its own step has to cost well under one. Per pushed token this module reads
the token's bytes straight from the vocabulary's CSR arrays (``glrmask.Vocab.token_offsets`` /
``token_bytes_concat``; any other vocabulary through one ``token_bytes`` call), decodes them as
UTF-8 exactly like Python's incremental ``"replace"`` decoder, case-folds each character with a
table taken from ``str.casefold`` (so folding is that of the running Python, by construction) and
steps the shared Aho–Corasick automaton byte by byte. The journal lives in C arrays that grow
geometrically and are reused after releases, so a push allocates nothing but the returned event.
``fill_banned`` clears the bans' bits in the caller's row in C. Both drop the GIL when the work is
large enough to pay for the switch (a long token, a long ban list).

Journal: record ``j`` (absolute position ``n_released + j``) holds, as they are after that token,
the token id, the end of its text in the folded stream, the end of its bytes in the raw stream,
the automaton state, the undecoded trailing bytes (at most 3) and the token they began in, the
folded end of its first character if that began in an earlier token (and that token), so a rewind
restores any earlier point. Text is released by decoding the released tokens' bytes at once, which
equals the concatenation of the incremental decoder's outputs: releases happen only where no
character is split.
"""
import threading

import numpy as np

cimport numpy as cnp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.long cimport PyLong_CheckExact
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memmove

from glrmask_ext.ahocorasick cimport PhraseAutomaton
from glrmask_ext.guard_row cimport WordRow, acquire_word_row, clear_ids, row_is_empty, set_ids

from glrmask.guards.errors import (
    BannedTokenPushed,
    NoAllowedToken,
    PendingLimitExceeded,
    PhraseAtStop,
    RequestClosed,
    RewindLimitExceeded,
)
from glrmask.guards.phrase_set import fold
from glrmask.vocab import Vocab

cnp.import_array()

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int* overflow) except? -1

# Work (bytes to scan, ids to clear) above which the GIL is dropped: below it the switch costs more.
cdef enum:
    NOGIL_SCAN_BYTES = 512
    NOGIL_BANS = 256


# --------------------------------------------------------------------------------- case folding
# Two-level table over code points: page (cp >> 8) → 1 + index of its 256-entry block (0: nothing on
# the page folds); entry → (offset in the pool << 4) | length of the folded UTF-8 (0: folds to itself).
cdef const uint16_t* _fold_page = NULL
cdef const uint32_t* _fold_entry = NULL
cdef const uint8_t* _fold_pool = NULL
cdef bint _fold_ready = False
_fold_arrays = None
_fold_lock = threading.Lock()


def build_fold_table():
    """Tabulate ``str.casefold`` for every code point (once per process, about 20 ms; later calls
    return at once). Guards call it when compiled, so no request pays for it."""
    global _fold_page, _fold_entry, _fold_pool, _fold_ready, _fold_arrays
    with _fold_lock:
        if _fold_ready:
            return
        cps = np.arange(0x110000, dtype="<u4")
        cps[0xD800:0xE000] = 0x20  # surrogates never come out of the decoder
        text = cps.tobytes().decode("utf-32-le")
        pages = np.zeros(0x1100, dtype=np.uint16)
        blocks = []
        pool = bytearray()
        for page in range(0x1100):
            chunk = text[page << 8:(page + 1) << 8]
            # casefold maps each character to >= 1 characters, so an unchanged chunk has no fold.
            if chunk.casefold() == chunk:
                continue
            block = np.zeros(256, dtype=np.uint32)
            for k, ch in enumerate(chunk):
                folded = ch.casefold()
                if folded != ch:
                    data = folded.encode("utf-8")
                    if len(data) > 15:
                        raise AssertionError(f"casefold of U+{ord(ch):04X} is {len(data)} bytes")
                    block[k] = (len(pool) << 4) | len(data)
                    pool += data
            blocks.append(block)
            pages[page] = len(blocks)
        entry = np.concatenate(blocks) if blocks else np.zeros(256, dtype=np.uint32)
        pool_arr = np.frombuffer(bytes(pool) or b"\0", dtype=np.uint8).copy()
        _fold_arrays = (pages, entry, pool_arr)
        _fold_page = <const uint16_t*>cnp.PyArray_DATA(pages)
        _fold_entry = <const uint32_t*>cnp.PyArray_DATA(entry)
        _fold_pool = <const uint8_t*>cnp.PyArray_DATA(pool_arr)
        _fold_ready = True


cdef inline int _utf8_encode(uint32_t cp, uint8_t* out) noexcept nogil:
    if cp < 0x80:
        out[0] = <uint8_t>cp
        return 1
    if cp < 0x800:
        out[0] = <uint8_t>(0xC0 | (cp >> 6))
        out[1] = <uint8_t>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <uint8_t>(0xE0 | (cp >> 12))
        out[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <uint8_t>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <uint8_t>(0xF0 | (cp >> 18))
    out[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <uint8_t>(0x80 | (cp & 0x3F))
    return 4


cdef inline int _fold_cp(uint32_t cp, bint case_sensitive, uint8_t* out) noexcept nogil:
    """The UTF-8 the matcher sees for code point ``cp``; returns its length."""
    cdef uint16_t page
    cdef uint32_t e
    cdef int n
    if not case_sensitive:
        page = _fold_page[cp >> 8]
        if page:
            e = _fold_entry[((<uint32_t>page - 1) << 8) | (cp & 0xFF)]
            if e:
                n = e & 15
                memcpy(out, _fold_pool + (e >> 4), n)
                return n
    return _utf8_encode(cp, out)


# --------------------------------------------------------------------------------- events
cdef class PhraseEvent:
    """What one :meth:`PhraseRequest.push` (or ``finish``) means for the caller.

    Released tokens may be streamed to the client; they are final. With ``rewind > 0`` the caller
    drops its last ``rewind`` tokens (KV cache, grammar state, other guards) and samples again at
    ``position`` with ``banned_tokens(position)`` masked out.

    Fields (a plain record: readable and writable, compared field by field):

    * ``released_tokens`` — tokens that became final with this call, oldest first;
    * ``released_text`` — their text (exactly the UTF-8 decoding of their bytes, in order);
    * ``rewind`` — number of most recent tokens to drop; 0 when there is no match;
    * ``position`` — index (in the generated sequence) of the next token to sample; after a
      rewind, where the ban applies;
    * ``released_logprobs`` — the logprob rows pushed with ``released_tokens`` (None where none
      was given);
    * ``dropped_tokens`` — the tokens a rewind drops (their logprob rows are dropped with them);
    * ``banned_token`` — the token banned at ``position`` by this rewind, else None;
    * ``matched_phrase`` — the phrase whose completion caused the rewind, else None.

    A C-level record rather than a dataclass because one is built per pushed token: building it
    costs ~40 ns instead of ~230 ns.
    """

    cdef public object released_tokens
    cdef public object released_text
    cdef public object rewind
    cdef public object position
    cdef public object released_logprobs
    cdef public object dropped_tokens
    cdef public object banned_token
    cdef public object matched_phrase

    def __init__(
        self, released_tokens, released_text, rewind, position, released_logprobs, dropped_tokens,
        banned_token, matched_phrase,
    ):
        self.released_tokens = released_tokens
        self.released_text = released_text
        self.rewind = rewind
        self.position = position
        self.released_logprobs = released_logprobs
        self.dropped_tokens = dropped_tokens
        self.banned_token = banned_token
        self.matched_phrase = matched_phrase

    cdef tuple _fields(self):
        return (
            self.released_tokens, self.released_text, self.rewind, self.position,
            self.released_logprobs, self.dropped_tokens, self.banned_token, self.matched_phrase,
        )

    def __eq__(self, other):
        if type(other) is not PhraseEvent:
            return NotImplemented
        return self._fields() == (<PhraseEvent>other)._fields()


    def __repr__(self):
        return (
            f"PhraseEvent(released_tokens={self.released_tokens!r}, "
            f"released_text={self.released_text!r}, rewind={self.rewind!r}, "
            f"position={self.position!r}, released_logprobs={self.released_logprobs!r}, "
            f"dropped_tokens={self.dropped_tokens!r}, banned_token={self.banned_token!r}, "
            f"matched_phrase={self.matched_phrase!r})"
        )


cdef inline PhraseEvent _event(
    list released, str text, int64_t rewind, int64_t position, list logprobs, list dropped,
    object banned, object phrase,
):
    cdef PhraseEvent ev = PhraseEvent.__new__(PhraseEvent)
    ev.released_tokens = released
    ev.released_text = text
    ev.rewind = rewind
    ev.position = position
    ev.released_logprobs = logprobs
    ev.dropped_tokens = dropped
    ev.banned_token = banned
    ev.matched_phrase = phrase
    return ev


# --------------------------------------------------------------------------------- the journal
cdef struct Rec:
    int64_t token
    int64_t fend          # end of its folded text (absolute folded offset)
    int64_t raw_end       # end of its bytes (absolute raw offset)
    int64_t origin        # token where the undecoded trailing bytes began; -1 when none
    int64_t carry_fend    # folded end of its first character if that began earlier, else -1
    int64_t first_origin  # token holding the first byte of its first character
    int32_t state
    uint8_t ncarry
    uint8_t carry[3]


cdef struct Scan:
    int32_t state
    int64_t fpos
    int64_t carry_fend
    int32_t match_pid
    int64_t match_end
    bint any_char
    uint8_t ncarry
    uint8_t carry[3]


cdef inline void* _grow(void* p, Py_ssize_t* cap, Py_ssize_t need, size_t item) except NULL:
    cdef Py_ssize_t c = cap[0] if cap[0] > 0 else 16
    while c < need:
        c *= 2
    cdef void* q = realloc(p, c * item)
    if q == NULL:
        raise MemoryError()
    cap[0] = c
    return q


cdef class PhraseRequest:
    """Per-request journal: held tokens, automaton states, and the bans of the current position.

    Opened by :meth:`glrmask.guards.PhraseGuard.start`; one per generation, used by one thread at a
    time. Pushing, releasing and rewinding follow DESIGN §9.1; see :class:`PhraseEvent`.
    """

    cdef PhraseAutomaton _ac
    cdef const int32_t* _depth
    cdef const int32_t* _out_id
    cdef const int32_t* _phrase_len
    cdef tuple _phrases
    cdef bint _cs
    cdef int64_t _max_rewinds
    cdef int64_t _max_pending
    cdef object _token_bytes
    cdef bint _fast
    cdef object _vocab_arrays
    cdef const uint8_t* _concat
    cdef const int64_t* _offsets
    cdef int64_t _size
    cdef int64_t _n_logits
    # held records: _recs[_head : _head + _n]
    cdef Rec* _recs
    cdef Py_ssize_t _head, _n, _cap
    # held bytes: _raw[_raw_head : _raw_len], the first at absolute raw offset _raw_base
    cdef uint8_t* _raw
    cdef Py_ssize_t _raw_head, _raw_len, _raw_cap
    cdef int64_t _raw_base
    cdef list _logprobs
    # stream state after the last held token
    cdef int64_t _n_released, _fpos, _carry_origin, _base_fpos
    cdef int32_t _state, _base_state
    cdef uint8_t _ncarry
    cdef uint8_t _carry[3]
    # bans at _ban_pos, sorted and distinct
    cdef int64_t _ban_pos
    cdef int64_t* _bans
    cdef int64_t* _scratch
    cdef Py_ssize_t _n_bans, _bans_cap
    cdef int64_t _rewinds
    cdef bint _closed

    def __cinit__(self):
        self._recs = NULL
        self._raw = NULL
        self._bans = NULL
        self._scratch = NULL

    def __dealloc__(self):
        free(self._recs)
        free(self._raw)
        free(self._bans)
        free(self._scratch)

    def __init__(self, compiled, max_rewinds, max_pending_tokens, vocab):
        """``compiled``: a :class:`glrmask.guards.phrase_set.CompiledPhrases`; ``vocab``: anything
        with ``token_bytes(id) -> bytes`` (a :class:`glrmask.Vocab` is read without Python calls)."""
        cdef PhraseAutomaton ac = compiled.automaton
        self._ac = ac
        self._depth = &ac._depth[0]
        self._out_id = &ac._out_id[0]
        self._phrase_len = &ac._phrase_len[0]
        self._phrases = tuple(compiled.phrases)
        self._cs = bool(compiled.case_sensitive)
        if not self._cs and not _fold_ready:
            build_fold_table()
        self._max_rewinds = max_rewinds
        self._max_pending = max_pending_tokens
        self._token_bytes = vocab.token_bytes
        self._fast = type(vocab) is Vocab
        if self._fast:
            offsets = np.ascontiguousarray(vocab.token_offsets, dtype=np.int64)
            concat = np.ascontiguousarray(vocab.token_bytes_concat, dtype=np.uint8)
            self._vocab_arrays = (offsets, concat)
            self._offsets = <const int64_t*>cnp.PyArray_DATA(offsets)
            self._concat = <const uint8_t*>cnp.PyArray_DATA(concat)
            self._size = vocab.size
            self._n_logits = vocab.n_logits
        self._logprobs = []
        self._head = self._n = self._cap = 0
        self._raw_head = self._raw_len = self._raw_cap = 0
        self._raw_base = 0
        self._n_released = 0
        self._state = self._base_state = 0
        self._fpos = self._base_fpos = 0
        self._ncarry = 0
        self._carry_origin = -1
        self._ban_pos = -1
        self._n_bans = self._bans_cap = 0
        self._rewinds = 0
        self._closed = False

    # ----------------------------------------------------------------------------- inspection
    @property
    def position(self) -> int:
        """Number of tokens in the retained history = index of the next token to sample."""
        return self._n_released + self._n

    @property
    def n_released(self) -> int:
        """Number of tokens released so far."""
        return self._n_released

    @property
    def pending_tokens(self) -> list:
        """Tokens held back (not yet released), oldest first."""
        return [self._recs[self._head + k].token for k in range(self._n)]

    @property
    def rewinds(self) -> int:
        """Rewinds performed so far in this request."""
        return self._rewinds

    @property
    def closed(self) -> bool:
        return self._closed

    def banned_tokens(self, position) -> list:
        """Tokens banned at ``position`` for this request (sorted; empty at any other position)."""
        if position != self._ban_pos:
            return []
        return [self._bans[k] for k in range(self._n_bans)]

    def fill_banned(self, out_words, position) -> int:
        """Clear the banned tokens' bits in one packed int32 mask row; return how many were set.

        Raises :class:`NoAllowedToken` (leaving the row unchanged) when the bans would clear the last
        allowed token: the grammar and the bans together leave nothing to sample there.
        """
        if self._n_bans == 0 or position != self._ban_pos:
            return 0
        cdef WordRow row
        cdef Py_ssize_t m
        cdef bint empty
        keep = acquire_word_row(out_words, &row)
        if self._n_bans >= NOGIL_BANS:
            with nogil:
                m = clear_ids(&row, self._bans, self._n_bans, self._scratch)
                empty = m > 0 and row_is_empty(&row)
                if empty:
                    set_ids(&row, self._scratch, m)
        else:
            m = clear_ids(&row, self._bans, self._n_bans, self._scratch)
            empty = m > 0 and row_is_empty(&row)
            if empty:
                set_ids(&row, self._scratch, m)
        if empty:
            raise NoAllowedToken(
                f"at position {position} every allowed token is banned by earlier rewinds "
                f"(banned: {self.banned_tokens(position)[:10]}); the phrases cannot be avoided here"
            )
        return m

    # ----------------------------------------------------------------------------- streaming
    def push(self, token_id, logprob=None):
        """Append one sampled token; release what is safe, or report a rewind on a complete match."""
        if self._closed:
            raise RequestClosed("this phrase-guard request is finished; start a new one")
        cdef Scan sc
        if self._append(token_id, logprob, &sc):
            return self._rewind(sc.match_end + 1 - self._phrase_len[sc.match_pid], sc.match_pid)
        event = self._release(False)
        if self._n > self._max_pending:
            self._closed = True
            raise PendingLimitExceeded(
                f"{self._n} tokens are held back; the limit is {self._max_pending}"
            )
        return event

    def finish(self, stop_token_included: bool = False, stop_token=None):
        """End the request and release everything still held.

        A held partial phrase is released (the full phrase never appeared). The stop token is not
        pushed: pass it here. Omitted (the default) it adds no text; included
        (``stop_token_included=True``) its text is checked and released, and if it completes a
        phrase the request fails with :class:`PhraseAtStop` instead of overriding the stop.
        Undecodable trailing bytes are released as U+FFFD, as a decoder would show them.
        """
        if self._closed:
            raise RequestClosed("this phrase-guard request is finished; start a new one")
        self._closed = True
        cdef Scan sc
        if stop_token_included:
            if stop_token is None:
                raise ValueError("stop_token_included=True needs the stop_token id")
            if self._append(stop_token, None, &sc):
                raise PhraseAtStop(
                    f"the included stop token {stop_token} completes the banned phrase "
                    f"{self._phrases[sc.match_pid]!r}"
                )
        if self._ncarry:
            tail = PyUnicode_DecodeUTF8(<const char*>self._carry, self._ncarry, "replace")
            _, end, pid = self._ac.scan(self._state, fold(tail, self._cs))
            if end >= 0:
                raise PhraseAtStop(
                    f"the undecodable end of the output completes the banned phrase "
                    f"{self._phrases[pid]!r}"
                )
        return self._release(True)

    # ----------------------------------------------------------------------------- internals
    cdef bint _append(self, object token_id, object logprob, Scan* sc) except -1:
        """Journal one token and scan its text; True on a match (described in ``sc``)."""
        cdef int64_t pos = self._n_released + self._n
        cdef int overflow = 0
        cdef long long tok = -1
        cdef const uint8_t* p = NULL
        cdef Py_ssize_t nraw = 0
        cdef object raw = None
        if self._fast and PyLong_CheckExact(token_id):
            tok = PyLong_AsLongLongAndOverflow(token_id, &overflow)
            if overflow or tok < 0 or tok >= self._n_logits:
                self._token_bytes(token_id)  # raises the vocabulary's own error
                raise AssertionError(f"token id {token_id!r} is outside the vocabulary")
            if pos == self._ban_pos and self._is_banned(tok):
                self._raise_banned(token_id, pos)
            if tok < self._size:
                p = self._concat + self._offsets[tok]
                nraw = self._offsets[tok + 1] - self._offsets[tok]
        else:
            raw = self._token_bytes(token_id)
            if not PyBytes_Check(raw):
                raw = bytes(raw)
            tok = int(token_id)
            if pos == self._ban_pos and self._is_banned(tok):
                self._raise_banned(token_id, pos)
            p = <const uint8_t*>PyBytes_AS_STRING(raw)
            nraw = PyBytes_GET_SIZE(raw)

        # Room for one record and the token's bytes (compacting released space first).
        if self._head + self._n == self._cap:
            if self._head >= self._n and self._head:
                memmove(self._recs, self._recs + self._head, self._n * sizeof(Rec))
                self._head = 0
            else:
                self._recs = <Rec*>_grow(self._recs, &self._cap, self._cap + 1, sizeof(Rec))
        if self._raw_len + nraw > self._raw_cap:
            if self._raw_head >= self._raw_len - self._raw_head and self._raw_head:
                memmove(self._raw, self._raw + self._raw_head, self._raw_len - self._raw_head)
                self._raw_len -= self._raw_head
                self._raw_head = 0
            if self._raw_len + nraw > self._raw_cap:
                self._raw = <uint8_t*>_grow(self._raw, &self._raw_cap, self._raw_len + nraw, 1)
        if nraw:
            memcpy(self._raw + self._raw_len, p, nraw)
        self._raw_len += nraw

        cdef bint had_carry = self._ncarry > 0
        cdef bint matched
        if self._ncarry + nraw > NOGIL_SCAN_BYTES:
            with nogil:
                matched = self._scan(p, nraw, sc)
        else:
            matched = self._scan(p, nraw, sc)

        cdef Rec* r = &self._recs[self._head + self._n]
        r.token = tok
        r.fend = sc.fpos
        r.raw_end = self._raw_base + (self._raw_len - self._raw_head)
        r.state = sc.state
        r.ncarry = sc.ncarry
        memcpy(r.carry, sc.carry, 3)
        if had_carry and sc.any_char:
            r.first_origin = self._carry_origin
            r.carry_fend = sc.carry_fend
        else:
            r.first_origin = pos
            r.carry_fend = -1
        if sc.ncarry:
            r.origin = self._carry_origin if (had_carry and not sc.any_char) else pos
        else:
            r.origin = -1
        self._n += 1
        self._logprobs.append(logprob)
        self._fpos = sc.fpos
        self._state = sc.state
        self._ncarry = sc.ncarry
        memcpy(self._carry, sc.carry, 3)
        self._carry_origin = r.origin
        return matched

    cdef bint _scan(self, const uint8_t* raw, Py_ssize_t nraw, Scan* o) noexcept nogil:
        """Decode (pending bytes + ``raw``) as UTF-8 with U+FFFD for invalid bytes, fold, step.

        Matches CPython's incremental decoder: an invalid sequence is replaced by one U+FFFD per
        maximal valid prefix; an incomplete but valid sequence at the end is kept for the next token.
        """
        cdef Py_ssize_t nc = self._ncarry
        cdef Py_ssize_t total = nc + nraw, i = 0, j, need, k
        cdef uint32_t cp
        cdef uint8_t c, b, lo, hi
        cdef uint8_t buf[16]
        cdef int nb
        cdef int32_t s = self._state, pid
        cdef int64_t f = self._fpos
        cdef bint first = True
        o.carry_fend = -1
        o.match_pid = -1
        o.match_end = -1
        o.any_char = False
        o.ncarry = 0
        o.carry[0] = o.carry[1] = o.carry[2] = 0
        while i < total:
            c = self._carry[i] if i < nc else raw[i - nc]
            if c < 0x80:
                cp = c
                i += 1
            else:
                need = 0
                lo = 0x80
                hi = 0xBF
                if 0xC2 <= c <= 0xDF:
                    need = 1
                    cp = c & 0x1F
                elif 0xE0 <= c <= 0xEF:
                    need = 2
                    cp = c & 0x0F
                    if c == 0xE0:
                        lo = 0xA0
                    elif c == 0xED:
                        hi = 0x9F
                elif 0xF0 <= c <= 0xF4:
                    need = 3
                    cp = c & 0x07
                    if c == 0xF0:
                        lo = 0x90
                    elif c == 0xF4:
                        hi = 0x8F
                if need == 0:
                    cp = 0xFFFD
                    i += 1
                else:
                    j = 1
                    while j <= need and i + j < total:
                        b = self._carry[i + j] if i + j < nc else raw[i + j - nc]
                        if b < lo or b > hi:
                            break
                        cp = (cp << 6) | (b & 0x3F)
                        lo = 0x80
                        hi = 0xBF
                        j += 1
                    if j > need:
                        i += need + 1
                    elif i + j >= total:
                        # A valid but unfinished character: wait for the next token's bytes.
                        o.ncarry = <uint8_t>(total - i)
                        for k in range(total - i):
                            o.carry[k] = self._carry[i + k] if i + k < nc else raw[i + k - nc]
                        break
                    else:
                        cp = 0xFFFD
                        i += j
            nb = _fold_cp(cp, self._cs, buf)
            if first:
                first = False
                o.any_char = True
                if nc:
                    o.carry_fend = f + nb
            for k in range(nb):
                s = self._ac.step(s, buf[k])
                f += 1
                pid = self._out_id[s]
                if pid >= 0:
                    o.state = s
                    o.fpos = f
                    o.match_pid = pid
                    o.match_end = f - 1
                    return True
        o.state = s
        o.fpos = f
        return False

    cdef bint _is_banned(self, int64_t tok) noexcept:
        cdef Py_ssize_t lo = 0, hi = self._n_bans, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._bans[mid] < tok:
                lo = mid + 1
            else:
                hi = mid
        return lo < self._n_bans and self._bans[lo] == tok

    cdef int _raise_banned(self, object token_id, int64_t pos) except -1:
        raise BannedTokenPushed(
            f"token {token_id} is banned at position {pos} for this request (mask it with fill_banned)"
        )

    cdef int _add_ban(self, int64_t tok) except -1:
        cdef Py_ssize_t lo = 0, hi = self._n_bans, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._bans[mid] < tok:
                lo = mid + 1
            else:
                hi = mid
        if lo < self._n_bans and self._bans[lo] == tok:
            return 0
        cdef Py_ssize_t cap
        if self._n_bans == self._bans_cap:
            cap = self._bans_cap
            self._bans = <int64_t*>_grow(self._bans, &self._bans_cap, self._n_bans + 1, sizeof(int64_t))
            self._scratch = <int64_t*>_grow(self._scratch, &cap, self._n_bans + 1, sizeof(int64_t))
        memmove(self._bans + lo + 1, self._bans + lo, (self._n_bans - lo) * sizeof(int64_t))
        self._bans[lo] = tok
        self._n_bans += 1
        return 0

    cdef int64_t _token_at(self, int64_t f) noexcept nogil:
        """Absolute index of the held token whose text holds folded offset ``f``.

        An offset in text already released maps to the first held token. That happens only after
        a rewind restored an automaton state whose partial match began in released text: the
        released part cannot be taken back, so the guard holds (and, on a match, rewinds to) the
        first token it still owns.
        """
        if f < self._base_fpos or self._n == 0:
            return self._n_released
        cdef Rec* recs = self._recs + self._head
        cdef Py_ssize_t lo = 0, hi = self._n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if f < recs[mid].fend:
                hi = mid
            else:
                lo = mid + 1
        if lo == self._n:  # past the held text: cannot happen for a match or a held suffix
            lo = self._n - 1
        if f < recs[lo].carry_fend:
            return recs[lo].first_origin
        return self._n_released + lo

    cdef Py_ssize_t _release_count(self) noexcept nogil:
        """How many held tokens can no longer take part in a phrase (oldest first)."""
        cdef int32_t depth = self._depth[self._state]
        cdef Py_ssize_t j
        if depth == 0 and self._ncarry == 0:
            return self._n  # nothing can continue into a phrase: release all
        if depth:
            j = self._token_at(self._fpos - depth) - self._n_released
        else:
            j = self._n
        # Release only where no character is split: a token whose bytes are still undecoded goes
        # out together with the token that completes its character.
        while j > 0 and self._recs[self._head + j - 1].ncarry:
            j -= 1
        return j

    cdef object _rewind(self, int64_t fstart, int32_t pid):
        phrase = self._phrases[pid]
        cdef int64_t t = self._token_at(fstart)
        cdef Py_ssize_t j = t - self._n_released, k
        cdef int64_t total = self._n_released + self._n
        cdef Rec* recs = self._recs + self._head
        dropped = [recs[k].token for k in range(j, self._n)]
        cdef int64_t banned = recs[j].token
        self._n = j
        del self._logprobs[j:]
        if j:
            self._state = recs[j - 1].state
            self._ncarry = recs[j - 1].ncarry
            memcpy(self._carry, recs[j - 1].carry, 3)
            self._carry_origin = recs[j - 1].origin
            self._fpos = recs[j - 1].fend
            self._raw_len = self._raw_head + (recs[j - 1].raw_end - self._raw_base)
        else:
            self._state = self._base_state
            self._ncarry = 0
            self._carry_origin = -1
            self._fpos = self._base_fpos
            self._raw_len = self._raw_head
        self._rewinds += 1
        if self._rewinds > self._max_rewinds:
            self._closed = True
            raise RewindLimitExceeded(
                f"more than {self._max_rewinds} rewinds in one request "
                f"(last one for the phrase {phrase!r} at position {t})"
            )
        if t != self._ban_pos:
            self._ban_pos = t
            self._n_bans = 0
        self._add_ban(banned)
        return _event([], "", total - t, t, [], dropped, banned, phrase)

    cdef object _release(self, bint final):
        cdef Py_ssize_t j = self._n if final else self._release_count()
        cdef Py_ssize_t k, cut
        if j == 0:
            return _event([], "", 0, self._n_released + self._n, [], [], None, None)
        cdef Rec* recs = self._recs + self._head
        tokens = [recs[k].token for k in range(j)]
        cdef Rec* last = &recs[j - 1]
        cut = last.raw_end - self._raw_base
        # One decode of the released bytes equals the incremental decoder's pieces (no character is
        # split at a release point); at the end it also shows undecodable trailing bytes as U+FFFD.
        text = PyUnicode_DecodeUTF8(<const char*>(self._raw + self._raw_head), cut, "replace")
        self._base_state = last.state
        self._base_fpos = last.fend
        self._raw_base = last.raw_end
        self._raw_head += cut
        if self._raw_head == self._raw_len:
            self._raw_head = self._raw_len = 0
        self._head += j
        self._n -= j
        if self._n == 0:
            self._head = 0
        if j == len(self._logprobs):
            logprobs = self._logprobs
            self._logprobs = []
        else:
            logprobs = self._logprobs[:j]
            del self._logprobs[:j]
        self._n_released += j
        return _event(tokens, text, 0, self._n_released + self._n, logprobs, [], None, None)
