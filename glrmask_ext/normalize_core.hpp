// The normalizer of glrmask/grammar/normalize.py over integer symbol ids (see normalize.pyx).
//
// Every step is the Python reference's (``_Normalizer``) step for step: rules are visited, fresh
// symbols numbered and named, strongly connected components found and results concatenated in the
// same order, so the output is the same grammar rule for rule and name for name. What differs is
// only the representation: a symbol is an int, a rule is (lhs, offset, length) into one
// append-only pool of right-hand-side symbols, sets are flag vectors and the order-sensitive
// iterations that the Python code does over ``sorted`` names compare the names' UTF-8 bytes (the
// same order as Python's code-point order of ``str``).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace glrnorm {

struct Rule {
    int32_t lhs;
    int32_t off;     // right-hand side: pool[off, off + n)
    int32_t n;
    int32_t origin;  // index of the input rule it is equal to, or -1 (for reusing the input objects)
};
using Rules = std::vector<Rule>;
using Seq = std::vector<int32_t>;

// stages named in budget errors and deadline checks (the labels live in normalize.pyx)
enum Stage { ST_INPUT = 0, ST_EPS = 1, ST_RR = 2, ST_UNPROD = 3, ST_FIXED = 4 };
// outcomes of run()
enum Outcome {
    OK = 0,
    E_PYTHON = 1,        // a callback raised (the exception is pending in the caller)
    E_TOO_COMPLEX = 2,   // fail_stage, fail_n
    E_EMPTY = 3,         // fail_sym: the start symbol derives no terminal string
    E_NO_FIXED_POINT = 4,
    E_CHECK = 5,         // the post-condition failed (the caller re-runs it in Python for its message)
};

typedef int (*check_fn)(void* ctx, int stage);                         // 0, or -1 on a Python error
typedef int (*stem_fn)(void* ctx, const std::string& base, std::string* out);

struct Abort {
    int code;
};

class Normalizer {
  public:
    std::vector<int32_t> pool;
    std::vector<std::string> names;  // UTF-8 (surrogatepass) of every symbol, fresh ones appended
    std::vector<char> term;          // term[x]: x is a terminal
    std::unordered_set<std::string> used;
    Rules input;
    int32_t start = 0;
    long max_rules = 0;
    long counter = 0;
    long steps = 0;
    bool corners_used = false;
    void* ctx = nullptr;
    check_fn check_cb = nullptr;
    stem_fn stem_cb = nullptr;
    int fail_stage = 0;
    long fail_n = 0;
    int32_t fail_sym = -1;
    Rules result;

    int32_t add_symbol(const std::string& name, bool is_term) {
        names.push_back(name);
        term.push_back(is_term ? 1 : 0);
        return (int32_t)names.size() - 1;
    }

    void add_used(const std::string& name) { used.insert(name); }

    int run() {
        try {
            result = normalize_rules();
            return OK;
        } catch (const Abort& a) {
            return a.code;
        }
    }

  private:
    std::unordered_map<int32_t, std::string> stem_of_sym_;
    std::unordered_map<std::string, std::string> stem_of_str_;

    // ------------------------------------------------------------------ rules
    const int32_t* rhs(const Rule& r) const { return pool.data() + r.off; }
    int32_t last(const Rule& r) const { return pool[r.off + r.n - 1]; }

    Rule make(int32_t lhs, const Seq& s) {
        Rule r{lhs, (int32_t)pool.size(), (int32_t)s.size(), -1};
        pool.insert(pool.end(), s.begin(), s.end());
        return r;
    }
    Seq seq_of(const Rule& r) const { return Seq(rhs(r), rhs(r) + r.n); }

    bool equal(const Rule& a, const Rule& b) const {
        if (a.lhs != b.lhs || a.n != b.n) return false;
        if (a.off == b.off) return true;
        return std::memcmp(rhs(a), rhs(b), sizeof(int32_t) * (size_t)a.n) == 0;
    }
    bool same_list(const Rules& a, const Rules& b) const {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (!equal(a[i], b[i])) return false;
        return true;
    }
    static uint64_t mix(uint64_t h) {
        h ^= h >> 30;
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 27;
        h *= 0x94d049bb133111ebULL;
        h ^= h >> 31;
        return h;
    }
    uint64_t hash(const Rule& r) const {
        uint64_t h = mix((uint64_t)(uint32_t)r.lhs + 0x9e3779b97f4a7c15ULL * (uint64_t)(r.n + 1));
        const int32_t* p = rhs(r);
        for (int32_t i = 0; i < r.n; ++i) h = mix(h ^ (uint64_t)(uint32_t)p[i]) + (uint64_t)i;
        return h;
    }

    // ``list(dict.fromkeys(rules))``: first occurrences, in order
    Rules dedupe(const Rules& in) const {
        size_t cap = 16;
        while (cap < 2 * in.size()) cap <<= 1;
        std::vector<int32_t> slot(cap, -1);
        std::vector<uint64_t> hs;
        Rules out;
        out.reserve(in.size());
        hs.reserve(in.size());
        for (const Rule& r : in) {
            uint64_t h = hash(r);
            size_t i = (size_t)h & (cap - 1);
            bool dup = false;
            while (slot[i] >= 0) {
                if (hs[slot[i]] == h && equal(out[slot[i]], r)) {
                    dup = true;
                    break;
                }
                i = (i + 1) & (cap - 1);
            }
            if (dup) continue;
            slot[i] = (int32_t)out.size();
            out.push_back(r);
            hs.push_back(h);
        }
        return out;
    }

