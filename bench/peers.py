"""The engines the benchmarks compare, behind one interface, and the one timing loop they all share.

Why one module: a comparison is only fair when every engine replays the same token ids through the
same loop, timed the same way. So every engine here — glrmask (this repository), llguidance,
xgrammar and GLRMask-Rust (PyPI ``glrmask==0.5.0``, in its own virtual environment behind
``bench/rust_worker.py``) — exposes

* ``compile(kind, source)`` with ``kind`` ``"lark"`` (grammar text) or ``"json_schema"`` (a schema
  object) → :class:`Compiled`, whose ``compile_ns`` / ``first_mask_ns`` the engine measured itself
  (TTFM = compile + start + first mask);
* ``replay(compiled, docs)`` → :class:`ReplayResult`: every document replayed from a fresh request by
  :func:`time_replays`, each token's mask and commit timed apart with ``time.perf_counter_ns``.

GLRMask-Rust imports as ``glrmask`` too, so it cannot share this process: its worker runs
:func:`time_replays` itself (this module imports nothing but the standard library and NumPy at
import time, so the worker's virtual environment can import it) and only the finished samples
cross the pipe; inter-process communication is never inside a timed interval.

An engine that cannot be set up raises :class:`Unavailable` with the command that installs it, so a
benchmark reports "not installed" instead of failing.
"""
from __future__ import annotations

import abc
import base64
import functools
import gc
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SHARED = ROOT.parent / "shared" / "data"
TOKENIZER = SHARED / "tokenizers" / "llama-3.1" / "tokenizer.json"
RUST_PYTHON = Path(os.environ.get("GLRMASK_RUST_PYTHON", "/work/venvs/rust/bin/python"))

INSTALL = {
    "llguidance": "python -m pip install llguidance==1.9.1 transformers",
    "xgrammar": "python -m pip install 'xgrammar>=0.2,<0.3' transformers",
    "glrmask-rust": ("python -m venv /work/venvs/rust && /work/venvs/rust/bin/pip install glrmask==0.5.0 numpy "
                     "(another venv: export GLRMASK_RUST_PYTHON=/path/to/venv/bin/python)"),
}

# Per-document outcome codes of a replay.
ACCEPTED, NOT_IN_MASK, COMMIT_REFUSED = 0, 1, 2


class Unavailable(Exception):
    """The engine cannot run here (not installed, or its set-up failed); ``install`` says how to fix it."""

    def __init__(self, engine: str, reason: str):
        self.engine = engine
        self.reason = reason
        self.install = INSTALL.get(engine, "")
        super().__init__(f"{engine}: {reason}" + (f" — install: {self.install}" if self.install else ""))


class CompileRefused(Exception):
    """The engine declined the grammar or schema (unsupported feature or compile error)."""


class OverBudget(Exception):
    """The engine hit a size or time budget while compiling."""


class Deadline(BaseException):
    """A benchmark's wall-clock limit fired (raised from a SIGALRM handler). A BaseException so that
    no engine's ``except Exception`` mistakes it for a compile error."""


# ------------------------------------------------------------------------------------------------
# The shared timing loop
# ------------------------------------------------------------------------------------------------

@dataclass
class Request:
    """One replay's hot-path callables: ``fill()`` writes the mask into ``words`` (the engine's own
    output buffer, viewed as 1-D uint32), ``commit(token) -> bool`` advances, ``at_end()`` says
    whether the request may end here (read after the last token, not timed). Bound methods and
    ``functools.partial`` objects keep the harness's own cost per call the same small constant for
    every engine."""

    fill: Callable[[], Any]
    commit: Callable[[int], bool]
    words: np.ndarray
    at_end: Callable[[], bool]


