# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The native runtime: per-request parser state, ``commit`` and the Parser-DWA mask walk in C.

Why (DESIGN §5). A static mask is cheap only if the runtime around the compiled automaton is:
no Python object per stack node, no allocation per token, no lock shared by requests, the GIL
released. This module owns all of that:

* :class:`Tables` — one compiled grammar × vocabulary as read-only C views of the artifact's
  arrays (dense lexer, LR action/goto tables, Parser DWA, class weights, condition seeds, the
  class → token expansion). Shared by every request and thread; never written after construction
  except for the expansion cache, whose slots are taken with a non-blocking atomic try-lock (a
  busy slot is simply bypassed, so no thread ever waits for another).
* :class:`Family` — the memory of one request and its forks: hash-consed GSS nodes
  ``(LR state, parent)`` in a flat arena, immutable configuration snapshots, a persistent history
  (record → previous record), and scratch buffers. A per-family lock guards appends (a fork used
  from another thread must not see a reallocation half-way); requests never share a family.
  Everything is freed when the last state of the family dies.
* :class:`NativeState` — a (family, history record) pair: ``fork()`` is O(1), ``rollback(n)``
  follows ``n`` links.

A configuration snapshot is a list of *lanes* ``(lexer state | BOUNDARY, pending conditions,
frontier)`` in one ``int32`` run: ``[n_lanes, (lex, n_conds, conds…, n_nodes, nodes…)…]``,
lanes sorted by ``(lex, conds)``, conditions and nodes ascending. ``commit`` is the reference
recognizer's byte step (:mod:`glrmask.reference.recognizer`, ``restrict_lexer=False``) over these lanes;
``fill`` walks every frontier node top-down through the Parser DWA with ``uint64`` class bitsets.
A lane whose lexer state has no Parser-DWA root, or a condition with no failure seed (only bytes
committed mid-token can produce them), is answered by the trie walk below (``NEEDS_FALLBACK``
until the caller attached the trie).