    // ------------------------------------------------------------------ budget
    void check(int stage) {
        if (check_cb(ctx, stage) < 0) throw Abort{E_PYTHON};
    }
    void tick(int stage) { check(stage); }
    void budget(long n, int stage) {
        ++steps;
        if (steps % 256 == 0) check(stage);  // CompileBudget.tick (_CHECK_EVERY = 256)
        if (n > max_rules) {
            fail_stage = stage;
            fail_n = n;
            throw Abort{E_TOO_COMPLEX};
        }
    }

    // ------------------------------------------------------------------ fresh symbols
    std::string stem_of(const std::string& base) {
        auto it = stem_of_str_.find(base);
        if (it != stem_of_str_.end()) return it->second;
        std::string stem;
        bool ascii = true;
        for (unsigned char c : base)
            if (c >= 0x80) ascii = false;
        if (ascii) {
            // re.sub(r"[^a-z0-9_]", "_", base.lower()).strip("_") or "n", "n" before a digit
            std::string s;
            s.reserve(base.size());
            for (unsigned char c : base) {
                if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
                bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                s.push_back(keep ? (char)c : '_');
            }
            size_t b = s.find_first_not_of('_');
            if (b == std::string::npos) {
                stem = "n";
            } else {
                size_t e = s.find_last_not_of('_');
                stem = s.substr(b, e - b + 1);
            }
            if (!(stem[0] >= 'a' && stem[0] <= 'z')) stem = "n" + stem;
        } else if (stem_cb(ctx, base, &stem) < 0) {
            throw Abort{E_PYTHON};
        }
        stem_of_str_.emplace(base, stem);
        return stem;
    }

    int32_t fresh_named(const std::string& stem, const char* kind) {
        while (true) {
            ++counter;
            std::string name = stem + "__" + kind + std::to_string(counter);
            if (used.insert(name).second) return add_symbol(name, false);
        }
    }
    int32_t fresh(int32_t base, const char* kind) {
        auto it = stem_of_sym_.find(base);
        if (it == stem_of_sym_.end()) it = stem_of_sym_.emplace(base, stem_of(names[base])).first;
        return fresh_named(it->second, kind);
    }

    // ------------------------------------------------------------------ sets over symbols
    size_t nsym() const { return names.size(); }
    static bool in(const std::vector<char>& s, int32_t x) { return (size_t)x < s.size() && s[x]; }

    // the least set S of lhs's with ``A in S`` whenever some rule ``A -> X1..Xn`` has every needed
    // symbol in S (terminals count as given when ``terminals_given``); pending[i] == 0 iff rule i
    // has all its needed symbols in S
    void derivable(const Rules& rules, bool terminals_given, std::vector<char>& out,
                   std::vector<int32_t>& pending) const {
        out.assign(nsym(), 0);
        pending.assign(rules.size(), 0);
        std::vector<int32_t> head(nsym(), -1), next, user;
        std::vector<int32_t> work;
        for (size_t i = 0; i < rules.size(); ++i) {
            const Rule& r = rules[i];
            const int32_t* p = rhs(r);
            int32_t cnt = 0;
            for (int32_t k = 0; k < r.n; ++k) {
                int32_t x = p[k];
                if (terminals_given && term[x]) continue;
                ++cnt;
                user.push_back((int32_t)i);
                next.push_back(head[x]);
                head[x] = (int32_t)user.size() - 1;
            }
            pending[i] = cnt;
            if (!cnt && !out[r.lhs]) {
                out[r.lhs] = 1;
                work.push_back(r.lhs);
            }
        }
        while (!work.empty()) {
            int32_t a = work.back();
            work.pop_back();
            for (int32_t e = head[a]; e >= 0; e = next[e]) {
                int32_t i = user[e];
                if (!--pending[i]) {
                    int32_t lhs = rules[i].lhs;
                    if (!out[lhs]) {
                        out[lhs] = 1;
                        work.push_back(lhs);
                    }
                }
            }
        }
    }

    // _reachable: the rules whose lhs is reachable from start (the same list when all are)
    Rules reachable(const Rules& rules, int32_t start_sym) const {
        size_t ns = nsym();
        std::vector<int32_t> head(ns, -1), next(rules.size(), -1);
        std::vector<char> has(ns, 0);
        for (size_t i = rules.size(); i-- > 0;) {
            int32_t a = rules[i].lhs;
            next[i] = head[a];
            head[a] = (int32_t)i;
            has[a] = 1;
        }
        std::vector<char> reach(term.begin(), term.end());
        reach.resize(ns, 0);
        reach[start_sym] = 1;
        std::vector<int32_t> work{start_sym};
        while (!work.empty()) {
            int32_t a = work.back();
            work.pop_back();
            for (int32_t i = head[a]; i >= 0; i = next[i]) {
                const int32_t* p = rhs(rules[i]);
                for (int32_t k = 0; k < rules[i].n; ++k)
                    if (!reach[p[k]]) {
                        reach[p[k]] = 1;
                        work.push_back(p[k]);
                    }
            }
        }
        bool all = true;
        for (size_t x = 0; x < ns && all; ++x)
            if (has[x] && !reach[x]) all = false;
        if (all) return rules;
        Rules out;
        for (const Rule& r : rules)
            if (reach[r.lhs]) out.push_back(r);
        return out;
    }

