"""Dynamic masks are native and exact (issue: instant start).

``mode="dynamic"`` (and ``mode="auto"`` until its compile ends) runs every request on the native
runtime: the same per-request state, commit and GLR steps as static masks, with the mask computed
by a walk of the vocabulary trie over that state and the lexer explored on demand. Judges:

* the reference masker (the Python recognizer's trie walk over the same lazy lexer and LR table),
  on every state reachable within a few tokens of the hard-case grammars with tiny vocabularies;
* the static engine (Parser DWA), on random walks of every shipped grammar with three real
  vocabularies;
* single-threaded masks, for many threads exploring one fresh mask's lexer at once.
"""
from __future__ import annotations

import json
import random
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import glrmask
from _engine_support import allowed, reachable_states, reference_words
from _grammars import CASE_BY_NAME
from conftest import tiny_vocab
from glrmask.json_schema.reorder import reorder_to_schema

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
SHIPPED = sorted(p.name for p in GRAMMARS.glob("*.lark"))
HARD_CASES = ["ambiguous_expr", "non_lalr", "right_recursive", "nullable_heavy", "keywords_vs_names",
              "lazy_quantifier", "trailing_lookahead", "number_list", "escaped_string",
              "unicode_class", "ignore_ws", "case_insensitive"]


@lru_cache(maxsize=None)
def tiny(name: str):
    case = CASE_BY_NAME[name]
    return glrmask.compile(case.grammar, tiny_vocab(list(case.pieces)), format="lark", mode="dynamic")


@pytest.mark.parametrize("name", HARD_CASES)
def test_dynamic_masks_equal_the_reference_on_every_reachable_state(name):
    mask = tiny(name)
    states = reachable_states(mask, max_sets=300)
    assert len(states) > 1
    for state, data in states:
        assert mask.get_mask(state).tobytes() == reference_words(mask, data).tobytes(), (name, data)


