"""An OpenAI-compatible HTTP server over the decode engine (FastAPI + uvicorn, the ``serve`` extra).

Endpoints: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions`` (the
tokenizer's chat template), with ``stream: true`` as Server-Sent Events ending in ``data: [DONE]``.
Request fields: ``max_tokens`` (``max_completion_tokens``), ``temperature``, ``top_p``, ``seed``,
``stop``, ``n``, ``logprobs`` / ``top_logprobs``, ``response_format`` (``json_schema``,
``json_object``, ``text``), and the glrmask extensions ``grammar`` (Lark text), ``banned_phrases``
(case-insensitive, never shown in any chunk), ``no_repeat_ngram_size`` (plus vLLM's ``top_k`` and
``min_p``). Fields it does not implement (penalties, ``logit_bias``, ``echo``, tools …) are refused
with a 400 when set, not silently ignored.

The structure follows the usual engine servers on one process: the HTTP handlers parse, validate,
compile and tokenize, then hand token ids to the engine, whose loop runs on its own thread and
calls each request's sink; the sink moves outputs onto the request's asyncio queue. Grammars are
compiled on a worker thread (``mode="auto"``: masks at once, static when the background compile
ends) through a bounded cache keyed by the schema or grammar text, so a compile never stalls the
engine and a repeated schema costs nothing. A bad request (invalid schema, unsupported keyword,
grammar error, bad parameter) gets a 400 with glrmask's message, which names the schema path or
the grammar line; the server keeps serving. A client that disconnects cancels its request, which
frees its KV cache and grammar state at the next engine step.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import OrderedDict
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("the server needs the serve extra: pip install 'glrmask[serve]'") from exc

import glrmask
from glrmask.errors import GlrmaskError
from glrmask.guards import NoRepeatNGram, PhraseGuard

from .engine import Engine, GenerationRequest, RequestOutput
from .model import ServedModel
from .reasoning import ReasoningSplitter
from .sampler import SamplingParams, TokenLogprob

__all__ = ["BadRequest", "CompileCache", "create_app", "run_server"]

MAX_STOP_STRINGS = 16
MAX_N = 8
DEFAULT_MAX_TOKENS = 1024


#: Fields the server does not implement, with the values that mean "off" (accepted).
UNSUPPORTED = {
    "echo": (None, False), "suffix": (None, ""), "best_of": (None, 1), "logit_bias": (None, {}),
    "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0), "tools": (None, []),
}


class BadRequest(GlrmaskError, ValueError):
    """A request the server refuses with HTTP 400 (the message says which field and why)."""


class CompileCache:
    """Bounded LRU of compiled masks (and phrase guards), built on a worker thread.

    Concurrent requests for the same key share one compile; failures are not cached.
    """

    def __init__(self, vocab: glrmask.Vocab, max_entries: int = 64, workers: int = 1) -> None:
        self._vocab = vocab
        self._max = max_entries
        self._entries: OrderedDict[tuple, Future] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="glrmask-compile")

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple, build: Callable[[], Any]) -> Future:
        with self._lock:
            fut = self._entries.get(key)
            if fut is not None:
                self._entries.move_to_end(key)
                return fut
            fut = self._pool.submit(build)
            self._entries[key] = fut
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        fut.add_done_callback(lambda f: self._forget_failure(key, f))
        return fut

    def _forget_failure(self, key: tuple, fut: Future) -> None:
        if fut.exception() is not None:
            with self._lock:
                if self._entries.get(key) is fut:
                    del self._entries[key]

    async def mask_for_schema(self, schema: Any) -> glrmask.Mask:
        key = ("schema", json.dumps(schema, sort_keys=True, ensure_ascii=False))
        return await asyncio.wrap_future(self.get(key, lambda: glrmask.compile_json_schema(schema, self._vocab)))

    async def mask_for_grammar(self, text: str) -> glrmask.Mask:
        return await asyncio.wrap_future(
            self.get(("grammar", text), lambda: glrmask.compile(text, self._vocab, format="lark", mode="auto")))

    def phrase_guard(self, phrases: tuple[str, ...]) -> PhraseGuard:
        """Compiled phrase sets are cheap but reused too (built here: never behind a long compile)."""
        key = ("phrases", phrases)
        with self._lock:
            fut = self._entries.get(key)
            if fut is not None:
                self._entries.move_to_end(key)
                return fut.result()
        guard = PhraseGuard(list(phrases))
        done: Future = Future()
        done.set_result(guard)
        with self._lock:
            self._entries[key] = done
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return guard

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(slots=True)
class _Parsed:
    prompt_ids: list[int]
    template: GenerationRequest
    n: int
    stream: bool
    logprobs: int | None
    include_usage: bool
    in_reasoning: bool
    """The chat template already opened the think block: the output starts inside it."""


# --------------------------------------------------------------------------------------------------
# request parsing


def _field(body: dict, name: str, kinds: tuple, default: Any = None) -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in kinds:
        raise BadRequest(f"'{name}' must be {' or '.join(k.__name__ for k in kinds)}, got {value!r}")
    if not isinstance(value, kinds):
        raise BadRequest(f"'{name}' must be {' or '.join(k.__name__ for k in kinds)}, got {value!r}")
    return value


def _stop_list(body: dict) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("'stop' must be a string or a list of strings")
    if len(stop) > MAX_STOP_STRINGS:
        raise BadRequest(f"'stop' has {len(stop)} strings; at most {MAX_STOP_STRINGS} are allowed")
    return stop


def _schema_of(body: dict) -> tuple[str, Any] | None:
    """The constraint a request asks for: ("schema", schema), ("grammar", text) or None."""
    grammar = body.get("grammar")
    fmt = body.get("response_format")
    if grammar is not None and fmt not in (None, {"type": "text"}):
        raise BadRequest("give either 'grammar' or 'response_format', not both")
    if grammar is not None:
        if not isinstance(grammar, str) or not grammar.strip():
            raise BadRequest("'grammar' must be Lark grammar text")
        return ("grammar", grammar)
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or "type" not in fmt:
        raise BadRequest("'response_format' must be an object with a 'type'")
    kind = fmt["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return ("schema", {"type": "object"})
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise BadRequest("'response_format.json_schema' must be an object with a 'schema'")
        schema = spec["schema"]
        if not isinstance(schema, (dict, bool)):
            raise BadRequest("'response_format.json_schema.schema' must be a JSON Schema object")
        return ("schema", schema)
    raise BadRequest(f"'response_format.type' must be 'text', 'json_object' or 'json_schema', got {kind!r}")


class _App:
    """The server's state: model, engine, compile cache, options."""

    def __init__(self, served: ServedModel, engine: Engine, *, reasoning: bool, cache_size: int) -> None:
        self.served = served
        self.engine = engine
        self.reasoning = reasoning
        self.cache = CompileCache(served.vocab, cache_size)
        self.created = int(time.time())
        ctx = engine.max_positions
        self.context = ctx if ctx else None

    async def parse(self, body: Any, chat: bool) -> _Parsed:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        for name, off in UNSUPPORTED.items():  # refused rather than silently ignored
            if body.get(name) not in off:
                raise BadRequest(f"'{name}' is not supported by this server")
        tok = self.served.tokenizer
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
                raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
            kwargs = _field(body, "chat_template_kwargs", (dict,), {})
            if getattr(tok, "chat_template", None) is None:
                raise BadRequest("this model's tokenizer has no chat template; use /v1/completions")
            try:
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
            except Exception as exc:  # noqa: BLE001 - jinja errors of the template
                raise BadRequest(f"the chat template cannot render these messages: {exc}") from exc
            prompt_ids = list(tok(text, add_special_tokens=False)["input_ids"])
            in_reasoning = text.rstrip().endswith("<think>")
        else:
            in_reasoning = False
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, str):
                prompt_ids = list(tok(prompt)["input_ids"])
            elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                             for t in prompt):
                prompt_ids = list(prompt)
            else:
                raise BadRequest("'prompt' must be a string or a list of token ids (one prompt per request)")
        if not prompt_ids:
            raise BadRequest("the prompt is empty")
        max_tokens = _field(body, "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens",
                            (int,), None)
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS if chat else 16
            if self.context:
                max_tokens = max(1, min(max_tokens, self.context - len(prompt_ids)))
        if max_tokens < 1:
            raise BadRequest(f"'max_tokens' must be >= 1, got {max_tokens}")
        if chat:
            want = _field(body, "logprobs", (bool,), False)
            top = _field(body, "top_logprobs", (int,), 0)
            logprobs = top if want else None
        else:
            logprobs = _field(body, "logprobs", (int,), None)
        seed = _field(body, "seed", (int,), None)
        try:
            sampling = SamplingParams(
                temperature=float(_field(body, "temperature", (int, float), 1.0)),
                top_p=float(_field(body, "top_p", (int, float), 1.0)),
                top_k=_field(body, "top_k", (int,), 0) if body.get("top_k") != -1 else 0,
                min_p=float(_field(body, "min_p", (int, float), 0.0)),
                seed=seed,
                logprobs=logprobs,
            )
        except GlrmaskError as exc:
            raise BadRequest(str(exc)) from exc
        n = _field(body, "n", (int,), 1)
        if not 1 <= n <= MAX_N:
            raise BadRequest(f"'n' must be in [1, {MAX_N}], got {n}")
        stop = _stop_list(body)
        phrases = _field(body, "banned_phrases", (list,), [])
        if not all(isinstance(p, str) for p in phrases):
            raise BadRequest("'banned_phrases' must be a list of strings")
        guard = self.cache.phrase_guard(tuple(phrases)) if phrases else None
        ngram_n = _field(body, "no_repeat_ngram_size", (int,), 0)
        ngram = NoRepeatNGram(ngram_n) if ngram_n else None
        constraint = _schema_of(body)
        mask = None
        if constraint is not None:
            kind, src = constraint
            mask = await (self.cache.mask_for_schema(src) if kind == "schema" else self.cache.mask_for_grammar(src))
        template = GenerationRequest(prompt_ids, sampling, max_tokens, stop, mask, guard, ngram)
        options = _field(body, "stream_options", (dict,), {})
        return _Parsed(prompt_ids, template, n, bool(body.get("stream", False)), logprobs,
                       bool(options.get("include_usage", False)), in_reasoning)

    def submit(self, parsed: _Parsed) -> tuple[list[str], asyncio.Queue]:
        """Submit the request's ``n`` choices; outputs arrive as ``(index, RequestOutput)``."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        ids = []
        for index in range(parsed.n):
            t = parsed.template
            sampling = t.sampling
            if index and sampling.seed is not None:  # n choices with one seed must still differ
                sampling = SamplingParams(sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p,
                                          (sampling.seed + index) % 2**63, sampling.logprobs)
            req = GenerationRequest(t.prompt_ids, sampling, t.max_tokens, t.stop, t.mask, t.phrase_guard,
                                    t.no_repeat_ngram, f"{uuid.uuid4().hex}-{index}")

            def sink(out: RequestOutput, index: int = index) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, (index, out))

            try:
                ids.append(self.engine.submit(req, sink))
            except GlrmaskError as exc:
                for rid in ids:
                    self.engine.cancel(rid)
                raise BadRequest(str(exc)) from exc
        return ids, queue

    def token_text(self, token: int) -> str:
        return self.served.vocab.token_bytes(token).decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------------
# response shapes


def _error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _chat_logprobs(app: _App, lps: list[TokenLogprob]) -> dict:
    def entry(tok: int, lp: float) -> dict:
        return {"token": app.token_text(tok), "logprob": lp, "bytes": list(app.served.vocab.token_bytes(tok))}

    return {"content": [{**entry(lp.token, lp.logprob), "top_logprobs": [entry(t, v) for t, v in lp.top]}
                        for lp in lps]}


def _completion_logprobs(app: _App, lps: list[TokenLogprob], offset: int) -> dict:
    tokens, offsets = [], []
    for lp in lps:
        offsets.append(offset)
        text = app.token_text(lp.token)
        tokens.append(text)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": [lp.logprob for lp in lps],
            "top_logprobs": [{app.token_text(t): v for t, v in lp.top} for lp in lps], "text_offset": offsets}


class _Choice:
    """Accumulates one choice's outputs (and splits reasoning when the server does)."""

    def __init__(self, reasoning: bool, in_reasoning: bool = False) -> None:
        self.splitter = ReasoningSplitter(start_in_reasoning=in_reasoning) if reasoning else None
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.logprobs: list[TokenLogprob] = []
        self.finish_reason: str | None = None
        self.error: GlrmaskError | None = None
        self.completion_tokens = 0
        self.prompt_tokens = 0
        self.text_offset = 0

    def add(self, out: RequestOutput) -> dict[str, str]:
        """The delta of this output: {"content": ..., "reasoning_content": ...} (non-empty fields)."""
        parts = [("content", out.text)] if self.splitter is None else self.splitter.push(out.text)
        if out.finished and self.splitter is not None:
            parts += self.splitter.finish()
        delta: dict[str, str] = {}
        for kind, text in parts:
            if not text:
                continue
            key = "reasoning_content" if kind == "reasoning" else "content"
            delta[key] = delta.get(key, "") + text
            (self.reasoning if kind == "reasoning" else self.content).append(text)
        if out.logprobs:
            self.logprobs.extend(out.logprobs)
        if out.finished:
            self.finish_reason = out.finish_reason
            self.error = out.error
        self.completion_tokens = out.completion_tokens
        self.prompt_tokens = out.prompt_tokens
        return delta


