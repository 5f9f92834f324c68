"""The command line: what each command prints, its exit code, and a precise message per misuse."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from lark import Lark

import glrmask
from glrmask import cli
from glrmask.cli import ExitCode, main

ROOT = Path(__file__).resolve().parents[1]
JSON = str(ROOT / "grammars" / "json.lark")
LIST = 'start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]+(?![0-9])/'
COLLIDING = 'start: A B\nA: /a+/\nB: "a"'


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Every CLI test compiles through the compile cache: keep it out of the user's ~/.cache
    (one directory for the whole module, so the GPT-2 trie is built once)."""
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "glrmask-cli-cache"))


def samples(out: str) -> list[tuple[str, str]]:
    """(text, status line) of each sample in ``sample``'s output."""
    blocks = re.findall(r"# sample (\d+)\n(.*?)\n# sample \1: (.*?)\n", out, flags=re.S)
    return [(text, status) for _k, text, status in blocks]


# -- sample ----------------------------------------------------------------------------------------

def test_sample_prints_numbered_separated_samples_that_lark_parses(capsys):
    assert main(["sample", LIST, "-n", "4", "--seed", "3"]) == ExitCode.OK
    found = samples(capsys.readouterr().out)
    assert len(found) == 4
    judge = Lark(LIST, parser="earley", lexer="dynamic", regex=False)
    for text, status in found:
        assert status.startswith("complete")
        judge.parse(text)


def test_sample_steers_to_an_end_after_max_tokens(capsys):
    assert main(["sample", LIST, "-n", "3", "--seed", "5", "--max-tokens", "3", "--finish-factor", "50"]) == 0
    found = samples(capsys.readouterr().out)
    judge = Lark(LIST, parser="earley", lexer="dynamic", regex=False)
    assert len(found) == 3
    for text, status in found:
        assert status.startswith("complete")
        judge.parse(text)


def test_sample_that_does_not_finish_is_marked_and_exits_incomplete(capsys):
    # twenty digits take several GPT-2 tokens; two tokens cannot finish
    code = main(["sample", "start: /[0-9]{20}/", "-n", "2", "--max-tokens", "2", "--finish-factor", "0"])
    out, err = capsys.readouterr()
    assert code == ExitCode.INCOMPLETE == 3
    assert all("INCOMPLETE" in status and "not a valid output" in status for _t, status in samples(out))
    assert "2 of 2 samples did not finish" in err


def test_sample_with_json_schema_prints_valid_instances(capsys):
    schema = {"type": "integer", "minimum": -20, "maximum": 300, "multipleOf": 4}
    assert main(["sample", "--json-schema", json.dumps(schema), "-n", "4", "--seed", "2"]) == 0
    found = samples(capsys.readouterr().out)
    assert len(found) == 4
    for text, _status in found:
        jsonschema.validate(json.loads(text), schema)


def test_sample_reads_a_compiled_artifact(tmp_path, capsys):
    art = str(tmp_path / "list.glrm")
    assert main(["compile", LIST, "-o", art]) == 0
    assert main(["sample", art, "-n", "2", "--seed", "1"]) == 0
    assert len(samples(capsys.readouterr().out)) == 2


# -- check -----------------------------------------------------------------------------------------

def test_check_accepts_a_valid_document(capsys):
    assert main(["check", JSON, "--text", '{"a": [1, 2.5e3, "x"]}']) == ExitCode.OK
    assert capsys.readouterr().out.startswith("ok: complete")


def test_check_reports_the_first_refused_byte_not_the_token_start(capsys):
    assert main(["check", JSON, "--text", '{"a": 01}']) == ExitCode.REJECTED == 4
    out = capsys.readouterr().out
    assert out.startswith("rejected at byte 7 (line 1, column 8): '1' is not allowed there")
    assert "\n  {\"a\": 01}\n         ^\n" in out


def test_check_reports_line_and_column_in_a_multiline_text(capsys):
    assert main(["check", JSON, "--text", '{\n  "a": tru,\n}']) == ExitCode.REJECTED
    assert "(line 2, column 11)" in capsys.readouterr().out


