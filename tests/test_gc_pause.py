"""The front-end stages pause the cyclic garbage collector only while they run."""
from __future__ import annotations

import gc

import pytest

from glrmask.errors import UnsupportedSchema
from glrmask.grammar.gc_pause import cyclic_gc_paused, frozen_objects_released
from glrmask.grammar.normalize import normalize
from glrmask.json_schema import lower_json_schema_ir


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_inside_and_enabled_again_after(collector_enabled):
    with cyclic_gc_paused():
        assert not gc.isenabled()
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled(collector_enabled):
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_lowering_and_normalizing_leave_the_collector_enabled(collector_enabled):
    grammar, _ = lower_json_schema_ir({"type": "array", "items": {"type": "integer"}})
    normalize(grammar)
    assert gc.isenabled()


def test_a_refused_schema_leaves_the_collector_enabled(collector_enabled):
    with pytest.raises(UnsupportedSchema):
        lower_json_schema_ir(False)
    assert gc.isenabled()


def test_objects_made_during_a_pause_do_not_stay_young(collector_enabled):
    """They would be the next young collection's work; promoted, the young generations hold only
    what was allocated after the pause."""
    with cyclic_gc_paused():
        kept = [[i] for i in range(50_000)]
    assert sum(gc.get_count()[:2]) < 1_000
    assert len(gc.get_objects(generation=0)) < 1_000
    del kept


def test_cyclic_garbage_made_during_a_pause_is_still_collected(collector_enabled):
    import weakref

    class Node:
        pass

    with cyclic_gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        probe = weakref.ref(a)
        del a, b
    assert probe() is not None  # a cycle: only the collector frees it
    gc.collect()
    assert probe() is None


def test_a_process_that_froze_objects_keeps_them_frozen(collector_enabled):
    """A server freezes its model once; a pause must not hand those objects back to the collector.

    (Checked on one held object: the frozen count itself drops whenever reference counting frees
    some other frozen object, which a test run does at any moment.)"""
    model = [[i] for i in range(10)]
    gc.freeze()
    try:
        with cyclic_gc_paused():
            [[i] for i in range(1_000)]
        assert not any(obj is model for obj in gc.get_objects())  # the collector never sees it
    finally:
        gc.unfreeze()
        frozen_objects_released()
    assert any(obj is model for obj in gc.get_objects())


def test_pauses_in_a_process_that_froze_objects_do_not_count_them_each_time(collector_enabled, monkeypatch):
    """Counting frozen objects walks them all (milliseconds for a frozen model), and the dynamic
    engine pauses once per lexer exploration: the count is asked at most once for many pauses."""
    asked = []
    count = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: asked.append(1) or count())
    gc.freeze()
    try:
        for _ in range(1_000):
            with cyclic_gc_paused():
                pass
    finally:
        gc.unfreeze()
        frozen_objects_released()
    assert len(asked) == 1


def test_pauses_promote_again_once_the_process_released_its_frozen_objects(collector_enabled):
    gc.freeze()
    with cyclic_gc_paused():
        pass
    gc.unfreeze()
    frozen_objects_released()
    with cyclic_gc_paused():
        kept = [[i] for i in range(5_000)]
    assert len(gc.get_objects(generation=0)) < 1_000
    del kept
