"""The native lazy-lexer step (``glrmask_ext.lazy_step``: :meth:`Lexer.step`, :meth:`Lexer.row`
and the lane steps, closures and lookaheads under them, in C over the lexer's own tables) is the
Python step: the same calls, in the same order, give the
same states, events and conditions, and leave the lexer with the same interned states — on
random walks over the shipped grammars, JSON Schema lexers replaying their documents, and
terminals full of lookarounds, lookbehinds and word boundaries; with ``row``, futures and
condition steps interleaved (they share the lane memos), with the same budget errors; and the
dense export (every state's row) is the same array for array."""
from __future__ import annotations

import gc
import json
import random
import weakref
from pathlib import Path

import pytest

from glrmask.errors import GlrmaskError, GrammarTooComplex
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir
from glrmask.lexer import Lexer
from glrmask.lexer import lexer as lexer_module
from glrmask.lexer.dfa import LexerDFA

try:
    from glrmask_ext import lazy_step
except ImportError:  # pragma: no cover - skipped below
    lazy_step = None

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_FILES = sorted((ROOT / "grammars").glob("*.lark"))
SAMPLE = ROOT / "tests" / "data" / "jsonschema" / "maskbench_sample.jsonl"

pytestmark = pytest.mark.skipif(lexer_module._native_step is None, reason="glrmask_ext.lazy_step is not built")

LOOKAROUNDS = [
    ("KEY", r'"(?!(?:name|id)")(?:[^"\\]|\\.)*"'),
    ("NAME", r'"name"'),
    ("NUM", r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"),
    ("WORD", r"\w+\b"),
    ("BOUNDED", r"[a-z]id\B[a-z]\b"),
    ("AFTER", r"x(?<=x)y+(?<!xy)z"),
    ("TAIL", r"ab+(?=c|d(?!e))"),
    ("LAZY", r"<.*?>"),
    ("NEG", r"q(?!r)[a-z]"),
    ("ALT", r"[a-z]*[a-c]+d"),  # two threads reach the same instructions: one is dropped
]


def walk(lexer: Lexer, texts: list[bytes], seed: int, n_random: int, step=None) -> list:
    """Every answer of a fixed sequence of calls: each text scanned from the initial state
    (again from it after a dead end), then ``n_random`` bytes of a random walk over the byte
    classes, with ``row``, ``has_future``, ``cond_step`` and ``cond_satisfiable`` mixed in;
    ``step(lexer, state, byte)`` in place of ``lexer.step``."""
    rng = random.Random(seed)
    out: list = []

    def feed(state: int, byte: int) -> int:
        nxt, events = lexer.step(state, byte) if step is None else step(lexer, state, byte)
        out.append((state, byte, nxt, events))
        for term, cond in events:
            if cond >= 2 and rng.random() < 0.3:
                out.append(("cond", cond, lexer.cond_step(cond, rng.randrange(256)),
                            lexer.cond_satisfiable(cond), lexer.cond_at_end(cond)))
        if nxt >= 0 and rng.random() < 0.1:
            term = rng.choice(sorted(lexer.alive_terminals(nxt)))
            out.append(("future", nxt, term, lexer.has_future(nxt, term)))
        if nxt >= 0 and rng.random() < 0.02:
            out.append(("row", nxt, lexer.row(nxt)))
        return nxt if nxt >= 0 else lexer.initial

    for text in texts:
        state = lexer.initial
        for byte in text:
            state = feed(state, byte)
    state = lexer.initial
    for _ in range(n_random):
        cls, reps = lexer.byte_classes(state)
        k = rng.randrange(len(reps))
        state = feed(state, rng.choice([b for b in range(256) if cls[b] == k]))
    return out


def interned(lexer: Lexer) -> tuple:
    """What the lexer interned, through its public views."""
    lanes = [tuple(lexer.lane_entries(s, t) for t in sorted(lexer.alive_terminals(s)))
             for s in range(lexer.n_states)]
    return lexer.n_states, lexer.n_lane_states, lexer.n_conds, lanes


def assert_native_like_python(terminals, monkeypatch, texts=(), seed=0, n_random=3000, step=None) -> None:
    native_lexer = Lexer(terminals)
    native = walk(native_lexer, list(texts), seed, n_random, step)
    with monkeypatch.context() as m:
        for name, method in lexer_module.PYTHON_STEPPING.items():
            m.setattr(Lexer, name, method)
        python_lexer = Lexer(terminals)
        python = walk(python_lexer, list(texts), seed, n_random)
    assert native == python
    assert interned(native_lexer) == interned(python_lexer)


def schema_terminals(schema) -> list[tuple[str, str]]:
    g, _ = lower_json_schema_ir(schema)
    return [(t.name, t.pattern) for t in normalize(g).terminals.values()]


def test_the_native_steps_are_installed():
    for name, method in lexer_module.PYTHON_STEPPING.items():
        assert getattr(Lexer, name) is not method


# ``Lexer.step``, and ``step_plain`` (the lanes with no lookahead on native tables, the explorer's)
STEPS = pytest.mark.parametrize("step", [None, lazy_step and lazy_step.step_plain], ids=["step", "step_plain"])


@STEPS
@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_shipped_grammars_step_alike_natively(path, step, monkeypatch):
    g = normalize(load_grammar(str(path)))
    assert_native_like_python([(t.name, t.pattern) for t in g.terminals.values()], monkeypatch, step=step)


@STEPS
@pytest.mark.parametrize("seed", range(4))
def test_lookarounds_lookbehinds_and_boundaries_step_alike_natively(seed, step, monkeypatch):
    texts = [b'"name" "na" "ident" "id" "x\\"y" 12.5e+3 -0 01', b"xyyyz xyz ab abbbc abd abde qa qr <a>b> ababac abbcd",
             "wörd ab_c9 \u00e9\u20ac".encode()]
    assert_native_like_python(LOOKAROUNDS, monkeypatch, texts, seed=seed, step=step)


@STEPS
def test_json_schema_lexers_replaying_their_documents_step_alike_natively(step, monkeypatch):
    for i, line in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines()[:12]):
        rec = json.loads(line)
        try:
            terminals = schema_terminals(rec["schema"])
        except GlrmaskError:
            continue
        texts = [json.dumps(t["data"], ensure_ascii=False).encode() for t in rec.get("tests", [])]
        assert_native_like_python(terminals, monkeypatch, texts, seed=i, n_random=1000, step=step)