    // ------------------------------------------------------------------ 1. clean
    Rules clean(const Rules& rules, int32_t start_sym, bool all_productive) {
        tick(ST_UNPROD);
        if (all_productive) return reachable(rules, start_sym);
        std::vector<char> productive;
        std::vector<int32_t> pending;
        derivable(rules, true, productive, pending);
        if (!in(productive, start_sym)) {
            fail_sym = start_sym;
            throw Abort{E_EMPTY};
        }
        bool any = false;
        for (int32_t p : pending)
            if (p) any = true;
        if (!any) return reachable(rules, start_sym);
        Rules kept;
        for (size_t i = 0; i < rules.size(); ++i)
            if (!pending[i]) kept.push_back(rules[i]);
        return reachable(kept, start_sym);
    }

    Rules without(const Rules& rules, const std::vector<char>& empty, int32_t start_sym) {
        if (in(empty, start_sym)) {
            fail_sym = start_sym;
            throw Abort{E_EMPTY};
        }
        Rules out;
        for (const Rule& r : rules) {
            if (in(empty, r.lhs)) continue;
            bool ok = true;
            const int32_t* p = rhs(r);
            for (int32_t k = 0; k < r.n && ok; ++k)
                if (in(empty, p[k])) ok = false;
            if (ok) out.push_back(r);
        }
        return reachable(out, start_sym);
    }

    // ------------------------------------------------------------------ 2. ε-elimination
    struct Eps {
        std::vector<char> nullable, only_empty, empty;
        std::unordered_map<std::string, int32_t> spans;
        Rules out;
    };

    static std::string key_of(const int32_t* p, size_t n) {
        return std::string(reinterpret_cast<const char*>(p), n * sizeof(int32_t));
    }

    bool disjoint_nullable(const Eps& e, const int32_t* p, size_t n) const {
        for (size_t k = 0; k < n; ++k)
            if (in(e.nullable, p[k])) return false;
        return true;
    }
    bool all_in(const std::vector<char>& s, const int32_t* p, size_t n) const {
        for (size_t k = 0; k < n; ++k)
            if (!in(s, p[k])) return false;
        return true;
    }

    // alternatives (each non-empty) whose union is L(seq) minus ε
    std::vector<Seq> nonempty_alts(Eps& e, const Seq& seq) {
        std::vector<Seq> alts;
        if (disjoint_nullable(e, seq.data(), seq.size())) {
            if (!seq.empty()) alts.push_back(seq);
            return alts;
        }
        size_t k = 0;
        for (int32_t s : seq)
            if (in(e.nullable, s)) ++k;
        if (k <= 3) {  // _DIRECT_EXPANSION_LIMIT
            alts.push_back(Seq());
            for (int32_t s : seq) {
                if (in(e.nullable, s)) {
                    size_t m = alts.size();
                    std::vector<Seq> next;
                    next.reserve(2 * m);
                    for (size_t i = 0; i < m; ++i) {
                        next.push_back(alts[i]);
                        next.back().push_back(s);
                    }
                    for (size_t i = 0; i < m; ++i) next.push_back(alts[i]);
                    alts.swap(next);
                } else {
                    for (Seq& a : alts) a.push_back(s);
                }
            }
            std::vector<Seq> out;
            for (Seq& a : alts)
                if (!a.empty()) out.push_back(std::move(a));
            return out;
        }
        size_t mid = seq.size() / 2;
        Seq left(seq.begin(), seq.begin() + (long)mid), right(seq.begin() + (long)mid, seq.end());
        Seq lp = span_symbol(e, left);
        Seq rp = span_symbol(e, right);
        Seq both = lp;
        both.insert(both.end(), rp.begin(), rp.end());
        alts.push_back(both);
        if (all_in(e.nullable, right.data(), right.size())) alts.push_back(lp);
        if (all_in(e.nullable, left.data(), left.size())) alts.push_back(rp);
        return alts;
    }

