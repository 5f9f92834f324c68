"""Drive a :class:`Lexer` over a whole text for one terminal and settle its match (tests, tools).

This is the reference use of the event/condition protocol: every event's condition is stepped over
the bytes that follow it; the one that becomes TRUE is ``re.match``'s answer. At the end of the
document the pending conditions are resolved with :meth:`Lexer.cond_at_end`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .lexer import Lexer


@dataclass(frozen=True)
class Outcome:
    """``decided`` False: the bytes seen so far do not settle the match yet. Otherwise ``end`` is
    the match length in bytes, or None when the terminal does not match."""

    decided: bool
    end: int | None = None


class Settler:
    """Incremental driver: ``feed`` bytes in any chunks, read ``outcome()``, then ``finish()``."""

    def __init__(self, lexer: Lexer, terminal: int | str):
        if isinstance(terminal, str):
            terminal = lexer.terminal_names.index(terminal)
        self.lexer = lexer
        self.terminal = terminal
        self.state = lexer.restrict(lexer.initial, [terminal])
        self.pending: list[tuple[int, int]] = []  # (end, cond)
        self.winners: list[int] = []
        self.pos = 0

    def feed(self, data: bytes) -> None:
        lx = self.lexer
        for b in data:
            still = []
            for end, c in self.pending:
                c = lx.cond_step(c, b)
                if c == lx.TRUE:
                    self.winners.append(end)
                elif c != lx.FALSE:
                    still.append((end, c))
            self.pending = still
            self.pos += 1
            if self.state >= 0:
                self.state, events = lx.step(self.state, b)
                for t, c in events:
                    assert t == self.terminal
                    if c == lx.TRUE:
                        self.winners.append(self.pos)
                    elif c != lx.FALSE:
                        self.pending.append((self.pos, c))
        if len(self.winners) > 1:
            raise AssertionError(f"several candidates settled as re.match's answer: {self.winners}")

    def outcome(self) -> Outcome:
        """What the bytes fed so far settle (more bytes may follow)."""
        if self.winners:
            return Outcome(True, self.winners[0])
        if not self.pending and self.state < 0:
            return Outcome(True, None)
        return Outcome(False)

    def finish(self) -> Outcome:
        """Resolve at the end of the document (no more bytes)."""
        if self.winners:
            return Outcome(True, self.winners[0])
        ends = [end for end, c in self.pending if self.lexer.cond_at_end(c)]
        if len(ends) > 1:
            raise AssertionError(f"several candidates pass at the end of the document: {ends}")
        return Outcome(True, ends[0] if ends else None)


def settle(lexer: Lexer, terminal: int | str, text: bytes, at_end: bool) -> Outcome:
    """Outcome of ``terminal`` matched at the start of ``text`` (``at_end``: nothing follows)."""
    s = Settler(lexer, terminal)
    s.feed(text)
    return s.finish() if at_end else s.outcome()


def match_end(lexer: Lexer, terminal: int | str, text: bytes, at_end: bool) -> int | None:
    """Settled match length in bytes. ``at_end=True``: ``text`` is the rest of the document and
    None means no match. ``at_end=False``: more unknown text follows; None when undecided or
    when it certainly does not match (use :func:`settle` to tell those apart)."""
    return settle(lexer, terminal, text, at_end).end
