"""``mode="auto"``'s static compile, in a worker process whose artifact is mapped in when it ends.

Why a process and not a thread. The static compile is mostly Python; in a thread it holds the GIL
for most of its run, so a decode loop serving dynamic masks in the same process slows down
exactly while it needs to be fast (measured before this module: dynamic masks up to 18 s per step
under a background compile). A worker process shares nothing with the decode loop but the
finished artifact: it compiles, saves the mask to a temporary file (or finds it in the compile
cache), and the parent loads it — validation and a memory map, milliseconds — and switches new
requests to it. Dropping the ``Mask`` (or :meth:`BackgroundCompile.cancel`) terminates the worker,
so no compile outlives the mask that wanted it.

The worker is a fresh interpreter (``python -c`` running this module), not a ``multiprocessing``
child: forking a threaded server is unsafe, and ``spawn`` re-imports the user's main module (a
script without a ``__main__`` guard would run again). It reads the grammar IR as JSON from its job
folder ``DIR`` and the vocabulary (its token bytes, pickled by glrmask itself once per process; no
tokenizer object), and writes the artifact or an error report to ``DIR``.

A spare worker waits ready. Starting a worker costs the request that starts it: ``Popen`` returns
only once the child has exec'd, which on a busy machine means once the scheduler ran it (tens of
ms of the caller's wall time, measured: auto-mode compile wall p50 51 ms for 8 ms of CPU), and the
interpreter's start-up competes with the first masks. So each worker is started ahead of need, in
a background thread, and waits (niced, imports done, the latest job's vocabulary loaded and one
small compile run: :func:`_warm`) for one job folder on its stdin; a compile hands its folder to
the spare and a new spare is started in the background. One job per worker
process: a compile's memory goes back to the system when it ends. The spare exits when its stdin
closes (this process exiting, or a fork's copy of the handle being dropped) and is killed at exit.
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Callable, Optional

from .errors import GlrmaskError, GrammarTooComplex

__all__ = ["BackgroundCompile"]

_LIVE: dict = {}  # id(job) -> each _Job until its folder (if it got one) is removed


def _stop_all_at_exit() -> None:
    """At interpreter exit the watcher threads (daemons) never run again: stop whatever they
    left, synchronously (whichever order this and weakref's own exit hook run in)."""
    for job in list(_LIVE.values()):
        BackgroundCompile._stop(job)


atexit.register(_stop_all_at_exit)

_vocab_lock = threading.Lock()
_vocab_files: dict[str, str] = {}  # vocabulary fingerprint -> its pickle, written once per process
_vocab_dir: list[str] = []
_last_vocab: list[str] = []  # the pickle the latest job used: what the next spare preloads


def _vocab_file(vocab) -> str:
    """The pickled vocabulary a worker reads, written once per process and vocabulary (12 MB and
    25 ms for Llama-3.1: not on every request's path to its first mask); removed at exit."""
    key = str(getattr(vocab, "fingerprint", id(vocab)))
    with _vocab_lock:
        path = _vocab_files.get(key)
        if path is not None and os.path.exists(path):
            return path
        if not _vocab_dir:
            _vocab_dir.append(tempfile.mkdtemp(prefix="glrmask-vocab-"))
            atexit.register(shutil.rmtree, _vocab_dir[0], True)
        path = os.path.join(_vocab_dir[0], f"{len(_vocab_files)}.pkl")
        with open(path + ".tmp", "wb") as f:
            pickle.dump(vocab, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(path + ".tmp", path)
        _vocab_files[key] = path
        return path


def _note_vocab(path: str) -> None:
    with _vocab_lock:
        _last_vocab[:] = [path]


LAUNCH_DELAY_S = 0.02
"""How long after a ``Mask`` is made its background compile is handed to a worker (see
:class:`_Launcher`)."""

WORKER_NICE = 19
"""The worker's scheduling priority increment. A compile is background work and decoding is not:
on a machine with a free core the worker runs at full speed anyway, on a busy one it yields its
time slices to the decode loop instead of preempting it for milliseconds (measured with
``bench/compile_interference_bench.py``: static-loop TBM mean 1.66x loaded/quiet at the caller's
priority, within 1.04x at every quantile with nice 19)."""


_BOOTSTRAP = ("import os, runpy\n"
              "try:\n    os.nice(%d)\nexcept (AttributeError, OSError):\n    pass\n"
              "if os.environ.pop(%r, None):\n"
              "    try:\n        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
              "    except (AttributeError, OSError):\n        pass\n"
              "runpy.run_module('glrmask.background_compile', run_name='__main__', alter_sys=True)\n"
              % (WORKER_NICE, "GLRMASK_SPARE_IDLE"))
_NICE = shutil.which("nice")
_SPARE_ARG = "--spare"  # the worker waits for its job folder on stdin (one line)
"""The worker's command (``python -c``): it lowers its priority before importing anything, so
starting the interpreter, numpy and glrmask (a few hundred ms of CPU) does not compete with the
parent's first masks either. A spare started ahead of need (not for a job waiting now) runs its
start-up under ``SCHED_IDLE`` where the system has it, and takes the normal policy (at that nice
value) when its job arrives: on a busy core the next job's spare no longer halves the running
job's share of it."""


_WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The compile is single-threaded: no BLAS thread pool in the worker (numpy's OpenBLAS threads
spin between calls, time taken from the decode loop's core)."""


_WARMUP_SCHEMA = {
    "type": "object",
    "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"},
                   "b": {"type": "boolean"}, "a": {"type": "array", "items": {"type": "string"}}},
    "required": ["s"],
}
"""What a spare compiles once before its job: a little of every stage's common paths."""


def _warm(vocab_path: str) -> Optional[tuple]:
    """Runs in a spare while it waits: load the vocabulary the latest job used (its trie too)
    and compile a small schema, so the job's compile is not the process's first. In a fresh
    interpreter the first static compile of a small schema took ~450 ms and the next one ~200 ms
    (measured: lazy imports, first calls, per-vocabulary arrays), and unpickling the vocabulary
    and loading its trie another ~140 ms — all of it time to static, now spent before the job
    exists. Best effort: whatever fails here, the job does again and reports."""
    try:
        from .api import compile_json_schema

        with open(vocab_path, "rb") as f:
            vocab = pickle.load(f)
        compile_json_schema(_WARMUP_SCHEMA, vocab, mode="static")
        return vocab_path, vocab
    except Exception:  # noqa: BLE001 - an optimization only (see above)
        return None


def _normal_policy(tid: int) -> None:
    """Thread ``tid`` (0: the caller) leaves idle priority for the normal policy, its nice value
    kept (allowed unprivileged at nice 19); nothing where the system has no such policies."""
    try:
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _await_job() -> Callable[[], str]:
    """Runs in a spare: read its job folder from stdin in a thread of normal (niced) policy, which
    moves the main thread to it too the moment the job arrives — even mid warm-up: at idle
    priority on a saturated machine the warm-up would never end. Returns the wait for the folder
    (empty: stdin closed, no job)."""
    main = threading.get_native_id()
    line: list[str] = []
    arrived = threading.Event()

    def read() -> None:
        _normal_policy(0)
        try:
            line.append(sys.stdin.readline().strip())
        finally:
            _normal_policy(main)
            arrived.set()

    threading.Thread(target=read, daemon=True, name="glrmask-job-folder").start()

    def folder() -> str:
        arrived.wait()
        return line[0] if line else ""

    return folder


def _worker(directory: str, preloaded: Optional[tuple] = None) -> None:
    """Runs in the child: compile statically (through the cache when one is given) and save.
    ``preloaded``: ``(vocabulary pickle path, vocabulary)`` a spare loaded while it waited."""
    err_path = os.path.join(directory, "error.json")
    try:
        from .api import compile_grammar

        with open(os.path.join(directory, "job.json"), encoding="utf-8") as f:
            job = json.load(f)
        if preloaded is not None and preloaded[0] == job["vocab"]:
            vocab = preloaded[1]
        else:
            with open(job["vocab"], "rb") as f:
                vocab = pickle.load(f)
        with open(os.path.join(directory, "grammar.pkl"), "rb") as f:
            grammar = pickle.load(f)
        mask = compile_grammar(grammar, vocab, mode="static", limits=job["limits"], cache_dir=job["cache_dir"])
        mask.save(os.path.join(directory, "mask.glrm"), warnings=False)  # the parent has its own
    except GlrmaskError as e:
        with open(err_path, "w", encoding="utf-8") as f:
            json.dump({"type": type(e).__name__, "message": str(e)}, f)
    except BaseException as e:  # an internal error: reported to the parent, never swallowed
        with open(err_path, "w", encoding="utf-8") as f:
            json.dump({"type": "InternalError", "message": f"{type(e).__name__}: {e}"}, f)
        raise


class _Spare:
    """The worker started ahead of need (module docstring). ``take()`` gives a running worker
    that reads its job folder from stdin — the spare when it is ready, else one started now —
    and starts the next spare in a background thread."""

    _lock = threading.Lock()
    _proc: Optional[subprocess.Popen] = None
    _owner_pid = 0  # the process that started the spare (a fork's child must not use it)
    _starting = False

    @classmethod
    def _start(cls, ahead: bool = False) -> subprocess.Popen:
        """A worker waiting for its job folder on stdin; ``ahead``: started before any job needs
        it (its start-up runs at idle priority, see ``_BOOTSTRAP``)."""
        cmd = [sys.executable, "-c", _BOOTSTRAP, _SPARE_ARG]
        with _vocab_lock:
            cmd += _last_vocab  # preloaded while the spare waits (:func:`_warm`)
        if _NICE is not None:  # niced from exec on: even the interpreter's start-up yields
            cmd = [_NICE, "-n", str(WORKER_NICE)] + cmd
        env = {**os.environ, **_WORKER_ENV}
        if ahead:
            env["GLRMASK_SPARE_IDLE"] = "1"
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)

    @classmethod
    def _refill(cls) -> None:
        try:
            proc = cls._start(ahead=True)
        except OSError:
            proc = None
        with cls._lock:
            cls._starting = False
            if proc is not None:
                old, cls._proc, cls._owner_pid = cls._proc, proc, os.getpid()
            else:
                old = None
        if old is not None:
            cls._discard(old)

    @staticmethod
    def _discard(proc: subprocess.Popen) -> None:
        try:
            proc.stdin.close()  # the worker exits on end of input
        except OSError:
            pass
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    @classmethod
    def take(cls) -> subprocess.Popen:
        with cls._lock:
            proc = cls._proc if cls._owner_pid == os.getpid() else None
            cls._proc = None
            refill = not cls._starting
            cls._starting = True
        if refill:
            threading.Thread(target=cls._refill, daemon=True, name="glrmask-spare-worker").start()
        if proc is None or proc.poll() is not None:
            proc = cls._start()
        return proc

    @classmethod
    def stop(cls) -> None:
        """Stop the spare (interpreter exit)."""
        with cls._lock:
            proc, cls._proc = cls._proc, None
            mine = cls._owner_pid == os.getpid()
        if proc is not None and mine:
            cls._discard(proc)


