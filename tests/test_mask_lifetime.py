"""A mask is freed as soon as nothing refers to it.

Why it matters: a mask that sat in a reference cycle waited for the cyclic collector — its lexer
tables and memos held meanwhile, its background compile (``mode="auto"``) not cancelled, and the
collection that finally freed a large one running inside some later request (a 0.3 s time to
first mask for a small schema compiled right after a large one).
"""
from __future__ import annotations

import gc
import weakref

import pytest

import glrmask

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize("mode", ["static", "dynamic", "auto"])
def test_a_dropped_mask_is_freed_without_the_cyclic_collector(mode):
    vocab = glrmask.Vocab.default()
    gc.collect()
    gc.disable()
    try:
        mask = glrmask.compile_json_schema(SCHEMA, vocab, mode=mode)
        state = mask.start()
        mask.get_mask(state)
        state.commit_bytes(b'{"a": "x')
        mask.get_mask(state)
        ref = weakref.ref(mask)
        del mask
        assert ref() is not None  # a live request keeps its mask
        del state
        assert ref() is None
    finally:
        gc.enable()
