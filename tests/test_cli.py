"""The command line: sample and check with the built-in tokenizer."""
from __future__ import annotations

from pathlib import Path

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
