"""Compiled masks on disk (DESIGN §6): save → load gives the same masks; a load refuses another
vocabulary, a damaged file and another format version; the compile cache reuses artifacts;
``mode="auto"`` switches to static masks; budgets end in ``GrammarTooComplex``; the CLI compiles,
inspects and runs artifacts."""
from __future__ import annotations

import json
import os
import random
import struct
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed
from _grammars import CASE_BY_NAME
from conftest import DATA, tiny_vocab
from glrmask.cli import main
from glrmask.compile_cache import CompileCache
from glrmask.errors import ArtifactError, GlrmaskError, GrammarTooComplex

JSON_GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "json.lark"


@lru_cache(maxsize=None)
def hard_case(name: str):
    case = CASE_BY_NAME[name]
    return glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark")


@pytest.fixture(scope="module")
def json_saved(gpt2, tmp_path_factory):
    mask = glrmask.compile(JSON_GRAMMAR, gpt2)
    path = tmp_path_factory.mktemp("artifact") / "json.glrm"
    mask.save(path)
    return mask, path


def walk_both(a, b, rng: random.Random, steps: int) -> int:
    """Commit the same random allowed tokens to fresh states of both masks, comparing masks."""
    sa, sb = a.start(), b.start()
    n = 0
    for _ in range(steps):
        wa, wb = a.get_mask(sa), b.get_mask(sb)
        assert wa.tobytes() == wb.tobytes()
        ids = sorted(allowed(wa))
        if not ids or sa.is_terminated():
            break
        tok = rng.choice(ids)
        assert sa.commit(tok) and sb.commit(tok)
        n += 1
    return n


# ------------------------------------------------------------------------------ round trip
@pytest.mark.parametrize("name", ["ambiguous_expr", "keywords_vs_names", "trailing_lookahead", "unicode_class",
                                  "ignore_ws", "lazy_quantifier"])
def test_a_loaded_mask_gives_the_masks_of_the_saved_one(name, tmp_path):
    mask = hard_case(name)
    mask.save(tmp_path / "m.glrm")
    loaded = glrmask.Mask.load(tmp_path / "m.glrm", mask.vocab)
    rng = random.Random(name)
    assert sum(walk_both(mask, loaded, rng, 12) for _ in range(10)) > 0


def test_a_loaded_json_mask_replays_documents_with_the_same_masks(json_saved, gpt2):
    mask, path = json_saved
    loaded = glrmask.Mask.load(path, gpt2)
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    for line in lines:
        a, b = mask.start(), loaded.start()
        for tok in gpt2.encode(json.loads(line)):
            assert a.commit(tok) and b.commit(tok)
            assert mask.get_mask(a).tobytes() == loaded.get_mask(b).tobytes()
        assert b.is_accepting()


def test_a_loaded_mask_keeps_warnings_and_stage_statistics(json_saved, gpt2):
    mask, path = json_saved
    loaded = glrmask.Mask.load(path, gpt2)
    assert loaded.warnings == mask.warnings
    assert list(loaded.stats) == list(mask.stats)
    assert loaded.mode == loaded.active_mode == "static"


def test_a_load_reuses_the_grammar_and_lr_table_the_caller_knows_when_they_are_the_artifacts(json_saved, gpt2):
    """``mode="auto"`` loads its worker's artifact knowing the grammar and LR table it holds."""
    from glrmask.mask_artifact import KnownParts, load_mask

    mask, path = json_saved
    dynamic = glrmask.compile(JSON_GRAMMAR, gpt2, mode="dynamic")
    loaded = load_mask(path, gpt2, known=KnownParts.of(dynamic.grammar, dynamic.table))
    assert loaded.grammar is dynamic.grammar and loaded.table is dynamic.table
    assert walk_both(mask, loaded, random.Random(3), 40) > 10


