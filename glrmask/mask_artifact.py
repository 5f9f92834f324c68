"""Saving and loading compiled masks (DESIGN §6), and the compile cache built on them.

Why this layout. Everything a static ``Mask`` needs at run time is already flat arrays with
canonical ids: the dense lexer (minimized, numbered by exploration order), the LR table, the
stack-effect automata, the Terminal DWA (whose roots are dense lexer states) and the token
classes with every Terminal-DWA weight as a dense class bitset. The determinized Parser DWA is
*not* stored: it is rebuilt on demand from those inputs (cheap, memoized), which keeps artifacts
small and loading a matter of mapping the file. The normalized grammar travels as JSON in the
header (no pickle anywhere); the trie is per tokenizer and comes from its own disk cache on the
first mask.

The file is bound to the vocabulary fingerprint it was compiled for, and carries the grammar's
warnings (the lookahead-collision check needs the lazy lexer, which a loaded mask does not have).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from .artifact import glrmask_version, read_artifact, write_artifact
from .compile_cache import CompileCache
from .errors import ArtifactError, GlrmaskError
from .grammar.ir import Grammar
from .lexer.dense import DenseLexer
from .lr.table import LRTable
from .vocab import Vocab

__all__ = ["ARTIFACT_KIND", "save_mask", "load_mask", "cached_compile"]

ARTIFACT_KIND = "glrmask.mask"
_PREFIXES = {"lexer": "lex_", "lr": "lr_", "tdwa": "tdwa_"}


def _prefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {prefix + k: v for k, v in arrays.items()}


def _unprefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(prefix)
    return {k[n:]: v for k, v in arrays.items() if k.startswith(prefix)}


def save_mask(mask, path: "str | os.PathLike[str]") -> None:
    """Write a static mask; see the module docstring for what is stored."""
    compiled = mask.compiled
    if compiled is None or mask.active_mode != "static":
        raise GlrmaskError("only a static mask can be saved: compile with mode='static' "
                           "(mode='auto': after wait_static())")
    rec = mask._engine.recognizer
    pdwa = compiled.pdwa
    tdwa = pdwa.tdwa
    n_words = compiled.classes.n_words
    sets = np.zeros((len(pdwa.class_sets), n_words), dtype=np.uint64)
    for w, bits in enumerate(pdwa.class_sets):
        sets[w] = np.frombuffer(bits.to_bytes(n_words * 8, "little"), dtype="<u8")
    arrays: dict[str, np.ndarray] = {}
    arrays.update(_prefixed(_PREFIXES["lexer"], rec.lexer.arrays()))
    arrays.update(_prefixed(_PREFIXES["lr"], mask.table.to_arrays()))
    arrays.update(pdwa.effects.to_arrays())
    arrays.update(_prefixed(_PREFIXES["tdwa"], tdwa.arrays()))
    arrays.update(compiled.classes.arrays())
    arrays["class_sets"] = sets
    meta = {
        "vocab_fingerprint": mask.vocab.fingerprint,
        "vocab_size": int(mask.vocab.size),
        "n_logits": int(mask.vocab.n_logits),
        "grammar": mask.grammar.to_json(),
        "warnings": list(mask.warnings),
        "stages": [[name, _jsonable(info)] for name, info in mask.stats.items()],
        "pdwa_limits": pdwa.limits,
    }
    write_artifact(path, kind=ARTIFACT_KIND, meta=meta, arrays=arrays)


def load_mask(path: "str | os.PathLike[str]", vocab: Vocab, *, verify: bool = True):
    """Load a mask written by :func:`save_mask` for ``vocab``. ``verify=False`` skips the checksum
    (the only step that reads the whole file)."""
    from .api import Mask, _CachedStaticWords, _Engine
    from .compiler.parser_dwa import ParserDWA
    from .compiler.stack_effects import StackEffects
    from .compiler.static_mask import CompiledMasks, StaticMasker
    from .compiler.terminal_dwa import TerminalDWA
    from .compiler.token_classes import TokenClasses
    from .recognizer import Recognizer

    art = read_artifact(path, kind=ARTIFACT_KIND, expect_fingerprint=vocab.fingerprint, verify=verify)
    meta, arrays = art.meta, art.arrays
    try:
        grammar = Grammar.from_json(meta["grammar"])
        table = LRTable.from_arrays(arrays, prefix=_PREFIXES["lr"])
        lexer = DenseLexer.from_arrays(arrays, prefix=_PREFIXES["lexer"])
        effects = StackEffects.from_arrays(table, arrays)
        classes = TokenClasses.from_arrays(arrays)
        tdwa = TerminalDWA(_unprefixed(_PREFIXES["tdwa"], arrays), n_tokens=classes.n_internal)
        sets_arr = np.asarray(arrays["class_sets"])
        class_sets = [int.from_bytes(row.astype("<u8").tobytes(), "little") for row in sets_arr]
        if len(class_sets) != tdwa.n_weights:
            raise ArtifactError(f"{path}: {len(class_sets)} class sets for {tdwa.n_weights} weights")
        pdwa = ParserDWA(tdwa, effects, class_sets, classes.n_classes, **meta.get("pdwa_limits", {}))
    except ArtifactError:
        raise
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise ArtifactError(f"{path}: inconsistent mask artifact ({type(e).__name__}: {e})") from e

    mask = Mask.__new__(Mask)
    mask._init_common(vocab, grammar, grammar, "static")
    mask.table = table
    mask._lazy_lexer = None
    mask._limits = {}
    mask._warnings = list(meta.get("warnings", []))
    mask.stats = {name: info for name, info in meta.get("stages", [])}
    compiled = CompiledMasks(pdwa, classes, mask.stats)
    rec = Recognizer(grammar, table, lexer, restrict_lexer=False)
    mask.compiled = compiled
    masker = StaticMasker(compiled, rec, lambda: mask.trie, vocab.n_logits)
    mask._engine = _Engine(rec, _CachedStaticWords(masker), "static")
    return mask


def cached_compile(grammar: Grammar, vocab: Vocab, cache_dir: "str | os.PathLike[str]", *,
                   limits: Optional[dict] = None, on_stage=None):
    """A static compile through the compile cache: load the entry for (grammar, vocabulary,
    limits, glrmask version) when present and intact, else compile and store it."""
    from .api import Mask

    cache = CompileCache(cache_dir)
    digest = hashlib.sha256(grammar.to_json().encode("utf-8")).hexdigest()
    key = cache.key(digest, vocab.fingerprint, {"mode": "static", "limits": _jsonable(limits or {})},
                    glrmask_version())
    hit = cache.get(key)
    if hit is not None:
        try:
            return load_mask(hit, vocab)
        except ArtifactError:
            pass  # damaged or stale entry: recompile and overwrite it
    mask = Mask(grammar, vocab, mode="static", limits=limits, on_stage=on_stage)
    Path(cache.directory).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".glrm.part", dir=str(cache.directory))
    os.close(fd)
    try:
        save_mask(mask, tmp)
        cache.put(key, tmp)
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