@dataclass
class ReplayResult:
    """Samples of committed tokens only (a refused token ends its document and is not a sample)."""

    mask_ns: np.ndarray                   # int64, one per committed token, documents back to back
    commit_ns: np.ndarray                 # int64, same positions
    doc_tokens: np.ndarray                # int64, samples per document
    outcome: np.ndarray                   # int8 per document: ACCEPTED / NOT_IN_MASK / COMMIT_REFUSED
    at_end: np.ndarray                    # bool per document: may end after its last token

    @property
    def tbm_ns(self) -> np.ndarray:
        return self.mask_ns + self.commit_ns

    @property
    def rejects(self) -> int:
        return int(np.count_nonzero(self.outcome != ACCEPTED))

    def to_wire(self) -> dict:
        return {k: pack(getattr(self, k)) for k in ("mask_ns", "commit_ns", "doc_tokens", "outcome", "at_end")}

    @classmethod
    def from_wire(cls, d: dict) -> "ReplayResult":
        return cls(**{k: unpack(d[k]) for k in ("mask_ns", "commit_ns", "doc_tokens", "outcome", "at_end")})

    @classmethod
    def concat(cls, parts: Sequence["ReplayResult"]) -> "ReplayResult":
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) if parts else np.zeros(0, np.int64)
                     for k in ("mask_ns", "commit_ns", "doc_tokens", "outcome", "at_end")))


def time_replays(new_request: Callable[[], Request], docs: Sequence[Sequence[int]]) -> ReplayResult:
    """Replay every document from a fresh request: per token, time ``fill()``, check the token's bit
    (not timed), time ``commit(token)``. The garbage collector is off while documents replay (a
    collection would land in some engine's sample); it runs between documents instead."""
    clock = time.perf_counter_ns
    n_total = sum(len(d) for d in docs)
    mask_ns = np.zeros(n_total, np.int64)
    commit_ns = np.zeros(n_total, np.int64)
    doc_tokens = np.zeros(len(docs), np.int64)
    outcome = np.zeros(len(docs), np.int8)
    at_end = np.zeros(len(docs), bool)
    k = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for d, ids in enumerate(docs):
            req = new_request()
            fill, commit, words = req.fill, req.commit, req.words
            start = k
            status = ACCEPTED
            for tok in ids:
                t0 = clock()
                fill()
                t1 = clock()
                if not (int(words[tok >> 5]) >> (tok & 31)) & 1:
                    status = NOT_IN_MASK
                    break
                t2 = clock()
                ok = commit(tok)
                t3 = clock()
                if not ok:
                    status = COMMIT_REFUSED
                    break
                mask_ns[k] = t1 - t0
                commit_ns[k] = t3 - t2
                k += 1
            doc_tokens[d] = k - start
            outcome[d] = status
            at_end[d] = status == ACCEPTED and bool(req.at_end())
            del req
            if was_enabled and d % 64 == 63:
                gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    return ReplayResult(mask_ns[:k].copy(), commit_ns[:k].copy(), doc_tokens, outcome, at_end)


def bit(words: np.ndarray, token: int) -> bool:
    return bool((int(words[token >> 5]) >> (token & 31)) & 1)


def pack(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def unpack(d: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["b64"]), dtype=np.dtype(d["dtype"])).copy()


def pack_docs(docs: Sequence[Sequence[int]]) -> dict:
    lengths = np.fromiter((len(d) for d in docs), np.int64, count=len(docs))
    flat = np.fromiter((t for d in docs for t in d), np.int32, count=int(lengths.sum()))
    return {"lengths": pack(lengths), "tokens": pack(flat)}


def unpack_docs(d: dict) -> list[list[int]]:
    lengths, flat = unpack(d["lengths"]), unpack(d["tokens"]).tolist()
    out, k = [], 0
    for n in lengths.tolist():
        out.append(flat[k:k + n])
        k += n
    return out


