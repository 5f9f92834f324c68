"""Serving benchmark: tokens/s and time to first token for concurrent streaming requests.

Starts ``glrmask serve``'s app in process on 127.0.0.1 (uvicorn on a thread) with the bundled
SmolLM2-135M-Instruct (or ``--model``), then for each concurrency level sends that many streaming
chat requests at once, unconstrained and constrained (a JSON Schema plus banned phrases), and
reports per level: completion tokens per second over the wall time, TTFT (first content chunk)
median and max, and the share of the engine's step time in the forward pass, masks, guards,
sampling and commit (journal, detokenizer, sinks).

    python bench/serve_bench.py                       # 1, 4, 16 concurrent; 24 tokens each
    python bench/serve_bench.py --concurrency 1 4 --max-tokens 16 --threads 1
"""
from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import torch  # noqa: E402
import uvicorn  # noqa: E402

from glrmask.serve.engine import EngineStats  # noqa: E402
from glrmask.serve.model import load_model  # noqa: E402
from glrmask.serve.server import create_app  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
BANNED = ["John", "Smith", "as an AI"]
PROMPTS = ["Describe a person as JSON.", "Invent a character.", "Tell me about someone.", "Make up a profile."]


async def one(client: httpx.AsyncClient, body: dict) -> tuple[float | None, int, float]:
    """(TTFT, completion tokens, seconds) of one streaming request."""
    t0 = time.perf_counter()
    ttft, tokens = None, 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            for choice in event["choices"]:
                if choice["delta"].get("content") and ttft is None:
                    ttft = time.perf_counter() - t0
    return ttft, tokens, time.perf_counter() - t0


async def level(base: str, n: int, constrained: bool, max_tokens: int) -> dict:
    bodies = []
    for i in range(n):
        body = {"model": "m", "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                "max_tokens": max_tokens, "temperature": 0.7, "seed": i, "stream": True,
                "stream_options": {"include_usage": True}}
        if constrained:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
            body["banned_phrases"] = BANNED
        bodies.append(body)
    async with httpx.AsyncClient(base_url=base, timeout=1800) as client:
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(client, b) for b in bodies))
        wall = time.perf_counter() - t0
    ttfts = [r[0] for r in results if r[0] is not None]
    tokens = sum(r[1] for r in results)
    return {"tokens": tokens, "wall": wall, "tok_s": tokens / wall,
            "ttft_p50": statistics.median(ttfts) if ttfts else float("nan"),
            "ttft_max": max(ttfts) if ttfts else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="HF model directory or .gguf (default: bundled SmolLM2)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    served = load_model(args.model)
    app = create_app(served, max_batch=max(args.concurrency))
    engine = app.state.glrmask.engine
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.1)
    asyncio.run(level(base, 1, True, 4))  # warm-up: compiles the schema, first allocations
    print(f"model {served.name}, torch threads {torch.get_num_threads()}, {args.max_tokens} tokens per request")
    print(f"{'mode':<12}{'conc':>5}{'tokens':>8}{'tok/s':>8}{'TTFT p50':>10}{'TTFT max':>10}   "
          "step share: forward / masks / guards / sampling / commit")
    for n in args.concurrency:  # free and constrained side by side, so drifting load hits both alike
        for constrained in (False, True):
            engine.stats = EngineStats()
            r = asyncio.run(level(base, n, constrained, args.max_tokens))
            sh = engine.stats.shares()
            share = " / ".join(f"{100 * sh[k]:.1f}%" for k in ("forward", "masks", "guards", "sampling", "commit"))
            print(f"{'constrained' if constrained else 'free':<12}{n:>5}{r['tokens']:>8}{r['tok_s']:>8.1f}"
                  f"{r['ttft_p50']:>9.2f}s{r['ttft_max']:>9.2f}s   {share}", flush=True)
    server.should_exit = True
    thread.join(30)


if __name__ == "__main__":
    main()