SPANNING = r"""
start: pair+
pair: KEY ":" value ";"
value: NUMBER | WORD | "[" value ("," value)* "]"
KEY: /k[a-z]*/
WORD: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""
SPANNING_PIECES = ["k", "ka", "kab", ":", ";", " ", "  ", ":1", "1;", ";k", " k", ": ", "[", "[1", ",", ",a",
                   "a]", "]", "1,2", "x", ":x;", " ;", "; ka:", "a ;k", "];", ": [", "k:", " :", "1 ;"]


def test_tokens_spanning_several_lexemes_keep_every_continuation():
    """Lexeme memos drop the lanes of a token's later lexemes that no stack could take (terminals
    that cannot follow the one before); tokens crossing ignored text and several terminals still
    get exactly the reference masks."""
    mask = glrmask.compile(SPANNING, tiny_vocab(SPANNING_PIECES), format="lark", mode="dynamic")
    states = reachable_states(mask, max_sets=400)
    assert len(states) > 20
    for state, data in states:
        assert mask.get_mask(state).tobytes() == reference_words(mask, data).tobytes(), data


JSON_SAMPLE = Path(__file__).resolve().parent / "data" / "jsonschema" / "maskbench_sample.jsonl"
JSON_CASES = [3, 11, 14, 21, 26, 40, 43, 51, 54, 57]  # one to three per split, each compiles in ~1 s


@lru_cache(maxsize=None)
def _json_records() -> list:
    return [json.loads(line) for line in JSON_SAMPLE.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("index", JSON_CASES)
def test_dynamic_masks_equal_static_masks_replaying_json_schema_instances(index, gpt2):
    """Real schemas (keys of several objects, formats with lookaheads, bounded strings): at every
    token of their valid instances, the dynamic mask — lexemes restricted to what can come next,
    memos pruned by what can follow — is the static mask."""
    rec = _json_records()[index]
    static = glrmask.compile_json_schema(rec["schema"], gpt2, mode="static")
    dynamic = glrmask.compile_json_schema(rec["schema"], gpt2, mode="dynamic")
    for inst in rec["tests"]:
        if not inst["valid"]:
            continue
        text = json.dumps(reorder_to_schema(inst["data"], rec["schema"]), ensure_ascii=False)
        s, d = static.start(), dynamic.start()
        for k, tok in enumerate(gpt2.encode(text)):
            assert dynamic.get_mask(d).tobytes() == static.get_mask(s).tobytes(), (rec["file"], k)
            assert s.commit(tok) and d.commit(tok)
        assert dynamic.get_mask(d).tobytes() == static.get_mask(s).tobytes()
        assert d.is_accepting() and s.is_accepting()


def test_bytes_committed_mid_token_are_answered_natively():
    mask = glrmask.compile('start: "ab" "c"', tiny_vocab(["ab", "c", "abc", "b"]), format="lark", mode="dynamic")
    state = mask.start()
    assert state.commit_bytes(b"a")
    assert mask.get_mask(state).tobytes() == reference_words(mask, b"a").tobytes()
    assert allowed(mask.get_mask(state)) == {3}  # "b" finishes the lexeme
    assert mask.n_fallbacks == 0


@lru_cache(maxsize=None)
def _pair(grammar: str, vocab):
    src = (GRAMMARS / grammar).read_text(encoding="utf-8")
    return glrmask.compile(src, vocab, mode="static"), glrmask.compile(src, vocab, mode="dynamic")


@pytest.mark.parametrize("vocab_name", ["gpt2", "qwen3", "mistral"])
@pytest.mark.parametrize("grammar", SHIPPED)
def test_dynamic_masks_equal_static_masks_on_random_walks(grammar, vocab_name, request):
    static, dynamic = _pair(grammar, request.getfixturevalue(vocab_name))
    rng = random.Random(f"{grammar}/{vocab_name}")
    for _walk in range(4):
        s, d = static.start(), dynamic.start()
        for k in range(30):
            want = static.get_mask(s)
            assert dynamic.get_mask(d).tobytes() == want.tobytes(), (grammar, k)
            toks = sorted(allowed(want))
            if not toks:
                break
            tok = rng.choice(toks)
            assert s.commit(tok) and d.commit(tok)
            if d.is_terminated():
                break


def test_threads_exploring_one_fresh_mask_agree_with_one_thread(gpt2):
    src = (GRAMMARS / "json.lark").read_text(encoding="utf-8")
    ids = gpt2.encode('{"name": [1, 2.5e3, "x\\"y", true, null], "more": {"k": -0.5}}')
    solo = glrmask.compile(src, gpt2, mode="dynamic")
    state = solo.start()
    want = []
    for t in ids:
        want.append(solo.get_mask(state).tobytes())
        assert state.commit(t)
    shared = glrmask.compile(src, gpt2, mode="dynamic")
    results: dict[int, list] = {}

    def run(k: int) -> None:
        st = shared.start()
        got = []
        for t in ids[k % 3:]:
            got.append(shared.get_mask(st).tobytes())
            st.commit(t)
        results[k] = got

    # each thread starts at its own offset into the document: lexer states get explored in
    # different orders, concurrently
    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k, got in results.items():
        if k % 3 == 0:
            assert got == want, k
    assert len(results) == 8


def test_fill_masks_and_commit_many_serve_dynamic_states(gpt2):
    mask = glrmask.compile((GRAMMARS / "json.lark").read_text(encoding="utf-8"), gpt2, mode="dynamic")
    ids = gpt2.encode('[{"a": 1}, {"b": [true, false]}]')
    states = [mask.start() for _ in range(3)]
    for k, t in enumerate(ids):
        out = np.zeros((3, mask.n_words), dtype=np.int32)
        glrmask.fill_masks(states, out)
        for row, st in enumerate(states):
            assert out[row].tobytes() == mask.get_mask(st).tobytes(), k
        assert glrmask.commit_many(states, [t] * 3) == [True] * 3


def test_rollback_and_fork_on_a_dynamic_state_give_the_earlier_masks(gpt2):
    mask = glrmask.compile((GRAMMARS / "json.lark").read_text(encoding="utf-8"), gpt2, mode="dynamic")
    ids = gpt2.encode('{"key": "some text", "n": 12}')
    state = mask.start()
    seen = []
    for t in ids:
        seen.append(mask.get_mask(state).tobytes())
        assert state.commit(t)
    branch = state.fork()
    state.rollback(len(ids) - 2)
    assert mask.get_mask(state).tobytes() == seen[2]
    assert branch.num_committed == len(ids) and branch.is_accepting()


def test_without_lexeme_memos_masks_walk_the_trie_and_stay_exact(gpt2):
    src = (GRAMMARS / "json.lark").read_text(encoding="utf-8")
    static, _ = _pair("json.lark", gpt2)
    lean = glrmask.compile(src, gpt2, mode="dynamic", limits={"dynamic": {"max_memo_mb": 0}})
    ids = gpt2.encode('{"a": [1, -2.5e3, "x y", true, null, {"b": []}]}')
    s, d = static.start(), lean.start()
    for t in ids:
        assert lean.get_mask(d).tobytes() == static.get_mask(s).tobytes()
        assert s.commit(t) and d.commit(t)


def test_dynamic_limits_are_checked(gpt2):
    src = (GRAMMARS / "json.lark").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="max_memo_mb"):
        glrmask.compile(src, gpt2, mode="dynamic", limits={"dynamic": {"max_memo_mb": -1}})
    with pytest.raises(ValueError, match="unknown"):
        glrmask.compile(src, gpt2, mode="dynamic", limits={"dynamic": {"memo": 1}})


def test_a_dynamic_lexer_with_thousands_of_states_masks_exactly_at_every_count():
    """A counted repeat is one lexer state per count: 2,500 of them span several chunks of the
    dynamic lexer's tables (allocated as states appear); every count still masks exactly."""
    mask = glrmask.compile('start: RUN\nRUN: /a{1,2500}b/', tiny_vocab(["a", "aa", "b", "ab"]), format="lark",
                           mode="dynamic")
    ids = {mask.vocab.token_bytes(i): i for i in range(mask.vocab.size)}
    state = mask.start()
    for count in range(1, 2501):
        assert state.commit(ids[b"a"])
        words = mask.get_mask(state)
        bit = lambda t: bool((int(words[ids[t] >> 5]) >> (ids[t] & 31)) & 1)  # noqa: E731
        assert bit(b"b") and bit(b"a") == (count < 2500) and bit(b"aa") == (count < 2499)
        assert bit(b"ab") == (count < 2500)
    assert state.commit(ids[b"b"]) and state.is_accepting()