def pin_to_core(core: Optional[int]) -> Optional[int]:
    """Pin this process to one core (the last allowed one by default); returns it (None: not pinned)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    core = allowed[-1] if core is None else core
    os.sched_setaffinity(0, {core})
    return core


# ------------------------------------------------------------------------------------------------
# Engines
# ------------------------------------------------------------------------------------------------

@dataclass
class Compiled:
    """A compiled grammar: ``handle`` is the engine's own object (or the worker's id for it)."""

    handle: Any
    compile_ns: int
    first_mask_ns: int            # start() + first mask, after the compile
    info: dict = field(default_factory=dict)

    @property
    def ttfm_ns(self) -> int:
        return self.compile_ns + self.first_mask_ns


class Engine(abc.ABC):
    """An engine: ``name`` for tables, ``version`` for the record; see the module docstring.
    Each peer implements :meth:`compile`, and :meth:`request` or :meth:`replay`."""

    name = "?"
    version = "?"

    @abc.abstractmethod
    def compile(self, kind: str, source: Any) -> Compiled:
        """Compile ``source`` (``kind``: "lark" or "json_schema"), timed."""

    def replay(self, compiled: Compiled, docs: Sequence[Sequence[int]]) -> ReplayResult:
        return time_replays(functools.partial(self.request, compiled.handle), docs)

    def request(self, handle: Any) -> Request:
        """A fresh request on a compiled handle, for engines that replay in this process (one that
        replays in its own worker, GLRMask-Rust, overrides :meth:`replay` instead)."""
        raise TypeError(f"{self.name} has no in-process requests: it replays in its worker")

    def release(self, compiled: Compiled) -> None:
        """Drop what the engine holds for ``compiled`` (the worker frees its handle)."""

    def close(self) -> None:
        pass

    def _timed_compile(self, build: Callable[[], Any]) -> Compiled:
        t0 = time.perf_counter_ns()
        handle = build()
        t1 = time.perf_counter_ns()
        req = self.request(handle)
        req.fill()
        t2 = time.perf_counter_ns()
        return Compiled(handle, t1 - t0, t2 - t1)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


class GlrmaskEngine(Engine):
    """This repository's glrmask: ``mask.fill_mask(state, out, 0)`` into a preallocated row."""

    def __init__(self, vocab, *, mode: str = "static", lenient: bool = False, cache_dir=None):
        import glrmask

        self.glrmask = glrmask
        self.vocab = vocab
        self.mode = mode
        self.lenient = lenient
        self.cache_dir = cache_dir
        self.name = "glrmask" if mode == "static" else f"glrmask ({mode})"
        self.version = f"{glrmask.__version__} (this repo)"

    def compile(self, kind: str, source: Any) -> Compiled:
        from glrmask.errors import GrammarTooComplex, UnsupportedSchema

        def build():
            try:
                if kind == "lark":
                    return self.glrmask.compile(source, self.vocab, format="lark", mode=self.mode,
                                                cache_dir=self.cache_dir)
                return self.glrmask.compile_json_schema(source, self.vocab, lenient=self.lenient, mode=self.mode,
                                                        cache_dir=self.cache_dir)
            except UnsupportedSchema as e:
                raise CompileRefused(str(e).splitlines()[-1]) from e
            except GrammarTooComplex as e:
                raise OverBudget(str(e)) from e

        return self._timed_compile(build)

    def request(self, mask) -> Request:
        state = mask.start()
        out = np.zeros((1, mask.n_words), np.int32)
        return Request(functools.partial(mask.fill_mask, state, out, 0), state.commit, out[0].view(np.uint32),
                       state.is_accepting)


def _hf_tokenizer(tokenizer: Path):
    try:
        import transformers
    except ImportError as e:
        raise ImportError(f"transformers is needed to hand the tokenizer to the peer ({e})") from e
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer))


