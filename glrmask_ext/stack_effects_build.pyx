# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# distutils: language = c++
"""Native construction of the per-terminal stack-effect automata (semantics and reference:
:mod:`glrmask.compiler.stack_effects`, whose Python builder stays the test oracle).

Why native. A large JSON Schema's table (13k LR states, 230 terminals) needs about a million
symbolic configurations over all terminals, each a Python tuple with frozensets of read nodes and
write sequences; the Python builder spent ~20 s on them, most of a compile's budget. Here a known
segment, a read node and a write sequence are interned into dense integer ids, a closure is two
sorted id vectors, and the LR table is read in its sparse rows (``act_*``, ``goto_*``) with two
column indexes built once per table (states acting on a terminal, goto sources of a
nonterminal), so neither the dense views nor any Python object per configuration exist; the GIL is
released while one terminal is built.

Identical output. The symbolic execution, the subset construction over read labels and the
minimization are the Python builder's, step by step; what is not observable is left out:

* subset states are numbered in the order they are met (the Python numbering too), but the
  minimized automaton's numbering depends only on the minimal automaton itself (classes by
  signature bottom-up, then states in reverse DFS post-order from the start, explicit labels
  ascending before DEFAULT), so any subset numbering gives the same arrays;
* an explicit label whose closure is empty is not kept in the memoized move list: in the subset
  construction it can only yield the DEFAULT target, an edge the minimization drops. When the
  revealed state's goto target has no action on the terminal at all (most goto sources of a
  read node: a JSON Schema's key terminal meets ~10,000 of them and ~5 subset states) the
  configuration is not even created; the budget counts, in both builders, only configurations
  whose top state acts on the terminal;
* write sequences get ids state by state in the automaton's order and, within one final, in
  ascending (lexicographic) order, the rule :meth:`EffectAutomaton.from_lists` states.

Budgets: ``max_states`` counts finished symbolic configurations (those whose top acts on the
terminal) and subset states per terminal, as in Python (the configuration count is checked when a new one is expanded, so at the very
boundary the depth-first order decides, and the native order follows labels ascending where
Python follows set iteration order); the deadline is checked every few thousand steps.
"""
import numpy as np
cimport numpy as cnp

from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector

cnp.import_array()

__all__ = ["EffectBuilder", "OK", "MAX_CONFIGS", "MAX_SUBSETS", "CYCLE", "DEADLINE"]

OK = 0
"""The automaton was built."""
MAX_CONFIGS = 1
"""More than ``max_states`` symbolic configurations (finished closures) for the terminal."""
MAX_SUBSETS = 2
"""More than ``max_states`` subset states for the terminal."""
CYCLE = 3
"""A cycle of reductions without a shift (the grammar was not normalized)."""
DEADLINE = 4
"""The time given to the build ran out."""