@pytest.mark.parametrize("letters", ["abc", "abcdefghijklmnopqrstuvwxyz"])
def test_tokens_with_the_same_bytes_are_allowed_together_inside_a_lexeme(letters):
    """Ids that share their bytes are one trie token: a lexeme memo lists the tokens that stay
    inside the lexeme once, then every id of each — as a list (few tokens) or a dense row (676
    two-letter tokens)."""
    pairs = [a + b for a in letters for b in letters]
    pieces = pairs + ['"', '"' + letters[0], pairs[0], pairs[-1], letters[1] + '"']
    mask = glrmask.compile('start: STR\nSTR: /"[a-z]{0,7}"/', tiny_vocab(pieces), format="lark", mode="dynamic")
    twins = [[i for i, p in enumerate(pieces) if p == t] for t in (pairs[0], pairs[-1])]
    states = reachable_states(mask, max_depth=4, max_sets=60)
    assert len(states) > 5
    for state, data in states:
        words = mask.get_mask(state)
        assert words.tobytes() == reference_words(mask, data).tobytes(), data
        for ids in twins:
            assert len({(int(words[i >> 5]) >> (i & 31)) & 1 for i in ids}) == 1, data


@pytest.mark.parametrize("body", [r'(?:[^"\\\x00-\x1f]|\\["\\nt])*', r"[a-f0-9]*", r"[^\x00-\x1f]*"])
def test_a_loop_takes_whole_subtrees_only_where_every_byte_below_loops(body):
    """Inside a loop (a string's body) a lexeme walk takes a subtree's tokens at once when every
    byte below the node loops; it decides that from the classes of bytes below (printable ASCII,
    quote, backslash, controls, UTF-8 continuation and lead bytes) or, for a loop on part of a
    class, from the exact bytes. Subtrees here mix every class below a looping prefix."""
    stems = ["ab", "a1", "f0", "x "]
    tails = ["", "c", "9", '"', "\\", "\\n", "\x01", "é", "中", "😀", "é\"", "cd", "ab\"", " \"x"]
    pieces = sorted({s + t for s in stems for t in tails} | {'"', '"a', "a", "b", "1", '"}'})
    mask = glrmask.compile(f'start: STR\nSTR: /"{body}"/', tiny_vocab(pieces), format="lark", mode="dynamic")
    states = reachable_states(mask, max_depth=3, max_sets=80)
    assert len(states) >= 3  # before the string, in its body, after it (and mid-character, escapes)
    for state, data in states:
        assert mask.get_mask(state).tobytes() == reference_words(mask, data).tobytes(), (body, data)


