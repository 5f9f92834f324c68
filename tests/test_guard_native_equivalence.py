"""The native guard states equal the previous pure-Python ones (tests/_guard_reference.py).

Each test drives a native state and a reference state with the same calls — pushes, fills of random
mask rows at the current or another position, rollbacks, finishes, including calls that fail — and
requires the same return values, the same rows afterwards, the same errors (type and message) and
the same observable state after every call. Streams come from byte-piece vocabularies that split
text anywhere (invalid and partial UTF-8 included), from GPT-2 and Mistral (byte fallback), and
from any code point of Unicode.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _guard_reference import ReferenceNGramState, ReferencePhraseRequest
from _guard_support import load_vocab, packed_row
from glrmask.guards import NoRepeatNGram, PhraseGuard
from glrmask.vocab import Vocab

EVENT_FIELDS = (
    "released_tokens", "released_text", "rewind", "position", "released_logprobs",
    "dropped_tokens", "banned_token", "matched_phrase",
)


def outcome(call):
    """``("ok", value)`` or ``("error", type, message)`` of a call; events become field tuples."""
    try:
        value = call()
    except Exception as exc:  # noqa: BLE001 — the error itself is what is compared
        return ("error", type(exc), str(exc))
    if hasattr(value, "released_tokens"):
        value = tuple(getattr(value, f) for f in EVENT_FIELDS)
    elif isinstance(value, tuple):
        value = tuple(value)
    return ("ok", value)


def phrase_snapshot(req) -> tuple:
    pos = req.position
    return (pos, req.n_released, req.pending_tokens, req.rewinds, req.closed,
            req.banned_tokens(pos), req.banned_tokens(pos - 1))


def random_row(rng: random.Random, n_logits: int, banned: list[int]) -> np.ndarray:
    """A mask row that allows a random subset, often including the banned tokens, sometimes only them."""
    kind = rng.random()
    if kind < 0.2 and banned:
        allowed = rng.sample(banned, rng.randint(1, len(banned)))
    elif kind < 0.3:
        allowed = []
    else:
        allowed = [t for t in range(n_logits) if rng.random() < 0.5] + banned
    return packed_row(n_logits, sorted(set(allowed)))


def drive_phrases(guard: PhraseGuard, vocab, source: list[int], rng: random.Random, n_logits: int) -> None:
    """Push ``source`` through a native and a reference request with fills in between; compare all."""
    native = guard.start(vocab)
    ref = ReferencePhraseRequest(guard._compiled, guard.max_rewinds, guard.max_pending_tokens, vocab)
    for tok in source:
        if rng.random() < 0.3:
            bans = native.banned_tokens(native.position)
            row = random_row(rng, n_logits, bans)
            position = native.position if rng.random() < 0.8 else native.position + rng.choice([-1, 1])
            rows = [row.copy(), row.copy()]
            got = [outcome(lambda r=r, req=req: req.fill_banned(r, position)) for r, req in zip(rows, (native, ref))]
            assert got[0] == got[1]
            assert rows[0].tobytes() == rows[1].tobytes()
        logprob = ("lp", tok) if rng.random() < 0.5 else None
        got = [outcome(lambda req=req: req.push(tok, logprob)) for req in (native, ref)]
        assert got[0] == got[1], (tok, got)
        assert phrase_snapshot(native) == phrase_snapshot(ref)
    included = rng.random() < 0.5
    stop = rng.choice(source) if source and included else None
    got = [outcome(lambda req=req: req.finish(included, stop)) for req in (native, ref)]
    assert got[0] == got[1]
    assert native.closed == ref.closed
    assert outcome(lambda: native.push(0)) == outcome(lambda: ref.push(0))


# Bytes that exercise the decoder and the folding: ASCII in both cases, "ß" and "ẞ" (fold to "ss"),
# partial and invalid UTF-8 (truncated sequences, surrogates, overlongs, 0xFF), a 4-byte character.
PIECES = [
    b"a", b"s", b"S", b"b", b" ", b"ab", b"SS", b"\xc3\x9f", b"\xc3", b"\x9f", b"\xe1\xba\x9e",
    b"\xe1", b"\xba", b"\x9e", b"\xe1\xba", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf0\x9f",
    b"\x98\x80", b"\xf0\x9f\x98\x80", b"\xe6\x97\xa5", b"\xe6", b"\x97\xa5", b"\xce\xa3", b"\xcf\x82",
    b"I\xcc\x87", b"\xc4\xb0", b"\xef\xac\x80", b"sta\xc3", b"\xa9e", b"",
]
PIECE_VOCAB = Vocab.from_token_bytes(PIECES + [None])
PHRASE_ALPHABET = "abs SßẞΣσς日é😀İﬀ\ufffd"
phrase_sets = st.lists(st.text(alphabet=PHRASE_ALPHABET, min_size=1, max_size=4), min_size=1, max_size=6)
limits = st.tuples(st.sampled_from([0, 1, 3, 10_000]), st.sampled_from([1, 3, 1024]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phrase_sets, st.booleans(), limits, st.lists(st.integers(0, len(PIECES)), max_size=60), st.integers(0, 2**32))
def test_byte_piece_streams_match_the_reference(phrases, case_sensitive, lim, source, seed):
    guard = PhraseGuard(phrases, case_sensitive=case_sensitive, max_rewinds=lim[0], max_pending_tokens=lim[1])
    drive_phrases(guard, PIECE_VOCAB, source, random.Random(seed), PIECE_VOCAB.n_logits)


class BytesOnly:
    """A vocabulary that is not a ``glrmask.Vocab``: the guard must go through ``token_bytes``."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab

    def token_bytes(self, token_id: int) -> bytes:
        return self._vocab.token_bytes(token_id)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phrase_sets, st.booleans(), st.lists(st.integers(0, len(PIECES)), max_size=60), st.integers(0, 2**32))
