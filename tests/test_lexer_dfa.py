"""The dense lexer export (glrmask.lexer.dfa) behaves exactly like the lazy lexer it came from,
is minimal, and survives a round trip through arrays and an artifact file."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from glrmask.artifact import read_artifact, write_artifact
from glrmask.errors import ArtifactError, GrammarTooComplex
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.lexer import Lexer, LexerDFA

from _grammars import CASES

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
COMMON = ["ESCAPED_STRING", "SIGNED_NUMBER", "WORD", "CNAME", "WS", "NEWLINE", "C_COMMENT",
          "CPP_COMMENT", "SH_COMMENT", "HEXDIGIT"]
JSON_TEXTS = ['{"a": [1, -2.5e+3, true, false, null], "b\\u00e9\\n": {}}', '[0.5,"x\\"y", 12e3]',
              '"\\uZZ"', "-01.", "nul", 'tru "é中"']
SQL_TEXTS = ["SELECT a, \"b\"\"c\" FROM t WHERE x >= 1.5 AND y <> 'it''s' -- c\n",
             "select selected from fromage order by 2 desc limit .5", "1.2.3 a1_ 12x", "inNer Join"]
COMMON_TEXTS = ['"a\\"b" x_1 12.5e+3', "/* a */ */", "// c\n# d\n", "-1.5E-2 ff\t\r\n", "é中 A_b9"]


def grammar_lexer(source: str) -> Lexer:
    g = normalize(load_grammar(source))
    return Lexer([(t.name, t.pattern) for t in g.terminals.values()])


def common_lexer() -> Lexer:
    import lark  # a hard dependency: a broken install must fail, not skip

    pats = []
    for name in COMMON:
        parser = lark.Lark(f"%import common.{name}\nstart: {name}", parser="lalr")
        (term,) = [t for t in parser.terminals if t.name == name]
        pats.append((name, term.pattern.to_regexp()))
    return Lexer(pats)


def case_texts(case) -> list[bytes]:
    pieces = [p.encode() if isinstance(p, str) else p for p in case.pieces]
    rnd = random.Random(case.name)
    return [b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8))) for _ in range(30)]


LEXERS = (
    [("json", lambda: grammar_lexer(str(GRAMMARS / "json.lark")), [t.encode() for t in JSON_TEXTS])]
    + [("sql", lambda: grammar_lexer(str(GRAMMARS / "sql.lark")), [t.encode() for t in SQL_TEXTS])]
    + [(c.name, (lambda c=c: grammar_lexer(c.grammar)), case_texts(c)) for c in CASES]
    + [("lark_common", common_lexer, [t.encode() for t in COMMON_TEXTS])]
)
_CACHE: dict[str, tuple[Lexer, LexerDFA, list[bytes]]] = {}


@pytest.fixture(params=[name for name, _, _ in LEXERS])
def exported(request):
    name = request.param
    if name not in _CACHE:
        make, texts = next((m, t) for n, m, t in LEXERS if n == name)[0:2]
        lexer = make()
        _CACHE[name] = (lexer, LexerDFA.explore(lexer), texts)
    return _CACHE[name]


def walks(texts: list[bytes], rnd: random.Random, n: int = 60) -> list[bytes]:
    """Texts that match, spliced with random bytes and random cuts."""
    out = list(texts)
    for _ in range(n):
        t = rnd.choice(texts)
        i = rnd.randint(0, len(t))
        noise = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 3)))
        out.append(t[i:] + noise + rnd.choice(texts)[: rnd.randint(0, 10)])
    return out


def check_cond(lexer: Lexer, dfa: LexerDFA, c: int, rest: bytes) -> None:
    """The condition and its image agree at every point of ``rest`` and at the end."""
    d = dfa.cond_id(c)
    for b in rest:
        assert dfa.cond_holds_at_end(d) == lexer.cond_at_end(c)
        c, d = lexer.cond_step(c, b), dfa.cond_step(d, b)
        assert d == dfa.cond_id(c)
    assert dfa.cond_holds_at_end(d) == lexer.cond_at_end(c)


def lazy_trace(lexer: Lexer, q: int, data: bytes) -> list:
    """What a consumer observes along ``data`` from lazy state ``q``, judged by the lazy lexer
    only: deadness, futures, event terminals and each event condition's verdicts along the rest."""
    out = []
    for i, b in enumerate(data):
        q, ev = lexer.step(q, b)
        conds = []
        for t, c in ev:
            verdicts = []
            for b2 in data[i + 1:]:
                verdicts.append((c if c < 2 else "pending", lexer.cond_at_end(c)))
                c = lexer.cond_step(c, b2)
            verdicts.append((c if c < 2 else "pending", lexer.cond_at_end(c)))
            conds.append((t, tuple(verdicts)))
        out.append((q == Lexer.DEAD, lexer.futures(q), tuple(conds)))
        if q == Lexer.DEAD:
            break
    return out


