"""Phrase-ban guard: streaming output that never shows a banned phrase, with rewind (DESIGN §9.1).

Why a rewind and not a mask: a phrase is text, not a token. Banning the tokens of one tokenization
misses every other token sequence with the same text, and banning a phrase's first token everywhere
bans far too much ("test" in "testimony"). So the guard watches the output bytes, holds back any
suffix that could still grow into a phrase, and when a phrase completes tells the caller to drop
the tokens back to where the match started and to sample again there without the token that
started it. Nothing ever released to the client has to be taken back.

Matching runs on the UTF-8 of the decoded output (a token's bytes, see ``vocab.token_bytes``),
case-folded with ``str.casefold`` unless the guard is case-sensitive. Folding can change lengths
("ß" → "ss"), so the journal maps offsets in the folded stream back to tokens. A character whose
bytes are split over several tokens (byte-fallback pieces, partial UTF-8) belongs to all of them:
those tokens are held until the character is complete, released together, and a match that starts
in that character rewinds to its first byte's token.

A rewind restores the journal's saved automaton state, so a partial match that crosses into text
already released is still tracked; if it completes, the guard rewinds to the first token it still
holds (released text is never taken back) and bans that token there.

The policy is a bounded backtracking policy, not exact sampling conditioned on the absence of the
phrases: banning the token that started a failed continuation also bans good continuations that
start with it, at that position.
"""
from __future__ import annotations

import codecs
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ._bits import as_word_row, clear_bits, set_bits
from .errors import (
    BannedTokenPushed,
    NoAllowedToken,
    PendingLimitExceeded,
    PhraseAtStop,
    RequestClosed,
    RewindLimitExceeded,
)
from .phrase_set import (
    DEFAULT_MAX_PHRASE_CHARS,
    DEFAULT_MAX_PHRASES,
    DEFAULT_MAX_TOTAL_BYTES,
    CompiledPhrases,
    PhraseLimits,
    compile_phrases,
    fold,
)

DEFAULT_MAX_REWINDS = 128
DEFAULT_MAX_PENDING_TOKENS = 1024


