"""Incremental detokenization: token ids in, text chunks out, each chunk final.

Two things keep text from leaving as soon as a token is sampled:

* **Half characters.** Byte-level tokenizers split an emoji or a CJK character over several tokens;
  the bytes of the first alone are not text. The decoder keeps incomplete UTF-8 and emits a
  character when its last byte arrives (invalid bytes become U+FFFD, exactly as a one-shot
  ``bytes.decode("utf-8", "replace")`` of the whole output shows them).
* **Stop strings.** A stop string can span tokens, and sent text cannot be taken back, so the
  longest tail of the text that is still the beginning of a stop string is held back until it is
  clearly not one. When a stop string completes, the text is cut just before it and the stream
  ends. The cut is where a stop string *first ends* (ties: the longest), so the result does not
  depend on how the text was split into tokens.

Banned phrases are held back one stage earlier, by the phrase guard (``glrmask.guards``), which
owns rewinds: the engine pushes only the tokens the guard released, so every chunk is final.

Text is decoded from the vocabulary's token bytes (``Vocab.token_bytes``), the same bytes the
grammar and the phrase guard judged, rather than through the tokenizer's decoder chain (which
e.g. strips a SentencePiece leading space and cannot be rewound): for byte-level tokenizers the
two agree, and the tests use ``tokenizers``' ``DecodeStream`` as the independent judge of that.
"""
from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

__all__ = ["IncrementalDetokenizer", "TextChunk", "truncate_at_stop"]


class TokenBytes(Protocol):
    def token_bytes(self, token_id: int) -> bytes: ...


class TextChunk(NamedTuple):
    """What one :meth:`IncrementalDetokenizer.push` (or ``finish``) releases."""

    text: str
    """New final text (possibly empty)."""
    n_tokens: int
    """How many more tokens have now had all their text released (to attach logprobs to)."""


def truncate_at_stop(text: str, stop: Sequence[str]) -> tuple[str, str | None]:
    """``text`` cut before the stop string that ends first (ties: the longest), and that string.

    The reference definition of stop-string truncation: what the streamed chunks must add up to.
    Empty stop strings are ignored.
    """
    best: tuple[int, int] | None = None
    found = None
    for s in stop:
        i = text.find(s) if s else -1
        if i >= 0:
            key = (i + len(s), i)
            if best is None or key < best:
                best, found = key, s
    if best is None:
        return text, None
    return text[: best[1]], found


class IncrementalDetokenizer:
    """One request's text stream: push tokens, get final text chunks; stop strings cut the stream.

    ``stop``: stop strings (empty strings are ignored). After a stop string is found,
    :attr:`stopped` is True, :attr:`stop_string` names it and further pushes add nothing.
    """

    __slots__ = (
        "_token_bytes", "_stop", "_longest", "_decoder", "_text", "_sent", "_ends", "_open",
        "_counted", "stopped", "stop_string", "_finished",
    )

    def __init__(self, vocab: TokenBytes, stop: Iterable[str] = ()) -> None:
        self._token_bytes = vocab.token_bytes
        self._stop = tuple(sorted({s for s in stop if s}, key=len, reverse=True))
        self._longest = max((len(s) for s in self._stop), default=0)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._text = ""
        self._sent = 0
        self._ends: list[int] = []  # per token: end of its text (chars), once its bytes are decoded
        self._open = 0  # trailing tokens whose bytes are still (partly) in the decoder
        self._counted = 0  # tokens reported in n_tokens so far
        self.stopped = False
        self.stop_string: str | None = None
        self._finished = False

    @property
    def text(self) -> str:
        """The final text so far (released and held), cut at a stop string once one was found."""
        return self._text

    def push(self, tokens: Iterable[int]) -> TextChunk:
        """Append tokens (in order); return the text that is now final."""
        if self._finished:
            raise RuntimeError("push after finish")
        if self.stopped:
            return TextChunk("", 0)
        before = len(self._text)
        for tok in tokens:
            piece = self._decoder.decode(self._token_bytes(tok))
            self._text += piece
            self._ends.append(len(self._text))
            if self._decoder.getstate()[0]:
                self._open += 1
            else:
                if self._open:  # the tokens of a split character end where it ends
                    n = len(self._ends)
                    for j in range(n - 1 - self._open, n - 1):
                        self._ends[j] = len(self._text)
                self._open = 0
        if self._stop and len(self._text) > before:
            self._find_stop(max(0, before - self._longest + 1))
        if self.stopped:
            return self._emit(len(self._text))
        return self._emit(len(self._text) - self._held())

    def finish(self) -> TextChunk:
        """End of the stream: release everything held (trailing broken bytes as U+FFFD)."""
        if self._finished:
            return TextChunk("", 0)
        self._finished = True
        if not self.stopped:
            before = len(self._text)
            self._text += self._decoder.decode(b"", True)
            if self._open and len(self._text) > before:
                for j in range(len(self._ends) - self._open, len(self._ends)):
                    self._ends[j] = len(self._text)
            self._open = 0
            if self._stop and len(self._text) > before:
                self._find_stop(max(0, before - self._longest + 1))
        return self._emit(len(self._text), final=True)

    # ----------------------------------------------------------------------------- internals
    def _find_stop(self, start: int) -> None:
        best: tuple[int, int] | None = None
        for s in self._stop:
            i = self._text.find(s, start)
            if i >= 0 and (best is None or (i + len(s), i) < best):
                best, self.stop_string = (i + len(s), i), s
        if best is not None:
            self._text = self._text[: best[1]]
            self.stopped = True

    def _held(self) -> int:
        """Length of the longest tail of the text that is a proper prefix of a stop string."""
        text = self._text
        hold = 0
        for s in self._stop:
            for k in range(min(len(s) - 1, len(text)), hold, -1):
                if text.endswith(s[:k]):
                    hold = k
                    break
        return hold

    def _emit(self, end: int, final: bool = False) -> TextChunk:
        end = max(end, self._sent)
        delta = self._text[self._sent:end]
        self._sent = end
        if self.stopped:  # tokens with text before the cut (the one the stop string begins in too)
            n_done = self._counted
            while n_done < len(self._ends) and (self._ends[n_done - 1] if n_done else 0) < end:
                n_done += 1
        elif final:
            n_done = len(self._ends)
        else:
            n_done = self._counted
            limit = len(self._ends) - self._open
            while n_done < limit and self._ends[n_done] <= end:
                n_done += 1
        n_new, self._counted = n_done - self._counted, n_done
        return TextChunk(delta, n_new)