    // ``for alt in nonempty_alts(seq): out.append(Rule(lhs, alt))``, the direct expansion (at most
    // three nullable occurrences) written straight into the pool: alternative m (m = 0, 1, ...)
    // omits the t-th nullable occurrence iff bit t of m is set, which is the order in which the
    // Python expansion lists them (each nullable symbol's "with" copies before its "without" ones)
    void emit_alts(Eps& e, int32_t lhs, const Seq& seq) {
        size_t k = 0;
        for (int32_t s : seq)
            if (in(e.nullable, s)) ++k;
        if (k == 0 || k > 3) {
            for (const Seq& alt : nonempty_alts(e, seq)) {
                e.out.push_back(make(lhs, alt));
                budget((long)e.out.size(), ST_EPS);
            }
            return;
        }
        for (uint32_t m = 0; m < (1u << k); ++m) {
            int32_t off = (int32_t)pool.size();
            uint32_t t = 0;
            for (int32_t s : seq) {
                if (in(e.nullable, s)) {
                    if (!((m >> t) & 1u)) pool.push_back(s);
                    ++t;
                } else {
                    pool.push_back(s);
                }
            }
            int32_t n = (int32_t)pool.size() - off;
            if (n == 0) continue;  // (the alternative omitting everything: ε)
            e.out.push_back(Rule{lhs, off, n, -1});
            budget((long)e.out.size(), ST_EPS);
        }
    }

    Seq span_symbol(Eps& e, const Seq& seq) {
        if (seq.size() == 1 || disjoint_nullable(e, seq.data(), seq.size())) return seq;
        std::string key = key_of(seq.data(), seq.size());
        auto it = e.spans.find(key);
        int32_t name;
        if (it != e.spans.end()) {
            name = it->second;
        } else {
            int32_t base = -1;
            for (int32_t s : seq)
                if (!term[s]) {
                    base = s;
                    break;
                }
            name = fresh(base, "span");
            e.spans.emplace(key, name);
            if (all_in(e.only_empty, seq.data(), seq.size())) {
                e.empty.resize(nsym(), 0);
                e.empty[name] = 1;
            }
            emit_alts(e, name, seq);
        }
        return Seq{name};
    }

    // the nullable symbols that derive a non-empty string too (every symbol productive)
    std::vector<char> nonempty(const Rules& rules, const std::vector<char>& nullable) const {
        std::vector<char> ne(nsym(), 0);
        std::vector<int32_t> head(nsym(), -1), next, user, work;
        for (const Rule& r : rules) {
            int32_t a = r.lhs;
            if (!in(nullable, a) || ne[a]) continue;
            const int32_t* p = rhs(r);
            for (int32_t k = 0; k < r.n; ++k) {
                int32_t s = p[k];
                if (!in(nullable, s)) {
                    ne[a] = 1;
                    work.push_back(a);
                    break;
                }
                user.push_back(a);
                next.push_back(head[s]);
                head[s] = (int32_t)user.size() - 1;
            }
        }
        while (!work.empty()) {
            int32_t x = work.back();
            work.pop_back();
            for (int32_t i = head[x]; i >= 0; i = next[i]) {
                int32_t b = user[i];
                if (!ne[b]) {
                    ne[b] = 1;
                    work.push_back(b);
                }
            }
        }
        return ne;
    }

    Rules eliminate_epsilon(const Rules& rules, int32_t& start_sym, std::vector<char>& empty_out) {
        tick(ST_EPS);
        Rules candidates;
        for (const Rule& r : rules) {
            bool has_term = false;
            const int32_t* p = rhs(r);
            for (int32_t k = 0; k < r.n && !has_term; ++k)
                if (term[p[k]]) has_term = true;
            if (!has_term) candidates.push_back(r);
        }
        Eps e;
        std::vector<int32_t> pending;
        derivable(candidates, false, e.nullable, pending);
        bool any = false;
        for (char c : e.nullable)
            if (c) any = true;
        empty_out.clear();
        if (!any) return rules;
        std::vector<char> ne = nonempty(rules, e.nullable);
        e.only_empty.assign(nsym(), 0);
        for (size_t x = 0; x < e.nullable.size(); ++x) e.only_empty[x] = e.nullable[x] && !ne[x];
        e.empty = e.only_empty;
        for (const Rule& r : rules) {
            if (r.n && disjoint_nullable(e, rhs(r), (size_t)r.n)) {
                e.out.push_back(r);
                budget((long)e.out.size(), ST_EPS);
                continue;
            }
            emit_alts(e, r.lhs, seq_of(r));
        }
        if (in(e.nullable, start_sym)) {
            int32_t s0 = fresh(start_sym, "start");
            e.out.push_back(make(s0, Seq{start_sym}));
            e.out.push_back(make(s0, Seq()));
            start_sym = s0;
        }
        empty_out = e.empty;
        return dedupe(e.out);
    }

    // ------------------------------------------------------------------ graphs
    using Graph = std::vector<Seq>;  // successors per symbol id (sorted by name where it matters)

    bool name_less(int32_t a, int32_t b) const { return names[a] < names[b]; }

    void sort_by_name(Seq& v) const {
        std::sort(v.begin(), v.end(), [this](int32_t a, int32_t b) { return names[a] < names[b]; });
        v.erase(std::unique(v.begin(), v.end()), v.end());
    }

    // X -> Y iff some rule Y -> γ X (nonterminal X), successors sorted by name
    Graph right_end_graph(const Rules& rules) const {
        Graph g(nsym());
        for (const Rule& r : rules)
            if (r.n) {
                int32_t x = last(r);
                if (!term[x]) g[x].push_back(r.lhs);
            }
        for (Seq& s : g)
            if (s.size() > 1) sort_by_name(s);
        return g;
    }

