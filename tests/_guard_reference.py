"""The guards' previous pure-Python request states, kept as the reference the native ones must equal.

``ReferencePhraseRequest`` is the phrase-ban journal and ``ReferenceNGramState`` the no-repeat-ngram
index exactly as they were before ``glrmask_ext.guard_phrase`` / ``guard_ngram`` replaced them
(Python incremental UTF-8 decoder, ``str.casefold`` per token, ``PhraseAutomaton.scan``, dict index,
per-id bit loops). Tests drive a native state and a reference state with the same calls and require
identical events, bans, rows and errors.
"""
from __future__ import annotations

import codecs
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glrmask.guards import (
    BannedTokenPushed,
    NoAllowedToken,
    NoRepeatNGram,
    NoRepeatNGramError,
    PendingLimitExceeded,
    PhraseAtStop,
    RequestClosed,
    RewindLimitExceeded,
)
from glrmask.guards.phrase_set import CompiledPhrases, fold


@dataclass
class ReferenceEvent:
    """The fields of a ``PhraseEvent``, as the reference journal reports them."""

    released_tokens: list[int]
    released_text: str
    rewind: int
    position: int
    released_logprobs: list[Any]
    dropped_tokens: list[int]
    banned_token: int | None
    matched_phrase: str | None


def _empty_event(position: int) -> ReferenceEvent:
    return ReferenceEvent([], "", 0, position, [], [], None, None)


_ALL_BITS = 0xFFFFFFFF


