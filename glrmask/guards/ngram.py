"""No-repeat-ngram guard: never emit an n-gram that the history already contains (DESIGN §9.2).

With size ``n`` the guard bans every token that followed an earlier occurrence of the current last
``n - 1`` tokens, exactly like ``no_repeat_ngram_size`` in Hugging Face transformers. It is a hard
constraint on purpose (a confident model cannot pay its way through it), so it also bans legitimate
repeats: use small ``n`` with care on code or structured output, and prefer a window or whitelist.

The index maps each ``(n-1)``-gram of the history to a count of its followers, so pushing a token,
popping one (rollback) and sliding the window are O(n) with no scan of the history, and the current
ban list is one dictionary lookup. Counts (not sets) make removal exact when an n-gram occurs twice.

Combined with a grammar mask the grammar wins: if the guard's ban would leave no allowed token, the
ban is skipped for that step, counted in :attr:`NoRepeatNGramState.relaxed_steps`, and reported by
``fill_banned`` — a row is never left all-disallowed.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ._bits import as_word_row, clear_bits, set_bits
from .errors import NoRepeatNGramError


class FillResult(NamedTuple):
    """Outcome of :meth:`NoRepeatNGramState.fill_banned`."""

    cleared: int
    """Number of allowed tokens whose bits the guard cleared."""
    relaxed: bool
    """True when the ban was skipped because it would have emptied the row."""


class NoRepeatNGram:
    """Configuration of the guard (immutable); ``start(prompt)`` opens one state per request.

    ``n``: the n-gram size, 0 = off (the guard then never touches a mask). ``include_prompt``: the
    prompt's tokens are part of the history (n-grams inside the prompt and across its end count).
    ``window``: only n-grams lying entirely within the last ``window`` tokens of the history count
    (None = the whole history). ``whitelist``: token ids that are never banned.
    """

    def __init__(
        self,
        n: int,
        include_prompt: bool = True,
        window: int | None = None,
        whitelist: Iterable[int] = (),
    ) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise NoRepeatNGramError(f"no_repeat_ngram_size must be an int >= 0, got {n!r}")
        if window is not None and (not isinstance(window, int) or window < 1):
            raise NoRepeatNGramError(f"window must be None or an int >= 1, got {window!r}")
        self.n = n
        self.include_prompt = bool(include_prompt)
        self.window = window
        self.whitelist = frozenset(int(t) for t in whitelist)

    def start(self, prompt_tokens: Iterable[int] = ()) -> NoRepeatNGramState:
        return NoRepeatNGramState(self, prompt_tokens)


class NoRepeatNGramState:
    """History and incremental index of one request.

    Invariant: the index holds exactly the n-grams ``h[i:i+n]`` with ``lo <= i <= len(h) - n``,
    where ``lo = max(0, len(h) - window)`` (0 without a window), counted by ``(n-1)``-gram and
    follower.
    """

    __slots__ = ("_n", "_window", "_whitelist", "_hist", "_n_fixed", "_index", "relaxed_steps")

    def __init__(self, config: NoRepeatNGram, prompt_tokens: Iterable[int]) -> None:
        self._n = config.n
        self._window = config.window
        self._whitelist = config.whitelist
        self._hist: list[int] = []
        self._index: dict[tuple[int, ...], dict[int, int]] = {}
        self.relaxed_steps = 0
        """Steps where the ban was skipped so as not to empty the mask."""
        if config.include_prompt:
            for tok in prompt_tokens:
                self.push(tok)
        self._n_fixed = len(self._hist)

    @property
    def n_generated(self) -> int:
        """Tokens pushed after the prompt (what ``rollback`` may undo)."""
        return len(self._hist) - self._n_fixed

    def _lo(self, length: int) -> int:
        w = self._window
        return 0 if w is None or length <= w else length - w

    def _add(self, i: int) -> None:
        h = self._hist
        n1 = i + self._n - 1
        followers = self._index.get(key := tuple(h[i:n1]))
        if followers is None:
            self._index[key] = {h[n1]: 1}
        else:
            f = h[n1]
            followers[f] = followers.get(f, 0) + 1

    def _remove(self, i: int) -> None:
        h = self._hist
        n1 = i + self._n - 1
        key = tuple(h[i:n1])
        followers = self._index[key]
        f = h[n1]
        c = followers[f] - 1
        if c:
            followers[f] = c
        elif len(followers) == 1:
            del self._index[key]
        else:
            del followers[f]

    def push(self, token_id: int) -> None:
        """Append one token to the history."""
        n = self._n
        if n == 0:
            return
        h = self._hist
        h.append(token_id)
        length = len(h)
        if self._window is not None:
            old_lo, lo = self._lo(length - 1), self._lo(length)
            if lo > old_lo and old_lo <= length - 1 - n:
                self._remove(old_lo)
        else:
            lo = 0
        i = length - n
        if i >= lo:
            self._add(i)

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` pushes (the prompt cannot be rolled back)."""
        if self._n == 0:
            return
        if k < 0 or k > len(self._hist) - self._n_fixed:
            raise NoRepeatNGramError(
                f"cannot roll back {k} tokens: {len(self._hist) - self._n_fixed} were generated"
            )
        n = self._n
        h = self._hist
        for _ in range(k):
            length = len(h)
            lo = self._lo(length)
            i = length - n
            if i >= lo:
                self._remove(i)
            h.pop()
            if self._window is not None:
                new_lo = self._lo(length - 1)
                if new_lo < lo and new_lo <= length - 1 - n:
                    self._add(new_lo)

    def _followers(self) -> dict[int, int] | None:
        n = self._n
        h = self._hist
        if n == 0 or len(h) < n - 1:
            return None
        return self._index.get(tuple(h[len(h) - n + 1:]) if n > 1 else ())

    def banned(self) -> list[int]:
        """Tokens that would repeat an n-gram of the history if sampled now (sorted)."""
        followers = self._followers()
        if not followers:
            return []
        wl = self._whitelist
        return sorted(f for f in followers if f not in wl)

    def fill_banned(self, out_words: Any) -> FillResult:
        """Clear the banned tokens' bits in one packed int32 mask row, unless that empties it.

        Returns ``(cleared, relaxed)``. When every token the row allows is banned, the row is left
        as it was, ``relaxed`` is True and :attr:`relaxed_steps` grows by one.
        """
        followers = self._followers()
        if not followers:
            return FillResult(0, False)
        row = as_word_row(out_words)
        wl = self._whitelist
        cleared = clear_bits(row, [f for f in followers if f not in wl] if wl else followers)
        if cleared and not row.any():
            set_bits(row, cleared)
            self.relaxed_steps += 1
            return FillResult(0, True)
        return FillResult(len(cleared), False)
