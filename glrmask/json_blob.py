"""JSON values stored as ``uint8`` arrays beside numeric ones.

Why: artifacts (:mod:`glrmask.artifact`) hold only plain numeric arrays, yet a compiled grammar
also needs names (terminals, nonterminals) and small records (rules, notes). Encoding them as UTF-8
JSON bytes in a ``uint8`` array keeps one container format, stays mmap-able, and never runs code
on load (unlike pickle).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from glrmask.errors import ArtifactError

__all__ = ["decode_json_blob", "encode_json_blob"]


def encode_json_blob(value: Any) -> np.ndarray:
    """``value`` as compact UTF-8 JSON bytes in a 1-d ``uint8`` array (ASCII-escaped, so lone
    surrogates in strings survive)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8).copy()


def decode_json_blob(blob: np.ndarray, what: str) -> Any:
    """Inverse of :func:`encode_json_blob`; :class:`ArtifactError` naming ``what`` when the
    array is not a 1-d ``uint8`` array holding valid JSON."""
    arr = np.asarray(blob)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise ArtifactError(f"{what}: expected a 1-d uint8 JSON blob, got {arr.ndim}-d {arr.dtype}")
    try:
        return json.loads(arr.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"{what}: not valid UTF-8 JSON ({exc})") from None
