"""Validation, case folding and cached compilation of a phrase list.

A phrase list is compiled once into an Aho–Corasick automaton over the UTF-8 bytes of the (by
default case-folded) phrases and reused by every request that bans the same phrases: compiled sets
live in a bounded LRU cache keyed by the distinct phrases and the case sensitivity, so a server that
receives the same list with each request pays for the build once.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from glrmask_ext.ahocorasick import PhraseAutomaton

from .errors import InvalidPhraseList, PhraseLimitExceeded

DEFAULT_MAX_PHRASES = 2048
DEFAULT_MAX_PHRASE_CHARS = 256
DEFAULT_MAX_TOTAL_BYTES = 256 * 1024
CACHE_SIZE = 32


def fold(text: str, case_sensitive: bool) -> bytes:
    """The bytes the matcher sees for ``text``: UTF-8 of its case folding unless case-sensitive.

    ``str.casefold`` works character by character, so folding a concatenation equals concatenating
    the folded parts; this is what lets the guard fold each token's text on its own.
    """
    return (text if case_sensitive else text.casefold()).encode("utf-8")


@dataclass(frozen=True)
class PhraseLimits:
    """Size limits of a phrase list (DESIGN §9.1); the byte budget counts the compiled bytes."""

    max_phrases: int = DEFAULT_MAX_PHRASES
    max_phrase_chars: int = DEFAULT_MAX_PHRASE_CHARS
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES


@dataclass(frozen=True)
class CompiledPhrases:
    """A validated phrase list and its automaton; immutable and shared between requests."""

    phrases: tuple[str, ...]
    """The distinct phrases, sorted (so list order does not split the cache); ids index this tuple."""
    case_sensitive: bool
    automaton: PhraseAutomaton
    """Automaton over the compiled bytes; its phrase ``i`` is ``fold(phrases[i])``."""


def validate_phrases(phrases: Iterable[str], case_sensitive: bool, limits: PhraseLimits) -> tuple[str, ...]:
    """Check ``phrases`` against the rules and limits; return the distinct phrases in order.

    Two phrases that fold to the same bytes count once.
    """
    if isinstance(phrases, (str, bytes)):
        raise InvalidPhraseList("phrases must be a list of strings, not a single string")
    try:
        items = list(phrases)
    except TypeError as exc:
        raise InvalidPhraseList(f"phrases must be an iterable of strings: {exc}") from None
    distinct: list[str] = []
    seen: set[bytes] = set()
    total = 0
    for index, phrase in enumerate(items):
        if not isinstance(phrase, str):
            raise InvalidPhraseList(f"phrase #{index} is {type(phrase).__name__}, expected str")
        if not phrase:
            raise InvalidPhraseList(f"phrase #{index} is empty")
        if len(phrase) > limits.max_phrase_chars:
            raise PhraseLimitExceeded(
                f"phrase #{index} has {len(phrase)} characters; the limit is {limits.max_phrase_chars}"
            )
        try:
            data = fold(phrase, case_sensitive)
        except UnicodeEncodeError as exc:
            raise InvalidPhraseList(f"phrase #{index} is not valid Unicode text: {exc}") from None
        if data in seen:
            continue
        seen.add(data)
        distinct.append(phrase)
        total += len(data)
        if len(distinct) > limits.max_phrases:
            raise PhraseLimitExceeded(
                f"more than {limits.max_phrases} distinct phrases; raise max_phrases to allow more"
            )
        if total > limits.max_total_bytes:
            raise PhraseLimitExceeded(
                f"the phrases take more than {limits.max_total_bytes} bytes (UTF-8"
                f"{'' if case_sensitive else ', case-folded'}); raise max_total_bytes to allow more"
            )
    return tuple(distinct)


_cache: OrderedDict[tuple[tuple[str, ...], bool], CompiledPhrases] = OrderedDict()
_cache_lock = threading.Lock()


def compile_phrases(
    phrases: Iterable[str], case_sensitive: bool = False, limits: PhraseLimits = PhraseLimits()
) -> CompiledPhrases:
    """Validate and compile ``phrases``, reusing a cached automaton for an identical list."""
    distinct = tuple(sorted(validate_phrases(phrases, case_sensitive, limits)))
    key = (distinct, case_sensitive)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    automaton = PhraseAutomaton([fold(p, case_sensitive) for p in distinct])
    compiled = CompiledPhrases(distinct, case_sensitive, automaton)
    with _cache_lock:
        _cache[key] = compiled
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def cache_info() -> tuple[int, int]:
    """``(entries, capacity)`` of the compiled-phrase cache (for tests and monitoring)."""
    with _cache_lock:
        return len(_cache), CACHE_SIZE


def clear_cache() -> None:
    """Drop every cached automaton."""
    with _cache_lock:
        _cache.clear()