def create_app(served: ServedModel, *, engine: Engine | None = None, reasoning: bool = False,
               max_batch: int = 16, compile_cache_size: int = 64, batch_invariant: bool = False) -> Any:
    """The ASGI application (FastAPI). The engine loop starts and stops with the app's lifespan."""
    engine = engine or Engine(served.model, served.vocab, max_batch=max_batch, batch_invariant=batch_invariant)
    state = _App(served, engine, reasoning=reasoning, cache_size=compile_cache_size)

    @asynccontextmanager
    async def lifespan(_app):
        engine.start()
        try:
            yield
        finally:
            engine.stop()
            state.cache.close()

    app = FastAPI(title="glrmask", lifespan=lifespan)
    app.state.glrmask = state

    @app.exception_handler(BadRequest)
    async def bad_request(_request, exc: BadRequest):
        return JSONResponse(_error_body(str(exc)), status_code=400)

    @app.exception_handler(GlrmaskError)
    async def glrmask_error(_request, exc: GlrmaskError):  # grammar, schema, phrase-list errors
        return JSONResponse(_error_body(f"{type(exc).__name__}: {exc}", code=type(exc).__name__), status_code=400)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": served.name, "object": "model", "created": state.created,
                                            "owned_by": "glrmask"}]}

    async def handle(request: Request, chat: bool):
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the request body is not valid JSON: {exc}") from exc
        parsed = await state.parse(body, chat)
        ids, queue = state.submit(parsed)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        model = body.get("model") or served.name
        if parsed.stream:
            return StreamingResponse(_stream(state, request, parsed, ids, queue, rid, model, chat),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        choices = [_Choice(state.reasoning and chat, parsed.in_reasoning) for _ in ids]
        remaining = len(ids)
        try:
            while remaining:
                try:
                    index, out = await asyncio.wait_for(queue.get(), 0.5)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return JSONResponse(_error_body("client disconnected"), status_code=499)
                    continue
                choices[index].add(out)
                remaining -= out.finished
        finally:
            for i in ids:
                engine.cancel(i)  # no-op for finished requests; frees the others
        failed = next((c for c in choices if c.finish_reason == "error"), None)
        if failed is not None:
            err = failed.error
            return JSONResponse(_error_body(f"generation failed: {type(err).__name__}: {err}", "generation_error",
                                            type(err).__name__), status_code=422)
        usage = {"prompt_tokens": len(parsed.prompt_ids),
                 "completion_tokens": sum(c.completion_tokens for c in choices)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        out_choices = []
        for i, c in enumerate(choices):
            if chat:
                message = {"role": "assistant", "content": "".join(c.content)}
                if state.reasoning:
                    message["reasoning_content"] = "".join(c.reasoning) or None
                lp = _chat_logprobs(state, c.logprobs) if parsed.logprobs is not None else None
                out_choices.append({"index": i, "message": message, "logprobs": lp, "finish_reason": c.finish_reason})
            else:
                lp = _completion_logprobs(state, c.logprobs, 0) if parsed.logprobs is not None else None
                out_choices.append({"index": i, "text": "".join(c.content), "logprobs": lp,
                                    "finish_reason": c.finish_reason})
        return {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": model, "choices": out_choices, "usage": usage}

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await handle(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await handle(request, chat=True)

    return app


async def _stream(state: _App, request: Any, parsed: _Parsed, ids: list[str], queue: asyncio.Queue, rid: str,
                  model: str, chat: bool) -> AsyncIterator[str]:
    """SSE events of a streaming request; cancels its engine requests when the client goes away."""
    created = int(time.time())
    kind = "chat.completion.chunk" if chat else "text_completion"
    choices = [_Choice(state.reasoning and chat, parsed.in_reasoning) for _ in ids]

    def event(payload: dict) -> str:
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    def chunk(index: int, delta: dict, finish: str | None, lps: list[TokenLogprob] | None) -> str:
        if chat:
            lp = _chat_logprobs(state, lps) if lps is not None and parsed.logprobs is not None else None
            choice = {"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}
        else:
            lp = None
            if lps is not None and parsed.logprobs is not None:
                lp = _completion_logprobs(state, lps, choices[index].text_offset)
            choice = {"index": index, "text": delta.get("content", ""), "logprobs": lp, "finish_reason": finish}
        return event({"id": rid, "object": kind, "created": created, "model": model, "choices": [choice]})

    remaining = len(ids)
    try:
        if chat:
            for i in range(len(ids)):
                yield chunk(i, {"role": "assistant", "content": ""}, None, None)
        while remaining:
            index, out = await queue.get()
            c = choices[index]
            delta = c.add(out)
            if out.finished:
                remaining -= 1
                if out.finish_reason == "error":
                    err = out.error
                    if delta:
                        yield chunk(index, delta, None, out.logprobs)
                    yield event(_error_body(f"generation failed: {type(err).__name__}: {err}", "generation_error",
                                            type(err).__name__))
                    continue
            if delta or out.finished or out.logprobs:
                yield chunk(index, delta, out.finish_reason if out.finished else None, out.logprobs)
                c.text_offset += len(delta.get("content", ""))
        if parsed.include_usage:
            usage = {"prompt_tokens": len(parsed.prompt_ids),
                     "completion_tokens": sum(c.completion_tokens for c in choices)}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            yield event({"id": rid, "object": kind, "created": created, "model": model, "choices": [],
                         "usage": usage})
        yield "data: [DONE]\n\n"
    finally:
        for i in ids:
            state.engine.cancel(i)


def run_server(served: ServedModel, *, host: str = "127.0.0.1", port: int = 8000, reasoning: bool = False,
               max_batch: int = 16, batch_invariant: bool = False, log_level: str = "info") -> None:
    """Serve ``served`` with uvicorn until interrupted.

    Before serving, everything alive (the model, its tokenizer, the vocabulary: ~430k objects
    for SmolLM2 with transformers) is moved out of the cyclic collector's reach (``gc.freeze``):
    requests' allocations trigger full collections now and then, and each one walked all of
    those objects — 0.3-0.46 s measured, a stall of the engine thread and every stream."""
    import gc  # noqa: PLC0415
    import uvicorn  # noqa: PLC0415 - the serve extra

    app = create_app(served, reasoning=reasoning, max_batch=max_batch, batch_invariant=batch_invariant)
    gc.collect()
    gc.freeze()
    uvicorn.run(app, host=host, port=port, log_level=log_level)
