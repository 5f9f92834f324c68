"""The OpenAI-compatible server on a tiny random Llama with GPT-2's tokenizer and a test chat template.

Requests go through the ASGI app in process (Starlette's TestClient), so the whole HTTP path runs:
parsing, compiling, the engine thread, SSE framing.
"""
from __future__ import annotations

import gzip
import json
import threading
import time

import jsonschema
import pytest
import torch

from conftest import shipped_tokenizer

fastapi = pytest.importorskip("fastapi")
transformers = pytest.importorskip("transformers")
from fastapi.testclient import TestClient  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from glrmask.serve.model import ServedModel  # noqa: E402
from glrmask.serve.server import create_app  # noqa: E402

N_LOGITS = 50264
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% if think %}<think>\n{% endif %}{% endif %}")
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}


@pytest.fixture(scope="module")
def served() -> ServedModel:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=N_LOGITS, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    )
    model = transformers.LlamaForCausalLM(config)
    backend = Tokenizer.from_str(gzip.open(shipped_tokenizer("gpt2"), "rt", encoding="utf-8").read())
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    tokenizer.chat_template = TEMPLATE
    return ServedModel.from_transformers(model, tokenizer, "tiny-llama")


@pytest.fixture(scope="module")
def client(served):
    with TestClient(create_app(served, reasoning=True)) as c:
        yield c


def chat(content: str, **kw) -> dict:
    return {"model": "tiny-llama", "messages": [{"role": "user", "content": content}], "max_tokens": 8, **kw}


def sse_events(response) -> list:
    """The data payloads of an SSE response, in order ("[DONE]" kept as a string)."""
    events = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_the_model_is_listed(client):
    data = client.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == ["tiny-llama"]


def test_a_completion_returns_text_usage_and_finish_reason(client):
    r = client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 5, "temperature": 0})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5 and isinstance(body["choices"][0]["text"], str)


def test_a_streamed_chat_adds_up_to_the_same_seeded_answer_and_ends_with_done(client):
    whole = client.post("/v1/chat/completions", json=chat("hi", seed=11)).json()
    with client.stream("POST", "/v1/chat/completions", json=chat("hi", seed=11, stream=True)) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks)
    message = whole["choices"][0]["message"]
    assert text == message["content"] and reasoning == (message["reasoning_content"] or "")
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_json_schema_output_validates(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "flag", "schema": SCHEMA}}
    r = client.post("/v1/chat/completions", json=chat("json?", max_tokens=40, seed=3, response_format=fmt))
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMA)


def test_json_object_output_is_an_object(client):
    r = client.post("/v1/completions", json={"prompt": "{", "max_tokens": 60, "seed": 5, "temperature": 0.01,
                                             "response_format": {"type": "json_object"}, "stop": None})
    choice = r.json()["choices"][0]
    if choice["finish_reason"] == "stop":  # a random model may run out of tokens inside a string
        assert isinstance(json.loads(choice["text"]), dict)
    else:
        assert choice["text"].startswith("{")


def test_a_lark_grammar_constrains_the_output(client):
    r = client.post("/v1/completions", json={"prompt": "Pick:", "max_tokens": 10, "seed": 1,
                                             "grammar": 'start: "red" | "green" | "blue"'})
    assert r.json()["choices"][0]["text"] in ("red", "green", "blue")


def test_no_banned_phrase_appears_in_any_streamed_chunk(client):
    free = client.post("/v1/completions", json={"prompt": "Story", "max_tokens": 10, "temperature": 0}).json()
    text = free["choices"][0]["text"]
    banned = text[3:7]
    body = {"prompt": "Story", "max_tokens": 10, "temperature": 0, "banned_phrases": [banned], "stream": True}
    with client.stream("POST", "/v1/completions", json=body) as r:
        events = sse_events(r)
    shown = ""
    for e in events[:-1]:
        shown += e["choices"][0]["text"]
        assert banned.casefold() not in shown.casefold()