def test_a_vocabulary_with_a_token_of_40_kb_masks_alike_dynamically_and_statically():
    """Tokens of 32 KB or more leave the trie no room for the coarse byte classes a lexeme walk
    reads: it then falls back to each subtree's exact bytes, and masks stay the same."""
    pieces = ["a", "ab", "b", '"', '"a', 'a"', "x" * 40_000, '"' + "x" * 40_000, "\\n", "é"]
    vocab = tiny_vocab(pieces)
    schema = {"type": "string"}
    dynamic = glrmask.compile_json_schema(schema, vocab, mode="dynamic")
    static = glrmask.compile_json_schema(schema, vocab, mode="static")
    states = reachable_states(dynamic, max_depth=3, max_sets=40)
    assert len(states) >= 3
    for state, data in states:
        assert dynamic.get_mask(state).tobytes() == reference_words(dynamic, data).tobytes(), data[:20]
        twin = static.start()
        assert twin.commit_bytes(data) if data else True
        assert static.get_mask(twin).tobytes() == dynamic.get_mask(state).tobytes(), data[:20]


BOUNDED = "start: STR\n" + r'STR: /"(?:[^"\\\x00-\x1f]|\\["\\n]){0,%d}"/'
BOUNDED_PIECES = ["a", "b", "ab", "abc", "abcd", "ab" * 4, "a" * 12, " ", "  ", '"', '"a', 'a"', 'ab"', "\\n",
                  'a\\"', "\\", "é", "中", "é\"", 'abc"}']


def _walk_bounded(bound: int, seed: int, pieces=tuple(BOUNDED_PIECES)):
    mask = glrmask.compile(BOUNDED % bound, tiny_vocab(list(pieces)), format="lark", mode="dynamic")
    rng = random.Random(seed)
    ids = {p: i for i, p in enumerate(pieces)}
    body = [p for p in pieces if '"' not in p or p == 'a\\"']
    state, data = mask.start(), b""
    assert state.commit(ids['"'])
    data += b'"'
    while True:
        words = mask.get_mask(state)
        assert words.tobytes() == reference_words(mask, data).tobytes(), data
        ok = allowed(words)
        piece = rng.choice([p for p in body if ids[p] in ok] or ['"'])
        assert state.commit(ids[piece])
        data += piece.encode()
        if state.is_accepting():
            return mask


@pytest.mark.parametrize("bound,seed", [(40, 0), (40, 1), (300, 2)])
def test_a_bounded_string_masks_exactly_at_every_count_up_to_its_bound(bound, seed):
    """Inside a bounded string every token reaches a new lexer state (the count). Counts no
    token can tell apart (far from the bound) share one lexeme memo, proved equal by following
    the first one's walk; near the bound a token of 12 bytes tells them apart, and each count
    gets a memo of its own. Every mask, on the way to the bound and past it, is the reference's."""
    mask = _walk_bounded(bound, seed)
    assert mask.dynamic_stats["memo_transfers"][1] > 0


def test_dynamic_stats_count_the_trie_walks_of_lexeme_memos():
    """``memo_walks`` says what cold masks paid for: each memo built walks the trie once (its
    nodes counted), a mask whose memos exist walks none, and counts that share a transferred
    memo walk nothing of their own."""
    mask = _walk_bounded(300, 2)
    walks, nodes = mask.dynamic_stats["memo_walks"]
    assert 0 < walks < 300 and nodes >= walks
    state = mask.start()
    mask.get_mask(state)  # (the walk above committed its first token unmasked)
    after = mask.dynamic_stats["memo_walks"]
    mask.get_mask(mask.start())  # another request in the same lexer state: the memo is there
    assert mask.dynamic_stats["memo_walks"] == after


def test_dynamic_stats_count_the_lexer_states_cold_masks_create():
    """``lexer_states`` says what exploring cost: each count of a bounded string is a new joint
    state and lane state of the lazy lexer, and a mask whose lexer states are known creates none."""
    mask = _walk_bounded(40, 0)
    joint, lanes = mask.dynamic_stats["lexer_states"]
    assert joint > 40 and lanes > 40  # (a count, or more, per character)
    mask.get_mask(mask.start())
    known = mask.dynamic_stats["lexer_states"]
    mask.get_mask(mask.start())  # another request in the same lexer state: nothing new to explore
    assert mask.dynamic_stats["lexer_states"] == known