# ---------------------------------------------------------------------------- agreement
def test_walks_agree_with_the_lazy_lexer(exported):
    lexer, dfa, texts = exported
    rnd = random.Random(7)
    for data in walks(texts, rnd):
        q, s = lexer.initial, dfa.initial
        for i, b in enumerate(data):
            q2, ev = lexer.step(q, b)
            s2, dev = dfa.step(s, b)
            assert dev == tuple((t, dfa.cond_id(c)) for t, c in ev), (data, i)
            assert (s2 == LexerDFA.DEAD) == (q2 == Lexer.DEAD)
            assert s2 == dfa.state_id(q2)
            assert dfa.futures_of(s2) == lexer.futures(q2)
            for _t, c in ev:
                check_cond(lexer, dfa, c, data[i + 1:])
            q, s = q2, s2
            if q == Lexer.DEAD or rnd.random() < 0.1:  # a new lexeme starts
                q, s = lexer.initial, dfa.initial


def test_every_explored_state_steps_like_its_lazy_original(exported):
    lexer, dfa, _ = exported
    for q in np.flatnonzero(dfa.lazy_state_map >= 0).tolist():
        s = dfa.state_id(q)
        assert dfa.futures_of(s) == lexer.futures(q)
        for b in range(256):
            q2, ev = lexer.step(q, b)
            assert dfa.step(s, b) == (dfa.state_id(q2), tuple((t, dfa.cond_id(c)) for t, c in ev))


def test_every_explored_condition_steps_like_its_lazy_original(exported):
    lexer, dfa, _ = exported
    for c in np.flatnonzero(dfa.lazy_cond_map >= 0).tolist():
        d = dfa.cond_id(c)
        assert dfa.cond_holds_at_end(d) == lexer.cond_at_end(c)
        assert [dfa.cond_step(d, b) for b in range(256)] == [
            dfa.cond_id(lexer.cond_step(c, b)) for b in range(256)
        ]


def test_true_and_false_keep_their_reserved_ids(exported):
    _, dfa, _ = exported
    assert dfa.cond_id(Lexer.TRUE) == 0 and dfa.cond_id(Lexer.FALSE) == 1
    assert (dfa.cond_trans[0] == 0).all() and (dfa.cond_trans[1] == 1).all()
    assert dfa.cond_at_end[:2].tolist() == [1, 0]
    assert dfa.state_id(Lexer.DEAD) == LexerDFA.DEAD


# ---------------------------------------------------------------------------- minimization
def test_merged_states_are_indistinguishable(exported):
    lexer, dfa, texts = exported
    rnd = random.Random(11)
    lazy = np.flatnonzero(dfa.lazy_state_map >= 0)
    classes: dict[int, list[int]] = {}
    for q in lazy.tolist():
        classes.setdefault(dfa.state_id(q), []).append(q)
    suffixes = walks(texts, rnd, 10)[:20]
    for members in classes.values():
        for q in members[1:4]:
            for data in suffixes + [bytes(rnd.randrange(256) for _ in range(6))]:
                assert lazy_trace(lexer, q, data) == lazy_trace(lexer, members[0], data)


def _naive_distinct_pairs(dfa: LexerDFA) -> set[tuple[int, int]]:
    """Table filling on the exported arrays: pairs of states (conditions first) that some byte
    string tells apart."""
    m = dfa.n_conds
    cd = {(a, b) for a in range(m) for b in range(m)
          if a != b and (dfa.cond_at_end[a] != dfa.cond_at_end[b] or min(a, b) < 2)}
    changed = True
    while changed:
        changed = False
        for a in range(m):
            for b in range(m):
                if a != b and (a, b) not in cd and any(
                        (dfa.cond_step(a, x), dfa.cond_step(b, x)) in cd for x in range(256)):
                    cd.add((a, b))
                    changed = True
    assert not [(a, b) for a in range(m) for b in range(m) if a != b and (a, b) not in cd], \
        "two exported conditions are equivalent"
    n = dfa.n_states

    def ev_sig(s: int, x: int):
        return dfa.step(s, x)[1]

    sd = set()
    for a in range(n):
        for b in range(n):
            if a != b and dfa.futures_of(a) != dfa.futures_of(b):
                sd.add((a, b))
    changed = True
    while changed:
        changed = False
        for a in range(n):
            for b in range(n):
                if a == b or (a, b) in sd:
                    continue
                for x in range(256):
                    ta, tb = int(dfa.trans[a, x]), int(dfa.trans[b, x])
                    if ((ta < 0) != (tb < 0) or (ta >= 0 and ta != tb and (ta, tb) in sd)
                            or ev_sig(a, x) != ev_sig(b, x)):
                        sd.add((a, b))
                        changed = True
                        break
    return {(a, b) for a in range(n) for b in range(n) if a != b and (a, b) not in sd}


