"""``glrmask generate`` on a tiny random Llama saved as an HF model directory (no download)."""
from __future__ import annotations

import gzip
import json

import pytest
import torch

from conftest import shipped_tokenizer
from glrmask.cli import main

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=50257, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        eos_token_id=50256, bos_token_id=50256,
    )
    path = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    backend = Tokenizer.from_str(gzip.open(shipped_tokenizer("gpt2"), "rt", encoding="utf-8").read())
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>").save_pretrained(path)
    return path


def test_generate_streams_the_text_to_stdout(model_dir, capsys):
    code = main(["generate", "--model", str(model_dir), "--prompt", "Hello", "--raw", "--max-tokens", "5",
                 "--temperature", "0"])
    out = capsys.readouterr()
    assert code == 0 and out.out.endswith("\n") and "max-tokens" in out.err


def test_generate_under_a_json_schema_prints_a_valid_document(model_dir, capsys):
    schema = json.dumps({"type": "string", "enum": ["alpha", "beta"]})
    code = main(["generate", "--model", str(model_dir), "--prompt", "Pick", "--raw", "--json-schema", schema,
                 "--seed", "3", "--max-tokens", "10"])
    assert code == 0
    assert json.loads(capsys.readouterr().out) in ("alpha", "beta")


def test_a_generation_that_cannot_continue_exits_1_with_the_reason(model_dir, capsys):
    code = main(["generate", "--model", str(model_dir), "--prompt", "x", "--raw", "--grammar", 'start: "ab"',
                 "--ban", "ab", "--seed", "0"])
    assert code == 1 and "generation failed" in capsys.readouterr().err


def test_a_missing_model_path_is_a_clear_error(tmp_path, capsys):
    code = main(["generate", "--model", str(tmp_path / "nope"), "--prompt", "x"])
    assert code == 1 and "does not exist" in capsys.readouterr().err