atexit.register(_Spare.stop)


class _Job:
    """One compile: its job folder and worker, both made by the watcher thread (off the request's
    path: a ``mkdtemp`` alone took 3.5 ms on this machine's disk); ``directory`` and ``proc`` are
    None until then; ``cancelled`` may be set before, during or after."""

    def __init__(self, spec: dict, grammar, known: Optional[tuple] = None) -> None:
        self.spec = spec  # what job.json holds, the vocabulary still as an object
        self.grammar = grammar  # the grammar IR, pickled into the folder by the watcher
        self.known = known  # (normalized grammar, LR table) the artifact should hold: reused on load
        self.directory: Optional[str] = None
        self.proc: Optional[subprocess.Popen] = None
        self.cancelled = threading.Event()
        self.started = threading.Event()
        self.done = threading.Event()  # the watcher finished (switched, failed or was cancelled)
        self.lock = threading.Lock()

    def write(self) -> None:
        """Make the job folder and write ``job.json`` (the vocabulary as its process-wide pickle)
        and the grammar. The grammar goes as a pickle, written here rather than serialized on the
        request's path: the folder is private (``mkdtemp``) and read only by this library's own
        worker, and pickling a large schema's IR costs ~3 ms where its JSON form cost 4-22 ms."""
        directory = tempfile.mkdtemp(prefix="glrmask-compile-")
        with self.lock:
            self.directory = directory
        spec = dict(self.spec, vocab=_vocab_file(self.spec["vocab"]))
        _note_vocab(spec["vocab"])
        with open(os.path.join(directory, "grammar.pkl"), "wb") as f:
            pickle.dump(self.grammar, f, protocol=pickle.HIGHEST_PROTOCOL)
        self.grammar = None
        with open(os.path.join(directory, "job.json"), "w", encoding="utf-8") as f:
            json.dump(spec, f)

    def start(self) -> None:
        """Hand the job folder to the spare worker (or to a worker started now)."""
        try:
            proc = _Spare.take()
            try:
                proc.stdin.write((self.directory + "\n").encode("utf-8"))
                proc.stdin.close()
            except OSError:  # the spare died since it was checked
                proc = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP, self.directory],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            with self.lock:
                self.proc = proc
            if self.cancelled.is_set():
                self.kill()
        finally:
            self.started.set()

    def kill(self) -> None:
        with self.lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()


