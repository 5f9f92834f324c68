"""The decode engine on a tiny random Llama (built from a config, no download) with GPT-2's tokenizer.

The judge is a plain decode loop without a KV cache: every step recomputes the logits of the whole
sequence, so it knows nothing about cropping, stacking or padding caches. The engine must produce
the tokens that loop produces, through joins, leaves and phrase-guard rewinds.
"""
from __future__ import annotations

import threading

import pytest
import torch

import glrmask
from conftest import shipped_tokenizer
from glrmask.guards import NoAllowedToken, NoRepeatNGram, PhraseGuard, RewindLimitExceeded
from glrmask.serve.engine import Engine, GenerationRequest, RequestError
from glrmask.serve.sampler import SamplingParams
from glrmask.vocab import Vocab

transformers = pytest.importorskip("transformers")

N_LOGITS = 50264  # GPT-2's 50257 ids padded, as real models pad their embedding


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.from_tokenizer_json(shipped_tokenizer("gpt2"), n_logits=N_LOGITS)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=N_LOGITS, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    return transformers.LlamaForCausalLM(config).eval()


def reference_greedy(model, vocab, prompt, max_tokens, guard=None, ngram=None):
    """Greedy decoding that recomputes everything each step, with the same ban/rewind policy."""
    seq = list(prompt)
    req = guard.start(vocab) if guard is not None else None
    hist = ngram.start(prompt) if ngram is not None else None
    out: list[int] = []
    while len(out) < max_tokens:
        with torch.no_grad():
            ids = torch.tensor([seq + out], device=next(model.parameters()).device)
            logits = model(input_ids=ids).logits[0, -1].float()
        logits[vocab.size:] = float("-inf")
        if req is not None:
            logits[req.banned_tokens(req.position)] = float("-inf")
        if hist is not None:
            logits[hist.banned()] = float("-inf")
        tok = int(logits.argmax())
        if tok in vocab.eos_token_ids:
            break
        out.append(tok)
        if hist is not None:
            hist.push(tok)
        if req is not None:
            ev = req.push(tok)
            if ev.rewind:
                del out[len(out) - ev.rewind:]
                if hist is not None:
                    hist.rollback(ev.rewind)
    return out


def greedy(prompt_ids, max_tokens=12, **kw) -> GenerationRequest:
    return GenerationRequest(prompt_ids, SamplingParams(temperature=0), max_tokens=max_tokens, **kw)


def test_greedy_tokens_match_a_decode_loop_without_a_cache(model, vocab):
    prompt = vocab.encode("The quick brown fox")
    [done] = Engine(model, vocab).generate([greedy(prompt)])
    assert done.token_ids == reference_greedy(model, vocab, prompt, 12)
    assert done.finish_reason == "length" and done.completion_tokens == 12
    assert done.text == vocab.decode_bytes(done.token_ids).decode("utf-8", "replace")


def test_batched_requests_of_different_lengths_each_match_their_own_loop(model, vocab):
    prompts = [vocab.encode(t) for t in ("Hello", "A much longer prompt than the others", "x y", "four")]
    lengths = [8, 3, 12, 5]  # requests leave the batch at different steps
    done = Engine(model, vocab).generate([greedy(p, n) for p, n in zip(prompts, lengths)])
    for p, n, d in zip(prompts, lengths, done):
        assert d.token_ids == reference_greedy(model, vocab, p, n)


