"""Specification of glrmask.compile_cache.CompileCache: keys, hits and misses, LRU eviction."""
from __future__ import annotations

import os

import pytest

from glrmask.compile_cache import CompileCache


def make_file(tmp_path, name: str, size: int):
    path = tmp_path / name
    path.write_bytes(bytes([len(name) % 256]) * size)
    return path


@pytest.fixture
def cache(tmp_path):
    return CompileCache(tmp_path / "cache", max_bytes=10_000)


def test_key_is_a_sha256_hex_digest(cache):
    key = cache.key("start: 'a'", "fp", {"mode": "static"}, "0.1.0")
    assert len(key) == 64 and int(key, 16) >= 0


def test_key_is_independent_of_option_order(cache):
    assert cache.key("g", "fp", {"a": 1, "b": [1, 2]}, "v") == cache.key("g", "fp", {"b": [1, 2], "a": 1}, "v")


@pytest.mark.parametrize("changed", [
    ("g2", "fp", {"mode": "static"}, "0.1.0"),
    ("g", "fp2", {"mode": "static"}, "0.1.0"),
    ("g", "fp", {"mode": "dynamic"}, "0.1.0"),
    ("g", "fp", {"mode": "static"}, "0.1.1"),
])
def test_key_changes_with_every_input(cache, changed):
    assert cache.key("g", "fp", {"mode": "static"}, "0.1.0") != cache.key(*changed)


def test_key_does_not_confuse_field_boundaries(cache):
    assert cache.key("ab", "c", {}, "v") != cache.key("a", "bc", {}, "v")


def test_options_that_are_not_json_are_refused(cache):
    with pytest.raises(ValueError):
        cache.key("g", "fp", {"x": object()}, "v")


def test_get_of_an_unknown_key_is_a_miss(cache):
    assert cache.get(cache.key("g", "fp", {}, "v")) is None


def test_put_then_get_is_a_hit_with_the_same_content(cache, tmp_path):
    src = make_file(tmp_path, "src", 100)
    key = cache.key("g", "fp", {}, "v")
    stored = cache.put(key, src)
    hit = cache.get(key)
    assert hit == stored and hit.read_bytes() == src.read_bytes()
    assert hit.parent == cache.directory


def test_put_copies_so_the_source_can_be_removed(cache, tmp_path):
    src = make_file(tmp_path, "src", 10)
    key = cache.key("g", "fp", {}, "v")
    cache.put(key, src)
    src.unlink()
    assert cache.get(key).read_bytes() == b"\x03" * 10


def test_put_replaces_an_existing_entry(cache, tmp_path):
    key = cache.key("g", "fp", {}, "v")
    cache.put(key, make_file(tmp_path, "a", 10))
    cache.put(key, make_file(tmp_path, "bb", 20))
    assert cache.get(key).read_bytes() == b"\x02" * 20
    assert len(cache.entries()) == 1


def test_eviction_removes_least_recently_used_first(cache, tmp_path):
    keys = [cache.key(f"g{i}", "fp", {}, "v") for i in range(4)]
    cache.put(keys[0], make_file(tmp_path, "a", 4000))
    cache.put(keys[1], make_file(tmp_path, "b", 4000))
    assert cache.get(keys[0]) is not None  # keys[0] is now more recent than keys[1]
    cache.put(keys[2], make_file(tmp_path, "c", 4000))  # 12000 > 10000: evict one
    assert cache.get(keys[1]) is None
    assert cache.get(keys[0]) is not None and cache.get(keys[2]) is not None
    assert cache.total_bytes() <= cache.max_bytes


def test_eviction_keeps_the_total_under_the_cap(cache, tmp_path):
    for i in range(10):
        cache.put(cache.key(f"g{i}", "fp", {}, "v"), make_file(tmp_path, f"f{i}", 3000))
        assert cache.total_bytes() <= cache.max_bytes
    assert len(cache.entries()) == 3


def test_an_entry_larger_than_the_cap_is_kept_until_the_next_put(cache, tmp_path):
    big = cache.key("big", "fp", {}, "v")
    cache.put(big, make_file(tmp_path, "big", 20_000))
    assert cache.get(big) is not None
    cache.put(cache.key("small", "fp", {}, "v"), make_file(tmp_path, "small", 10))
    assert cache.get(big) is None


def test_an_entry_removed_by_another_process_is_a_miss(cache, tmp_path):
    key = cache.key("g", "fp", {}, "v")
    cache.put(key, make_file(tmp_path, "a", 10))
    os.unlink(cache.path_for(key))
    assert cache.get(key) is None
    cache.evict()  # nothing to trip over


def test_evict_tolerates_files_vanishing_midway(cache, tmp_path, monkeypatch):
    for i in range(3):
        cache.put(cache.key(f"g{i}", "fp", {}, "v"), make_file(tmp_path, f"f{i}", 3000))
    listed = cache.entries()
    for path, _, _ in listed:
        path.unlink()
    monkeypatch.setattr(cache, "entries", lambda: listed)
    cache.max_bytes = 0
    cache.evict()


def test_cache_directory_is_created_on_first_put(tmp_path):
    cache = CompileCache(tmp_path / "deep" / "dir", max_bytes=1000)
    assert cache.get(cache.key("g", "fp", {}, "v")) is None
    cache.put(cache.key("g", "fp", {}, "v"), make_file(tmp_path, "a", 10))
    assert (tmp_path / "deep" / "dir").is_dir()


def test_a_malformed_key_is_refused(cache):
    with pytest.raises(ValueError):
        cache.get("../etc/passwd")


def _hammer(directory: str, worker: int) -> int:
    """Put and get many entries in a tiny shared cache; return how many gets hit."""
    cache = CompileCache(directory, max_bytes=2_000)
    src = os.path.join(directory, f"src-{worker}")
    with open(src, "wb") as f:
        f.write(bytes([worker]) * 500)
    hits = 0
    for i in range(40):
        key = cache.key(f"g{i % 7}", "fp", {}, "v")
        cache.put(key, src)
        path = cache.get(key)
        if path is not None:
            try:
                hits += len(path.read_bytes()) == 500
            except FileNotFoundError:  # evicted by the other process in between: a miss
                pass
    os.unlink(src)
    return hits


def test_concurrent_processes_share_a_cache_without_errors(tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    directory = tmp_path / "shared"
    directory.mkdir()
    with ProcessPoolExecutor(max_workers=2) as pool:
        hits = list(pool.map(_hammer, [str(directory)] * 2, [1, 2]))
    assert sum(hits) > 0
    cache = CompileCache(directory, max_bytes=2_000)
    cache.evict()
    assert cache.total_bytes() <= 2_000
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]
