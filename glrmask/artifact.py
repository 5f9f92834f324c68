"""The artifact container: named numpy arrays plus a JSON header in one checksummed, mmap-able file.

Why our own format (DESIGN §6): compiled masks and tries are large, read far more often than
written, and must be safe to load from a cache directory that other processes write. Pickle runs
code on load; ``.npz`` is a zip that cannot be memory-mapped. This container can be mapped, so
arrays are shared by every process that loads the same artifact, and it is refused loudly when it
was built by another format version, for another vocabulary, or has been damaged.

Layout (all integers little-endian)::

    offset 0   magic            8 bytes  b"GLRMASK\\0"
    offset 8   format version   uint32
    offset 12  header length    uint32   (bytes of JSON that follow)
    offset 16  header           UTF-8 JSON
               zero padding to a multiple of 64
               array data       each array C-contiguous, little-endian, at a 64-byte-aligned
                                offset named in the header, zero padding between arrays
    end - 32   SHA-256          over every byte before it

The header holds ``format_version``, ``glrmask_version``, ``kind`` (what the arrays mean, e.g.
``"mask"`` or ``"trie"``), ``python_version`` and ``unicodedata_version`` (they change what ``\\w``
and ``\\d`` match, hence compiled lexers), the caller's ``meta`` (compile options, grammar hash,
``vocab_fingerprint`` …), ``payload_size`` (offset of the checksum) and the array table
(name → dtype, shape, offset, nbytes).
"""
from __future__ import annotations

import hashlib
import json
import mmap as _mmap
import os
import struct
import sys
import secrets
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from glrmask.errors import ArtifactError

__all__ = [
    "MAGIC", "FORMAT_VERSION", "Artifact", "write_artifact", "read_artifact", "glrmask_version",
    "create_temp_beside",
]

MAGIC = b"GLRMASK\0"
#: Version of the container layout and header schema; a file with another version is refused.
#: 2: the LR table is stored as sparse rows (``act_*``/``goto_*``) instead of dense tables.
#: 3: the Parser DWA starts per root and start class (``start_class``, ``start_ptr``,
#: ``start_class_of``, ``start_target``) instead of one ``start_state`` per root.
#: 4: ``root_restrict``: roots that mask as another root restricted to a token set.
FORMAT_VERSION = 4

_PREFIX = struct.Struct("<8sII")  # magic, format version, header length
_ALIGN = 64
_DIGEST_SIZE = 32
# Kinds of dtype that are plain bytes in memory (no pointers), so they can be mapped back as-is.
_ALLOWED_DTYPE_KINDS = frozenset("biufcSUMm")


def glrmask_version() -> str:
    """The running glrmask version (package metadata, else ``glrmask.__version__``)."""
    try:
        from glrmask import __version__  # type: ignore[attr-defined]

        return str(__version__)
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        return version("glrmask")
    except Exception:  # not installed (a source checkout)
        return "0+unknown"


@dataclass(frozen=True)
class Artifact:
    """A loaded artifact: the caller's ``meta``, the arrays, and the full header.

    With ``mmap=True`` the arrays are read-only views of one shared memory map of the file; they
    keep the map alive for as long as they are referenced.
    """

    meta: dict[str, Any]
    arrays: Mapping[str, np.ndarray]
    header: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.header.get("kind", ""))

    @property
    def glrmask_version(self) -> str:
        return str(self.header.get("glrmask_version", ""))

    @property
    def python_version(self) -> str:
        return str(self.header.get("python_version", ""))

    @property
    def unicodedata_version(self) -> str:
        return str(self.header.get("unicodedata_version", ""))


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _prepare_array(name: str, arr: Any) -> np.ndarray:
    if not isinstance(name, str) or not name:
        raise ArtifactError(f"array names must be non-empty strings, got {name!r}")
    a = np.asarray(arr)
    if a.dtype.hasobject or a.dtype.kind not in _ALLOWED_DTYPE_KINDS or a.dtype.fields is not None:
        raise ArtifactError(
            f"array {name!r} has dtype {a.dtype}, which cannot be stored without pickling; "
            "use numeric, bool, fixed-width string or datetime arrays"
        )
    # Stored little-endian whatever the machine; single-byte and string kinds have no order.
    little = a.dtype if a.dtype.byteorder == "|" else a.dtype.newbyteorder("<")
    return np.asarray(a, dtype=little, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)