def test_a_load_decodes_its_own_grammar_and_lr_table_when_the_known_ones_differ(json_saved, gpt2):
    from glrmask.mask_artifact import KnownParts, load_mask

    mask, path = json_saved
    other = glrmask.compile('start: "a" "b"', gpt2, format="lark", mode="dynamic")
    loaded = load_mask(path, gpt2, known=KnownParts.of(other.grammar, other.table))
    assert loaded.grammar is not other.grammar and loaded.table is not other.table
    assert walk_both(mask, loaded, random.Random(4), 40) > 10


def test_a_load_checks_the_known_grammar_and_lr_table_one_by_one(json_saved, gpt2):
    """Known parts whose grammar matches the artifact but whose LR arrays do not: the grammar is
    reused, the artifact's own LR table decoded and validated."""
    from glrmask.mask_artifact import KnownParts, load_mask

    mask, path = json_saved
    dynamic = glrmask.compile(JSON_GRAMMAR, gpt2, mode="dynamic")
    small = glrmask.compile('start: "a" "b"', gpt2, format="lark", mode="dynamic")
    other = KnownParts.of(small.grammar, small.table)
    known = KnownParts(dynamic.grammar, other.table, dynamic.grammar.to_json(), other.lr_arrays)
    loaded = load_mask(path, gpt2, known=known)
    assert loaded.grammar is dynamic.grammar and loaded.table is not other.table
    assert walk_both(mask, loaded, random.Random(5), 40) > 10


def test_a_dynamic_mask_cannot_be_saved(tmp_path):
    case = CASE_BY_NAME["non_lalr"]
    mask = glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark", mode="dynamic")
    with pytest.raises(GlrmaskError, match="static"):
        mask.save(tmp_path / "m.glrm")


# ------------------------------------------------------------------------------ refused loads
def test_load_refuses_another_vocabulary(json_saved):
    _mask, path = json_saved
    with pytest.raises(ArtifactError, match="vocabulary"):
        glrmask.Mask.load(path, tiny_vocab(["a", "b"]))


def test_load_refuses_a_truncated_file(json_saved, gpt2, tmp_path):
    _mask, path = json_saved
    data = path.read_bytes()
    bad = tmp_path / "cut.glrm"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError):
        glrmask.Mask.load(bad, gpt2)


def test_load_refuses_a_flipped_byte(json_saved, gpt2, tmp_path):
    _mask, path = json_saved
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "flip.glrm"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="checksum"):
        glrmask.Mask.load(bad, gpt2)


def test_load_refuses_another_format_version(json_saved, gpt2, tmp_path):
    _mask, path = json_saved
    data = bytearray(path.read_bytes())
    (version,) = struct.unpack_from("<I", data, 8)
    struct.pack_into("<I", data, 8, version + 1)
    bad = tmp_path / "future.glrm"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=f"format {version + 1}"):
        glrmask.Mask.load(bad, gpt2)


def test_load_refuses_a_file_that_is_not_an_artifact(gpt2, tmp_path):
    bad = tmp_path / "x.glrm"
    bad.write_text("start: 'a'\n")
    with pytest.raises(ArtifactError):
        glrmask.Mask.load(bad, gpt2)


# ------------------------------------------------------------------------------ compile cache
def test_the_compile_cache_stores_once_and_then_loads(tmp_path):
    case = CASE_BY_NAME["number_list"]
    vocab = tiny_vocab(list(case.pieces))
    first = glrmask.compile(case.grammar, vocab, format="lark", cache_dir=tmp_path)
    assert len(CompileCache(tmp_path).entries()) == 1
    second = glrmask.compile(case.grammar, vocab, format="lark", cache_dir=tmp_path)
    assert second._lazy_lexer is None  # loaded, not compiled
    assert len(CompileCache(tmp_path).entries()) == 1
    assert walk_both(first, second, random.Random(3), 15) > 0


def test_a_damaged_cache_entry_is_compiled_again(tmp_path):
    case = CASE_BY_NAME["number_list"]
    vocab = tiny_vocab(list(case.pieces))
    glrmask.compile(case.grammar, vocab, format="lark", cache_dir=tmp_path)
    (entry, _size, _stamp), = CompileCache(tmp_path).entries()
    entry.write_bytes(entry.read_bytes()[:100])
    again = glrmask.compile(case.grammar, vocab, format="lark", cache_dir=tmp_path)
    assert again._lazy_lexer is not None
    assert glrmask.Mask.load(entry, vocab).mode == "static"  # rewritten intact