def test_a_vocabulary_known_only_by_token_bytes_matches_the_reference(phrases, case_sensitive, source, seed):
    guard = PhraseGuard(phrases, case_sensitive=case_sensitive, max_rewinds=10_000)
    drive_phrases(guard, BytesOnly(PIECE_VOCAB), source, random.Random(seed), PIECE_VOCAB.n_logits)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=4), st.data(), st.integers(0, 2**32))
def test_any_unicode_text_folds_like_the_reference(phrases, data, seed):
    """Phrases and text over all of Unicode: the native folding table equals ``str.casefold``."""
    rng = random.Random(seed)
    text = "".join(data.draw(st.sampled_from([p, p.upper(), p.lower(), p.title()])) for p in phrases)
    text += data.draw(st.text(max_size=6))
    raw = text.encode("utf-8", "surrogatepass")
    pieces, i = [], 0
    while i < len(raw):
        k = rng.randint(1, 4)
        pieces.append(raw[i:i + k])
        i += k
    table = sorted(set(pieces))
    vocab = Vocab.from_token_bytes(table)
    try:
        guard = PhraseGuard(phrases, max_rewinds=10_000)
    except Exception:  # lone surrogates are not valid phrases: nothing to compare
        return
    drive_phrases(guard, vocab, [table.index(p) for p in pieces], rng, vocab.n_logits)


@pytest.mark.parametrize("name", ["gpt2", "mistral-7b-v0.1"])
def test_real_tokenizer_streams_match_the_reference(name):
    vocab = load_vocab(name)
    rng = random.Random(7)
    words = ["test", "testament", "amen", " the", "Straße", "STRASSE", "日本", "café", "ẞ", "𝔊"]
    for trial in range(40):
        phrases = rng.sample(words, rng.randint(1, 4))
        text = "".join(rng.choice(words + [" ", "x", "ΣΑΣ"]) for _ in range(30))
        source = vocab.encode(text)
        # random ids too: byte-fallback pieces, special tokens, split characters
        source += [rng.randrange(vocab.n_logits) for _ in range(20)]
        rng.shuffle(source) if trial % 3 == 0 else None
        guard = PhraseGuard(phrases, case_sensitive=trial % 4 == 0, max_rewinds=10_000)
        drive_phrases(guard, vocab, source, rng, vocab.n_logits)


def test_2048_phrases_on_gpt2_match_the_reference():
    vocab = load_vocab("gpt2")
    rng = random.Random(11)
    words = [vocab.token_bytes(i).decode() for i in range(vocab.size)
             if vocab.token_bytes(i)[:1] == b" " and vocab.token_bytes(i)[1:].isalpha()
             and len(vocab.token_bytes(i)) >= 4]
    pool = rng.sample(words, 600)
    phrases = sorted({"".join(rng.sample(pool, rng.randint(2, 3))).strip() for _ in range(2300)})[:2048]
    guard = PhraseGuard(phrases, max_rewinds=100_000)
    parts = []
    while len(parts) < 600:
        p = rng.choice(phrases)
        parts.append(" " + p[: rng.randint(1, len(p))] if rng.random() < 0.4 else rng.choice(pool))
    source = vocab.encode("".join(parts))[:1200]
    drive_phrases(guard, vocab, source, rng, vocab.n_logits)