def test_check_reports_incomplete_text(capsys):
    assert main(["check", JSON, "--text", '{"a": ']) == ExitCode.INCOMPLETE
    assert capsys.readouterr().out.startswith("incomplete:")


def test_check_reads_the_text_from_a_file(tmp_path, capsys):
    doc = tmp_path / "doc.json"
    doc.write_text('[1, 2]', encoding="utf-8")
    assert main(["check", JSON, "--file", str(doc)]) == 0


def test_check_with_json_schema_refuses_an_out_of_range_value(capsys):
    schema = '{"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}}, "required": ["n"]}'
    assert main(["check", "--json-schema", schema, "--text", '{"n": 7}']) == ExitCode.OK
    assert main(["check", "--json-schema", schema, "--text", '{"n": 10}']) == ExitCode.REJECTED
    assert "rejected at byte 7" in capsys.readouterr().out


def test_json_schema_may_be_given_as_a_file(tmp_path, capsys):
    path = tmp_path / "schema.json"
    path.write_text('{"enum": ["a", "b"]}', encoding="utf-8")
    assert main(["check", "--json-schema", str(path), "--text", '"b"']) == 0


def test_lenient_ignores_unsupported_keywords_and_counts_the_warning(capsys):
    assert main(["check", "--json-schema", '{"type": "integer", "$dynamicRef": "#x"}', "--lenient",
                 "--text", "1"]) == 0
    assert "warning: 1 other warning (--warnings lists them)" in capsys.readouterr().err


# -- one precise message per misuse ----------------------------------------------------------------

def error_of(argv: list[str], capsys) -> str:
    assert main(argv) == ExitCode.ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_mistyped_grammar_path_says_the_file_does_not_exist(capsys):
    err = error_of(["compile", str(ROOT / "grammars" / "jsn.lark")], capsys)
    assert "error: grammar file not found:" in err and "did you mean" in err and "json.lark" in err


def test_bad_grammar_names_what_is_wrong(capsys):
    err = error_of(["check", "start: A\nA: /(a)\\1/", "--text", "aa"], capsys)
    assert err.startswith("error:") and "backreference" in err.lower()


def test_schema_text_with_a_json_syntax_error_shows_the_position(capsys):
    err = error_of(["check", "--json-schema", '{"type": "integer"', "--text", "1"], capsys)
    assert "error: --json-schema: invalid JSON at line 1, column 19: Expecting ',' delimiter" in err
    assert '  {"type": "integer"\n                    ^' in err


