"""Long-lived compile products add nothing proportional to their size for the cyclic collector to
walk: a vocabulary's token bytes and an LR table's unbuilt action rows are held in forms the
collector does not track (a tuple of bytes, an empty dict), so a full collection in a serving
process does not grow with the vocabulary or the number of LR states. (And a vocabulary pickles,
for the background compiler, as its arrays only.)

What is counted: the references held by the *tracked* objects reachable from a value (what a full
collection traverses), not descending into modules, classes and functions, which the process holds
anyway."""
from __future__ import annotations

import pickle

import pytest

from _gc_support import tracked_references
from _lr_support import bnf
from glrmask.grammar.normalize import normalize
from glrmask.lr import LRTable
from glrmask.vocab import Vocab


def _vocab(n: int) -> Vocab:
    return Vocab.from_token_bytes([b"tok%d" % i for i in range(n)], eos_token_ids=[0])


def test_a_vocabulary_adds_no_tracked_references_per_token():
    small, large = tracked_references(_vocab(1_000)), tracked_references(_vocab(50_000))
    assert large == small


def test_an_unpickled_vocabulary_adds_no_tracked_references_per_token():
    vocab = _vocab(50_000)
    restored = pickle.loads(pickle.dumps(vocab))
    assert [restored.token_bytes(i) for i in (1, 49_999)] == [b"tok1", b"tok49999"]
    assert tracked_references(restored) == tracked_references(_vocab(1_000))


def test_a_pickled_vocabulary_carries_its_token_bytes_once_and_restores_every_token():
    vocab = Vocab.from_token_bytes([b"tok%d" % i for i in range(50_000)] + [None], special_token_ids=[7])
    blob = pickle.dumps(vocab, protocol=pickle.HIGHEST_PROTOCOL)
    arrays = vocab.token_bytes_concat.nbytes + vocab.token_offsets.nbytes + vocab.size
    assert len(blob) < arrays + 10_000  # no second copy as one bytes object per token
    restored = pickle.loads(blob)
    assert restored.fingerprint == vocab.fingerprint
    assert all(restored.token_bytes(i) == vocab.token_bytes(i) for i in range(vocab.n_logits))
    assert restored.token_bytes(7) == b"" and restored.is_special(7) and restored.is_special(50_000)


def _chain_table(n: int) -> LRTable:
    """A grammar whose LR automaton has about ``2n`` states: ``s: A r0``, ``r_i: B_i r_{i+1}``."""
    lines = ["s: A r0"] + [f"r{i}: B{i} r{i + 1}" for i in range(n)] + [f"r{n}: C"]
    return LRTable.build(normalize(bnf("\n".join(lines))))


def test_unbuilt_lr_action_rows_add_no_tracked_references_per_state():
    small, large = _chain_table(5), _chain_table(400)
    assert large.n_states > 10 * small.n_states
    assert tracked_references(large.rows) == tracked_references(small.rows)


def test_lr_action_rows_are_built_on_demand_and_indexed_like_a_list():
    table = _chain_table(5)
    assert table.rows[-1] == table.rows[table.n_states - 1]
    assert [table.action(0, t) for t in range(table.n_terminals)] == table.rows[0]
    with pytest.raises(IndexError):
        table.rows[table.n_states]