class LlguidanceEngine(Engine):
    """llguidance: a compiled ``LLMatcher`` deep-copied per request, masks by
    ``llguidance.numpy.fill_next_token_bitmask`` (its documented NumPy entry point)."""

    name = "llguidance"

    def __init__(self, tokenizer: Path = TOKENIZER, *, eos: Optional[int] = None, lenient: bool = False):
        try:
            import llguidance
            import llguidance.hf
            import llguidance.numpy
            hf = _hf_tokenizer(tokenizer)
        except ImportError as e:
            raise Unavailable("llguidance", f"cannot import it ({e})") from e
        self.ll = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.tok = (llguidance.hf.from_tokenizer(hf, eos_token=eos) if eos is not None
                    else llguidance.hf.from_tokenizer(hf))
        self.n_words = (self.tok.vocab_size + 31) // 32
        self.eos = eos
        self.lenient = lenient
        self.version = _version("llguidance")

    def compile(self, kind: str, source: Any) -> Compiled:
        def build():
            if kind == "lark":
                grammar = self.ll.LLMatcher.grammar_from_lark(source)
            else:
                overrides = {"lenient": True} if self.lenient else None
                grammar = self.ll.LLMatcher.grammar_from_json_schema(json.dumps(source), overrides=overrides)
            proto = self.ll.LLMatcher(self.tok, grammar, log_level=0)
            if proto.is_error():
                err = proto.get_error()
                if any(w in err.lower() for w in ("limit", "fuel", "too many", "too large", "too big")):
                    raise OverBudget(err)
                raise CompileRefused(err)
            return proto

        return self._timed_compile(build)

    def request(self, proto) -> Request:
        m = proto.deep_copy()
        out = np.zeros((1, self.n_words), np.int32)
        return Request(functools.partial(self._fill, m, out, 0), m.consume_token, out[0].view(np.uint32),
                       m.is_accepting)


class XgrammarEngine(Engine):
    """xgrammar: a fresh ``GrammarMatcher`` per request over the compiled grammar. Lark text is not
    its input language; for the JSON benchmark it compiles its built-in JSON grammar (the same
    language as ``grammars/json.lark``; false rejects would show a difference)."""

    name = "xgrammar"

    def __init__(self, tokenizer: Path = TOKENIZER, *, eos: Optional[int] = None):
        try:
            import xgrammar as xgr
            hf = _hf_tokenizer(tokenizer)
        except ImportError as e:
            raise Unavailable("xgrammar", f"cannot import it ({e})") from e
        self.xgr = xgr
        kw = {"stop_token_ids": [eos]} if eos is not None else {}
        self.info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=len(hf), **kw)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.eos = eos
        self.version = _version("xgrammar")

    def compile(self, kind: str, source: Any) -> Compiled:
        def build():
            try:
                if kind == "lark":
                    return self.compiler.compile_builtin_json_grammar()
                # strict_mode=False: JSON Schema semantics (extra properties/items allowed unless forbidden)
                return self.compiler.compile_json_schema(json.dumps(source), any_whitespace=True, strict_mode=False)
            except Exception as e:  # xgrammar raises RuntimeError/ValueError for unsupported schemas
                raise CompileRefused(f"{type(e).__name__}: {str(e)[:200]}") from e

        return self._timed_compile(build)

    def request(self, compiled) -> Request:
        m = self.xgr.GrammarMatcher(compiled)
        t = self.xgr.allocate_token_bitmask(1, self.info.vocab_size)
        return Request(functools.partial(m.fill_next_token_bitmask, t), m.accept_token,
                       t.numpy()[0].view(np.uint32), functools.partial(_eos_allowed, m, t, self.eos))


def _eos_allowed(matcher, bitmask, eos: Optional[int]) -> bool:
    """xgrammar may end where its mask allows the stop token (its own end-of-match signal)."""
    if eos is None:
        return False
    matcher.fill_next_token_bitmask(bitmask)
    return bit(bitmask.numpy()[0].view(np.uint32), eos)


class WorkerDied(Exception):
    pass


