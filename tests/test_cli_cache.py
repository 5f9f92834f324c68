"""The cache functions behind ``glrmask cache info|clear``: where the caches are, what counts."""
from __future__ import annotations

import pytest

from glrmask.compile_cache import cache_usage, clear_caches, default_cache_root, default_compile_cache_dir


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path))
    (tmp_path / "compiled").mkdir()
    (tmp_path / "tries").mkdir()
    (tmp_path / "compiled" / "ab12.glrmask").write_bytes(b"x" * 10)
    (tmp_path / "tries" / "cd34.glrtrie").write_bytes(b"y" * 7)
    (tmp_path / "compiled" / "README.txt").write_text("not an entry")
    return tmp_path


def test_the_root_follows_glrmask_cache_dir_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("GLRMASK_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "glrmask"
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_root() == tmp_path / "mine"
    assert default_compile_cache_dir() == tmp_path / "mine" / "compiled"


def test_usage_counts_only_entries(root):
    usage = {u.name: u for u in cache_usage()}
    assert (usage["compiled"].files, usage["compiled"].bytes) == (1, 10)
    assert (usage["tries"].files, usage["tries"].bytes) == (1, 7)
    assert usage["compiled"].directory == root / "compiled"


def test_clear_removes_entries_and_leaves_other_files(root):
    removed = {u.name: u for u in clear_caches(["compiled"])}
    assert set(removed) == {"compiled"} and removed["compiled"].files == 1
    assert (root / "compiled" / "README.txt").exists() and (root / "tries" / "cd34.glrtrie").exists()
    clear_caches()
    assert not (root / "tries" / "cd34.glrtrie").exists()


def test_missing_cache_directories_are_empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("GLRMASK_CACHE_DIR", str(tmp_path / "never-used"))
    assert all(u.files == 0 for u in cache_usage())
    assert all(u.files == 0 for u in clear_caches())


def test_an_unknown_cache_name_is_refused(root):
    with pytest.raises(ValueError, match="unknown cache 'models'"):
        clear_caches(["models"])
