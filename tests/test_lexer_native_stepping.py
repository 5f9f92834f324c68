"""The native ``Program.advance`` (``glrmask_ext.lexer_compile.advance``, which reads the
program's typed arrays in C) steps exactly as the Python one: lexers explored breadth first over
every byte give the same states and events either way, and their programs end alike (the
half-read MID instructions interned in the same order) — on the shipped grammars, on the JSON
Schema sample, and on the first schema of every JSONSchemaBench split."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _maskbench import MASKBENCH, first_schemas  # noqa: E402

from glrmask.errors import GlrmaskError  # noqa: E402
from glrmask.grammar.loader import load_grammar  # noqa: E402
from glrmask.grammar.normalize import normalize  # noqa: E402
from glrmask.json_schema import lower_json_schema_ir  # noqa: E402
from glrmask.lexer import Lexer  # noqa: E402
from glrmask.lexer import program as program_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR_FILES = sorted((ROOT / "grammars").glob("*.lark"))
SAMPLE = ROOT / "tests" / "data" / "jsonschema" / "maskbench_sample.jsonl"

pytestmark = pytest.mark.skipif(program_module.Program.advance is program_module._python_advance,
                                reason="glrmask_ext.lexer_compile is not built")


def explore(terminals, max_states: int) -> tuple:
    """Every step of the first ``max_states`` joint states met breadth first from the initial
    one, over all 256 bytes, and the program's instructions afterwards."""
    lx = Lexer(terminals)
    steps = []
    queue = [lx.initial]
    seen = {lx.initial}
    i = 0
    while i < len(queue) and i < max_states:
        state = queue[i]
        i += 1
        for byte in range(256):
            nxt, events = lx.step(state, byte)
            steps.append((nxt, events))
            if nxt >= 0 and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    p = lx.prog
    return steps, (p.kind, p.a, p.b, p.c, p.d, p.targets, sorted(p._mid_ids.items()))


def assert_native_steps_like_python(terminals, max_states: int, monkeypatch) -> None:
    native = explore(terminals, max_states)
    with monkeypatch.context() as m:
        m.setattr(program_module.Program, "advance", program_module._python_advance)
        python = explore(terminals, max_states)
    assert native == python


def schema_terminals(schema) -> list[tuple[str, str]]:
    g, _ = lower_json_schema_ir(schema)
    return [(t.name, t.pattern) for t in normalize(g).terminals.values()]


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_shipped_grammars_step_alike_natively(path, monkeypatch):
    g = normalize(load_grammar(str(path)))
    assert_native_steps_like_python([(t.name, t.pattern) for t in g.terminals.values()], 300,
                                    monkeypatch)


def test_multibyte_characters_step_alike_natively(monkeypatch):
    terminals = [("WORD", r"\w+"), ("STR", '"(?:[^"\\\\]|\\\\.){0,6}"'), ("EMOJI", "[😀-🙏]+"),
                 ("EURO", "€(?=[0-9])"), ("B", r"x\b")]
    assert_native_steps_like_python(terminals, 400, monkeypatch)


def test_the_json_schema_sample_steps_alike_natively(monkeypatch):
    for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:8]:
        try:
            terminals = schema_terminals(json.loads(line)["schema"])
        except GlrmaskError:
            continue
        assert_native_steps_like_python(terminals, 40, monkeypatch)


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="JSONSchemaBench data not present")
@pytest.mark.parametrize("name,schema", list(first_schemas(1)) if MASKBENCH.is_dir() else [],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_schema_lexers_step_alike_natively(name, schema, monkeypatch):
    terminals = schema_terminals(schema)  # every first schema's lexer builds (a refusal fails)
    assert_native_steps_like_python(terminals, 40, monkeypatch)
