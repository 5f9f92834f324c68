"""The batched sampler: per-row parameters in one pass, seeded rows independent of the batch."""
from __future__ import annotations

import math

import pytest
import torch

from glrmask.serve.sampler import BatchSampler, SamplingParams, SamplingParamsError

V = 300


def random_logits(rows: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, V, generator=g) * 3


def reference_probs(row: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Row-by-row filtering written the plain way: temperature, min-p, top-k, top-p."""
    x = row.double() / p.temperature
    probs = torch.softmax(x, -1)
    allowed = set(range(V))
    if p.min_p > 0:
        allowed = {i for i in allowed if probs[i] >= p.min_p * probs.max()}
    ranked = sorted(allowed, key=lambda i: (-float(x[i]), i))
    if p.top_k:
        ranked = ranked[: p.top_k]
    if p.top_p < 1:
        kept_mass = torch.softmax(torch.tensor([float(x[i]) for i in ranked]), -1)
        kept, acc = [], 0.0
        for i, m in zip(ranked, kept_mass.tolist()):
            if kept and acc >= p.top_p:
                break
            kept.append(i)
            acc += m
        ranked = kept
    out = torch.zeros(V, dtype=torch.double)
    vals = torch.softmax(torch.tensor([float(x[i]) for i in ranked], dtype=torch.double), -1)
    out[ranked] = vals
    return out


def test_greedy_rows_take_the_argmax():
    logits = random_logits(4, 0)
    params = [SamplingParams(temperature=0)] * 4
    tokens = BatchSampler().sample(logits, params, [None] * 4)
    assert tokens.tolist() == logits.argmax(-1).tolist()


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.7, top_k=5),
        SamplingParams(temperature=1.3, top_p=0.6),
        SamplingParams(temperature=1.0, min_p=0.05),
        SamplingParams(temperature=0.9, top_k=40, top_p=0.8, min_p=0.01),
        SamplingParams(temperature=2.0),
    ],
)
def test_filters_match_row_by_row_filtering(params):
    logits = random_logits(3, 1)
    batched = BatchSampler.probabilities(logits, [params] * 3)
    for r in range(3):
        ref = reference_probs(logits[r], params)
        assert torch.equal(batched[r] > 0, ref > 0)
        assert torch.allclose(batched[r].double(), ref, atol=1e-5)


def test_rows_with_different_parameters_are_filtered_independently():
    logits = random_logits(3, 2)
    params = [SamplingParams(top_k=3), SamplingParams(top_p=0.5), SamplingParams(min_p=0.2)]
    batched = BatchSampler.probabilities(logits, params)
    for r, p in enumerate(params):
        assert torch.allclose(batched[r].double(), reference_probs(logits[r], p), atol=1e-5)


def test_the_exponential_race_draws_in_proportion_to_the_probabilities():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().expand(40_000, 4).contiguous()
    params = [SamplingParams(temperature=1.0)] * logits.shape[0]
    tokens = BatchSampler(torch.Generator().manual_seed(7)).sample(logits, params, [None] * len(params))
    freq = torch.bincount(tokens, minlength=4).double() / len(params)
    # 4 standard deviations of a binomial frequency with 40k draws is below 0.01
    assert (freq - probs.double()).abs().max() < 0.01


def test_only_tokens_that_survive_the_filters_are_sampled():
    logits = random_logits(1, 3).expand(2000, V).contiguous()
    p = SamplingParams(temperature=1.5, top_k=7, top_p=0.9)
    support = set(torch.nonzero(BatchSampler.probabilities(logits[:1], [p])[0]).flatten().tolist())
    tokens = BatchSampler(torch.Generator().manual_seed(0)).sample(logits, [p] * 2000, [None] * 2000)
    assert set(tokens.tolist()) <= support


def test_masked_tokens_are_never_sampled():
    logits = random_logits(500, 4)
    logits[:, 10:] = float("-inf")
    params = [SamplingParams(temperature=5.0)] * 500
    tokens = BatchSampler(torch.Generator().manual_seed(1)).sample(logits, params, [None] * 500)
    assert int(tokens.max()) < 10


def seeded_run(seed_params: SamplingParams, companions: list[SamplingParams], position: int, steps: int = 30):
    """Tokens drawn for a seeded request over ``steps`` steps, batched with ``companions``."""
    sampler = BatchSampler(torch.Generator().manual_seed(99))
    params = list(companions)
    params.insert(position, seed_params)
    gens = [p.generator() for p in params]
    drawn = []
    for step in range(steps):
        logits = random_logits(len(params), 1000 + step)
        logits[position] = random_logits(1, step)[0]  # the seeded request's own logits
        drawn.append(int(sampler.sample(logits, params, gens)[position]))
    return drawn


def test_a_seeded_request_draws_the_same_tokens_alone_and_in_any_batch():
    seeded = SamplingParams(temperature=1.0, top_p=0.95, seed=1234)
    alone = seeded_run(seeded, [], 0)
    others = [SamplingParams(temperature=1.0), SamplingParams(temperature=0), SamplingParams(top_k=5, seed=5)]
    assert seeded_run(seeded, others, 0) == alone
    assert seeded_run(seeded, others, 2) == alone
    assert seeded_run(seeded, others[:1], 1) == alone


def test_different_seeds_draw_different_tokens():
    a = seeded_run(SamplingParams(seed=1), [], 0)
    b = seeded_run(SamplingParams(seed=2), [], 0)
    assert a != b


def test_a_row_with_nothing_allowed_gets_minus_one():
    logits = random_logits(2, 5)
    logits[1] = float("-inf")
    tokens = BatchSampler().sample(logits, [SamplingParams(), SamplingParams(temperature=0)], [None, None])
    assert tokens[1] == -1 and tokens[0] >= 0
    tokens = BatchSampler().sample(logits.flip(0), [SamplingParams(temperature=0), SamplingParams()], [None, None])
    assert tokens[0] == -1 and tokens[1] >= 0


def test_logprobs_are_the_raw_model_distribution():
    logits = random_logits(2, 6)
    lps = BatchSampler.logprobs(logits, [3, 4], [0, 5])
    ref = torch.log_softmax(logits.double(), -1)
    assert math.isclose(lps[0].logprob, float(ref[0, 3]), abs_tol=1e-5) and lps[0].top == ()
    assert [t for t, _ in lps[1].top] == ref[1].topk(5).indices.tolist()
    assert math.isclose(lps[1].top[0][1], float(ref[1].max()), abs_tol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -1},
        {"temperature": float("nan")},
        {"top_k": -2},
        {"top_p": 0},
        {"top_p": 1.5},
        {"min_p": 2},
        {"seed": -1},
        {"logprobs": 99},
        {"top_k": 1.5},
    ],
)
def test_out_of_range_parameters_are_refused_with_the_parameter_named(kwargs):
    with pytest.raises(SamplingParamsError, match=next(iter(kwargs))):
        SamplingParams(**kwargs)
