"""The dynamic engine's exploration is cheap and changes nothing: the native side hands the
explorer each missing lexer entry once (byte steps once per byte group), and the native loop
(``glrmask_ext.lazy_explore``) with the native lexer step gives the masks, accept verdicts and
lexer states the Python loop with the Python step gives, replaying real schemas' documents."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import glrmask
from glrmask.lexer import Lexer
from glrmask.lexer import lexer as lexer_module
from glrmask.runtime import dynamic as dynamic_module
from glrmask_ext.runtime import LazyLexer

SAMPLE = Path(__file__).resolve().parent / "data" / "jsonschema" / "maskbench_sample.jsonl"


def records(n: int) -> list:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:n]]


def replay(rec, vocab) -> tuple[list, object]:
    """Every mask and commit verdict of a schema's documents in dynamic mode, and its lexer."""
    mask = glrmask.compile_json_schema(rec["schema"], vocab, mode="dynamic")
    out = []
    for inst in rec["tests"]:
        state = mask.start()
        for tok in vocab.encode(json.dumps(inst["data"], ensure_ascii=False)):
            out.append(mask.get_mask(state).tobytes())
            ok = state.commit(tok)
            out.append(ok)
            if not ok:
                break
        out.append(state.is_accepting())
    return out, mask.lexer


def test_the_explorer_is_handed_each_missing_entry_once(gpt2, monkeypatch):
    handed: list[np.ndarray] = []
    explore = dynamic_module.LexerExplorer.explore

    def recording(self, missing, first=True):
        handed.append((self, missing.copy()))
        return explore(self, missing, first)

    monkeypatch.setattr(dynamic_module.LexerExplorer, "explore", recording)
    for rec in records(4):
        replay(rec, gpt2)
    assert handed
    for explorer, rows in handed:
        group_of = explorer.lexer.byte_groups
        group = {b: k for k, g in enumerate(group_of) for b in g}
        keys = [(k, a, group[b] if k in (explorer.M_STEP, explorer.M_COND_STEP) else b)
                for k, a, b in rows.tolist()]
        assert len(keys) == len(set(keys))


def test_native_exploration_gives_the_python_masks_and_lexer_states(gpt2, monkeypatch):
    recs = records(6)
    native = [replay(rec, gpt2) for rec in recs]
    with monkeypatch.context() as m:
        m.setattr(dynamic_module, "_native_explore", None)
        for name, method in lexer_module.PYTHON_STEPPING.items():
            m.setattr(Lexer, name, method)
        python = [replay(rec, gpt2) for rec in recs]
    for (n_out, n_lex), (p_out, p_lex) in zip(native, python):
        assert n_out == p_out
        assert (n_lex.n_states, n_lex.n_lane_states, n_lex.n_conds) == (p_lex.n_states, p_lex.n_lane_states,
                                                                         p_lex.n_conds)
        for s in range(n_lex.n_states):
            assert n_lex.alive_terminals(s) == p_lex.alive_terminals(s)
            assert [n_lex.lane_entries(s, t) for t in sorted(n_lex.alive_terminals(s))] == \
                [p_lex.lane_entries(s, t) for t in sorted(p_lex.alive_terminals(s))]


def test_byte_groups_name_one_group_per_byte():
    lazy = LazyLexer(4, 4, 1)
    with pytest.raises(ValueError):
        lazy.set_byte_groups(np.zeros(255, dtype=np.int64))
    lazy.set_byte_groups(np.arange(256, dtype=np.int64))


def test_live_terminals_outside_the_lexer_are_refused():
    lazy = LazyLexer(4, 4, 1)
    with pytest.raises(ValueError):
        lazy.set_alive_terms(0, [64], [])
    lazy.set_alive_terms(0, [0, 63], [63])


def test_cold_dynamic_masks_leave_no_young_objects_and_the_collector_enabled(gpt2):
    """Exploring the lexer allocates thousands of long-lived objects per new schema: made inside
    a pause of the cyclic collector and promoted when it ends, they start no collection inside a
    later mask (with the collector on, one full collection cost a replayed mask 51 ms)."""
    import gc

    mask = glrmask.compile_json_schema(records(6)[5]["schema"], gpt2, mode="dynamic")
    was = gc.isenabled()
    gc.enable()
    try:
        gc.collect()
        state = mask.start()
        mask.get_mask(state)  # the first mask of a new schema: explored from scratch
        assert mask.dynamic_stats["explored_entries"] > 150
        assert gc.isenabled()
        assert len(gc.get_objects(generation=0)) < 50  # (600 young objects without the pause)
    finally:
        if not was:
            gc.disable()