class _Launcher:
    """One daemon thread that starts each job's watcher, ``LAUNCH_DELAY_S`` after the job was
    submitted. ``Thread.start()`` waits until the new thread runs, which under a busy GIL cost a
    request ~2 ms (measured); a queue ``put`` does not wait, so the request's path holds no
    thread start. The delay keeps the watcher's work (a ``mkdtemp``, the grammar's pickle, handing
    the folder to the spare worker and starting the next spare: ~1 ms of this process's CPU and
    the GIL) out of the request's way while it computes its first mask, which a median schema
    has within ~5 ms; the static compile it postpones takes far longer than the delay."""

    _queue: "queue.SimpleQueue" = queue.SimpleQueue()
    _lock = threading.Lock()
    _thread: Optional[threading.Thread] = None
    _pid = 0

    @classmethod
    def submit(cls, args: tuple) -> None:
        with cls._lock:
            if cls._thread is None or not cls._thread.is_alive() or cls._pid != os.getpid():
                cls._queue = queue.SimpleQueue()  # (a fork's child gets a fresh queue and thread)
                cls._pid = os.getpid()
                cls._thread = threading.Thread(target=cls._run, args=(cls._queue,), daemon=True,
                                               name="glrmask-static-compile-launcher")
                cls._thread.start()
            cls._queue.put((time.monotonic() + LAUNCH_DELAY_S, args))

    @staticmethod
    def _run(q: "queue.SimpleQueue") -> None:
        while True:
            when, args = q.get()
            job = args[0]
            delay = when - time.monotonic()
            if delay > 0:
                job.cancelled.wait(delay)  # a cancelled job goes at once (its watcher just ends it)
            threading.Thread(target=BackgroundCompile._watch, args=args, daemon=True,
                             name="glrmask-static-compile-watch").start()