def create_temp_beside(path: Path) -> tuple[int, str]:
    """Open a new hidden temporary file in ``path``'s directory for an atomic replace.

    Unlike :func:`tempfile.mkstemp` the file gets the usual ``0o666 & ~umask`` permissions, so
    the renamed artifact is as readable as any file the user writes.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {path}")


def _raw_bytes(a: np.ndarray) -> memoryview:
    return memoryview(a.reshape(-1).view(np.uint8)) if a.size else memoryview(b"")


def write_artifact(path: str | os.PathLike[str], *, kind: str, meta: Mapping[str, Any],
                   arrays: Mapping[str, Any]) -> None:
    """Write an artifact atomically (temporary file in the same directory, then ``os.replace``).

    ``meta`` must be JSON-serializable (strict JSON: no NaN); arrays with object, structured or
    otherwise pointer-bearing dtypes are refused with :class:`ArtifactError`, since storing them
    would need pickle.
    """
    if not isinstance(kind, str) or not kind:
        raise ArtifactError(f"artifact kind must be a non-empty string, got {kind!r}")
    prepared = {name: _prepare_array(name, a) for name, a in arrays.items()}
    try:
        meta_json = json.loads(json.dumps(dict(meta), allow_nan=False))
    except (TypeError, ValueError) as e:
        raise ArtifactError(f"artifact meta is not JSON-serializable: {e}") from e

    # The header names absolute offsets, which depend on the header's own length: lay out,
    # measure, and lay out again until the aligned data start is stable (one or two rounds).
    def make_header(data_start: int) -> bytes:
        table: dict[str, Any] = {}
        offset = data_start
        for name, a in prepared.items():
            table[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset,
                           "nbytes": int(a.nbytes)}
            offset = _align(offset + a.nbytes)
        header = {
            "format_version": FORMAT_VERSION,
            "glrmask_version": glrmask_version(),
            "kind": kind,
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "unicodedata_version": unicodedata.unidata_version,
            "meta": meta_json,
            "payload_size": offset,
            "arrays": table,
        }
        return json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")

    data_start = _align(_PREFIX.size + len(make_header(0)))
    header = make_header(data_start)
    while _align(_PREFIX.size + len(header)) != data_start:  # offsets grew the header
        data_start = _align(_PREFIX.size + len(header))
        header = make_header(data_start)

    path = Path(path)
    fd, tmp_name = create_temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            digest = hashlib.sha256()

            def emit(chunk: bytes | memoryview) -> None:
                digest.update(chunk)
                f.write(chunk)

            emit(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)))
            emit(header)
            pos = _PREFIX.size + len(header)
            for a in prepared.values():
                start = _align(pos)
                emit(b"\0" * (start - pos))
                emit(_raw_bytes(a))
                pos = start + a.nbytes
            end = _align(pos)
            emit(b"\0" * (end - pos))
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise


def read_artifact(path: str | os.PathLike[str], *, kind: str, expect_fingerprint: str | None = None,
                  mmap: bool = True, verify: bool = True) -> Artifact:
    """Load an artifact, refusing anything that is not exactly what was written for this use.

    Raises :class:`ArtifactError` for: not a glrmask artifact (magic), another format version, a
    truncated or corrupted file (size, header, SHA-256 checksum), another ``kind``, or — when
    ``expect_fingerprint`` is given — an artifact compiled for another vocabulary. ``verify=False``
    skips only the checksum (the one step that reads the whole file).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            if mmap:
                size = os.fstat(f.fileno()).st_size
                buf: Any = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ) if size else b""
            else:
                buf = f.read()
    except FileNotFoundError as e:
        raise ArtifactError(f"{path}: no such artifact") from e
    except (OSError, ValueError) as e:
        raise ArtifactError(f"{path}: cannot read artifact: {e}") from e

    view = memoryview(buf)
    size = len(view)
    if size < len(MAGIC) or bytes(view[:len(MAGIC)]) != MAGIC:
        raise ArtifactError(f"{path}: not a glrmask artifact (bad magic)")
    if size < _PREFIX.size:
        raise ArtifactError(f"{path}: truncated artifact ({size} bytes)")
    _, version, header_len = _PREFIX.unpack_from(view, 0)
    if version != FORMAT_VERSION:
        raise ArtifactError(f"{path}: built by artifact format {version}, this glrmask reads "
                            f"{FORMAT_VERSION}: recompile")
    if _PREFIX.size + header_len + _DIGEST_SIZE > size:
        raise ArtifactError(f"{path}: truncated artifact (header of {header_len} bytes does not fit "
                            f"in {size} bytes)")
    try:
        header = json.loads(bytes(view[_PREFIX.size:_PREFIX.size + header_len]).decode("utf-8"))
        payload_size = int(header["payload_size"])
        table = header["arrays"]
        if not isinstance(header.get("meta"), dict) or not isinstance(table, dict):
            raise ValueError("meta/arrays are not objects")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: corrupted artifact (unreadable header: {e})") from e
    if size < payload_size + _DIGEST_SIZE:
        raise ArtifactError(f"{path}: truncated artifact ({size} bytes, expected "
                            f"{payload_size + _DIGEST_SIZE})")
    if size > payload_size + _DIGEST_SIZE:
        raise ArtifactError(f"{path}: corrupted artifact ({size - payload_size - _DIGEST_SIZE} "
                            "unexpected trailing bytes)")
    if verify:
        digest = hashlib.sha256(view[:payload_size]).digest()
        if digest != bytes(view[payload_size:]):
            raise ArtifactError(f"{path}: corrupted artifact (SHA-256 checksum mismatch)")

    found_kind = header.get("kind")
    if found_kind != kind:
        raise ArtifactError(f"{path}: artifact holds {found_kind!r}, expected {kind!r}")
    meta = header["meta"]
    if expect_fingerprint is not None:
        found_fp = meta.get("vocab_fingerprint")
        if found_fp != expect_fingerprint:
            raise ArtifactError(f"{path}: compiled for vocabulary {found_fp}, got {expect_fingerprint}: "
                                "recompile for this tokenizer")

    arrays: dict[str, np.ndarray] = {}
    data_start = _PREFIX.size + header_len
    for name, entry in table.items():
        try:
            dtype = np.dtype(entry["dtype"])
            shape = tuple(int(d) for d in entry["shape"])
            offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
            if dtype.hasobject or dtype.kind not in _ALLOWED_DTYPE_KINDS:
                raise ValueError(f"dtype {dtype} not allowed")
            count = int(np.prod(shape, dtype=np.int64))
            if (min(shape, default=0) < 0 or count * dtype.itemsize != nbytes or offset < data_start
                    or offset % _ALIGN or offset + nbytes > payload_size):
                raise ValueError("inconsistent table entry")
        except (KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"{path}: corrupted artifact (array {name!r}: {e})") from e
        if count == 0:
            arr = np.empty(shape, dtype=dtype)
            arr.flags.writeable = False
        else:
            arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset).reshape(shape)
        arrays[name] = arr
    return Artifact(meta=meta, arrays=arrays, header=header)