LONG_PIECES = tuple(BOUNDED_PIECES) + ("a" * 40, "ab" * 12, " " * 33, "é" * 9, 'abcdefghijklmnopq"')


@pytest.mark.parametrize("seed", [4, 5])
def test_near_its_bound_a_string_shares_memos_for_the_short_tokens_only(seed):
    """With tokens of 18 to 40 bytes, counts 17 to 40 bytes before the bound are told apart by
    those alone: they share a memo for the tokens of at most 16 bytes, and the long ones get
    masks of their own. Every mask is still the reference's."""
    mask = _walk_bounded(70, seed, LONG_PIECES)
    failed, done, short = mask.dynamic_stats["memo_transfers"]
    assert done > short > 0


def test_memos_are_not_transferred_between_counts_a_token_tells_apart():
    """Twelve bytes before the bound a count is told apart by the 12-byte token: the counts
    there are never given another count's memo (the masks above check it, and here no memo is
    transferred at all when the bound leaves every count that close)."""
    mask = _walk_bounded(12, 3)
    assert mask.dynamic_stats["memo_transfers"][1] == 0


def _walk_checked(mask, pieces, rng, steps, prefer, p):
    """A random walk whose every mask is compared with the reference's: a token whose piece
    ``prefer`` holds for with probability ``p`` (when one is allowed), any allowed one else."""
    state, data = mask.start(), b""
    for _step in range(steps):
        words = mask.get_mask(state)
        assert words.tobytes() == reference_words(mask, data).tobytes(), data
        ok = sorted(allowed(words) - set(mask.vocab.eos_token_ids))
        if not ok:
            return
        preferred = [i for i in ok if prefer(pieces[i])]
        tok = rng.choice(preferred if preferred and rng.random() < p else ok)
        assert state.commit(tok)
        data += pieces[tok].encode() if isinstance(pieces[tok], str) else pieces[tok]


STRING = r'/"(?:[^"\\\x00-\x1f]|\\["\\n]){0,%d}"/'
SEVERAL = 'start: "{" A "," B "," C "}"\nA: %s\nB: %s\nC: %s\n' % (STRING % 40, STRING % 60, STRING % 12)


@pytest.mark.parametrize("pieces,seed,long_tokens", [(BOUNDED_PIECES, 0, False), (BOUNDED_PIECES, 1, False),
                                                     (LONG_PIECES, 2, True), (LONG_PIECES, 3, True)])
def test_strings_of_other_bounds_share_the_shape_of_their_walks(pieces, seed, long_tokens):
    """Three bounded strings are three terminals, and the first mask of each used to walk the
    trie. A memo is relabelled from another terminal's when their walks have the same shape —
    far from both bounds, the same tokens stay inside and the closing quote is at the same trie
    nodes — with frontier classes of its own (what the parser does after this terminal): for
    the short tokens only when long ones tell the bounds apart. Every mask is the reference's."""
    pieces = list(pieces) + ["{", ",", "}", '",', '"}', '","']
    mask = glrmask.compile(SEVERAL, tiny_vocab(pieces), format="lark", mode="dynamic")
    # mostly staying inside a string: to its bound
    _walk_checked(mask, pieces, random.Random(seed), 400, lambda p: '"' not in p, 0.97)
    failed, done, short = mask.dynamic_stats["memo_relabels"]
    assert done > 0 and (short > 0) == long_tokens


TEXT = ('start: "{" (pair ("," pair)*)? "}"\npair: KEY ":" VALUE\n'
        'KEY: /"(?!(?:name|note)")(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\n])*"/ | /"name"/ | /"note"/\n'
        'VALUE: /"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\n])*"/\n')
