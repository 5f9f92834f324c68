"""The compile cache: a directory of artifacts keyed by what determines their content.

Why (DESIGN §6): compiling a grammar against a 128k–150k vocabulary takes seconds; serving
processes compile the same few grammars again and again. The key is a SHA-256 over the grammar
(text or hash), the vocabulary fingerprint, the compile options, the glrmask version, the artifact
format version and the Unicode database version (it changes what ``\\w`` matches), so a hit can
only be an artifact this process would have produced itself.

The directory is shared by concurrent processes without locks: entries appear by atomic rename,
every hit refreshes the entry's access stamp, and eviction (oldest stamp first, down to
``max_bytes``) tolerates files that another process has already removed. On POSIX a reader that
has an entry open or memory-mapped keeps it readable even if it is evicted meanwhile; a path
returned by :meth:`CompileCache.get` may however vanish before it is opened, which callers should
treat as a miss.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from glrmask.artifact import FORMAT_VERSION, create_temp_beside

__all__ = [
    "CacheUsage",
    "CompileCache",
    "DEFAULT_MAX_BYTES",
    "cache_usage",
    "clear_caches",
    "default_cache_root",
    "default_compile_cache_dir",
]

DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB
_SUFFIX = ".glrmask"
_TMP_SUFFIX = ".tmp"
_STALE_TMP_SECONDS = 3600.0

_stamp_lock = threading.Lock()
_last_stamp_ns = 0


def _next_stamp_ns() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process, so two accesses in a
    row are ordered even when the clock has not ticked."""
    global _last_stamp_ns
    with _stamp_lock:
        _last_stamp_ns = max(time.time_ns(), _last_stamp_ns + 1)
        return _last_stamp_ns


