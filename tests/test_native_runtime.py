"""The native runtime's contract (DESIGN §5): per-request state in native memory, shared immutable
masks, batch entry points, bad use refused clearly.

Exactness against the reference is in test_static_masks.py / test_static_mode.py /
test_static_equivalence.py; this file checks what the native state adds: forks and rollbacks,
batches, threads, loads that compile nothing, and untrusted artifacts.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed
from conftest import DATA, tiny_vocab

ROOT = Path(__file__).resolve().parents[1]
JSON_GRAMMAR = ROOT / "grammars" / "json.lark"


@pytest.fixture(scope="module")
def json_mask(gpt2):
    return glrmask.compile(str(JSON_GRAMMAR), gpt2)


@pytest.fixture(scope="module")
def docs(gpt2):
    lines = (DATA / "json_documents.jsonl").read_text(encoding="utf-8").splitlines()
    return [gpt2.encode(json.loads(line)) for line in lines[:24]]


def masks_along(mask, ids) -> list[bytes]:
    state = mask.start()
    out = [mask.get_mask(state).tobytes()]
    for t in ids:
        assert state.commit(t)
        out.append(mask.get_mask(state).tobytes())
    return out


# ------------------------------------------------------------------------------ forks and rollbacks
def test_a_fork_is_independent_of_its_origin(json_mask, docs):
    ids = docs[0]
    a = json_mask.start()
    for t in ids[:5]:
        a.commit(t)
    b = a.fork()
    before = json_mask.get_mask(a).tobytes()
    for t in ids[5:10]:
        assert b.commit(t)
    assert json_mask.get_mask(a).tobytes() == before
    assert a.num_committed == 5 and b.num_committed == 10


def test_rollback_then_replay_equals_a_fresh_replay(json_mask, docs):
    rng = random.Random(3)
    for ids in docs[:6]:
        fresh = masks_along(json_mask, ids)
        state = json_mask.start()
        for i, t in enumerate(ids):
            assert state.commit(t)
            if i % 4 == 3:
                k = rng.randint(1, i + 1)
                state.rollback(k)
                assert json_mask.get_mask(state).tobytes() == fresh[i + 1 - k]
                for t2 in ids[i + 1 - k:i + 1]:
                    assert state.commit(t2)
            assert json_mask.get_mask(state).tobytes() == fresh[i + 1]


def test_rollback_past_the_start_is_a_clear_error(json_mask, docs):
    state = json_mask.start()
    state.commit(docs[0][0])
    with pytest.raises(ValueError, match="roll back 2"):
        state.rollback(2)
    with pytest.raises(ValueError):
        state.rollback(-1)
    assert state.num_committed == 1


# ------------------------------------------------------------------------------ batches and threads
def test_fill_masks_equals_fill_mask_per_state_across_masks_and_modes(json_mask, docs, gpt2):
    csv = glrmask.compile(str(ROOT / "grammars" / "csv.lark"), gpt2)
    dyn = glrmask.compile(str(JSON_GRAMMAR), gpt2, mode="dynamic")
    states = []
    for i, ids in enumerate(docs[:10]):
        s = json_mask.start()
        for t in ids[: 3 * i]:
            s.commit(t)
        states.append(s)
    states += [csv.start(), dyn.start()]
    fallback = json_mask.start()
    assert fallback.commit_bytes(b'{"ab')  # mid-token bytes: answered by the reference
    states.append(fallback)
    for n_threads in (1, 2):
        out = np.full((len(states) + 2, json_mask.n_words), -1, dtype=np.int32)
        glrmask.fill_masks(states, out, n_threads=n_threads)
        for i, s in enumerate(states):
            assert out[i].tobytes() == s.mask.get_mask(s).tobytes(), i
        assert (out[len(states):] == -1).all()  # rows past the states are left alone


def test_commit_many_equals_sequential_commits(json_mask, docs):
    a = [json_mask.start() for _ in docs]
    b = [json_mask.start() for _ in docs]
    longest = max(map(len, docs))
    for step in range(longest):
        toks = [ids[step] if step < len(ids) else ids[-1] for ids in docs]
        got = glrmask.commit_many(a, toks, n_threads=2)
        want = [s.commit(t) for s, t in zip(b, toks)]
        assert got == want
    for x, y in zip(a, b):
        assert json_mask.get_mask(x).tobytes() == json_mask.get_mask(y).tobytes()


def test_eight_threads_sharing_one_mask_see_the_single_threaded_masks(json_mask, docs):
    want = {i: hashlib.sha256(b"".join(masks_along(json_mask, ids))).hexdigest() for i, ids in enumerate(docs)}
    got: dict = {}
    errors: list = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(docs), 8):
                got[i] = hashlib.sha256(b"".join(masks_along(json_mask, docs[i]))).hexdigest()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want


def test_fill_masks_writes_into_a_cpu_torch_tensor(json_mask):
    torch = pytest.importorskip("torch")
    out = torch.zeros((2, json_mask.n_words), dtype=torch.int32)
    states = [json_mask.start(), json_mask.start()]
    glrmask.fill_masks(states, out)
    assert out[0].numpy().tobytes() == json_mask.get_mask(states[0]).tobytes()
    json_mask.fill_mask(states[1], out, 1)
    assert out[1].numpy().tobytes() == json_mask.get_mask(states[1]).tobytes()


# ------------------------------------------------------------------------------ bad use
@pytest.mark.parametrize("token", [3.7, "90", None, True])
def test_commit_of_a_non_integer_is_a_type_error(json_mask, token):
    state = json_mask.start()
    with pytest.raises(TypeError, match="token id must be an integer"):
        state.commit(token)
    assert state.num_committed == 0


def test_commit_of_an_id_outside_the_logits_is_a_value_error(json_mask):
    state = json_mask.start()
    for token in (-1, json_mask.n_logits, 2**40):
        with pytest.raises(ValueError, match="outside"):
            state.commit(token)


def test_numpy_integer_ids_are_accepted(json_mask, gpt2):
    state = json_mask.start()
    assert state.commit(np.int64(gpt2.encode("{")[0]))


def test_commit_bytes_of_text_is_a_type_error(json_mask):
    with pytest.raises(TypeError, match="bytes"):
        json_mask.start().commit_bytes("{")


def test_a_state_of_another_mask_is_refused(json_mask, gpt2):
    other = glrmask.compile(str(ROOT / "grammars" / "csv.lark"), gpt2)
    with pytest.raises(ValueError, match="another Mask"):
        json_mask.get_mask(other.start())
    with pytest.raises(TypeError, match="glrmask.State"):
        json_mask.get_mask(None)


@pytest.mark.parametrize("shape,dtype", [((1, 3), np.int32), ((1, 10**5), np.int64), ((10**5,), np.int32)])
def test_a_wrong_output_buffer_is_a_clear_error(json_mask, shape, dtype):
    with pytest.raises(ValueError, match="int32 array of shape"):
        json_mask.fill_mask(json_mask.start(), np.zeros(shape, dtype=dtype), 0)


def test_a_row_outside_the_buffer_is_a_clear_error(json_mask):
    with pytest.raises(ValueError, match="row 2"):
        json_mask.fill_mask(json_mask.start(), np.zeros((2, json_mask.n_words), dtype=np.int32), 2)


# ------------------------------------------------------------------------------ artifacts
_FRESH_PROCESS = r"""
import hashlib, json, sys
import glrmask
import glrmask.compiler.parser_dwa as pd, glrmask.compiler.static_mask as sm, glrmask.compiler.terminal_dwa as td