class BackgroundCompile:
    """One static compile in a worker process for the mask ``owner``. ``on_done(mask)`` is called
    in a watcher thread with the loaded static mask, or ``on_error(error)`` with a
    :class:`GlrmaskError`; neither is called once the owner is gone or the compile cancelled.
    The caller only queues the job: the watcher thread writes its folder and starts (takes) the
    worker."""

    def __init__(self, owner, grammar, vocab, limits: Optional[dict], cache_dir: Optional[str],
                 on_done: Callable, on_error: Callable, known: Optional[tuple] = None) -> None:
        """``grammar``: the grammar IR to compile (it must not change afterwards). ``on_done(owner,
        loaded_mask)`` / ``on_error(owner, error)`` are plain functions (a bound method would keep
        the owner alive and defeat the cancellation). ``known``: the owner's ``(normalized grammar,
        LR table)``, which the loaded mask reuses when its artifact holds exactly those."""
        self._job = job = _Job({"limits": limits, "vocab": vocab,
                                "cache_dir": None if cache_dir is None else str(cache_dir)}, grammar, known)
        _LIVE[id(job)] = job
        owner_ref = weakref.ref(owner)
        # the watcher holds only a weak reference: dropping the mask cancels the compile
        # (at interpreter exit too: the finalizer stops the worker and removes the job folder)
        weakref.finalize(owner, BackgroundCompile._dropped, job)
        _Launcher.submit((job, vocab, owner_ref, on_done, on_error))

    @staticmethod
    def _dropped(job: _Job) -> None:
        """The mask was dropped (this runs wherever the collector freed it: inside some later
        request's mask, typically): kill the worker and return at once; the watcher thread, which
        waits on it, reaps it and removes the job folder. Waiting here cost ~15 ms of the caller's
        time per dropped mask. At interpreter exit :func:`_stop_all_at_exit` finishes the job."""
        job.cancelled.set()
        job.kill()

    @staticmethod
    def _stop(job: _Job) -> None:
        """Stop the worker and remove its job folder (here, not only in the watcher: the watcher is
        a daemon thread, which never runs again once the interpreter exits)."""
        job.cancelled.set()
        job.started.wait(10)
        with job.lock:
            proc = job.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        BackgroundCompile._remove(job)

    @staticmethod
    def _remove(job: _Job) -> None:
        with job.lock:
            directory = job.directory
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        _LIVE.pop(id(job), None)

    @staticmethod
    def _watch(job: _Job, vocab, owner_ref, on_done, on_error) -> None:
        try:
            BackgroundCompile._wait_and_switch(job, vocab, owner_ref, on_done, on_error)
        finally:
            BackgroundCompile._remove(job)
            job.done.set()

    @staticmethod
    def _wait_and_switch(job: _Job, vocab, owner_ref, on_done, on_error) -> None:
        """Write the job, start the worker, wait for it, load its artifact (or read its error) and
        hand it over."""
        if job.cancelled.is_set():
            job.started.set()
            return
        try:
            job.write()
        except (OSError, pickle.PickleError, TypeError, AttributeError, RecursionError) as e:
            # no room for the job (or a grammar that does not pickle): the mask stays dynamic and says why
            job.started.set()
            owner = owner_ref()
            if owner is not None:
                on_error(owner, GlrmaskError(f"static compile: cannot write the worker's job ({e})"))
            return
        out_path = os.path.join(job.directory, "mask.glrm")
        err_path = os.path.join(job.directory, "error.json")
        job.start()
        from .mask_artifact import KnownParts, load_mask

        # what the artifact will hold, in its stored forms, made while the worker compiles (off the
        # hand-over, which then holds the GIL for the checks only)
        known = None if job.known is None else KnownParts.of(*job.known)
        job.known = None
        code = job.proc.wait()
        if job.cancelled.is_set():
            return
        if os.path.exists(out_path) and code == 0:
            try:
                result = load_mask(out_path, vocab, known=known)
            except GlrmaskError as e:
                result = e
        elif os.path.exists(err_path):
            with open(err_path, encoding="utf-8") as f:
                info = json.load(f)
            cls = GrammarTooComplex if info.get("type") == "GrammarTooComplex" else GlrmaskError
            result = cls(info.get("message", "static compile failed"))
        else:
            result = GlrmaskError(f"static compile worker ended with exit code {code}")
        owner = owner_ref()
        if owner is not None:
            (on_error if isinstance(result, GlrmaskError) else on_done)(owner, result)

    def cancel(self) -> None:
        """Stop the worker (nothing is switched afterwards)."""
        BackgroundCompile._stop(self._job)

    def join(self, timeout: Optional[float] = None) -> None:
        self._job.done.wait(timeout)

    def is_alive(self) -> bool:
        return not self._job.done.is_set()

    @property
    def pid(self) -> Optional[int]:
        """The worker's process id once the watcher started it (for tests and monitoring)."""
        self._job.started.wait(10)
        proc = self._job.proc
        return None if proc is None else proc.pid


if __name__ == "__main__":
    if sys.argv[1] == _SPARE_ARG:  # a spare: preload the compiler (and warm it), then wait for a job folder
        _job_folder = _await_job()
        from . import api as _api  # noqa: F401
        _preloaded = _warm(sys.argv[2]) if len(sys.argv) > 2 else None
        job = _job_folder()
        if job:
            _worker(job, _preloaded)
    else:
        _worker(sys.argv[1])
    # the result is on disk: leave without tearing down the compile's heap (the parent waits for
    # this exit before it loads the artifact; finalizing a large schema's objects took longer than
    # saving them)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