*Dynamic tables* (:meth:`Tables.attach_dynamic`) have no Parser DWA: their lexer is explored on
demand (:class:`LazyLexer`; a step that needs an entry nobody explored yet reports it, the caller
explores it and the step runs again) and a mask walks the vocabulary trie over the snapshot —
each trie level keeps its snapshot, dead subtrees are skipped, inside a lexeme only the lexer
moves, and memos keep repeated work away (per lexer state, the tokens that stay inside the lexeme,
shared by every request — and shared with a later lexer state that no token tells apart from it,
like the counts of a long bounded string, or that only tokens of more than 16 bytes tell apart
(near its bound; those few then get a memo of their own: ``_memo_transfer``); per mask, GLR feeds;
per request, its last masks).
"""
import numpy as np
cimport numpy as cnp

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_WRITABLE
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_acquire_lock, PyThread_release_lock, WAIT_LOCK)
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memset, memcpy, memcmp

cnp.import_array()

cdef extern from *:
    """
    static inline int glr_trylock(int *flag) {
        int expected = 0;
        return __atomic_compare_exchange_n(flag, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    static inline void glr_unlock(int *flag) { __atomic_store_n(flag, 0, __ATOMIC_RELEASE); }
    static inline int glr_popcount64(unsigned long long x) { return __builtin_popcountll(x); }
    static inline int glr_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    static inline void* glr_load_ptr(void* const* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void glr_store_ptr(void** p, void* v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline int glr_load_i32(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void glr_store_i32(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline void glr_add_i64(long long* p, long long v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
    static inline unsigned long long glr_load_u64(const unsigned long long* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void glr_store_u64(unsigned long long* p, unsigned long long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    """
    int glr_trylock(int *flag) nogil
    void glr_unlock(int *flag) nogil
    int glr_popcount64(unsigned long long x) nogil
    int glr_ctz64(unsigned long long x) nogil
    void* glr_load_ptr(void* const* p) nogil
    void glr_store_ptr(void** p, void* v) nogil
    int32_t glr_load_i32(const int32_t* p) nogil
    void glr_store_i32(int32_t* p, int32_t v) nogil
    void glr_add_i64(int64_t* p, int64_t v) nogil
    uint64_t glr_load_u64(const uint64_t* p) nogil
    void glr_store_u64(uint64_t* p, uint64_t v) nogil

DEF BOUNDARY = -2
DEF DEAD = -1
DEF C_TRUE = 0
DEF C_FALSE = 1
DEF N_CACHE_SLOTS = 256

# return codes of the nogil entry points
OK = 0
REJECTED = 1
NEEDS_FALLBACK = 2
OUT_OF_MEMORY = 3
TOO_MANY_STACKS = 4
DEF R_OK = 0
DEF R_REJECTED = 1
DEF R_FALLBACK = 2
DEF R_NOMEM = 3
DEF R_TOOBIG = 4
DEF TOOBIG = -2  # internal return value: a step exceeded max_stacks
DEF OP_COMMIT = 0
DEF OP_PROBE = 1
DEF OP_FILL = 2
DEF R_MISSING = 5  # dynamic tables: a lexer entry is not explored yet (the caller resolves, retries)
MISSING = 5
DEF UNKNOWN = -3   # dynamic tables: an entry not explored yet
DEF EV_CHUNK_BITS = 16
DEF EV_CHUNK = 65536
DEF EV_MAX_CHUNKS = 8192
# kinds of missing entries
DEF M_STEP = 0
DEF M_ALIVE = 1
DEF M_COND_STEP = 2
DEF M_COND_INFO = 3
DEF M_FUTURE = 4
DEF M_BOUNDARY = 5  # the lexer state a lexeme starts in over stacks topped by LR state a (b = 0),
                    # or after LR terminal a in a lexeme memo's symbolic walk (b = 1)
DEF CI_KNOWN = 1
DEF CI_AT_END = 2
DEF CI_SAT = 4
DEF DEFAULT_MEMO_BYTES = 256 * 1024 * 1024
DEF MEMO_DENSE_MIN = 256
DEF FC_SLOTS = 512
DEF CM_SLOTS = 512
DEF CM_MAX_KEY = 4096
DEF MEMO_SLOTS = 65536
DEF LM_SLOTS = 8
DEF TX_FAIL = 1024     # slots of transfers not shown (CLazy.tx_fail)
DEF RC_W = 64          # lexer states one trie level of a recorded lexeme walk may hold
DEF TX_SOURCES = 32    # transfer sources tried for a new memo (the memos built last)
DEF TX_MAX_PAIRS = 64  # state pairs one trie level of a transfer may hold
DEF TX_TRIES = 2       # sources with the lane's terminals tried for one new memo
DEF TX_RL_TRIES = 8    # sources of other terminals tried (most differ on the first byte: cheap)
DEF MEMO_SPLIT = 16    # a memo transferred for its short tokens only: at most 16 bytes (Llama-3.1:
                       # 126,944 tokens; the other 1,312 get a memo of their own, see _memo_transfer)
DEF P_ALL = 0          # memo parts: every token ...
DEF P_LONG = 1         # ... or only those longer than tr_split bytes (walked over their few trie paths)

DEFAULT_MAX_STACKS = 100_000
"""Stack tops (over all lanes) one step may produce: an ambiguous grammar whose parses multiply
ends that request with a clear error instead of filling memory (``limits["runtime"]``)."""

# token kinds
DEF K_TEXT = 0
DEF K_NONE = 1
DEF K_EOS = 2


# ------------------------------------------------------------------------------------ vectors
ctypedef struct IVec:
    int32_t* d
    Py_ssize_t n
    Py_ssize_t cap

cdef inline int iv_reserve(IVec* v, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t cap
    cdef int32_t* p
    if need <= v.cap:
        return 0
    cap = v.cap * 2 if v.cap else 64
    while cap < need:
        cap *= 2
    p = <int32_t*>realloc(v.d, cap * sizeof(int32_t))
    if p == NULL:
        return -1
    v.d = p
    v.cap = cap
    return 0

cdef inline int iv_push(IVec* v, int32_t x) noexcept nogil:
    if v.n >= v.cap and iv_reserve(v, v.n + 1):
        return -1
    v.d[v.n] = x
    v.n += 1
    return 0

cdef inline void iv_free(IVec* v) noexcept nogil:
    free(v.d)
    v.d = NULL
    v.n = 0
    v.cap = 0


# ------------------------------------------------------------------------------------ tables
ctypedef struct SeqTab:
    # seqs (terminal sequences fed since a frontier node) interned as a trie: (parent, term) -> id
    IVec parent
    IVec term
    int64_t* keys
    int32_t* vals
    Py_ssize_t cap
    Py_ssize_t count
    # the lexer terminals a lexeme may hold after a seq (fut_words words; NULL: any): after the
    # empty seq ``root_allow``, after one ending in LR terminal ``a`` ``follow + a * fut_words``
    const uint64_t* root_allow
    const uint64_t* follow


ctypedef struct ClassBuild:
    # a memo's frontier classes while they are built: what the frontiers walked so far found
    # (kept across rounds: a frontier whose walk met a lexer entry not explored yet is walked
    # again in the next round, the others are done)
    SeqTab S
    IVec data              # the classes' snapshots
    IVec offs              # n_cls + 1 offsets into data
    IVec pairs             # (class, token id) of the tokens walked so far
    IVec pend              # subtrees still to walk: records (trie node, n, the n ints of the
                           # snapshot before the node's byte; or -1 - the offset of an earlier
                           # record with the same one); first the frontiers, then the nodes whose
                           # step met a lexer entry not explored yet
    int32_t* slots         # hash table over the classes
    Py_ssize_t n_slots
    Py_ssize_t n_cls


cdef void _cls_free(void* p) noexcept nogil:
    cdef ClassBuild* cb = <ClassBuild*>p
    if cb != NULL:
        iv_free(&cb.S.parent); iv_free(&cb.S.term); free(cb.S.keys); free(cb.S.vals)
        iv_free(&cb.data); iv_free(&cb.offs); iv_free(&cb.pairs); iv_free(&cb.pend)
        free(cb.slots)
        free(cb)


ctypedef struct LexMemo:
    # what the vocabulary does from one lane — lexer state ``q``, pending condition ``cond``
    # (-1: none) — whatever its parser stacks beyond ``rbits``: the terminals alive in ``q`` the
    # stacks could take (or that are ignored). Since terminals only die along a lexeme, a lane
    # inside it survives iff one of its futures is in ``rbits``: so the tokens that stay inside
    # the lexeme are known (``u_ids``), and the trie nodes where a byte ends a terminal are the
    # frontier, whose tokens fall into classes by the lanes they end in (evaluated per mask).
    int32_t q
    int32_t cond           # a lane with this pending condition: every child of the trie root is a
                           # frontier node, no in-lexeme tokens
    int32_t part           # the tokens it is for: P_ALL or P_LONG
    int32_t short_only     # an alias that holds for the short tokens only (the lane's P_LONG memo
                           # answers the others; see _memo_transfer)
    uint64_t* rbits        # 2 * fut_words words: ``rbits``, then the terminals a lexeme may hold
                           # when one starts after an ignored terminal ends at the root (the
                           # terminals with an action in the stacks' top states; see _root_allow)
    uint64_t key           # the hash of (q, cond, rbits) in the memo table
    int32_t n_u
    int32_t* u_ids         # tokens that stay inside the lexeme (and survive)
    uint32_t* u_row        # the same as a dense row when they are many
    int32_t n_front
    int32_t* fr_node
    int32_t* fr_q          # lexer state before the node's byte
    # outcome classes of the tokens below frontier nodes: tokens whose walk ends in the same lanes
    # (lexer state, conditions, terminals fed to the stacks since — a "seq") share a class
    int32_t n_cls
    int32_t* c_off         # n_cls + 1 offsets into c_data: the class's snapshot, seqs for frontiers
    int32_t* c_data
    int32_t* c_tptr        # n_cls + 1: the class's token ids in c_ids
    int32_t* c_ids
    int32_t* c_row         # dense row of the class in c_rows, -1: scattered
    uint32_t* c_rows
    int32_t n_seq          # seq 0 is empty; seq s = seq s_parent[s] + LR terminal s_term[s]
    int32_t* s_parent
    int32_t* s_term
    int lex_done           # the lexeme part (in-lexeme tokens, frontier nodes) is complete
    int32_t ready          # complete (memos live in the table while they are built)
    int unusable           # too many lanes to memoize: masks of this lane walk the trie
    int started            # the lexeme walk has begun
    # while it is being built (a walk that met lexer entries not explored yet resumes from the
    # subtrees it had to leave, instead of walking the whole trie again)
    IVec b_pairs           # (end state, token id)
    IVec b_front           # (node, state)
    IVec b_pend            # (node, state before its byte): subtrees left for the next round
    void* b_cls            # the frontier classes being built (a ClassBuild; NULL before and after)
    # transfer (DESIGN §4.9, lexer states no token tells apart, in the dynamic engine): what the
    # lexeme walk read — per trie level, the lexer states it stepped from and their bytes — so
    # that another state's memo can be proved equal to this one without a walk (_memo_transfer)
    uint64_t* rc           # while built: RC_W entries (state, 4 byte words) per level; NULL: not kept
    int32_t* rc_n          # entries per level
    uint64_t* tx           # once complete: the entries, level by level
    int32_t* tx_off        # tx_levels + 1 offsets (in entries) into tx
    int32_t tx_levels
    LexMemo* alias_of      # a transferred memo: the arrays are this memo's (it frees only its key)
    LexMemo* lex_of        # a memo relabelled from another lane's (_relabelled): the tokens that
                           # stay inside are that memo's (u_ids, u_row); the rest is its own


cdef void _memo_free(LexMemo* m) noexcept nogil:
    if m != NULL and m.alias_of != NULL:
        free(m.rbits)
        free(m)
    elif m != NULL:
        if m.lex_of == NULL:
            free(m.u_ids); free(m.u_row)
        free(m.rbits)
        free(m.rc); free(m.rc_n); free(m.tx); free(m.tx_off)
        free(m.fr_node); free(m.fr_q)
        free(m.c_off); free(m.c_data); free(m.c_tptr); free(m.c_ids); free(m.c_row); free(m.c_rows)
        free(m.s_parent); free(m.s_term)
        iv_free(&m.b_pairs); iv_free(&m.b_front); iv_free(&m.b_pend)
        _cls_free(m.b_cls)
        free(m)


ctypedef struct CMSlot:
    # one mask of the shared configuration cache: the configuration as lanes of full stacks
    int flag               # try-lock (a busy slot is bypassed, never awaited)
    int used
    uint64_t hash
    int32_t* key
    Py_ssize_t key_n
    Py_ssize_t key_cap
    uint32_t* words


ctypedef struct CLazy:
    # the lexer explored on demand (dynamic masks): rows are allocated and published once, entries
    # written once (UNKNOWN until then), so readers never lock and never see a reallocation
    int32_t cap_states
    int32_t cap_conds
    int32_t fut_words
    int32_t n_binit        # lexeme start states restricted to the terminals that can come next:
    int32_t* binit         # [0, n_lr_states) over stacks topped by that state, then one per LR
                           # terminal (after it, in memo walks); 0 unknown, else the state + 2
    # Per-state and per-condition slots live in chunks of LZ_CHUNK, allocated when a state or
    # condition of the chunk is first written (the capacities are the lexer's limits: allocating
    # and zeroing them whole cost a new schema's engine ~2 ms, up to 24 ms on a busy machine).
    # A chunk pointer, like a slot, is published once (NULL before) with a release store.
    void** trans           # [cap_states] -> 256 next states (UNKNOWN, DEAD or a state)
    void** evref           # [cap_states] -> 256 event-list references (-1: no events)
    void** fut             # [cap_states] -> [alive | known | future] bitsets of fut_words words each:
                           # the terminals whose lane lives, those whose future is known, and
                           # which of those have one (filled per terminal, on demand)
    void** ctrans          # [cap_conds] -> 256 next conditions (UNKNOWN until known)
    void** cinfo           # [cap_conds] CI_KNOWN | CI_AT_END | CI_SAT (chunks of bytes)
    int32_t** ev_chunks    # event lists [n, term, cond, …] in chunks of EV_CHUNK ints
    int32_t n_chunks
    int32_t chunk_used
    int32_t has_groups     # byte_group set (set_byte_groups): missing entries are deduplicated
    int32_t byte_group[256]  # byte -> its byte group (bytes every lexer state steps alike)
    uint8_t group_bytes[256]   # the bytes, group by group (ascending within one) ...
    int32_t group_at[256]      # ... and where each byte's group starts in group_bytes
    int32_t group_len[256]     # ... and how many bytes it has (byte -> its group's slice)
    # lexeme memos (built on first use, then shared by every request)
    int memo_flag          # try-lock of the builder (a busy builder is bypassed, never awaited)
    int64_t memo_bytes
    int64_t memo_budget
    CMSlot* cm             # CM_SLOTS masks by configuration, shared by every request of the mask
    int64_t* memo_key      # MEMO_SLOTS: hash of (state, condition, rbits) -> memo, open addressing;
    LexMemo** memo_val     # written under memo_flag, a key published after its value
    LexMemo* tx_src[TX_SOURCES]  # the memos built last whose walks were kept: transfer sources
    uint64_t tx_fail[TX_FAIL]  # (lane, source) pairs a transfer or relabelling was not shown for:
                               # not tried again (the verdict holds; a memo being explored over
                               # dozens of rounds tried each of its sources again in every round)
    int32_t tx_next        # (a ring, written under memo_flag)
    int64_t n_tx_tries     # transfers tried and not shown (one per source tried), those done, and
    int64_t n_tx_hits      # of those, the ones for the short tokens only
    int64_t n_tx_short
    int64_t n_rl_tries     # relabellings (_relabelled) tried and not shown, those done, and of
    int64_t n_rl_hits      # those the ones for the short tokens only
    int64_t n_rl_short
    int64_t n_walks        # lexeme memo walks started (a trie walk each) and the trie nodes they
    int64_t n_walk_nodes   # visited (walks resumed after exploring count their nodes again)


ctypedef struct CTables:
    # dense lexer
    int32_t lex_n
    int32_t lex_init
    int32_t lex_nterm
    int32_t fut_words
    const int32_t* lex_trans
    const int32_t* ev_ptr
    const int32_t* ev_term
    const int32_t* ev_cond
    const uint64_t* futures
    int32_t n_conds
    const int32_t* cond_trans
    const uint8_t* cond_at_end
    const uint8_t* cond_sat
    const int32_t* lr_of_lex
    const uint8_t* lex_ignored
    # dynamic tables: the lexer terminals that can come next (fut_words words each; NULL: unknown)
    const uint64_t* act_lex    # per LR state: those with an action there (and the ignored ones)
    const uint64_t* follow_lex # per LR terminal: those with an action after it is shifted
    # LR
    int32_t lr_n
    int32_t lr_nterm
    int32_t lr_nnt
    int32_t end_id
    int32_t lr_start
    # sparse rows (glrmask.lr.table.LRTable): state s's actions are entries act_ptr[s]..act_ptr[s+1]
    # sorted by act_term (shift target act_shift or -1, reduce rules red_rules[act_roff[e]:act_roff[e+1]]),
    # its gotos goto_ptr[s]..goto_ptr[s+1] sorted by goto_nt, to goto_tgt
    const int32_t* act_ptr
    const int32_t* act_term
    const int32_t* act_shift
    const int32_t* act_roff
    const int32_t* red_rules
    const int32_t* goto_ptr
    const int32_t* goto_nt
    const int32_t* goto_tgt
    const uint64_t* act_bits   # at most 64 terminals: per state, the terminals with an entry (else NULL)
    const int32_t* rule_len
    const int32_t* rule_lhs
    # Parser DWA
    const int32_t* root_of_lex
    const int32_t* root_restrict  # root -> the weight its walk is restricted to (-1: none)
    const int32_t* start_accept
    const int32_t* start_class  # LR state -> its start class (-1: no first read lives there)
    int32_t n_start_class
    const int32_t* start_ptr    # root -> its start entries: class start_class_of[k] starts at start_target[k]
    const int32_t* start_class_of
    const int32_t* start_target
    const int32_t* e_ptr
    const int32_t* e_label
    const int32_t* e_target
    const int32_t* e_accept
    const int32_t* d_target
    const int32_t* d_accept
    const uint64_t* weights
    int32_t cw
    int64_t max_stacks
    const int32_t* cond_fail
    # expansion classes -> original ids
    int32_t n_classes
    int32_t n_words
    const int32_t* cls_ptr
    const int32_t* cls_ids
    const int32_t* cls_dense
    const uint32_t* dense_rows
    const int32_t* cls_cost
    int64_t cost_direct
    # tokens
    int32_t vocab_size
    const uint8_t* tok_bytes
    const int64_t* tok_off
    const uint8_t* tok_kind
    const int32_t* eos
    int32_t n_eos
    # dynamic tables (no Parser DWA): the lexer explored on demand, masks by a trie walk
    int lazy
    CLazy* lz
    int32_t tr_n
    int64_t* n_walks       # static tables: masks answered by the trie walk (lanes with no Parser-DWA root)
    int32_t tr_max_depth
    int32_t tr_depth_shift       # where a node's depth starts in tr_pack[3 * i + 2] (16, or 8: below)
    int32_t tr_below_all         # 255 when tr_pack holds no coarse classes (every class assumed below)
    int32_t tr_split             # short tokens: at most this many bytes (0: the trie is no deeper)
    const int32_t* tr_maxd       # per node, the depth of the deepest node of its subtree
    const uint8_t* tr_text       # per node, the UTF-8 decoder states all text below starts from (_subtree_facts)
    const uint32_t* tr_short     # the short tokens, as a mask row (original ids)
    const int32_t* tr_depth
    const uint8_t* tr_byte
    const int32_t* tr_internal
    const int32_t* tr_end
    const int32_t* i2o_ptr
    const int32_t* i2o_ids
    const int32_t* i2o_one       # per internal token its original id when it has one, else -1
    const uint64_t* tr_subbytes  # per node, 4 words: the bytes below it (NULL: not given)
    const int32_t* tr_sub_lo     # per node, the internal ids of its subtree's tokens
    const int32_t* tr_sub_hi
    const int32_t* tr_pack       # per node (end, internal, depth << 16 | below << 8 | byte): one load
                                 # for a walk's step (below: the coarse byte classes under the node;
                                 # a trie deeper than 32767 bytes packs depth << 8 | byte instead)
    # expansion cache
    int* slot_flag
    uint64_t* slot_hash
    uint64_t* slot_key
    uint32_t* slot_words
    uint8_t* slot_used


cdef void _raise(int code, str what, int64_t max_stacks) except *:
    """The error of a failed native step: out of memory, or more parser stacks than allowed."""
    if code == R_TOOBIG:
        from glrmask.errors import GrammarTooComplex

        raise GrammarTooComplex(
            f"runtime ({what}): one step would keep more than {max_stacks} parser stacks (an ambiguous "
            f"grammar whose parses multiply; limit max_stacks, limits={{'runtime': {{'max_stacks': N}}}})")
    raise MemoryError(f"glrmask runtime: out of memory in {what}")


cdef int64_t _scalar(object a) except? -1:
    return int(np.asarray(a).reshape(-1)[0])


cdef inline const int32_t* _i32(object a):
    return <const int32_t*>cnp.PyArray_DATA(a)


COARSE_CLASS = np.zeros(256, dtype=np.uint8)
"""The coarse byte class of each byte, as a bit (8 classes): controls and DEL, ``"``, ``\\``, the
other printable ASCII bytes, UTF-8 continuation bytes, and the 2-, 3- and 4-byte lead bytes —
the classes a JSON string's body tells apart. A lexeme walk's loop test (``_memo_walk``) decides
most subtrees from the classes under a node (:func:`_trie_packed`) and the classes a state loops
on wholly or not at all (``_loop_words``), without loading the subtree's 32-byte byte set."""
COARSE_CLASS[:0x20] = 1
COARSE_CLASS[0x7F] = 1
COARSE_CLASS[0x20:0x7F] = 8
COARSE_CLASS[ord('"')] = 2
COARSE_CLASS[ord("\\")] = 4
COARSE_CLASS[0x80:0xC0] = 16
COARSE_CLASS[0xC0:0xE0] = 32
COARSE_CLASS[0xE0:0xF0] = 64
COARSE_CLASS[0xF0:] = 128


cdef uint8_t _coarse[256]
for _b in range(256):
    _coarse[_b] = COARSE_CLASS[_b]


def _coarse_below(const uint64_t[:, ::1] sb):
    """Per node, the :data:`COARSE_CLASS` bits of its subtree's byte set (4 words a node)."""
    cdef uint64_t masks[4][8]
    cdef Py_ssize_t i, n = sb.shape[0]
    cdef int w, k, bits
    for w in range(4):
        for k in range(8):
            masks[w][k] = 0
    for w in range(256):
        k = 0
        while not (_coarse[w] >> k) & 1:
            k += 1
        masks[w >> 6][k] |= (<uint64_t>1) << (w & 63)
    out = np.zeros(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    for i in range(n):
        bits = 0
        for w in range(4):
            if sb[i, w]:
                for k in range(8):
                    if sb[i, w] & masks[w][k]:
                        bits |= 1 << k
        o[i] = bits
    return out


def _trie_packed(trie: dict, depth, byte, internal, end) -> np.ndarray:
    """The node fields a lexeme walk reads, side by side (``int32[n, 3]``: subtree end, internal
    token, ``depth << 16 | below << 8 | byte``, ``below`` the :data:`COARSE_CLASS` bits of the
    bytes under the node — all eight where the trie gives no subtree bytes; ``depth << 8 | byte``
    for a trie with a token of 32 KB or more): once per trie (its dict). A walk that skips
    subtrees lands on a node whose four fields were four cache misses apart."""
    hit = trie.get("_node_packed")
    if hit is None:
        below = np.full(len(depth), 255, dtype=np.int64)
        sb = trie.get("node_subtree_bytes")
        if sb is not None and np.shape(sb) == (len(depth), 4):
            below = _coarse_below(np.ascontiguousarray(sb, dtype=np.uint64))
        hit = np.empty((len(depth), 3), dtype=np.int32)
        hit[:, 0] = end
        hit[:, 1] = internal
        if len(depth) and int(depth.max()) >= (1 << 15):  # no room: see Tables.tr_depth_shift
            hit[:, 2] = (depth.astype(np.int64) << 8) | byte
        else:
            hit[:, 2] = (depth.astype(np.int64) << 16) | (below << 8) | byte
        trie["_node_packed"] = hit
    return hit


def _single_ids(trie: dict, ptr, ids) -> np.ndarray:
    """Per internal token, its original id when it has exactly one (nearly all of them), else -1:
    expanding a memo's ~100k internal tokens into original ids reads one array instead of two
    offsets and a loop each. Once per trie (its dict)."""
    hit = trie.get("_i2o_one")
    if hit is None:
        counts = np.diff(ptr)
        hit = np.full(len(counts), -1, dtype=np.int32)
        one = counts == 1
        hit[one] = ids[ptr[:-1][one]]
        trie["_i2o_one"] = hit
    return hit


# UTF-8 text below a trie node (_subtree_facts): the decoder's states — at a character boundary, or
# inside a character with the continuation bytes it still needs (the second byte's narrower range
# after E0, ED, F0, F4) — and its step over the bytes of JSON-string text (printable ASCII but the
# quote and backslash, and every well-formed multi-byte character)
DEF U8_STATES = 8
cdef int8_t _u8_next[U8_STATES][256]
memset(_u8_next, -1, sizeof(_u8_next))
for _b in range(0x20, 0x7F):
    if _b != 0x22 and _b != 0x5C:
        _u8_next[0][_b] = 0
for _b in range(0xC2, 0xE0):
    _u8_next[0][_b] = 1
_u8_next[0][0xE0] = 2
for _b in list(range(0xE1, 0xED)) + [0xEE, 0xEF]:
    _u8_next[0][_b] = 4
_u8_next[0][0xED] = 3
_u8_next[0][0xF0] = 5
for _b in range(0xF1, 0xF4):
    _u8_next[0][_b] = 7
_u8_next[0][0xF4] = 6
for _b in range(0x80, 0xC0):
    _u8_next[1][_b] = 0
    _u8_next[4][_b] = 1
    _u8_next[7][_b] = 4
    if _b >= 0xA0:
        _u8_next[2][_b] = 1
    if _b < 0xA0:
        _u8_next[3][_b] = 1
    if _b >= 0x90:
        _u8_next[5][_b] = 4
    if _b < 0x90:
        _u8_next[6][_b] = 4


def _subtree_facts(trie: dict, const int32_t[::1] depth, const uint8_t[::1] byte, const int32_t[::1] end):
    """Per trie node, in one bottom-up pass (cached in the trie's arrays, like the other derived
    ones): the depth of the deepest node below it, itself included — where a memo part of long
    tokens has nothing to find —, and the UTF-8 decoder states (bits) from which every extension
    below it is text: each token below, read from there, a prefix of well-formed JSON-string text
    — where a lexer state reading all such text back to itself (_text_loop) takes it whole."""
    hit = trie.get("_subtree_facts")
    if hit is not None:
        return hit
    cdef Py_ssize_t n = depth.shape[0], i, j
    maxd = np.empty(n, dtype=np.int32)
    text = np.empty(n, dtype=np.uint8)
    cdef int32_t[::1] o = maxd
    cdef uint8_t[::1] x = text
    cdef int32_t best
    cdef int u, v, bits
    if byte.shape[0] != n:
        raise ValueError("runtime: inconsistent trie arrays")
    for i in range(n - 1, -1, -1):  # children come after their parent: each is done first
        if end[i] <= i or end[i] > n:
            raise ValueError("runtime: inconsistent trie subtree ends")
        best = depth[i]
        bits = (1 << U8_STATES) - 1
        j = i + 1
        while j < end[i]:
            if o[j] > best:
                best = o[j]
            for u in range(U8_STATES):
                if (bits >> u) & 1:
                    v = _u8_next[u][byte[j]]
                    if v < 0 or not (x[j] >> v) & 1:
                        bits &= ~(1 << u)
            j = end[j]
        o[i] = best
        x[i] = bits
    hit = trie["_subtree_facts"] = (maxd, text)
    return hit


def _short_row(trie: dict, dict g, int n_words):
    """The tokens of at most MEMO_SPLIT bytes as a mask row of ``n_words`` words (original ids;
    cached in the trie's arrays per width)."""
    rows = trie.setdefault("_short_rows", {})
    hit = rows.get(n_words)
    if hit is not None:
        return hit
    depth, internal = g["tr_node_depth"], g["tr_node_internal"]
    ptr, ids = g["tr_i2o_ptr"], g["tr_i2o_ids"]
    short = np.zeros(ptr.shape[0] - 1, dtype=bool)
    at = (internal >= 0) & (depth <= MEMO_SPLIT)
    short[internal[at]] = True
    bits = np.zeros(n_words * 32, dtype=bool)
    bits[ids[np.repeat(short, np.diff(ptr))]] = True
    hit = np.packbits(bits, bitorder="little").view(np.uint32).copy()
    rows[n_words] = hit
    return hit


def _trie_max_depth(trie: dict, depth) -> int:
    hit = trie.get("_max_depth")
    if hit is None:
        hit = int(depth.max())
        trie["_max_depth"] = hit
    return hit


# ------------------------------------------------------------------------------------ dynamic tables
DEF LZ_CHUNK_BITS = 10
DEF LZ_CHUNK = 1024  # 1 << LZ_CHUNK_BITS


cdef inline void* _lz_get(void* const* top, int32_t i) noexcept nogil:
    """Reader: slot ``i`` of a chunked table (NULL while its chunk or the slot is unpublished)."""
    cdef void** ch = <void**>glr_load_ptr(&top[i >> LZ_CHUNK_BITS])
    if ch == NULL:
        return NULL
    return glr_load_ptr(<void* const*>&ch[i & (LZ_CHUNK - 1)])


cdef inline uint8_t _lz_flags(void* const* top, int32_t i) noexcept nogil:
    """Reader: byte ``i`` of a chunked byte table (0 while its chunk is unpublished)."""
    cdef uint8_t* ch = <uint8_t*>glr_load_ptr(&top[i >> LZ_CHUNK_BITS])
    return 0 if ch == NULL else ch[i & (LZ_CHUNK - 1)]


cdef void** _lz_chunk(void** top, int32_t i, size_t item) except NULL:
    """Writer (serialized by the explorer's lock): the chunk holding slot ``i``, allocated
    (zeroed) and published when first needed."""
    cdef void** ch = <void**>top[i >> LZ_CHUNK_BITS]
    if ch == NULL:
        ch = <void**>calloc(LZ_CHUNK, item)
        if ch == NULL:
            raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
        glr_store_ptr(&top[i >> LZ_CHUNK_BITS], ch)
    return ch


cdef inline void* _lz_peek(void** top, int32_t i) noexcept nogil:
    """Writer-side read of slot ``i`` (no ordering needed: the writer wrote it)."""
    cdef void** ch = <void**>top[i >> LZ_CHUNK_BITS]
    return NULL if ch == NULL else ch[i & (LZ_CHUNK - 1)]


cdef void _lz_free(void** top, int32_t n_slots, bint items) noexcept nogil:
    """Free a chunked table of ``n_slots`` slots (its capacity): its chunks and, ``items``, what
    every slot points to."""
    cdef int32_t k, j
    cdef void** ch
    if top == NULL:
        return
    for k in range((n_slots + LZ_CHUNK - 1) >> LZ_CHUNK_BITS):
        ch = <void**>top[k]
        if ch != NULL and items:
            for j in range(LZ_CHUNK):
                free(ch[j])
        free(ch)
    free(top)


cdef class LazyLexer:
    """The lexer half of dynamic tables: rows filled on demand from the Python lazy lexer.

    Writers (:meth:`set_step`, :meth:`set_futures`, :meth:`set_cond`, :meth:`set_cond_step`) are
    serialized by the caller (one lock per mask, held only while exploring); readers are the
    native steps of every request, which never lock: rows are allocated once and published with
    a release store, entries written once (UNKNOWN before), so a reader sees either the old
    UNKNOWN (and asks again) or the final value."""

    cdef CLazy z
    cdef readonly int32_t n_rows
    cdef readonly int32_t n_cond_rows

    @property
    def memo_bytes(self) -> int:
        """Memory held by the lexeme memos (bounded by ``memo_budget``)."""
        return self.z.memo_bytes

    @property
    def memo_transfers(self) -> tuple[int, int, int]:
        """``(failed, done, short)``: transfers of a memo from another lexer state's that were
        tried and not shown (one per source tried), those done (each a trie walk saved, or all but
        the walk of the long tokens' few paths), and of those the ones for the short tokens only."""
        return self.z.n_tx_tries, self.z.n_tx_hits, self.z.n_tx_short

    @property
    def memo_relabels(self) -> tuple[int, int, int]:
        """``(failed, done, short)``: memos relabelled from another lane's — a lexeme of other
        terminals whose walk has the same shape (one bounded string's counts and another's, far
        from both bounds) — tried and not shown, done (each a trie walk saved, or all but the long
        tokens' paths), and of those the ones for the short tokens only."""
        return self.z.n_rl_tries, self.z.n_rl_hits, self.z.n_rl_short

    @property
    def memo_walks(self) -> tuple[int, int]:
        """``(walks, nodes)``: lexeme memo walks started (one trie walk each, all tokens or the
        long ones) and the trie nodes they visited — what a cold dynamic mask pays for."""
        return self.z.n_walks, self.z.n_walk_nodes

    @property
    def memo_budget(self) -> int:
        return self.z.memo_budget

    @memo_budget.setter
    def memo_budget(self, int64_t v):
        self.z.memo_budget = v

    def __cinit__(self, int32_t cap_states, int32_t cap_conds, int32_t fut_words):
        if cap_states < 1 or cap_conds < 2 or fut_words < 1:
            raise ValueError("LazyLexer: capacities must be positive")
        memset(&self.z, 0, sizeof(CLazy))
        self.z.cap_states = cap_states
        self.z.cap_conds = cap_conds
        self.z.fut_words = fut_words
        cdef size_t n_sc = (<size_t>cap_states + LZ_CHUNK - 1) >> LZ_CHUNK_BITS
        cdef size_t n_cc = (<size_t>cap_conds + LZ_CHUNK - 1) >> LZ_CHUNK_BITS
        self.z.trans = <void**>calloc(n_sc, sizeof(void*))
        self.z.evref = <void**>calloc(n_sc, sizeof(void*))
        self.z.fut = <void**>calloc(n_sc, sizeof(void*))
        self.z.ctrans = <void**>calloc(n_cc, sizeof(void*))
        self.z.cinfo = <void**>calloc(n_cc, sizeof(void*))
        self.z.ev_chunks = <int32_t**>calloc(EV_MAX_CHUNKS, sizeof(int32_t*))
        self.z.memo_budget = DEFAULT_MEMO_BYTES
        self.z.cm = <CMSlot*>calloc(CM_SLOTS, sizeof(CMSlot))
        self.z.memo_key = <int64_t*>calloc(MEMO_SLOTS, sizeof(int64_t))  # 0: an empty slot
        self.z.memo_val = <LexMemo**>calloc(MEMO_SLOTS, sizeof(LexMemo*))
        if (self.z.cm == NULL or self.z.memo_key == NULL or self.z.memo_val == NULL or self.z.trans == NULL or self.z.evref == NULL or self.z.fut == NULL or self.z.ctrans == NULL
                or self.z.cinfo == NULL or self.z.ev_chunks == NULL):
            raise MemoryError("glrmask runtime: cannot allocate the dynamic lexer tables")
        cdef uint8_t* info = <uint8_t*>_lz_chunk(self.z.cinfo, 0, sizeof(uint8_t))
        info[C_TRUE] = CI_KNOWN | CI_AT_END | CI_SAT
        info[C_FALSE] = CI_KNOWN

    def __dealloc__(self):
        cdef Py_ssize_t i
        # every chunk slot of the capacity (a few hundred pointers; only written chunks exist)
        _lz_free(self.z.trans, self.z.cap_states, True)
        _lz_free(self.z.evref, self.z.cap_states, True)
        _lz_free(self.z.fut, self.z.cap_states, True)
        _lz_free(self.z.ctrans, self.z.cap_conds, True)
        _lz_free(self.z.cinfo, self.z.cap_conds, False)
        if self.z.ev_chunks != NULL:
            for i in range(self.z.n_chunks):
                free(self.z.ev_chunks[i])
        free(self.z.binit)
        free(self.z.ev_chunks)
        if self.z.cm != NULL:
            for i in range(CM_SLOTS):
                free(self.z.cm[i].key); free(self.z.cm[i].words)
        free(self.z.cm)
        if self.z.memo_val != NULL:
            for i in range(MEMO_SLOTS):
                _memo_free(self.z.memo_val[i])
        free(self.z.memo_key); free(self.z.memo_val)

    cdef void _check_state(self, int32_t q) except *:
        if q < 0 or q >= self.z.cap_states:
            from glrmask.errors import GrammarTooComplex

            raise GrammarTooComplex(f"dynamic lexer: state {q} beyond the {self.z.cap_states} the tables hold "
                                    "(limit max_states of the lexer)")

    cdef void _check_cond(self, int32_t c) except *:
        if c < 0 or c >= self.z.cap_conds:
            from glrmask.errors import GrammarTooComplex

            raise GrammarTooComplex(f"dynamic lexer: condition {c} beyond the {self.z.cap_conds} the tables hold")
        if not (_lz_flags(self.z.cinfo, c) & CI_KNOWN):
            raise ValueError(f"condition {c} is published before its verdicts (set_cond first)")

    cdef void _rows_for(self, int32_t q) except *:
        cdef int32_t* tr
        cdef int32_t* ev
        cdef void** evs
        cdef void** trs
        cdef int k
        self._check_state(q)
        if _lz_peek(self.z.trans, q) != NULL:
            return
        tr = <int32_t*>malloc(256 * sizeof(int32_t))
        ev = <int32_t*>malloc(256 * sizeof(int32_t))
        if tr == NULL or ev == NULL:
            free(tr)
            free(ev)
            raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
        for k in range(256):
            tr[k] = UNKNOWN
            ev[k] = -1
        try:
            evs = _lz_chunk(self.z.evref, q, sizeof(void*))
            trs = _lz_chunk(self.z.trans, q, sizeof(void*))
        except MemoryError:
            free(tr)
            free(ev)
            raise
        glr_store_ptr(&evs[q & (LZ_CHUNK - 1)], ev)
        glr_store_ptr(&trs[q & (LZ_CHUNK - 1)], tr)
        self.n_rows += 1

    cdef int32_t _events(self, const int32_t[::1] ev) except -2:
        """Store an event list (``[term, cond, …]``); its reference, -1 for none."""
        if ev.shape[0] < 2:
            return -1
        return self._events_at(&ev[0], ev.shape[0] // 2)

    cdef int32_t _events_at(self, const int32_t* ev, Py_ssize_t n) except -2:
        cdef Py_ssize_t k
        cdef int32_t* chunk
        cdef int32_t ref
        if n == 0:
            return -1
        if 1 + 2 * n > EV_CHUNK:
            from glrmask.errors import GrammarTooComplex

            raise GrammarTooComplex("dynamic lexer: one byte ends too many terminals")
        for k in range(n):
            self._check_cond(ev[2 * k + 1])
        if self.z.n_chunks == 0 or self.z.chunk_used + 1 + 2 * n > EV_CHUNK:
            if self.z.n_chunks == EV_MAX_CHUNKS:
                from glrmask.errors import GrammarTooComplex

                raise GrammarTooComplex("dynamic lexer: too many event lists")
            chunk = <int32_t*>malloc(EV_CHUNK * sizeof(int32_t))
            if chunk == NULL:
                raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
            self.z.ev_chunks[self.z.n_chunks] = chunk
            self.z.n_chunks += 1
            self.z.chunk_used = 0
        chunk = self.z.ev_chunks[self.z.n_chunks - 1]
        ref = ((self.z.n_chunks - 1) << EV_CHUNK_BITS) | self.z.chunk_used
        chunk[self.z.chunk_used] = <int32_t>n
        for k in range(2 * n):
            chunk[self.z.chunk_used + 1 + k] = ev[k]
        self.z.chunk_used += 1 + 2 * n
        return ref

    def set_step(self, int32_t q, const uint8_t[::1] byte_set, int32_t q2, const int32_t[::1] events) -> None:
        """``step(q, b) = (q2, events)`` for every byte ``b`` of ``byte_set`` (bytes the lexer steps
        alike); ``events`` flat ``[term, cond, …]`` with every condition already :meth:`set_cond`."""
        cdef int32_t ref
        cdef Py_ssize_t k
        self._rows_for(q)
        if q2 != DEAD:
            self._check_state(q2)
        ref = self._events(events)
        tr = <int32_t*>_lz_peek(self.z.trans, q)
        evr = <int32_t*>_lz_peek(self.z.evref, q)
        for k in range(byte_set.shape[0]):
            evr[byte_set[k]] = ref
            glr_store_i32(&tr[byte_set[k]], q2)

    cdef const uint8_t* _group_of_byte(self, int b, Py_ssize_t* n) except NULL:
        """The bytes of ``b``'s byte group (:meth:`set_byte_groups`; ``b`` alone before it)."""
        if not 0 <= b < 256:
            raise ValueError(f"not a byte: {b}")
        if not self.z.has_groups:  # (group_bytes is free for this until the groups are set)
            self.z.group_bytes[b] = <uint8_t>b
            n[0] = 1
            return &self.z.group_bytes[b]
        n[0] = self.z.group_len[b]
        return &self.z.group_bytes[self.z.group_at[b]]

    def set_step_events(self, int32_t q, int b, int32_t q2, object events_in) -> None:
        """``step(q, x) = (q2, events)`` for every byte ``x`` of ``b``'s byte group, with the
        lexer's own events ``((term, cond), …)``: the explorer's call per lexer entry it explores
        — no array built per entry (an argument array's buffer view cost as much as the rest of
        the call)."""
        cdef int32_t buf[2 * 64]
        cdef tuple events = events_in if type(events_in) is tuple else tuple(events_in)
        cdef Py_ssize_t n = len(events), k, m
        cdef int32_t ref
        cdef const uint8_t* members = self._group_of_byte(b, &m)
        if n > 64:
            flat = np.asarray([x for e in events for x in e], dtype=np.int32)
            self.set_step(q, np.asarray([members[k] for k in range(m)], dtype=np.uint8), q2, flat)
            return
        for k in range(n):
            buf[2 * k] = events[k][0]
            buf[2 * k + 1] = events[k][1]
        self._rows_for(q)
        if q2 != DEAD:
            self._check_state(q2)
        ref = self._events_at(buf, n)
        tr = <int32_t*>_lz_peek(self.z.trans, q)
        evr = <int32_t*>_lz_peek(self.z.evref, q)
        for k in range(m):
            evr[members[k]] = ref
            glr_store_i32(&tr[members[k]], q2)

    def set_alive(self, int32_t q, const uint64_t[::1] words) -> None:
        """The terminals whose lane lives in state ``q`` (a bitset of ``fut_words`` words); whether
        each has a future is asked for separately (:meth:`set_future`)."""
        if words.shape[0] != self.z.fut_words:
            raise ValueError(f"futures need {self.z.fut_words} words")
        self._set_alive(q, &words[0])

    cdef void _set_alive(self, int32_t q, const uint64_t* words) except *:
        cdef uint64_t* w
        cdef void** futs
        cdef int32_t fw = self.z.fut_words
        self._check_state(q)
        if _lz_peek(self.z.fut, q) != NULL:
            return
        futs = _lz_chunk(self.z.fut, q, sizeof(void*))
        w = <uint64_t*>calloc(3 * fw, sizeof(uint64_t))
        if w == NULL:
            raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
        memcpy(w, words, fw * sizeof(uint64_t))
        glr_store_ptr(&futs[q & (LZ_CHUNK - 1)], w)

    def has_step(self, int32_t q, int b) -> bool:
        """Whether ``step(q, b)`` is published (:meth:`set_step_events`)."""
        cdef const int32_t* row
        if not (0 <= q < self.z.cap_states and 0 <= b < 256):
            return False
        row = <const int32_t*>_lz_peek(self.z.trans, q)
        return row != NULL and row[b] != UNKNOWN

    def has_alive(self, int32_t q) -> bool:
        """Whether the live terminals of state ``q`` are published (:meth:`set_alive`)."""
        return 0 <= q < self.z.cap_states and _lz_peek(self.z.fut, q) != NULL

    def set_alive_terms(self, int32_t q, list alive, list with_future) -> None:
        """:meth:`set_alive` from the live terminals' ids, then :meth:`set_future` true for each of
        ``with_future`` (terminals whose every lane has a future): one call per explored state."""
        cdef int32_t fw = self.z.fut_words
        cdef uint64_t small[8]
        cdef uint64_t* words = &small[0]
        if fw > 8:
            words = <uint64_t*>malloc(fw * sizeof(uint64_t))
        cdef object term
        cdef int64_t x
        if words == NULL:
            raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
        memset(words, 0, fw * sizeof(uint64_t))
        try:
            for term in alive:
                x = term
                if x < 0 or x >= 64 * fw:
                    raise ValueError("set_alive_terms: not a terminal of the lexer")
                words[x >> 6] |= (<uint64_t>1) << (x & 63)
            self._set_alive(q, words)
        finally:
            if words != &small[0]:
                free(words)
        for term in with_future:
            self.set_future(q, term, True)

    def set_future(self, int32_t q, int32_t term, bint has_future) -> None:
        """Whether terminal ``term`` (alive in ``q``) can still end in a match that counts."""
        cdef uint64_t* w
        cdef int32_t fw = self.z.fut_words
        cdef uint64_t bit
        self._check_state(q)
        w = <uint64_t*>_lz_peek(self.z.fut, q)
        if w == NULL or term < 0 or term >= 64 * fw:
            raise ValueError("set_future: set_alive first, and a terminal of the lexer")
        bit = (<uint64_t>1) << (term & 63)
        if has_future:
            glr_store_u64(&w[2 * fw + (term >> 6)], w[2 * fw + (term >> 6)] | bit)
        glr_store_u64(&w[fw + (term >> 6)], w[fw + (term >> 6)] | bit)

    def set_boundary(self, int32_t which, int32_t q) -> None:
        """The lexer state ``q`` (the initial state restricted to the terminals that can come
        next; DEAD when none can) where a lexeme starts in case ``which``: LR state ``which``
        tops the lane's one stack, or (``which - n_lr_states``) the LR terminal fed last in a
        lexeme memo's walk (see ``M_BOUNDARY``)."""
        if q != DEAD:
            self._check_state(q)
        if self.z.binit == NULL or not 0 <= which < self.z.n_binit:
            raise ValueError("set_boundary: no such boundary case")
        glr_store_i32(&self.z.binit[which], q + 2)

    def set_byte_groups(self, const int64_t[::1] group_of) -> None:
        """The byte group of each byte (``group_of[b]``: bytes every lexer state and condition
        steps alike, so exploring one byte of a group answers them all). From then on the
        entries handed to the explorer are distinct, byte steps once per group (see
        ``Tables.attach_dynamic``): a walk asks for the same entry from many trie nodes."""
        cdef int k, g, at = 0
        cdef int32_t start[256]
        cdef int32_t size[256]
        if group_of.shape[0] != 256:
            raise ValueError("set_byte_groups: one group per byte (256)")
        memset(size, 0, sizeof(size))
        for k in range(256):
            if not 0 <= group_of[k] < 256:
                raise ValueError("set_byte_groups: groups are numbered 0..255")
            self.z.byte_group[k] = <int32_t>group_of[k]
            size[group_of[k]] += 1
        for g in range(256):  # a counting sort: each group's bytes, ascending
            start[g] = at
            at += size[g]
        for k in range(256):
            g = self.z.byte_group[k]
            self.z.group_bytes[start[g]] = <uint8_t>k
            start[g] += 1
        for k in range(256):
            g = self.z.byte_group[k]
            self.z.group_len[k] = size[g]
            self.z.group_at[k] = start[g] - size[g]
        self.z.has_groups = 1

    def has_cond(self, int32_t c) -> bool:
        return 0 <= c < self.z.cap_conds and bool(_lz_flags(self.z.cinfo, c) & CI_KNOWN)

    def set_cond(self, int32_t c, bint at_end, bint satisfiable) -> None:
        """The verdicts of condition ``c``: at the end of the document, and whether it can hold."""
        if c < 2:
            return
        cdef uint8_t flags = CI_KNOWN
        if c >= self.z.cap_conds:
            self._check_cond(c)
        if at_end:
            flags |= CI_AT_END
        if satisfiable:
            flags |= CI_SAT
        (<uint8_t*>_lz_chunk(self.z.cinfo, c, sizeof(uint8_t)))[c & (LZ_CHUNK - 1)] = flags

    def set_cond_step(self, int32_t c, int b, int32_t c2) -> None:
        """``cond_step(c, x) = c2`` for every byte ``x`` of ``b``'s byte group (``c2`` already
        :meth:`set_cond`)."""
        cdef int32_t* row
        cdef void** rows
        cdef Py_ssize_t k, m
        cdef const uint8_t* members = self._group_of_byte(b, &m)
        self._check_cond(c)
        self._check_cond(c2)
        row = <int32_t*>_lz_peek(self.z.ctrans, c)
        if row == NULL:
            rows = _lz_chunk(self.z.ctrans, c, sizeof(void*))
            row = <int32_t*>malloc(256 * sizeof(int32_t))
            if row == NULL:
                raise MemoryError("glrmask runtime: out of memory in the dynamic lexer")
            for k in range(256):
                row[k] = UNKNOWN
            glr_store_ptr(&rows[c & (LZ_CHUNK - 1)], row)
            self.n_cond_rows += 1
        for k in range(m):
            glr_store_i32(&row[members[k]], c2)


def _row_bits(const int32_t[::1] ptr, const int32_t[::1] term):
    """Per state, the bitset of the terminals (all below 64) of its action entries."""
    cdef Py_ssize_t s, e, n = ptr.shape[0] - 1
    out = np.zeros(max(n, 1), dtype=np.uint64)
    cdef uint64_t[::1] o = out
    for s in range(n):
        for e in range(ptr[s], ptr[s + 1]):
            o[s] |= (<uint64_t>1) << term[e]
    return out


cdef class Tables:
    """Read-only C views of one compiled mask's arrays (kept alive by this object). See
    :func:`glrmask.runtime.tables.native_tables` for how the arrays are assembled and checked."""

    cdef CTables t
    cdef dict _keep
    cdef LazyLexer _lazy
    cdef object _resolve
    cdef readonly int n_words
    cdef readonly int n_classes
    cdef readonly int class_words

    def __cinit__(self):
        memset(&self.t, 0, sizeof(CTables))

    def __init__(self, dict a):
        cdef CTables* t
        self._keep = {}
        for k_name, arr in a.items():
            self._keep[k_name] = np.ascontiguousarray(arr)
        g = self._keep
        t = &self.t
        t.lex_n = <int32_t>g["lex_trans"].shape[0]
        t.lex_init = <int32_t>_scalar(g["lex_initial"])
        t.lex_nterm = <int32_t>g["lr_of_lex"].shape[0]
        t.fut_words = <int32_t>g["futures"].shape[1]
        t.lex_trans = _i32(g["lex_trans"])
        t.ev_ptr = _i32(g["ev_ptr"])
        t.ev_term = _i32(g["ev_term"])
        t.ev_cond = _i32(g["ev_cond"])
        t.futures = <const uint64_t*>cnp.PyArray_DATA(g["futures"])
        t.n_conds = <int32_t>g["cond_trans"].shape[0]
        t.cond_trans = _i32(g["cond_trans"])
        t.cond_at_end = <const uint8_t*>cnp.PyArray_DATA(g["cond_at_end"])
        t.cond_sat = <const uint8_t*>cnp.PyArray_DATA(g["cond_sat"])
        t.lr_of_lex = _i32(g["lr_of_lex"])
        t.lex_ignored = <const uint8_t*>cnp.PyArray_DATA(g["lex_ignored"])
        if "act_lex" in g:
            if (g["act_lex"].dtype != np.uint64 or g["follow_lex"].dtype != np.uint64
                    or g["act_lex"].shape != (g["act_ptr"].shape[0] - 1, t.fut_words)
                    or g["follow_lex"].shape != (_scalar(g["lr_nterm"]), t.fut_words)):
                raise ValueError("runtime: next-terminal sets of the wrong shape")
            t.act_lex = <const uint64_t*>cnp.PyArray_DATA(g["act_lex"])
            t.follow_lex = <const uint64_t*>cnp.PyArray_DATA(g["follow_lex"])
        t.lr_n = <int32_t>(g["act_ptr"].shape[0] - 1)
        t.lr_nterm = <int32_t>_scalar(g["lr_nterm"])
        t.lr_nnt = <int32_t>_scalar(g["lr_nnt"])
        t.end_id = <int32_t>_scalar(g["end_id"])
        t.lr_start = <int32_t>_scalar(g["lr_start"])
        t.act_ptr = _i32(g["act_ptr"])
        t.act_term = _i32(g["act_term"])
        t.act_shift = _i32(g["act_shift"])
        t.act_roff = _i32(g["act_roff"])
        t.red_rules = _i32(g["red_rules"])
        t.goto_ptr = _i32(g["goto_ptr"])
        t.goto_nt = _i32(g["goto_nt"])
        t.goto_tgt = _i32(g["goto_tgt"])
        if 0 < t.lr_nterm <= 64:
            self._keep["act_bits"] = _row_bits(g["act_ptr"], g["act_term"])
            t.act_bits = <const uint64_t*>cnp.PyArray_DATA(self._keep["act_bits"])
        t.rule_len = _i32(g["rule_len"])
        t.rule_lhs = _i32(g["rule_lhs"])
        t.root_of_lex = _i32(g["root_of_lex"])
        t.root_restrict = _i32(g["root_restrict"])
        t.start_accept = _i32(g["start_accept"])
        t.start_class = _i32(g["start_class"])
        t.n_start_class = <int32_t>g["start_class"].shape[0]
        t.start_ptr = _i32(g["start_ptr"])
        t.start_class_of = _i32(g["start_class_of"])
        t.start_target = _i32(g["start_target"])
        t.e_ptr = _i32(g["edge_ptr"])
        t.e_label = _i32(g["edge_label"])
        t.e_target = _i32(g["edge_target"])
        t.e_accept = _i32(g["edge_accept"])
        t.d_target = _i32(g["default_target"])
        t.d_accept = _i32(g["default_accept"])
        t.weights = <const uint64_t*>cnp.PyArray_DATA(g["weights"])
        t.cw = <int32_t>g["weights"].shape[1]
        t.cond_fail = _i32(g["cond_fail"])
        t.n_classes = <int32_t>(g["cls_ptr"].shape[0] - 1)
        t.n_words = <int32_t>_scalar(g["n_words"])
        t.cls_ptr = _i32(g["cls_ptr"])
        t.cls_ids = _i32(g["cls_ids"])
        t.cls_dense = _i32(g["cls_dense"])
        t.dense_rows = <const uint32_t*>cnp.PyArray_DATA(g["dense_rows"])
        t.cls_cost = _i32(g["cls_cost"])
        t.cost_direct = <int64_t>(t.n_words // 4 + 16)
        t.max_stacks = <int64_t>_scalar(g["max_stacks"]) if "max_stacks" in g else DEFAULT_MAX_STACKS
        t.vocab_size = <int32_t>g["tok_kind"].shape[0]
        t.tok_bytes = <const uint8_t*>cnp.PyArray_DATA(g["tok_bytes"])
        t.tok_off = <const int64_t*>cnp.PyArray_DATA(g["tok_off"])
        t.tok_kind = <const uint8_t*>cnp.PyArray_DATA(g["tok_kind"])
        t.eos = _i32(g["eos"])
        t.n_eos = <int32_t>g["eos"].shape[0]
        self.n_words = t.n_words
        self.n_classes = t.n_classes
        self.class_words = t.cw
        t.n_walks = <int64_t*>calloc(1, sizeof(int64_t))
        t.slot_flag = <int*>calloc(N_CACHE_SLOTS, sizeof(int))
        t.slot_hash = <uint64_t*>calloc(N_CACHE_SLOTS, sizeof(uint64_t))
        t.slot_used = <uint8_t*>calloc(N_CACHE_SLOTS, sizeof(uint8_t))
        t.slot_key = <uint64_t*>calloc(N_CACHE_SLOTS * t.cw, sizeof(uint64_t))
        t.slot_words = <uint32_t*>malloc(N_CACHE_SLOTS * t.n_words * sizeof(uint32_t) + 4)
        if (t.n_walks == NULL or t.slot_flag == NULL or t.slot_hash == NULL or t.slot_used == NULL or t.slot_key == NULL
                or t.slot_words == NULL):
            raise MemoryError("glrmask runtime: cannot allocate the expansion cache")

    def __dealloc__(self):
        free(self.t.n_walks)
        free(self.t.slot_flag)
        free(self.t.slot_hash)
        free(self.t.slot_used)
        free(self.t.slot_key)
        free(self.t.slot_words)

    @property
    def vocab_size(self) -> int:
        return self.t.vocab_size

    @property
    def n_walks(self) -> int:
        """Static tables: masks the trie walk answered (lanes the Parser DWA has no root for)."""
        return self.t.n_walks[0]

    @property
    def dynamic(self) -> bool:
        """Masks by a trie walk over a lexer explored on demand (no Parser DWA)."""
        return bool(self.t.lazy)

    def attach_trie(self, dict trie) -> None:
        """The vocabulary trie (the :class:`glrmask.trie.VocabTrie` node and token arrays) for
        masks by a trie walk: every mask of dynamic tables, and on static tables the rare lane the
        Parser DWA has no root for (bytes committed mid-token). Set once."""
        cdef CTables* t = &self.t
        if t.tr_n:
            return
        # a trie's arrays are one dict per trie (glrmask.runtime.engine.trie_arrays): it records the
        # mask widths it was validated for, so a vocabulary's trie is checked once, not per mask
        # (and the record goes with the trie)
        widths = trie.setdefault("_validated_for_words", set())
        checked = t.n_words in widths
        for k_name in ("node_depth", "node_internal", "node_subtree_end", "i2o_ptr", "i2o_ids"):
            self._keep["tr_" + k_name] = np.ascontiguousarray(trie[k_name], dtype=np.int32)
        self._keep["tr_node_byte"] = np.ascontiguousarray(trie["node_byte"], dtype=np.uint8)
        g = self._keep
        n = g["tr_node_depth"].shape[0]
        if (n < 1 or g["tr_node_byte"].shape[0] != n or g["tr_node_internal"].shape[0] != n
                or g["tr_node_subtree_end"].shape[0] != n):
            raise ValueError("runtime: inconsistent trie arrays")
        if not checked:
            if n > 1 and (g["tr_node_depth"][1:].min() < 1 or g["tr_node_depth"][0] != 0):
                raise ValueError("runtime: trie depths must start at the root")
            ids = g["tr_i2o_ids"]
            if ids.shape[0] and (ids.min() < 0 or ids.max() >= t.n_words * 32):
                raise ValueError("runtime: a trie token id outside the mask")
        t.tr_max_depth = <int32_t>_trie_max_depth(trie, g["tr_node_depth"])
        if t.tr_max_depth >= (1 << 23):
            raise ValueError("runtime: a trie deeper than 2**23 bytes")
        # tokens of 32 KB or more leave no room for the coarse classes: the walk then assumes
        # every class below each node (its loop test loads the exact byte sets, as before them)
        t.tr_depth_shift = 16 if t.tr_max_depth < (1 << 15) else 8
        t.tr_below_all = 0 if t.tr_depth_shift == 16 else 255
        self._keep["tr_maxd"], self._keep["tr_text"] = _subtree_facts(
            trie, g["tr_node_depth"], g["tr_node_byte"], g["tr_node_subtree_end"])
        t.tr_maxd = _i32(self._keep["tr_maxd"])
        t.tr_text = <const uint8_t*>cnp.PyArray_DATA(self._keep["tr_text"])
        t.tr_split = MEMO_SPLIT if t.tr_max_depth > MEMO_SPLIT else 0
        self._keep["tr_short"] = _short_row(trie, g, t.n_words)
        t.tr_short = <const uint32_t*>cnp.PyArray_DATA(self._keep["tr_short"])
        self._keep["tr_pack"] = _trie_packed(trie, g["tr_node_depth"], g["tr_node_byte"], g["tr_node_internal"],
                                             g["tr_node_subtree_end"])
        t.tr_pack = <const int32_t*>cnp.PyArray_DATA(self._keep["tr_pack"])
        t.tr_depth = _i32(g["tr_node_depth"])
        t.tr_byte = <const uint8_t*>cnp.PyArray_DATA(g["tr_node_byte"])
        t.tr_internal = _i32(g["tr_node_internal"])
        t.tr_end = _i32(g["tr_node_subtree_end"])
        t.i2o_ptr = _i32(g["tr_i2o_ptr"])
        t.i2o_ids = _i32(g["tr_i2o_ids"])
        self._keep["tr_i2o_one"] = _single_ids(trie, g["tr_i2o_ptr"], g["tr_i2o_ids"])
        t.i2o_one = _i32(self._keep["tr_i2o_one"])
        if "node_subtree_bytes" in trie and "node_subtree_lo" in trie and "node_subtree_hi" in trie:
            sb = np.ascontiguousarray(trie["node_subtree_bytes"], dtype=np.uint64)
            lo = np.ascontiguousarray(trie["node_subtree_lo"], dtype=np.int32)
            hi = np.ascontiguousarray(trie["node_subtree_hi"], dtype=np.int32)
            n_int = g["tr_i2o_ptr"].shape[0] - 1
            if (sb.shape != (n, 4) or lo.shape[0] != n or hi.shape[0] != n
                    or (n and not checked and (lo.min() < 0 or (hi < lo).any() or hi.max() > n_int))):
                raise ValueError("runtime: inconsistent trie subtree arrays")
            self._keep["tr_subbytes"] = sb
            self._keep["tr_sub_lo"] = lo
            self._keep["tr_sub_hi"] = hi
            t.tr_subbytes = <const uint64_t*>cnp.PyArray_DATA(sb)
            t.tr_sub_lo = _i32(lo)
            t.tr_sub_hi = _i32(hi)
        glr_store_i32(&t.tr_n, <int32_t>n)  # published last: a reader that sees it sees the rest
        widths.add(t.n_words)

    def attach_dynamic(self, LazyLexer lexer, dict trie, object resolve) -> None:
        """Make these tables dynamic: lexer entries come from ``lexer`` (filled by ``resolve(missing, first)``,
        an ``int32 (n, 3)`` array of ``(kind, a, b)``: 0 step ``(q, b)``, 1 live terminals of ``q``,
        2 condition step ``(c, b)``, 3 condition verdicts of ``c``, 4 whether terminal ``b`` has a
        future in ``q``), masks from a walk of ``trie`` (:meth:`attach_trie`)."""
        cdef CTables* t = &self.t
        if lexer.z.fut_words != t.fut_words:
            raise ValueError("dynamic lexer: futures width differs from the tables'")
        if not -1 <= t.lex_init < lexer.z.cap_states:
            raise ValueError("dynamic tables: the initial lexer state is outside the lexer")
        self.attach_trie(trie)
        if t.act_lex != NULL and lexer.z.binit == NULL:
            lexer.z.binit = <int32_t*>calloc(t.lr_n + t.lr_nterm + 1, sizeof(int32_t))
            if lexer.z.binit == NULL:
                raise MemoryError("glrmask runtime: cannot allocate the dynamic lexer tables")
            lexer.z.n_binit = t.lr_n + t.lr_nterm
        self._lazy = lexer
        self._resolve = resolve
        t.lz = &lexer.z
        t.lazy = 1

    cdef void _resolve_missing(self, int32_t* buf, Py_ssize_t n, bint first) except *:
        """Explore the entries a step reported missing (``buf``: ``n`` ints, freed here; ``first``:
        the first round of one operation, which starts its exploration budget). With the
        lexer's byte groups known (:meth:`LazyLexer.set_byte_groups`), each entry is handed over
        once, in the order of its first report (a walk reports the same ones ~10 times)."""
        if self._lazy is not None and (<LazyLexer>self._lazy).z.has_groups and n >= 6:
            n = 3 * _distinct_missing(buf, n // 3, (<LazyLexer>self._lazy).z.byte_group)
            if n < 0:
                free(buf)
                raise MemoryError("glrmask runtime: out of memory")
        arr = np.empty((n // 3, 3), dtype=np.int32)
        cdef int32_t[:, ::1] v = arr
        if n:
            memcpy(&v[0, 0], buf, n * sizeof(int32_t))
        free(buf)
        self._resolve(arr, first)

    def new_state(self):
        """A fresh request: its own family, one record holding the initial configuration."""
        return _new_state(self)


# ------------------------------------------------------------------------------------ family
DEF F_TERMINATED = 1
DEF F_ACC_KNOWN = 2
DEF F_ACC_TRUE = 4

ctypedef struct CFamily:
    # GSS arena: node i = (node_state[i], node_parent[i]); hash-consed through an open table
    IVec node_state
    IVec node_parent
    int64_t* htab          # key = (state << 32) | (parent + 1), value index in hval
    int32_t* hval
    Py_ssize_t hcap
    Py_ssize_t hcount
    # snapshots and history
    IVec pool
    IVec rec_snap          # offset into pool
    IVec rec_prev
    IVec rec_depth
    IVec rec_flags
    IVec rec_step          # what each record committed: token id, or -2 - offset of [n, bytes…] in bpool
    IVec bpool
    # scratch (reused across calls; grows, never shrinks)
    IVec s_lanes           # current lanes being stepped
    IVec s_out             # proto-lane entries [lex, nc, conds..., node]
    IVec s_idx             # offsets of proto entries
    IVec s_tmp             # merge-sort buffer
    IVec s_next            # next snapshot being built
    IVec s_conds
    IVec s_clo_state       # reduce closure items (state, parent)
    IVec s_clo_parent
    IVec s_clo_act         # the action entry of each closure item's state on the lookahead, or -1
    IVec s_front
    IVec s_miss            # dynamic tables: (kind, a, b) entries a step needed but did not find
    IVec w_pool            # dynamic masks: the snapshot of every trie level being walked
    IVec w_lvl             # start of each level's snapshot in w_pool
    int64_t h_grows        # hash-table rebuilds (a walk's speculative nodes are undone unless one happened)
    IVec m_front           # seqs whose stacks a mask is computing (a stack of ids)
    IVec m_lvlq            # lexeme-memo build: the lexer state of each trie level, then per level
                           # (state, its survival verdict) and the state whose rows m_rows holds
    void** m_rows          # per level: that state's step row and event-reference row
    int32_t lp_key[64]     # looping bytes of recent lexer states (key q + 1; 0: empty slot)
    uint64_t lp_words[256]
    int32_t lp_cls[64]     # their coarse classes (runtime.COARSE_CLASS bits): looped on wholly | not at all << 8
    int32_t tl_key[64]     # lexer states that read all text back to themselves (_text_loop): q + 1
    int32_t tl_val[64]     # (0: an empty slot; cleared when a memo build starts) and the verdict
    IVec m_cache           # per seq of the memo being evaluated: offset of its stacks in m_cpool
    IVec m_cpool           # … ([n, nodes…]), -1 dead, -2 not computed yet
    IVec m_key             # the configuration key of the mask being computed (shared cache)
    IVec lm_snap[LM_SLOTS] # the snapshots of the last dynamic masks, and the masks (before end tokens)
    uint32_t* lm_words     # LM_SLOTS rows
    int64_t lm_used[LM_SLOTS]  # last use (0: empty)
    int64_t lm_clock
    int fc_on              # dynamic masks: memoize feeds (see _feed)
    int32_t* fc_slot       # FC_SLOTS offsets into fc_pool (-1: empty)
    IVec fc_pool
    uint64_t* s_bits       # class bitsets: acc, seed, lane (3 * cw)
    uint64_t* r_bits       # a lane's relevant terminals (fut_words; dynamic masks)
    int32_t cw
    IVec tx_a              # a memo transfer's pairs of lexer states at one trie level, and the next
    IVec tx_b
    IVec tx_fo             # a relabelling's source frontier nodes, by the trie level of their parent
    uint64_t tc_key        # the transfer checkpointed (_tx_key; 0: none): the first level where an
    int32_t tc_lvl         # entry was missing, the pairs there, the frontier nodes mapped before
    int32_t tc_fo          # it and their states — where the comparison resumes once explored
    IVec tc_pairs
    IVec tc_xq
    int32_t tx_stamp       # byte groups already compared for one pair (stamped)
    int32_t tx_gseen[256]


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x ^= x >> 33
    x *= <uint64_t>0xff51afd7ed558ccd
    x ^= x >> 33
    x *= <uint64_t>0xc4ceb9fe1a85ec53
    x ^= x >> 33
    return x


cdef inline Py_ssize_t _slot_of(const int64_t* keys, Py_ssize_t cap, int64_t key) noexcept nogil:
    """The slot of ``key`` in an open-addressing table of non-negative keys (-1: empty), or the
    empty slot where it belongs."""
    cdef Py_ssize_t j = <Py_ssize_t>(_mix(<uint64_t>key) & <uint64_t>(cap - 1))
    while keys[j] >= 0 and keys[j] != key:
        j = (j + 1) & (cap - 1)
    return j


cdef int _table_grow(int64_t** keys, int32_t** vals, Py_ssize_t* cap) noexcept nogil:
    """Double an open-addressing table (256 slots at first), re-inserting its keys. -1 on OOM."""
    cdef Py_ssize_t ncap = cap[0] * 2 if cap[0] else 256
    cdef int64_t* nt = <int64_t*>malloc(ncap * sizeof(int64_t))
    cdef int32_t* nv = <int32_t*>malloc(ncap * sizeof(int32_t))
    cdef Py_ssize_t i, j
    if nt == NULL or nv == NULL:
        free(nt)
        free(nv)
        return -1
    for i in range(ncap):
        nt[i] = -1
    for i in range(cap[0]):
        if keys[0][i] >= 0:
            j = _slot_of(nt, ncap, keys[0][i])
            nt[j] = keys[0][i]
            nv[j] = vals[0][i]
    free(keys[0])
    free(vals[0])
    keys[0] = nt
    vals[0] = nv
    cap[0] = ncap
    return 0


cdef int _h_grow(CFamily* f) noexcept nogil:
    if _table_grow(&f.htab, &f.hval, &f.hcap):
        return -1
    f.h_grows += 1
    return 0


cdef int32_t _intern(CFamily* f, int32_t state, int32_t parent) noexcept nogil:
    """The node ``(state, parent)``, created on first use; -1 when out of memory."""
    cdef int64_t key = (<int64_t>state << 32) | <int64_t>(<uint32_t>(parent + 1))
    cdef Py_ssize_t j
    cdef int32_t idx
    if (f.hcount + 1) * 2 > f.hcap and _h_grow(f):
        return -1
    j = _slot_of(f.htab, f.hcap, key)
    if f.htab[j] == key:
        return f.hval[j]
    idx = <int32_t>f.node_state.n
    if iv_push(&f.node_state, state) or iv_push(&f.node_parent, parent):
        return -1
    f.htab[j] = key
    f.hval[j] = idx
    f.hcount += 1
    return idx


cdef class Family:
    """The arena of one request and its forks (see the module docstring)."""

    cdef CFamily f
    cdef Tables tables
    cdef PyThread_type_lock lock

    def __cinit__(self, Tables tables):
        memset(&self.f, 0, sizeof(CFamily))
        self.tables = tables
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("glrmask runtime: cannot allocate a lock")
        self.f.cw = tables.t.cw
        self.f.s_bits = <uint64_t*>calloc(3 * tables.t.cw + 1, sizeof(uint64_t))
        self.f.r_bits = <uint64_t*>calloc(2 * tables.t.fut_words + 1, sizeof(uint64_t))
        if self.f.s_bits == NULL or self.f.r_bits == NULL:
            raise MemoryError("glrmask runtime: out of memory")

    def __dealloc__(self):
        cdef CFamily* f = &self.f
        iv_free(&f.node_state); iv_free(&f.node_parent)
        free(f.htab); free(f.hval)
        iv_free(&f.pool); iv_free(&f.rec_snap); iv_free(&f.rec_prev); iv_free(&f.rec_depth)
        iv_free(&f.rec_flags); iv_free(&f.rec_step); iv_free(&f.bpool)
        iv_free(&f.s_lanes); iv_free(&f.s_out); iv_free(&f.s_idx); iv_free(&f.s_tmp)
        iv_free(&f.s_next); iv_free(&f.s_conds); iv_free(&f.s_clo_state); iv_free(&f.s_clo_parent); iv_free(&f.s_clo_act)
        iv_free(&f.s_front); iv_free(&f.s_miss); iv_free(&f.w_pool); iv_free(&f.w_lvl)
        free(f.m_rows)
        iv_free(&f.m_front); iv_free(&f.m_lvlq); iv_free(&f.m_cache); iv_free(&f.m_cpool); iv_free(&f.m_key)
        for i in range(LM_SLOTS):
            iv_free(&f.lm_snap[i])
        free(f.lm_words); free(f.fc_slot); iv_free(&f.fc_pool)
        free(f.s_bits)
        free(f.r_bits)
        iv_free(&f.tx_a); iv_free(&f.tx_b); iv_free(&f.tx_fo); iv_free(&f.tc_pairs); iv_free(&f.tc_xq)
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef int init_root(self) noexcept:
        cdef CFamily* f = &self.f
        cdef int32_t node = _intern(f, self.tables.t.lr_start, -1)
        if node < 0:
            return -1
        # snapshot: one lane (BOUNDARY, no conds, [node])
        cdef int32_t off = <int32_t>f.pool.n
        if (iv_push(&f.pool, 1) or iv_push(&f.pool, BOUNDARY) or iv_push(&f.pool, 0)
                or iv_push(&f.pool, 1) or iv_push(&f.pool, node)):
            return -1
        return _push_record(f, off, -1, 0, 0) or iv_push(&f.rec_step, -1)

    @property
    def n_nodes(self) -> int:
        return self.f.node_state.n

    @property
    def n_records(self) -> int:
        return self.f.rec_snap.n

    @property
    def nbytes(self) -> int:
        cdef CFamily* f = &self.f
        return 4 * (f.node_state.cap + f.node_parent.cap + f.pool.cap + 4 * f.rec_snap.cap) + 12 * f.hcap


cdef int _push_record(CFamily* f, int32_t snap, int32_t prev, int32_t depth, int32_t flags) noexcept nogil:
    if (iv_push(&f.rec_snap, snap) or iv_push(&f.rec_prev, prev) or iv_push(&f.rec_depth, depth)
            or iv_push(&f.rec_flags, flags)):
        return -1
    return 0



# ------------------------------------------------------------------------------------ lexer access
# Static tables read the dense lexer's arrays. Dynamic tables (``lazy``) read rows explored on
# demand: an entry not explored yet is recorded in ``f.s_miss`` and read as a dead end, and the
# operation reports R_MISSING — the caller explores those entries (Python, the lazy lexer) and
# runs it again, so a result built on a missing entry is never used.
cdef inline void _miss(CFamily* f, int32_t kind, int32_t a, int32_t b) noexcept nogil:
    if iv_reserve(&f.s_miss, f.s_miss.n + 3) == 0:
        f.s_miss.d[f.s_miss.n] = kind
        f.s_miss.d[f.s_miss.n + 1] = a
        f.s_miss.d[f.s_miss.n + 2] = b
        f.s_miss.n += 3


cdef inline int32_t _lx_next(const CTables* t, CFamily* f, int32_t q, int32_t b) noexcept nogil:
    """The lexer state after byte ``b`` in state ``q`` (DEAD, or UNKNOWN when not explored)."""
    cdef int32_t* row
    cdef int32_t v
    if not t.lazy:
        return t.lex_trans[<Py_ssize_t>q * 256 + b]
    if q < 0:
        return DEAD  # a grammar without terminals: its initial lexer state is already dead
    row = <int32_t*>_lz_get(t.lz.trans, q)
    v = UNKNOWN if row == NULL else glr_load_i32(&row[b])
    if v == UNKNOWN:
        _miss(f, M_STEP, q, b)
    return v


cdef inline int32_t _lx_events(const CTables* t, int32_t q, int32_t b, const int32_t** terms,
                               const int32_t** conds) noexcept nogil:
    """The events of ``(q, b)`` (an entry :func:`_lx_next` found): their number, and the terms
    and conditions at stride 1 (static) or 2 (dynamic: ``[n, term, cond, …]``)."""
    cdef Py_ssize_t z
    cdef int32_t ref
    cdef int32_t* ev
    if not t.lazy:
        z = <Py_ssize_t>q * 256 + b
        terms[0] = t.ev_term + t.ev_ptr[z]
        conds[0] = t.ev_cond + t.ev_ptr[z]
        return t.ev_ptr[z + 1] - t.ev_ptr[z]
    if q < 0:
        return 0
    ref = (<int32_t*>_lz_get(t.lz.evref, q))[b]
    if ref < 0:
        return 0
    ev = t.lz.ev_chunks[ref >> EV_CHUNK_BITS] + (ref & (EV_CHUNK - 1))
    terms[0] = ev + 1
    conds[0] = ev + 2
    return ev[0]


cdef inline const uint64_t* _lx_futures(const CTables* t, CFamily* f, int32_t q) noexcept nogil:
    """The future terminals of lexer state ``q`` (NULL when not explored yet)."""
    cdef const uint64_t* w
    if not t.lazy:
        return t.futures + <Py_ssize_t>q * t.fut_words
    w = <const uint64_t*>_lz_get(t.lz.fut, q)
    if w == NULL:
        _miss(f, M_ALIVE, q, 0)
    return w


cdef inline int32_t _cx_next(const CTables* t, CFamily* f, int32_t c, int32_t b) noexcept nogil:
    """A pending condition after byte ``b`` (TRUE, FALSE, pending, or UNKNOWN)."""
    cdef int32_t* row
    cdef int32_t v
    if not t.lazy:
        return t.cond_trans[<Py_ssize_t>c * 256 + b]
    row = <int32_t*>_lz_get(t.lz.ctrans, c)
    v = UNKNOWN if row == NULL else glr_load_i32(&row[b])
    if v == UNKNOWN:
        _miss(f, M_COND_STEP, c, b)
    return v


cdef inline int _cx_info(const CTables* t, CFamily* f, int32_t c, int flag) noexcept nogil:
    """``cond_at_end`` (CI_AT_END) or ``cond_sat`` (CI_SAT) of condition ``c``. Dynamic tables
    publish a condition's verdicts before any entry that names it; a gap reads as false."""
    cdef uint8_t v
    if not t.lazy:
        return t.cond_at_end[c] if flag == CI_AT_END else t.cond_sat[c]
    v = _lz_flags(t.lz.cinfo, c)
    if not (v & CI_KNOWN):
        _miss(f, M_COND_INFO, c, 0)
        return 0
    return 1 if v & flag else 0


# ------------------------------------------------------------------------------------ GLR
cdef inline Py_ssize_t _row_find(const int32_t* keys, Py_ssize_t lo, Py_ssize_t hi, int32_t key) noexcept nogil:
    """The index of ``key`` in the strictly sorted ``keys[lo:hi]``, or -1. Rows are short (a
    handful of actions, a few dozen at most), so a branch-free binary search for the last key
    ``<= key``: the loop's one comparison becomes a conditional move and its trip count depends
    only on the row length."""
    cdef Py_ssize_t n = hi - lo, half
    cdef const int32_t* b = keys + lo
    if n <= 0:
        return -1
    while n > 1:
        half = n >> 1
        b = b + half if b[half] <= key else b
        n -= half
    return (b - keys) if b[0] == key else -1


cdef inline Py_ssize_t _action(const CTables* t, int32_t st, int32_t term) noexcept nogil:
    """The action entry of cell ``(st, term)``, or -1 when it neither shifts nor reduces. With at
    most 64 terminals a state's row is one bitset word: the entry is its rank (a popcount), and
    the common miss is one load."""
    cdef uint64_t w, bit
    if t.act_bits != NULL:
        w = t.act_bits[st]
        bit = (<uint64_t>1) << term
        if not (w & bit):
            return -1
        return t.act_ptr[st] + _rank(w & (bit - 1))
    return _row_find(t.act_term, t.act_ptr[st], t.act_ptr[st + 1], term)


cdef inline int _rank(uint64_t x) noexcept nogil:
    """The number of set bits of ``x``, inline (the extension is built for generic x86-64, where
    ``__builtin_popcountll`` is a call into libgcc: too slow for a lookup on every shift)."""
    x = x - ((x >> 1) & 0x5555555555555555ULL)
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL)
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL
    return <int>((x * 0x0101010101010101ULL) >> 56)


cdef inline int32_t _goto(const CTables* t, int32_t st, int32_t nt) noexcept nogil:
    """The goto target of ``(st, nt)``, or -1."""
    cdef Py_ssize_t e = _row_find(t.goto_nt, t.goto_ptr[st], t.goto_ptr[st + 1], nt)
    return t.goto_tgt[e] if e >= 0 else -1


cdef int _closure(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front,
                  int32_t term) noexcept nogil:
    """Reduce closure of ``front`` on lookahead ``term`` into ``s_clo_state/s_clo_parent``:
    the frontier nodes themselves, then every (goto state, revealed node) reachable by
    reductions (a virtual node: only shifted nodes are interned). ``s_clo_act`` gets each item's
    action entry on ``term`` (-1: none), so callers read its shift without searching the row
    again. Returns -1 on OOM."""
    cdef IVec* cs = &f.s_clo_state
    cdef IVec* cp = &f.s_clo_parent
    cdef IVec* ca = &f.s_clo_act
    cdef Py_ssize_t i = 0, j, k, j0, j1
    cdef int32_t st, par, r, p, L, g, node, m
    cdef int dup
    cs.n = 0
    cp.n = 0
    ca.n = 0
    for k in range(n_front):
        node = front[k]
        if iv_push(cs, f.node_state.d[node]) or iv_push(cp, f.node_parent.d[node]):
            return -1
    while i < cs.n:
        st = cs.d[i]
        par = cp.d[i]
        i += 1
        k = _action(t, st, term)
        if iv_push(ca, <int32_t>k):
            return -1
        if k < 0:
            continue
        j0 = t.act_roff[k]
        j1 = t.act_roff[k + 1]
        for j in range(j0, j1):
            r = t.red_rules[j]
            L = t.rule_len[r]
            # the item is (st, par): popping 1 reveals par, further pops follow parents
            if L == 0:
                # an empty rule (normalized grammars keep at most the nullable start): it pops
                # nothing, so the item itself is revealed and must become a real node
                p = _intern(f, st, par)
                if p < 0:
                    return -1
            else:
                p = par
                m = 1
                while m < L and p >= 0:
                    p = f.node_parent.d[p]
                    m += 1
                if p < 0:
                    continue  # pops below the bottom: an invalid path (never for valid tables)
            g = _goto(t, f.node_state.d[p], t.rule_lhs[r])
            if g < 0:
                continue
            dup = 0
            for m in range(cs.n):
                if cs.d[m] == g and cp.d[m] == p:
                    dup = 1
                    break
            if not dup:
                if iv_push(cs, g) or iv_push(cp, p):
                    return -1
    return 0


cdef int _can_shift(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front,
                    int32_t term) noexcept nogil:
    """1 if some stack of ``front`` can shift ``term`` after reductions, 0 if not, -1 on OOM."""
    cdef Py_ssize_t k, e
    cdef int any_action = 0
    # fast path: no stack has any action on term (an entry that does not shift reduces)
    for k in range(n_front):
        e = _action(t, f.node_state.d[front[k]], term)
        if e >= 0:
            if t.act_shift[e] >= 0:
                return 1
            any_action = 1
    if not any_action:
        return 0
    if _closure(t, f, front, n_front, term):
        return -1
    for k in range(f.s_clo_state.n):
        if f.s_clo_act.d[k] >= 0 and t.act_shift[f.s_clo_act.d[k]] >= 0:
            return 1
    return 0


cdef int _feed(const CTables* t, CFamily* f, const int32_t* front, int32_t n_front, int32_t term,
               IVec* out) noexcept nogil:
    """Shift ``term`` on every stack of ``front`` (all reduce alternatives): the new top nodes,
    appended unsorted to ``out``. Returns -1 on OOM. During a dynamic mask (``fc_on``) results
    are memoized by (term, frontier): the trie walk feeds the same stacks the same terminal for
    many tokens (every digit of a number, every token that closes a string)."""
    cdef Py_ssize_t k, n0 = out.n, j, e, probe
    cdef int32_t sh, item, node
    cdef uint64_t h = 0
    if f.fc_on:
        h = _mix(<uint64_t>term * <uint64_t>0x9e3779b97f4a7c15 + <uint64_t>n_front)
        for k in range(n_front):
            h = _mix(h ^ <uint64_t>(<uint32_t>front[k]))
        j = <Py_ssize_t>(h & (FC_SLOTS - 1))
        for probe in range(8):
            e = f.fc_slot[(j + probe) & (FC_SLOTS - 1)]
            if e < 0:
                break
            if (f.fc_pool.d[e] == term and f.fc_pool.d[e + 1] == n_front
                    and memcmp(f.fc_pool.d + e + 2, front, n_front * sizeof(int32_t)) == 0):
                e += 2 + n_front
                if iv_reserve(out, out.n + f.fc_pool.d[e]):
                    return -1
                memcpy(out.d + out.n, f.fc_pool.d + e + 1, f.fc_pool.d[e] * sizeof(int32_t))
                out.n += f.fc_pool.d[e]
                return 0
    if _closure(t, f, front, n_front, term):
        return -1
    for k in range(f.s_clo_state.n):
        e = f.s_clo_act.d[k]
        sh = t.act_shift[e] if e >= 0 else -1
        if sh >= 0:
            item = _intern(f, f.s_clo_state.d[k], f.s_clo_parent.d[k])
            if item < 0:
                return -1
            node = _intern(f, sh, item)
            if node < 0 or iv_push(out, node):
                return -1
    if f.fc_on:
        for probe in range(8):
            if f.fc_slot[(j + probe) & (FC_SLOTS - 1)] < 0:
                e = f.fc_pool.n
                if iv_reserve(&f.fc_pool, e + 3 + n_front + out.n - n0):
                    return -1
                f.fc_pool.d[e] = term
                f.fc_pool.d[e + 1] = n_front
                memcpy(f.fc_pool.d + e + 2, front, n_front * sizeof(int32_t))
                f.fc_pool.d[e + 2 + n_front] = <int32_t>(out.n - n0)
                memcpy(f.fc_pool.d + e + 3 + n_front, out.d + n0, (out.n - n0) * sizeof(int32_t))
                f.fc_pool.n = e + 3 + n_front + out.n - n0
                f.fc_slot[(j + probe) & (FC_SLOTS - 1)] = <int32_t>e
                break
    return 0


# ------------------------------------------------------------------------------------ lanes
cdef int32_t _seq_child(SeqTab* S, int32_t seq, int32_t term) noexcept nogil:
    """The seq ``seq`` + ``term`` (created on first use); -1 when out of memory."""
    cdef int64_t key = (<int64_t>seq << 32) | <int64_t>(<uint32_t>term)
    cdef Py_ssize_t j
    cdef int32_t idx
    if (S.count + 1) * 2 > S.cap and _table_grow(&S.keys, &S.vals, &S.cap):
        return -1
    j = _slot_of(S.keys, S.cap, key)
    if S.keys[j] == key:
        return S.vals[j]
    idx = <int32_t>S.parent.n
    if iv_push(&S.parent, seq) or iv_push(&S.term, term):
        return -1
    S.keys[j] = key
    S.vals[j] = idx
    S.count += 1
    return idx


cdef inline int _lane_survives(const CTables* t, CFamily* f, int32_t q2, const int32_t* front,
                               int32_t n_front) noexcept nogil:
    """A mid-lexeme lane in lexer state ``q2`` lives iff one of its future terminals is ignored
    or shiftable by its frontier (the reference recognizer with ``restrict_lexer=False``).
    Dynamic tables know which terminals are alive in ``q2``; whether one has a future is asked
    only for those the frontier could take (a search of that terminal's lane, explored once)."""
    cdef const uint64_t* fut = _lx_futures(t, f, q2)
    cdef int32_t w, term, lr, fw = t.fut_words
    cdef uint64_t word, bit
    cdef int r
    if fut == NULL:
        return 0
    for w in range(fw):
        word = fut[w]
        while word:
            term = w * 64 + glr_ctz64(word)
            word &= word - 1
            if t.lex_ignored[term]:
                r = 1
            else:
                lr = t.lr_of_lex[term]
                if lr < 0:
                    continue
                r = _can_shift(t, f, front, n_front, lr)
                if r < 0:
                    return r
            if r and t.lazy:
                bit = (<uint64_t>1) << (term & 63)
                if not (glr_load_u64(&fut[fw + w]) & bit):
                    # ask for this one only: a lane's first candidate usually has a future, and
                    # each answer is one search of the Python lexer
                    _miss(f, M_FUTURE, q2, term)
                    return 0
                r = 1 if fut[2 * fw + w] & bit else 0
            if r:
                return 1
    return 0


cdef inline int _emit(CFamily* f, int32_t lex, const int32_t* conds, int32_t nc, int32_t node) noexcept nogil:
    """Append a proto-lane entry ``[lex, nc, conds…, node]`` (conds sorted, unique)."""
    cdef IVec* o = &f.s_out
    cdef int32_t k
    if iv_push(&f.s_idx, <int32_t>o.n):
        return -1
    if iv_reserve(o, o.n + nc + 3):
        return -1
    o.d[o.n] = lex
    o.d[o.n + 1] = nc
    for k in range(nc):
        o.d[o.n + 2 + k] = conds[k]
    o.d[o.n + 2 + nc] = node
    o.n += nc + 3
    return 0


cdef inline int _cmp_entry(const int32_t* d, int32_t a, int32_t b) noexcept nogil:
    """Order proto entries by (lex, nc, conds, node)."""
    cdef int32_t k, na, nb
    if d[a] != d[b]:
        return -1 if d[a] < d[b] else 1
    na = d[a + 1]
    nb = d[b + 1]
    if na != nb:
        return -1 if na < nb else 1
    for k in range(na + 1):
        if d[a + 2 + k] != d[b + 2 + k]:
            return -1 if d[a + 2 + k] < d[b + 2 + k] else 1
    return 0


cdef int _sort_entries(CFamily* f) noexcept nogil:
    """Bottom-up merge sort of ``s_idx`` by :func:`_cmp_entry` (stable, O(n log n))."""
    cdef Py_ssize_t n = f.s_idx.n, width = 1, lo, mid, hi, i, j, k
    cdef int32_t* a
    cdef int32_t* b
    cdef int32_t* tmp
    cdef const int32_t* d = f.s_out.d
    if n < 2:
        return 0
    if iv_reserve(&f.s_tmp, n):
        return -1
    a = f.s_idx.d
    b = f.s_tmp.d
    if n <= 8:
        for i in range(1, n):
            j = i
            while j > 0 and _cmp_entry(d, a[j - 1], a[j]) > 0:
                a[j - 1], a[j] = a[j], a[j - 1]
                j -= 1
        return 0
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width
            if mid > n:
                mid = n
            hi = lo + 2 * width
            if hi > n:
                hi = n
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _cmp_entry(d, a[i], a[j]) <= 0:
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
                k += 1
            while i < mid:
                b[k] = a[i]
                i += 1
                k += 1
            while j < hi:
                b[k] = a[j]
                j += 1
                k += 1
            lo = hi
        tmp = a
        a = b
        b = tmp
        width *= 2
    if a != f.s_idx.d:
        memcpy(f.s_idx.d, a, n * sizeof(int32_t))
    return 0


cdef int _build_lanes(CFamily* f, IVec* dst) noexcept nogil:
    """Group the sorted proto entries into a snapshot ``[n_lanes, lanes…]`` appended to ``dst``
    (duplicates dropped). Returns the number of lanes, or -1 on OOM."""
    cdef const int32_t* d
    cdef Py_ssize_t i = 0, n, head, cnt_pos, j
    cdef int32_t e, nc, k, n_lanes = 0, prev_node
    cdef Py_ssize_t base
    if _sort_entries(f):
        return -1
    n = f.s_idx.n
    base = dst.n
    if iv_push(dst, 0):
        return -1
    while i < n:
        e = f.s_idx.d[i]
        d = f.s_out.d
        nc = d[e + 1]
        if iv_reserve(dst, dst.n + nc + 3):
            return -1
        dst.d[dst.n] = d[e]
        dst.d[dst.n + 1] = nc
        for k in range(nc):
            dst.d[dst.n + 2 + k] = d[e + 2 + k]
        dst.n += nc + 2
        cnt_pos = dst.n
        if iv_push(dst, 0):
            return -1
        prev_node = -1
        head = e
        while i < n:
            e = f.s_idx.d[i]
            d = f.s_out.d
            if d[e] != d[head] or d[e + 1] != nc:
                break
            if memcmp(&d[e + 2], &d[head + 2], nc * sizeof(int32_t)) != 0:
                break
            if d[e + 2 + nc] != prev_node:
                prev_node = d[e + 2 + nc]
                if iv_push(dst, prev_node):
                    return -1
                dst.d[cnt_pos] += 1
            i += 1
        n_lanes += 1
    dst.d[base] = n_lanes
    return n_lanes


cdef inline int32_t _boundary_q(const CTables* t, CFamily* f, const int32_t* front, int32_t nn,
                               const SeqTab* S) noexcept nogil:
    """The lexer state a lane at BOUNDARY starts its lexeme in: on dynamic tables, the initial
    state restricted to the terminals that can come next — over one stack, those with an action
    in its top state; in a memo's symbolic walk, after one seq, those that can follow its last
    terminal — else the initial state (UNKNOWN: not explored yet, recorded). Terminals scan
    independently, so dropping lanes no stack could take changes no mask, and the lexeme's
    states stay small (keys of one object, not every key and string of the schema)."""
    cdef int32_t which, v
    if not t.lazy or t.lz.binit == NULL or nn != 1:
        return t.lex_init
    if S == NULL:
        which = f.node_state.d[front[0]]
    elif front[0] != 0:
        which = t.lr_n + S.term.d[front[0]]
    else:
        return t.lex_init
    v = glr_load_i32(&t.lz.binit[which])
    if v == 0:
        if which < t.lr_n:
            _miss(f, M_BOUNDARY, which, 0)
        else:
            _miss(f, M_BOUNDARY, which - t.lr_n, 1)
        return UNKNOWN
    return v - 2


cdef inline const uint64_t* _seq_allow(const SeqTab* S, int32_t seq, int32_t fw) noexcept nogil:
    """The lexer terminals a lexeme after seq ``seq`` may hold (NULL: any)."""
    if seq == 0:
        return S.root_allow
    if S.follow == NULL:
        return NULL
    return S.follow + <Py_ssize_t>S.term.d[seq] * fw


cdef inline int _seq_allows_any(const SeqTab* S, int32_t seq, const uint64_t* bits, int32_t fw) noexcept nogil:
    cdef const uint64_t* allow = _seq_allow(S, seq, fw)
    cdef int32_t w
    if allow == NULL:
        return 1
    for w in range(fw):
        if allow[w] & bits[w]:
            return 1
    return 0


cdef int _step_byte(const CTables* t, CFamily* f, const int32_t* lanes, int32_t b,
                    IVec* dst, SeqTab* S=NULL) noexcept nogil:
    """One byte over the snapshot ``lanes``; the next snapshot is appended to ``dst``. Returns
    its number of lanes (0: the byte kills every lane) or -1 on OOM.

    Symbolic (``S`` given, for lexeme memos): a lane's "frontier" holds seqs instead of GSS nodes —
    the terminals fed since the walk began, interned in ``S`` — so the step needs no stacks: a
    terminal extends each seq instead of being fed, and no lane is dropped for its stacks (the
    memo's evaluation asks the stacks, per mask) — only for what no stack could take after the
    seq (``S.root_allow``, ``S.follow``): a lexeme none of whose live terminals may come next, or
    a terminal that may not come next."""
    cdef int32_t n_lanes = lanes[0], li, lex, nc, nn, k, c, c2, q, q2, term, cond, lr
    cdef const int32_t* p = lanes + 1
    cdef const int32_t* conds
    cdef const int32_t* front
    cdef Py_ssize_t e, base_n, m, z
    cdef int dead, r
    cdef IVec* cv = &f.s_conds
    cdef const int32_t* ev_terms
    cdef const int32_t* ev_conds
    cdef int32_t n_ev
    cdef Py_ssize_t stride = 2 if t.lazy else 1
    cdef const uint64_t* alive
    cdef const uint64_t* allow
    cdef int32_t fw = t.fut_words
    cdef int pruned = S != NULL and (S.root_allow != NULL or S.follow != NULL)
    f.s_out.n = 0
    f.s_idx.n = 0
    for li in range(n_lanes):
        lex = p[0]
        nc = p[1]
        conds = p + 2
        nn = p[2 + nc]
        front = p + 3 + nc
        p = front + nn
        # settle pending conditions on this byte
        cv.n = 0
        dead = 0
        for k in range(nc):
            c2 = _cx_next(t, f, conds[k], b)
            if c2 == C_FALSE or c2 == UNKNOWN:
                dead = 1
                break
            if c2 != C_TRUE:
                if iv_push(cv, c2):
                    return -1
        if dead:
            continue
        # sort + unique the surviving conditions (few)
        for k in range(1, cv.n):
            c = cv.d[k]
            m = k
            while m > 0 and cv.d[m - 1] > c:
                cv.d[m] = cv.d[m - 1]
                m -= 1
            cv.d[m] = c
        m = 0
        for k in range(cv.n):
            if m == 0 or cv.d[m - 1] != cv.d[k]:
                cv.d[m] = cv.d[k]
                m += 1
        cv.n = m
        base_n = cv.n
        q = _boundary_q(t, f, front, nn, S) if lex == BOUNDARY else lex
        if q == UNKNOWN:
            continue
        q2 = _lx_next(t, f, q, b)
        if q2 == UNKNOWN:
            continue
        if q2 != DEAD:
            r = 1 if S != NULL else _lane_survives(t, f, q2, front, nn)
            if r < 0:
                return -1
            alive = NULL
            if r and pruned:
                alive = _lx_futures(t, f, q2)  # NULL: not explored (the walk will run again)
                r = alive != NULL
            if r:
                for k in range(nn):
                    if alive != NULL and not _seq_allows_any(S, front[k], alive, fw):
                        continue
                    if _emit(f, q2, cv.d, <int32_t>base_n, front[k]):
                        return -1
        n_ev = _lx_events(t, q, b, &ev_terms, &ev_conds)
        for e in range(n_ev):
            term = ev_terms[e * stride]
            cond = ev_conds[e * stride]
            if cond == C_FALSE or (cond != C_TRUE and not _cx_info(t, f, cond, CI_SAT)):
                continue
            # conditions after this event: base ∪ {cond}
            cv.n = base_n
            if cond != C_TRUE:
                m = 0
                while m < base_n and cv.d[m] < cond:
                    m += 1
                if m == base_n or cv.d[m] != cond:
                    if iv_push(cv, 0):
                        return -1
                    k = <int32_t>base_n
                    while k > m:
                        cv.d[k] = cv.d[k - 1]
                        k -= 1
                    cv.d[m] = cond
            if t.lex_ignored[term]:
                for k in range(nn):
                    if _emit(f, BOUNDARY, cv.d, <int32_t>cv.n, front[k]):
                        return -1
            lr = t.lr_of_lex[term]
            if lr >= 0 and S != NULL:
                for m in range(nn):
                    allow = _seq_allow(S, front[m], fw) if pruned else NULL
                    if allow != NULL and not (allow[term >> 6] >> (term & 63)) & 1:
                        continue
                    k = _seq_child(S, front[m], lr)
                    if k < 0 or _emit(f, BOUNDARY, cv.d, <int32_t>cv.n, k):
                        return -1
            elif lr >= 0:
                f.s_front.n = 0
                if _feed(t, f, front, nn, lr, &f.s_front):
                    return -1
                for m in range(f.s_front.n):
                    if _emit(f, BOUNDARY, cv.d, <int32_t>cv.n, f.s_front.d[m]):
                        return -1
            # restore the base condition list (an insertion may have shifted it)
            if cond != C_TRUE and cv.n != base_n:
                k = 0
                for m in range(cv.n):
                    if cv.d[m] != cond:
                        cv.d[k] = cv.d[m]
                        k += 1
                cv.n = k
    if f.s_idx.n == 0:
        return 0
    if f.s_idx.n > t.max_stacks:
        return TOOBIG
    return _build_lanes(f, dst)


cdef int _step_bytes(const CTables* t, CFamily* f, const int32_t* snap, const uint8_t* data,
                     Py_ssize_t n) noexcept nogil:
    """Step ``snap`` over ``data``; the result is left in ``f.s_next`` (from offset 0). Returns
    the number of lanes (0 = rejected) or -1 on OOM."""
    cdef Py_ssize_t i, ln
    cdef int r = 0
    cdef IVec tmp
    cdef const int32_t* cur = snap
    if n == 0:
        # copy the snapshot as is
        ln = _snap_len(snap)
        f.s_next.n = 0
        if iv_reserve(&f.s_next, ln):
            return -1
        memcpy(f.s_next.d, snap, ln * sizeof(int32_t))
        f.s_next.n = ln
        return snap[0]
    for i in range(n):
        f.s_next.n = 0
        r = _step_byte(t, f, cur, data[i], &f.s_next)
        if r <= 0:
            return r
        # swap s_next into s_lanes so the next byte reads a stable buffer
        tmp = f.s_lanes
        f.s_lanes = f.s_next
        f.s_next = tmp
        cur = f.s_lanes.d
    # the result sits in s_lanes: swap back so callers find it in s_next
    tmp = f.s_lanes
    f.s_lanes = f.s_next
    f.s_next = tmp
    return r


cdef inline Py_ssize_t _snap_len(const int32_t* s) noexcept nogil:
    cdef int32_t n = s[0], i
    cdef Py_ssize_t k = 1
    for i in range(n):
        k += 2 + s[k + 1]
        k += 1 + s[k]
    return k


cdef int _accepting(const CTables* t, CFamily* f, const int32_t* snap) noexcept nogil:
    """Some lane sits at a boundary, its conditions hold at the end of the document, and its
    frontier can shift ``$END``. 1/0, -1 on OOM."""
    cdef int32_t n = snap[0], i, nc, nn, k
    cdef const int32_t* p = snap + 1
    cdef int ok, r
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        if p[0] == BOUNDARY:
            ok = 1
            for k in range(nc):
                if not _cx_info(t, f, p[2 + k], CI_AT_END):
                    ok = 0
                    break
            if ok:
                r = _can_shift(t, f, p + 3 + nc, nn, t.end_id)
                if r != 0:
                    return r
        p = p + 3 + nc + nn
    return 0


cdef int _rec_accepting(const CTables* t, CFamily* f, int32_t rec) noexcept nogil:
    cdef int32_t fl = f.rec_flags.d[rec]
    cdef int r
    if fl & F_TERMINATED:
        return 1
    if fl & F_ACC_KNOWN:
        return 1 if fl & F_ACC_TRUE else 0
    r = _accepting(t, f, f.pool.d + f.rec_snap.d[rec])
    if r < 0:
        return r
    f.rec_flags.d[rec] = fl | F_ACC_KNOWN | (F_ACC_TRUE if r else 0)
    return r


cdef int _log_step(CFamily* f, int64_t token, const uint8_t* data, Py_ssize_t n) noexcept nogil:
    """Remember what the newest record committed (a token id, or raw bytes) — a request moved to
    another engine replays its steps."""
    cdef Py_ssize_t k, off = f.bpool.n
    if token >= 0:
        return iv_push(&f.rec_step, <int32_t>token)
    if iv_reserve(&f.bpool, off + n + 1):
        return -1
    f.bpool.d[off] = <int32_t>n
    for k in range(n):
        f.bpool.d[off + 1 + k] = data[k]
    f.bpool.n = off + n + 1
    return iv_push(&f.rec_step, <int32_t>(-2 - off))


cdef int _commit(const CTables* t, CFamily* f, int32_t rec, const uint8_t* data, Py_ssize_t n,
                 int as_token_eos, int64_t token, int32_t* new_rec) noexcept nogil:
    """Append the record after ``data`` (or after an end token) to the history of ``rec``;
    ``token``: its id, or -1 for raw bytes."""
    cdef int r
    cdef int32_t off
    if f.rec_flags.d[rec] & F_TERMINATED:
        return R_REJECTED
    if as_token_eos:
        r = _rec_accepting(t, f, rec)
        if r < 0:
            return R_NOMEM
        if not r:
            return R_REJECTED
        if (_push_record(f, f.rec_snap.d[rec], rec, f.rec_depth.d[rec] + 1, F_TERMINATED)
                or _log_step(f, token, NULL, 0)):
            return R_NOMEM
        new_rec[0] = <int32_t>(f.rec_snap.n - 1)
        return R_OK
    f.s_miss.n = 0
    r = _step_bytes(t, f, f.pool.d + f.rec_snap.d[rec], data, n)
    if r == TOOBIG:
        return R_TOOBIG
    if r < 0:
        return R_NOMEM
    if f.s_miss.n:
        return R_MISSING
    if r == 0:
        return R_REJECTED
    off = <int32_t>f.pool.n
    if iv_reserve(&f.pool, f.pool.n + f.s_next.n):
        return R_NOMEM
    memcpy(f.pool.d + off, f.s_next.d, f.s_next.n * sizeof(int32_t))
    f.pool.n += f.s_next.n
    if _push_record(f, off, rec, f.rec_depth.d[rec] + 1, 0) or _log_step(f, token, data, n):
        return R_NOMEM
    new_rec[0] = <int32_t>(f.rec_snap.n - 1)
    return R_OK


cdef int _commit_token(const CTables* t, CFamily* f, int32_t rec, int64_t token,
                       int32_t* new_rec) noexcept nogil:
    cdef uint8_t kind
    if token < 0 or token >= t.vocab_size:
        return R_REJECTED
    kind = t.tok_kind[token]
    if kind == K_NONE:
        return R_REJECTED
    if kind == K_EOS:
        return _commit(t, f, rec, NULL, 0, 1, token, new_rec)
    return _commit(t, f, rec, t.tok_bytes + t.tok_off[token], t.tok_off[token + 1] - t.tok_off[token],
                   0, token, new_rec)


# ------------------------------------------------------------------------------------ masks
cdef inline int32_t _pd_step(const CTables* t, int32_t x, int32_t s, int32_t* acc) noexcept nogil:
    """Read LR state ``s`` in Parser-DWA state ``x``: the next state (-1 stops) and, in ``acc``,
    the weight accepted on the way (-1 none). Explicit labels are ascending: binary search."""
    cdef int32_t lo = t.e_ptr[x], hi = t.e_ptr[x + 1], mid, lab
    while lo < hi:
        mid = (lo + hi) >> 1
        lab = t.e_label[mid]
        if lab == s:
            acc[0] = t.e_accept[mid]
            return t.e_target[mid]
        if lab < s:
            lo = mid + 1
        else:
            hi = mid
    acc[0] = t.d_accept[x]
    return t.d_target[x]


cdef inline void _or_weight(const CTables* t, uint64_t* dst, int32_t w) noexcept nogil:
    cdef const uint64_t* src = t.weights + <Py_ssize_t>w * t.cw
    cdef int32_t k
    for k in range(t.cw):
        dst[k] |= src[k]


cdef inline int32_t _pd_start(const CTables* t, int32_t root, int32_t s) noexcept nogil:
    """The Parser-DWA state root ``root`` starts in when the stack's top is LR state ``s``: its
    entry for ``s``'s start class (a binary search over the root's classes), ``-1`` for none."""
    cdef int32_t c, lo, hi, mid
    if s < 0 or s >= t.n_start_class:
        return -1
    c = t.start_class[s]
    if c < 0:
        return -1
    lo = t.start_ptr[root]
    hi = t.start_ptr[root + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if t.start_class_of[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    if lo < t.start_ptr[root + 1] and t.start_class_of[lo] == c:
        return t.start_target[lo]
    return -1


cdef int _class_bits(const CTables* t, CFamily* f, const int32_t* snap, uint64_t* acc) noexcept nogil:
    """The allowed classes of a snapshot into ``acc`` (cw words). R_FALLBACK when a lane has no
    Parser-DWA root or a condition no failure seed."""
    cdef int32_t n = snap[0], i, nc, nn, k, q, root, x, w, node
    cdef const int32_t* p = snap + 1
    cdef uint64_t* seed = f.s_bits + t.cw
    cdef uint64_t* lane = f.s_bits + 2 * t.cw
    cdef uint64_t any_new
    cdef int32_t c
    memset(acc, 0, t.cw * sizeof(uint64_t))
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        q = t.lex_init if p[0] == BOUNDARY else p[0]
        root = t.root_of_lex[q]
        if root < 0:
            return R_FALLBACK
        w = t.root_restrict[root]  # a root that masks as another on a subset of the tokens
        if w >= 0:
            for k in range(t.cw):
                seed[k] = t.weights[<Py_ssize_t>w * t.cw + k]
        else:
            for k in range(t.cw):
                seed[k] = ~(<uint64_t>0)
        for k in range(nc):
            w = t.cond_fail[p[2 + k]]
            if w == -2:
                return R_FALLBACK
            if w >= 0:
                for c in range(t.cw):
                    seed[c] &= ~t.weights[<Py_ssize_t>w * t.cw + c]
        any_new = 0
        for k in range(t.cw):
            any_new |= seed[k] & ~acc[k]
        if any_new:
            memset(lane, 0, t.cw * sizeof(uint64_t))
            if t.start_accept[root] >= 0:
                _or_weight(t, lane, t.start_accept[root])
            for k in range(nn):
                node = p[3 + nc + k]
                x = _pd_start(t, root, f.node_state.d[node]) if node >= 0 else -1
                while x >= 0 and node >= 0:
                    x = _pd_step(t, x, f.node_state.d[node], &w)
                    if w >= 0:
                        _or_weight(t, lane, w)
                    node = f.node_parent.d[node]
            for k in range(t.cw):
                acc[k] |= seed[k] & lane[k]
        p = p + 3 + nc + nn
    return R_OK


cdef void _expand_direct(const CTables* t, const uint64_t* bits, uint32_t* out, int complement) noexcept nogil:
    """OR the tokens of the classes in ``bits`` (or of those NOT in ``bits`` when
    ``complement``) into ``out``."""
    cdef int32_t w, c, k, row
    cdef uint64_t word
    cdef const uint32_t* src
    cdef int32_t j, nwords = t.n_words
    for w in range(t.cw):
        word = ~bits[w] if complement else bits[w]
        if w == t.cw - 1 and (t.n_classes & 63):
            word &= (<uint64_t>1 << (t.n_classes & 63)) - 1
        while word:
            c = w * 64 + glr_ctz64(word)
            word &= word - 1
            row = t.cls_dense[c]
            if row >= 0:
                src = t.dense_rows + <Py_ssize_t>row * nwords
                for j in range(nwords):
                    out[j] |= src[j]
            else:
                for k in range(t.cls_ptr[c], t.cls_ptr[c + 1]):
                    j = t.cls_ids[k]
                    out[j >> 5] |= (<uint32_t>1) << (j & 31)


cdef void _expand(const CTables* t, const uint64_t* bits, uint32_t* out) noexcept nogil:
    """Packed original-id words of a class bitset: the cheaper of the classes in it or the
    classes out of it (then complemented against the union of all classes, its own dense row
    ``n_classes``), with a bounded cache of recent results for the expensive ones."""
    cdef int64_t cost_in = 0, cost_out = 0
    cdef int32_t w, c, slot, j
    cdef uint64_t word, h = 0x9E3779B97F4A7C15
    cdef int complement
    cdef const uint32_t* all_row
    for w in range(t.cw):
        word = bits[w]
        h = _mix(h ^ word)
        while word:
            c = w * 64 + glr_ctz64(word)
            word &= word - 1
            cost_in += t.cls_cost[c]
    cost_out = t.cls_cost[t.n_classes] - cost_in  # the total cost minus the part in `bits`
    complement = cost_out < cost_in
    if (cost_out if complement else cost_in) > t.cost_direct:
        slot = <int32_t>(h % N_CACHE_SLOTS)
        if glr_trylock(&t.slot_flag[slot]):
            if (t.slot_used[slot] and t.slot_hash[slot] == h
                    and memcmp(t.slot_key + <Py_ssize_t>slot * t.cw, bits, t.cw * sizeof(uint64_t)) == 0):
                memcpy(out, t.slot_words + <Py_ssize_t>slot * t.n_words, t.n_words * sizeof(uint32_t))
                glr_unlock(&t.slot_flag[slot])
                return
            _expand_into(t, bits, out, complement)
            memcpy(t.slot_words + <Py_ssize_t>slot * t.n_words, out, t.n_words * sizeof(uint32_t))
            memcpy(t.slot_key + <Py_ssize_t>slot * t.cw, bits, t.cw * sizeof(uint64_t))
            t.slot_hash[slot] = h
            t.slot_used[slot] = 1
            glr_unlock(&t.slot_flag[slot])
            return
    _expand_into(t, bits, out, complement)


cdef void _expand_into(const CTables* t, const uint64_t* bits, uint32_t* out, int complement) noexcept nogil:
    cdef int32_t j
    cdef const uint32_t* all_row
    if complement:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        _expand_direct(t, bits, out, 1)
        all_row = t.dense_rows + <Py_ssize_t>t.cls_dense[t.n_classes] * t.n_words
        for j in range(t.n_words):
            out[j] = all_row[j] & ~out[j]
    else:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        _expand_direct(t, bits, out, 0)


cdef void _undo_nodes(CFamily* f, Py_ssize_t n0, int64_t grows0) noexcept nogil:
    """Forget the GSS nodes interned after the first ``n0`` (a dynamic mask's speculative steps):
    deleting keys in the reverse order of their insertion restores the open-addressing table
    exactly, unless it was rebuilt meanwhile — then it is rebuilt from the nodes kept."""
    cdef Py_ssize_t idx, j
    cdef int64_t key
    if f.node_state.n == n0:
        return
    if f.h_grows != grows0:
        for j in range(f.hcap):
            f.htab[j] = -1
        for idx in range(n0):
            key = (<int64_t>f.node_state.d[idx] << 32) | <int64_t>(<uint32_t>(f.node_parent.d[idx] + 1))
            j = _slot_of(f.htab, f.hcap, key)
            f.htab[j] = key
            f.hval[j] = <int32_t>idx
        f.hcount = n0
    else:
        idx = f.node_state.n - 1
        while idx >= n0:
            key = (<int64_t>f.node_state.d[idx] << 32) | <int64_t>(<uint32_t>(f.node_parent.d[idx] + 1))
            f.htab[_slot_of(f.htab, f.hcap, key)] = -1
            f.hcount -= 1
            idx -= 1
    f.node_state.n = n0
    f.node_parent.n = n0


cdef int _walk_step(const CTables* t, CFamily* f, Py_ssize_t parent, int32_t b, SeqTab* S=NULL) noexcept nogil:
    """The snapshot after byte ``b`` from the one at ``w_pool[parent]``, appended to ``w_pool``.
    Returns its number of lanes (0: dead), -1 on OOM, TOOBIG.

    The common case — no lane that survives its pending conditions ends a terminal on this byte —
    only moves the lexers and settles the conditions (no GLR work, no sort). Walk snapshots need
    not be canonical (lanes are independent; only committed snapshots are compared), so the lanes
    are written in order and never merged."""
    cdef IVec* W = &f.w_pool
    cdef const int32_t* p = W.d + parent
    cdef const int32_t* lp
    cdef int32_t n_lanes = p[0], li, lex, nc, nn, q, q2, n_ev, k, m, c2, nc2, n_out = 0
    cdef const int32_t* ev_terms
    cdef const int32_t* ev_conds
    cdef int32_t cbuf[16]
    cdef Py_ssize_t psize, head, o
    cdef int r, dead
    cdef int pruned = S != NULL and (S.root_allow != NULL or S.follow != NULL)
    cdef const uint64_t* alive
    cdef int32_t kept, fw = t.fut_words
    # pass 1: does a surviving lane end a terminal here? (then the general step)
    lp = p + 1
    for li in range(n_lanes):
        nc = lp[1]
        nn = lp[2 + nc]
        if nc > 16:
            break
        dead = 0
        for k in range(nc):
            c2 = _cx_next(t, f, lp[2 + k], b)
            if c2 == C_FALSE or c2 == UNKNOWN:
                dead = 1
                break
        if not dead:
            q = _boundary_q(t, f, lp + 3 + nc, nn, S) if lp[0] == BOUNDARY else lp[0]
            if q == UNKNOWN:
                break  # the general step skips it (and the walk runs again once explored)
            q2 = _lx_next(t, f, q, b)
            if q2 != UNKNOWN and _lx_events(t, q, b, &ev_terms, &ev_conds):
                break
        lp = lp + 3 + nc + nn
    else:
        # pass 2: every lane moves its lexer only
        psize = lp - p
        if iv_reserve(W, W.n + psize):
            return -1
        p = W.d + parent
        head = W.n
        o = head + 1
        lp = p + 1
        for li in range(n_lanes):
            nc = lp[1]
            nn = lp[2 + nc]
            q = _boundary_q(t, f, lp + 3 + nc, nn, S) if lp[0] == BOUNDARY else lp[0]
            q2 = _lx_next(t, f, q, b)
            nc2 = 0
            dead = q2 == UNKNOWN or q2 == DEAD
            for k in range(nc):
                if dead:
                    break
                c2 = _cx_next(t, f, lp[2 + k], b)
                if c2 == C_FALSE or c2 == UNKNOWN:
                    dead = 1
                elif c2 != C_TRUE:
                    m = nc2
                    while m > 0 and cbuf[m - 1] > c2:
                        cbuf[m] = cbuf[m - 1]
                        m -= 1
                    if m > 0 and cbuf[m - 1] == c2:
                        while m < nc2:
                            cbuf[m] = cbuf[m + 1]
                            m += 1
                        continue
                    cbuf[m] = c2
                    nc2 += 1
            if not dead:
                r = 1 if S != NULL else _lane_survives(t, f, q2, lp + 3 + nc, nn)
                if r < 0:
                    return -1
                p = W.d + parent  # _lane_survives never touches w_pool, but keep p honest
                alive = NULL
                if r and pruned:
                    alive = _lx_futures(t, f, q2)  # NULL: not explored (the walk will run again)
                    r = alive != NULL
                if r:
                    W.d[o] = q2
                    W.d[o + 1] = nc2
                    for k in range(nc2):
                        W.d[o + 2 + k] = cbuf[k]
                    kept = 0
                    for k in range(nn):  # symbolic: only the seqs after which the lexeme may come
                        if alive == NULL or _seq_allows_any(S, lp[3 + nc + k], alive, fw):
                            W.d[o + 3 + nc2 + kept] = lp[3 + nc + k]
                            kept += 1
                    if kept:
                        W.d[o + 2 + nc2] = kept
                        o += 3 + nc2 + kept
                        n_out += 1
            lp = lp + 3 + nc + nn
        if n_out == 0:
            return 0
        W.d[head] = n_out
        W.n = o
        return n_out
    f.s_next.n = 0
    r = _step_byte(t, f, p, b, &f.s_next, S)
    if r <= 0:
        return r
    if iv_reserve(W, W.n + f.s_next.n):
        return -1
    memcpy(W.d + W.n, f.s_next.d, f.s_next.n * sizeof(int32_t))
    W.n += f.s_next.n
    return r


cdef inline void _set_token(const CTables* t, uint32_t* out, int32_t tok) noexcept nogil:
    """Allow every original id of internal token ``tok`` (-1: no token ends here)."""
    cdef int32_t k, oid
    if tok >= 0:
        oid = t.i2o_one[tok]
        if oid >= 0:
            out[oid >> 5] |= (<uint32_t>1) << (oid & 31)
            return
        for k in range(t.i2o_ptr[tok], t.i2o_ptr[tok + 1]):
            oid = t.i2o_ids[k]
            out[oid >> 5] |= (<uint32_t>1) << (oid & 31)


cdef int _walk_range(const CTables* t, CFamily* f, Py_ssize_t lo, Py_ssize_t hi, uint32_t* out) noexcept nogil:
    """Walk the trie nodes ``[lo, hi)`` (the root's children, or one subtree), the parent of ``lo``
    at level ``depth(lo) - 1`` of ``w_pool``. Each level keeps its snapshot, so a shared prefix is
    stepped once for all tokens below it; a subtree is skipped once its snapshot is dead."""
    cdef IVec* W = &f.w_pool
    cdef IVec* L = &f.w_lvl
    cdef Py_ssize_t i = lo
    cdef int32_t d
    cdef int r
    while i < hi:
        d = t.tr_depth[i]
        W.n = L.d[d]
        r = _walk_step(t, f, L.d[d - 1], t.tr_byte[i])
        if r < 0:
            return R_TOOBIG if r == TOOBIG else R_NOMEM
        if r == 0:
            i = t.tr_end[i]
            continue
        L.d[d + 1] = <int32_t>W.n
        _set_token(t, out, t.tr_internal[i])
        i += 1
    return R_OK


cdef int _survives_r(const CTables* t, CFamily* f, int32_t q2, const uint64_t* rbits) noexcept nogil:
    """Whether a lane in lexer state ``q2`` has a future among ``rbits``: 1, 0, or -1 when that is
    not explored yet (recorded in ``s_miss``)."""
    cdef const uint64_t* fut = _lx_futures(t, f, q2)
    cdef int32_t w, fw = t.fut_words
    cdef uint64_t word, known
    if fut == NULL:
        return -1
    for w in range(fw):  # a known future first
        if rbits[w] & glr_load_u64(&fut[fw + w]) & fut[2 * fw + w] & fut[w]:
            return 1
    for w in range(fw):  # else ask for the first unknown one only (one Python search each)
        known = glr_load_u64(&fut[fw + w])
        word = fut[w] & rbits[w] & ~known
        if word:
            _miss(f, M_FUTURE, q2, w * 64 + glr_ctz64(word))
            return -1
    return 0


cdef const uint64_t* _loop_words(const CTables* t, CFamily* f, int32_t q) noexcept nogil:
    """The bytes on which lexer state ``q`` steps to itself with no event, as 4 words — known
    entries only (one not explored yet is no loop, so the set only errs towards fewer bytes) —
    cached per family in a small direct-mapped table (cleared when a memo build starts), with
    their coarse classes in ``f.lp_cls[q & 63]`` (:data:`COARSE_CLASS`)."""
    cdef int slot = q & 63
    cdef uint64_t* w = &f.lp_words[slot * 4]
    cdef int32_t* row
    cdef int32_t* evr
    cdef Py_ssize_t z
    cdef int b
    if f.lp_key[slot] == q + 1:
        return w
    w[0] = 0; w[1] = 0; w[2] = 0; w[3] = 0
    if not t.lazy:
        for b in range(256):
            z = <Py_ssize_t>q * 256 + b
            if t.lex_trans[z] == q and t.ev_ptr[z + 1] == t.ev_ptr[z]:
                w[b >> 6] |= (<uint64_t>1) << (b & 63)
    else:
        row = <int32_t*>_lz_get(t.lz.trans, q)
        evr = <int32_t*>_lz_get(t.lz.evref, q)
        if row != NULL and evr != NULL:
            for b in range(256):
                if glr_load_i32(&row[b]) == q and evr[b] < 0:
                    w[b >> 6] |= (<uint64_t>1) << (b & 63)
    cdef int full = 255, none = 255, bit
    for b in range(256):  # the coarse classes q loops on wholly, and those it never loops on
        bit = _coarse[b]
        if (w[b >> 6] >> (b & 63)) & 1:
            none &= ~bit
        else:
            full &= ~bit
    f.lp_cls[slot] = full | (none << 8)
    f.lp_key[slot] = q + 1
    return w


DEF TL_PAIRS = 16  # (decoder state, lexer state) pairs a text loop may have



cdef int _text_loop(const CTables* t, CFamily* f, const uint64_t* rbits, int32_t q) noexcept nogil:
    """Whether lexer state ``q`` reads every prefix of JSON-string text (_subtree_facts) with no
    event, never dead, every state surviving ``rbits``, and back to ``q`` itself at each character
    boundary: 1 yes, 0 no, -1 entries or futures not explored yet (asked for).

    Why. The loop shortcut takes a subtree whose bytes all step ``q`` to itself — ASCII only,
    since a multi-byte character goes through states of its own. Inside a string or a key (after
    its exclusion lookahead), a subtree holding one accented or CJK token was stepped node by
    node: ~76k of Llama-3.1's 274k trie nodes per memo; with text subtrees taken whole, 14–22k
    (the rest holds quotes, escapes or split characters). The check is the product of the UTF-8
    decoder and the lexer from ``q`` (a few pairs), cached per state for the memo being built."""
    cdef int slot = q & 63
    cdef int32_t pu[TL_PAIRS]
    cdef int32_t px[TL_PAIRS]
    cdef int32_t n = 1, k, j, x, y, last_y = UNKNOWN
    cdef int b, u, v, sv, last_sv = 0, unknown = 0
    cdef const int32_t* row
    cdef const int32_t* evr
    cdef uint8_t asked[256]
    if f.tl_key[slot] == q + 1:
        return f.tl_val[slot]
    pu[0] = 0
    px[0] = q
    k = 0
    while k < n:
        u = pu[k]
        x = px[k]
        k += 1
        row = <const int32_t*>_lz_get(t.lz.trans, x)
        evr = <const int32_t*>_lz_get(t.lz.evref, x)
        memset(asked, 0, sizeof(asked))
        for b in range(256):
            v = _u8_next[u][b]
            if v < 0:
                continue
            y = UNKNOWN if row == NULL else glr_load_i32(&row[b])
            if y == UNKNOWN:
                if not asked[t.lz.byte_group[b] if t.lz.has_groups else b]:
                    asked[t.lz.byte_group[b] if t.lz.has_groups else b] = 1
                    _miss(f, M_STEP, x, b)
                unknown = 1
                continue
            if y == DEAD or evr[b] >= 0 or (v == 0 and y != q):  # (a count: another state)
                f.tl_key[slot] = q + 1
                f.tl_val[slot] = 0
                return 0
            if y != last_y:
                last_y = y
                last_sv = _survives_r(t, f, y, rbits)
            if last_sv < 0:
                unknown = 1
                continue
            if last_sv == 0:
                f.tl_key[slot] = q + 1
                f.tl_val[slot] = 0
                return 0
            for j in range(n):
                if pu[j] == v and px[j] == y:
                    break
            else:
                if n == TL_PAIRS:  # (a count, say: no loop)
                    f.tl_key[slot] = q + 1
                    f.tl_val[slot] = 0
                    return 0
                pu[n] = v
                px[n] = y
                n += 1
    f.tl_key[slot] = q + 1  # (not known yet, asked for: the same answer until the next round)
    f.tl_val[slot] = -1 if unknown else 1
    return f.tl_val[slot]


cdef void _rc_drop(LexMemo* m) noexcept nogil:
    """Stop recording ``m``'s walk (a level with more than RC_W states, a subtree taken without
    stepping it, out of memory): it will not be a transfer source."""
    free(m.rc); free(m.rc_n)
    m.rc = NULL
    m.rc_n = NULL


cdef uint64_t* _rc_entry(LexMemo* m, int32_t levels, int32_t lvl, int32_t q) noexcept nogil:
    """The record of the bytes the walk stepped from lexer state ``q`` at trie level ``lvl`` (4
    words), added when new; NULL when the level is full (then the record is to be dropped)."""
    cdef uint64_t* e
    cdef int32_t k, n = m.rc_n[lvl]
    for k in range(n):
        e = m.rc + 5 * (<Py_ssize_t>lvl * RC_W + k)
        if <int32_t>e[0] == q:
            return e + 1
    if n == RC_W:
        return NULL
    e = m.rc + 5 * (<Py_ssize_t>lvl * RC_W + n)
    e[0] = <uint64_t><uint32_t>q
    e[1] = 0; e[2] = 0; e[3] = 0; e[4] = 0
    m.rc_n[lvl] = n + 1
    return e + 1


cdef int _memo_walk(const CTables* t, CFamily* f, LexMemo* m, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """The lexer-only walk of trie nodes ``[lo, hi)`` (parent state at level ``depth(lo) - 1`` of
    ``m_lvlq``) into the memo being built: a lane that does not survive ``m.rbits`` is a dead
    subtree, one not explored yet is left for the next round. -1 on OOM."""
    cdef IVec* LQ = &f.m_lvlq
    cdef int32_t* SV = LQ.d + t.tr_max_depth + 2  # per level: (state, its survival verdict)
    cdef int32_t* RK = LQ.d + 3 * (t.tr_max_depth + 2)  # per level: the state whose rows RW holds
    cdef void** RW = f.m_rows
    cdef uint64_t** RE = <uint64_t**>(f.m_rows + 2 * (t.tr_max_depth + 2))  # per level: its record
    cdef const int32_t* row
    cdef Py_ssize_t i = lo, k
    cdef int32_t d, qp, q2, tok, b, below, lc
    cdef const uint64_t* lw
    cdef const uint64_t* sb
    cdef int32_t a, z
    cdef int sv, take
    cdef const int32_t* P = t.tr_pack
    cdef const int32_t* node
    # the internal ids of the tokens that stay inside (original ids once the walk is done): at
    # most one per node of [lo, hi), so reserved once and written without a check or a branch
    if iv_reserve(&m.b_pairs, m.b_pairs.n + (hi - lo)):
        return -1
    cdef int32_t* bp = m.b_pairs.d
    cdef Py_ssize_t bn = m.b_pairs.n
    cdef int64_t visited = 0
    while i < hi:
        visited += 1
        node = P + 3 * i
        d = node[2] >> t.tr_depth_shift
        if m.part == P_LONG and t.tr_maxd[i] <= t.tr_split:
            i = node[0]  # no long token below
            continue
        qp = LQ.d[d - 1]
        b = node[2] & 255
        # the parent's rows, looked up once per level (no entry is explored during a walk), and
        # its record of the bytes stepped from it at that level (when recording)
        if RK[d - 1] != qp:
            RK[d - 1] = qp
            RW[2 * (d - 1)] = _lz_get(t.lz.trans, qp)
            RW[2 * (d - 1) + 1] = _lz_get(t.lz.evref, qp)
            RE[d - 1] = NULL
        if m.rc != NULL:
            if RE[d - 1] == NULL:
                RE[d - 1] = _rc_entry(m, t.tr_max_depth + 2, d - 1, qp)
            if RE[d - 1] != NULL:
                RE[d - 1][b >> 6] |= (<uint64_t>1) << (b & 63)
            else:
                _rc_drop(m)
        row = <const int32_t*>RW[2 * (d - 1)]
        q2 = UNKNOWN if row == NULL else glr_load_i32(&row[b])
        if q2 == UNKNOWN:
            _miss(f, M_STEP, qp, b)
            if iv_push(&m.b_pend, <int32_t>i) or iv_push(&m.b_pend, qp):
                m.b_pairs.n = bn
                return -1
            i = node[0]
            continue
        if (<const int32_t*>RW[2 * (d - 1) + 1])[b] >= 0:  # an event: a frontier node
            if iv_push(&m.b_front, <int32_t>i) or iv_push(&m.b_front, qp):
                m.b_pairs.n = bn
                return -1
            i = node[0]
            continue
        if q2 == DEAD:
            i = node[0]
            continue
        # siblings mostly step to the same state (a string's next count): its verdict per level
        # (a known verdict never changes while the memo is built: futures only get known)
        if SV[2 * d] == q2:
            sv = SV[2 * d + 1]
        else:
            sv = _survives_r(t, f, q2, m.rbits)
            if sv >= 0:
                SV[2 * d] = q2
                SV[2 * d + 1] = sv
        if sv < 0:
            if iv_push(&m.b_pend, <int32_t>i) or iv_push(&m.b_pend, qp):
                m.b_pairs.n = bn
                return -1
            i = node[0]
            continue
        if sv == 0:
            i = node[0]
            continue
        LQ.d[d] = q2
        tok = node[1]
        bp[bn] = tok
        bn += tok >= 0 and (m.part != P_LONG or d > t.tr_split)
        if t.tr_subbytes != NULL and node[0] > i + 1 and m.part == P_ALL:
            take = 0
            if q2 == qp:
                # in a loop (a string's body): when every byte below loops too, every token below
                # ends in q2, which survives — take them all, in trie order, without stepping
                lw = _loop_words(t, f, q2)
                # most subtrees are decided by their coarse byte classes (in the node's packed
                # fields): one class q2 never loops on fails the test, classes it loops on wholly
                # pass it; only a mix loads the subtree's byte set
                below = ((node[2] >> 8) & 255) | t.tr_below_all
                lc = f.lp_cls[q2 & 63]
                if not (below & (lc >> 8)):
                    sb = t.tr_subbytes + 4 * i
                    take = (below & ~lc & 255) == 0 or (
                        (sb[0] & ~lw[0]) | (sb[1] & ~lw[1]) | (sb[2] & ~lw[2]) | (sb[3] & ~lw[3])) == 0
            # text below (multi-byte characters too), read by q2 as a loop: the same — tested in
            # a loop (q2 its parent's state), and known after a multi-byte character's last byte
            if not take and q2 == qp:
                if t.tr_text[i] & 1:
                    take = _text_loop(t, f, m.rbits, q2)
            elif not take and (b & 0xC0) == 0x80 and f.tl_key[q2 & 63] == q2 + 1 and f.tl_val[q2 & 63] == 1:
                take = t.tr_text[i] & 1
            if take < 0:  # its rows or futures first: this node again next round
                bn -= tok >= 0
                if iv_push(&m.b_pend, <int32_t>i) or iv_push(&m.b_pend, qp):
                    m.b_pairs.n = bn
                    return -1
                i = node[0]
                continue
            if take:
                a = t.tr_sub_lo[i] + (1 if tok >= 0 else 0)
                z = t.tr_sub_hi[i]
                if m.rc != NULL:  # bytes below were not stepped: nothing to compare a transfer with
                    _rc_drop(m)
                while a < z:  # the subtree's internal ids are an interval (trie order)
                    bp[bn] = a
                    bn += 1
                    a += 1
                i = node[0]
                continue
        i += 1
    m.b_pairs.n = bn
    t.lz.n_walk_nodes += visited
    return 0


cdef void _rc_keep(const CTables* t, LexMemo* m) noexcept nogil:
    """The complete walk's record, level by level, compacted into ``m.tx`` (kept, counted in the
    memos' memory)."""
    cdef int32_t levels = t.tr_max_depth + 2, lvl, used = 0
    cdef Py_ssize_t n = 0, k
    for lvl in range(levels):
        n += m.rc_n[lvl]
        if m.rc_n[lvl]:
            used = lvl + 1
    m.tx = <uint64_t*>malloc((5 * n + 1) * sizeof(uint64_t))
    m.tx_off = <int32_t*>malloc((used + 1) * sizeof(int32_t))
    if m.tx == NULL or m.tx_off == NULL:
        free(m.tx); free(m.tx_off)
        m.tx = NULL
        m.tx_off = NULL
    else:
        k = 0
        for lvl in range(used):
            m.tx_off[lvl] = <int32_t>k
            memcpy(m.tx + 5 * k, m.rc + 5 * (<Py_ssize_t>lvl * RC_W), 5 * m.rc_n[lvl] * sizeof(uint64_t))
            k += m.rc_n[lvl]
        m.tx_off[used] = <int32_t>k
        m.tx_levels = used
        t.lz.memo_bytes += 40 * n + 4 * used
    _rc_drop(m)


cdef int _memo_build(const CTables* t, CFamily* f, LexMemo* m) noexcept nogil:
    """Build (or go on building) the memo ``m`` of a lane without pending conditions: the lexeme
    walk, resumed where it met lexer entries not explored yet, then the frontier classes.
    R_OK, R_MISSING (explore, come back), R_NOMEM or R_TOOBIG. Called with the builder lock."""
    cdef IVec* LQ = &f.m_lvlq
    cdef IVec pend
    cdef Py_ssize_t k, node, n, j, e
    cdef int32_t oid, tok
    if iv_reserve(LQ, 4 * (t.tr_max_depth + 2)):
        return R_NOMEM
    if f.m_rows == NULL:
        f.m_rows = <void**>malloc(3 * (t.tr_max_depth + 2) * sizeof(void*))
        if f.m_rows == NULL:
            return R_NOMEM
    # no verdicts, no rows (a row explored since the last round must be read again): DEAD keys
    memset(LQ.d + t.tr_max_depth + 2, 0xff, 3 * (t.tr_max_depth + 2) * sizeof(int32_t))
    memset(f.lp_key, 0, sizeof(f.lp_key))  # entries explored since may loop now
    memset(f.tl_key, 0, sizeof(f.tl_key))  # (and read text; verdicts are against this memo's rbits)
    if not m.lex_done:
        if not m.started:
            m.started = 1
            LQ.d[0] = m.q
            if m.part != P_LONG:  # (the long tokens' part is not transferred: no record)
                m.rc = <uint64_t*>malloc(5 * RC_W * (t.tr_max_depth + 2) * sizeof(uint64_t))
                m.rc_n = <int32_t*>calloc(t.tr_max_depth + 2, sizeof(int32_t))
                if m.rc == NULL or m.rc_n == NULL:
                    _rc_drop(m)
            t.lz.n_walks += 1
            if _memo_walk(t, f, m, 1, t.tr_n):
                return R_NOMEM
        else:
            pend = m.b_pend
            memset(&m.b_pend, 0, sizeof(IVec))
            for k in range(pend.n // 2):
                node = pend.d[2 * k]
                # (its depth and subtree end from its packed fields: the cache line the walk reads)
                LQ.d[(t.tr_pack[3 * node + 2] >> t.tr_depth_shift) - 1] = pend.d[2 * k + 1]
                if _memo_walk(t, f, m, node, t.tr_pack[3 * node]):
                    iv_free(&pend)
                    return R_NOMEM
            iv_free(&pend)
        if m.b_pend.n:
            return R_MISSING
        # the walk kept internal ids: their original ids, once — as a dense row when they are
        # many (the only form a mask reads then), else as a list
        n = 0
        if m.b_pairs.n >= (MEMO_DENSE_MIN if m.part == P_ALL else t.n_words):  # (a long part: a list)
            m.u_row = <uint32_t*>calloc(t.n_words, sizeof(uint32_t))
            if m.u_row == NULL:
                return R_NOMEM
            for k in range(m.b_pairs.n):
                tok = m.b_pairs.d[k]
                oid = t.i2o_one[tok]
                if oid >= 0:
                    m.u_row[oid >> 5] |= (<uint32_t>1) << (oid & 31)
                    n += 1
                    continue
                for e in range(t.i2o_ptr[tok], t.i2o_ptr[tok + 1]):
                    oid = t.i2o_ids[e]
                    m.u_row[oid >> 5] |= (<uint32_t>1) << (oid & 31)
                n += t.i2o_ptr[tok + 1] - t.i2o_ptr[tok]
        else:
            for k in range(m.b_pairs.n):
                tok = m.b_pairs.d[k]
                n += t.i2o_ptr[tok + 1] - t.i2o_ptr[tok]
            m.u_ids = <int32_t*>malloc((n + 1) * sizeof(int32_t))
            if m.u_ids == NULL:
                return R_NOMEM
            j = 0
            for k in range(m.b_pairs.n):
                tok = m.b_pairs.d[k]
                for e in range(t.i2o_ptr[tok], t.i2o_ptr[tok + 1]):
                    m.u_ids[j] = t.i2o_ids[e]
                    j += 1
        iv_free(&m.b_pairs)
        m.n_u = <int32_t>n
        m.n_front = <int32_t>(m.b_front.n // 2)
        m.fr_node = <int32_t*>malloc((m.n_front + 1) * sizeof(int32_t))
        m.fr_q = <int32_t*>malloc((m.n_front + 1) * sizeof(int32_t))
        if m.fr_node == NULL or m.fr_q == NULL:
            return R_NOMEM
        for k in range(m.n_front):
            m.fr_node[k] = m.b_front.d[2 * k]
            m.fr_q[k] = m.b_front.d[2 * k + 1]
        iv_free(&m.b_front)
        if m.rc != NULL:
            _rc_keep(t, m)
        m.lex_done = 1
        t.lz.memo_bytes += 4 * ((n if m.u_row == NULL else t.n_words) + 2 * m.n_front) + 64
    return _memo_classes(t, f, m)


cdef inline void _tab_free(SeqTab* S) noexcept nogil:
    iv_free(&S.parent); iv_free(&S.term); free(S.keys); free(S.vals)
    memset(S, 0, sizeof(SeqTab))


cdef int _canonical_lanes(CFamily* f, const int32_t* snap, IVec* dst) noexcept nogil:
    """``snap`` with its lanes sorted and merged, frontiers sorted and unique (the form a full
    step builds), appended to ``dst``: its number of lanes, -1 on OOM."""
    cdef int32_t n = snap[0], i, nc, nn, k
    cdef const int32_t* p = snap + 1
    f.s_out.n = 0
    f.s_idx.n = 0
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        for k in range(nn):
            if _emit(f, p[0], p + 2, nc, p[3 + nc + k]):
                return -1
        p = p + 3 + nc + nn
    return _build_lanes(f, dst)


cdef int _pend_subtree(IVec* pend, Py_ssize_t* last, int32_t node, const int32_t* snap,
                       Py_ssize_t n) noexcept nogil:
    """Append the record (``node``, ``n``, the snapshot ``snap[:n]``) to ``pend`` — or (``node``,
    -1 - the offset of the last full record) when that one holds the same snapshot: siblings left
    in one round share their parent's, stored once (``last``: that offset, -1 none). -1 on OOM."""
    cdef Py_ssize_t k = last[0]
    if k >= 0 and pend.d[k + 1] == n and memcmp(pend.d + k + 2, snap, n * sizeof(int32_t)) == 0:
        if iv_reserve(pend, pend.n + 2):
            return -1
        pend.d[pend.n] = node
        pend.d[pend.n + 1] = <int32_t>(-1 - k)
        pend.n += 2
        return 0
    if iv_reserve(pend, pend.n + 2 + n):
        return -1
    last[0] = pend.n
    pend.d[pend.n] = node
    pend.d[pend.n + 1] = <int32_t>n
    memcpy(pend.d + pend.n + 2, snap, n * sizeof(int32_t))
    pend.n += 2 + n
    return 0


cdef int _memo_classes(const CTables* t, CFamily* f, LexMemo* m) noexcept nogil:
    """Walk every frontier subtree symbolically (lanes carry seqs, see :func:`_step_byte`) and
    group its tokens by the snapshot they end in. R_OK, R_MISSING, R_NOMEM or R_TOOBIG.

    Resumable (the classes being built live in ``m.b_cls`` between rounds): a node whose step met
    a lexer entry not explored yet is left, with the snapshot before its byte, and its subtree is
    walked in the next round; everything else found is kept. New lexer states are met one trie
    level deeper per round (dozens of rounds for a new lexeme after a frontier): walking each
    frontier again whole in every round cost ~20-30 µs of native work per round, and a lane with
    a pending condition (every child of the trie root a frontier) ~50-130 µs."""
    cdef IVec* W = &f.w_pool
    cdef IVec* L = &f.w_lvl
    cdef ClassBuild* cb = <ClassBuild*>m.b_cls
    cdef IVec todo, data, offs, pairs
    cdef int32_t* remap = NULL
    cdef Py_ssize_t i, j, jj, hi, k, e, ln, cls, n_cls, n_pairs, n_dense, r_i, miss0, nw, sp, last = -1
    cdef int32_t i0, qp, d, d0, tok, oid, snap[6]
    cdef int32_t* cnt = NULL
    cdef int r, res = R_OK
    cdef uint64_t h, h2
    if cb == NULL:
        cb = <ClassBuild*>calloc(1, sizeof(ClassBuild))
        if cb == NULL:
            return R_NOMEM
        m.b_cls = cb
        cb.S.follow = t.follow_lex
        cb.S.root_allow = m.rbits + t.fut_words if m.cond < 0 and t.act_lex != NULL else NULL
        if iv_push(&cb.S.parent, -1) or iv_push(&cb.S.term, -1) or iv_push(&cb.offs, 0):
            res = R_NOMEM
        for j in range(m.n_front if res == R_OK else 0):
            # one lane: the frontier's lexer state (and the memo's pending condition), seq 0
            qp = m.fr_q[j]
            if m.cond < 0:
                snap[0] = 1; snap[1] = qp; snap[2] = 0; snap[3] = 1; snap[4] = 0
                nw = 5
            else:
                snap[0] = 1; snap[1] = qp; snap[2] = 1; snap[3] = m.cond; snap[4] = 1; snap[5] = 0
                nw = 6
            if _pend_subtree(&cb.pend, &last, m.fr_node[j], snap, nw):
                res = R_NOMEM
                break
    if res == R_OK and iv_reserve(L, t.tr_max_depth + 2):
        res = R_NOMEM
    todo = cb.pend
    memset(&cb.pend, 0, sizeof(IVec))
    last = -1
    jj = 0
    while jj < todo.n and res == R_OK:
        i0 = todo.d[jj]
        nw = todo.d[jj + 1]
        sp = jj + 2  # the snapshot: this record's, or the full record's it shares
        jj += 2
        if nw < 0:
            sp = -1 - nw + 2
            nw = todo.d[-1 - nw + 1]
        else:
            jj += nw
        d0 = t.tr_depth[i0]
        if iv_reserve(W, nw):
            res = R_NOMEM
            break
        memcpy(W.d, todo.d + sp, nw * sizeof(int32_t))
        W.n = nw
        L.d[d0 - 1] = 0
        L.d[d0] = <int32_t>W.n
        i = i0
        hi = t.tr_end[i0]
        while i < hi:
            d = t.tr_depth[i]
            if m.part == P_LONG and t.tr_maxd[i] <= t.tr_split:
                i = t.tr_end[i]  # no long token below
                continue
            W.n = L.d[d]
            miss0 = f.s_miss.n
            r = _walk_step(t, f, L.d[d - 1], t.tr_byte[i], &cb.S)
            if r < 0:
                res = R_TOOBIG if r == TOOBIG else R_NOMEM
                break
            if f.s_miss.n > miss0:
                # it read entries nobody explored yet: this subtree again next round, from the
                # snapshot before the byte (the rest of the frontier is not walked again)
                if _pend_subtree(&cb.pend, &last, <int32_t>i, W.d + L.d[d - 1], L.d[d] - L.d[d - 1]):
                    res = R_NOMEM
                    break
                W.n = L.d[d]
                i = t.tr_end[i]
                continue
            if r == 0:
                i = t.tr_end[i]
                continue
            tok = t.tr_internal[i]
            if tok >= 0 and (m.part != P_LONG or d > t.tr_split):
                # the class of this snapshot (hash table over the snapshots seen); fast steps
                # leave lanes as they were (not merged): canonical form first
                f.s_next.n = 0
                if _canonical_lanes(f, W.d + L.d[d], &f.s_next) < 0:
                    res = R_NOMEM
                    break
                ln = f.s_next.n
                h = 0x9e3779b97f4a7c15
                for k in range(ln):
                    h = _mix(h ^ <uint64_t>(<uint32_t>f.s_next.d[k]))
                if (cb.n_cls + 1) * 2 > cb.n_slots:
                    free(cb.slots)
                    cb.n_slots = cb.n_slots * 2 if cb.n_slots else 256
                    cb.slots = <int32_t*>malloc(cb.n_slots * sizeof(int32_t))
                    if cb.slots == NULL:
                        res = R_NOMEM
                        break
                    for k in range(cb.n_slots):
                        cb.slots[k] = -1
                    for cls in range(cb.n_cls):  # re-insert every class
                        h2 = 0x9e3779b97f4a7c15
                        for k in range(cb.offs.d[cls], cb.offs.d[cls + 1]):
                            h2 = _mix(h2 ^ <uint64_t>(<uint32_t>cb.data.d[k]))
                        k = <Py_ssize_t>(h2 & <uint64_t>(cb.n_slots - 1))
                        while cb.slots[k] >= 0:
                            k = (k + 1) & (cb.n_slots - 1)
                        cb.slots[k] = <int32_t>cls
                k = <Py_ssize_t>(h & <uint64_t>(cb.n_slots - 1))
                cls = -1
                while cb.slots[k] >= 0:
                    e = cb.slots[k]
                    if (cb.offs.d[e + 1] - cb.offs.d[e] == ln
                            and memcmp(cb.data.d + cb.offs.d[e], f.s_next.d, ln * sizeof(int32_t)) == 0):
                        cls = e
                        break
                    k = (k + 1) & (cb.n_slots - 1)
                if cls < 0:
                    cls = cb.n_cls
                    if iv_reserve(&cb.data, cb.data.n + ln):
                        res = R_NOMEM
                        break
                    memcpy(cb.data.d + cb.data.n, f.s_next.d, ln * sizeof(int32_t))
                    cb.data.n += ln
                    if iv_push(&cb.offs, <int32_t>cb.data.n):
                        res = R_NOMEM
                        break
                    cb.slots[k] = <int32_t>cls
                    cb.n_cls += 1
                for k in range(t.i2o_ptr[tok], t.i2o_ptr[tok + 1]):
                    if iv_push(&cb.pairs, <int32_t>cls) or iv_push(&cb.pairs, t.i2o_ids[k]):
                        res = R_NOMEM
                        break
                if res != R_OK:
                    break
            L.d[d + 1] = <int32_t>W.n
            i += 1
    iv_free(&todo)
    if res != R_OK:
        _cls_free(cb)
        m.b_cls = NULL
        return res
    if cb.pend.n:
        return R_MISSING
    # the classes some token ended in, renumbered in order
    n_pairs = cb.pairs.n // 2
    remap = <int32_t*>malloc((cb.n_cls + 1) * sizeof(int32_t))
    memset(&data, 0, sizeof(IVec)); memset(&offs, 0, sizeof(IVec))
    if remap == NULL or iv_push(&offs, 0):
        free(remap); iv_free(&offs)
        _cls_free(cb)
        m.b_cls = NULL
        return R_NOMEM
    for cls in range(cb.n_cls):
        remap[cls] = -1
    for k in range(n_pairs):
        remap[cb.pairs.d[2 * k]] = 0
    n_cls = 0
    for cls in range(cb.n_cls):
        if remap[cls] < 0:
            continue
        remap[cls] = <int32_t>n_cls
        n_cls += 1
        ln = cb.offs.d[cls + 1] - cb.offs.d[cls]
        if iv_reserve(&data, data.n + ln + 1) or iv_push(&offs, <int32_t>(data.n + ln)):
            res = R_NOMEM
            break
        memcpy(data.d + data.n, cb.data.d + cb.offs.d[cls], ln * sizeof(int32_t))
        data.n += ln
    if res != R_OK:
        free(remap); iv_free(&data); iv_free(&offs)
        _cls_free(cb)
        m.b_cls = NULL
        return res
    for k in range(n_pairs):
        cb.pairs.d[2 * k] = remap[cb.pairs.d[2 * k]]
    free(remap)
    pairs = cb.pairs
    memset(&cb.pairs, 0, sizeof(IVec))
    # the classes' token ids by counting sort, dense rows for the big ones
    m.n_cls = <int32_t>n_cls
    m.c_off = offs.d
    m.c_data = data.d
    memset(&offs, 0, sizeof(IVec)); memset(&data, 0, sizeof(IVec))
    m.c_tptr = <int32_t*>calloc(n_cls + 2, sizeof(int32_t))
    m.c_ids = <int32_t*>malloc((n_pairs + 1) * sizeof(int32_t))
    m.c_row = <int32_t*>malloc((n_cls + 1) * sizeof(int32_t))
    cnt = <int32_t*>calloc(n_cls + 1, sizeof(int32_t))
    m.n_seq = <int32_t>cb.S.parent.n
    m.s_parent = cb.S.parent.d
    m.s_term = cb.S.term.d
    memset(&cb.S.parent, 0, sizeof(IVec)); memset(&cb.S.term, 0, sizeof(IVec))
    _cls_free(cb)
    m.b_cls = NULL
    if m.c_tptr == NULL or m.c_ids == NULL or m.c_row == NULL or cnt == NULL:
        free(cnt); iv_free(&pairs)
        return R_NOMEM
    for k in range(n_pairs):
        m.c_tptr[pairs.d[2 * k] + 1] += 1
    n_dense = 0
    for cls in range(n_cls):
        m.c_row[cls] = -1
        if m.c_tptr[cls + 1] >= MEMO_DENSE_MIN:
            m.c_row[cls] = <int32_t>n_dense
            n_dense += 1
        m.c_tptr[cls + 1] += m.c_tptr[cls]
    for k in range(n_pairs):
        cls = pairs.d[2 * k]
        m.c_ids[m.c_tptr[cls] + cnt[cls]] = pairs.d[2 * k + 1]
        cnt[cls] += 1
    free(cnt)
    iv_free(&pairs)
    if n_dense:
        m.c_rows = <uint32_t*>calloc(n_dense * t.n_words, sizeof(uint32_t))
        if m.c_rows == NULL:
            return R_NOMEM
        for cls in range(n_cls):
            r_i = m.c_row[cls]
            if r_i >= 0:
                for k in range(m.c_tptr[cls], m.c_tptr[cls + 1]):
                    oid = m.c_ids[k]
                    m.c_rows[r_i * t.n_words + (oid >> 5)] |= (<uint32_t>1) << (oid & 31)
    t.lz.memo_bytes += 4 * (m.c_off[n_cls] + 3 * n_cls + n_pairs + 2 * m.n_seq) + 4 * n_dense * t.n_words
    return R_OK


cdef Py_ssize_t _seq_res(const CTables* t, CFamily* f, LexMemo* m, int32_t s) noexcept nogil:
    """The stacks after seq ``s`` (fed to this mask's stacks, memoized per mask): the offset of
    ``[n, nodes…]`` in ``m_cpool``, -1 when a terminal of the seq cannot be shifted, -2 on OOM."""
    cdef int32_t* R = f.m_cache.d
    cdef IVec* CP = &f.m_cpool
    cdef IVec* ST = &f.m_front
    cdef int32_t x = s
    cdef Py_ssize_t base, off
    ST.n = 0
    while R[x] == -2:
        if iv_push(ST, x):
            return -2
        x = m.s_parent[x]
    base = R[x]
    while ST.n:
        ST.n -= 1
        x = ST.d[ST.n]
        if base == -1:
            R[x] = -1
            continue
        f.s_front.n = 0
        if _feed(t, f, CP.d + base + 1, CP.d[base], m.s_term[x], &f.s_front):
            return -2
        if f.s_front.n == 0:
            R[x] = -1
            base = -1
            continue
        off = CP.n
        if iv_reserve(CP, off + 1 + f.s_front.n):
            return -2
        CP.d[off] = <int32_t>f.s_front.n
        memcpy(CP.d + off + 1, f.s_front.d, f.s_front.n * sizeof(int32_t))
        CP.n = off + 1 + f.s_front.n
        R[x] = <int32_t>off
        base = off
    return R[s]


cdef inline void _or_tokens(const CTables* t, uint32_t* out, const int32_t* ids, Py_ssize_t lo, Py_ssize_t hi,
                            const uint32_t* row, const uint32_t* keep) noexcept nogil:
    """Allow the ids ``ids[lo:hi]``, or OR the dense ``row`` when there is one — only those in
    ``keep`` when it is given (a mask row)."""
    cdef Py_ssize_t k
    cdef int32_t oid
    if row != NULL and keep != NULL:
        for k in range(t.n_words):
            out[k] |= row[k] & keep[k]
    elif row != NULL:
        for k in range(t.n_words):
            out[k] |= row[k]
    elif keep != NULL:
        for k in range(lo, hi):
            oid = ids[k]
            out[oid >> 5] |= keep[oid >> 5] & ((<uint32_t>1) << (oid & 31))
    else:
        for k in range(lo, hi):
            oid = ids[k]
            out[oid >> 5] |= (<uint32_t>1) << (oid & 31)


cdef inline uint64_t _memo_hash(int32_t q, int32_t c, int32_t part, const uint64_t* rbits, int32_t fw) noexcept nogil:
    cdef uint64_t h = _mix((<uint64_t>(<uint32_t>q) << 32) ^ <uint64_t>(<uint32_t>(c + 1)) ^ (<uint64_t>part << 60))
    cdef int32_t w
    for w in range(fw):
        h = _mix(h ^ rbits[w])
    return (h >> 1) | 1  # positive: 0 marks an empty slot


cdef inline int _events_same(const CLazy* z, int32_t r1, int32_t r2) noexcept nogil:
    """Whether two event-list references hold the same events."""
    cdef const int32_t* e1
    cdef const int32_t* e2
    if r1 == r2:
        return 1
    e1 = z.ev_chunks[r1 >> EV_CHUNK_BITS] + (r1 & (EV_CHUNK - 1))
    e2 = z.ev_chunks[r2 >> EV_CHUNK_BITS] + (r2 & (EV_CHUNK - 1))
    return e1[0] == e2[0] and memcmp(e1, e2, (1 + 2 * e1[0]) * sizeof(int32_t)) == 0


cdef inline int _tx_differs(const CTables* t, int32_t lvl, int32_t miss_lvl) noexcept nogil:
    """What :func:`_memo_transfer` returns when states differ at trie level ``lvl``: 0 within the
    levels a short token reaches; deeper, 2 when those were compared in full, else -1 (explore
    what was missing there and compare again)."""
    if not t.tr_split or lvl < t.tr_split:
        return 0
    return 2 if miss_lvl >= t.tr_split else -1


cdef int _memo_transfer(const CTables* t, CFamily* f, const LexMemo* src, int32_t q, const uint64_t* rbits2,
                        int32_t* xq, uint64_t ck) noexcept nogil:
    """Whether the memo of a lane in lexer state ``q`` (same condition and ``rbits``) is exactly
    ``src``'s: 1 yes, 2 for the tokens of at most ``tr_split`` bytes (the first difference is
    deeper), 0 not shown, -1 entries not explored yet (recorded in ``s_miss``), -2 out of memory.

    Why. Inside a string with ``maxLength: 1024`` every token reaches a new lexer state (the
    count), so without this every mask there would walk the whole trie again, though no token
    can tell two counts far from the bound apart. Rather than computing that equivalence over
    all byte strings (DESIGN §4.9: far more lexer states than the trie reaches), this follows
    ``src``'s own walk: level by level, the pairs (state of ``src``'s walk, state of ``q``'s)
    that the same trie paths reach, compared on every byte group ``src``'s walk stepped from
    that state at that level — the same events, the same state after an event (the frontier
    classes continue from it), both dead or neither, the same survival verdict. A pair of equal
    states is equal below, and every trie node the walk of ``q`` would visit is reached by a
    compared pair, so the tokens that stay inside, the frontier nodes and their classes — the
    whole memo — are the same. (States read only by a subtree taken whole are not recorded:
    such walks are no source, see _rc_drop.) When the first difference is deeper than any short
    token reaches — the counts of a string some 20 to 128 bytes before its bound, told apart by
    Llama-3.1's long runs of spaces or dashes alone — the memo still holds for the short tokens.

    With ``xq`` (a relabelling, :func:`_relabelled`: another lane's memo, terminals ``rbits2``),
    only the walk's shape must be the same — events where ``src``'s walk had them (the frontier
    classes are evaluated again, from this lane's states), dead in both or neither, the same
    survival, each against its own terminals; equal states are no shortcut then — and
    ``xq[k]`` gets the lexer state of this walk before frontier node ``k``: the one state paired
    with ``src``'s there (two: not shown)."""
    cdef const CLazy* z = t.lz
    cdef IVec* A = &f.tx_a
    cdef IVec* B = &f.tx_b
    cdef IVec* T
    cdef int32_t lvl, s1, s2, v1, v2, b, g, k, lv1, lv2
    cdef Py_ssize_t i, j, e
    cdef const uint64_t* ent
    cdef const int32_t* r1
    cdef const int32_t* r2
    cdef const int32_t* x1
    cdef const int32_t* x2
    cdef uint64_t word
    cdef int missing = 0, w, sv1, sv2
    cdef int32_t miss_lvl = 1 << 30  # the first level where an entry was missing
    cdef Py_ssize_t fo = 0, hit  # (relabelling: the next frontier node to map, in tx_fo)
    cdef int32_t lvl0 = 0, fo0
    cdef int saved = 0
    A.n = 0
    if ck != 0 and f.tc_key == ck:
        # resumed where an entry was missing last round (the levels before it compared in full:
        # with no entry missing, their verdicts cannot change)
        if iv_reserve(A, f.tc_pairs.n):
            return -2
        memcpy(A.d, f.tc_pairs.d, f.tc_pairs.n * sizeof(int32_t))
        A.n = f.tc_pairs.n
        lvl0 = f.tc_lvl
        fo = f.tc_fo
        if xq != NULL:
            memcpy(xq, f.tc_xq.d, src.n_front * sizeof(int32_t))
    elif iv_push(A, src.q) or iv_push(A, q):
        return -2
    for lvl in range(lvl0, src.tx_levels):
        if A.n == 0:
            break
        B.n = 0
        fo0 = fo
        while xq != NULL and fo < f.tx_fo.n and t.tr_depth[src.fr_node[f.tx_fo.d[fo]]] - 1 == lvl:
            k = f.tx_fo.d[fo]  # a frontier node whose parent is at this level: its state here
            hit = -1
            for i in range(0, A.n, 2):
                if A.d[i] == src.fr_q[k]:
                    if hit >= 0:
                        return 0  # two states of this walk where src's had one
                    hit = i
            if hit < 0:
                return -1 if missing else 0  # (a pair not stepped for an entry not explored yet)
            xq[k] = A.d[hit + 1]
            fo += 1
        for i in range(0, A.n, 2):
            s1 = A.d[i]
            s2 = A.d[i + 1]
            ent = NULL
            for e in range(src.tx_off[lvl], src.tx_off[lvl + 1]):
                if <int32_t>src.tx[5 * e] == s1:
                    ent = src.tx + 5 * e
                    break
            if ent == NULL:
                continue  # the walk stepped nothing from s1 here (a leaf)
            r1 = <const int32_t*>_lz_get(z.trans, s1)
            x1 = <const int32_t*>_lz_get(z.evref, s1)
            r2 = <const int32_t*>_lz_get(z.trans, s2)
            x2 = <const int32_t*>_lz_get(z.evref, s2)
            if r1 == NULL or x1 == NULL:
                return 0
            lv1 = UNKNOWN
            lv2 = UNKNOWN
            f.tx_stamp += 1
            if f.tx_stamp == 0x7fffffff:
                memset(f.tx_gseen, 0, sizeof(f.tx_gseen))
                f.tx_stamp = 1
            for w in range(4):
                word = ent[1 + w]
                while word:
                    b = w * 64 + glr_ctz64(word)
                    word &= word - 1
                    g = z.byte_group[b] if z.has_groups else b  # a group's bytes step alike
                    if f.tx_gseen[g] == f.tx_stamp:
                        continue
                    f.tx_gseen[g] = f.tx_stamp
                    v1 = glr_load_i32(&r1[b])
                    if v1 == UNKNOWN:
                        return 0
                    v2 = UNKNOWN if r2 == NULL else glr_load_i32(&r2[b])
                    if v2 == UNKNOWN:
                        _miss(f, M_STEP, s2, b)
                        missing = 1
                        miss_lvl = min(miss_lvl, lvl)
                        continue
                    if x2 == NULL:
                        x2 = <const int32_t*>_lz_get(z.evref, s2)
                        if x2 == NULL:
                            return 0
                    if x1[b] >= 0 or x2[b] >= 0:  # an event: a frontier node in both, or no transfer
                        if x1[b] < 0 or x2[b] < 0 or (xq == NULL and (v1 != v2 or not _events_same(z, x1[b], x2[b]))):
                            return _tx_differs(t, lvl, miss_lvl)
                        continue
                    if v1 == v2 and (xq == NULL or v1 == DEAD):
                        continue  # dead in both, or one state from here on
                    if v1 == DEAD or v2 == DEAD:
                        return _tx_differs(t, lvl, miss_lvl)
                    if v1 == lv1 and v2 == lv2:
                        continue  # (most bytes step to the pair the last one did: verdicts, pair known)
                    lv1 = v1
                    lv2 = v2
                    sv1 = _survives_r(t, f, v1, src.rbits)
                    sv2 = _survives_r(t, f, v2, rbits2)
                    if sv1 < 0 or sv2 < 0:
                        missing = 1
                        miss_lvl = min(miss_lvl, lvl)
                        continue
                    if sv1 != sv2:
                        return _tx_differs(t, lvl, miss_lvl)
                    if sv1 == 0:
                        continue
                    for j in range(0, B.n, 2):
                        if B.d[j] == v1 and B.d[j + 1] == v2:
                            break
                    else:
                        if B.n >= 2 * TX_MAX_PAIRS:
                            return _tx_differs(t, lvl + 1, miss_lvl)
                        if iv_push(B, v1) or iv_push(B, v2):
                            return -2
        if missing and not saved and ck != 0:  # the checkpoint: this level's start
            saved = 1
            if (iv_reserve(&f.tc_pairs, A.n) or (xq != NULL and iv_reserve(&f.tc_xq, src.n_front + 1))):
                f.tc_key = 0
            else:
                memcpy(f.tc_pairs.d, A.d, A.n * sizeof(int32_t))
                f.tc_pairs.n = A.n
                if xq != NULL:
                    memcpy(f.tc_xq.d, xq, src.n_front * sizeof(int32_t))
                f.tc_key = ck
                f.tc_lvl = lvl
                f.tc_fo = <int32_t>fo0
        T = A
        A = B
        B = T
    if missing:
        return -1
    return 1 if xq == NULL or fo == f.tx_fo.n else 0


cdef int _relabelled(const CTables* t, CFamily* f, LexMemo* src, int32_t q, const uint64_t* rbits,
                     uint64_t h, LexMemo** out) noexcept nogil:
    """A memo for the lane (``q``, no condition, ``rbits``) from ``src``'s, a lane of other
    terminals: 1 with it in ``out`` (its lexeme part done, its frontier classes still to
    evaluate), 0 not shown, -1 entries not explored yet, -2 out of memory.

    Why. A schema's bounded strings are as many terminals as it has bounds (Snowplow's
    ``maxLength`` 20, 24, 32, 1024…), and the first mask of each walked all of the trie (~300k
    nodes, 3–5 ms on Llama-3.1) — though, far from both bounds, the tokens that stay inside one
    string stay inside the other, and the frontier (a closing quote) is at the same trie nodes.
    When :func:`_memo_transfer` shows the walks have that shape, the new memo shares ``src``'s
    in-lexeme tokens and frontier nodes; its frontier classes — what the parser does with the
    terminal that ends — are evaluated from its own lexer states there (``xq``). The first
    difference deeper than ``tr_split`` bytes makes it a memo for the short tokens
    (``short_only``, frontier nodes that deep left out), as for a transfer."""
    cdef CLazy* z = t.lz
    cdef int32_t fw = 2 * t.fut_words, n = src.n_front, levels = t.tr_max_depth + 2, k, kept = 0, lvl
    cdef IVec* FO = &f.tx_fo
    cdef int32_t* cnt
    cdef int32_t* xq
    cdef LexMemo* m
    cdef int r
    if iv_reserve(FO, n + levels + 1):
        return -2
    cnt = FO.d + n  # the frontier nodes by their parent's level: a counting sort
    memset(cnt, 0, (levels + 1) * sizeof(int32_t))
    for k in range(n):
        cnt[t.tr_depth[src.fr_node[k]]] += 1
    for lvl in range(levels):
        cnt[lvl + 1] += cnt[lvl]
    for k in range(n):
        lvl = t.tr_depth[src.fr_node[k]] - 1
        FO.d[cnt[lvl]] = k
        cnt[lvl] += 1
    FO.n = n
    xq = <int32_t*>malloc((n + 1) * sizeof(int32_t))
    if xq == NULL:
        return -2
    for k in range(n):
        xq[k] = UNKNOWN
    r = _memo_transfer(t, f, src, q, rbits, xq, _tx_key(h, src, 1))
    if r != -1 and f.tc_key == _tx_key(h, src, 1):
        f.tc_key = 0  # (a verdict: nothing to resume)
    if r <= 0:
        free(xq)
        return r
    for k in range(n):
        if r == 1 or t.tr_depth[src.fr_node[k]] <= t.tr_split:
            if xq[k] == UNKNOWN:
                free(xq)
                return 0
            kept += 1
    m = <LexMemo*>calloc(1, sizeof(LexMemo))
    if m == NULL:
        free(xq)
        return -2
    m.rbits = <uint64_t*>malloc(fw * sizeof(uint64_t))
    m.fr_node = <int32_t*>malloc((kept + 1) * sizeof(int32_t))
    m.fr_q = <int32_t*>malloc((kept + 1) * sizeof(int32_t))
    m.lex_of = src
    m.u_ids = src.u_ids
    m.u_row = src.u_row
    if m.rbits == NULL or m.fr_node == NULL or m.fr_q == NULL:
        _memo_free(m)
        free(xq)
        return -2
    memcpy(m.rbits, rbits, fw * sizeof(uint64_t))
    m.q = q
    m.cond = -1
    m.part = P_ALL
    m.key = h
    m.n_u = src.n_u
    m.short_only = r == 2
    kept = 0
    for k in range(n):
        if r == 1 or t.tr_depth[src.fr_node[k]] <= t.tr_split:
            m.fr_node[kept] = src.fr_node[k]
            m.fr_q[kept] = xq[k]
            kept += 1
    free(xq)
    m.n_front = kept
    m.started = 1
    m.lex_done = 1
    z.memo_bytes += sizeof(LexMemo) + fw * sizeof(uint64_t) + 8 * kept
    out[0] = m
    return 1


cdef inline uint64_t _tx_key(uint64_t h, const void* src, int kind) noexcept nogil:
    """The key of a (lane ``h``, source, transfer or relabelling) pair in ``tx_fail`` (never 0)."""
    cdef uint64_t k = h ^ (<uint64_t><size_t>src * 0x9E3779B97F4A7C15ULL) ^ <uint64_t>kind
    k ^= k >> 31
    return k | 1


cdef LexMemo* _transferred(const CTables* t, CFamily* f, int32_t q, const uint64_t* rbits,
                           uint64_t h, int* code) noexcept nogil:
    """A memo for the lane (``q``, no condition, ``rbits``) shared with one of the sources
    (:func:`_memo_transfer`) — complete — or relabelled from one of other terminals
    (:func:`_relabelled`) — its frontier classes still to evaluate —, or NULL with ``code``
    R_OK (none applies: build it), R_MISSING or R_NOMEM. Called with the builder lock."""
    cdef CLazy* z = t.lz
    cdef int32_t fw = 2 * t.fut_words, k
    cdef LexMemo* src
    cdef LexMemo* m
    cdef int r, tried = 0
    cdef uint64_t fk
    code[0] = R_OK
    for k in range(TX_SOURCES):
        src = z.tx_src[(z.tx_next - 1 - k) & (TX_SOURCES - 1)]
        if src == NULL or memcmp(src.rbits, rbits, fw * sizeof(uint64_t)) != 0:
            continue
        if tried == TX_TRIES:  # the latest sources of these terminals (a count's is the latest)
            break
        tried += 1
        fk = _tx_key(h, src, 0)
        if z.tx_fail[fk & (TX_FAIL - 1)] == fk:
            continue
        r = _memo_transfer(t, f, src, q, src.rbits, NULL, fk)
        if r != -1 and f.tc_key == fk:
            f.tc_key = 0  # (a verdict: nothing to resume)
        if r == 0:
            z.n_tx_tries += 1
            z.tx_fail[fk & (TX_FAIL - 1)] = fk
            continue
        if r < 0:  # (entries to explore first, or out of memory)
            code[0] = R_MISSING if r == -1 else R_NOMEM
            return NULL
        m = <LexMemo*>malloc(sizeof(LexMemo))
        if m == NULL:
            code[0] = R_NOMEM
            return NULL
        memcpy(m, src, sizeof(LexMemo))
        m.rbits = <uint64_t*>malloc(fw * sizeof(uint64_t))
        if m.rbits == NULL:
            free(m)
            code[0] = R_NOMEM
            return NULL
        memcpy(m.rbits, rbits, fw * sizeof(uint64_t))
        m.q = q
        m.key = h
        m.alias_of = src
        m.short_only = r == 2
        z.n_tx_short += r == 2
        z.memo_bytes += sizeof(LexMemo) + fw * sizeof(uint64_t)
        z.n_tx_hits += 1
        return m
    # sources of other terminals: a relabelling, from the deepest walks first (a walk that ended
    # within a few bytes — a string near its bound — shows nothing a short token could not)
    cdef uint64_t tried_bits = 0
    cdef int32_t best_levels
    cdef int kb
    for tried in range(TX_RL_TRIES):
        kb = -1
        best_levels = 0
        for k in range(TX_SOURCES):
            src = z.tx_src[k]
            if (src != NULL and not (tried_bits >> k) & 1 and src.tx_levels > best_levels
                    and memcmp(src.rbits, rbits, fw * sizeof(uint64_t)) != 0):
                kb = k
                best_levels = src.tx_levels
        if kb < 0:
            break
        tried_bits |= (<uint64_t>1) << kb
        src = z.tx_src[kb]
        fk = _tx_key(h, src, 1)
        if z.tx_fail[fk & (TX_FAIL - 1)] == fk:
            continue
        m = NULL
        r = _relabelled(t, f, src, q, rbits, h, &m)
        if r == 1:
            z.n_rl_hits += 1
            z.n_rl_short += m.short_only
            return m
        if r == 0:
            z.n_rl_tries += 1
            z.tx_fail[fk & (TX_FAIL - 1)] = fk
        if r < 0:
            code[0] = R_MISSING if r == -1 else R_NOMEM
            return NULL
    return NULL


cdef LexMemo* _get_memo(const CTables* t, CFamily* f, int32_t q, int32_t c, int32_t part,
                        const uint64_t* rbits, int* code) noexcept nogil:  # rbits: 2 * fut_words words
    """The memo of the lane (lexer state ``q``, pending condition ``c`` or -1, terminals
    ``rbits``), built on first use; or NULL with ``code``: R_FALLBACK (not available now: budget
    spent, table full, another thread building), R_MISSING or R_NOMEM."""
    cdef CLazy* z = t.lz
    cdef int32_t fw = 2 * t.fut_words
    cdef uint64_t h = _memo_hash(q, c, part, rbits, fw)
    cdef Py_ssize_t j = <Py_ssize_t>(h & (MEMO_SLOTS - 1)), probe, i, n
    cdef int64_t k
    cdef LexMemo* m
    cdef int r
    for probe in range(MEMO_SLOTS):
        k = <int64_t>glr_load_u64(<const uint64_t*>&z.memo_key[j])
        if k == 0:
            break
        if k == <int64_t>h:
            m = <LexMemo*>glr_load_ptr(<void* const*>&z.memo_val[j])
            if m.q == q and m.cond == c and m.part == part and memcmp(m.rbits, rbits, fw * sizeof(uint64_t)) == 0:
                if glr_load_i32(&m.ready):
                    return m
                break
        j = (j + 1) & (MEMO_SLOTS - 1)
    code[0] = R_FALLBACK
    if z.memo_bytes >= z.memo_budget or not glr_trylock(&z.memo_flag):
        return NULL
    m = NULL
    j = <Py_ssize_t>(h & (MEMO_SLOTS - 1))
    for probe in range(MEMO_SLOTS):
        if z.memo_key[j] == 0:
            break
        if z.memo_key[j] == <int64_t>h:
            m = z.memo_val[j]
            if m.q == q and m.cond == c and m.part == part and memcmp(m.rbits, rbits, fw * sizeof(uint64_t)) == 0:
                break
            m = NULL
        j = (j + 1) & (MEMO_SLOTS - 1)
    else:
        glr_unlock(&z.memo_flag)
        return NULL  # the table is full: these lanes walk the trie
    if m == NULL and c < 0 and part == P_ALL:
        m = _transferred(t, f, q, rbits, h, code)
        if m != NULL:
            glr_store_ptr(<void**>&z.memo_val[j], m)
            glr_store_u64(<uint64_t*>&z.memo_key[j], h)
            if m.lex_of == NULL:  # a transfer: complete
                glr_unlock(&z.memo_flag)
                return m
        elif code[0] != R_OK:
            glr_unlock(&z.memo_flag)
            return NULL
        code[0] = R_FALLBACK
    if m == NULL:
        m = <LexMemo*>calloc(1, sizeof(LexMemo))
        if m == NULL:
            glr_unlock(&z.memo_flag)
            code[0] = R_NOMEM
            return NULL
        m.q = q
        m.cond = c
        m.part = part
        m.key = h
        m.rbits = <uint64_t*>malloc(fw * sizeof(uint64_t))
        if m.rbits != NULL:
            memcpy(m.rbits, rbits, fw * sizeof(uint64_t))
        if c >= 0 and m.rbits != NULL:
            # a pending condition settles on the first bytes: walk every child of the root
            n = 0
            i = 1
            while i < t.tr_n:
                n += 1
                i = t.tr_end[i]
            m.fr_node = <int32_t*>malloc((n + 1) * sizeof(int32_t))
            m.fr_q = <int32_t*>malloc((n + 1) * sizeof(int32_t))
            if m.fr_node != NULL and m.fr_q != NULL:
                m.n_front = <int32_t>n
                n = 0
                i = 1
                while i < t.tr_n:
                    m.fr_node[n] = <int32_t>i
                    m.fr_q[n] = q
                    n += 1
                    i = t.tr_end[i]
            m.lex_done = 1
        if m.rbits == NULL or (c >= 0 and (m.fr_node == NULL or m.fr_q == NULL)):
            _memo_free(m)
            glr_unlock(&z.memo_flag)
            code[0] = R_NOMEM
            return NULL
        glr_store_ptr(<void**>&z.memo_val[j], m)
        glr_store_u64(<uint64_t*>&z.memo_key[j], h)
    r = _memo_build(t, f, m) if c < 0 else _memo_classes(t, f, m)
    if r == R_MISSING:
        glr_unlock(&z.memo_flag)
        code[0] = R_MISSING
        return NULL
    if r != R_OK:  # out of memory or too many lanes: masks of this lane walk the trie
        m.unusable = 1
    elif m.tx != NULL:
        z.tx_src[z.tx_next & (TX_SOURCES - 1)] = m
        z.tx_next += 1
    glr_store_i32(&m.ready, 1)
    glr_unlock(&z.memo_flag)
    return m


cdef int _relevant(const CTables* t, CFamily* f, int32_t q, const int32_t* front, int32_t nn,
                   uint64_t* rbits) noexcept nogil:
    """The terminals alive in lexer state ``q`` that are ignored or that the stacks ``front`` can
    shift (after reductions), into ``rbits``: R_OK, R_MISSING (``q``'s live terminals are not
    explored yet) or R_NOMEM."""
    cdef const uint64_t* alive = _lx_futures(t, f, q)
    cdef int32_t w, term, lr
    cdef uint64_t word
    cdef int r
    if alive == NULL:
        return R_MISSING
    for w in range(t.fut_words):
        rbits[w] = 0
        word = alive[w]
        while word:
            term = w * 64 + glr_ctz64(word)
            word &= word - 1
            if t.lex_ignored[term]:
                r = 1
            else:
                lr = t.lr_of_lex[term]
                r = 0 if lr < 0 else _can_shift(t, f, front, nn, lr)
                if r < 0:
                    return R_NOMEM
            if r:
                rbits[w] |= (<uint64_t>1) << (term & 63)
    return R_OK


cdef void _root_allow(const CTables* t, CFamily* f, uint64_t* rbits, const int32_t* front,
                      int32_t nn) noexcept nogil:
    """Fill ``rbits[fw:2fw]``, the terminals a lexeme may hold that starts at the memo's root
    (after an ignored terminal of the root lexeme): ``rbits`` itself when the root lexeme holds
    no ignored terminal (then every new lexeme comes after a terminal fed, see ``follow_lex``),
    else those with an action in the stacks' top states. Part of the memo's key."""
    cdef int32_t fw = t.fut_words, w, k, term
    cdef uint64_t word
    cdef uint64_t* allow = rbits + fw
    cdef const uint64_t* act
    cdef int ign = 0
    for w in range(fw):
        word = rbits[w]
        while word and not ign:
            term = w * 64 + glr_ctz64(word)
            word &= word - 1
            ign = t.lex_ignored[term]
    if not ign or t.act_lex == NULL:
        memcpy(allow, rbits, fw * sizeof(uint64_t))
        return
    memset(allow, 0, fw * sizeof(uint64_t))
    for k in range(nn):
        act = t.act_lex + <Py_ssize_t>f.node_state.d[front[k]] * fw
        for w in range(fw):
            allow[w] |= act[w]


cdef int _lane_memo_fill(const CTables* t, CFamily* f, LexMemo* m, const int32_t* front, int32_t nn,
                         uint32_t* out) noexcept nogil:
    """OR into ``out`` the tokens one lane over the stacks ``front`` allows, from its memo: the
    tokens that stay inside the lexeme (they survive: the memo is for these stacks' terminals),
    and the classes whose lanes (after feeding their seqs to the stacks) live. Of a memo that
    holds for the short tokens only, only those."""
    cdef int32_t cls, nl, li, nc, ns, k
    cdef const int32_t* p
    cdef int valid
    cdef Py_ssize_t off
    cdef IVec* CP = &f.m_cpool
    cdef const uint32_t* keep = t.tr_short if m.short_only else NULL
    if m.n_u:
        _or_tokens(t, out, m.u_ids, 0, m.n_u, m.u_row, keep)
    if m.n_cls == 0:
        return R_OK
    if iv_reserve(&f.m_cache, m.n_seq) or iv_reserve(CP, 1 + nn):
        return R_NOMEM
    for k in range(m.n_seq):
        f.m_cache.d[k] = -2
    CP.d[0] = nn
    memcpy(CP.d + 1, front, nn * sizeof(int32_t))
    CP.n = 1 + nn
    f.m_cache.d[0] = 0
    for cls in range(m.n_cls):
        p = m.c_data + m.c_off[cls]
        nl = p[0]
        p += 1
        valid = 0
        for li in range(nl):
            nc = p[1]
            ns = p[2 + nc]
            for k in range(ns):
                off = _seq_res(t, f, m, p[3 + nc + k])
                if off == -2:
                    return R_NOMEM
                if off < 0:
                    continue
                if p[0] == BOUNDARY:
                    valid = 1
                else:
                    valid = _lane_survives(t, f, p[0], CP.d + off + 1, CP.d[off])
                    if valid < 0:
                        return R_NOMEM
                if valid:
                    break
            if valid:
                break
            p += 3 + nc + ns
        if valid:
            _or_tokens(t, out, m.c_ids, m.c_tptr[cls], m.c_tptr[cls + 1],
                       m.c_rows + m.c_row[cls] * t.n_words if m.c_row[cls] >= 0 else NULL, keep)
    return R_OK


DEF MEMO_MAX_LANES = 16


cdef int _memo_fill(const CTables* t, CFamily* f, const int32_t* snap, uint32_t* out) noexcept nogil:
    """The mask of a snapshot from its lanes' memos, lane by lane (lanes step independently, so
    a token is allowed iff one lane allows it) — no trie walk. R_FALLBACK when a lane has no memo
    now (more than one pending condition, budget spent, another thread building it, too big)."""
    cdef int32_t n = snap[0], i, nc, nn, q
    cdef const int32_t* p = snap + 1
    cdef LexMemo* ms[2 * MEMO_MAX_LANES]  # per lane: its memo (or its short tokens'), its long tokens'
    cdef int code = R_OK, r
    cdef uint64_t* rbits = f.r_bits
    if n > MEMO_MAX_LANES:
        return R_FALLBACK
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        q = _boundary_q(t, f, p + 3 + nc, nn, NULL) if p[0] == BOUNDARY else p[0]
        if q == UNKNOWN:
            return R_MISSING
        if q < 0 or nc > 1:
            return R_FALLBACK
        if nc == 0:
            r = _relevant(t, f, q, p + 3, nn, rbits)
            if r != R_OK:
                return r
            _root_allow(t, f, rbits, p + 3, nn)
        else:
            memset(rbits, 0, 2 * t.fut_words * sizeof(uint64_t))
        ms[2 * i] = _get_memo(t, f, q, p[2] if nc else -1, P_ALL, rbits, &code)
        ms[2 * i + 1] = NULL
        if ms[2 * i] == NULL:
            return code
        if ms[2 * i].unusable:
            return R_FALLBACK
        if ms[2 * i].short_only:  # the long tokens from a memo of their own
            ms[2 * i + 1] = _get_memo(t, f, q, -1, P_LONG, rbits, &code)
            if ms[2 * i + 1] == NULL:
                return code
            if ms[2 * i + 1].unusable:
                return R_FALLBACK
        p = p + 3 + nc + nn
    p = snap + 1
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        r = _lane_memo_fill(t, f, ms[2 * i], p + 3 + nc, nn, out)
        if r == R_OK and ms[2 * i + 1] != NULL:
            r = _lane_memo_fill(t, f, ms[2 * i + 1], p + 3 + nc, nn, out)
        if r != R_OK:
            return r
        p = p + 3 + nc + nn
    return R_OK


cdef uint64_t _canon(CFamily* f, const int32_t* snap, IVec* K) noexcept nogil:
    """The configuration of ``snap`` as request-independent ints — per lane its lexer state,
    conditions and full stacks (LR states, top first) — in ``K``; returns its hash, 0 when it is
    too long to cache (or out of memory). Equal keys are equal configurations, hence equal masks
    (stacks keep the snapshot's order: an equal configuration in another order only misses)."""
    cdef int32_t n = snap[0], i, nc, nn, k, node
    cdef const int32_t* p = snap + 1
    cdef Py_ssize_t start, j
    cdef uint64_t h = 0x9e3779b97f4a7c15
    K.n = 0
    if iv_push(K, n):
        return 0
    for i in range(n):
        nc = p[1]
        nn = p[2 + nc]
        if iv_reserve(K, K.n + 3 + nc):
            return 0
        for k in range(3 + nc):
            K.d[K.n + k] = p[k]
        K.n += 3 + nc
        for k in range(nn):
            node = p[3 + nc + k]
            start = K.n
            if iv_push(K, 0):
                return 0
            while node >= 0:
                if K.n >= CM_MAX_KEY or iv_push(K, f.node_state.d[node]):
                    return 0
                node = f.node_parent.d[node]
            K.d[start] = <int32_t>(K.n - start - 1)
        p = p + 3 + nc + nn
    for j in range(K.n):
        h = _mix(h ^ <uint64_t>(<uint32_t>K.d[j]))
    return h | 1


cdef int _cm_get(const CTables* t, uint64_t h, const IVec* K, uint32_t* out) noexcept nogil:
    """Copy the shared cache's mask of configuration ``K`` into ``out``: 1 on a hit."""
    cdef CMSlot* sl = &t.lz.cm[h & (CM_SLOTS - 1)]
    cdef int hit = 0
    if not glr_trylock(&sl.flag):
        return 0
    if (sl.used and sl.hash == h and sl.key_n == K.n
            and memcmp(sl.key, K.d, K.n * sizeof(int32_t)) == 0):
        memcpy(out, sl.words, t.n_words * sizeof(uint32_t))
        hit = 1
    glr_unlock(&sl.flag)
    return hit


cdef void _cm_put(const CTables* t, uint64_t h, const IVec* K, const uint32_t* words) noexcept nogil:
    """Remember ``words`` as the mask of configuration ``K`` (replacing the slot's mask)."""
    cdef CMSlot* sl = &t.lz.cm[h & (CM_SLOTS - 1)]
    cdef int32_t* nk
    if not glr_trylock(&sl.flag):
        return
    if sl.words == NULL:
        sl.words = <uint32_t*>malloc(t.n_words * sizeof(uint32_t))
    if sl.key_cap < K.n:
        nk = <int32_t*>realloc(sl.key, K.n * sizeof(int32_t))
        if nk != NULL:
            sl.key = nk
            sl.key_cap = K.n
    if sl.words != NULL and sl.key_cap >= K.n:
        memcpy(sl.key, K.d, K.n * sizeof(int32_t))
        sl.key_n = K.n
        sl.hash = h
        memcpy(sl.words, words, t.n_words * sizeof(uint32_t))
        sl.used = 1
    else:
        sl.used = 0
    glr_unlock(&sl.flag)


cdef void _lru_put(const CTables* t, CFamily* f, const int32_t* snap, Py_ssize_t ln, const uint32_t* words,
                   int slot) noexcept nogil:
    """Remember ``words`` as this request's mask of snapshot ``snap`` in LRU slot ``slot``."""
    f.lm_used[slot] = 0
    if f.lm_words == NULL:
        f.lm_words = <uint32_t*>malloc(LM_SLOTS * t.n_words * sizeof(uint32_t))
    if f.lm_words != NULL and iv_reserve(&f.lm_snap[slot], ln) == 0:
        memcpy(f.lm_snap[slot].d, snap, ln * sizeof(int32_t))
        f.lm_snap[slot].n = ln
        memcpy(f.lm_words + slot * t.n_words, words, t.n_words * sizeof(uint32_t))
        f.lm_clock += 1
        f.lm_used[slot] = f.lm_clock


cdef int _dyn_fill(const CTables* t, CFamily* f, int32_t rec, uint32_t* out) noexcept nogil:
    """The mask of record ``rec`` by the vocabulary trie (dynamic tables; on static tables, a lane
    the Parser DWA has no root for). In order: one of the request's last masks when its snapshot
    is the same (inside a long string), the shared cache by configuration, the lexeme memos of its
    lanes, else a walk of the whole trie. The GSS nodes a step interns are undone at the end (a
    request's memory does not grow with its masks). Words without end tokens."""
    cdef IVec* W = &f.w_pool
    cdef IVec* L = &f.w_lvl
    cdef const int32_t* snap = f.pool.d + f.rec_snap.d[rec]
    cdef Py_ssize_t ln = _snap_len(snap), n0 = f.node_state.n
    cdef int64_t grows0 = f.h_grows
    cdef int r = R_FALLBACK
    cdef int slot, oldest = 0
    for slot in range(LM_SLOTS):
        if (f.lm_used[slot] and f.lm_snap[slot].n == ln
                and memcmp(f.lm_snap[slot].d, snap, ln * sizeof(int32_t)) == 0):
            f.lm_clock += 1
            f.lm_used[slot] = f.lm_clock
            memcpy(out, f.lm_words + slot * t.n_words, t.n_words * sizeof(uint32_t))
            return R_OK
        if f.lm_used[slot] < f.lm_used[oldest]:
            oldest = slot
    cdef uint64_t key_hash = _canon(f, snap, &f.m_key) if t.lazy else 0
    if key_hash and _cm_get(t, key_hash, &f.m_key, out):
        _lru_put(t, f, snap, ln, out, oldest)
        return R_OK
    memset(out, 0, t.n_words * sizeof(uint32_t))
    if f.fc_slot == NULL:
        f.fc_slot = <int32_t*>malloc(FC_SLOTS * sizeof(int32_t))
        if f.fc_slot == NULL:
            return R_NOMEM
    memset(f.fc_slot, 0xff, FC_SLOTS * sizeof(int32_t))
    f.fc_pool.n = 0
    f.fc_on = 1
    if t.lazy:
        r = _memo_fill(t, f, snap, out)
    if r == R_FALLBACK:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        if iv_reserve(L, t.tr_max_depth + 2) or iv_reserve(W, ln):
            r = R_NOMEM
        else:
            memcpy(W.d, snap, ln * sizeof(int32_t))
            W.n = ln
            L.d[0] = 0
            L.d[1] = <int32_t>ln
            r = _walk_range(t, f, 1, t.tr_n, out)
    f.fc_on = 0
    _undo_nodes(f, n0, grows0)
    if r != R_OK:
        return r
    if f.s_miss.n:
        return R_MISSING
    _lru_put(t, f, snap, ln, out, oldest)
    if key_hash:
        _cm_put(t, key_hash, &f.m_key, out)
    return R_OK


cdef int _fill(const CTables* t, CFamily* f, int32_t rec, uint32_t* out) noexcept nogil:
    """The mask of record ``rec`` into ``out`` (``n_words`` words)."""
    cdef uint64_t* acc = f.s_bits
    cdef int r, k
    cdef int32_t e
    if f.rec_flags.d[rec] & F_TERMINATED:
        memset(out, 0, t.n_words * sizeof(uint32_t))
        return R_OK
    if t.lazy:
        f.s_miss.n = 0
        r = _dyn_fill(t, f, rec, out)
    else:
        r = _class_bits(t, f, f.pool.d + f.rec_snap.d[rec], acc)
        if r == R_OK:
            _expand(t, acc, out)
        elif r == R_FALLBACK and glr_load_i32(&t.tr_n):
            # a lane the Parser DWA has no root for (bytes committed mid-token): the trie walk
            # over the same dense lexer answers it exactly
            f.s_miss.n = 0
            r = _dyn_fill(t, f, rec, out)
            glr_add_i64(t.n_walks, 1)
    if r != R_OK:
        return r
    if t.n_eos:
        r = _rec_accepting(t, f, rec)
        if r < 0:
            return R_NOMEM
        if r:
            for k in range(t.n_eos):
                e = t.eos[k]
                out[e >> 5] |= (<uint32_t>1) << (e & 31)
    return R_OK


# ------------------------------------------------------------------------------------ states
cdef Py_ssize_t _distinct_missing(int32_t* rows, Py_ssize_t n, const int32_t* group) noexcept nogil:
    """Keep the first of the ``(kind, a, b)`` rows naming each entry, in order, in place: the
    number kept (-1 out of memory). Byte steps (``M_STEP``, ``M_COND_STEP``) name an entry per
    byte group (``group``), the other kinds per ``(kind, a, b)``."""
    cdef Py_ssize_t cap = 16, i, j, out = 0
    cdef uint64_t h
    cdef int32_t kind, a, g, jk, jg
    while cap < 2 * n:
        cap <<= 1
    cdef int32_t* slot = <int32_t*>malloc(cap * sizeof(int32_t))
    if slot == NULL:
        return -1
    memset(slot, 0xFF, cap * sizeof(int32_t))
    for i in range(n):
        kind = rows[3 * i]
        a = rows[3 * i + 1]
        g = rows[3 * i + 2]
        if (kind == M_STEP or kind == M_COND_STEP) and 0 <= g < 256:
            g = group[g]
        h = ((<uint64_t><uint32_t>a * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t><uint32_t>g * 0xC2B2AE3D27D4EB4FULL)
             ^ <uint64_t>kind)
        h = (h ^ (h >> 29)) & <uint64_t>(cap - 1)
        while True:
            j = slot[h]
            if j < 0:
                slot[h] = <int32_t>out
                rows[3 * out] = kind
                rows[3 * out + 1] = a
                rows[3 * out + 2] = rows[3 * i + 2]
                out += 1
                break
            jk = rows[3 * j]
            jg = rows[3 * j + 2]
            if (jk == M_STEP or jk == M_COND_STEP) and 0 <= jg < 256:
                jg = group[jg]
            if jk == kind and rows[3 * j + 1] == a and jg == g:
                break
            h = (h + 1) & <uint64_t>(cap - 1)
    free(slot)
    return out


cdef int32_t* _take_missing(CFamily* f, Py_ssize_t* n) noexcept nogil:
    """A copy of the missing entries of the last step (taken under the family lock)."""
    cdef int32_t* buf = <int32_t*>malloc((f.s_miss.n + 1) * sizeof(int32_t))
    n[0] = f.s_miss.n
    if buf != NULL:
        memcpy(buf, f.s_miss.d, f.s_miss.n * sizeof(int32_t))
    return buf


cdef class NativeState:
    """One request's position: a history record in its family. Immutable tables, own memory."""

    cdef Family fam
    cdef int32_t head

    def fork(self) -> "NativeState":
        cdef NativeState st = NativeState.__new__(NativeState)
        st.fam = self.fam
        st.head = self.head
        return st

    @property
    def depth(self) -> int:
        return self.fam.f.rec_depth.d[self.head]

    @property
    def terminated(self) -> bool:
        return bool(self.fam.f.rec_flags.d[self.head] & F_TERMINATED)

    @property
    def tables(self) -> Tables:
        return self.fam.tables

    @property
    def dynamic(self) -> bool:
        """The state lives on dynamic tables (masks by a trie walk)."""
        return self.fam.tables.t.lazy != 0

    def steps(self) -> list:
        """What was committed from the start to here, oldest first: token ids and raw ``bytes``."""
        cdef CFamily* f = &self.fam.f
        cdef int32_t h = self.head, v, k, off
        out = []
        while f.rec_prev.d[h] >= 0:
            v = f.rec_step.d[h]
            if v >= 0:
                out.append(v)
            else:
                off = -2 - v
                out.append(bytes([f.bpool.d[off + 1 + k] for k in range(f.bpool.d[off])]))
            h = f.rec_prev.d[h]
        out.reverse()
        return out

    @property
    def family(self) -> Family:
        return self.fam

    def rollback(self, int n) -> None:
        cdef CFamily* f = &self.fam.f
        cdef int32_t h = self.head
        if n < 0 or n > f.rec_depth.d[h]:
            raise ValueError(f"cannot roll back {n} steps: only {f.rec_depth.d[h]} were committed")
        while n > 0:
            h = f.rec_prev.d[h]
            n -= 1
        self.head = h

    cdef int _run(self, int op, int64_t token, const uint8_t* p, Py_ssize_t n, uint32_t* dst,
                  int32_t* nr) except -100:
        """Run one operation on this state under its family lock, without the GIL: OP_COMMIT
        (``token``, or the bytes ``p[:n]`` when ``token < 0``; the new record in ``nr``),
        OP_PROBE (bytes: the number of lanes after them) or OP_FILL (the mask into ``dst``). On
        dynamic tables an operation that met lexer entries nobody explored yet is run again once
        they are (with the GIL: the Python lazy lexer computes them). Returns its code."""
        cdef Family fam = self.fam
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        cdef int32_t* miss = NULL
        cdef Py_ssize_t n_miss = 0
        cdef int r, missing, rounds = 0
        while True:
            with nogil:
                PyThread_acquire_lock(lock, WAIT_LOCK)
                if op == OP_FILL:
                    r = _fill(t, f, head, dst)
                    missing = r == R_MISSING
                elif op == OP_COMMIT:
                    r = _commit_token(t, f, head, token, nr) if token >= 0 else _commit(t, f, head, p, n, 0, -1, nr)
                    missing = r == R_MISSING
                else:
                    f.s_miss.n = 0
                    r = 0 if f.rec_flags.d[head] & F_TERMINATED else _step_bytes(t, f, f.pool.d + f.rec_snap.d[head], p, n)
                    missing = r >= 0 and f.s_miss.n > 0
                if missing:
                    miss = _take_missing(f, &n_miss)
                PyThread_release_lock(lock)
            if not missing:
                return r
            if miss == NULL:
                raise MemoryError("glrmask runtime: out of memory")
            fam.tables._resolve_missing(miss, n_miss, rounds == 0)
            rounds += 1

    cdef bint _advance(self, int64_t token, const uint8_t* p, Py_ssize_t n) except -1:
        """Commit ``token`` (``token >= 0``) or the raw bytes ``p[:n]`` as one history step."""
        cdef int32_t nr = -1
        cdef int r = self._run(OP_COMMIT, token, p, n, NULL, &nr)
        if r == R_NOMEM or r == R_TOOBIG:
            _raise(r, "commit", self.fam.tables.t.max_stacks)
        if r == R_OK:
            self.head = nr
            return True
        return False

    cpdef bint commit(self, int64_t token) except -1:
        """Advance by one token id (``0 <= token < vocab size``; checked by the caller)."""
        if token < 0:
            return False
        return self._advance(token, NULL, 0)

    def commit_bytes(self, const uint8_t[::1] data) -> bool:
        """Advance by raw bytes (one history step)."""
        cdef Py_ssize_t n = data.shape[0]
        return self._advance(-1, &data[0] if n else NULL, n)

    def probe_bytes(self, const uint8_t[::1] data) -> bool:
        """Whether ``data`` can follow (nothing is committed)."""
        cdef Py_ssize_t n = data.shape[0]
        cdef int r = self._run(OP_PROBE, -1, &data[0] if n else NULL, n, NULL, NULL)
        if r < 0:
            _raise(R_TOOBIG if r == TOOBIG else R_NOMEM, "commit_bytes", self.fam.tables.t.max_stacks)
        return r > 0

    def is_accepting(self) -> bool:
        cdef Family fam = self.fam
        cdef int r
        cdef const CTables* t = &fam.tables.t
        cdef CFamily* f = &fam.f
        cdef PyThread_type_lock lock = fam.lock
        cdef int32_t head = self.head
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)
            r = _rec_accepting(t, f, head)
            PyThread_release_lock(lock)
        if r < 0:
            raise MemoryError("glrmask runtime: out of memory")
        return r == 1

    cpdef int fill(self, uint32_t[::1] out) except -1:
        """Write the mask into ``out`` (``n_words`` uint32 words): OK or NEEDS_FALLBACK."""
        cdef const CTables* t = &self.fam.tables.t
        if out.shape[0] < t.n_words:
            raise ValueError(f"mask buffer holds {out.shape[0]} words, need {t.n_words}")
        cdef int r = self._run(OP_FILL, -1, NULL, 0, &out[0], NULL)
        if r == R_NOMEM or r == R_TOOBIG:
            _raise(r, "get_mask", t.max_stacks)
        return r

    def configuration(self) -> tuple:
        """The lanes as a hashable, sorted tuple (see ``glrmask.State.configuration``)."""
        return tuple(sorted((lex, conds, tuple(sorted(stacks))) for lex, conds, stacks in self.lanes()))

    cpdef int fill_into(self, object out, Py_ssize_t row) except -1:
        """Write the mask into row ``row`` of ``out``, any writable C-contiguous buffer of int32
        (1-D: the row is the buffer; 2-D ``(batch, >= n_words)``), through the buffer protocol:
        no allocation, GIL released while walking. Words past ``n_words`` are zeroed. Returns OK
        or NEEDS_FALLBACK (then the row is zeroed)."""
        cdef Py_buffer view
        cdef const CTables* t = &self.fam.tables.t
        cdef Py_ssize_t words, rows
        cdef uint32_t* dst
        cdef int r
        PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
        try:
            fmt = view.format if view.format != NULL else b"B"
            if view.itemsize != 4 or fmt not in (b"i", b"=i", b"<i", b"l" if sizeof(long) == 4 else b"i"):
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words})")
            if view.ndim == 1:
                rows, words = 1, view.shape[0]
            elif view.ndim == 2:
                rows, words = view.shape[0], view.shape[1]
            else:
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words})")
            if words < t.n_words:
                raise ValueError(f"out must be an int32 array of shape (batch, >= {t.n_words}), "
                                 f"got {words} words per row")
            if row < 0 or row >= rows:
                raise ValueError(f"row {row} is outside the {rows} rows of out")
            dst = (<uint32_t*>view.buf) + row * words
            r = self._run(OP_FILL, -1, NULL, 0, dst, NULL)
            if r != R_OK:
                memset(dst, 0, words * sizeof(uint32_t))
            elif words > t.n_words:
                memset(dst + t.n_words, 0, (words - t.n_words) * sizeof(uint32_t))
        finally:
            PyBuffer_Release(&view)
        if r == R_NOMEM or r == R_TOOBIG:
            _raise(r, "get_mask", t.max_stacks)
        return r

    def lanes(self) -> list:
        """The configuration as Python data ``[(lex, (conds…), (stack…), …)…]`` where each stack is
        a tuple of LR states, bottom first (for the reference fallback and for tests)."""
        cdef CFamily* f = &self.fam.f
        cdef const int32_t* s = f.pool.d + f.rec_snap.d[self.head]
        cdef int32_t n = s[0], i, nc, nn, k, node
        cdef const int32_t* p = s + 1
        out = []
        for i in range(n):
            nc = p[1]
            nn = p[2 + nc]
            conds = tuple(p[2 + k] for k in range(nc))
            stacks = []
            for k in range(nn):
                node = p[3 + nc + k]
                st = []
                while node >= 0:
                    st.append(f.node_state.d[node])
                    node = f.node_parent.d[node]
                stacks.append(tuple(reversed(st)))
            out.append((p[0], conds, tuple(stacks)))
            p = p + 3 + nc + nn
        return out


ctypedef struct Job:
    const CTables* t
    CFamily* f
    PyThread_type_lock lock
    int32_t head
    int code


cdef Job* _jobs(list states, Py_ssize_t words) except NULL:
    cdef Py_ssize_t n = len(states), i
    cdef NativeState st
    cdef Job* jobs = <Job*>malloc((n + 1) * sizeof(Job))
    if jobs == NULL:
        raise MemoryError
    for i in range(n):
        st = states[i]
        if words >= 0 and words < st.fam.tables.t.n_words:
            free(jobs)
            raise ValueError(f"out has {words} words per row, a state needs {st.fam.tables.t.n_words}")
        jobs[i].t = &st.fam.tables.t
        jobs[i].f = &st.fam.f
        jobs[i].lock = st.fam.lock
        jobs[i].head = st.head
        jobs[i].code = R_OK
    return jobs


cdef inline void _fill_one(Job* j, uint32_t* row, Py_ssize_t words) noexcept nogil:
    PyThread_acquire_lock(j.lock, WAIT_LOCK)
    j.code = _fill(j.t, j.f, j.head, row)
    PyThread_release_lock(j.lock)
    if j.code != R_OK:
        memset(row, 0, words * sizeof(uint32_t))
    elif words > j.t.n_words:
        memset(row + j.t.n_words, 0, (words - j.t.n_words) * sizeof(uint32_t))


cdef inline void _commit_one(Job* j, int64_t token) noexcept nogil:
    cdef int32_t nr = -1
    PyThread_acquire_lock(j.lock, WAIT_LOCK)
    j.code = _commit_token(j.t, j.f, j.head, token, &nr)
    PyThread_release_lock(j.lock)
    if j.code == R_OK:
        j.head = nr


def _new_state(Tables tables):
    cdef Family fam = Family(tables)
    if fam.init_root() != 0:
        raise MemoryError("glrmask runtime: out of memory")
    cdef NativeState st = NativeState.__new__(NativeState)
    st.fam = fam
    st.head = 0
    return st


def expansion_tables(const int32_t[::1] class_of_orig, int n_classes, int64_t n_logits, int64_t dense_min):
    """Class -> original ids (CSR, ids ascending), dense packed rows for the classes with at least
    ``dense_min`` tokens plus one row for the union of all classes (row ``cls_dense[n_classes]``),
    and each class's cost in the expansion's cost model (entry ``n_classes`` is the total). One
    counting pass in C: ``Mask.load`` must not spend milliseconds here. ``class_of_orig`` values
    must lie in ``[-1, n_classes)`` (checked by the caller)."""
    cdef Py_ssize_t n = class_of_orig.shape[0], j, r
    cdef int64_t n_words = (n_logits + 31) // 32
    cdef int32_t c
    cls_ptr = np.zeros(n_classes + 1, dtype=np.int32)
    cdef int32_t[::1] ptr = cls_ptr
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            ptr[c + 1] += 1
    counts = cls_ptr[1:].astype(np.int64)  # before the prefix sum: ptr[c + 1] is class c's size
    for c in range(n_classes):
        ptr[c + 1] += ptr[c]
    cls_ids = np.empty(ptr[n_classes], dtype=np.int32)
    cdef int32_t[::1] ids = cls_ids
    fill = np.array(cls_ptr[:n_classes], dtype=np.int32) if n_classes else np.zeros(0, dtype=np.int32)
    cdef int32_t[::1] at = fill
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            ids[at[c]] = <int32_t>j
            at[c] += 1
    big = np.flatnonzero(counts >= max(dense_min, n_words // 8)).astype(np.int32)
    cls_dense = np.full(n_classes + 1, -1, dtype=np.int32)
    cls_dense[big] = np.arange(len(big), dtype=np.int32)
    cls_dense[n_classes] = len(big)
    rows = np.zeros((len(big) + 1, n_words), dtype=np.uint32)
    cdef uint32_t[:, ::1] rv = rows
    cdef int32_t[::1] dense = cls_dense
    cdef int32_t all_row = <int32_t>len(big)
    for j in range(n):
        c = class_of_orig[j]
        if c >= 0:
            rv[all_row, j >> 5] |= (<uint32_t>1) << (j & 31)
            r = dense[c]
            if r >= 0:
                rv[r, j >> 5] |= (<uint32_t>1) << (j & 31)
    cost = counts.copy()
    cost[big] = max(1, n_words // 8)
    cls_cost = np.zeros(n_classes + 1, dtype=np.int32)
    cls_cost[:n_classes] = cost
    cls_cost[n_classes] = int(cost.sum())
    return {"cls_ptr": cls_ptr, "cls_ids": cls_ids, "cls_dense": cls_dense, "dense_rows": rows,
            "cls_cost": cls_cost, "n_words": np.int64(n_words)}


cdef class _Batch:
    """One batch of native states: :meth:`run` works on a range of rows with the GIL released, so
    several Python threads can share one batch (each state's family lock keeps a state and its
    forks consistent; different requests never wait for each other)."""

    cdef Job* jobs
    cdef Py_ssize_t n
    cdef object _keep

    cdef void _init(self, list states, Py_ssize_t words, object keep) except *:
        self.n = len(states)
        self.jobs = _jobs(states, words)
        self._keep = keep

    def __dealloc__(self):
        free(self.jobs)

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        pass

    def run(self, Py_ssize_t lo, Py_ssize_t hi) -> None:
        if lo < 0 or hi > self.n or lo > hi:
            raise ValueError("row range out of bounds")
        with nogil:
            self._rows(lo, hi)

    cdef void _check(self, str what) except *:
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.jobs[i].code == R_NOMEM or self.jobs[i].code == R_TOOBIG:
                _raise(self.jobs[i].code, what, self.jobs[i].t.max_stacks)


cdef class FillBatch(_Batch):
    """Row ``i`` of ``out`` <- the mask of ``states[i]``; :meth:`finish` reports the rows that need
    the reference fallback (left zeroed)."""

    cdef Py_ssize_t words
    cdef uint32_t* base

    def __cinit__(self, list states, uint32_t[:, ::1] out):
        if out.shape[0] < len(states):
            raise ValueError(f"out has {out.shape[0]} rows for {len(states)} states")
        self.words = out.shape[1]
        self._init(states, self.words, (states, out))
        self.base = &out[0, 0] if self.n else NULL

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(lo, hi):
            _fill_one(&self.jobs[i], self.base + i * self.words, self.words)

    def finish(self) -> list:
        self._check("fill_masks")
        return [i for i in range(self.n) if self.jobs[i].code == R_FALLBACK or self.jobs[i].code == R_MISSING]


cdef class CommitBatch(_Batch):
    """``states[i].commit(tokens[i])`` (tokens checked by the caller); :meth:`finish` moves the
    states and returns the results (uint8: 1 committed, 0 refused, 2 not done: a dynamic
    state met a lexer entry not explored yet — commit it on its own)."""

    cdef const int64_t* tokens

    def __cinit__(self, list states, const int64_t[::1] tokens):
        if tokens.shape[0] != len(states):
            raise ValueError(f"{len(states)} states but {tokens.shape[0]} tokens")
        self._init(states, -1, (states, tokens))
        self.tokens = &tokens[0] if self.n else NULL

    cdef void _rows(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(lo, hi):
            _commit_one(&self.jobs[i], self.tokens[i])

    def finish(self):
        cdef Py_ssize_t i
        self._check("commit_many")
        res = np.zeros(self.n, dtype=np.uint8)
        cdef uint8_t[::1] rv = res
        states = self._keep[0]
        for i in range(self.n):
            if self.jobs[i].code == R_OK:
                (<NativeState>states[i]).head = self.jobs[i].head
                rv[i] = 1
            elif self.jobs[i].code == R_MISSING:
                rv[i] = 2
        return res


def next_terminal_sets(const int32_t[::1] act_ptr, const int32_t[::1] act_term, const int32_t[::1] act_shift,
                       int n_terminals, const int32_t[::1] lr_of_lex, const uint8_t[::1] lex_ignored, int fw):
    """``(act_lex, follow_lex)`` of :func:`glrmask.runtime.tables.next_terminal_arrays`, in one
    pass in C over the LR table's sparse action rows (every entry shifts or reduces; numpy's
    temporaries cost more than a small schema's whole start). Values must be in range (a table
    built in this process, or one validated by :func:`glrmask.lr.table.check_sparse_rows`)."""
    cdef Py_ssize_t n = act_ptr.shape[0] - 1, T = n_terminals, L = lr_of_lex.shape[0], s, a, e, j, w
    cdef int32_t tgt, lr
    if (n < 0 or T < 1 or act_term.shape[0] != act_shift.shape[0] or act_ptr[n] != act_term.shape[0]
            or lex_ignored.shape[0] != L or fw * 64 < L):
        raise ValueError("next_terminal_sets: inconsistent shapes")
    ptr_a = np.zeros(T + 1, dtype=np.int64)
    cdef int64_t[::1] ptr = ptr_a
    for j in range(L):
        lr = lr_of_lex[j]
        if 0 <= lr < T:
            ptr[lr + 1] += 1
    for a in range(T):
        ptr[a + 1] += ptr[a]
    lex_a = np.zeros(max(ptr[T], 1), dtype=np.int32)
    cdef int32_t[::1] lex = lex_a
    fill_a = ptr_a[:T].copy()
    cdef int64_t[::1] at = fill_a
    for j in range(L):
        lr = lr_of_lex[j]
        if 0 <= lr < T:
            lex[at[lr]] = <int32_t>j
            at[lr] += 1
    ign_a = np.zeros(fw, dtype=np.uint64)
    cdef uint64_t[::1] ign = ign_a
    for j in range(L):
        if lex_ignored[j]:
            ign[j >> 6] |= (<uint64_t>1) << (j & 63)
    act_a = np.zeros((n, fw), dtype=np.uint64)
    follow_a = np.zeros((T, fw), dtype=np.uint64)
    cdef uint64_t[:, ::1] act = act_a
    cdef uint64_t[:, ::1] follow = follow_a
    with nogil:
        for s in range(n):
            for w in range(fw):
                act[s, w] = ign[w]
            for e in range(act_ptr[s], act_ptr[s + 1]):
                a = act_term[e]
                if 0 <= a < T:
                    for j in range(ptr[a], ptr[a + 1]):
                        act[s, lex[j] >> 6] |= (<uint64_t>1) << (lex[j] & 63)
        for e in range(act_term.shape[0]):
            a = act_term[e]
            tgt = act_shift[e]
            if 0 <= tgt < n and 0 <= a < T:
                for w in range(fw):
                    follow[a, w] |= act[tgt, w]
        for a in range(T):
            for w in range(fw):
                follow[a, w] |= ign[w]
    return act_a, follow_a