@pytest.mark.parametrize("name", ["arithmetic", "csv"])
def test_exported_automata_are_minimal(name):
    dfa = LexerDFA.explore(grammar_lexer(str(GRAMMARS / f"{name}.lark")))
    assert _naive_distinct_pairs(dfa) == set()


def test_duplicate_states_are_merged():
    # after "a" and after "c" the thread sits at two different NFA positions that behave alike
    lexer = Lexer([("T", r"(?:ab|cb)d"), ("U", r"x")])
    dfa = LexerDFA.explore(lexer)
    qa, _ = lexer.step(lexer.initial, ord("a"))
    qc, _ = lexer.step(lexer.initial, ord("c"))
    assert qa != qc and dfa.state_id(qa) == dfa.state_id(qc)
    assert dfa.n_states < dfa.n_explored_states


def test_duplicate_conditions_are_merged():
    lexer = Lexer([("T", r"a(?=xb|yb)")])
    dfa = LexerDFA.explore(lexer)
    (_, c), = lexer.step(lexer.initial, ord("a"))[1]
    cx, cy = lexer.cond_step(c, ord("x")), lexer.cond_step(c, ord("y"))
    assert cx != cy and cx >= 2 and dfa.cond_id(cx) == dfa.cond_id(cy)
    assert dfa.n_conds < dfa.n_explored_conds


def test_restricted_start_states_are_exported():
    lexer = grammar_lexer(str(GRAMMARS / "json.lark"))
    only_number = lexer.restrict(lexer.initial, [lexer.terminal_names.index("NUMBER")])
    dfa = LexerDFA.explore(lexer, [only_number])
    s = dfa.state_id(only_number)
    assert dfa.futures_of(s) == lexer.futures(only_number)
    assert dfa.step(s, ord("t")) == (LexerDFA.DEAD, ())
    with pytest.raises(KeyError):
        LexerDFA.explore(lexer).state_id(lexer.restrict(lexer.initial, [0, 1]))


def test_many_terminals_use_several_futures_words():
    lexer = Lexer([(f"K{i}", f"k{i:03d}") for i in range(70)])
    dfa = LexerDFA.explore(lexer)
    assert dfa.futures.shape[1] == 2
    q, _ = lexer.step(lexer.initial, ord("k"))
    assert dfa.futures_of(dfa.state_id(q)) == frozenset(range(70))


# ---------------------------------------------------------------------------- budgets
def test_state_budget_raises_naming_the_limit():
    with pytest.raises(GrammarTooComplex, match="max_states"):
        LexerDFA.explore(grammar_lexer(str(GRAMMARS / "json.lark")), max_states=5)


def test_condition_budget_raises_naming_the_limit():
    with pytest.raises(GrammarTooComplex, match="max_conds"):
        LexerDFA.explore(Lexer([("T", r"a(?=xb|yb)")]), max_conds=1)


# ---------------------------------------------------------------------------- serialization
def test_arrays_round_trip(exported):
    _, dfa, _ = exported
    back = LexerDFA.from_arrays(dfa.arrays())
    for k, v in dfa.arrays().items():
        assert np.array_equal(back.arrays()[k], v) and back.arrays()[k].dtype == v.dtype, k


def test_artifact_file_round_trip(tmp_path):
    lexer = grammar_lexer(str(GRAMMARS / "json.lark"))
    dfa = LexerDFA.explore(lexer)
    write_artifact(tmp_path / "lex.bin", kind="lexer", meta={},
                   arrays={"lexer." + k: v for k, v in dfa.arrays().items()})
    back = LexerDFA.from_arrays(read_artifact(tmp_path / "lex.bin", kind="lexer").arrays,
                                prefix="lexer.")
    s = back.initial
    for b in b'{"k": [1.5e3, true]}':
        s, ev = back.step(s, b)
    assert ev == dfa.step(dfa.state_id(lexer.scan(lexer.initial, b'{"k": [1.5e3, true]')[0]),
                          ord("}"))[1]


def test_corrupt_arrays_are_refused():
    dfa = LexerDFA.explore(Lexer([("T", r"ab")]))
    arrs = dfa.arrays()
    with pytest.raises(ArtifactError, match="missing"):
        LexerDFA.from_arrays({k: v for k, v in arrs.items() if k != "ev_ptr"})
    bad = dict(arrs, trans=np.where(arrs["trans"] >= 0, 99, -1).astype(np.int32))
    with pytest.raises(ArtifactError, match="out of range"):
        LexerDFA.from_arrays(bad)
    with pytest.raises(ArtifactError, match="int32"):
        LexerDFA.from_arrays(dict(arrs, trans=arrs["trans"].astype(np.int64)))