    // normalize.py's _sccs: Tarjan's components over ``nodes`` in the same visiting order (the
    // successors are sorted already), each component in stack-pop order
    std::vector<Seq> sccs(const Seq& nodes, const Graph& g) const {
        size_t ns = g.size();
        std::vector<int32_t> index(ns, -1), low(ns, 0);
        std::vector<char> on(ns, 0);
        Seq stack;
        std::vector<std::pair<int32_t, size_t>> work;
        std::vector<Seq> out;
        int32_t counter_ = 0;
        for (int32_t root : nodes) {
            if (index[root] >= 0) continue;
            if (g[root].empty()) {
                index[root] = low[root] = counter_++;
                out.push_back(Seq{root});
                continue;
            }
            work.clear();
            work.emplace_back(root, 0);
            index[root] = low[root] = counter_++;
            stack.push_back(root);
            on[root] = 1;
            while (!work.empty()) {
                int32_t v = work.back().first;
                size_t& pos = work.back().second;
                if (pos < g[v].size()) {
                    int32_t w = g[v][pos++];
                    if (index[w] < 0) {
                        index[w] = low[w] = counter_++;
                        if (g[w].empty()) {
                            out.push_back(Seq{w});
                            continue;
                        }
                        stack.push_back(w);
                        on[w] = 1;
                        work.emplace_back(w, 0);
                    } else if (on[w]) {
                        low[v] = std::min(low[v], index[w]);
                    }
                    continue;
                }
                work.pop_back();
                if (!work.empty()) {
                    int32_t u = work.back().first;
                    low[u] = std::min(low[u], low[v]);
                }
                if (low[v] == index[v]) {
                    Seq comp;
                    while (true) {
                        int32_t x = stack.back();
                        stack.pop_back();
                        on[x] = 0;
                        comp.push_back(x);
                        if (x == v) break;
                    }
                    out.push_back(std::move(comp));
                }
            }
        }
        return out;
    }

    bool has_cycle(const Graph& g) const {
        // Kahn's algorithm: a cycle iff some node keeps an in-edge
        size_t ns = g.size();
        std::vector<int32_t> indeg(ns, 0);
        for (const Seq& s : g)
            for (int32_t y : s) ++indeg[y];
        Seq work;
        for (size_t x = 0; x < ns; ++x)
            if (!indeg[x]) work.push_back((int32_t)x);
        size_t done = 0;
        while (!work.empty()) {
            int32_t x = work.back();
            work.pop_back();
            ++done;
            for (int32_t y : g[x])
                if (!--indeg[y]) work.push_back(y);
        }
        return done != ns;
    }

    // ------------------------------------------------------------------ 3. unit cycles
    Rules collapse_unit_cycles(const Rules& rules, int32_t start_sym) {
        Graph unit(nsym());
        bool self_loop = false;
        Seq nodes;
        for (const Rule& r : rules)
            if (r.n == 1 && !term[rhs(r)[0]]) {
                int32_t b = rhs(r)[0];
                if (unit[r.lhs].empty()) nodes.push_back(r.lhs);
                unit[r.lhs].push_back(b);
                if (b == r.lhs) self_loop = true;
            }
        for (Seq& s : unit)
            if (s.size() > 1) {
                std::sort(s.begin(), s.end());
                s.erase(std::unique(s.begin(), s.end()), s.end());
            }
        // (which components, not their order, matters here)
        std::vector<int32_t> rep(nsym(), -1);
        bool any = false;
        for (const Seq& comp : sccs(nodes, unit)) {
            if (comp.size() < 2) continue;
            int32_t keep = -1;
            for (int32_t a : comp)
                if (a == start_sym) keep = a;
            if (keep < 0) {
                keep = comp[0];
                for (int32_t a : comp)
                    if (name_less(a, keep)) keep = a;
            }
            for (int32_t a : comp) rep[a] = keep;
            any = true;
        }
        Rules cur;
        if (any) {
            Rules mapped;
            mapped.reserve(rules.size());
            Seq tmp;
            for (const Rule& r : rules) {
                bool changed = rep[r.lhs] >= 0;
                const int32_t* p = rhs(r);
                for (int32_t k = 0; k < r.n && !changed; ++k)
                    if (rep[p[k]] >= 0) changed = true;
                if (!changed) {
                    mapped.push_back(r);
                    continue;
                }
                tmp.assign(p, p + r.n);
                for (int32_t& s : tmp)
                    if (rep[s] >= 0) s = rep[s];
                mapped.push_back(make(rep[r.lhs] >= 0 ? rep[r.lhs] : r.lhs, tmp));
            }
            cur = dedupe(mapped);
        } else if (!self_loop) {
            return rules;
        } else {
            cur = rules;
        }
        Rules out;
        out.reserve(cur.size());
        for (const Rule& r : cur)
            if (!(r.n == 1 && rhs(r)[0] == r.lhs)) out.push_back(r);
        return out;
    }

