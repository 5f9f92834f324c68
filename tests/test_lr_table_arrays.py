"""LRTable.to_arrays / LRTable.from_arrays: a table survives plain arrays (and an artifact file)
with every field equal and a GLR driver over it behaving identically."""
from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from glrmask.artifact import read_artifact, write_artifact
from glrmask.errors import ArtifactError
from glrmask.grammar.loader import load_grammar
from glrmask.grammar.normalize import normalize
from glrmask.json_blob import encode_json_blob
from glrmask.lr import LRTable
from glrmask.reference import GLR

from _grammars import CASES

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "data" / "grammars"
SOURCES = (
    {p.stem: str(p) for p in sorted((ROOT / "grammars").glob("*.lark"))}
    | {f"corpus_{p.parent.name}": str(p) for p in sorted(CORPUS.glob("*/grammar.lark"))}
    | {f"case_{c.name}": c.grammar for c in CASES}
)


@lru_cache(maxsize=None)
def table(name: str, max_states: int = 20_000) -> LRTable:
    return LRTable.build(normalize(load_grammar(SOURCES[name])), max_states=max_states)


def round_trip(t: LRTable) -> LRTable:
    return LRTable.from_arrays(t.to_arrays())


def same_table(a: LRTable, b: LRTable) -> None:
    assert a.terminals == b.terminals and a.terminal_index == b.terminal_index
    assert a.nonterminals == b.nonterminals and a.nonterminal_index == b.nonterminal_index
    assert a.rules == b.rules and a.rule_lhs == b.rule_lhs and a.rule_len == b.rule_len
    assert (a.start_state, a.final_state) == (b.start_state, b.final_state)
    for name in ("act_ptr", "act_term", "act_shift", "act_roff", "reduce_rules", "goto_ptr", "goto_nt", "goto_tgt",
                 "shift_table", "goto_table", "reduce_offsets"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.rows == b.rows
    assert a.ignored_terminals == b.ignored_terminals
    assert a.notes == b.notes and a.method == b.method


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_round_trip_keeps_every_field(name):
    same_table(table(name), round_trip(table(name)))


def test_lalr_fallback_notes_and_method_survive():
    t = table("sql", max_states=50)
    assert t.method == "lalr1" and t.notes
    same_table(t, round_trip(t))


def test_ignored_terminals_survive():
    t = table("case_keywords_vs_names")
    assert t.ignored_terminals
    assert round_trip(t).ignored_terminals == t.ignored_terminals


def test_accept_is_the_shift_on_the_end_column():
    t = round_trip(table("json"))
    accepting = [(s, a) for s, row in enumerate(t.rows) for a in row if a.accept]
    assert accepting
    for s, a in accepting:
        assert a is t.rows[s][t.end_id] and a.shift is not None


@pytest.mark.parametrize("name", ["json", "sql", "corpus_c_subset", "case_ambiguous_expr", "case_non_lalr"])
def test_glr_over_the_loaded_table_behaves_identically(name):
    orig = table(name)
    g1, g2 = GLR(orig), GLR(round_trip(orig))
    rnd = random.Random(name)
    for _ in range(40):
        f1, f2 = g1.initial(), g2.initial()
        for _ in range(rnd.randint(1, 30)):
            assert f1 == f2  # stack nodes are interned: equal states give equal frontiers
            acc = g1.acceptable(f1)
            assert acc == g2.acceptable(f2)
            assert g1.accepts_end(f1) == g2.accepts_end(f2)
            if not acc:
                break
            # mostly a terminal that keeps the sentence alive, sometimes any terminal
            t = rnd.choice(sorted(acc)) if rnd.random() < 0.9 else rnd.randrange(orig.n_terminals)
            f1, f2 = g1.feed(f1, t), g2.feed(f2, t)
            if not f1:
                assert not f2
                break


def test_artifact_file_round_trip(tmp_path):
    t = table("tinylang")
    write_artifact(tmp_path / "lr.bin", kind="lr", meta={}, arrays=t.to_arrays())
    same_table(t, LRTable.from_arrays(read_artifact(tmp_path / "lr.bin", kind="lr").arrays))


def test_prefixed_keys_are_read():
    t = table("arithmetic")
    arrays = {"lr/" + k: v for k, v in t.to_arrays().items()}
    same_table(t, LRTable.from_arrays(arrays, prefix="lr/"))


def test_the_stored_form_is_the_sparse_rows():
    assert sorted(table("arithmetic").to_arrays()) == sorted(
        ["lr_meta", "act_ptr", "act_term", "act_shift", "act_roff", "reduce_rules", "goto_ptr", "goto_nt", "goto_tgt"])


def test_missing_array_is_an_artifact_error():
    arrays = table("arithmetic").to_arrays()
    del arrays["goto_tgt"]
    with pytest.raises(ArtifactError, match="goto_tgt"):
        LRTable.from_arrays(arrays)


def damaged(name: str, change) -> dict[str, np.ndarray]:
    """The arrays of a table with ``change`` applied to a copy of array ``name``."""
    arrays = table("json").to_arrays()
    arrays[name] = arrays[name].copy()
    change(arrays[name])
    return arrays


def _longest_row(ptr: np.ndarray) -> int:
    return int(np.argmax(np.diff(ptr)))


def _swap_first_two_of_longest_row(ptr_name: str, key_name: str) -> dict[str, np.ndarray]:
    arrays = table("json").to_arrays()
    s = _longest_row(arrays[ptr_name])
    lo = int(arrays[ptr_name][s])
    key = arrays[key_name] = arrays[key_name].copy()
    key[lo], key[lo + 1] = key[lo + 1], key[lo]
    return arrays


@pytest.mark.parametrize("ptr_name,key_name", [("act_ptr", "act_term"), ("goto_ptr", "goto_nt")])
def test_an_unsorted_row_is_an_artifact_error(ptr_name, key_name):
    with pytest.raises(ArtifactError, match=f"{key_name} rows are not sorted"):
        LRTable.from_arrays(_swap_first_two_of_longest_row(ptr_name, key_name))


def test_a_repeated_key_in_a_row_is_an_artifact_error():
    arrays = table("json").to_arrays()
    s = _longest_row(arrays["act_ptr"])
    lo = int(arrays["act_ptr"][s])
    arrays["act_term"] = arrays["act_term"].copy()
    arrays["act_term"][lo + 1] = arrays["act_term"][lo]
    with pytest.raises(ArtifactError, match="act_term rows are not sorted"):
        LRTable.from_arrays(arrays)


@pytest.mark.parametrize("name,what", [("act_shift", "shift target"), ("goto_tgt", "goto target"),
                                       ("act_term", "act_term"), ("goto_nt", "goto_nt"),
                                       ("reduce_rules", "reduce_rules")])
def test_an_out_of_range_id_or_target_is_an_artifact_error(name, what):
    arrays = table("json").to_arrays()
    limit = {"act_shift": arrays["act_ptr"].size - 1, "goto_tgt": arrays["goto_ptr"].size - 1,
             "act_term": table("json").n_terminals, "goto_nt": len(table("json").nonterminals),
             "reduce_rules": len(table("json").rules)}[name]
    bad = damaged(name, lambda a: a.__setitem__(len(a) - 1, limit))
    with pytest.raises(ArtifactError, match=what):
        LRTable.from_arrays(bad)


def test_a_negative_shift_below_minus_one_is_an_artifact_error():
    with pytest.raises(ArtifactError, match="shift target"):
        LRTable.from_arrays(damaged("act_shift", lambda a: a.__setitem__(0, -2)))


@pytest.mark.parametrize("name", ["act_ptr", "act_roff", "goto_ptr"])
def test_a_decreasing_pointer_is_an_artifact_error(name):
    def change(a):
        i = int(np.argmax(np.diff(a))) + 1  # the end of the largest step goes below its start
        a[i] = a[i - 1] - 1
    with pytest.raises(ArtifactError, match=name):
        LRTable.from_arrays(damaged(name, change))


@pytest.mark.parametrize("name", ["act_ptr", "act_roff", "goto_ptr"])
def test_a_pointer_past_its_array_is_an_artifact_error(name):
    with pytest.raises(ArtifactError, match=name):
        LRTable.from_arrays(damaged(name, lambda a: a.__setitem__(len(a) - 1, a[-1] + 1)))


def test_pointers_for_different_state_counts_are_an_artifact_error():
    arrays = table("json").to_arrays()
    arrays["goto_ptr"] = np.append(arrays["goto_ptr"], arrays["goto_ptr"][-1]).astype(np.int32)
    with pytest.raises(ArtifactError, match="n_states"):
        LRTable.from_arrays(arrays)


def test_an_entry_without_an_action_is_an_artifact_error():
    arrays = table("json").to_arrays()
    only_shifts = np.flatnonzero((arrays["act_shift"] >= 0) & (np.diff(arrays["act_roff"]) == 0))
    arrays["act_shift"] = arrays["act_shift"].copy()
    arrays["act_shift"][only_shifts[0]] = -1
    with pytest.raises(ArtifactError, match="neither shifts nor reduces"):
        LRTable.from_arrays(arrays)


def test_wrong_dtype_is_an_artifact_error():
    arrays = table("arithmetic").to_arrays()
    arrays["reduce_rules"] = arrays["reduce_rules"].astype(np.int64)
    with pytest.raises(ArtifactError, match="reduce_rules"):
        LRTable.from_arrays(arrays)


def test_rule_naming_an_unknown_symbol_is_an_artifact_error():
    import json

    arrays = table("arithmetic").to_arrays()
    meta = json.loads(arrays["lr_meta"].tobytes())
    meta["rules"][1][1] = ["no_such_symbol"]
    arrays["lr_meta"] = encode_json_blob(meta)
    with pytest.raises(ArtifactError, match="unknown symbol"):
        LRTable.from_arrays(arrays)


def test_corrupt_meta_blob_is_an_artifact_error():
    arrays = table("arithmetic").to_arrays()
    arrays["lr_meta"] = np.frombuffer(b"{not json", dtype=np.uint8).copy()
    with pytest.raises(ArtifactError, match="lr_meta"):
        LRTable.from_arrays(arrays)


# ---------------------------------------------------------------- damaged rows in a mask artifact
@pytest.fixture(scope="module")
def saved_json_mask(gpt2, tmp_path_factory):
    import glrmask

    path = tmp_path_factory.mktemp("lr_artifact") / "json.glrm"
    glrmask.compile(ROOT / "grammars" / "json.lark", gpt2).save(path)
    return path


@pytest.mark.parametrize("damage", ["unsorted_row", "goto_target_out_of_range", "pointer_past_the_end"])
def test_a_mask_artifact_with_damaged_lr_rows_is_refused_on_load(saved_json_mask, gpt2, tmp_path, damage):
    import glrmask
    from glrmask.mask_artifact import ARTIFACT_KIND

    art = read_artifact(saved_json_mask, kind=ARTIFACT_KIND)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    key = {name: next(k for k in arrays if k.endswith(name)) for name in ("act_ptr", "act_term", "goto_tgt")}
    if damage == "unsorted_row":
        ptr = arrays[key["act_ptr"]]
        lo = int(ptr[_longest_row(ptr)])
        term = arrays[key["act_term"]]
        term[lo], term[lo + 1] = term[lo + 1], term[lo]
    elif damage == "goto_target_out_of_range":
        arrays[key["goto_tgt"]][0] = len(arrays[key["act_ptr"]]) - 1
    else:
        arrays[key["act_ptr"]][-1] += 1
    bad = tmp_path / "bad.glrm"
    write_artifact(bad, kind=ARTIFACT_KIND, meta=art.meta, arrays=arrays)
    with pytest.raises(ArtifactError, match="LR table arrays are inconsistent"):
        glrmask.Mask.load(bad, gpt2)
