"""lark's own verdicts pin the matching semantics (DESIGN §2): every text lark accepts replays
through the masks byte by byte and ends accepting; every text it rejects does not."""
from __future__ import annotations

import json

import pytest

import glrmask
from conftest import DATA, byte_vocab

CASES = [json.loads(line) for line in (DATA / "lark_cases.jsonl").read_text().splitlines() if line.strip()]
VOCAB = byte_vocab()
_masks: dict[str, glrmask.Mask] = {}


def _mask(grammar: str) -> glrmask.Mask:
    if grammar not in _masks:
        _masks[grammar] = glrmask.compile(grammar, VOCAB, format="lark")
    return _masks[grammar]


def replay_accepts(mask: glrmask.Mask, text: str) -> bool:
    state = mask.start()
    for b in text.encode("utf-8"):
        if not state.commit(b):
            return False
    return state.is_accepting()


@pytest.mark.parametrize("case", CASES, ids=[f"{c['name']}:{c['text']!r}" for c in CASES])
def test_replay_agrees_with_lark(case):
    assert replay_accepts(_mask(case["grammar"]), case["text"]) == case["lark_accepts"]


@pytest.mark.parametrize("case", [c for c in CASES if c["lark_accepts"]][:40],
                         ids=lambda c: f"{c['name']}:{c['text']!r}")
def test_end_token_allowed_exactly_at_the_end_of_accepted_texts(case):
    mask = _mask(case["grammar"])
    state = mask.start()
    data = case["text"].encode("utf-8")
    for i, b in enumerate(data):
        assert state.commit(b)
    assert 256 in _allowed(mask, state)
    assert state.commit(256)
    assert state.is_terminated() and state.is_accepting()


def _allowed(mask, state):
    from _engine_support import allowed

    return allowed(mask.get_mask(state))