    // ------------------------------------------------------------------ 4. right recursion
    // an insertion-ordered map lhs -> rules (Python's dict: del + re-insert appends at the end)
    struct ByLhs {
        std::vector<int32_t> keys;
        std::vector<Rules> vals;
        std::vector<char> alive;
        std::unordered_map<int32_t, size_t> at;
        Rules& get(int32_t k) { return vals[at.at(k)]; }
        bool has(int32_t k) const { return at.count(k) != 0; }
        void set(int32_t k, Rules v) {
            auto it = at.find(k);
            if (it != at.end()) {
                vals[it->second] = std::move(v);
                return;
            }
            at.emplace(k, keys.size());
            keys.push_back(k);
            vals.push_back(std::move(v));
            alive.push_back(1);
        }
        void del(int32_t k) {
            auto it = at.find(k);
            alive[it->second] = 0;
            vals[it->second].clear();
            at.erase(it);
        }
        size_t total() const {
            size_t t = 0;
            for (size_t i = 0; i < keys.size(); ++i)
                if (alive[i]) t += vals[i].size();
            return t;
        }
    };

    bool ends_in(const Rules& rs, int32_t x) const {
        for (const Rule& r : rs)
            if (last(r) == x) return true;
        return false;
    }

    // y -> γ x  ==>  y -> γ δ for each x -> δ; false when over the cap
    bool inline_right_end(ByLhs& by, int32_t y, int32_t x, long& total, long cap) {
        Rules& ry = by.get(y);
        const Rules rx = by.get(x);  // (a copy: y == x never, but the map may move)
        Rules nw;
        long before = (long)ry.size();
        Seq tmp;
        for (const Rule& r : ry) {
            if (last(r) == x) {
                for (const Rule& d : rx) {
                    tmp.assign(rhs(r), rhs(r) + r.n - 1);
                    tmp.insert(tmp.end(), rhs(d), rhs(d) + d.n);
                    nw.push_back(make(y, tmp));
                }
            } else {
                nw.push_back(r);
            }
            if (total + (long)nw.size() - before > cap) return false;
        }
        Rules kept;
        kept.reserve(nw.size());
        for (const Rule& r : nw)
            if (!(r.n == 1 && rhs(r)[0] == y)) kept.push_back(r);
        Rules dd = dedupe(kept);
        total += (long)dd.size() - before;
        by.get(y) = std::move(dd);
        return true;
    }

    // a small set of vertices meeting every cycle of the component (greedy: self-loops first, then
    // the vertex with the most in x out edges in each remaining cyclic component, the earliest
    // member on ties). Over member positions: ``lg`` is the component's graph, hubs by position.
    std::vector<char> feedback_vertices(const Graph& lg) const {
        size_t m = lg.size();
        std::vector<char> hubs(m, 0);
        for (size_t i = 0; i < m; ++i)
            if (std::find(lg[i].begin(), lg[i].end(), (int32_t)i) != lg[i].end()) hubs[i] = 1;
        if (m == 1) return hubs;
        std::vector<int32_t> ind(m), outd(m);
        std::vector<char> cs(m, 0);
        Graph sub(m);
        while (true) {
            Seq rest;
            for (size_t i = 0; i < m; ++i) {
                sub[i].clear();
                if (!hubs[i]) rest.push_back((int32_t)i);
            }
            for (int32_t v : rest)
                for (int32_t w : lg[v])
                    if (!hubs[w]) sub[v].push_back(w);
            bool cyclic = false;
            std::fill(ind.begin(), ind.end(), 0);
            std::fill(outd.begin(), outd.end(), 0);
            for (const Seq& comp : sccs(rest, sub)) {
                if (comp.size() < 2) continue;
                cyclic = true;
                for (int32_t u : comp) cs[u] = 1;
                for (int32_t u : comp)
                    for (int32_t w : sub[u])
                        if (cs[w]) {
                            ++ind[w];
                            ++outd[u];
                        }
                int32_t best = -1;
                long best_score = -1;
                for (int32_t v : comp) {
                    long sc = (long)ind[v] * (long)outd[v];
                    if (best < 0 || sc > best_score || (sc == best_score && v < best)) {
                        best = v;
                        best_score = sc;
                    }
                }
                hubs[best] = 1;
                for (int32_t u : comp) cs[u] = 0;
            }
            if (!cyclic) return hubs;
        }
    }

