"""A decode loop with a deterministic fake model: grammar mask + phrase guard + no-repeat-ngram.

Shows the contract of DESIGN §9 end to end: on a rewind the caller truncates its KV cache, the
grammar state rolls back the same number of tokens (so does the n-gram guard), the banned token is
masked at that position, and the client only ever receives text that is final.

The grammar is a real glrmask grammar (sentences of at least six words, then ".", then the end
token); the model is a fake whose logits are a pure function of its KV cache.
"""
from __future__ import annotations

import numpy as np

import glrmask

from _guard_support import allowed_ids, packed_row
from glrmask.guards import NoRepeatNGram, PhraseGuard
from glrmask.vocab import Vocab

WORDS = [b" the", b" cat", b" is", b" a", b" test", b"am", b"ent", b" testimony", b" proof", b".", None]
THE, CAT, IS, A, TEST, AM, ENT, TESTIMONY, PROOF, DOT, EOS = range(len(WORDS))
VOCAB = Vocab.from_token_bytes(WORDS, eos_token_ids=[EOS])

# The model's favourite next tokens given the last token (earlier = stronger).
PREFERENCES = {
    None: [THE],
    THE: [CAT],
    CAT: [IS, DOT],
    IS: [A],
    A: [TEST, TESTIMONY, PROOF],
    TEST: [AM],
    AM: [ENT],
    ENT: [DOT],
    TESTIMONY: [THE],
    PROOF: [DOT],
    DOT: [EOS],
}


class FakeModel:
    """Logits are a pure function of the KV cache contents (the history it has processed)."""

    def __init__(self) -> None:
        self.kv: list[int] = []  # one cache entry per processed token

    def logits(self) -> np.ndarray:
        last = self.kv[-1] if self.kv else None
        out = -np.arange(len(WORDS), dtype=np.float64) * 0.01
        for rank, tok in enumerate(PREFERENCES[last]):
            out[tok] = 10.0 - rank
        return out


GRAMMAR = r"""
start: w w w w w w+ "."
w: " the" | " cat" | " is" | " a" | " test" | "am" | "ent" | " testimony" | " proof"
"""
MASK = glrmask.compile(GRAMMAR, VOCAB)


class Grammar:
    """The real grammar state, plus the committed tokens so the test can compare with the KV cache."""

    def __init__(self) -> None:
        self.state = MASK.start()
        self.history: list[int] = []

    def get_mask(self) -> np.ndarray:
        return MASK.get_mask(self.state)

    def commit(self, tok: int) -> bool:
        if not self.state.commit(tok):
            return False
        self.history.append(tok)
        return True

    def rollback(self, n: int) -> None:
        self.state.rollback(n)
        del self.history[len(self.history) - n:]


def decode(max_steps: int = 100) -> dict:
    model, grammar = FakeModel(), Grammar()
    req = PhraseGuard(["testament"]).start(VOCAB)
    ngram = NoRepeatNGram(3).start([])
    streamed: list[str] = []
    log = {"rewinds": [], "relaxed": 0, "tokens": None}
    for _ in range(max_steps):
        assert model.kv == grammar.history  # KV cache and grammar always describe the same tokens
        row = grammar.get_mask()
        req.fill_banned(row, req.position)
        log["relaxed"] += ngram.fill_banned(row).relaxed
        logits = model.logits()
        allowed = allowed_ids(row)
        tok = max(allowed, key=lambda t: logits[t])
        if tok == EOS:
            streamed.append(req.finish().released_text)
            break
        assert grammar.commit(tok)
        ngram.push(tok)
        model.kv.append(tok)
        ev = req.push(tok)
        streamed.append(ev.released_text)
        if ev.rewind:
            log["rewinds"].append((ev.position, ev.banned_token, ev.dropped_tokens))
            del model.kv[len(model.kv) - ev.rewind:]
            grammar.rollback(ev.rewind)
            ngram.rollback(ev.rewind)
    log["tokens"] = list(grammar.history)
    log["streamed"] = streamed
    return log


def test_rewind_ban_kv_truncation_and_grammar_rollback_work_together():
    log = decode()
    # " the cat is a test|am|ent" completes the phrase: back to " test", which is banned there.
    assert log["rewinds"] == [(4, TEST, [TEST, AM, ENT])]
    # " testimony" follows; " the cat" then cannot continue with " is" (a repeated 3-gram).
    assert log["tokens"] == [THE, CAT, IS, A, TESTIMONY, THE, CAT, DOT]
    text = "".join(log["streamed"])
    assert text == " the cat is a testimony the cat."
    assert text == VOCAB.decode_bytes(log["tokens"]).decode()
    assert "testament" not in text and log["relaxed"] == 0


def test_the_stream_never_shows_text_that_is_later_dropped():
    shown = ""
    for chunk in decode()["streamed"]:
        shown += chunk
        assert " the cat is a testimony the cat.".startswith(shown)
