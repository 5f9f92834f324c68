"""Errors raised by the streaming guards.

A serving engine catches :class:`glrmask.errors.GlrmaskError`; the subclasses say which limit or
policy ended the request so the engine can report it to the client (HTTP 400 for a bad phrase list,
a failed generation for an exhausted rewind budget).
"""
from __future__ import annotations

from glrmask.errors import GlrmaskError


class PhraseBanError(GlrmaskError):
    """Base class of every phrase-ban guard error."""


class InvalidPhraseList(PhraseBanError, ValueError):
    """The phrase list is malformed: not a list of non-empty strings, or not encodable as UTF-8."""


class PhraseLimitExceeded(InvalidPhraseList):
    """The phrase list is larger than a configured limit (count, characters per phrase, total bytes)."""


class RewindLimitExceeded(PhraseBanError):
    """The request needed more rewinds than ``max_rewinds``; generation cannot avoid the phrases."""


class PendingLimitExceeded(PhraseBanError):
    """More tokens are held back than ``max_pending_tokens`` (e.g. a long run of zero-width tokens)."""


class NoAllowedToken(PhraseBanError):
    """At a position, the rewind bans and the grammar mask together leave no token to sample."""


class BannedTokenPushed(PhraseBanError):
    """A token was pushed at the position where this request banned it after a rewind."""


class PhraseAtStop(PhraseBanError):
    """An included stop token (or the end-of-stream flush) completes a banned phrase.

    The stop condition has already been met, so the guard cannot rewind; the request fails instead.
    """


class RequestClosed(PhraseBanError):
    """The request was used after :meth:`PhraseRequest.finish` (or after it failed)."""


class NoRepeatNGramError(GlrmaskError, ValueError):
    """Invalid no-repeat-ngram configuration or use (negative size, rollback past the start)."""