    // hub construction into ``by``; false as soon as it would exceed ``cap`` rules
    bool break_by_hubs(const std::vector<std::pair<int32_t, Rules>>& part, const Seq& members,
                       const Graph& lg, long cap, ByLhs& by) {
        size_t m = members.size();
        for (const auto& kv : part) by.set(kv.first, kv.second);
        long total = 0;
        for (const auto& kv : part) total += (long)kv.second.size();
        std::vector<char> hubs = feedback_vertices(lg);
        std::vector<char> eliminated(m, 0);
        for (size_t i = 0; i < m; ++i) {
            if (hubs[i]) continue;
            int32_t x = members[i];
            for (size_t j = 0; j < m; ++j) {
                int32_t y = members[j];
                if (j == i || eliminated[j] || !ends_in(by.get(y), x)) continue;
                if (!inline_right_end(by, y, x, total, cap)) return false;
            }
            eliminated[i] = 1;
        }
        Seq ordered;
        for (size_t i = 0; i < m; ++i)
            if (hubs[i]) ordered.push_back(members[i]);
        for (size_t i = 0; i < ordered.size(); ++i) {
            int32_t a = ordered[i];
            for (size_t j = 0; j < i; ++j) {
                int32_t b = ordered[j];
                if (ends_in(by.get(a), b))
                    if (!inline_right_end(by, a, b, total, cap)) return false;
            }
            Rules rec, base;
            for (const Rule& r : by.get(a)) (last(r) == a ? rec : base).push_back(r);
            if (rec.empty()) continue;
            int32_t n = fresh(a, "rr");
            Rules nw = base, nrules;
            Seq tmp;
            for (const Rule& r : base) {
                tmp.assign(1, n);
                tmp.insert(tmp.end(), rhs(r), rhs(r) + r.n);
                nw.push_back(make(a, tmp));
            }
            for (const Rule& r : rec) {
                tmp.assign(rhs(r), rhs(r) + r.n - 1);
                nrules.push_back(make(n, tmp));
            }
            for (const Rule& r : rec) {
                tmp.assign(1, n);
                tmp.insert(tmp.end(), rhs(r), rhs(r) + r.n - 1);
                nrules.push_back(make(n, tmp));
            }
            total += (long)nw.size() + (long)nrules.size() - (long)by.get(a).size();
            if (total > cap) return false;
            by.set(a, std::move(nw));
            by.set(n, std::move(nrules));
        }
        return true;
    }

    // right-corner construction on one component into ``out`` (see normalize.py)
    void break_by_right_corners(const std::vector<std::pair<int32_t, Rules>>& part, const Seq& members,
                                const std::unordered_map<int32_t, int32_t>& pos, ByLhs& out) {
        size_t m = members.size();
        struct Internal {
            int32_t a;  // member positions
            Seq gamma;
            int32_t b;
        };
        std::vector<Internal> internal;
        std::vector<std::vector<Seq>> exits(m);
        Graph unit(m);
        for (size_t i = 0; i < m; ++i) {
            for (const Rule& r : part[i].second) {
                auto it = pos.find(last(r));
                if (it != pos.end()) {
                    internal.push_back(Internal{(int32_t)i, Seq(rhs(r), rhs(r) + r.n - 1), it->second});
                    if (r.n == 1) unit[i].push_back(it->second);
                } else {
                    exits[i].push_back(seq_of(r));
                }
            }
        }
        std::vector<Seq> exit_sym(m);
        std::vector<char> has_exit(m, 0);
        for (size_t i = 0; i < m; ++i) {
            if (exits[i].size() == 1) {
                exit_sym[i] = exits[i][0];
                has_exit[i] = 1;
            } else if (!exits[i].empty()) {
                int32_t e = fresh(members[i], "exit");
                Rules rs;
                for (const Seq& beta : exits[i]) rs.push_back(make(e, beta));
                out.set(e, std::move(rs));
                exit_sym[i] = Seq{e};
                has_exit[i] = 1;
            }
        }
        std::vector<char> by_unit(m, 0);
        Seq q(m);
        Seq tmp;
        for (size_t ia = 0; ia < m; ++ia) {
            int32_t a = members[ia];
            std::fill(by_unit.begin(), by_unit.end(), 0);
            by_unit[ia] = 1;
            Seq work{(int32_t)ia};
            while (!work.empty()) {
                int32_t x = work.back();
                work.pop_back();
                for (int32_t y : unit[x])
                    if (!by_unit[y]) {
                        by_unit[y] = 1;
                        work.push_back(y);
                    }
            }
            for (size_t ib = 0; ib < m; ++ib)
                q[ib] = fresh_named(stem_of(names[a] + "_" + names[members[ib]]), "rc");
            Rules rules_a;
            for (size_t ib = 0; ib < m; ++ib) {
                if (!has_exit[ib]) continue;
                tmp.assign(1, q[ib]);
                tmp.insert(tmp.end(), exit_sym[ib].begin(), exit_sym[ib].end());
                rules_a.push_back(make(a, tmp));
                if (by_unit[ib])
                    for (const Seq& beta : exits[ib]) rules_a.push_back(make(a, beta));
            }
            out.set(a, std::move(rules_a));
            for (size_t ib = 0; ib < m; ++ib) out.set(q[ib], Rules());
            for (const Internal& it : internal) {
                int32_t qb = q[it.b];
                tmp.assign(1, q[it.a]);
                tmp.insert(tmp.end(), it.gamma.begin(), it.gamma.end());
                Rule r1 = make(qb, tmp);
                out.get(qb).push_back(r1);
                if (!it.gamma.empty() && by_unit[it.a]) {
                    Rule r2 = make(qb, it.gamma);
                    out.get(qb).push_back(r2);
                }
            }
        }
        for (size_t i = 0; i < out.keys.size(); ++i)
            if (out.alive[i]) out.vals[i] = dedupe(out.vals[i]);
    }

