"""The JSON Schema front-end builds the grammar IR directly, and it is the grammar the Lark text meant.

``lower_json_schema_ir`` used to be "print Lark text, parse it with the Lark front-end". On every
schema of the JSON Schema tests (tests/data/jsonschema/lowering_corpus.jsonl, recorded from them
with their options by tests/json_schema_corpus_recorder.py), the JSONSchemaBench sample
(tests/data/jsonschema/maskbench_sample.jsonl) and the first schemas of each MaskBench split
(/work/shared, when present), the direct IR must equal — rules in order, terminal names and
patterns in order, start, ignore — what the Lark front-end reads:

* from the lowering's own Lark rendering, where the regexes are written in the lowering's escape
  vocabulary (lark is the judge of what they mean: the former path);
* from ``lower_json_schema``'s text, which prints the IR (so the printed text is faithful).

Then a few behaviours of ``compile_json_schema`` on that IR, through the public API.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from _maskbench import MASKBENCH, first_schemas
import glrmask
from glrmask.errors import GrammarTooComplex, UnsupportedSchema
from glrmask.grammar.ir import Grammar
from glrmask.grammar.lark_frontend import grammar_from_lark
from glrmask.json_schema import lower_json_schema, lower_json_schema_ir
from glrmask.json_schema.builder import lark_pattern, lark_regex_literal
from glrmask.json_schema.lowering import Options, build, load_schema

DATA = Path(__file__).resolve().parent / "data" / "jsonschema"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


CORPUS = _jsonl(DATA / "lowering_corpus.jsonl")
SAMPLE = _jsonl(DATA / "maskbench_sample.jsonl")


def _maskbench(per_split: int) -> Iterator[tuple[str, Any]]:
    return first_schemas(per_split)


def _shape(g: Grammar) -> tuple:
    return g.rules, list(g.terminals.items()), g.start, g.ignore, g.source_name


def _assert_same_as_lark(schema: Any, options: dict) -> None:
    try:
        ir, warnings = lower_json_schema_ir(schema, **options)
    except (UnsupportedSchema, GrammarTooComplex, ValueError):
        return  # refusals (bad options included) happen in the lowering, before either emission
    builder, _ = build(load_schema(schema), Options(**options))
    former = grammar_from_lark(builder.to_lark("start"), source_name="<json-schema>")
    assert _shape(ir) == _shape(former)
    text, text_warnings = lower_json_schema(schema, **options)
    assert text.isascii()
    assert _shape(grammar_from_lark(text, source_name="<json-schema>")) == _shape(ir)
    assert text_warnings == warnings and ir.warnings == []


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_the_ir_of_every_tested_schema_is_what_lark_reads_from_its_text(i):
    _assert_same_as_lark(CORPUS[i]["schema"], CORPUS[i]["options"])


@pytest.mark.parametrize("rec", SAMPLE, ids=[r["file"] for r in SAMPLE])
def test_the_ir_of_the_jsonschemabench_sample_is_what_lark_reads_from_its_text(rec):
    _assert_same_as_lark(rec["schema"], {})


def _maskbench_or_skip(per_split: int) -> list[tuple[str, Any]]:
    if not MASKBENCH.is_dir():
        pytest.skip(f"no JSONSchemaBench data at {MASKBENCH}")
    return list(_maskbench(per_split))


def test_the_ir_of_the_first_maskbench_schemas_is_what_lark_reads_from_their_text():
    for name, schema in _maskbench_or_skip(3):
        _assert_same_as_lark(schema, {})


@pytest.mark.slow
def test_the_ir_of_forty_schemas_per_maskbench_split_is_what_lark_reads_from_their_text():
    for name, schema in _maskbench_or_skip(40):
        _assert_same_as_lark(schema, {})


@pytest.mark.parametrize("options", [{"whitespace": "compact"}, {"indent": 2}, {"property_order": "any"},
                                     {"max_whitespace": 1, "max_indent": 0}, {"format_mode": "annotation"}])
def test_layout_options_give_the_ir_lark_reads(options):
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x/y", "é", 1.5]}},
                                               "d": {"type": "string", "format": "date"}},
              "required": ["a"]}
    _assert_same_as_lark(schema, options)


@pytest.mark.parametrize("regex", ["\\x22", "a/b", "\\/", "\\\\u0041", "\\u00e9\\U0001f600", "[\\t\\n\\r\\f]",
                                   "\\ud83d\\ude00", "'\\''", "\\\\x22", "\\-\\.\\\\\\]"])
def test_lark_pattern_is_lark_reading_of_the_regex_literal(regex):
    text = f"start: T\nT: {lark_regex_literal(regex)}\n"
    assert grammar_from_lark(text).terminals["T"].pattern == lark_pattern(regex)


def test_the_ir_starts_at_start_and_ignores_nothing():
    ir, _ = lower_json_schema_ir({"type": "integer"})
    assert ir.start == "start" and ir.rules[0].lhs == "start"
    assert ir.ignore == () and ir.source_name == "<json-schema>"


def test_the_ir_counts_against_the_grammar_budget():
    from glrmask.budget import activate_budget

    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(50)}}
    with activate_budget({"grammar": {"max_symbols": 100}}):
        with pytest.raises(GrammarTooComplex, match=r"front-end \(JSON Schema\).*grammar\.max_symbols"):
            lower_json_schema_ir(schema)


# ------------------------------------------------------------------------------------------------
# compile_json_schema on the direct IR
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vocab() -> glrmask.Vocab:
    return glrmask.Vocab.default()


PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name"], "additionalProperties": False}


def _accepts(mask: glrmask.Mask, text: str) -> bool:
    state = mask.start()
    return state.commit_bytes(text.encode()) and state.is_accepting()


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_compiled_schema_accepts_valid_and_refuses_invalid_documents(vocab, mode):
    mask = glrmask.compile_json_schema(PERSON, vocab, mode=mode)
    assert _accepts(mask, '{"name": "Ann", "age": 41}')
    assert _accepts(mask, '{"name":"Bo"}')
    assert not _accepts(mask, '{"age": 41}')
    assert not _accepts(mask, '{"name": "far too long"}')
    assert not _accepts(mask, '{"name": "Ann", "age": -1}')


def test_compiled_schema_masks_equal_those_of_its_printed_grammar(vocab):
    direct = glrmask.compile_json_schema(PERSON, vocab, mode="dynamic")
    printed = glrmask.compile(lower_json_schema(PERSON)[0], vocab, format="lark", mode="dynamic")
    a, b = direct.start(), printed.start()
    for token in vocab.encode('{"name": "Ann", "age": 4'):
        assert (direct.get_mask(a) == printed.get_mask(b)).all()
        assert a.commit(token) and b.commit(token)
    assert (direct.get_mask(a) == printed.get_mask(b)).all()


def test_lenient_warnings_reach_the_mask(vocab):
    mask = glrmask.compile_json_schema({"type": "string", "$recursiveRef": "#"}, vocab, mode="dynamic",
                                       lenient=True)
    assert any("$recursiveRef" in w for w in mask.warnings)


def test_unsupported_keywords_are_reported_with_their_pointer(vocab):
    with pytest.raises(UnsupportedSchema, match=r"#/properties/a/\$recursiveRef: keyword"):
        glrmask.compile_json_schema({"properties": {"a": {"$recursiveRef": "#"}}}, vocab, mode="dynamic")
