"""No-repeat-ngram guard: never emit an n-gram that the history already contains (DESIGN §9.2).

With size ``n`` the guard bans every token that followed an earlier occurrence of the current last
``n - 1`` tokens, exactly like ``no_repeat_ngram_size`` in Hugging Face transformers. It is a hard
constraint on purpose (a confident model cannot pay its way through it), so it also bans legitimate
repeats: use small ``n`` with care on code or structured output, and prefer a window or whitelist.

The per-request state (:class:`NoRepeatNGramState`, native: ``glrmask_ext.guard_ngram``) keeps an
index ``(n-1)-gram → count per follower``, so pushing a token, popping one (rollback) and sliding
the window are O(n) with no scan of the history, and ``fill_banned`` clears the current ban list's
bits in C.

Combined with a grammar mask the grammar wins: if the guard's ban would leave no allowed token, the
ban is skipped for that step, counted in :attr:`NoRepeatNGramState.relaxed_steps`, and reported by
``fill_banned`` — a row is never left all-disallowed.
"""
from __future__ import annotations

from collections.abc import Iterable

from glrmask_ext.guard_ngram import NoRepeatNGramState

from .errors import NoRepeatNGramError
from .fill_result import FillResult

__all__ = ["FillResult", "NoRepeatNGram", "NoRepeatNGramState"]


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