def default_cache_root() -> Path:
    """Where glrmask keeps its caches: ``$GLRMASK_CACHE_DIR`` if set, else
    ``$XDG_CACHE_HOME/glrmask``, else ``~/.cache/glrmask``."""
    env = os.environ.get("GLRMASK_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "glrmask"


def default_compile_cache_dir() -> Path:
    """``compiled/`` under :func:`default_cache_root`."""
    return default_cache_root() / "compiled"


class CompileCache:
    """A size-capped, least-recently-used directory of compiled artifacts.

    ``max_bytes`` bounds the total size of the entries; after each :meth:`put` the entries with
    the oldest access stamps are removed until the total fits (the entry just put is kept even if
    it alone exceeds the cap).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be non-negative, got {max_bytes}")
        self.directory = Path(directory).expanduser() if directory is not None else default_compile_cache_dir()
        self.max_bytes = int(max_bytes)

    @staticmethod
    def key(grammar_text_or_hash: str, vocab_fingerprint: str, options: Mapping[str, Any], version: str) -> str:
        """SHA-256 (hex) naming the artifact compiled from these inputs.

        ``options`` must be JSON-serializable; key order does not matter. The artifact format
        version and the Unicode database version are mixed in as well.
        """
        try:
            opts = json.dumps(dict(options), sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"compile options are not JSON-serializable: {e}") from e
        h = hashlib.sha256()
        for part in (
            "glrmask-compile-cache-v1",
            hashlib.sha256(grammar_text_or_hash.encode("utf-8")).hexdigest(),
            vocab_fingerprint,
            opts,
            version,
            str(FORMAT_VERSION),
            unicodedata.unidata_version,
        ):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()

    def path_for(self, key: str) -> Path:
        """Where the entry for ``key`` lives (whether or not it exists)."""
        if not key or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key: {key!r}")
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key: str) -> Path | None:
        """The cached artifact for ``key`` (its access stamp refreshed), or ``None``."""
        path = self.path_for(key)
        try:
            _touch(path)
        except FileNotFoundError:
            return None
        except OSError:
            # Read-only cache: still a hit if the file is there.
            return path if path.is_file() else None
        return path

    def put(self, key: str, src_path: str | os.PathLike[str]) -> Path:
        """Copy ``src_path`` into the cache as the entry for ``key`` (atomically) and evict.

        Returns the entry's path. A concurrent ``put`` of the same key is harmless: both copies
        have the same content and the last rename wins.
        """
        dest = self.path_for(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = create_temp_beside(dest)
        try:
            with os.fdopen(fd, "wb") as out, open(src_path, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            stamp = _next_stamp_ns()
            os.utime(tmp, ns=(stamp, stamp))
            os.replace(tmp, dest)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self.evict(keep=dest)
        return dest

    def entries(self) -> list[tuple[Path, int, int]]:
        """``(path, size, access stamp ns)`` of every entry, oldest first."""
        found: list[tuple[Path, int, int]] = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return found
        for name in names:
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            path = self.directory / name
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            found.append((path, st.st_size, max(st.st_atime_ns, st.st_mtime_ns)))
        found.sort(key=lambda e: (e[2], e[0].name))
        return found

    def total_bytes(self) -> int:
        """Total size of the entries now in the directory."""
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: Path | None = None) -> None:
        """Remove least recently used entries until the total fits ``max_bytes``; also remove
        temporary files abandoned by crashed writers."""
        self._remove_stale_tmp()
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for path, size, _ in entries:
            if total <= self.max_bytes:
                break
            if keep is not None and path == keep:
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another process evicted it first
            except OSError:
                continue
            total -= size

    def clear(self) -> None:
        """Remove every entry."""
        for path, _, _ in self.entries():
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def _remove_stale_tmp(self) -> None:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return
        now = time.time()
        for name in names:
            if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                path = self.directory / name
                try:
                    if now - path.stat().st_mtime > _STALE_TMP_SECONDS:
                        path.unlink()
                except OSError:
                    pass

    def __repr__(self) -> str:
        return f"CompileCache({str(self.directory)!r}, max_bytes={self.max_bytes})"


@dataclass(frozen=True)
class CacheUsage:
    """One of glrmask's caches on disk: its name, directory, entry count and total size."""

    name: str
    directory: Path
    files: int
    bytes: int


def _cache_dirs() -> dict[str, tuple[Path, str]]:
    """Every cache glrmask writes by default: name -> (directory, entry file suffix)."""
    from glrmask.trie import default_trie_cache_dir  # the trie module owns its layout

    return {"compiled": (default_compile_cache_dir(), _SUFFIX), "tries": (default_trie_cache_dir(), ".glrtrie")}


def _entries(directory: Path, suffix: str) -> list[tuple[Path, int]]:
    found: list[tuple[Path, int]] = []
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return found
    for name in sorted(names):
        if name.endswith(suffix) and not name.startswith("."):
            try:
                found.append((directory / name, (directory / name).stat().st_size))
            except FileNotFoundError:
                continue  # removed by another process meanwhile
    return found


def cache_usage() -> list[CacheUsage]:
    """What each default cache holds now (``glrmask cache info``): compiled artifacts (the compile
    cache) and vocabulary tries (one per tokenizer)."""
    out = []
    for name, (directory, suffix) in _cache_dirs().items():
        entries = _entries(directory, suffix)
        out.append(CacheUsage(name, directory, len(entries), sum(size for _, size in entries)))
    return out


def clear_caches(names: Iterable[str] | None = None) -> list[CacheUsage]:
    """Remove the entries of the named default caches (all when ``names`` is None) and report
    what was removed (``glrmask cache clear``). Only glrmask's own entry files are touched, never
    other files a user keeps in those directories. Unknown names raise ``ValueError``."""
    dirs = _cache_dirs()
    chosen = list(dirs) if names is None else list(names)
    unknown = [n for n in chosen if n not in dirs]
    if unknown:
        raise ValueError(f"unknown cache {unknown[0]!r}; expected one of: {', '.join(dirs)}")
    removed = []
    for name in chosen:
        directory, suffix = dirs[name]
        files = total = 0
        for path, size in _entries(directory, suffix):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            files += 1
            total += size
        removed.append(CacheUsage(name, directory, files, total))
    return removed


def _touch(path: Path) -> None:
    stamp = _next_stamp_ns()
    os.utime(path, ns=(stamp, stamp))
