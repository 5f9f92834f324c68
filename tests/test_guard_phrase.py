"""Phrase-ban guard: the behaviours of DESIGN §9.1, one per test."""
from __future__ import annotations

import numpy as np
import pytest

from _guard_support import allowed_ids, ids_for, load_vocab, packed_row, tiny_vocab
from glrmask.errors import GlrmaskError
from glrmask.guards import (
    BannedTokenPushed,
    InvalidPhraseList,
    NoAllowedToken,
    PendingLimitExceeded,
    PhraseAtStop,
    PhraseBanError,
    PhraseGuard,
    PhraseLimitExceeded,
    RequestClosed,
    RewindLimitExceeded,
)
from glrmask.guards import phrase_set


@pytest.fixture(scope="module")
def gpt2():
    return load_vocab("gpt2")


@pytest.fixture(scope="module")
def mistral():
    return load_vocab("mistral-7b-v0.1")


def push_all(req, ids):
    return [req.push(t) for t in ids]


# ------------------------------------------------------------------ the article's example (GPT-2)

def test_testament_is_held_then_rewound_to_the_token_that_started_it(gpt2):
    the, word, test, am, ent = ids_for(gpt2, [b"The", b" word", b" test", b"am", b"ent"])
    req = PhraseGuard(["testament"]).start(gpt2)
    e1, e2, e3, e4, e5 = push_all(req, [the, word, test, am, ent])
    assert e1.released_text == "The" and e2.released_text == " word"
    assert e3.released_tokens == [] and e4.released_tokens == []  # " test", "am" could become "testament"
    assert (e5.rewind, e5.position, e5.banned_token) == (3, 2, test)
    assert e5.dropped_tokens == [test, am, ent] and e5.matched_phrase == "testament"
    assert req.banned_tokens(2) == [test]


def test_testimony_continues_after_the_rewind(gpt2):
    the, word, test, am, ent, testimony = ids_for(
        gpt2, [b"The", b" word", b" test", b"am", b"ent", b" testimony"]
    )
    req = PhraseGuard(["testament"]).start(gpt2)
    events = push_all(req, [the, word, test, am, ent, testimony])
    events.append(req.finish())
    assert "".join(e.released_text for e in events) == "The word testimony"


def test_a_ban_on_a_short_phrase_matches_inside_a_longer_word(gpt2):
    (testament,) = ids_for(gpt2, [b" testament"])
    ev = PhraseGuard(["test"]).start(gpt2).push(testament)
    assert (ev.rewind, ev.position, ev.banned_token) == (1, 0, testament)


def test_text_that_cannot_start_a_phrase_is_released_at_once(gpt2):
    req = PhraseGuard(["testament"]).start(gpt2)
    ids = gpt2.encode("Hello there, friend")
    released = [t for e in push_all(req, ids) for t in e.released_tokens]
    assert released == ids


# ------------------------------------------------------------------ holding rules (tiny vocabularies)

def test_a_token_with_safe_text_and_a_phrase_start_is_held_whole():
    vocab = tiny_vocab([b"hello te", b"stament", b"xyz"])
    req = PhraseGuard(["testament"]).start(vocab)
    assert req.push(0).released_tokens == []
    ev = req.push(2)
    assert ev.released_tokens == [0, 2] and ev.released_text == "hello texyz"


def test_a_phrase_split_into_single_bytes_rewinds_to_its_first_byte():
    vocab = tiny_vocab([bytes([c]) for c in range(128)])
    req = PhraseGuard(["abc"]).start(vocab)
    events = push_all(req, list(b"xxabc"))
    assert events[1].released_text == "x"
    assert (events[-1].rewind, events[-1].position, events[-1].banned_token) == (3, 2, ord("a"))


def test_a_partial_utf8_token_is_held_until_its_character_resolves():
    vocab = tiny_vocab([b"\xe6", b"\x97\xa5", b"x"])
    req = PhraseGuard(["zzz"]).start(vocab)
    assert req.push(0).released_tokens == []
    ev = req.push(1)
    assert ev.released_tokens == [0, 1] and ev.released_text == "日"


