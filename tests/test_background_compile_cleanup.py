"""A ``mode="auto"`` compile leaves nothing behind when the process that wanted it exits.

The background compile writes its job (the grammar IR and the pickled vocabulary: 12 MB for the
Llama-3.1 vocabulary) to a temporary folder for the worker. A server that exits, or a script that
ends, while a compile is still running must not leave that folder (nor the worker) behind: a
process that starts many schemas would otherwise fill the temporary disk.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh interpreter: starts an auto-mode compile and exits while it is still running.
_EXIT_WHILE_COMPILING = """
import glob, time
import glrmask
mask = glrmask.compile("grammars/sql.lark", glrmask.Vocab.default(), mode="auto")
assert mask.static_compile_pid is not None, "the compile ended before the process did"
time.sleep(0.5)  # the next compile's spare worker is started meanwhile
children = {int(p) for f in glob.glob("/proc/self/task/*/children") for p in open(f).read().split()}
print(mask.static_compile_pid, *sorted(children), flush=True)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture(scope="module")
def exited_while_compiling(tmp_path_factory) -> tuple[Path, int]:
    """A process that exited while its auto-mode compile ran: its $TMPDIR and the worker's pid,
    once the worker has had time to go."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("reads process states from /proc")
    tmp = tmp_path_factory.mktemp("tmpdir")
    env = {**os.environ, "TMPDIR": str(tmp)}  # the job folder is made under $TMPDIR
    done = subprocess.run([sys.executable, "-c", _EXIT_WHILE_COMPILING], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    worker, *children = (int(x) for x in done.stdout.split())
    deadline = time.monotonic() + 30
    while not all(_gone(p) for p in (worker, *children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return tmp, worker, children


def test_exiting_while_an_auto_compile_runs_stops_the_worker(exited_while_compiling):
    _tmp, worker, _children = exited_while_compiling
    assert _gone(worker), "the compile worker outlived the process that started it"


def test_exiting_leaves_no_worker_process_at_all(exited_while_compiling):
    """The spare worker, started ahead of the next compile, goes with the process too."""
    _tmp, _worker, children = exited_while_compiling
    assert children, "the process had no worker process to check"
    assert [p for p in children if not _gone(p)] == []


def test_exiting_while_an_auto_compile_runs_leaves_no_job_folder(exited_while_compiling):
    tmp, _worker, _children = exited_while_compiling
    assert sorted(p.name for p in tmp.iterdir()) == []


# Runs in a fresh interpreter: drops an auto-mode mask while its compile runs (no explicit
# collection: tests/test_mask_lifetime.py checks the drop frees it), then waits (the process goes on)
# until the job folder is gone; prints the worker's pid and what $TMPDIR holds.
_DROP_WHILE_COMPILING = """
import os, time
import glrmask
mask = glrmask.compile("grammars/sql.lark", glrmask.Vocab.default(), mode="auto")
pid = mask.static_compile_pid
assert pid is not None, "the compile ended before the mask was dropped"
del mask
deadline = time.monotonic() + 30
while time.monotonic() < deadline and any(n.startswith("glrmask-compile-") for n in os.listdir(os.environ["TMPDIR"])):
    time.sleep(0.05)
print(pid, *sorted(n for n in os.listdir(os.environ["TMPDIR"]) if n.startswith("glrmask-compile-")), flush=True)
"""


def _printed_by(script: str, tmpdir: Path) -> list[str]:
    """What ``script`` prints, run in a fresh interpreter whose $TMPDIR is ``tmpdir``."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("reads process states from /proc")
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_dropping_an_auto_mask_stops_its_worker_and_removes_its_job_folder(tmp_path):
    """The drop itself does not wait for the worker (it may run inside any later request); the
    watcher reaps the worker and removes the folder while the process goes on."""
    worker, *left = _printed_by(_DROP_WHILE_COMPILING, tmp_path)
    assert left == [], "the job folder outlived its dropped mask"
    deadline = time.monotonic() + 30
    while not _gone(int(worker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(int(worker)), "the compile worker outlived its dropped mask"


# Runs in a fresh interpreter: drops an auto-mode mask after its first masks but before its compile
# is handed to a worker (LAUNCH_DELAY_S, raised here so that the drop surely comes first), then
# looks for what it left.
_DROP_AT_ONCE = """
import glob, os, time
import glrmask
import glrmask.background_compile as bc
bc.LAUNCH_DELAY_S = 5.0
mask = glrmask.compile("grammars/sql.lark", glrmask.Vocab.default(), mode="auto")
mask.get_mask(mask.start())
time.sleep(0.3)
del mask
time.sleep(0.5)
children = {int(p) for f in glob.glob("/proc/self/task/*/children") for p in open(f).read().split()}
print(len(children), *sorted(os.listdir(os.environ["TMPDIR"])), flush=True)
"""


def test_a_mask_dropped_before_its_compile_starts_never_starts_a_worker(tmp_path):
    n_children, *left = _printed_by(_DROP_AT_ONCE, tmp_path)
    assert (int(n_children), left) == (0, [])
