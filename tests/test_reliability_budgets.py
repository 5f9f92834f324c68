"""Every compile stage honours the compile budget (DESIGN §4.11, issue #16).

Hostile grammars end in :class:`glrmask.GrammarTooComplex` naming the stage and the limit — never a
hang, an out-of-memory kill or a non-glrmask exception. The budgets here are small so each case
runs in seconds; the time checks allow the deadline × 1.5 plus a generous margin for a loaded
machine (they catch a stage that ignores the deadline, which would run for minutes).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import glrmask
from glrmask import GrammarError, GrammarTooComplex
from glrmask.budget import CompileBudget
from glrmask.lexer import Lexer
from glrmask.lexer.dense import DenseLexer

MARGIN_S = 10.0
"""Slack on top of ``max_seconds × 1.5``: scheduling noise, not the stage's own overrun."""


@pytest.fixture(scope="module")
def vocab() -> glrmask.Vocab:
    return glrmask.Vocab.default()


def chain(n: int) -> str:
    """``start: r0``, ``r0: r1``, …, ``r{n-1}: "x"``: the longest possible chain of unit rules."""
    return "start: r0\n" + "".join(f"r{i}: r{i + 1}\n" for i in range(n - 1)) + f'r{n - 1}: "x"\n'


def too_complex(src: str, vocab, **kw) -> tuple[GrammarTooComplex, float]:
    t0 = time.perf_counter()
    with pytest.raises(GrammarTooComplex) as info:
        glrmask.compile(src, vocab, **kw)
    return info.value, time.perf_counter() - t0


# ---------------------------------------------------------------- memory: counted repeats, literals
LEXER_MEMORY = {"lexer": {"max_transitions": 50_000}}


@pytest.mark.parametrize("src, fmt", [
    ("start: A\nA: /a{100000}/\n", "lark"),
    ('start: "' + "x" * 100_000 + '"', "lark"),
    ("a{100000}", "regex"),
], ids=["counted-repeat-terminal", "long-literal", "regex-format"])
def test_a_lexer_with_a_state_per_byte_ends_at_its_transition_budget(vocab, src, fmt):
    err, _ = too_complex(src, vocab, format=fmt, limits=LEXER_MEMORY)
    assert "lexer" in str(err) and "lexer.max_transitions" in str(err)


def test_the_lexer_transition_budget_is_not_met_by_shipped_grammars(vocab):
    mask = glrmask.compile("grammars/json.lark", vocab, mode="dynamic")
    assert mask.start() is not None


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="resident memory is read from /proc")
def test_resident_memory_growth_is_a_backstop_for_every_stage(vocab):
    # the lexer's own state budget is lifted: memory must be what ends this compile (how many
    # states fit in 64 MiB depends on the interpreter's allocations, not on glrmask)
    err, _ = too_complex("start: A\nA: /a{100000}/\n", vocab,
                         limits={"max_memory_mb": 64, "lexer": {"max_states": 10_000_000}})
    assert "resident memory grew by more than 64 MiB" in str(err) and "max_memory_mb" in str(err)


# ---------------------------------------------------------------- time: lexer export and minimization
STAGE_OVER_TIME = r"^(lexer|terminal DWA|parser DWA|stack effects)[^:]*: .*took more than {:g} s \(limit max_seconds\)"


@pytest.mark.parametrize("pattern", [r"[a-z0-9]{1,20000}", r"(?s:.){1,1000}"])
def test_long_counted_repeats_honour_the_deadline_in_every_static_stage(vocab, pattern):
    # both compile in ~0.9 s now (they took minutes once): the budget is well below that, so the
    # case stays over its deadline on a fast machine
    budget = 0.25
    err, elapsed = too_complex(f"start: A\nA: /{pattern}/\n", vocab, limits={"max_seconds": budget})
    assert re.match(STAGE_OVER_TIME.format(budget), str(err)), str(err)
    assert elapsed < budget * 1.5 + MARGIN_S


def test_lexer_export_and_minimization_honour_their_own_deadline():
    lexer = Lexer([("A", r"[a-z0-9]{1,20000}")])
    t0 = time.perf_counter()
    with pytest.raises(GrammarTooComplex, match=r"^lexer DFA (export|minimization).*limit max_seconds"):
        DenseLexer.from_lexer(lexer, max_seconds=0.2)
    assert time.perf_counter() - t0 < 0.2 * 1.5 + MARGIN_S


# ---------------------------------------------------------------- front-ends: repetition expansion
@pytest.mark.parametrize("src", ["root ::= [a-z]{0,100000}", 'root ::= "a"{100000}'])
def test_gbnf_repetition_expansion_is_budgeted_before_it_is_built(vocab, src):
    err, _ = too_complex(src, vocab, limits={"grammar": {"max_symbols": 10_000}})
    assert "front-end (GBNF repetition expansion)" in str(err)
    assert "grammar.max_symbols" in str(err)


def test_gbnf_long_optional_repetition_ends_in_a_budget_error_by_default(vocab):
    err, _ = too_complex("root ::= [a-z]{0,100000}", vocab)
    assert "normalize" in str(err) or "grammar.max_symbols" in str(err)


def test_normalization_is_budgeted_by_rules(vocab):
    err, _ = too_complex("root ::= [a-z]{0,2000}", vocab, limits={"normalize": {"max_rules": 1_000}})
    assert str(err).startswith("normalize") and "normalize.max_rules" in str(err)


