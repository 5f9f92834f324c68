"""Streaming guards that compose with grammar masks: phrase bans with rewind, no-repeat-ngram.

Both emit bans in the packed int32 mask layout of grammar masks (bit ``id % 32`` of word
``id // 32``) and roll back with the grammar state, so one decode loop can apply all three.
"""
from .errors import (
    BannedTokenPushed,
    InvalidPhraseList,
    NoAllowedToken,
    NoRepeatNGramError,
    PendingLimitExceeded,
    PhraseAtStop,
    PhraseBanError,
    PhraseLimitExceeded,
    RequestClosed,
    RewindLimitExceeded,
)
from .ngram import FillResult, NoRepeatNGram, NoRepeatNGramState
from .phrase import PhraseEvent, PhraseGuard, PhraseRequest

__all__ = [
    "BannedTokenPushed",
    "FillResult",
    "InvalidPhraseList",
    "NoAllowedToken",
    "NoRepeatNGram",
    "NoRepeatNGramError",
    "NoRepeatNGramState",
    "PendingLimitExceeded",
    "PhraseAtStop",
    "PhraseBanError",
    "PhraseEvent",
    "PhraseGuard",
    "PhraseLimitExceeded",
    "PhraseRequest",
    "RequestClosed",
    "RewindLimitExceeded",
]