def test_out_of_range_token_ids_raise_the_vocabulary_error_like_the_reference():
    guard = PhraseGuard(["ab"])
    for bad in (-1, PIECE_VOCAB.n_logits, 2**70, "3"):
        native = guard.start(PIECE_VOCAB)
        ref = ReferencePhraseRequest(guard._compiled, guard.max_rewinds, guard.max_pending_tokens, PIECE_VOCAB)
        assert outcome(lambda: native.push(bad)) == outcome(lambda: ref.push(bad))
        assert phrase_snapshot(native) == phrase_snapshot(ref)


# ------------------------------------------------------------------------------ no-repeat-ngram

def ngram_snapshot(state) -> tuple:
    return (state.banned(), state.n_generated, state.relaxed_steps)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 5),
    st.one_of(st.none(), st.integers(1, 12)),
    st.booleans(),
    st.lists(st.integers(0, 7), max_size=3),
    st.lists(st.integers(0, 7), max_size=10),
    st.integers(0, 2**32),
)
def test_ngram_operations_match_the_reference(n, window, include_prompt, whitelist, prompt, seed):
    rng = random.Random(seed)
    config = NoRepeatNGram(n, include_prompt=include_prompt, window=window, whitelist=whitelist)
    native, ref = config.start(prompt), ReferenceNGramState(config, prompt)
    assert ngram_snapshot(native) == ngram_snapshot(ref)
    n_logits = rng.choice([8, 40, 70])
    for _ in range(80):
        op = rng.random()
        if op < 0.55:
            tok = rng.choice([rng.randrange(8), rng.randrange(8), rng.randrange(100), -3])
            got = [outcome(lambda s=s: s.push(tok)) for s in (native, ref)]
        elif op < 0.7:
            k = rng.randint(-1, native.n_generated + 1)
            got = [outcome(lambda s=s: s.rollback(k)) for s in (native, ref)]
        else:
            row = random_row(rng, n_logits, [t for t in native.banned() if 0 <= t < n_logits])
            rows = [row.copy(), row.copy()]
            got = [outcome(lambda s=s, r=r: s.fill_banned(r)) for s, r in zip((native, ref), rows)]
            assert rows[0].tobytes() == rows[1].tobytes()
        assert got[0] == got[1]
        assert ngram_snapshot(native) == ngram_snapshot(ref)


def test_ngram_long_histories_match_the_reference():
    """Thousands of tokens from a small pool: hash tables grow and keys repeat many times."""
    rng = random.Random(3)
    for n, window in ((2, None), (3, None), (3, 500), (4, 64), (1, 100)):
        config = NoRepeatNGram(n, window=window)
        prompt = [rng.randrange(300) for _ in range(2000)]
        native, ref = config.start(prompt), ReferenceNGramState(config, prompt)
        row = packed_row(300)
        for step in range(3000):
            native.push(tok := rng.randrange(300))
            ref.push(tok)
            if step % 7 == 0:
                k = rng.randint(0, min(40, native.n_generated))
                native.rollback(k)
                ref.rollback(k)
            a, b = row.copy(), row.copy()
            assert tuple(native.fill_banned(a)) == tuple(ref.fill_banned(b))
            assert a.tobytes() == b.tobytes()
        assert ngram_snapshot(native) == ngram_snapshot(ref)


def test_fill_banned_writes_through_strided_and_torch_rows_like_the_reference():
    torch = pytest.importorskip("torch")
    history = [1, 2, 1, 40, 1]  # bans 2 and 40
    rows = {}
    for name, make in (("native", lambda: NoRepeatNGram(2).start(history)),
                       ("reference", lambda: ReferenceNGramState(NoRepeatNGram(2), history))):
        grid = np.zeros((2, 3), dtype=np.int32)
        grid[:, 1] = packed_row(64)
        strided = grid[:, 1]  # a non-contiguous 2-word row
        tensor = torch.from_numpy(packed_row(64))
        rows[name] = (tuple(make().fill_banned(strided)), grid.tobytes(),
                      tuple(make().fill_banned(tensor)), tensor.numpy().tobytes())
    assert rows["native"] == rows["reference"]
    assert rows["native"][0] == (2, False)


