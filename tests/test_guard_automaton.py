"""The Cython Aho–Corasick scanner (glrmask_ext.ahocorasick) against a naive substring search."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask_ext.ahocorasick import PhraseAutomaton

phrase_lists = st.lists(st.binary(min_size=1, max_size=5).map(lambda b: bytes(c % 3 + 97 for c in b)), min_size=1, max_size=6)
texts = st.binary(max_size=30).map(lambda b: bytes(c % 4 + 97 for c in b))


def first_match(phrases: list[bytes], text: bytes) -> tuple[int, int]:
    """(end index, id of the shortest phrase ending there) of the earliest-ending match."""
    for end in range(len(text)):
        ending = [i for i, p in enumerate(phrases) if text[: end + 1].endswith(p)]
        if ending:
            return end, min(ending, key=lambda i: (len(phrases[i]), i))
    return -1, -1


def held_suffix(phrases: list[bytes], text: bytes) -> int:
    return max(k for p in phrases for k in range(len(p) + 1) if text.endswith(p[:k]))


@settings(max_examples=150, deadline=None)
@given(phrase_lists, texts)
def test_scan_reports_the_earliest_end_and_the_shortest_phrase_there(phrases, text):
    phrases = list(dict.fromkeys(phrases))
    _, end, pid = PhraseAutomaton(phrases).scan(0, text)
    assert (end, pid) == first_match(phrases, text)


@settings(max_examples=150, deadline=None)
@given(phrase_lists, texts, st.lists(st.integers(1, 4), max_size=30))
def test_depth_is_the_longest_suffix_that_is_still_a_phrase_prefix(phrases, text, cuts):
    phrases = list(dict.fromkeys(phrases))
    ac = PhraseAutomaton(phrases)
    state, pos = 0, 0
    for size in cuts:
        if pos >= len(text):
            break
        state, end, _ = ac.scan(state, text[pos:pos + size])
        if end >= 0:
            break
        pos = min(pos + size, len(text))
        assert ac.depth(state) == held_suffix(phrases, text[:pos])


def test_a_duplicated_phrase_keeps_its_first_id():
    assert PhraseAutomaton([b"ab", b"ab"]).scan(0, b"xab")[2] == 0


def test_non_ascii_bytes_are_ordinary_symbols():
    ac = PhraseAutomaton(["日本".encode(), b"\xff\x00"])
    assert ac.scan(0, "x日本".encode())[1:] == (6, 0)
    assert ac.scan(0, b"\x01\xff\x00")[1:] == (2, 1)


@pytest.mark.parametrize("phrases, error", [([b""], ValueError), (["text"], TypeError)])
def test_invalid_phrases_are_rejected(phrases, error):
    with pytest.raises(error):
        PhraseAutomaton(phrases)


def test_an_unknown_state_is_rejected():
    with pytest.raises(ValueError):
        PhraseAutomaton([b"ab"]).scan(99, b"a")


@pytest.mark.parametrize("alphabet", [b"abcd ", bytes(range(256))], ids=["dense-table", "trie-and-failure-links"])
def test_large_phrase_sets_match_the_naive_search(alphabet):
    """Few distinct bytes fit the dense transition table; all 256 bytes over ~20k states do not."""
    rng = random.Random(len(alphabet))
    phrases = list(dict.fromkeys(bytes(rng.choice(alphabet) for _ in range(rng.randint(3, 60))) for _ in range(500)))
    ac = PhraseAutomaton(phrases)
    for _ in range(20):
        text = b"".join(rng.choice(phrases)[: rng.randint(1, 8)] + bytes([rng.choice(alphabet)]) for _ in range(40))
        state, pos = 0, 0
        while pos < len(text):  # every match in turn, restarting after each
            _, end, pid = ac.scan(state, text[pos:])
            expected = first_match(phrases, text[pos:])
            assert (end, pid) == expected
            if end < 0:
                break
            state, pos = 0, pos + end + 1