def refuse(*a, **k):
    raise AssertionError("a loaded mask must not compile anything")

sm.compile_masks = refuse
pd.ParserDWA.__init__ = refuse
td.TerminalDWA.build = classmethod(refuse)
vocab = glrmask.Vocab.default()
mask = glrmask.load(sys.argv[1], vocab)
out = []
for ids in json.loads(sys.argv[2]):
    s = mask.start()
    h = hashlib.sha256(mask.get_mask(s).tobytes())
    for t in ids:
        assert s.commit(t)
        h.update(mask.get_mask(s).tobytes())
    out.append(h.hexdigest())
print(json.dumps(out))
"""


def test_a_mask_loaded_in_a_fresh_process_compiles_nothing_and_gives_the_same_masks(json_mask, docs, tmp_path):
    path = tmp_path / "json.glrm"
    json_mask.save(path)
    want = [hashlib.sha256(b"".join(masks_along(json_mask, ids))).hexdigest() for ids in docs[:5]]
    res = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(path), json.dumps(docs[:5])],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == want


_DAMAGE = r"""
import hashlib, json, random, sys
import glrmask
from glrmask.errors import ArtifactError

path, ids, seed, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
vocab = glrmask.Vocab.default()
data = open(path, "rb").read()
header_end = 16 + int.from_bytes(data[12:16], "little")
want = None
rng = random.Random(seed)
counts = {"refused": 0, "ran": 0}
for k in range(n):
    buf = bytearray(data[:-32])
    for _ in range(rng.randint(1, 3)):
        buf[rng.randrange(header_end, len(buf))] ^= 1 << rng.randrange(8)
    buf += hashlib.sha256(buf).digest()
    p = path + ".bad"
    open(p, "wb").write(buf)
    try:
        mask = glrmask.load(p, vocab)
    except ArtifactError:
        counts["refused"] += 1
        continue
    s = mask.start()
    try:
        for t in ids:
            mask.get_mask(s)
            if not s.commit(t):
                break
        mask.get_mask(s)
    except (glrmask.GlrmaskError, ValueError):
        pass
    counts["ran"] += 1