def test_schema_file_with_a_json_syntax_error_names_the_file_and_position(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text('{\n  "type": integer\n}', encoding="utf-8")
    err = error_of(["check", "--json-schema", str(path), "--text", "1"], capsys)
    assert f"error: {path}: invalid JSON at line 2, column 11" in err


def test_missing_schema_file_says_so(tmp_path, capsys):
    err = error_of(["check", "--json-schema", str(tmp_path / "absent.json"), "--text", "1"], capsys)
    assert "error: --json-schema: no such file:" in err


def test_unsupported_schema_keyword_names_it(capsys):
    err = error_of(["check", "--json-schema", '{"$dynamicRef": "#x"}', "--text", "1"], capsys)
    assert err.startswith("error:") and "#/$dynamicRef" in err


def test_missing_text_file_says_so(tmp_path, capsys):
    err = error_of(["check", JSON, "--file", str(tmp_path / "absent.txt")], capsys)
    assert "error: --file: no such file:" in err


def test_missing_tokenizer_file_says_so(tmp_path, capsys):
    err = error_of(["check", JSON, "--tokenizer", str(tmp_path / "tok.json"), "--text", "1"], capsys)
    assert "error:" in err and "does not exist" in err


def test_inspect_of_a_missing_artifact_says_so(tmp_path, capsys):
    err = error_of(["inspect", str(tmp_path / "absent.glrm")], capsys)
    assert "error: no such file:" in err


def test_compiling_an_artifact_again_points_to_inspect(tmp_path, capsys):
    art = str(tmp_path / "list.glrm")
    assert main(["compile", LIST, "-o", art]) == 0
    capsys.readouterr()
    err = error_of(["compile", art], capsys)
    assert "already a compiled artifact" in err and "glrmask inspect" in err


def test_compile_into_a_missing_directory_says_it_cannot_write(tmp_path, capsys):
    err = error_of(["compile", LIST, "-o", str(tmp_path / "no" / "dir" / "x.glrm")], capsys)
    assert "error: cannot write" in err


def test_hub_name_fails_fast_when_the_hub_cannot_be_reached(monkeypatch, capsys):
    pytest.importorskip("huggingface_hub")  # optional dependency
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused at once
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(proxy, raising=False)
    err = error_of(["check", JSON, "--tokenizer", "glrmask-tests/no-such-model", "--text", "1"], capsys)
    assert "not in the local Hugging Face cache and 127.0.0.1 cannot be reached (offline?)" in err


def test_hub_name_with_hf_hub_offline_fails_without_network(monkeypatch, capsys):
    pytest.importorskip("huggingface_hub")  # optional dependency
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = error_of(["check", JSON, "--tokenizer", "glrmask-tests/no-such-model", "--text", "1"], capsys)
    assert "HF_HUB_OFFLINE is set" in err


@pytest.mark.parametrize("argv", [
    ["check", "--text", "1"],
    ["check", LIST, "--json-schema", '{"type": "integer"}', "--text", "1"],
    ["check", "--json-schema", '{"type": "integer"}', "--start", "x", "--text", "1"],
    ["check", LIST, "--lenient", "--text", "[1]"],
    ["sample", JSON, "--no-such-option"],
    [],
], ids=["neither", "both", "start-with-schema", "lenient-without-schema", "unknown-option", "no-command"])
def test_inconsistent_command_lines_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == ExitCode.USAGE == 2
    assert "error:" in capsys.readouterr().err


# -- warnings and -q -------------------------------------------------------------------------------

def test_warnings_are_counted_in_one_line(capsys):
    main(["check", COLLIDING, "--text", "a"])
    err = capsys.readouterr().err
    assert err == "warning: 1 possible lookahead collision (--warnings lists them)\n"


def test_warnings_option_lists_them(capsys):
    main(["check", COLLIDING, "--text", "a", "--warnings"])
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: lookahead collision") and "A" in lines[0]


@pytest.mark.parametrize("argv", [["-q", "check", COLLIDING, "--text", "a"],
                                  ["check", COLLIDING, "--text", "a", "--quiet"]], ids=["global", "command"])
def test_quiet_prints_only_results(argv, capsys):
    assert main(argv) == ExitCode.INCOMPLETE
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("incomplete:")


# -- compile, inspect, cache, version, demo, help --------------------------------------------------

def test_compile_writes_an_artifact_and_prints_its_stages(tmp_path, capsys):
    art = tmp_path / "json.glrm"
    assert main(["compile", JSON, "-o", str(art)]) == 0
    out = capsys.readouterr().out
    assert art.is_file() and out.startswith(f"wrote {art}") and "parser DWA" in out


def test_compile_json_schema(tmp_path, capsys):
    art = tmp_path / "s.glrm"
    assert main(["compile", "--json-schema", '{"type": "boolean"}', "-o", str(art)]) == 0
    assert main(["check", str(art), "--text", "true"]) == 0


def test_inspect_names_the_tokenizer_its_size_and_end_tokens(tmp_path, capsys):
    art = str(tmp_path / "list.glrm")
    main(["compile", LIST, "-o", art])
    capsys.readouterr()
    assert main(["inspect", art]) == 0
    out = capsys.readouterr().out
    eos = list(glrmask.Vocab.default().eos_token_ids)
    assert f"tokenizer     built-in GPT-2: 50,257 tokens, 50,257 logits, end tokens {eos}" in out
    assert "grammar       start 'start'" in out


def test_cache_info_shows_where_the_caches_live(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path))
    main(["compile", LIST, "-o", str(tmp_path / "x.glrm")])  # fills the compile cache
    (tmp_path / "tries").mkdir(exist_ok=True)
    (tmp_path / "tries" / "0123.glrtrie").write_bytes(b"trie")  # this process holds its trie in memory
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache root    {tmp_path} (GLRMASK_CACHE_DIR)" in out
    assert re.search(r"^compiled +1 file, .* MB  " + re.escape(str(tmp_path / "compiled")), out, re.M)
    assert re.search(r"^tries +1 file, ", out, re.M)