class RustEngine(Engine):
    """GLRMask-Rust (PyPI ``glrmask==0.5.0``) in its own virtual environment, driven through
    ``bench/rust_worker.py`` over pipes (one JSON object per line each way). The worker builds its
    vocabulary from the same token bytes as this repository's ``Vocab`` (sent as an ``.npz``), times
    compiles and replays itself, and is pinned to the same core. A call past its deadline kills and
    restarts the worker and raises :class:`OverBudget`."""

    name = "glrmask-rust"

    def __init__(self, vocab, *, core: Optional[int] = None, python: Path = RUST_PYTHON):
        if not python.exists():
            raise Unavailable("glrmask-rust", f"no Python at {python}")
        self.python = python
        self.core = core
        self.vocab = vocab
        self._vocab_file = self._write_vocab(vocab)
        self.proc: Optional[subprocess.Popen] = None
        self._start()

    @staticmethod
    def _write_vocab(vocab) -> str:
        import tempfile

        fd, path = tempfile.mkstemp(prefix="glrmask-rust-vocab-", suffix=".npz")
        os.close(fd)
        np.savez(path, concat=np.asarray(vocab.token_bytes_concat), offsets=np.asarray(vocab.token_offsets))
        return path

    def _start(self) -> None:
        cmd = [str(self.python), "-u", str(BENCH / "rust_worker.py")]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr,
                                     text=True, bufsize=1 << 20)
        try:
            hello = self._call({"op": "hello", "core": self.core, "vocab": self._vocab_file}, timeout=120)
        except (WorkerDied, OverBudget) as e:
            self.close()
            raise Unavailable("glrmask-rust", f"worker did not start ({e})") from e
        if not hello.get("ok"):
            self.close()
            raise Unavailable("glrmask-rust", hello.get("error", "worker refused to start"))
        self.version = hello["version"]
        self.worker_info = hello

    def _call(self, req: dict, timeout: Optional[float] = None) -> dict:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            raise WorkerDied("the worker is not running")
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
        except BrokenPipeError as e:
            raise WorkerDied("the worker closed its input") from e
        if timeout is not None:
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            if not ready:
                self._restart()
                raise OverBudget(f"glrmask-rust: no answer to {req['op']} within {timeout:g}s (worker restarted)")
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            self.proc = None
            raise WorkerDied(f"the worker exited with {code} during {req['op']}")
        return json.loads(line)

    def _restart(self) -> None:
        self.close(remove_vocab=False)
        self._start()

    def _ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def compile(self, kind: str, source: Any, timeout: Optional[float] = None) -> Compiled:
        self._ensure()
        try:
            r = self._call({"op": "compile", "kind": kind, "source": source}, timeout=timeout)
        except WorkerDied as e:
            self.proc = None
            raise CompileRefused(f"worker crashed: {e}") from e
        if not r["ok"]:
            raise CompileRefused(r["error"])
        return Compiled(r["handle"], r["compile_ns"], r["first_mask_ns"], {"mask_len": r["mask_len"]})

    def replay(self, compiled: Compiled, docs: Sequence[Sequence[int]], timeout: Optional[float] = None
               ) -> ReplayResult:
        r = self._call({"op": "replay", "handle": compiled.handle, "docs": pack_docs(docs)}, timeout=timeout)
        if not r["ok"]:
            raise RuntimeError(f"glrmask-rust replay failed: {r['error']}")
        return ReplayResult.from_wire(r["result"])

    def save_load(self, compiled: Compiled, repeats: int = 5) -> dict:
        """``Constraint.save`` size and ``Constraint.load`` time (first and median of ``repeats``), and
        the first mask after a load, measured in the worker."""
        r = self._call({"op": "save_load", "handle": compiled.handle, "repeats": repeats})
        if not r["ok"]:
            raise RuntimeError(r["error"])
        return r

    def release(self, compiled: Compiled) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._call({"op": "free", "handle": compiled.handle})

    def close(self, remove_vocab: bool = True) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                    proc.stdin.flush()
                    proc.wait(timeout=2)
                except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
                    proc.kill()
                    proc.wait()
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
        if remove_vocab and os.path.exists(self._vocab_file):
            os.unlink(self._vocab_file)