def test_a_phrase_with_a_multibyte_character_split_over_tokens_is_caught():
    vocab = tiny_vocab([b"caf", b"\xc3", b"\xa9", b"e"])
    req = PhraseGuard(["café"]).start(vocab)
    events = push_all(req, [0, 1, 2])
    assert (events[-1].rewind, events[-1].position) == (3, 0)


def test_a_match_starting_inside_a_split_character_rewinds_to_its_first_byte():
    # "ẞ" (U+1E9E) folds to "ss"; here its three bytes come as three tokens.
    vocab = tiny_vocab([b"a", b"\xe1", b"\xba", b"\x9e"])
    req = PhraseGuard(["ss"]).start(vocab)
    events = push_all(req, [0, 1, 2, 3])
    assert (events[-1].rewind, events[-1].position, events[-1].banned_token) == (3, 1, 1)


def test_zero_width_special_tokens_between_phrase_parts_do_not_break_the_match():
    vocab = tiny_vocab([b"te", None, b"st"])
    req = PhraseGuard(["test"]).start(vocab)
    events = push_all(req, [0, 1, 2])
    assert (events[-1].rewind, events[-1].position) == (3, 0)


# ------------------------------------------------------------------ byte fallback (Mistral)

def test_byte_fallback_tokens_complete_a_case_folded_phrase(mistral):
    ids = mistral.encode("GRAẞ")  # " G", "RA", then "ẞ" as three byte tokens
    assert [mistral.token_bytes(i) for i in ids[2:]] == [b"\xe1", b"\xba", b"\x9e"]
    req = PhraseGuard(["grass"]).start(mistral)
    events = push_all(req, ids)
    assert [e.released_tokens for e in events[:-1]] == [[], [], [], []]
    assert (events[-1].rewind, events[-1].position, events[-1].banned_token) == (5, 0, ids[0])


def test_byte_fallback_text_without_phrases_is_released_as_characters(mistral):
    ids = mistral.encode("𝔊 ꙮ ok")
    assert any(len(mistral.token_bytes(i)) == 1 and mistral.token_bytes(i)[0] >= 0x80 for i in ids)
    req = PhraseGuard(["zebra"]).start(mistral)
    events = push_all(req, ids) + [req.finish()]
    texts = [e.released_text for e in events]
    assert "".join(texts) == mistral.decode_bytes(ids).decode("utf-8")
    assert all("\ufffd" not in t for t in texts)


# ------------------------------------------------------------------ overlapping phrases

def test_of_overlapping_phrases_the_first_to_complete_triggers_the_rewind(gpt2):
    test, am, en = ids_for(gpt2, [b" test", b"am", b"en"])
    req = PhraseGuard(["testament", "amen"]).start(gpt2)
    events = push_all(req, [test, am, en])
    assert (events[-1].rewind, events[-1].position, events[-1].matched_phrase) == (2, 1, "amen")


def test_a_longer_partial_match_survives_a_rewind_for_a_shorter_phrase():
    vocab = tiny_vocab([b"ab", b"cx", b"cd", b"ef"])
    req = PhraseGuard(["abcdef", "cx"]).start(vocab)
    req.push(0)
    assert req.push(1).position == 1  # "cx" completes: back to position 1
    req.push(2)
    ev = req.push(3)
    assert (ev.rewind, ev.position, ev.matched_phrase) == (3, 0, "abcdef")


def test_a_match_that_began_in_released_text_rewinds_to_the_first_held_token():
    vocab = tiny_vocab([b"ab", b"d", b"e", b"c"])
    req = PhraseGuard(["abc", "de"]).start(vocab)
    assert req.push(0).released_tokens == []
    assert req.push(1).released_tokens == [0]  # "abd" can no longer become "abc"
    assert req.push(2).position == 1  # "de": rewind, the partial "ab" is back
    ev = req.push(3)
    assert (ev.rewind, ev.position, ev.banned_token) == (1, 1, 3)
    assert req.banned_tokens(1) == [1, 3]


# ------------------------------------------------------------------ case folding

def test_matching_is_case_insensitive_by_default(gpt2):
    ids = ids_for(gpt2, [b" TEST", b"AM", b"ENT"])
    assert push_all(PhraseGuard(["testament"]).start(gpt2), ids)[-1].rewind == 3


def test_case_sensitive_guards_let_other_cases_through(gpt2):
    ids = ids_for(gpt2, [b" TEST", b"AM", b"ENT"])
    req = PhraseGuard(["testament"], case_sensitive=True).start(gpt2)
    assert all(e.rewind == 0 for e in push_all(req, ids))


