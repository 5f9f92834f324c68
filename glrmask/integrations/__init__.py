"""glrmask inside other engines' decode loops. Each submodule imports its engine only when used:

* :mod:`glrmask.integrations.transformers` — ``LogitsProcessor`` for ``model.generate`` (batches,
  beams, padded logits);
* :mod:`glrmask.integrations.vllm` — vLLM custom logits processors (Model Runner V2 and the legacy
  runner), grammar or JSON Schema per request via ``SamplingParams.extra_args``;
* :mod:`glrmask.integrations.llama_cpp` — ``LogitsProcessor`` for llama-cpp-python and the
  vocabulary of a ``Llama`` object;
* :mod:`glrmask.integrations.serving` — the engine-agnostic parts of a serving integration (request
  specs, a bounded compile cache off the engine loop, per-slot states).
"""
