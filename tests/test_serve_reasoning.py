"""Splitting <think>…</think> into reasoning and content on streamed text, tags split across chunks."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from glrmask.serve.reasoning import ReasoningSplitter


def run(chunks, **kw):
    splitter = ReasoningSplitter(**kw)
    parts = [p for c in chunks for p in splitter.push(c)] + splitter.finish()
    out: dict[str, str] = {"reasoning": "", "content": ""}
    for kind, text in parts:
        out[kind] += text
    return out, parts


def test_tags_split_across_chunks_still_switch_the_field():
    out, _ = run(["<thi", "nk>\nthe user asks 1+1", ", it is 2.\n</th", "ink>\n\n1+1 is ", "2."])
    assert out == {"reasoning": "\nthe user asks 1+1, it is 2.\n", "content": "\n\n1+1 is 2."}


def test_a_template_that_opens_the_think_block_starts_inside_it():
    out, _ = run(["plan</think>answer"], start_in_reasoning=True)
    assert out == {"reasoning": "plan", "content": "answer"}


def test_a_partial_tag_that_never_completes_is_text():
    out, _ = run(["a <th", "ing"])
    assert out == {"reasoning": "", "content": "a <thing"}


def test_nothing_is_released_that_may_still_be_a_tag():
    splitter = ReasoningSplitter()
    assert splitter.push("x<thin") == [("content", "x")]
    assert splitter.push("k>y") == [("reasoning", "y")]


@given(st.text(alphabet="ab<>/thinkk", max_size=40), st.lists(st.integers(0, 40), max_size=8))
def test_any_chunking_gives_the_same_split(text, cuts):
    cuts = sorted({c for c in cuts if c <= len(text)})
    chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
    assert run(chunks)[0] == run([text])[0]