print(json.dumps(counts))
"""


def test_damaged_artifacts_with_a_recomputed_checksum_never_crash(json_mask, docs, tmp_path):
    """Flip bytes in the arrays, recompute the checksum, load and decode: a refusal or a mask
    that keeps running — never a crash (the decode runs in a subprocess so a crash shows as its
    exit status). A flip that keeps every id in range (a weight bit, say) is a different but
    well-formed automaton: its masks may differ, its memory accesses may not."""
    path = tmp_path / "json.glrm"
    json_mask.save(path)
    res = subprocess.run([sys.executable, "-c", _DAMAGE, str(path), json.dumps(docs[0][:40]), "7", "60"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    counts = json.loads(res.stdout)
    assert counts["refused"] + counts["ran"] == 60
    assert counts["refused"] > 0  # validation does catch out-of-range ids and offsets


def test_a_class_bound_out_of_range_is_refused(json_mask, tmp_path):
    """The crafted artifact of the issue: a changed class id with a recomputed checksum."""
    from glrmask.artifact import read_artifact, write_artifact
    from glrmask.mask_artifact import ARTIFACT_KIND

    path = tmp_path / "json.glrm"
    json_mask.save(path)
    art = read_artifact(path, kind=ARTIFACT_KIND, mmap=False)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    arrays["rt_class_of_orig"][7] = 10**6
    bad = tmp_path / "bad.glrm"
    write_artifact(bad, kind=ARTIFACT_KIND, meta=art.meta, arrays=arrays)
    with pytest.raises(glrmask.ArtifactError, match="class_of_orig"):
        glrmask.load(bad, glrmask.Vocab.default())


@pytest.mark.parametrize("key, damage", [
    ("start_target", lambda a: a.__setitem__(0, 10**6)),       # a start state past the automaton
    ("start_class", lambda a: a.__setitem__(0, -2)),           # an LR state's class below -1
    ("start_class_of", lambda a: a.__setitem__(slice(None), a[::-1].copy())),  # classes out of order
    ("root_restrict", lambda a: a.__setitem__(0, 10**6)),      # a restriction past the weights
])
def test_damaged_start_rows_are_refused_naming_the_array(json_mask, tmp_path, key, damage):
    from glrmask.artifact import read_artifact, write_artifact
    from glrmask.mask_artifact import ARTIFACT_KIND

    path = tmp_path / "json.glrm"
    json_mask.save(path)
    art = read_artifact(path, kind=ARTIFACT_KIND, mmap=False)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    name = next(k for k in arrays if k.endswith(key) and k[-len(key) - 1] in "_")
    damage(arrays[name])
    bad = tmp_path / "bad.glrm"
    write_artifact(bad, kind=ARTIFACT_KIND, meta=art.meta, arrays=arrays)
    with pytest.raises(glrmask.ArtifactError, match=key):
        glrmask.load(bad, glrmask.Vocab.default())


# ------------------------------------------------------------------------------ memory
def test_memory_is_reclaimed_when_states_die(json_mask, docs):
    """A long-running loop of fresh requests: RSS after the first 100 documents stays within 10 %
    of RSS after 1,000 (every request's native memory is freed with its last state)."""
    def rss_kb() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc")
    out = np.empty((1, json_mask.n_words), dtype=np.int32)
    marks = {}
    for n in range(1000):
        s = json_mask.start()
        for t in docs[n % len(docs)]:
            json_mask.fill_mask(s, out, 0)
            s.commit(t)
        if n + 1 in (100, 1000):
            marks[n + 1] = rss_kb()
    assert marks[1000] <= marks[100] * 1.10


def test_tiny_vocabularies_work_natively():
    mask = glrmask.compile('start: "a" "b"', tiny_vocab(["a", "b", "ab"]), format="lark")
    state = mask.start()
    assert allowed(mask.get_mask(state)) == {0, 2}
    assert state.commit(2) and state.is_accepting()


def test_expansion_tables_list_each_class_and_make_exactly_the_big_ones_dense():
    """The class → token tables the mask expansion reads (built at load): every token under its
    class in ascending order, a dense row for each class with at least ``dense_min`` tokens and
    for the union of all classes, costs that add up."""
    from glrmask_ext.runtime import expansion_tables

    rng = np.random.default_rng(0)
    n_classes, n_logits, dense_min = 7, 5000, 300
    sizes = [1200, 3, 310, 0, 50, 299, 900]
    class_of = np.full(n_logits - 10, -1, dtype=np.int32)
    ids = rng.permutation(len(class_of))
    at = 0
    for c, k in enumerate(sizes):
        class_of[ids[at:at + k]] = c
        at += k
    t = expansion_tables(class_of, n_classes, n_logits, dense_min)
    n_words = (n_logits + 31) // 32
    assert t["cls_ptr"].tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
    for c in range(n_classes):
        members = t["cls_ids"][t["cls_ptr"][c]:t["cls_ptr"][c + 1]]
        assert members.tolist() == np.flatnonzero(class_of == c).tolist()
    dense = [c for c in range(n_classes) if t["cls_dense"][c] >= 0]
    assert dense == [c for c, k in enumerate(sizes) if k >= dense_min] == [0, 2, 6]

    def row_ids(r):
        bits = np.unpackbits(t["dense_rows"][r].view(np.uint8), bitorder="little")
        return np.flatnonzero(bits).tolist()

    for c in dense:
        assert row_ids(t["cls_dense"][c]) == np.flatnonzero(class_of == c).tolist()
    assert row_ids(t["cls_dense"][n_classes]) == np.flatnonzero(class_of >= 0).tolist()
    cost = t["cls_cost"]
    assert [cost[c] for c in range(n_classes) if c not in dense] == [k for c, k in enumerate(sizes) if c not in dense]
    assert all(cost[c] == max(1, n_words // 8) for c in dense) and cost[n_classes] == cost[:n_classes].sum()
