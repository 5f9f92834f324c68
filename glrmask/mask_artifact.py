"""Saving and loading compiled masks (DESIGN §6), and the compile cache built on them.

Why this layout. The artifact *is* the runtime: it stores exactly what the native runtime reads
— the dense lexer (minimized, canonical ids), the LR table, the complete Parser DWA in its flat
layout, the condition failure seeds and the class of every token id — so ``Mask.load`` maps the
file, validates every array (an artifact is untrusted input: ids, offsets, shapes and dtypes are
all checked, :mod:`glrmask.runtime.tables`) and serves; nothing is compiled or determinized. The
normalized grammar travels as JSON in the header (no pickle anywhere) for the reference
recognizer, which answers the rare configuration the Parser DWA has no root for; the trie is per
tokenizer and comes from its own disk cache only if that happens.

The file is bound to the vocabulary fingerprint it was compiled for, and carries the grammar's
warnings, so a loaded mask need not build a lazy lexer for the lookahead-collision check — unless
it was saved with ``warnings=False`` (``null`` in the header: the loaded mask checks on first
access).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Mapping, NamedTuple, Optional

import numpy as np

from .artifact import glrmask_version, read_artifact, write_artifact
from .compile_cache import CompileCache
from .errors import ArtifactError, GlrmaskError
from .grammar.ir import Grammar
from .lexer.dense import DenseLexer
from .lr.table import LRTable
from .vocab import Vocab

__all__ = ["ARTIFACT_KIND", "KnownParts", "save_mask", "load_mask", "cache_lookup", "cached_compile"]

ARTIFACT_KIND = "glrmask.mask"
_PREFIXES = {"lexer": "lex_", "lr": "lr_", "runtime": "rt_"}


def _prefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {prefix + k: v for k, v in arrays.items()}


def _unprefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(prefix)
    return {k[n:]: v for k, v in arrays.items() if k.startswith(prefix)}


def save_mask(mask, path: "str | os.PathLike[str]", *, warnings: bool = True) -> None:
    """Write a static mask; see the module docstring for what is stored. ``warnings=False``
    leaves the lookahead-collision check (``Mask.warnings``) to whoever loads the file, which then
    runs it on first access: ``mode="auto"``'s worker writes its artifact for a parent that never
    reads them, and the check costs a median schema ~0.3 s — more than its compile."""
    if mask._stored is None or mask.active_mode != "static":
        raise GlrmaskError("only a static mask can be saved: compile with mode='static' "
                           "(mode='auto': after wait_static())")
    arrays: dict[str, np.ndarray] = {}
    arrays.update(_prefixed(_PREFIXES["lexer"], mask.lexer.arrays()))
    arrays.update(_prefixed(_PREFIXES["lr"], mask.table.to_arrays()))
    arrays.update(_prefixed(_PREFIXES["runtime"], mask._stored))
    meta = {
        "vocab_fingerprint": mask.vocab.fingerprint,
        "vocab_size": int(mask.vocab.size),
        "vocab_name": mask.vocab.name,
        "eos_token_ids": [int(e) for e in mask.vocab.eos_token_ids],
        "n_logits": int(mask.vocab.n_logits),
        "grammar": mask.grammar.to_json(),
        "warnings": list(mask.warnings) if warnings else None,
        # sizes only: wall-clock timings would make two compiles of one grammar differ in bytes
        "stages": [[name, _jsonable({k: v for k, v in info.items() if k != "seconds"})]
                   for name, info in mask.stats.items() if isinstance(info, dict)],
    }
    write_artifact(path, kind=ARTIFACT_KIND, meta=meta, arrays=arrays)


class KnownParts(NamedTuple):
    """A grammar and its LR table the loader already has (``mode="auto"``: the dynamic mask's),
    with the forms an artifact stores them in — computed ahead, while the worker compiles."""

    grammar: Grammar
    table: LRTable
    grammar_json: str
    lr_arrays: dict

    @classmethod
    def of(cls, grammar: Grammar, table: LRTable) -> "KnownParts":
        return cls(grammar, table, grammar.to_json(), _prefixed(_PREFIXES["lr"], table.to_arrays()))


def _same_lr(arrays: Mapping[str, np.ndarray], known: dict) -> bool:
    """Whether the artifact's LR arrays are exactly ``known`` (names, dtypes, shapes, values)."""
    names = {k for k in arrays if k.startswith(_PREFIXES["lr"])}
    if names != set(known):
        return False
    for k, v in known.items():
        a = arrays[k]
        if a.dtype != v.dtype or a.shape != v.shape or not np.array_equal(a, v):
            return False
    return True


def load_mask(path: "str | os.PathLike[str]", vocab: Vocab, *, verify: bool = True,
              known: Optional[KnownParts] = None):
    """Load a mask written by :func:`save_mask` for ``vocab``. ``verify=False`` skips the checksum
    (the only step that reads the whole file); the arrays are validated either way.

    ``known``: a grammar and LR table the caller has; when the artifact's are exactly those (the
    grammar's JSON text and every LR array compared), the mask uses them instead of decoding and
    validating its own copies. Why: ``mode="auto"`` loads its worker's artifact in a thread of the
    serving process, holding the GIL for much of it, and decoding those two was about a fifth of
    the load (a large schema's: 18 -> 14.5 ms)."""
    from .api import Mask

    art = read_artifact(path, kind=ARTIFACT_KIND, expect_fingerprint=vocab.fingerprint, verify=verify)
    meta, arrays = art.meta, art.arrays
    try:
        if known is not None and meta["grammar"] == known.grammar_json:
            grammar = known.grammar
        else:
            grammar = Grammar.from_json(meta["grammar"])
        if known is not None and _same_lr(arrays, known.lr_arrays):
            table = known.table
        else:
            table = LRTable.from_arrays(arrays, prefix=_PREFIXES["lr"])
        lexer = DenseLexer.from_arrays(arrays, prefix=_PREFIXES["lexer"])
        stored = _unprefixed(_PREFIXES["runtime"], arrays)
        mask = Mask.__new__(Mask)
        mask._init_common(vocab, grammar, grammar, "static")
        mask.table = table
        mask._lazy_lexer = None
        mask._limits = {}
        found = meta.get("warnings", [])
        mask._warnings = None if found is None else list(found)
        mask.stats = {name: info for name, info in meta.get("stages", [])}
        mask._engine = mask._engine_for(lexer, stored)
    except ArtifactError as e:
        raise ArtifactError(f"{path}: {e}") from e
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise ArtifactError(f"{path}: inconsistent mask artifact ({type(e).__name__}: {e})") from e
    return mask


def _cache_key(cache: CompileCache, grammar: Grammar, vocab: Vocab, limits: Optional[dict]) -> str:
    digest = hashlib.sha256(grammar.to_json().encode("utf-8")).hexdigest()
    return cache.key(digest, vocab.fingerprint, {"mode": "static", "limits": _jsonable(limits or {})},
                     glrmask_version())


def cache_lookup(grammar: Grammar, vocab: Vocab, cache_dir: "str | os.PathLike[str]", *,
                 limits: Optional[dict] = None):
    """The cached static mask for (grammar, vocabulary, limits, glrmask version), or None (absent,
    damaged or stale entries read as absent)."""
    cache = CompileCache(cache_dir)
    hit = cache.get(_cache_key(cache, grammar, vocab, limits))
    if hit is None:
        return None
    try:
        return load_mask(hit, vocab)
    except ArtifactError:
        return None


def cached_compile(grammar: Grammar, vocab: Vocab, cache_dir: "str | os.PathLike[str]", *,
                   limits: Optional[dict] = None, on_stage=None):
    """A static compile through the compile cache: load the entry for (grammar, vocabulary,
    limits, glrmask version) when present and intact, else compile and store it."""
    from .api import Mask

    hit = cache_lookup(grammar, vocab, cache_dir, limits=limits)
    if hit is not None:
        return hit
    cache = CompileCache(cache_dir)
    mask = Mask(grammar, vocab, mode="static", limits=limits, on_stage=on_stage)
    Path(cache.directory).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".glrm.part", dir=str(cache.directory))
    os.close(fd)
    try:
        save_mask(mask, tmp)
        cache.put(_cache_key(cache, grammar, vocab, limits), tmp)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return mask


def _jsonable(x):
    """Stats and limits as plain JSON (numpy scalars to Python, tuples to lists)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