def test_folding_that_changes_length_maps_back_to_the_right_token():
    vocab = tiny_vocab([b"Stra", b"\xc3\x9fe", b"STRASSE"])
    assert push_all(PhraseGuard(["strasse"]).start(vocab), [0, 1])[-1].rewind == 2
    # "se" ends inside the folded "sse" of "ße": the match starts in that token
    ev = push_all(PhraseGuard(["se"]).start(vocab), [0, 1])[-1]
    assert (ev.rewind, ev.position) == (1, 1)
    assert push_all(PhraseGuard(["Straße"]).start(vocab), [2])[-1].rewind == 1


# ------------------------------------------------------------------ bans

def test_a_second_failure_at_the_same_position_adds_to_the_banned_set():
    vocab = tiny_vocab([b"x", b"ab", b"a", b"b"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(0)
    assert req.push(1).position == 1
    req.push(2)
    assert req.push(3).position == 1
    assert req.banned_tokens(1) == [1, 2]


def test_a_failure_at_another_position_resets_the_banned_set():
    vocab = tiny_vocab([b"x", b"ab", b"a", b"b"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(0)
    req.push(1)  # rewind to 1, ban "ab" there
    req.push(0)
    req.push(1)  # rewind to 2
    assert req.banned_tokens(1) == [] and req.banned_tokens(2) == [1]


def test_bans_belong_to_one_request():
    vocab = tiny_vocab([b"x", b"ab"])
    guard = PhraseGuard(["ab"])
    first, second = guard.start(vocab), guard.start(vocab)
    first.push(1)
    assert first.banned_tokens(0) == [1]
    assert second.banned_tokens(0) == []
    assert second.push(0).rewind == 0


def test_pushing_a_banned_token_at_its_position_is_an_error():
    vocab = tiny_vocab([b"x", b"ab"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(1)
    with pytest.raises(BannedTokenPushed):
        req.push(1)


def test_fill_banned_clears_the_banned_bits_of_a_packed_row():
    vocab = tiny_vocab([b"x"] * 40 + [b"ab"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(40)
    row = packed_row(41)
    assert req.fill_banned(row, 0) == 1
    assert allowed_ids(row) == list(range(40))
    other = packed_row(41)
    assert req.fill_banned(other, 1) == 0 and allowed_ids(other) == list(range(41))


def test_bans_that_leave_no_allowed_token_raise_and_keep_the_row():
    vocab = tiny_vocab([b"x", b"ab"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(1)
    row = packed_row(2, [1])  # the grammar allows only the banned token
    with pytest.raises(NoAllowedToken):
        req.fill_banned(row, 0)
    assert allowed_ids(row) == [1]


def test_fill_banned_accepts_a_torch_tensor_row():
    torch = pytest.importorskip("torch")
    vocab = tiny_vocab([b"x", b"ab"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(1)
    row = torch.from_numpy(packed_row(2))
    assert req.fill_banned(row, 0) == 1 and int(row[0]) == 1


# ------------------------------------------------------------------ logprobs

def test_logprob_rows_are_released_with_their_tokens_and_dropped_with_them():
    vocab = tiny_vocab([b"x", b"a", b"b", b"c"])
    req = PhraseGuard(["ab"]).start(vocab)
    assert req.push(0, logprob=-0.5).released_logprobs == [-0.5]
    assert req.push(1, logprob=-1.0).released_logprobs == []
    assert req.push(2, logprob=-2.0).rewind == 2
    ev = req.push(3, logprob=-3.0)
    assert ev.released_tokens == [3] and ev.released_logprobs == [-3.0]


# ------------------------------------------------------------------ termination

def test_finish_releases_a_pending_partial_phrase(gpt2):
    ids = ids_for(gpt2, [b" test", b"am"])
    req = PhraseGuard(["testament"]).start(gpt2)
    push_all(req, ids)
    ev = req.finish()
    assert ev.released_tokens == ids and ev.released_text == " testam"


def test_an_omitted_stop_token_adds_no_text(gpt2):
    req = PhraseGuard(["testament"]).start(gpt2)
    req.push(ids_for(gpt2, [b" test"])[0])
    ev = req.finish(stop_token_included=False, stop_token=gpt2.eos_token_ids[0])
    assert ev.released_text == " test" and len(ev.released_tokens) == 1


def test_an_included_stop_token_that_completes_a_phrase_fails_the_request():
    vocab = tiny_vocab([b"a", b"b</s>"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(0)
    with pytest.raises(PhraseAtStop):
        req.finish(stop_token_included=True, stop_token=1)
    assert req.closed


def test_an_included_stop_token_without_a_match_is_released():
    vocab = tiny_vocab([b"a", b"!</s>"])
    req = PhraseGuard(["ab"]).start(vocab)
    req.push(0)
    ev = req.finish(stop_token_included=True, stop_token=1)
    assert ev.released_tokens == [0, 1] and ev.released_text == "a!</s>"


def test_undecodable_trailing_bytes_are_released_as_replacement_characters():
    vocab = tiny_vocab([b"ok", b"\xe6"])
    req = PhraseGuard(["zz"]).start(vocab)
    push_all(req, [0, 1])
    assert req.finish().released_text == "\ufffd"


def test_a_finished_request_refuses_more_tokens():
    req = PhraseGuard(["ab"]).start(tiny_vocab([b"x"]))
    req.finish()
    with pytest.raises(RequestClosed):
        req.push(0)


# ------------------------------------------------------------------ limits and invalid input

@pytest.mark.parametrize(
    "phrases",
    [["ok", ""], "a single string", ["ok", 3], ["bad \ud800 surrogate"], 42],
    ids=["empty", "str", "not-str", "surrogate", "not-iterable"],
)
def test_invalid_phrase_lists_are_rejected(phrases):
    with pytest.raises(InvalidPhraseList):
        PhraseGuard(phrases)


def test_phrase_limits_have_the_documented_defaults():
    with pytest.raises(PhraseLimitExceeded):
        PhraseGuard([f"p{i}" for i in range(2049)])
    with pytest.raises(PhraseLimitExceeded):
        PhraseGuard(["x" * 257])
    with pytest.raises(PhraseLimitExceeded):
        PhraseGuard([f"{i:04d}" + "y" * 250 for i in range(1100)])  # > 256 KiB
    assert len(PhraseGuard([f"phrase number {i}" for i in range(2048)]).phrases) == 2048


def test_limits_are_configurable():
    with pytest.raises(PhraseLimitExceeded):
        PhraseGuard(["a", "b", "c"], max_phrases=2)
    assert len(PhraseGuard(["a", "b", "A"], max_phrases=2).phrases) == 2  # "A" folds onto "a"


def test_the_rewind_budget_is_enforced():
    vocab = tiny_vocab([b"ab"])
    guard = PhraseGuard(["ab"], max_rewinds=0)
    with pytest.raises(RewindLimitExceeded):
        guard.start(vocab).push(0)


def test_the_pending_token_bound_is_enforced():
    vocab = tiny_vocab([b"a", None])
    req = PhraseGuard(["ab"], max_pending_tokens=3).start(vocab)
    with pytest.raises(PendingLimitExceeded):
        push_all(req, [0, 1, 1, 1])


def test_guard_errors_are_glrmask_errors():
    assert issubclass(PhraseBanError, GlrmaskError)
    assert issubclass(InvalidPhraseList, ValueError)


# ------------------------------------------------------------------ compiled-phrase cache

def test_the_same_phrase_list_reuses_one_compiled_automaton():
    a = PhraseGuard(["alpha", "beta"])
    b = PhraseGuard(["beta", "alpha", "beta"])
    assert a._compiled is b._compiled
    assert PhraseGuard(["alpha", "beta"], case_sensitive=True)._compiled is not a._compiled


def test_the_compiled_phrase_cache_is_bounded():
    phrase_set.clear_cache()
    for i in range(phrase_set.CACHE_SIZE + 5):
        PhraseGuard([f"phrase {i}"])
    entries, capacity = phrase_set.cache_info()
    assert entries == capacity


def test_an_empty_phrase_list_releases_every_token_at_once(gpt2):
    req = PhraseGuard([]).start(gpt2)
    ids = gpt2.encode("test testament")
    assert [e.released_tokens for e in push_all(req, ids)] == [[t] for t in ids]