cdef extern from *:
    """
    #include <algorithm>
    #include <chrono>
    #include <cstdint>
    #include <unordered_map>
    #include <utility>
    #include <vector>

    namespace glrmask_se {

    typedef std::vector<int32_t> IVec;

    static inline uint64_t mix64(uint64_t h) {
        h ^= h >> 30; h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 27; h *= 0x94d049bb133111ebULL;
        h ^= h >> 31; return h;
    }

    struct IVecHash {
        size_t operator()(const IVec& v) const {
            uint64_t h = 0x243f6a8885a308d3ULL ^ (uint64_t)v.size();
            for (int32_t x : v) h = mix64(h ^ (uint32_t)x) + 0x9e3779b97f4a7c15ULL;
            return (size_t)h;
        }
    };

    struct PairHash {
        size_t operator()(const std::pair<IVec, IVec>& p) const {
            IVecHash f;
            return (size_t)mix64((uint64_t)f(p.first) * 31 + (uint64_t)f(p.second));
        }
    };

    struct SigHash {
        size_t operator()(const std::pair<int32_t, IVec>& p) const {
            IVecHash f;
            return (size_t)mix64((uint64_t)f(p.second) ^ ((uint64_t)(uint32_t)p.first << 17));
        }
    };

    static inline void sort_unique(IVec& v) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
    }

    enum { ST_OK = 0, ST_MAX_CONFIGS = 1, ST_MAX_SUBSETS = 2, ST_CYCLE = 3, ST_DEADLINE = 4 };
    static const int32_t DEAD = -1;

    // The LR table's sparse rows (borrowed: the Python object keeps the arrays alive) and the
    // two column indexes the symbolic execution needs.
    struct Table {
        int32_t n_states = 0, n_terms = 0, n_nts = 0, n_rules = 0;
        const int32_t *act_ptr = nullptr, *act_term = nullptr, *act_shift = nullptr, *act_roff = nullptr;
        const int32_t *reduce_rules = nullptr, *goto_ptr = nullptr, *goto_nt = nullptr, *goto_tgt = nullptr;
        const int32_t *rule_len = nullptr, *rule_lhs = nullptr;
        IVec tcol_ptr, tcol_state;            // states with an action on terminal t, ascending
        IVec gcol_ptr, gcol_src, gcol_tgt;    // (state, goto(state, nt)) per nt, by state

        void index() {
            int64_t n_act = act_ptr[n_states], n_goto = goto_ptr[n_states];
            tcol_ptr.assign(n_terms + 1, 0);
            for (int64_t e = 0; e < n_act; ++e) tcol_ptr[act_term[e] + 1]++;
            for (int32_t t = 0; t < n_terms; ++t) tcol_ptr[t + 1] += tcol_ptr[t];
            tcol_state.assign(n_act, 0);
            IVec fill(tcol_ptr.begin(), tcol_ptr.end() - 1);
            for (int32_t s = 0; s < n_states; ++s)
                for (int32_t e = act_ptr[s]; e < act_ptr[s + 1]; ++e) tcol_state[fill[act_term[e]]++] = s;
            gcol_ptr.assign(n_nts + 1, 0);
            for (int64_t e = 0; e < n_goto; ++e) gcol_ptr[goto_nt[e] + 1]++;
            for (int32_t a = 0; a < n_nts; ++a) gcol_ptr[a + 1] += gcol_ptr[a];
            gcol_src.assign(n_goto, 0);
            gcol_tgt.assign(n_goto, 0);
            IVec gfill(gcol_ptr.begin(), gcol_ptr.end() - 1);
            for (int32_t s = 0; s < n_states; ++s)
                for (int32_t e = goto_ptr[s]; e < goto_ptr[s + 1]; ++e) {
                    int32_t k = gfill[goto_nt[e]]++;
                    gcol_src[k] = s;
                    gcol_tgt[k] = goto_tgt[e];
                }
        }

        // the action entry of (s, t), -1 when the cell is empty
        inline int32_t entry(int32_t s, int32_t t) const {
            const int32_t* lo = act_term + act_ptr[s];
            const int32_t* hi = act_term + act_ptr[s + 1];
            const int32_t* p = std::lower_bound(lo, hi, t);
            return (p < hi && *p == t) ? (int32_t)(p - act_term) : -1;
        }

        inline int32_t go(int32_t s, int32_t nt) const {
            const int32_t* lo = goto_nt + goto_ptr[s];
            const int32_t* hi = goto_nt + goto_ptr[s + 1];
            const int32_t* p = std::lower_bound(lo, hi, nt);
            return (p < hi && *p == nt) ? goto_tgt[p - goto_nt] : -1;
        }
    };

    // int64 -> int32 map, open addressing (keys are never negative)
    struct FlatMap {
        std::vector<int64_t> keys;
        std::vector<int32_t> vals;
        size_t mask = 0, n = 0;
        FlatMap() { keys.assign(1024, -1); vals.assign(1024, 0); mask = 1023; }
        inline int32_t get(int64_t key) const {
            size_t j = (size_t)mix64((uint64_t)key) & mask;
            while (true) {
                int64_t k = keys[j];
                if (k == key) return vals[j];
                if (k < 0) return -1;
                j = (j + 1) & mask;
            }
        }
        void put(int64_t key, int32_t val) {  // key must be absent
            if (2 * (n + 1) > mask + 1) {
                std::vector<int64_t> ok(std::move(keys));
                std::vector<int32_t> ov(std::move(vals));
                size_t size = (mask + 1) * 2;
                keys.assign(size, -1); vals.assign(size, 0); mask = size - 1;
                for (size_t i = 0; i < ok.size(); ++i)
                    if (ok[i] >= 0) place(ok[i], ov[i]);
            }
            place(key, val);
            ++n;
        }
        inline void place(int64_t key, int32_t val) {
            size_t j = (size_t)mix64((uint64_t)key) & mask;
            while (keys[j] >= 0) j = (j + 1) & mask;
            keys[j] = key; vals[j] = val;
        }
    };

    struct Closure {
        IVec reads;   // read-node ids, sorted
        IVec outs;    // write-sequence ids (trie nodes), sorted
        int8_t status = 0;  // 0: not expanded, 1: active (on the DFS path), 2: finished
        int8_t acts = 0;    // the top state has an action on the terminal (counted by the budget)
    };

    // One terminal's construction; the result is left in the output vectors.
    struct Builder {
        const Table* T = nullptr;
        int32_t t = 0;
        int64_t max_states = 0;
        std::chrono::steady_clock::time_point deadline;
        bool has_deadline = false;
        int64_t ticks = 0;

        // Known segments and write sequences are nodes of one prefix trie (a node is its parent
        // plus one state on top), so a pop is a walk to an ancestor and no sequence is copied.
        FlatMap trie_index;                  // (parent + 1) << 32 | state -> node
        IVec trie_parent, trie_last;
        std::vector<Closure> closures;       // per trie node (used where it is a known segment)
        int64_t n_finished = 0;
        std::unordered_map<int64_t, int32_t> node_index;         // (nt + 1) << 32 | d -> node id
        IVec node_nt, node_d;
        std::vector<std::vector<std::pair<int32_t, int32_t>>> moves;  // per node: (label, closure)
        std::vector<char> moves_done;

        std::vector<char> acting;           // acting[s]: state s has an action on t

        // scratch of the closure walk
        struct Frame { int32_t id; bool expanded; IVec children; };
        std::vector<Frame> frames;

        // subset construction
        std::unordered_map<std::pair<IVec, IVec>, int32_t, PairHash> subset_index;
        std::vector<const std::pair<IVec, IVec>*> subsets;
        std::vector<std::vector<std::pair<int32_t, int32_t>>> rows;
        IVec defaults;

        // output (EffectAutomaton's fields)
        IVec o_edge_ptr, o_edge_label, o_edge_target, o_default, o_final_ptr, o_final_writes, o_write_ptr,
             o_write_states;

        bool late() {
            if (!has_deadline) return false;
            if ((++ticks & 1023) != 0) return false;
            return std::chrono::steady_clock::now() > deadline;
        }

        int32_t node(int32_t nt, int32_t d) {
            int64_t key = ((int64_t)(nt + 1) << 32) | (uint32_t)d;
            auto it = node_index.find(key);
            if (it != node_index.end()) return it->second;
            int32_t id = (int32_t)node_nt.size();
            node_index.emplace(key, id);
            node_nt.push_back(nt);
            node_d.push_back(d);
            moves.emplace_back();
            moves_done.push_back(0);
            return id;
        }

        // the trie node of sequence ``parent`` + (x,) (parent -1: the empty sequence)
        int32_t push(int32_t parent, int32_t x) {
            int64_t key = ((int64_t)(parent + 1) << 32) | (uint32_t)x;
            int32_t id = trie_index.get(key);
            if (id >= 0) return id;
            id = (int32_t)trie_parent.size();
            trie_index.put(key, id);
            trie_parent.push_back(parent);
            trie_last.push_back(x);
            closures.emplace_back();
            return id;
        }

        void sequence(int32_t id, IVec& out) const {  // bottom-up
            out.clear();
            for (; id >= 0; id = trie_parent[id]) out.push_back(trie_last[id]);
            std::reverse(out.begin(), out.end());
        }

        // The closure of a known segment (the Python builder's ``closure``): an explicit
        // depth-first stack; a frame is expanded once, then finished when its children are.
        int closure(int32_t root) {
            if (closures[root].status == 2) return ST_OK;
            frames.clear();
            frames.push_back(Frame{root, false, IVec()});
            while (!frames.empty()) {
                if (!frames.back().expanded) {
                    int32_t id = frames.back().id;
                    if (closures[id].status == 2) { frames.pop_back(); continue; }
                    int32_t e = T->entry(trie_last[id], t);
                    if (e >= 0 && n_finished >= max_states) return ST_MAX_CONFIGS;
                    if (late()) return ST_DEADLINE;
                    frames.back().expanded = true;
                    closures[id].status = 1;
                    closures[id].acts = e >= 0;
                    IVec reads, outs, children;
                    if (e >= 0) {
                        int32_t sh = T->act_shift[e];
                        if (sh >= 0) outs.push_back(push(id, sh));
                        for (int32_t k = T->act_roff[e]; k < T->act_roff[e + 1]; ++k) {
                            int32_t r = T->reduce_rules[k];
                            int32_t n_pop = T->rule_len[r], nt = T->rule_lhs[r];
                            int32_t rest = id, i = 0;  // pop n_pop states off the known segment
                            for (; i < n_pop && rest >= 0; ++i) rest = trie_parent[rest];
                            if (rest >= 0) {
                                int32_t g = T->go(trie_last[rest], nt);
                                if (g >= 0) children.push_back(push(rest, g));  // else unreachable
                            } else {
                                reads.push_back(node(nt, n_pop - i));
                            }
                        }
                    }
                    Closure& me = closures[id];
                    me.reads.swap(reads);
                    me.outs.swap(outs);
                    IVec todo;
                    for (int32_t c : children) {
                        if (closures[c].status == 2) continue;
                        if (closures[c].status == 1) return ST_CYCLE;
                        todo.push_back(c);
                    }
                    frames.back().children.swap(children);
                    for (int32_t c : todo) frames.push_back(Frame{c, false, IVec()});
                    continue;
                }
                // every child is finished (the frames above this one were popped)
                Frame& f = frames.back();
                Closure& me = closures[f.id];
                for (int32_t c : f.children) {
                    const Closure& ch = closures[c];
                    me.reads.insert(me.reads.end(), ch.reads.begin(), ch.reads.end());
                    me.outs.insert(me.outs.end(), ch.outs.begin(), ch.outs.end());
                }
                sort_unique(me.reads);
                sort_unique(me.outs);
                me.status = 2;
                n_finished += me.acts;
                frames.pop_back();
            }
            return ST_OK;
        }

        // (label, closure) of an explicit read node, closures with something in them only
        int explicit_moves(int32_t n) {
            if (moves_done[n]) return ST_OK;
            std::vector<std::pair<int32_t, int32_t>> mv;
            int32_t nt = node_nt[n];
            int32_t c;
            if (nt < 0) {  // ROOT: the initial top, any state acting on t
                for (int32_t k = T->tcol_ptr[t]; k < T->tcol_ptr[t + 1]; ++k) {
                    int32_t s = T->tcol_state[k];
                    c = push(-1, s);
                    int st = closure(c);
                    if (st != ST_OK) return st;
                    if (!closures[c].reads.empty() || !closures[c].outs.empty()) mv.emplace_back(s, c);
                }
            } else {
                for (int32_t k = T->gcol_ptr[nt]; k < T->gcol_ptr[nt + 1]; ++k) {
                    int32_t s = T->gcol_src[k], g = T->gcol_tgt[k];
                    if (!acting[g]) continue;  // a dead end: empty closure, not counted
                    c = push(push(-1, s), g);
                    int st = closure(c);
                    if (st != ST_OK) return st;
                    if (!closures[c].reads.empty() || !closures[c].outs.empty()) mv.emplace_back(s, c);
                }
            }
            moves[n].swap(mv);
            moves_done[n] = 1;
            return ST_OK;
        }

        int intern(IVec& r, IVec& o, int32_t* out) {
            if (r.empty() && o.empty()) { *out = DEAD; return ST_OK; }
            std::pair<IVec, IVec> key(std::move(r), std::move(o));
            auto it = subset_index.find(key);
            if (it != subset_index.end()) { *out = it->second; return ST_OK; }
            if ((int64_t)subsets.size() >= max_states) return ST_MAX_SUBSETS;
            int32_t j = (int32_t)subsets.size();
            auto ins = subset_index.emplace(std::move(key), j);
            subsets.push_back(&ins.first->first);
            *out = j;
            return ST_OK;
        }

        int determinize() {
            int32_t dummy;
            IVec r0{node(-1, 0)}, o0;
            int st = intern(r0, o0, &dummy);
            if (st != ST_OK) return st;
            std::vector<std::pair<int32_t, int32_t>> pairs;
            for (size_t i = 0; i < subsets.size(); ++i) {
                if (late()) return ST_DEADLINE;
                IVec reads = subsets[i]->first;  // copy: interning may rehash
                IVec wild;
                pairs.clear();
                for (int32_t n : reads) {
                    if (node_d[n] > 0) { wild.push_back(node(node_nt[n], node_d[n] - 1)); continue; }
                    st = explicit_moves(n);
                    if (st != ST_OK) return st;
                    pairs.insert(pairs.end(), moves[n].begin(), moves[n].end());
                }
                sort_unique(wild);
                std::sort(pairs.begin(), pairs.end());
                std::vector<std::pair<int32_t, int32_t>> row;
                size_t a = 0;
                while (a < pairs.size()) {
                    size_t b = a;
                    int32_t lab = pairs[a].first;
                    IVec r(wild), o;
                    while (b < pairs.size() && pairs[b].first == lab) {
                        const Closure& c = closures[pairs[b].second];
                        r.insert(r.end(), c.reads.begin(), c.reads.end());
                        o.insert(o.end(), c.outs.begin(), c.outs.end());
                        ++b;
                    }
                    sort_unique(r);
                    sort_unique(o);
                    int32_t tgt;
                    st = intern(r, o, &tgt);
                    if (st != ST_OK) return st;
                    row.emplace_back(lab, tgt);
                    a = b;
                }
                int32_t def = DEAD;
                if (!wild.empty()) {
                    IVec none;
                    st = intern(wild, none, &def);
                    if (st != ST_OK) return st;
                }
                rows.push_back(std::move(row));
                defaults.push_back(def);
            }
            return ST_OK;
        }

        // canonical minimization (the Python ``_minimize``) and the flat layout
        void minimize() {
            int32_t n = (int32_t)rows.size();
            IVec order;
            order.reserve(n);
            std::vector<char> seen(n, 0);
            // DFS post-order from 0, successors: explicit targets by label, then DEFAULT
            std::vector<std::pair<int32_t, int32_t>> st;  // (state, next successor index)
            st.emplace_back(0, 0);
            seen[0] = 1;
            while (!st.empty()) {
                int32_t d = st.back().first;
                int32_t k = st.back().second++;
                int32_t m = (int32_t)rows[d].size();
                if (k > m) { st.pop_back(); order.push_back(d); continue; }
                int32_t nxt = k < m ? rows[d][k].second : defaults[d];
                if (nxt != DEAD && !seen[nxt]) { seen[nxt] = 1; st.emplace_back(nxt, 0); }
            }
            IVec cls(n, DEAD);
            // signature: (outs, DEFAULT class, explicit edges differing from DEFAULT) as one vector
            std::unordered_map<IVec, int32_t, IVecHash> sig_index;
            std::vector<const IVec*> sigs;       // class -> its signature
            for (int32_t d : order) {
                int32_t def = defaults[d];
                int32_t dc = def != DEAD ? cls[def] : DEAD;
                const IVec& outs = subsets[d]->second;
                IVec sig;
                sig.reserve(2 + outs.size() + 2 * rows[d].size());
                sig.push_back((int32_t)outs.size());
                sig.insert(sig.end(), outs.begin(), outs.end());
                sig.push_back(dc);
                for (auto& e : rows[d]) {
                    int32_t c = e.second != DEAD ? cls[e.second] : DEAD;
                    if (c != dc) { sig.push_back(e.first); sig.push_back(c); }
                }
                if (outs.empty() && dc == DEAD && sig.size() == 2) continue;  // dead
                auto it = sig_index.find(sig);
                int32_t c;
                if (it == sig_index.end()) {
                    c = (int32_t)sigs.size();
                    auto ins = sig_index.emplace(std::move(sig), c);
                    sigs.push_back(&ins.first->first);
                } else {
                    c = it->second;
                }
                cls[d] = c;
            }
            int32_t root = cls[0];
            o_edge_ptr.assign(1, 0); o_edge_label.clear(); o_edge_target.clear(); o_default.clear();
            o_final_ptr.assign(1, 0); o_final_writes.clear(); o_write_ptr.assign(1, 0); o_write_states.clear();
            if (root == DEAD) {  // the rejecting automaton
                o_edge_ptr.push_back(0); o_default.push_back(DEAD); o_final_ptr.push_back(0);
                return;
            }
            // the parts of a signature
            auto n_outs = [&](const IVec& s) { return s[0]; };
            auto dc_of = [&](const IVec& s) { return s[1 + s[0]]; };
            auto e_begin = [&](const IVec& s) { return (size_t)(2 + s[0]); };
            int32_t n_cls = (int32_t)sigs.size();
            // topological order: DFS post-order over the class graph from the root, reversed
            IVec topo;
            std::vector<char> vis(n_cls, 0);
            std::vector<std::pair<int32_t, size_t>> cs;  // (class, next position in its signature)
            vis[root] = 1;
            cs.emplace_back(root, e_begin(*sigs[root]));
            while (!cs.empty()) {
                int32_t c = cs.back().first;
                size_t& pos = cs.back().second;
                const IVec& s = *sigs[c];
                int32_t nxt = DEAD;
                bool done = false;
                // explicit edges (label, class) pairs, then DEFAULT (marked by pos == s.size())
                while (true) {
                    if (pos < s.size()) {
                        int32_t x = s[pos + 1];
                        pos += 2;
                        if (x != DEAD) { nxt = x; break; }
                    } else if (pos == s.size()) {
                        pos += 1;
                        int32_t x = dc_of(s);
                        if (x != DEAD) { nxt = x; break; }
                    } else { done = true; break; }
                }
                if (done) { cs.pop_back(); topo.push_back(c); continue; }
                if (!vis[nxt]) { vis[nxt] = 1; cs.emplace_back(nxt, e_begin(*sigs[nxt])); }
            }
            std::reverse(topo.begin(), topo.end());
            IVec new_id(n_cls, DEAD);
            for (size_t i = 0; i < topo.size(); ++i) new_id[topo[i]] = (int32_t)i;
            std::unordered_map<int32_t, int32_t> pool;  // write-sequence id -> output id
            std::vector<std::pair<IVec, int32_t>> fin;  // a final's sequences, sorted by content
            for (int32_t c : topo) {
                const IVec& s = *sigs[c];
                for (size_t p = e_begin(s); p < s.size(); p += 2) {
                    o_edge_label.push_back(s[p]);
                    o_edge_target.push_back(s[p + 1] != DEAD ? new_id[s[p + 1]] : DEAD);
                }
                o_edge_ptr.push_back((int32_t)o_edge_label.size());
                int32_t dc = dc_of(s);
                o_default.push_back(dc != DEAD ? new_id[dc] : DEAD);
                fin.clear();
                for (int32_t i = 0; i < n_outs(s); ++i) {
                    fin.emplace_back(IVec(), s[1 + i]);
                    sequence(s[1 + i], fin.back().first);
                }
                std::sort(fin.begin(), fin.end());
                IVec ids;
                for (auto& w : fin) {
                    auto it = pool.find(w.second);
                    int32_t id;
                    if (it == pool.end()) {
                        id = (int32_t)pool.size();
                        pool.emplace(w.second, id);
                        o_write_states.insert(o_write_states.end(), w.first.begin(), w.first.end());
                        o_write_ptr.push_back((int32_t)o_write_states.size());
                    } else {
                        id = it->second;
                    }
                    ids.push_back(id);
                }
                std::sort(ids.begin(), ids.end());
                o_final_writes.insert(o_final_writes.end(), ids.begin(), ids.end());
                o_final_ptr.push_back((int32_t)o_final_writes.size());
            }
        }

        int run() {
            acting.assign(T->n_states, 0);
            for (int32_t k = T->tcol_ptr[t]; k < T->tcol_ptr[t + 1]; ++k) acting[T->tcol_state[k]] = 1;
            int st = determinize();
            if (st != ST_OK) return st;
            minimize();
            return ST_OK;
        }
    };

    // One fresh builder per terminal: everything interned is per terminal, as in Python.
    static int build_terminal(const Table* T, int32_t t, int64_t max_states, double seconds, Builder* out) {
        out->T = T;
        out->t = t;
        out->max_states = max_states;
        out->has_deadline = seconds >= 0;
        if (out->has_deadline)
            out->deadline = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
        return out->run();
    }

    }  // namespace glrmask_se
    """
    cdef cppclass Table "glrmask_se::Table":
        int32_t n_states, n_terms, n_nts, n_rules
        const int32_t* act_ptr
        const int32_t* act_term
        const int32_t* act_shift
        const int32_t* act_roff
        const int32_t* reduce_rules
        const int32_t* goto_ptr
        const int32_t* goto_nt
        const int32_t* goto_tgt
        const int32_t* rule_len
        const int32_t* rule_lhs
        void index() except + nogil

    cdef cppclass Builder "glrmask_se::Builder":
        Builder() nogil
        int64_t n_finished
        vector[int32_t] o_edge_ptr, o_edge_label, o_edge_target, o_default, o_final_ptr, o_final_writes
        vector[int32_t] o_write_ptr, o_write_states

    int build_terminal "glrmask_se::build_terminal"(const Table* T, int32_t t, int64_t max_states, double seconds,
                                                     Builder* out) except + nogil