@pytest.mark.parametrize(
    "row",
    [np.zeros(2, dtype=np.int64), np.zeros((2, 2), dtype=np.int32), [0, 0], np.zeros(2, dtype=">i4")],
    ids=["int64", "2-D", "list", "big-endian"],
)
def test_bad_rows_are_refused_like_the_reference(row):
    native, ref = NoRepeatNGram(2).start([1, 2, 1]), ReferenceNGramState(NoRepeatNGram(2), [1, 2, 1])
    assert outcome(lambda: native.fill_banned(row)) == outcome(lambda: ref.fill_banned(row))
    guard = PhraseGuard(["ab"])
    vocab = Vocab.from_token_bytes([b"x", b"ab"])
    req = guard.start(vocab)
    req.push(1)
    ref_req = ReferencePhraseRequest(guard._compiled, guard.max_rewinds, guard.max_pending_tokens, vocab)
    ref_req.push(1)
    assert outcome(lambda: req.fill_banned(row, 0)) == outcome(lambda: ref_req.fill_banned(row, 0))
    read_only = packed_row(64)
    read_only.flags.writeable = False
    assert outcome(lambda: req.fill_banned(read_only, 0)) == outcome(lambda: ref_req.fill_banned(read_only, 0))


# ------------------------------------------------------------------------------ large work (scanned and cleared without the GIL)

def test_tokens_longer_than_512_bytes_match_the_reference():
    pieces = [b"x" * 700, b"ab" * 300 + b"c", b"\xc3" + "é".encode() * 400, b"Ss" * 350, b"\xe6"]
    vocab = Vocab.from_token_bytes(pieces)
    guard = PhraseGuard(["bc", "éé" * 100, "sss" * 50, "x\u00e9"], max_rewinds=10_000)
    rng = random.Random(5)
    drive_phrases(guard, vocab, [rng.randrange(len(pieces)) for _ in range(200)], rng, vocab.n_logits)


def test_hundreds_of_bans_at_one_position_match_the_reference():
    pieces = [b"ab%d" % k for k in range(400)] + [b"a"]
    vocab = Vocab.from_token_bytes(pieces)
    guard = PhraseGuard(["ab"], max_rewinds=10_000)
    native = guard.start(vocab)
    ref = ReferencePhraseRequest(guard._compiled, guard.max_rewinds, guard.max_pending_tokens, vocab)
    for tok in range(400):  # each one rewinds to position 0 and adds a ban there
        assert outcome(lambda: native.push(tok)) == outcome(lambda: ref.push(tok))
    assert native.banned_tokens(0) == ref.banned_tokens(0) == list(range(400))
    for allowed in (None, list(range(400)), [3, 400], [400]):
        rows = [packed_row(vocab.n_logits, allowed) for _ in range(2)]
        assert outcome(lambda: native.fill_banned(rows[0], 0)) == outcome(lambda: ref.fill_banned(rows[1], 0))
        assert rows[0].tobytes() == rows[1].tobytes()


def test_a_key_with_hundreds_of_followers_matches_the_reference():
    history = [t for k in range(1, 400) for t in (0, k)] + [0]  # "0" was followed by 1..399
    config = NoRepeatNGram(2, whitelist=[7])
    native, ref = config.start(history), ReferenceNGramState(config, history)
    assert native.banned() == ref.banned()
    for allowed in (None, list(range(1, 400)), [7, 500], [5, 9]):
        rows = [packed_row(512, allowed) for _ in range(2)]
        assert tuple(native.fill_banned(rows[0])) == tuple(ref.fill_banned(rows[1]))
        assert rows[0].tobytes() == rows[1].tobytes()
    assert native.relaxed_steps == ref.relaxed_steps == 1


def test_requests_on_threads_sharing_one_guard_equal_single_threaded_runs():
    """The compiled automaton is shared read-only; each request's journal is its own."""
    pieces = [b"x" * 600 + b"a", b"b" * 530, b"ab", b"c", b"\xc3", b"\x9f" + b"s" * 520]
    vocab = Vocab.from_token_bytes(pieces)
    guard = PhraseGuard(["ab", "ßs", "xa" + "b" * 20], max_rewinds=100_000)
    streams = [[random.Random(seed).randrange(len(pieces)) for _ in range(400)] for seed in range(8)]

    def run(source):
        req, events = guard.start(vocab), []
        for tok in source:
            if tok in req.banned_tokens(req.position):
                continue
            ev = req.push(tok)
            events.append((ev.released_tokens, ev.released_text, ev.rewind, ev.position))
        return events

    alone = [run(s) for s in streams]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(run, streams)) == alone