class TokenBytes(Protocol):
    """What the guard needs from a vocabulary (``glrmask.Vocab`` provides it)."""

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` adds to the output (``b""`` for special tokens)."""
        ...


@dataclass(slots=True)
class PhraseEvent:
    """What one :meth:`PhraseRequest.push` (or ``finish``) means for the caller.

    Released tokens may be streamed to the client; they are final. With ``rewind > 0`` the caller
    drops its last ``rewind`` tokens (KV cache, grammar state, other guards) and samples again at
    ``position`` with ``banned_tokens(position)`` masked out.
    """

    released_tokens: list[int]
    """Tokens that became final with this call, oldest first."""
    released_text: str
    """Their text (exactly the UTF-8 decoding of their bytes, in order)."""
    rewind: int
    """Number of most recent tokens to drop; 0 when there is no match."""
    position: int
    """Index (in the generated sequence) of the next token to sample; after a rewind, where the
    ban applies."""
    released_logprobs: list[Any]
    """The logprob rows pushed with ``released_tokens`` (None where none was given)."""
    dropped_tokens: list[int]
    """The tokens a rewind drops (their logprob rows are dropped with them)."""
    banned_token: int | None
    """The token banned at ``position`` by this rewind."""
    matched_phrase: str | None
    """The phrase whose completion caused the rewind."""


def _empty_event(position: int) -> PhraseEvent:
    return PhraseEvent([], "", 0, position, [], [], None, None)


class PhraseGuard:
    """A compiled list of banned phrases; immutable, shared by all requests (and threads).

    ``guard.start(vocab)`` opens one :class:`PhraseRequest` per generation.
    """

    def __init__(
        self,
        phrases: Iterable[str],
        case_sensitive: bool = False,
        max_rewinds: int = DEFAULT_MAX_REWINDS,
        *,
        max_phrases: int = DEFAULT_MAX_PHRASES,
        max_phrase_chars: int = DEFAULT_MAX_PHRASE_CHARS,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        max_pending_tokens: int = DEFAULT_MAX_PENDING_TOKENS,
    ) -> None:
        if max_rewinds < 0:
            raise ValueError("max_rewinds must be >= 0")
        if max_pending_tokens < 1:
            raise ValueError("max_pending_tokens must be >= 1")
        limits = PhraseLimits(max_phrases, max_phrase_chars, max_total_bytes)
        self._compiled: CompiledPhrases = compile_phrases(phrases, bool(case_sensitive), limits)
        self.max_rewinds = max_rewinds
        self.max_pending_tokens = max_pending_tokens

    @property
    def phrases(self) -> tuple[str, ...]:
        """The distinct banned phrases (sorted)."""
        return self._compiled.phrases

    @property
    def case_sensitive(self) -> bool:
        return self._compiled.case_sensitive

    def start(self, vocab: TokenBytes) -> PhraseRequest:
        """Open the journal of one request; bans and rewinds stay inside it."""
        if not callable(getattr(vocab, "token_bytes", None)):
            raise TypeError("vocab must provide token_bytes(token_id) -> bytes")
        return PhraseRequest(self, vocab)


class PhraseRequest:
    """Per-request journal: held tokens, automaton states, and the bans of the current position.

    Journal record of a held token, by index ``j`` (absolute position ``n_released + j``):
    ``_fends[j]`` is the end of its text in the folded stream; ``_recs[j]`` is
    ``(token, logprob, text, automaton state, undecoded bytes, their first token,
    end of its first character if that began in an earlier token else -1, that earlier token)``,
    all as they are after the token, so a rewind restores any earlier point.
    """

    __slots__ = (
        "_guard", "_ac", "_fold_cs", "_token_bytes", "_decoder",
        "_n_released", "_fends", "_recs",
        "_state", "_fpos", "_carry", "_carry_origin", "_base_state", "_base_fpos",
        "_ban_pos", "_ban_set", "_rewinds", "_closed",
    )

    def __init__(self, guard: PhraseGuard, vocab: TokenBytes) -> None:
        self._guard = guard
        self._ac = guard._compiled.automaton
        self._fold_cs = guard._compiled.case_sensitive
        self._token_bytes = vocab.token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._n_released = 0
        self._fends: list[int] = []
        self._recs: list[tuple] = []
        self._state = 0
        self._fpos = 0
        self._carry = b""
        self._carry_origin = -1
        self._base_state = 0
        self._base_fpos = 0
        self._ban_pos = -1
        self._ban_set: set[int] = set()
        self._rewinds = 0
        self._closed = False

    # ----------------------------------------------------------------------------- inspection
    @property
    def position(self) -> int:
        """Number of tokens in the retained history = index of the next token to sample."""
        return self._n_released + len(self._recs)

    @property
    def n_released(self) -> int:
        """Number of tokens released so far."""
        return self._n_released

    @property
    def pending_tokens(self) -> list[int]:
        """Tokens held back (not yet released), oldest first."""
        return [r[0] for r in self._recs]

    @property
    def rewinds(self) -> int:
        """Rewinds performed so far in this request."""
        return self._rewinds

    @property
    def closed(self) -> bool:
        return self._closed

    def banned_tokens(self, position: int) -> list[int]:
        """Tokens banned at ``position`` for this request (sorted; empty at any other position)."""
        if position != self._ban_pos:
            return []
        return sorted(self._ban_set)

    def fill_banned(self, out_words: Any, position: int) -> int:
        """Clear the banned tokens' bits in one packed int32 mask row; return how many were set.

        Raises :class:`NoAllowedToken` (leaving the row unchanged) when the bans would clear the last
        allowed token: the grammar and the bans together leave nothing to sample there.
        """
        if position != self._ban_pos or not self._ban_set:
            return 0
        row = as_word_row(out_words)
        cleared = clear_bits(row, self._ban_set)
        if cleared and not row.any():
            set_bits(row, cleared)
            raise NoAllowedToken(
                f"at position {position} every allowed token is banned by earlier rewinds "
                f"(banned: {sorted(self._ban_set)[:10]}); the phrases cannot be avoided here"
            )
        return len(cleared)

    # ----------------------------------------------------------------------------- streaming
    def push(self, token_id: int, logprob: Any = None) -> PhraseEvent:
        """Append one sampled token; release what is safe, or report a rewind on a complete match."""
        self._check_open()
        match = self._append(token_id, logprob)
        if match is not None:
            return self._rewind(*match)
        event = self._release(final=False)
        if len(self._recs) > self._guard.max_pending_tokens:
            self._closed = True
            raise PendingLimitExceeded(
                f"{len(self._recs)} tokens are held back; the limit is {self._guard.max_pending_tokens}"
            )
        return event

    def finish(self, stop_token_included: bool = False, stop_token: int | None = None) -> PhraseEvent:
        """End the request and release everything still held.

        A held partial phrase is released (the full phrase never appeared). The stop token is not
        pushed: pass it here. Omitted (the default) it adds no text; included
        (``stop_token_included=True``) its text is checked and released, and if it completes a
        phrase the request fails with :class:`PhraseAtStop` instead of overriding the stop.
        Undecodable trailing bytes are released as U+FFFD, as a decoder would show them.
        """
        self._check_open()
        self._closed = True
        if stop_token_included:
            if stop_token is None:
                raise ValueError("stop_token_included=True needs the stop_token id")
            match = self._append(stop_token, None)
            if match is not None:
                raise PhraseAtStop(
                    f"the included stop token {stop_token} completes the banned phrase {match[1]!r}"
                )
        tail = self._decoder.decode(b"", True)
        if tail:
            folded = fold(tail, self._fold_cs)
            _, end, pid = self._ac.scan(self._state, folded)
            if end >= 0:
                raise PhraseAtStop(
                    f"the undecodable end of the output completes the banned phrase "
                    f"{self._guard._compiled.phrases[pid]!r}"
                )
        return self._release(final=True, tail=tail)

    # ----------------------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._closed:
            raise RequestClosed("this phrase-guard request is finished; start a new one")

    def _append(self, token_id: int, logprob: Any) -> tuple[int, str] | None:
        """Journal one token and scan its text; return (folded match start, phrase) on a match."""
        pos = self._n_released + len(self._recs)
        if pos == self._ban_pos and token_id in self._ban_set:
            raise BannedTokenPushed(
                f"token {token_id} is banned at position {pos} for this request (mask it with fill_banned)"
            )
        raw = self._token_bytes(token_id)
        carry = self._carry
        if carry:
            text = self._decoder.decode(raw)
            buf = self._decoder.getstate()[0]
        else:
            try:
                text = raw.decode("utf-8")
                buf = b""
            except UnicodeDecodeError:
                text = self._decoder.decode(raw)
                buf = self._decoder.getstate()[0]
        fstart = self._fpos
        folded = text.encode() if self._fold_cs else text.casefold().encode()
        carry_fend = -1
        first_origin = pos
        if carry and text:
            # The first character began in an earlier, still held token.
            first_origin = self._carry_origin
            carry_fend = fstart + len(fold(text[0], self._fold_cs))
        if buf:
            origin = self._carry_origin if (carry and not text) else pos
        else:
            origin = -1
        state, end, pid = self._ac.scan(self._state, folded) if folded else (self._state, -1, -1)
        self._fpos = fstart + len(folded)
        self._fends.append(self._fpos)
        self._recs.append((token_id, logprob, text, state, buf, origin, carry_fend, first_origin))
        self._carry = buf
        self._carry_origin = origin
        self._state = state
        if end >= 0:
            start = fstart + end + 1 - self._ac.phrase_length(pid)
            return start, self._guard._compiled.phrases[pid]
        return None

    def _token_at(self, f: int) -> int:
        """Absolute index of the held token whose text holds folded offset ``f``.

        An offset in text already released maps to the first held token. That happens only after
        a rewind restored an automaton state whose partial match began in released text: the
        released part cannot be taken back, so the guard holds (and, on a match, rewinds to) the
        first token it still owns.
        """
        if f < self._base_fpos:
            return self._n_released
        j = bisect_right(self._fends, f)
        rec = self._recs[j]
        if f < rec[6]:
            return rec[7]
        return self._n_released + j

    def _rewind(self, fstart: int, phrase: str) -> PhraseEvent:
        t = self._token_at(fstart)
        j = t - self._n_released
        total = self._n_released + len(self._recs)
        dropped = [r[0] for r in self._recs[j:]]
        banned = dropped[0]
        del self._recs[j:]
        del self._fends[j:]
        if j:
            prev = self._recs[j - 1]
            self._state, self._carry, self._carry_origin = prev[3], prev[4], prev[5]
            self._fpos = self._fends[j - 1]
        else:
            self._state, self._carry, self._carry_origin = self._base_state, b"", -1
            self._fpos = self._base_fpos
        self._decoder.setstate((self._carry, 0))
        self._rewinds += 1
        if self._rewinds > self._guard.max_rewinds:
            self._closed = True
            raise RewindLimitExceeded(
                f"more than {self._guard.max_rewinds} rewinds in one request "
                f"(last one for the phrase {phrase!r} at position {t})"
            )
        if t == self._ban_pos:
            self._ban_set.add(banned)
        else:
            self._ban_pos = t
            self._ban_set = {banned}
        return PhraseEvent([], "", total - t, t, [], dropped, banned, phrase)

    def _release(self, final: bool, tail: str = "") -> PhraseEvent:
        recs = self._recs
        depth = 0 if final else self._ac.depth(self._state)
        if depth == 0 and not self._carry:
            j = len(recs)  # nothing can continue into a phrase: release all
        elif final:
            j = len(recs)
        else:
            boundary = self._token_at(self._fpos - depth) if depth else self._n_released + len(recs)
            j = boundary - self._n_released
            # Release only where no character is split: a token whose bytes are still undecoded
            # goes out together with the token that completes its character.
            while j > 0 and recs[j - 1][4]:
                j -= 1
        if j == 0:
            if tail:
                raise AssertionError("undecoded bytes without a held token")
            return _empty_event(self._n_released + len(recs))
        out = recs[:j]
        last = out[-1]
        self._base_state = last[3]
        self._base_fpos = self._fends[j - 1]
        del recs[:j]
        del self._fends[:j]
        self._n_released += j
        return PhraseEvent(
            [r[0] for r in out],
            "".join([r[2] for r in out]) + tail,
            0,
            self._n_released + len(recs),
            [r[1] for r in out],
            [],
            None,
            None,
        )
