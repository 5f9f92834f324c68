"""Restricted roots (glrmask.compiler.restricted_roots): a lexer state inside a bounded run masks as
the run's start restricted to the tokens that survive it — and the masks stay exact.

The judges: the dynamic engine (a trie walk over the recognizer, no Parser DWA), the reference
trie walk over the Python recognizer, and ``commit`` (the native lexer and GLR stack); a static
mask must equal the first two byte for byte and hold exactly the tokens the third accepts, at
every step of walks that sit deep inside whitespace runs.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

import glrmask
from _engine_support import allowed, reachable_states, reference_words
from glrmask.vocab import Vocab

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"},
                                           "b": {"type": "object", "properties": {"c": {"type": "boolean"}}}}}

PIECES = ([b" " * k for k in range(1, 71)] + [b"\t", b"\t\t", b"  \t"]
          + [b"\n" + b" " * k for k in range(0, 70, 3)] + [b"\r", b"\r\n", b"\r\n  ", b"\n\n"]
          + [b"{", b"}", b"{\n", b"}\n", b",", b",\n", b", ", b":", b": ", b'"', b'"a"', b'"b"', b'"c"', b"a", b"b",
             b"c", b"1", b"12", b"-", b"true", b"false", b" {", b" }", b" 1", b' "', b'":', b'": '])
"""A vocabulary of whitespace runs of every length past the limits (64 after a line break, 4
without), line breaks with indentation, and the JSON pieces around them."""


@pytest.fixture(scope="module")
def ws_vocab() -> Vocab:
    return Vocab.from_token_bytes(PIECES + [None], eos_token_ids=[len(PIECES)])


@pytest.fixture(scope="module")
def masks(ws_vocab):
    return (glrmask.compile_json_schema(SCHEMA, ws_vocab, mode="static"),
            glrmask.compile_json_schema(SCHEMA, ws_vocab, mode="dynamic"))


def test_a_schema_with_flexible_whitespace_restricts_its_run_roots(masks):
    static, _ = masks
    assert static.stats["restricted roots"]["roots"] > 0


def test_static_masks_equal_the_reference_masks_inside_whitespace_runs(masks):
    static, _ = masks
    states = reachable_states(static, max_depth=5, max_sets=300)
    assert len(states) > 100
    for state, data in states:
        assert static.get_mask(state).tobytes() == reference_words(static, data).tobytes(), data


def test_a_static_mask_holds_exactly_the_tokens_commit_accepts_at_every_indent(masks, ws_vocab):
    static, dynamic = masks
    steps = 0
    for indent in range(0, 65, 4):
        text = "{" + "\n" + " " * indent
        for prefix in (text, text + '"b": {\n' + " " * min(indent + 2, 64)):
            s, d = static.start(), dynamic.start()
            toks = _encode(ws_vocab, prefix)
            for tok in toks:
                assert s.commit(tok) and d.commit(tok)
            words = static.get_mask(s)
            assert words.tobytes() == dynamic.get_mask(d).tobytes(), (indent, prefix)
            in_mask = allowed(words)
            for tok in range(ws_vocab.size):
                assert s.fork().commit(tok) == (tok in in_mask), (indent, ws_vocab.token_bytes(tok))
            steps += 1
    assert steps > 20


def test_random_walks_agree_with_the_dynamic_engine(masks):
    static, dynamic = masks
    rng = random.Random(11)
    n = 0
    for _ in range(40):
        s, d = static.start(), dynamic.start()
        for _step in range(40):
            words = static.get_mask(s)
            assert words.tobytes() == dynamic.get_mask(d).tobytes()
            ids = sorted(allowed(words))
            if not ids or s.is_terminated():
                break
            tok = rng.choice(ids)
            assert s.commit(tok) and d.commit(tok)
            n += 1
    assert n > 400


def test_documents_of_every_indent_replay_through_the_static_mask(masks, ws_vocab):
    static, _ = masks
    for indent in (1, 2, 4, 8, 31):
        text = json.dumps({"a": 1, "b": {"c": True}}, indent=indent)
        s = static.start()
        for tok in _encode(ws_vocab, text):
            assert s.commit(tok), (indent, text)
        assert s.is_accepting()


def test_a_run_past_its_limit_is_refused(masks, ws_vocab):
    """65 spaces of indentation: no token may bring the run past 64."""
    static, _ = masks
    s = static.start()
    for tok in _encode(ws_vocab, "{\n" + " " * 60):
        assert s.commit(tok)
    words = static.get_mask(s)
    for k in range(1, 71):
        tok = PIECES.index(b" " * k)
        assert (tok in allowed(words)) == (k <= 4), k


def _encode(vocab: Vocab, text: str) -> list[int]:
    """Greedy longest-piece tokenization over PIECES (every text here is made of them)."""
    data = text.encode()
    out, i = [], 0
    by_bytes = {p: j for j, p in enumerate(PIECES)}
    while i < len(data):
        for n in range(min(len(data) - i, 80), 0, -1):
            j = by_bytes.get(data[i:i + n])
            if j is not None:
                out.append(j)
                i += n
                break
        else:
            raise AssertionError(f"no piece for {data[i:i + 8]!r}")
    return out


def test_the_restriction_row_of_a_saved_mask_is_validated(masks, tmp_path, ws_vocab):
    from glrmask.artifact import read_artifact, write_artifact
    from glrmask.mask_artifact import ARTIFACT_KIND

    static, _ = masks
    path = tmp_path / "ws.glrm"
    static.save(path)
    art = read_artifact(path, kind=ARTIFACT_KIND, mmap=False)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    name = next(k for k in arrays if k.endswith("root_restrict"))
    assert (arrays[name] >= 0).any()
    arrays[name][arrays[name] >= 0] = 10**6
    bad = tmp_path / "bad.glrm"
    write_artifact(bad, kind=ARTIFACT_KIND, meta=art.meta, arrays=arrays)
    with pytest.raises(glrmask.ArtifactError, match="root_restrict"):
        glrmask.load(bad, ws_vocab)
    loaded = glrmask.load(path, ws_vocab)
    s, t = loaded.start(), static.start()
    for tok in _encode(ws_vocab, "{\n" + " " * 40):
        assert s.commit(tok) and t.commit(tok)
    assert loaded.get_mask(s).tobytes() == static.get_mask(t).tobytes()