    Rules break_right_recursion(const Rules& rules) {
        Graph graph = right_end_graph(rules);
        Seq nodes;
        {
            std::vector<char> seen(nsym(), 0);
            for (const Rule& r : rules)
                if (!seen[r.lhs]) {
                    seen[r.lhs] = 1;
                    nodes.push_back(r.lhs);
                }
        }
        std::vector<Seq> comps;
        for (Seq& c : sccs(nodes, graph)) {
            bool self = std::find(graph[c[0]].begin(), graph[c[0]].end(), c[0]) != graph[c[0]].end();
            if (c.size() > 1 || self) comps.push_back(std::move(c));
        }
        corners_used = false;
        if (comps.empty()) return rules;
        // Python's by_lhs dict: the rules grouped by lhs in first-appearance order (one counting
        // sort), a component's members dropped from their places and its result's keys appended
        std::vector<int32_t> order(nsym(), -1);
        for (size_t i = 0; i < nodes.size(); ++i) order[nodes[i]] = (int32_t)i;
        std::vector<int32_t> start_of(nodes.size() + 1, 0);
        for (const Rule& r : rules) ++start_of[order[r.lhs] + 1];
        for (size_t i = 0; i < nodes.size(); ++i) start_of[i + 1] += start_of[i];
        Rules grouped(rules.size());
        {
            std::vector<int32_t> fill(start_of.begin(), start_of.end() - 1);
            for (const Rule& r : rules) grouped[fill[order[r.lhs]]++] = r;
        }
        std::vector<char> moved(nodes.size(), 0);
        std::vector<Rules> appended;
        for (Seq& comp : comps) {
            Seq members = comp;
            std::sort(members.begin(), members.end(),
                      [&order](int32_t a, int32_t b) { return order[a] < order[b]; });
            std::vector<std::pair<int32_t, Rules>> part;
            long comp_rules = 0;
            for (int32_t a : members) {
                int32_t i = order[a];
                part.emplace_back(a, Rules(grouped.begin() + start_of[i], grouped.begin() + start_of[i + 1]));
                comp_rules += start_of[i + 1] - start_of[i];
            }
            long corner_size = (long)members.size() * (2 * comp_rules + (long)members.size());
            std::unordered_map<int32_t, int32_t> pos;
            for (size_t i = 0; i < members.size(); ++i) pos.emplace(members[i], (int32_t)i);
            Graph lg(members.size());  // the component's right-end graph over member positions
            for (size_t i = 0; i < members.size(); ++i)
                for (int32_t w : graph[members[i]]) {
                    auto it = pos.find(w);
                    if (it != pos.end()) lg[i].push_back(it->second);
                }
            ByLhs result;
            if (!break_by_hubs(part, members, lg, corner_size, result)) {
                result = ByLhs();
                break_by_right_corners(part, members, pos, result);
                corners_used = true;
            }
            long total = (long)rules.size() - comp_rules + (long)result.total();
            budget(total, ST_RR);
            for (int32_t a : members) moved[order[a]] = 1;
            for (size_t i = 0; i < result.keys.size(); ++i)
                if (result.alive[i]) appended.push_back(std::move(result.vals[i]));
        }
        Rules out;
        out.reserve(rules.size());
        for (size_t i = 0; i < nodes.size(); ++i)
            if (!moved[i]) out.insert(out.end(), grouped.begin() + start_of[i], grouped.begin() + start_of[i + 1]);
        for (const Rules& rs : appended) out.insert(out.end(), rs.begin(), rs.end());
        return out;
    }

    // ------------------------------------------------------------------ driver
    bool structure_ok(const Rules& rules, int32_t start_sym) const {
        std::vector<char> lhs(nsym(), 0), on_rhs(nsym(), 0);
        for (const Rule& r : rules) lhs[r.lhs] = 1;
        if (!lhs[start_sym]) return false;
        for (const Rule& r : rules)
            for (int32_t k = 0; k < r.n; ++k) {
                int32_t s = rhs(r)[k];
                on_rhs[s] = 1;
                if (!term[s] && !lhs[s]) return false;
            }
        for (const Rule& r : rules)
            if (!r.n && (r.lhs != start_sym || on_rhs[start_sym])) return false;
        return true;
    }

    Rules normalize_rules() {
        Rules rules = dedupe(input);
        budget((long)rules.size(), ST_INPUT);
        rules = clean(rules, start, false);
        std::vector<char> empty;
        rules = eliminate_epsilon(rules, start, empty);
        tick(ST_UNPROD);
        bool any_empty = false;
        for (char c : empty)
            if (c) any_empty = true;
        if (any_empty) rules = without(rules, empty, start);
        bool acyclic = false;
        int round = 0;
        for (; round < 100; ++round) {
            tick(ST_FIXED);
            Rules before = rules;
            rules = collapse_unit_cycles(rules, start);
            rules = break_right_recursion(rules);
            if (same_list(rules, before)) break;
            rules = clean(rules, start, !corners_used);
            if (same_list(rules, before)) break;
            if (!has_cycle(right_end_graph(rules))) {
                acyclic = true;
                break;
            }
        }
        if (round == 100) throw Abort{E_NO_FIXED_POINT};
        if (!structure_ok(rules, start) || (!acyclic && has_cycle(right_end_graph(rules)))) {
            result = rules;
            throw Abort{E_CHECK};
        }
        return rules;
    }
};

}  // namespace glrnorm
