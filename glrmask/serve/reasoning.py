"""Splitting a reasoning model's ``<think>…</think>`` from its answer on streamed text.

OpenAI-compatible servers return the reasoning in its own field (``reasoning_content``) and only
the answer in ``content``. The text arrives in chunks and a tag can be split across two of them
("<thi" + "nk>"), so the tail that could still be the beginning of the next tag is held back, as
stop strings are. Some chat templates already open the think block in the prompt; then the
output starts inside the reasoning (``start_in_reasoning=True``).
"""
from __future__ import annotations

__all__ = ["ReasoningSplitter"]


class ReasoningSplitter:
    """Streams ``(kind, text)`` parts, ``kind`` being ``"reasoning"`` or ``"content"``."""

    __slots__ = ("_open", "_close", "_buf", "_inside")

    def __init__(self, open_tag: str = "<think>", close_tag: str = "</think>", *,
                 start_in_reasoning: bool = False) -> None:
        self._open, self._close = open_tag, close_tag
        self._buf = ""
        self._inside = start_in_reasoning

    def push(self, text: str) -> list[tuple[str, str]]:
        """Parts of ``text`` that are now certain (a possible partial tag at the end is held)."""
        self._buf += text
        out: list[tuple[str, str]] = []
        while self._buf:
            tag = self._close if self._inside else self._open
            i = self._buf.find(tag)
            if i >= 0:
                self._add(out, self._buf[:i])
                self._buf = self._buf[i + len(tag):]
                self._inside = not self._inside
                continue
            keep = next((k for k in range(min(len(tag) - 1, len(self._buf)), 0, -1)
                         if self._buf.endswith(tag[:k])), 0)
            self._add(out, self._buf[: len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep:]
            break
        return out

    def finish(self) -> list[tuple[str, str]]:
        """The held tail (a partial tag that never completed is text)."""
        out: list[tuple[str, str]] = []
        self._add(out, self._buf)
        self._buf = ""
        return out

    def _add(self, out: list[tuple[str, str]], text: str) -> None:
        if not text:
            return
        kind = "reasoning" if self._inside else "content"
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
