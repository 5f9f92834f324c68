"""Specification of glrmask.integrations.transformers.LogitsProcessor.

Two levels: the processor called directly with hand-made ``(input_ids, scores)`` (what transformers
passes at each step), and ``model.generate`` on a tiny randomly initialised Llama built from a
config (no download) with the shipped GPT-2 tokenizer, whose logits (50304) are wider than the
vocabulary (50257). The judges are independent of glrmask: lark parses the Lark outputs and
jsonschema validates the JSON outputs.
"""
from __future__ import annotations

import json

import jsonschema
import lark
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import glrmask  # noqa: E402
from glrmask.integrations.transformers import LogitsProcessor  # noqa: E402

EOS = 50256
WIDTH = 50304  # the tiny model's logits: padded past GPT-2's 50257 tokens

SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ab", "cd"]}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
LARK = 'start: "[" NUM ("," NUM)~0..2 "]"\nNUM: /[0-9]{1,2}/\n'


@pytest.fixture(scope="module")
def vocab(gpt2):
    return gpt2


@pytest.fixture(scope="module")
def json_mask(vocab):
    return glrmask.compile_json_schema(SCHEMA, vocab, mode="dynamic", whitespace="compact")


@pytest.fixture(scope="module")
def lark_mask(vocab):
    return glrmask.compile(LARK, vocab, mode="dynamic")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=WIDTH, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
        bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS,
    )
    m = transformers.LlamaForCausalLM(config).eval()
    m.generation_config.pad_token_id = EOS
    m.generation_config.eos_token_id = EOS
    return m


def allowed(mask, state) -> set[int]:
    return set(glrmask.bitmask.ids_from_mask(mask.get_mask(state)).tolist())


def finite(scores_row) -> set[int]:
    return set(torch.isfinite(scores_row).nonzero().flatten().tolist())


def text_of(vocab, ids: list[int]) -> str:
    """The generated text up to the first end token."""
    if EOS in ids:
        ids = ids[: ids.index(EOS)]
    return vocab.decode_bytes(ids).decode("utf-8")


def left_padded(vocab, prompts: list[str]):
    encoded = [vocab.encode(p) for p in prompts]
    longest = max(map(len, encoded))
    ids = torch.full((len(encoded), longest), EOS, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, longest - len(e):] = torch.tensor(e)
        attention[i, longest - len(e):] = 1
    return ids, attention


# ---- one step at a time ------------------------------------------------------------------------


def test_first_call_masks_from_the_start_state_and_commits_nothing_of_the_prompt(vocab, lark_mask):
    proc = LogitsProcessor(lark_mask)
    prompt = torch.tensor([vocab.encode("[1,2] and more")])
    scores = proc(prompt, torch.zeros(1, WIDTH))
    assert finite(scores[0]) == allowed(lark_mask, lark_mask.start())


def test_each_step_commits_the_newly_generated_token(vocab, lark_mask):
    proc = LogitsProcessor(lark_mask)
    prompt = vocab.encode("x")
    proc(torch.tensor([prompt]), torch.zeros(1, WIDTH))
    open_bracket = vocab.encode("[")[0]
    scores = proc(torch.tensor([prompt + [open_bracket]]), torch.zeros(1, WIDTH))
    state = lark_mask.start()
    assert state.commit(open_bracket)
    assert finite(scores[0]) == allowed(lark_mask, state)


def test_an_unconstrained_prompt_keeps_its_scores(vocab, lark_mask):
    proc = LogitsProcessor([lark_mask, None])
    scores = torch.randn(2, WIDTH)
    before = scores.clone()
    proc(torch.tensor([vocab.encode("ab"), vocab.encode("cd")]), scores)
    assert torch.equal(scores[1], before[1])
    assert finite(scores[0]) == allowed(lark_mask, lark_mask.start())


def test_ids_past_the_vocabulary_are_disallowed(vocab, lark_mask):
    scores = LogitsProcessor(lark_mask)(torch.tensor([[1]]), torch.zeros(1, WIDTH))
    assert torch.isneginf(scores[0, vocab.n_logits:]).all()


def test_reordered_beams_continue_their_parent_beam(vocab, lark_mask):
    """Beam search replaced row 1 by a copy of row 0 extended with another token."""
    proc = LogitsProcessor(lark_mask)
    p = vocab.encode("x")
    lb, one, two = vocab.encode("[")[0], vocab.encode("1")[0], vocab.encode("2")[0]
    proc(torch.tensor([p, p]), torch.zeros(2, WIDTH))
    proc(torch.tensor([p + [lb], p + [lb]]), torch.zeros(2, WIDTH))
    proc(torch.tensor([p + [lb, one], p + [lb, two]]), torch.zeros(2, WIDTH))
    scores = proc(torch.tensor([p + [lb, two, one], p + [lb, one, one]]), torch.zeros(2, WIDTH))
    for row, tokens in enumerate(([lb, two, one], [lb, one, one])):
        state = lark_mask.start()
        assert all(state.commit(t) for t in tokens)
        assert finite(scores[row]) == allowed(lark_mask, state)


