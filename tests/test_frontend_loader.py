"""load_grammar: text or path, and format detection by extension or content."""
from __future__ import annotations

from pathlib import Path

import pytest

from glrmask.errors import GrammarError
from glrmask.grammar.loader import detect_format, load_grammar

LARK = 'start: "a" b\nb: "b"\n'
GBNF = 'root ::= "a" b\nb ::= "b"\n'


def test_text_with_rule_arrows_is_gbnf():
    assert load_grammar(GBNF).start == "root"


def test_text_without_rule_arrows_is_lark():
    assert load_grammar(LARK).start == "start"


@pytest.mark.parametrize("suffix,text", [(".lark", LARK), (".gbnf", GBNF), (".ebnf", GBNF)])
def test_extension_decides_the_format(tmp_path, suffix, text):
    path = tmp_path / f"g{suffix}"
    path.write_text(text)
    g = load_grammar(path)
    assert g.source_name == str(path)
    assert len(g.terminals) == 2


def test_unknown_extension_falls_back_to_content(tmp_path):
    path = tmp_path / "grammar.txt"
    path.write_text(GBNF)
    assert load_grammar(str(path)).start == "root"


def test_extension_wins_over_content():
    assert detect_format("x ::= y", Path("g.lark")) == "lark"


def test_explicit_format_and_ebnf_alias():
    assert load_grammar(GBNF, format="ebnf").start == "root"
    assert load_grammar(GBNF, format="gbnf").start == "root"
    assert load_grammar(LARK, format="lark").start == "start"


def test_regex_format_is_only_used_when_asked():
    g = load_grammar("[0-9]+", format="regex")
    assert len(g.terminals) == 1


def test_start_override_and_defaults():
    assert load_grammar(LARK, start="b").start == "b"
    assert load_grammar(GBNF, start="b").start == "b"


def test_unknown_format_is_rejected():
    with pytest.raises(GrammarError, match="unknown grammar format 'yaml'"):
        load_grammar(LARK, format="yaml")


def test_missing_path_object_is_an_error(tmp_path):
    with pytest.raises(GrammarError, match="not found"):
        load_grammar(tmp_path / "nope.lark")


def test_lark_file_imports_relative_to_its_directory(tmp_path):
    (tmp_path / "lib.lark").write_text("WORD: /[a-z]+/\n")
    main = tmp_path / "main.lark"
    main.write_text("start: WORD\n%import lib.WORD\n")
    assert "WORD" in load_grammar(main).terminals


def test_a_mistyped_grammar_path_is_a_missing_file_not_a_parse_error(tmp_path):
    (tmp_path / "json.lark").write_text(LARK)
    with pytest.raises(GrammarError, match=r"grammar file not found: .*jsn\.lark \(did you mean .*json\.lark\?\)"):
        load_grammar(str(tmp_path / "jsn.lark"))


def test_a_path_into_a_missing_directory_says_so(tmp_path):
    with pytest.raises(GrammarError, match="grammar file not found: .*no directory"):
        load_grammar(str(tmp_path / "absent" / "g.lark"))


def test_a_missing_path_object_is_a_missing_file(tmp_path):
    with pytest.raises(GrammarError, match="grammar file not found"):
        load_grammar(tmp_path / "g.gbnf")


def test_a_single_word_is_neither_a_file_nor_a_grammar():
    with pytest.raises(GrammarError, match="not found: start .*defines no rule"):
        load_grammar("start")


def test_a_regex_is_never_taken_for_a_path():
    assert len(load_grammar("[a-z]+/x.lark", format="regex").terminals) == 1