EMPTY_ITERATIONS = [
    ("OPT_BODY", r"(?:a|)*b"),  # an iteration may consume nothing: sre takes the tail then
    ("NESTED", r"(?:(?:x?)*y)+z"),
    ("COUNTED", r"(?:ab|a){0,3}c"),
    ("RANGE", r"[a-z]{2,5}!"),
    ("LAZY_COUNT", r"q{1,3}?r"),
    ("OPT_COUNT", r"(?:(?:m|n)?){3}o"),
    ("STRING", r'"(?:[^"\\]|\\.){0,12}"'),
]


@STEPS
@pytest.mark.parametrize("seed", range(3))
def test_repeats_whose_iterations_may_consume_nothing_step_alike_natively(seed, step, monkeypatch):
    texts = [b"aab b ab xxyz yz xyxyz ababc abac c ab! abcdef! qqr qr mno o mmmo", b'"abc" "a\\"b" ""']
    assert_native_like_python(EMPTY_ITERATIONS, monkeypatch, texts, seed=seed, step=step)


@pytest.mark.parametrize("state, byte", [(0, 256), (10**6, 65)])
def test_the_native_plain_step_refuses_what_the_step_refuses(state, byte):
    lexer = Lexer(LOOKAROUNDS)
    with pytest.raises(IndexError):
        lexer.step(state, byte)
    with pytest.raises(IndexError):
        lazy_step.step_plain(lexer, state, byte)
    assert lazy_step.step_plain(lexer, -1, 65) == lexer.step(-1, 65) == (-1, ())


def test_the_state_budget_ends_the_native_plain_step_at_the_same_call(monkeypatch):
    terminals = [("STR", r'"[a-z]{0,40}"'), ("NUM", r"[0-9]+")]

    def run(step) -> tuple:
        lexer = Lexer(terminals, max_states=30)
        answers = []
        with pytest.raises(GrammarTooComplex) as err:
            state = lexer.initial
            for byte in b'"' + b"abcdefghij" * 5 + b'"':
                state, events = step(lexer, state, byte)
                answers.append((state, events))
        return answers, str(err.value)

    assert run(lazy_step.step_plain) == run(Lexer.step)


def test_the_state_budget_ends_both_steps_at_the_same_call(monkeypatch):
    terminals = [("STR", r'"[a-z]{0,40}"'), ("NUM", r"[0-9]+")]

    def run() -> tuple:
        lexer = Lexer(terminals, max_states=30)
        answers = []
        with pytest.raises(GrammarTooComplex) as err:
            state = lexer.initial
            for byte in b'"' + b"abcdefghij" * 10:
                state, events = lexer.step(state, byte)
                answers.append((state, events))
        return answers, str(err.value)

    native = run()
    with monkeypatch.context() as m:
        for name, method in lexer_module.PYTHON_STEPPING.items():
            m.setattr(Lexer, name, method)
        python = run()
    assert native == python


def test_dense_exports_are_the_same_with_the_native_steps(monkeypatch):
    lexers = [[(t.name, t.pattern) for t in normalize(load_grammar(str(p))).terminals.values()]
              for p in GRAMMAR_FILES]
    for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:6]:
        try:
            lexers.append(schema_terminals(json.loads(line)["schema"]))
        except GlrmaskError:
            continue

    def export(terminals) -> dict:
        lexer = Lexer(terminals)
        arrays = LexerDFA.explore(lexer).arrays()
        return {name: arr.tobytes() for name, arr in arrays.items()}, interned(lexer)

    native = [export(t) for t in lexers]
    with monkeypatch.context() as m:
        for name, method in lexer_module.PYTHON_STEPPING.items():
            m.setattr(Lexer, name, method)
        python = [export(t) for t in lexers]
    assert native == python


def test_lexers_stepped_in_turn_step_as_each_one_alone():
    a_terms, b_terms = LOOKAROUNDS, [("NUM", r"[0-9]+"), ("WORD", r"[a-z]+"), ("STR", r'"[^"]*"')]
    text = b'"name" 12 ab "x" abbbc qa'
    alone = [Lexer(a_terms).scan(0, text), Lexer(b_terms).scan(0, text)]
    a, b = Lexer(a_terms), Lexer(b_terms)
    sa, sb, ea, eb = a.initial, b.initial, [], []
    for i, byte in enumerate(text):
        if sa >= 0:
            sa, ev = a.step(sa, byte)
            ea.extend((i + 1, t, c) for t, c in ev)
        if sb >= 0:
            sb, ev = b.step(sb, byte)
            eb.extend((i + 1, t, c) for t, c in ev)
    assert [(sa, ea), (sb, eb)] == alone


def test_a_stepped_lexer_is_freed_with_its_tables():
    lexer = Lexer(LOOKAROUNDS)
    lexer.scan(lexer.initial, b'"name" 12 ab')
    program = weakref.ref(lexer.prog)
    del lexer
    gc.collect()
    assert program() is None