def as_word_row(out_words: Any) -> np.ndarray:
    """Return a writable uint32 view of ``out_words`` (one mask row) without copying."""
    arr = out_words
    if not isinstance(arr, np.ndarray):
        to_numpy = getattr(arr, "numpy", None)
        if to_numpy is None:
            raise TypeError(
                f"mask row must be a numpy array or a CPU torch tensor, got {type(out_words).__name__}"
            )
        try:
            arr = to_numpy()
        except (RuntimeError, TypeError) as exc:  # e.g. a CUDA tensor
            raise TypeError(f"mask row must live in CPU memory: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"mask row must be 1-D (one row of packed words), got shape {arr.shape}")
    if arr.dtype not in (np.int32, np.uint32):
        raise TypeError(f"mask row must have dtype int32 (or uint32), got {arr.dtype}")
    if not arr.flags.writeable:
        raise ValueError("mask row is read-only")
    return arr.view(np.uint32)


def clear_bits(row: np.ndarray, token_ids: Any) -> list[int]:
    """Clear the bits of ``token_ids`` that are set in ``row``; return the ids actually cleared.

    Ids past the row's width are ignored: they are disallowed already.
    """
    cleared: list[int] = []
    width = row.shape[0]
    for tok in token_ids:
        word = tok >> 5
        if word >= width or tok < 0:
            continue
        bit = 1 << (tok & 31)
        value = int(row[word])
        if value & bit:
            row[word] = value & (_ALL_BITS ^ bit)
            cleared.append(tok)
    return cleared


def set_bits(row: np.ndarray, token_ids: list[int]) -> None:
    """Set the bits of ``token_ids`` (all inside the row); undoes :func:`clear_bits`."""
    for tok in token_ids:
        word = tok >> 5
        row[word] = int(row[word]) | (1 << (tok & 31))


class ReferencePhraseRequest:
    """Per-request journal: held tokens, automaton states, and the bans of the current position.

    Journal record of a held token, by index ``j`` (absolute position ``n_released + j``):
    ``_fends[j]`` is the end of its text in the folded stream; ``_recs[j]`` is
    ``(token, logprob, text, automaton state, undecoded bytes, their first token,
    end of its first character if that began in an earlier token else -1, that earlier token)``,
    all as they are after the token, so a rewind restores any earlier point.
    """

    def __init__(self, compiled: CompiledPhrases, max_rewinds: int, max_pending_tokens: int, vocab) -> None:
        self._phrases = compiled.phrases
        self._max_rewinds = max_rewinds
        self._max_pending_tokens = max_pending_tokens
        self._ac = compiled.automaton
        self._fold_cs = compiled.case_sensitive
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
    def push(self, token_id: int, logprob: Any = None) -> ReferenceEvent:
        """Append one sampled token; release what is safe, or report a rewind on a complete match."""
        self._check_open()
        match = self._append(token_id, logprob)
        if match is not None:
            return self._rewind(*match)
        event = self._release(final=False)
        if len(self._recs) > self._max_pending_tokens:
            self._closed = True
            raise PendingLimitExceeded(
                f"{len(self._recs)} tokens are held back; the limit is {self._max_pending_tokens}"
            )
        return event

    def finish(self, stop_token_included: bool = False, stop_token: int | None = None) -> ReferenceEvent:
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
                    f"{self._phrases[pid]!r}"
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
            return start, self._phrases[pid]
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

    def _rewind(self, fstart: int, phrase: str) -> ReferenceEvent:
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
        if self._rewinds > self._max_rewinds:
            self._closed = True
            raise RewindLimitExceeded(
                f"more than {self._max_rewinds} rewinds in one request "
                f"(last one for the phrase {phrase!r} at position {t})"
            )
        if t == self._ban_pos:
            self._ban_set.add(banned)
        else:
            self._ban_pos = t
            self._ban_set = {banned}
        return ReferenceEvent([], "", total - t, t, [], dropped, banned, phrase)

    def _release(self, final: bool, tail: str = "") -> ReferenceEvent:
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
        return ReferenceEvent(
            [r[0] for r in out],
            "".join([r[2] for r in out]) + tail,
            0,
            self._n_released + len(recs),
            [r[1] for r in out],
            [],
            None,
            None,
        )


class ReferenceNGramState:
    """History and incremental index of one request.

    Invariant: the index holds exactly the n-grams ``h[i:i+n]`` with ``lo <= i <= len(h) - n``,
    where ``lo = max(0, len(h) - window)`` (0 without a window), counted by ``(n-1)``-gram and
    follower.
    """

    __slots__ = ("_n", "_window", "_whitelist", "_hist", "_n_fixed", "_index", "relaxed_steps")

    def __init__(self, config: NoRepeatNGram, prompt_tokens: Iterable[int] = ()) -> None:
        self._n = config.n
        self._window = config.window
        self._whitelist = config.whitelist
        self._hist: list[int] = []
        self._index: dict[tuple[int, ...], dict[int, int]] = {}
        self.relaxed_steps = 0
        """Steps where the ban was skipped so as not to empty the mask."""
        if config.include_prompt:
            for tok in prompt_tokens:
                self.push(tok)
        self._n_fixed = len(self._hist)

    @property
    def n_generated(self) -> int:
        """Tokens pushed after the prompt (what ``rollback`` may undo)."""
        return len(self._hist) - self._n_fixed

    def _lo(self, length: int) -> int:
        w = self._window
        return 0 if w is None or length <= w else length - w

    def _add(self, i: int) -> None:
        h = self._hist
        n1 = i + self._n - 1
        followers = self._index.get(key := tuple(h[i:n1]))
        if followers is None:
            self._index[key] = {h[n1]: 1}
        else:
            f = h[n1]
            followers[f] = followers.get(f, 0) + 1

    def _remove(self, i: int) -> None:
        h = self._hist
        n1 = i + self._n - 1
        key = tuple(h[i:n1])
        followers = self._index[key]
        f = h[n1]
        c = followers[f] - 1
        if c:
            followers[f] = c
        elif len(followers) == 1:
            del self._index[key]
        else:
            del followers[f]

    def push(self, token_id: int) -> None:
        """Append one token to the history."""
        n = self._n
        if n == 0:
            return
        h = self._hist
        h.append(token_id)
        length = len(h)
        if self._window is not None:
            old_lo, lo = self._lo(length - 1), self._lo(length)
            if lo > old_lo and old_lo <= length - 1 - n:
                self._remove(old_lo)
        else:
            lo = 0
        i = length - n
        if i >= lo:
            self._add(i)

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` pushes (the prompt cannot be rolled back)."""
        if self._n == 0:
            return
        if k < 0 or k > len(self._hist) - self._n_fixed:
            raise NoRepeatNGramError(
                f"cannot roll back {k} tokens: {len(self._hist) - self._n_fixed} were generated"
            )
        n = self._n
        h = self._hist
        for _ in range(k):
            length = len(h)
            lo = self._lo(length)
            i = length - n
            if i >= lo:
                self._remove(i)
            h.pop()
            if self._window is not None:
                new_lo = self._lo(length - 1)
                if new_lo < lo and new_lo <= length - 1 - n:
                    self._add(new_lo)

    def _followers(self) -> dict[int, int] | None:
        n = self._n
        h = self._hist
        if n == 0 or len(h) < n - 1:
            return None
        return self._index.get(tuple(h[len(h) - n + 1:]) if n > 1 else ())

    def banned(self) -> list[int]:
        """Tokens that would repeat an n-gram of the history if sampled now (sorted)."""
        followers = self._followers()
        if not followers:
            return []
        wl = self._whitelist
        return sorted(f for f in followers if f not in wl)

    def fill_banned(self, out_words: Any) -> tuple[int, bool]:
        """Clear the banned tokens' bits in one packed int32 mask row, unless that empties it.

        Returns ``(cleared, relaxed)``. When every token the row allows is banned, the row is left
        as it was, ``relaxed`` is True and :attr:`relaxed_steps` grows by one.
        """
        followers = self._followers()
        if not followers:
            return (0, False)
        row = as_word_row(out_words)
        wl = self._whitelist
        cleared = clear_bits(row, [f for f in followers if f not in wl] if wl else followers)
        if cleared and not row.any():
            set_bits(row, cleared)
            self.relaxed_steps += 1
            return (0, True)
        return (len(cleared), False)
