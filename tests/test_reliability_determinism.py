"""Compilation is deterministic (issue #17 item 7): the same grammar gives the same artifact.

Each compile runs in a fresh interpreter with its own ``PYTHONHASHSEED``, so an order that depends
on hashing strings (set or dict iteration over names) or on the clock (a time-budgeted expansion)
shows up as different arrays; the files must be identical byte for byte (artifacts store stage
sizes, not timings).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from glrmask.artifact import read_artifact
from glrmask.mask_artifact import ARTIFACT_KIND

ROOT = Path(__file__).resolve().parent.parent

SOURCES = {
    "json": str(ROOT / "grammars" / "json.lark"),
    "arithmetic": str(ROOT / "grammars" / "arithmetic.lark"),
    "csv": str(ROOT / "grammars" / "csv.lark"),
    "gbnf": 'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws [0-9]+\nws ::= [ \\t]*\n',
    "lookahead": 'start: (WORD | NUM)+\nWORD: /[a-z]+(?=[0-9])/\nNUM: /[0-9]+/\n%ignore " "\n',
}

_COMPILE_ALL = """
import sys, glrmask
sources = dict(zip(sys.argv[2::2], sys.argv[3::2]))
vocab = glrmask.Vocab.default()
for name, src in sources.items():
    glrmask.compile(src, vocab).save(f"{sys.argv[1]}/{name}.glrm")
"""


SLOW_SOURCES = {
    "sql": str(ROOT / "grammars" / "sql.lark"),  # the Parser DWA once had 9,999 vs 9,986 states
    "tinylang": str(ROOT / "grammars" / "tinylang.lark"),
}


def _compile_with_hash_seed(seed: int, out: Path, sources: dict[str, str] = SOURCES) -> None:
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    args = [a for kv in sources.items() for a in kv]
    subprocess.run([sys.executable, "-c", _COMPILE_ALL, str(out), *args], check=True, env=env,
                   cwd=ROOT, timeout=600, capture_output=True)


def _content(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The artifact's header and arrays, without the wall-clock stage timings."""
    art = read_artifact(path, kind=ARTIFACT_KIND)
    meta = {k: v for k, v in art.meta.items() if k != "stages"}
    stages = [name for name, _info in art.meta.get("stages", [])]
    return {**meta, "stage_names": stages}, dict(art.arrays)


@pytest.fixture(scope="module")
def two_compiles(tmp_path_factory) -> tuple[Path, Path]:
    a, b = tmp_path_factory.mktemp("seed1"), tmp_path_factory.mktemp("seed2")
    _compile_with_hash_seed(1, a)
    _compile_with_hash_seed(2, b)
    return a, b


def _assert_same(a: Path, b: Path, name: str) -> None:
    assert (a / f"{name}.glrm").read_bytes() == (b / f"{name}.glrm").read_bytes(), name
    meta_a, arrays_a = _content(a / f"{name}.glrm")
    meta_b, arrays_b = _content(b / f"{name}.glrm")
    assert meta_a == meta_b
    assert sorted(arrays_a) == sorted(arrays_b)
    for key in arrays_a:
        x, y = arrays_a[key], arrays_b[key]
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), key


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_two_compiles_under_different_hash_seeds_store_the_same_automata(two_compiles, name):
    _assert_same(*two_compiles, name)


@pytest.mark.slow
def test_large_shipped_grammars_compile_to_the_same_automata(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _compile_with_hash_seed(1, a, SLOW_SOURCES)
    _compile_with_hash_seed(2, b, SLOW_SOURCES)
    for name in SLOW_SOURCES:
        _assert_same(a, b, name)