def test_n_choices_with_one_seed_differ_and_are_indexed(client):
    r = client.post("/v1/completions", json={"prompt": "Many", "max_tokens": 6, "n": 3, "seed": 2})
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert len({c["text"] for c in choices}) > 1


def test_chat_logprobs_come_per_token(client):
    r = client.post("/v1/chat/completions", json=chat("lp", logprobs=True, top_logprobs=2, temperature=0))
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert len(content) == 8 and all(len(e["top_logprobs"]) == 2 for e in content)
    assert content[0]["logprob"] == content[0]["top_logprobs"][0]["logprob"]  # greedy: the top token


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}}}}}, "/properties/a"),
        ({"grammar": "start: item\nitem: \"x\" | undefined_rule"}, ":2:13"),
        ({"temperature": -1}, "temperature"),
        ({"stop": 3}, "stop"),
        ({"banned_phrases": [""]}, "phrase"),
        ({"no_repeat_ngram_size": -2}, "no_repeat_ngram_size"),
        ({"messages": []}, "messages"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
    ],
)
def test_a_bad_request_gets_a_400_that_says_where_and_the_server_keeps_serving(client, body, needle):
    r = client.post("/v1/chat/completions", json={**chat("x"), **body})
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]
    assert client.post("/v1/completions", json={"prompt": "still", "max_tokens": 2}).status_code == 200


def test_a_body_that_is_not_json_gets_a_400(client):
    r = client.post("/v1/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_a_generation_that_cannot_continue_reports_an_error(client):
    body = {"prompt": "x", "max_tokens": 5, "grammar": 'start: "ab"', "banned_phrases": ["ab"], "seed": 0}
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 422 and "generation failed" in r.json()["error"]["message"]
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
        events = sse_events(s)
    assert "error" in events[-2] and events[-1] == "[DONE]"


def test_a_client_that_goes_away_frees_its_request(client, served):
    engine = client.app.state.glrmask.engine
    cancelled = engine.stats.cancelled
    body = {"prompt": "Long story", "max_tokens": 500, "stream": True}
    # Each step takes 20 ms here, so the 500 tokens would take 10 s: the tiny model alone can finish
    # them before the hang-up reaches the server, and the request would end by length, not cancelled.
    slow = served.model.register_forward_pre_hook(lambda *_: time.sleep(0.02))
    try:
        with client.stream("POST", "/v1/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    break  # the first chunk arrived; now hang up
        for _ in range(600):  # the engine drops it within a few steps
            if not engine.has_work():
                break
            threading.Event().wait(0.1)
    finally:
        slow.remove()
    assert not engine.has_work() and engine.stats.cancelled == cancelled + 1


def test_reasoning_is_split_from_the_answer_in_streamed_and_whole_replies(client):
    body = chat("think", max_tokens=40, seed=0, grammar='start: "<think>plan it</think>the answer"')
    message = client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("plan it", "the answer")
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
        deltas = [e["choices"][0]["delta"] for e in sse_events(r)[:-1] if e["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "plan it"
    assert "".join(d.get("content", "") for d in deltas) == "the answer"


def test_the_compile_cache_reuses_masks_and_stays_bounded(served):
    import asyncio

    from glrmask.serve.server import CompileCache

    cache = CompileCache(served.vocab, max_entries=2)

    async def masks():
        a = await cache.mask_for_schema({"type": "integer"})
        b = await cache.mask_for_schema({"type": "integer"})
        await cache.mask_for_schema({"type": "boolean"})
        await cache.mask_for_schema({"type": "null"})
        c = await cache.mask_for_schema({"type": "integer"})
        return a, b, c

    try:
        a, b, c = asyncio.run(masks())
    finally:
        cache.close()
    assert a is b  # compiled once
    assert c is not a and len(cache) == 2  # evicted by two newer schemas, compiled again


def test_a_template_that_opens_the_think_block_starts_the_reply_in_reasoning(client):
    body = chat("think", max_tokens=40, seed=0, grammar='start: "plan</think>answer"',
                chat_template_kwargs={"think": True})
    message = client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("plan", "answer")