def test_a_long_repeated_literal_honours_the_deadline_after_the_front_end(vocab):
    budget = 0.05  # the whole compile takes ~0.4 s; its stages after the front-end check the deadline
    err, elapsed = too_complex('root ::= "a"{100000}', vocab, limits={"max_seconds": budget})
    assert "max_seconds" in str(err)
    assert elapsed < budget * 1.5 + MARGIN_S


def test_lark_grammars_count_against_the_grammar_budget(vocab):
    err, _ = too_complex(chain(1000), vocab, limits={"grammar": {"max_symbols": 1_000}})
    assert "front-end (lark)" in str(err) and "grammar.max_symbols" in str(err)


# ---------------------------------------------------------------- LR closures
def nested_chain(n: int) -> str:
    """``r_i: r_{i+1} | "x" r_{i+1}``: every level follows a dot in some kernel and its closure
    holds the whole chain below it, so the closure items grow as ``n²/2``."""
    return "start: r0\n" + "".join(f'r{i}: r{i + 1} | "x" r{i + 1}\n' for i in range(n - 1)) + f'r{n - 1}: "x"\n'


def test_quadratic_lr_closures_end_at_the_closure_budget(vocab):
    err, _ = too_complex(nested_chain(1500), vocab, mode="dynamic", limits={"lr": {"max_closure_items": 100_000}})
    assert "LR table (closures)" in str(err) and "lr.max_closure_items" in str(err)


@pytest.mark.slow
def test_a_5000_rule_chain_compiles(vocab):
    mask = glrmask.compile(chain(5000), vocab, mode="dynamic")
    state = mask.start()
    assert state.commit_bytes(b"x") and state.is_accepting()


def test_large_lark_repetitions_honour_the_deadline_in_the_lr_item_sets(vocab):
    # found by the fuzz suite: few item sets, each with a very large closure
    src = ('start: r0\nT1: "a"\nr0: T1~2 | ("a"~0..3 "b"~0..3 T1* r1~2)? | ","~0..3 T1\n'
           'r1: ("," /[0-9]+/ r0~500) | (r0~500 "b"+ "," T1~0..3)~0..3 | ("b"*)~0..3\n')
    budget = 2.0
    err, elapsed = too_complex(src, vocab, limits={"max_seconds": budget})
    # the deadline, or (when the LR build is done in time on a fast machine) the next stage's budget
    assert "max_seconds" in str(err) or "max_states" in str(err)
    assert elapsed < budget * 1.5 + MARGIN_S


def test_the_deadline_covers_the_front_end_and_the_lr_stages(vocab):
    # the whole compile takes ~0.6 s since the LR table is built natively (it was > 1 s)
    budget = 0.2
    err, elapsed = too_complex(chain(5000), vocab, mode="dynamic", limits={"max_seconds": budget})
    assert "max_seconds" in str(err)
    assert elapsed < budget * 1.5 + MARGIN_S


# ---------------------------------------------------------------- no uncaught exceptions
def test_a_1000_rule_chain_compiles_statically_without_recursion(vocab):
    mask = glrmask.compile(chain(1000), vocab)
    state = mask.start()
    assert state.commit_bytes(b"x") and state.is_accepting()


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_grammar_whose_only_sentence_is_empty_compiles(vocab, mode):
    mask = glrmask.compile("start: \n", vocab, mode=mode)
    state = mask.start()
    assert state.is_accepting()
    assert not state.commit_bytes(b"a")
    words = mask.get_mask(state).view(np.uint32)
    allowed = {w * 32 + b for w in np.flatnonzero(words) for b in range(32) if words[w] >> b & 1}
    assert allowed == set(vocab.eos_token_ids)


def test_deeply_nested_lark_groups_are_a_grammar_error_with_a_position(vocab):
    with pytest.raises(GrammarError, match=r"<grammar>:1:\d+: grammar nested too deeply"):
        glrmask.compile("start: " + "(" * 2000 + '"a"' + ")" * 2000, vocab)


def test_deeply_nested_gbnf_groups_are_a_grammar_error(vocab):
    with pytest.raises(GrammarError, match="nested too deeply"):
        glrmask.compile("root ::= " + "(" * 5000 + '"a"' + ")" * 5000, vocab)


# ---------------------------------------------------------------- the limits themselves
@pytest.mark.parametrize("limits", [
    {"max_seconds": -1}, {"max_seconds": "10"}, {"max_memory_mb": 0},
    {"grammar": {"max_symbols": 0}}, {"lr": 5},
])
def test_malformed_limits_are_refused(limits):
    with pytest.raises(ValueError):
        CompileBudget(limits)


# ---------------------------------------------------------------- default limits, measured memory
def _peak_rss_mb_of(code: str) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter; its stdout and its peak resident memory in MiB."""
    wrapper = (code + "\nimport resource, sys\n"
               "sys.stdout.write(' rss=%d' % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024))\n")
    out = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=600,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    text = out.stdout
    return text, float(text.rsplit("rss=", 1)[1])


@pytest.mark.slow
@pytest.mark.parametrize("src", ["start: A\\nA: /a{100000}/\\n", "start: \\\"" + "x" * 100_000 + "\\\""])
def test_default_lexer_budget_ends_long_before_memory_grows_large(src):
    code = ("import glrmask\n"
            "try:\n"
            f"    glrmask.compile(\"{src}\", glrmask.Vocab.default())\n"
            "    print('compiled', end='')\n"
            "except glrmask.GrammarTooComplex as e:\n"
            "    print('too complex:', e, end='')\n")
    text, rss = _peak_rss_mb_of(code)
    assert text.startswith("too complex:") and "lexer" in text
    assert rss < 4096