# ------------------------------------------------------------------------------ auto mode
def test_auto_mode_answers_at_once_and_switches_new_requests_to_static():
    case = CASE_BY_NAME["keywords_vs_names"]
    vocab = tiny_vocab(list(case.pieces))
    mask = glrmask.compile(case.grammar, vocab, format="lark", mode="auto")
    early = mask.start()
    early_mask = mask.get_mask(early)
    assert mask.wait_static(timeout=120)
    assert mask.active_mode == "static" and mask.mode == "auto"
    late = mask.start()
    assert mask.get_mask(late).tobytes() == early_mask.tobytes()
    # a request started before the switch keeps its recognizer and stays exact
    rng = random.Random(5)
    for _ in range(8):
        ids = sorted(allowed(mask.get_mask(early)))
        if not ids:
            break
        tok = rng.choice(ids)
        assert early.commit(tok) and late.commit(tok)
        assert mask.get_mask(early).tobytes() == mask.get_mask(late).tobytes()


def test_auto_mode_stays_dynamic_when_the_static_compile_is_over_budget():
    case = CASE_BY_NAME["keywords_vs_names"]
    vocab = tiny_vocab(list(case.pieces))
    mask = glrmask.compile(case.grammar, vocab, format="lark", mode="auto",
                           limits={"terminal_dwa": {"max_nodes": 1}})
    assert not mask.wait_static(timeout=120)
    assert isinstance(mask.static_error, GrammarTooComplex)
    assert mask.active_mode == "dynamic"
    assert np.any(mask.get_mask(mask.start()))


def test_json_schemas_default_to_auto_mode_with_a_time_budget(gpt2):
    mask = glrmask.compile_json_schema({"type": "array", "items": {"type": "integer"}}, gpt2)
    assert mask.mode == "auto"
    assert mask.wait_static(timeout=120) and mask.active_mode == "static"


# ------------------------------------------------------------------------------ budgets
@pytest.mark.parametrize("stage, limits, match", [
    ("dense lexer", {"lexer": {"max_states": 1}}, "max_states"),
    ("terminal DWA", {"terminal_dwa": {"max_nodes": 2}}, "terminal DWA.*max_nodes"),
    ("terminal DWA", {"terminal_dwa": {"max_walk_steps": 3}}, "max_walk_steps"),
    ("parser DWA", {"parser_dwa": {"max_closures": 2}}, "parser DWA.*max_closures"),
    ("parser DWA", {"parser_dwa": {"max_states": 1}}, "parser DWA.*max_states"),
    ("whole compile", {"max_seconds": 1e-9}, "max_seconds"),
])
def test_a_compile_over_a_budget_raises_grammar_too_complex_naming_stage_and_limit(stage, limits, match):
    case = CASE_BY_NAME["keywords_vs_names"]
    with pytest.raises(GrammarTooComplex, match=match):
        glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark", limits=limits)


# ------------------------------------------------------------------------------ CLI
def test_cli_compiles_inspects_and_samples_an_artifact(tmp_path, capsys):
    out = tmp_path / "json.glrm"
    assert main(["compile", str(JSON_GRAMMAR), "-o", str(out), "--no-cache"]) == 0
    report = capsys.readouterr()
    assert out.is_file()
    for stage in ("dense lexer", "terminal DWA", "token classes", "parser DWA", "total"):
        assert stage in report.out
    assert main(["inspect", str(out)]) == 0
    described = capsys.readouterr().out
    assert "fingerprint" in described and "rules" in described
    assert main(["sample", str(out), "-n", "2", "--seed", "1", "--max-tokens", "20"]) == 0
    sampled = capsys.readouterr()
    assert sampled.out.count(": complete, ") == 2
    assert main(["check", str(out), "--text", '{"a": [1, 2]}']) == 0


