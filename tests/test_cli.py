"""The command line: sample and check with the built-in tokenizer."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from lark import Lark

from glrmask.cli import main

JSON = str(Path(__file__).resolve().parents[1] / "grammars" / "json.lark")


LIST = 'start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]+(?![0-9])/'


def test_sample_prints_outputs_that_lark_parses(capsys):
    assert main(["sample", LIST, "-n", "4", "--seed", "3", "--max-tokens", "200"]) == 0
    out, err = capsys.readouterr()
    judge = Lark(LIST, parser="earley", lexer="dynamic", regex=False)
    reports = [l for l in err.splitlines() if l.startswith("# sample")]
    lines = out.split("\n")[:-1]
    assert len(lines) == len(reports) == 4
    ended = 0
    for line, report in zip(lines, reports):
        if "end token" in report:
            judge.parse(line)
            ended += 1
    assert ended


def test_check_accepts_a_valid_document(capsys):
    assert main(["check", JSON, "--text", '{"a": [1, 2.5e3, "x"]}']) == 0
    assert "ok" in capsys.readouterr().out


def test_check_reports_the_first_refused_token_with_context(capsys):
    assert main(["check", JSON, "--text", '{"a": 01}']) == 1
    out = capsys.readouterr().out
    assert "rejected" in out and "context" in out


def test_check_reports_incomplete_text(capsys):
    assert main(["check", JSON, "--text", '{"a": ']) == 2
    assert "incomplete" in capsys.readouterr().out


def test_bad_grammar_is_a_clear_error_not_a_traceback(capsys):
    assert main(["check", "start: A\nA: /(a)\\1/", "--text", "aa"]) == 2
    assert "error:" in capsys.readouterr().err


# -- --json-schema ---------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["n"], "additionalProperties": False}
# no whitespace is possible inside or around a top-level integer, so each sample is one output line
SCALAR_SCHEMA = {"type": "integer", "minimum": -20, "maximum": 300, "multipleOf": 4}


def _schema_file(tmp_path, schema=SCHEMA) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema), encoding="utf-8")
    return str(path)


def test_sample_with_json_schema_prints_valid_instances(tmp_path, capsys):
    assert main(["sample", "--json-schema", _schema_file(tmp_path, SCALAR_SCHEMA), "-n", "4", "--seed", "2"]) == 0
    out, err = capsys.readouterr()
    reports = [l for l in err.splitlines() if l.startswith("# sample")]
    lines = out.split("\n")[:-1]
    assert len(lines) == len(reports) == 4
    finished = [line for line, report in zip(lines, reports) if "end token" in report]
    assert finished
    for line in finished:
        jsonschema.validate(json.loads(line), SCALAR_SCHEMA)


def test_check_with_json_schema_accepts_a_valid_instance(tmp_path, capsys):
    assert main(["check", "--json-schema", _schema_file(tmp_path), "--text", '{"n": 7}']) == 0
    assert "ok" in capsys.readouterr().out


def test_check_with_json_schema_refuses_an_out_of_range_value(tmp_path, capsys):
    assert main(["check", "--json-schema", _schema_file(tmp_path), "--text", '{"n": 10}']) == 1
    assert "rejected" in capsys.readouterr().out


def test_json_schema_may_be_given_as_json_text(capsys):
    assert main(["check", "--json-schema", '{"enum": ["a", "b"]}', "--text", '"b"']) == 0
    assert "ok" in capsys.readouterr().out


def test_unsupported_schema_keyword_is_a_clear_error(capsys):
    assert main(["check", "--json-schema", '{"not": {"type": "null"}}', "--text", "1"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "not" in err


def test_lenient_ignores_unsupported_keywords_with_a_warning(capsys):
    assert main(["check", "--json-schema", '{"type": "integer", "not": {"const": 1}}', "--lenient",
                 "--text", "1"]) == 0
    assert "warning" in capsys.readouterr().err


def test_missing_schema_file_is_a_clear_error(tmp_path, capsys):
    assert main(["check", "--json-schema", str(tmp_path / "absent.json"), "--text", "1"]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["check", "--text", "1"],
    ["check", LIST, "--json-schema", '{"type": "integer"}', "--text", "1"],
    ["check", "--json-schema", '{"type": "integer"}', "--start", "x", "--text", "1"],
    ["check", LIST, "--lenient", "--text", "[1]"],
], ids=["neither", "both", "start-with-schema", "lenient-without-schema"])
def test_inconsistent_source_options_are_usage_errors(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_sample_steers_to_an_end_after_max_tokens(capsys):
    assert main(["sample", LIST, "-n", "3", "--seed", "5", "--max-tokens", "3", "--finish-factor", "50"]) == 0
    out, err = capsys.readouterr()
    judge = Lark(LIST, parser="earley", lexer="dynamic", regex=False)
    reports = [l for l in err.splitlines() if l.startswith("# sample")]
    assert all("end token" in r for r in reports)
    for line in out.split("\n")[:-1]:
        judge.parse(line)