TEXT_PIECES = ["a", "ab", "na", "name", "no", "note", "é", "中", "aé", "éa", "a中b", "中文字", "😀", b"\xc3", b"\xa9",
               b"\xe4\xb8", b"\xad", b"a\xc3", b"\xa9b", '"', '"a', 'a"', '"n', 'é"', ":", ",", "{", "}", '":',
               '","', "\\n", "\\", " "]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_strings_and_keys_of_multibyte_text_mask_exactly(seed):
    """Inside a string (and a key past its exclusion lookahead) every well-formed character,
    multi-byte ones too, reads back to the same lexer state: the walk takes subtrees of such
    text whole. Tokens that split a character, start mid-character or hold a quote are stepped.
    Every mask on random walks is the reference's."""
    mask = glrmask.compile(TEXT, tiny_vocab(TEXT_PIECES), format="lark", mode="dynamic")
    rng = random.Random(seed)
    for _walk in range(4):  # (mostly not closing the object: long documents)
        _walk_checked(mask, TEXT_PIECES, rng, 60, lambda p: p != "}", 0.95)


def test_free_text_in_a_json_object_masks_like_the_static_engine(gpt2):
    """A free-form string and extra properties (a key past its exclusion lookahead) with
    accented, CJK and emoji text: dynamic ≡ static at every token."""
    schema = {"type": "object", "properties": {"note": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["note"]}
    static = glrmask.compile_json_schema(schema, gpt2, mode="static")
    dynamic = glrmask.compile_json_schema(schema, gpt2, mode="dynamic")
    docs = [{"note": "café crème, naïve façade — 東京 😀", "n": 3},
            {"note": "plain", "ключ": "значение", "日本": "語"}]
    for doc in docs:
        s, d = static.start(), dynamic.start()
        for tok in gpt2.encode(json.dumps(doc, ensure_ascii=False)):
            assert dynamic.get_mask(d).tobytes() == static.get_mask(s).tobytes(), doc
            assert s.commit(tok) and d.commit(tok)
        assert s.is_accepting() and d.is_accepting()


@pytest.mark.parametrize("max_length", [60, 400])
def test_a_bounded_json_string_masks_like_the_static_engine_at_every_count(max_length, gpt2):
    """The same with a real vocabulary (gpt2's longest string tokens are ~60 bytes, so at
    ``maxLength: 60`` every count is told apart, at 400 most are not): random walks through a
    bounded JSON string to its bound, dynamic ≡ static at every token."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": max_length}},
              "required": ["s"], "additionalProperties": False}
    static = glrmask.compile_json_schema(schema, gpt2, mode="static")
    dynamic = glrmask.compile_json_schema(schema, gpt2, mode="dynamic")
    rng = random.Random(max_length)
    prefix = gpt2.encode('{"s": "')
    for _walk in range(3):
        s, d = static.start(), dynamic.start()
        for tok in prefix:
            assert s.commit(tok) and d.commit(tok)
        for k in range(max_length + 2):
            want = static.get_mask(s)
            assert dynamic.get_mask(d).tobytes() == want.tobytes(), (max_length, k)
            toks = sorted(allowed(want))
            if not toks or s.is_accepting():
                break
            tok = rng.choice(toks)
            assert s.commit(tok) and d.commit(tok)
    if max_length == 400:
        assert dynamic.dynamic_stats["memo_transfers"][1] > 0


def test_bounded_json_strings_of_several_bounds_mask_like_the_static_engine(gpt2):
    """A tool call's string fields of different ``maxLength``: their memos are relabelled from
    one another's; random documents through all of them, dynamic ≡ static at every token."""
    bounds = {"name": 30, "city": 45, "note": 120, "code": 8}
    schema = {"type": "object", "properties": {k: {"type": "string", "maxLength": n} for k, n in bounds.items()},
              "required": list(bounds), "additionalProperties": False}
    static = glrmask.compile_json_schema(schema, gpt2, mode="static")
    dynamic = glrmask.compile_json_schema(schema, gpt2, mode="dynamic")
    rng = random.Random(7)
    words = "the of and a to in is you that it he was for on are as with his they".split()
    for _doc in range(3):
        doc = {k: " ".join(rng.choice(words) for _ in range(40))[:rng.randint(0, n)] for k, n in bounds.items()}
        s, d = static.start(), dynamic.start()
        for tok in gpt2.encode(json.dumps(doc)):
            assert dynamic.get_mask(d).tobytes() == static.get_mask(s).tobytes(), doc
            assert s.commit(tok) and d.commit(tok)
        assert s.is_accepting() and d.is_accepting()
    assert dynamic.dynamic_stats["memo_relabels"][1] > 0
