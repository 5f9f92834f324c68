"""The token quotient (glrmask.compiler.token_classes): tokens that no weight tells apart form one
class. Specification, against a brute-force partition of every token by the exact set of weights
holding it:

* the classes are exactly the distinct non-empty membership sets, numbered by first token, each
  listed as its sorted maximal intervals of tokens; tokens in no weight are in no class;
* each weight's class set holds exactly the classes of its tokens;
* ``class_of_tokens`` maps every token to its class (``-1`` for none).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from glrmask.compiler.token_classes import TokenClasses


def _random_weights(rng: random.Random, n_tokens: int, n_weights: int) -> list[list[int]]:
    weights = []
    for _ in range(n_weights):
        k = min(2 * rng.randint(1, 6), (n_tokens + 1) // 2 * 2)
        weights.append(sorted(rng.sample(range(n_tokens + 1), k)))  # flat lo, hi pairs: disjoint, sorted
    return weights


def _csr(weights: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.cumsum([0] + [len(w) for w in weights]).astype(np.int64)
    bounds = np.asarray([b for w in weights for b in w], dtype=np.int64)
    return ptr, bounds


def _brute(weights: list[list[int]], n_tokens: int):
    member = [frozenset(i for i, w in enumerate(weights)
                        if any(w[k] <= t < w[k + 1] for k in range(0, len(w), 2))) for t in range(n_tokens)]
    ids: dict[frozenset, int] = {}
    of = []
    for t in range(n_tokens):
        if member[t]:
            of.append(ids.setdefault(member[t], len(ids)))
        else:
            of.append(-1)
    return ids, of


@pytest.mark.parametrize("seed", range(40))
def test_classes_are_the_distinct_membership_sets(seed):
    rng = random.Random(seed)
    n_tokens = rng.randint(2, 300)
    weights = _random_weights(rng, n_tokens, rng.randint(1, 12))
    classes, sets = TokenClasses.from_weights(*_csr(weights), n_tokens)
    ids, of = _brute(weights, n_tokens)
    assert classes.n_classes == len(ids)
    assert classes.class_of_tokens().tolist() == of
    for c in range(classes.n_classes):
        toks = [t for t in range(n_tokens) if of[t] == c]
        runs = []
        for t in toks:
            if runs and runs[-1][1] == t:
                runs[-1] = (runs[-1][0], t + 1)
            else:
                runs.append((t, t + 1))
        assert classes.class_tokens(c) == runs
    for w, ivs in enumerate(weights):
        want = {of[t] for k in range(0, len(ivs), 2) for t in range(ivs[k], ivs[k + 1])}
        assert {c for c in range(classes.n_classes) if sets[w] >> c & 1} == want


def test_tokens_in_no_weight_have_no_class():
    classes, sets = TokenClasses.from_weights(*_csr([[2, 4]]), 6)
    assert classes.class_of_tokens().tolist() == [-1, -1, 0, 0, -1, -1]
    assert sets == [1]


def test_no_weights_give_no_classes():
    classes, sets = TokenClasses.from_weights(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), 5)
    assert classes.n_classes == 0
    assert classes.class_of_tokens().tolist() == [-1] * 5
    assert sets == []