def test_a_phrase_ban_rewinds_the_cache_and_samples_again(model, vocab):
    prompt = vocab.encode("Once upon a time")
    free = Engine(model, vocab).generate([greedy(prompt, 10)])[0].text
    banned = free[len(free) // 3: len(free) // 3 + 4]
    guard = PhraseGuard([banned], case_sensitive=True)
    engine = Engine(model, vocab)
    [done] = engine.generate([greedy(prompt, 10, phrase_guard=guard)])
    assert engine.stats.rewinds >= 1
    assert banned not in done.text
    assert done.token_ids == reference_greedy(model, vocab, prompt, 10, guard=guard)
    shown = ""
    for chunk in done.chunks:
        shown += chunk
        assert banned not in shown


def test_rewinds_in_one_request_leave_the_others_untouched(model, vocab):
    prompt, other = vocab.encode("Once upon a time"), vocab.encode("Meanwhile")
    free = Engine(model, vocab).generate([greedy(prompt, 10)])[0].text
    guard = PhraseGuard([free[2:6]], case_sensitive=True)
    done = Engine(model, vocab).generate([greedy(prompt, 10, phrase_guard=guard), greedy(other, 10)])
    assert done[1].token_ids == reference_greedy(model, vocab, other, 10)


def test_no_generated_token_repeats_a_bigram_of_the_history(model, vocab):
    prompt = vocab.encode("the the the the")
    ngram = NoRepeatNGram(2)
    [done] = Engine(model, vocab).generate([greedy(prompt, 16, no_repeat_ngram=ngram)])
    seq = prompt + done.token_ids
    for i in range(len(prompt), len(seq)):
        assert (seq[i - 1], seq[i]) not in set(zip(seq[: i - 1], seq[1:i]))
    assert done.token_ids == reference_greedy(model, vocab, prompt, 16, ngram=ngram)


def test_grammar_constrained_output_is_a_sentence_of_the_grammar(model, vocab):
    mask = glrmask.compile('start: ("yes" | "no" | "maybe") "!"', vocab, mode="dynamic")
    reqs = [GenerationRequest(vocab.encode("Answer:"), SamplingParams(seed=s), max_tokens=10, mask=mask)
            for s in range(3)]
    for done in Engine(model, vocab).generate(reqs):
        assert done.finish_reason == "stop"
        assert done.text in ("yes!", "no!", "maybe!")


def test_a_seeded_request_gives_the_same_output_alone_and_in_a_batch(model, vocab):
    seeded = GenerationRequest(vocab.encode("Seeded"), SamplingParams(temperature=1.0, top_p=0.9, seed=7),
                               max_tokens=10)
    alone = Engine(model, vocab, batch_invariant=True).generate([seeded])[0].token_ids
    crowd = [GenerationRequest(vocab.encode("noise"), SamplingParams(), max_tokens=6),
             GenerationRequest(vocab.encode("more noise here"), SamplingParams(seed=1), max_tokens=12)]
    mixed = Engine(model, vocab, batch_invariant=True).generate([crowd[0], seeded, crowd[1]])
    assert mixed[1].token_ids == alone


def test_requests_that_join_later_get_the_same_tokens(model, vocab):
    engine = Engine(model, vocab)
    outs: dict[str, list] = {}
    first = engine.submit(greedy(vocab.encode("First one"), 10), lambda o: outs.setdefault(o.request_id, []).append(o))
    for _ in range(4):
        engine.step()
    late_prompt = vocab.encode("Late joiner")
    late = engine.submit(greedy(late_prompt, 6), lambda o: outs.setdefault(o.request_id, []).append(o))
    while engine.has_work():
        engine.step()
    assert [t for o in outs[late] for t in o.token_ids] == reference_greedy(model, vocab, late_prompt, 6)
    assert [t for o in outs[first] for t in o.token_ids] == reference_greedy(model, vocab, vocab.encode("First one"), 10)


def test_a_stop_string_cuts_the_text_and_ends_the_request(model, vocab):
    prompt = vocab.encode("Counting")
    free = Engine(model, vocab).generate([greedy(prompt, 12)])[0].text
    stop = free[5:8]
    [done] = Engine(model, vocab).generate([greedy(prompt, 12, stop=[stop])])
    assert done.finish_reason == "stop"
    assert done.text == free[: free.find(stop)]


def test_logprobs_come_with_their_tokens(model, vocab):
    prompt = vocab.encode("Probabilities")
    req = GenerationRequest(prompt, SamplingParams(temperature=0, logprobs=3), max_tokens=5)
    [done] = Engine(model, vocab).generate([req])
    assert [lp.token for lp in done.logprobs] == done.token_ids
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1].float()
    first = torch.log_softmax(logits, -1)
    assert abs(done.logprobs[0].logprob - float(first[done.token_ids[0]])) < 1e-4
    assert len(done.logprobs[0].top) == 3 and done.logprobs[0].top[0][0] == done.token_ids[0]


