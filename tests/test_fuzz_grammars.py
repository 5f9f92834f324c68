"""Fuzzing the compiler with grammar text (issue #16): every call ends within its budget with a mask
or a :class:`glrmask.GlrmaskError` — never another exception, a hang or unbounded memory.

Inputs: mutated shipped grammars (spans deleted, duplicated, replaced by grammar punctuation),
random Lark grammars (rules, EBNF operators, literal and regex terminals), random GBNF grammars
(including large repetition counts) and random regexes (``format="regex"``, including lookarounds,
lazy and counted quantifiers). Each example compiles under ``limits={"max_seconds": B}`` and must
return within ``B × 1.5`` plus a margin for a loaded machine.

The default run is bounded and derandomized (the same examples every time, over a byte vocabulary
so static compiles are quick); ``pytest -m fuzz`` runs the same properties with many more random
examples over the GPT-2 vocabulary.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glrmask
from conftest import byte_vocab
from glrmask.errors import GlrmaskError

ROOT = Path(__file__).resolve().parent.parent
MARGIN_S = 10.0

CI_BUDGET_S = 2.0
FUZZ_BUDGET_S = 10.0
_CI = settings(max_examples=10, derandomize=True, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))
_FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

_BYTES = byte_vocab()


def _gpt2() -> glrmask.Vocab:
    return glrmask.Vocab.default()


def compiles_or_refuses(src: str, vocab: glrmask.Vocab, *, budget: float, fmt: str = "auto",
                        mode: str = "static") -> None:
    """The property: a usable mask or a glrmask error, within the budget."""
    t0 = time.perf_counter()
    try:
        mask = glrmask.compile(src, vocab, format=fmt, mode=mode, limits={"max_seconds": budget})
    except GlrmaskError:
        pass
    else:
        state = mask.start()
        if mode == "static":
            assert mask.get_mask(state).shape == (mask.n_words,)
    elapsed = time.perf_counter() - t0
    assert elapsed < budget * 1.5 + MARGIN_S, f"took {elapsed:.1f} s with a {budget} s budget"


# ------------------------------------------------------------------------------------ strategies
_PUNCT = list('()[]{}|*+?:"/~.\n %_-#^$\\') + ["a", "Z", "0", "9", "é", "..", "->", "::="]
_SMALL_SHIPPED = [(ROOT / "grammars" / f"{n}.lark").read_text() for n in ("json", "arithmetic", "csv")]
_ALL_SHIPPED = [p.read_text() for p in sorted((ROOT / "grammars").glob("*.lark"))]


@st.composite
def mutated(draw, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 40)))
        op = draw(st.sampled_from(("delete", "insert", "duplicate", "repeat")))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + "".join(draw(st.lists(st.sampled_from(_PUNCT), max_size=6))) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:  # a counted repeat where a quantifier may stand
            text = text[:i] + draw(st.sampled_from(("{1000}", "~300", "{0,5000}", "*", "+?"))) + text[i:]
    return text


_atoms = st.one_of(
    st.sampled_from(["a", "b", "x", "0", "é", r"\.", r"\d", r"\w", r"\s", ".", "[a-z]", "[^ab]", "[0-9]",
                     r"\n", "(?i:ab)", "(?s:.)"]),
)


def _regex_tree(children):
    quant = st.sampled_from(["*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,40}", "{300}", "{1,2000}"])
    return st.one_of(
        st.tuples(children, children).map("".join),
        st.tuples(children, children).map(lambda p: f"(?:{p[0]}|{p[1]})"),
        st.tuples(children, quant).map(lambda p: f"(?:{p[0]}){p[1]}"),
        children.map(lambda c: f"({c})"),
        st.tuples(children, children).map(lambda p: f"{p[0]}(?={p[1]})"),
        st.tuples(children, children).map(lambda p: f"{p[0]}(?!{p[1]})"),
        st.tuples(children, children).map(lambda p: f"{p[0]}(?<=a){p[1]}"),
        children.map(lambda c: rf"\b{c}"),
    )


regexes = st.recursive(_atoms, _regex_tree, max_leaves=8)


@st.composite
def lark_grammars(draw) -> str:
    n_rules = draw(st.integers(1, 4))
    n_terms = draw(st.integers(0, 3))
    rules = [f"r{i}" for i in range(n_rules)]
    terms = [f"T{i}" for i in range(n_terms)]
    lines = ["start: r0"]
    for t in terms:
        if draw(st.booleans()):
            lines.append(f"{t}: /{draw(regexes)}/")
        else:
            lines.append(f'{t}: "{draw(st.sampled_from(["a", "ab", "if", "(", "0", "é"]))}"')
    item = st.one_of(st.sampled_from(rules + terms), st.sampled_from(['"a"', '"b"', '","', "/[0-9]+/"]))
    postfix = st.sampled_from(["", "", "?", "*", "+", "~2", "~0..3", "~500"])
    for r in rules:
        alts = []
        for _ in range(draw(st.integers(1, 3))):
            seq = draw(st.lists(st.tuples(item, postfix).map("".join), max_size=4))
            group = draw(st.booleans())
            body = " ".join(seq)
            alts.append(f"({body})" + draw(postfix) if group and body else body)
        lines.append(f"{r}: " + " | ".join(alts))
    if draw(st.booleans()):
        lines.append('%ignore " "')
    return "\n".join(lines) + "\n"


@st.composite
def gbnf_grammars(draw) -> str:
    n_rules = draw(st.integers(1, 4))
    rules = ["root"] + [f"r{i}" for i in range(1, n_rules)]
    item = st.one_of(st.sampled_from(rules), st.sampled_from(['"a"', '"{"', '"\\n"', "[a-z]", "[^\"]", ".",
                                                               "[0-9]", '"é"', '""']))
    rep = st.sampled_from(["", "", "?", "*", "+", "{3}", "{0,5}", "{2,}", "{1000}", "{0,100000}"])
    lines = []
    for r in rules:
        alts = []
        for _ in range(draw(st.integers(1, 3))):
            seq = draw(st.lists(st.tuples(item, rep).map("".join), max_size=4))
            body = " ".join(seq)
            if body and draw(st.booleans()):
                body = f"({body})" + draw(rep)
            alts.append(body)
        lines.append(f"{r} ::= " + " | ".join(alts))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ bounded run
@_CI
@given(src=mutated(_SMALL_SHIPPED), mode=st.sampled_from(["static", "dynamic"]))
def test_mutated_shipped_grammars_compile_or_refuse_within_budget(src, mode):
    compiles_or_refuses(src, _BYTES, budget=CI_BUDGET_S, mode=mode)


@_CI
@given(src=lark_grammars())
def test_random_lark_grammars_compile_or_refuse_within_budget(src):
    compiles_or_refuses(src, _BYTES, budget=CI_BUDGET_S)


@_CI
@given(src=gbnf_grammars())
def test_random_gbnf_grammars_compile_or_refuse_within_budget(src):
    compiles_or_refuses(src, _BYTES, budget=CI_BUDGET_S, fmt="gbnf")


@_CI
@given(pattern=regexes)
def test_random_regexes_compile_or_refuse_within_budget(pattern):
    compiles_or_refuses(pattern, _BYTES, budget=CI_BUDGET_S, fmt="regex")


# ------------------------------------------------------------------------------------ pytest -m fuzz
@pytest.mark.fuzz
@_FUZZ
@given(src=mutated(_ALL_SHIPPED), mode=st.sampled_from(["static", "dynamic", "auto"]))
def test_fuzz_mutated_shipped_grammars(src, mode):
    compiles_or_refuses(src, _gpt2(), budget=FUZZ_BUDGET_S, mode=mode)


@pytest.mark.fuzz
@_FUZZ
@given(src=lark_grammars())
def test_fuzz_random_lark_grammars(src):
    compiles_or_refuses(src, _gpt2(), budget=FUZZ_BUDGET_S)


@pytest.mark.fuzz
@_FUZZ
@given(src=gbnf_grammars())
def test_fuzz_random_gbnf_grammars(src):
    compiles_or_refuses(src, _gpt2(), budget=FUZZ_BUDGET_S, fmt="gbnf")


@pytest.mark.fuzz
@_FUZZ
@given(pattern=regexes)
def test_fuzz_random_regexes(pattern):
    compiles_or_refuses(pattern, _gpt2(), budget=FUZZ_BUDGET_S, fmt="regex")
