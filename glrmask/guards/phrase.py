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

The per-request journal (:class:`PhraseRequest`) is native (``glrmask_ext.guard_phrase``): a push
decodes, folds and scans the token's bytes in C and allocates nothing but its event.

The policy is a bounded backtracking policy, not exact sampling conditioned on the absence of the
phrases: banning the token that started a failed continuation also bans good continuations that
start with it, at that position.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from glrmask_ext.guard_phrase import PhraseEvent, PhraseRequest, build_fold_table

from .phrase_set import (
    DEFAULT_MAX_PHRASE_CHARS,
    DEFAULT_MAX_PHRASES,
    DEFAULT_MAX_TOTAL_BYTES,
    CompiledPhrases,
    PhraseLimits,
    compile_phrases,
)

__all__ = ["PhraseEvent", "PhraseGuard", "PhraseRequest", "TokenBytes"]

DEFAULT_MAX_REWINDS = 128
DEFAULT_MAX_PENDING_TOKENS = 1024


class TokenBytes(Protocol):
    """What the guard needs from a vocabulary (``glrmask.Vocab`` provides it)."""

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` adds to the output (``b""`` for special tokens)."""
        ...


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
        if not case_sensitive:
            build_fold_table()  # the native journal's case folding, tabulated once per process
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
        return PhraseRequest(self._compiled, self.max_rewinds, self.max_pending_tokens, vocab)