cdef object _array(const vector[int32_t]& v):
    cdef cnp.ndarray out = np.empty(v.size(), dtype=np.int32)
    cdef int32_t* p = <int32_t*>cnp.PyArray_DATA(out)
    cdef size_t i
    for i in range(v.size()):
        p[i] = v[i]
    return out


cdef class EffectBuilder:
    """Builds the stack-effect automaton of one terminal at a time over one LR table's sparse rows.

    ``EffectBuilder(act_ptr, act_term, act_shift, act_roff, reduce_rules, goto_ptr, goto_nt,
    goto_tgt, rule_len, rule_lhs, n_terminals, n_nonterminals)`` (the :class:`~glrmask.lr.table.LRTable`
    fields of those names); :meth:`build` returns ``(status, arrays)``."""

    cdef Table table
    cdef object _keep  # the int32 arrays the table points into

    def __init__(self, act_ptr, act_term, act_shift, act_roff, reduce_rules, goto_ptr, goto_nt, goto_tgt,
                 rule_len, rule_lhs, int n_terminals, int n_nonterminals):
        arrays = [np.ascontiguousarray(a, dtype=np.int32) for a in
                  (act_ptr, act_term, act_shift, act_roff, reduce_rules, goto_ptr, goto_nt, goto_tgt,
                   rule_len, rule_lhs)]
        self._keep = arrays
        cdef cnp.ndarray a
        cdef const int32_t* ptrs[10]
        cdef int i
        for i in range(10):
            a = arrays[i]
            ptrs[i] = <const int32_t*>cnp.PyArray_DATA(a)
        self.table.n_states = len(arrays[0]) - 1
        self.table.n_terms = n_terminals
        self.table.n_nts = n_nonterminals
        self.table.n_rules = len(arrays[8])
        self.table.act_ptr = ptrs[0]
        self.table.act_term = ptrs[1]
        self.table.act_shift = ptrs[2]
        self.table.act_roff = ptrs[3]
        self.table.reduce_rules = ptrs[4]
        self.table.goto_ptr = ptrs[5]
        self.table.goto_nt = ptrs[6]
        self.table.goto_tgt = ptrs[7]
        self.table.rule_len = ptrs[8]
        self.table.rule_lhs = ptrs[9]
        with nogil:
            self.table.index()

    def build(self, int term, long max_states, double seconds=-1.0):
        """Build terminal ``term``'s automaton within ``max_states`` and ``seconds`` (negative: no
        limit). Returns ``(status, arrays)``: ``arrays`` is the tuple of
        :class:`~glrmask.compiler.stack_effects.EffectAutomaton` fields in declaration order when
        ``status`` is :data:`OK`, else ``None``."""
        if not 0 <= term < self.table.n_terms:
            raise ValueError(f"terminal id {term} out of range")
        cdef Builder* b = new Builder()
        cdef int status
        try:
            with nogil:
                status = build_terminal(&self.table, term, max_states, seconds, b)
            if status != OK:
                return status, None
            return status, (_array(b.o_edge_ptr), _array(b.o_edge_label), _array(b.o_edge_target),
                            _array(b.o_default), _array(b.o_final_ptr), _array(b.o_final_writes),
                            _array(b.o_write_ptr), _array(b.o_write_states))
        finally:
            with nogil:
                del b