def test_logprobs_travel_with_their_tokens_through_rewinds(model, vocab):
    prompt = vocab.encode("Once upon a time")
    free = Engine(model, vocab).generate([greedy(prompt, 10)])[0].text
    guard = PhraseGuard([free[len(free) // 3: len(free) // 3 + 4]], case_sensitive=True)
    engine = Engine(model, vocab)
    req = GenerationRequest(prompt, SamplingParams(temperature=0, logprobs=1), max_tokens=10, phrase_guard=guard)
    [done] = engine.generate([req])
    assert engine.stats.rewinds >= 1
    assert [lp.token for lp in done.logprobs] == done.token_ids and len(done.token_ids) == 10


def test_when_bans_and_grammar_leave_nothing_the_request_ends_with_an_error(model, vocab):
    mask = glrmask.compile('start: "ab"', vocab, mode="dynamic")
    guard = PhraseGuard(["ab"], case_sensitive=True)
    ok = greedy(vocab.encode("fine"), 4)
    doomed = GenerationRequest(vocab.encode("x"), SamplingParams(seed=0), max_tokens=5, mask=mask, phrase_guard=guard)
    bad, good = Engine(model, vocab).generate([doomed, ok])
    assert bad.finish_reason == "error" and isinstance(bad.error, (NoAllowedToken, RewindLimitExceeded))
    assert "ab" not in bad.text
    assert good.finish_reason == "length" and good.completion_tokens == 4


def test_a_cancelled_request_ends_and_frees_its_state(model, vocab):
    engine = Engine(model, vocab)
    ended = threading.Event()
    reasons = []

    def sink(out):
        if out.finished:
            reasons.append(out.finish_reason)
            ended.set()

    engine.start()
    try:
        rid = engine.submit(greedy(vocab.encode("Long"), 200), sink)
        engine.cancel(rid)
        assert ended.wait(60)
    finally:
        engine.stop()
    assert reasons == ["cancelled"] and not engine.has_work()


@pytest.mark.parametrize(
    "kw, match",
    [({"prompt_ids": []}, "empty"), ({"prompt_ids": [1], "max_tokens": 0}, "max_tokens"),
     ({"prompt_ids": [1], "max_tokens": 1000}, "context"), ({"prompt_ids": [10**6]}, "outside")],
)
def test_malformed_requests_are_refused_before_they_start(model, vocab, kw, match):
    with pytest.raises(RequestError, match=match):
        Engine(model, vocab).submit(GenerationRequest(**kw), lambda o: None)


@pytest.mark.gpu
def test_on_a_gpu_greedy_tokens_match_the_cacheless_loop(vocab):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=N_LOGITS, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    gpu_model = transformers.LlamaForCausalLM(config).cuda().eval()
    prompts = [vocab.encode(t) for t in ("Hello there", "A different prompt")]
    mask = glrmask.compile('start: ("yes" | "no") "!"', vocab, mode="dynamic")
    reqs = [greedy(p, 8) for p in prompts] + [greedy(prompts[0], 8, mask=mask)]
    done = Engine(gpu_model, vocab).generate(reqs)
    for p, d in zip(prompts, done):
        assert d.token_ids == reference_greedy(gpu_model, vocab, p, 8)
    assert done[2].text in ("yes!", "no!")


def test_a_failing_step_ends_the_running_requests_and_the_loop_keeps_serving(model, vocab):
    engine = Engine(model, vocab)
    outcomes: dict[str, list] = {}
    done = threading.Event()

    def sink(out):
        if out.finished:
            outcomes.setdefault(out.request_id, []).append(out)
            done.set()

    original = engine.sampler.sample

    def broken(*args, **kwargs):
        engine.sampler.sample = original  # fail once
        raise RuntimeError("simulated sampler bug")

    engine.sampler.sample = broken
    engine.start()
    try:
        first = engine.submit(greedy(vocab.encode("one"), 3), sink)
        assert done.wait(60)
        done.clear()
        second = engine.submit(greedy(vocab.encode("two"), 3), sink)
        assert done.wait(60)
    finally:
        engine.stop()
    assert outcomes[first][0].finish_reason == "error" and "simulated" in str(outcomes[first][0].error)
    assert outcomes[second][0].finish_reason == "length"


def test_a_model_with_sliding_window_layers_is_refused_with_the_reason(vocab):
    config = transformers.MistralConfig(
        vocab_size=N_LOGITS, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=16,
    )
    with pytest.raises(ValueError, match="sliding-window"):
        Engine(transformers.MistralForCausalLM(config), vocab)