def test_a_shorter_sequence_rolls_back(vocab, lark_mask):
    """Assisted decoding re-scores a prefix after rejecting draft tokens."""
    proc = LogitsProcessor(lark_mask)
    p = vocab.encode("x")
    lb, one = vocab.encode("[")[0], vocab.encode("1")[0]
    proc(torch.tensor([p]), torch.zeros(1, WIDTH))
    proc(torch.tensor([p + [lb, one]]), torch.zeros(1, WIDTH))
    scores = proc(torch.tensor([p + [lb]]), torch.zeros(1, WIDTH))
    state = lark_mask.start()
    state.commit(lb)
    assert finite(scores[0]) == allowed(lark_mask, state)


def test_a_finished_row_is_held_to_its_end_token(vocab, lark_mask):
    proc = LogitsProcessor(lark_mask)
    p = vocab.encode("x")
    sentence = vocab.encode("[7]")
    proc(torch.tensor([p]), torch.zeros(1, WIDTH))
    scores = proc(torch.tensor([p + sentence]), torch.zeros(1, WIDTH))
    assert EOS in finite(scores[0])
    scores = proc(torch.tensor([p + sentence + [EOS]]), torch.zeros(1, WIDTH))
    assert finite(scores[0]) == {EOS}


def test_a_new_prompt_starts_a_new_generation(vocab, lark_mask):
    proc = LogitsProcessor(lark_mask)
    lb = vocab.encode("[")[0]
    proc(torch.tensor([vocab.encode("x")]), torch.zeros(1, WIDTH))
    proc(torch.tensor([vocab.encode("x") + [lb]]), torch.zeros(1, WIDTH))
    scores = proc(torch.tensor([vocab.encode("y z")]), torch.zeros(1, WIDTH))
    assert finite(scores[0]) == allowed(lark_mask, lark_mask.start())


def test_a_beam_continued_with_a_disallowed_token_is_released(vocab, lark_mask):
    proc = LogitsProcessor(lark_mask)
    p = vocab.encode("x")
    letter = vocab.encode("a")[0]
    proc(torch.tensor([p]), torch.zeros(1, WIDTH))
    scores = proc(torch.tensor([p + [letter]]), torch.zeros(1, WIDTH))
    assert proc.rejected == [(0, 0, letter)]
    assert torch.isfinite(scores).all()


def test_scores_narrower_than_the_mask_are_an_error(vocab, lark_mask):
    with pytest.raises(glrmask.GlrmaskError, match="scores only"):
        LogitsProcessor(lark_mask)(torch.tensor([[1]]), torch.zeros(1, 1000))


def test_rows_must_be_a_multiple_of_the_prompts(vocab, lark_mask):
    with pytest.raises(glrmask.GlrmaskError, match="num_beams"):
        LogitsProcessor([lark_mask, lark_mask])(torch.tensor([[1], [1], [1]]), torch.zeros(3, WIDTH))


def test_a_vocabulary_without_end_tokens_is_refused():
    vocab = glrmask.Vocab.from_token_bytes([b"a", b"b"])
    mask = glrmask.compile('start: "a"', vocab, mode="dynamic")
    with pytest.raises(glrmask.GlrmaskError, match="no end token"):
        LogitsProcessor(mask)


# ---- model.generate ------------------------------------------------------------------------------


def check_outputs(vocab, rows: list[list[int]], kinds: list[str]) -> None:
    parser = lark.Lark(LARK)
    for ids, kind in zip(rows, kinds):
        if kind == "free":
            continue
        assert EOS in ids, f"{kind} row did not finish: {vocab.decode_bytes(ids)!r}"
        text = text_of(vocab, ids)
        if kind == "json":
            jsonschema.validate(json.loads(text), SCHEMA)
        else:
            parser.parse(text)


def generate(model, vocab, masks, prompts, **kw):
    ids, attention = left_padded(vocab, prompts)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=attention,
                             logits_processor=[LogitsProcessor(masks)], max_new_tokens=40, **kw)
    return out[:, ids.shape[1]:].tolist()


def test_greedy_batch_of_three_with_one_row_unconstrained(model, vocab, json_mask, lark_mask):
    rows = generate(model, vocab, [json_mask, None, lark_mask], ["Give JSON:", "Hi", "A list please:"],
                    do_sample=False)
    check_outputs(vocab, rows, ["json", "free", "lark"])


def test_seeded_sampling_batch_of_three(model, vocab, json_mask, lark_mask):
    torch.manual_seed(1)
    rows = generate(model, vocab, [lark_mask, json_mask, None], ["a", "bb cc", "d"],
                    do_sample=True, temperature=1.0, top_k=0)
    check_outputs(vocab, rows, ["lark", "json", "free"])


def test_beam_search_two_beams_every_returned_sequence_is_valid(model, vocab, json_mask, lark_mask):
    rows = generate(model, vocab, [json_mask, None, lark_mask], ["Give JSON:", "Hi", "A list please:"],
                    do_sample=False, num_beams=2, num_return_sequences=2)
    check_outputs(vocab, rows, ["json", "json", "free", "free", "lark", "lark"])


def test_one_mask_constrains_every_row(model, vocab, lark_mask):
    rows = generate(model, vocab, lark_mask, ["one", "two three"], do_sample=False, num_beams=2)
    check_outputs(vocab, rows, ["lark", "lark"])


def test_the_processor_is_a_transformers_logits_processor(lark_mask):
    assert isinstance(LogitsProcessor(lark_mask), transformers.LogitsProcessor)