def test_cli_compile_of_an_artifact_is_refused(tmp_path, json_saved, capsys):
    _mask, path = json_saved
    assert main(["compile", str(path), "-o", str(tmp_path / "x.glrm")]) == 1  # ExitCode.ERROR
    assert "already a compiled artifact" in capsys.readouterr().err


def test_cli_compiles_a_json_schema_and_checks_documents_with_the_artifact(tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                                  "required": ["n"], "additionalProperties": False}))
    out = tmp_path / "schema.glrm"
    assert main(["compile", "--json-schema", str(schema), "-o", str(out), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["check", str(out), "--text", '{"n": 12}']) == 0
    assert main(["check", str(out), "--text", '{"n": "x"}']) == 4  # ExitCode.REJECTED
    assert main(["inspect", str(out), "--arrays"]) == 0
    assert "rt_weights" in capsys.readouterr().out  # the Parser DWA's class weights


def test_auto_mode_finds_a_cached_static_compile_at_once(tmp_path):
    case = CASE_BY_NAME["keywords_vs_names"]
    vocab = tiny_vocab(list(case.pieces))
    first = glrmask.compile(case.grammar, vocab, format="lark", mode="auto", cache_dir=tmp_path)
    assert first.wait_static(timeout=120)  # the worker compiled through the cache
    again = glrmask.compile(case.grammar, vocab, format="lark", mode="auto", cache_dir=tmp_path)
    assert again.active_mode == "static"  # a hit: no background compile at all
    assert again.get_mask(again.start()).tobytes() == first.get_mask(first.start()).tobytes()


def test_dropping_an_auto_mask_stops_its_background_compile():
    import gc
    import time

    mask = glrmask.compile(str(Path(__file__).resolve().parents[1] / "grammars" / "sql.lark"),
                           glrmask.Vocab.default(), mode="auto")
    pid = mask.static_compile_pid
    assert pid is not None
    del mask
    gc.collect()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
            os.kill(pid, 0)
        except (ChildProcessError, ProcessLookupError):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the background compile outlived its mask")


def test_auto_mode_requests_switch_to_static_at_their_next_mask_with_identical_masks(gpt2):
    """A request that started dynamic continues on the static automaton after the compile
    ends, at whatever step it is; the masks before and after equal a purely dynamic run's."""
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    ids = gpt2.encode(json.loads(lines[3]))[:40]
    dyn = glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="dynamic")
    want = [dyn.get_mask(s).tobytes() for s in _prefix_states(dyn, ids)]
    auto = glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="auto")
    states = []
    for k in range(len(ids)):  # request k has committed k tokens when the switch comes
        s = auto.start()
        assert auto.active_mode == "dynamic" or k > 0
        for t in ids[:k]:
            assert s.commit(t)
        states.append(s)
    assert auto.wait_static(timeout=120)
    for k, s in enumerate(states):
        assert auto.get_mask(s).tobytes() == want[k], k  # the switch happens here
        for j, t in enumerate(ids[k:], start=k):
            assert s.commit(t)
            assert auto.get_mask(s).tobytes() == want[j + 1], (k, j)
        s.rollback(len(ids))  # the whole history came along
        assert auto.get_mask(s).tobytes() == want[0]


def _prefix_states(mask, ids):
    s = mask.start()
    yield s.fork()
    for t in ids:
        assert s.commit(t)
        yield s.fork()


def test_a_mask_saved_without_warnings_checks_collisions_when_loaded(tmp_path):
    """``save(warnings=False)`` (what mode="auto"'s worker writes) skips the lookahead-collision
    check; the loaded mask runs it on first access and finds what the compiled one finds."""
    vocab = glrmask.Vocab.default()
    grammar = 'start: A B\nA: /a+(?!b)/\nB: "b"'
    mask = glrmask.compile(grammar, vocab, mode="static")
    mask.save(tmp_path / "m.glrm", warnings=False)
    assert glrmask.load(tmp_path / "m.glrm", vocab).warnings == mask.warnings