def test_cache_clear_removes_only_what_was_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path))
    main(["compile", LIST, "-o", str(tmp_path / "x.glrm")])
    (tmp_path / "tries").mkdir(exist_ok=True)
    (tmp_path / "tries" / "0123.glrtrie").write_bytes(b"trie")
    keep = tmp_path / "compiled" / "notes.txt"
    keep.write_text("mine")
    capsys.readouterr()
    assert main(["cache", "clear", "--compiled"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 compiled file")
    assert keep.exists() and list((tmp_path / "tries").iterdir())
    assert main(["cache", "clear"]) == 0
    assert not list((tmp_path / "tries").iterdir())


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"glrmask {glrmask.__version__}\n"


def test_demo_checks_a_valid_and_an_invalid_document_and_samples(capsys):
    assert main(["demo", "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "ok: complete" in out and "rejected at byte 25" in out
    shown = out.split("yet every document is valid for the schema):\n")[1].split("\nNext:")[0]
    docs = [json.loads(block) for block in re.split(r"\n(?=   \{)", shown)]  # one block per sample
    assert len(docs) == 2
    for doc in docs:
        jsonschema.validate(doc, cli.DEMO_SCHEMA)


@pytest.mark.parametrize("command", ["demo", "check", "sample", "compile", "inspect", "cache"])
def test_every_command_has_help_with_examples_and_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "examples:\n  glrmask " + command in out and "exit codes:" in out


def test_top_level_help_documents_exit_codes_and_the_cache(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "3  incomplete" in out and "GLRMASK_CACHE_DIR" in out and "~/.cache/glrmask" in out


# -- serving commands ------------------------------------------------------------------------------

def test_the_cli_works_without_the_serving_module(monkeypatch):
    real = cli.importlib.import_module

    def absent(name, *a):
        if name == "glrmask.serve.commands":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *a)

    monkeypatch.setattr(cli.importlib, "import_module", absent)
    assert "generate" not in cli.build_parser().format_help()


def test_an_error_inside_the_serving_module_is_not_swallowed(monkeypatch):
    def broken(name, *a):
        raise ModuleNotFoundError("No module named 'glrmask.serve.engin'", name="glrmask.serve.engin")

    monkeypatch.setattr(cli.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError):
        cli.build_parser()


def test_schema_path_that_is_a_directory_says_so(tmp_path, capsys):
    err = error_of(["check", "--json-schema", str(tmp_path), "--text", "1"], capsys)
    assert "error: --json-schema: not a file:" in err


MISTRAL = str(ROOT / "tests" / "data" / "tokenizers" / "mistral-7b-v0.1" / "tokenizer.json.gz")


@pytest.fixture(scope="module")
def mistral_artifact(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mistral") / "list.glrm")
    assert main(["-q", "compile", LIST, "--tokenizer", MISTRAL, "-o", path]) == 0
    return path


def test_inspect_names_another_tokenizer_when_given_it(mistral_artifact, capsys):
    capsys.readouterr()
    assert main(["inspect", mistral_artifact, "--tokenizer", MISTRAL]) == 0
    out = capsys.readouterr().out
    eos = list(glrmask.Vocab.from_tokenizer_json(MISTRAL).eos_token_ids)
    assert re.search(r"^tokenizer     .*mistral.*: 32,000 tokens, 32,000 logits, end tokens " + re.escape(str(eos)),
                     out, re.M)


def test_inspect_with_the_wrong_tokenizer_says_so(mistral_artifact, capsys):
    capsys.readouterr()
    err = error_of(["inspect", mistral_artifact, "--tokenizer", "default"], capsys)
    assert "was compiled for another tokenizer than default" in err
