"""Type stub of the native phrase-guard journal (see guard_phrase.pyx for the semantics)."""
from typing import Any

class PhraseEvent:
    released_tokens: list[int]
    released_text: str
    rewind: int
    position: int
    released_logprobs: list[Any]
    dropped_tokens: list[int]
    banned_token: int | None
    matched_phrase: str | None
    def __init__(
        self,
        released_tokens: list[int],
        released_text: str,
        rewind: int,
        position: int,
        released_logprobs: list[Any],
        dropped_tokens: list[int],
        banned_token: int | None,
        matched_phrase: str | None,
    ) -> None: ...

class PhraseRequest:
    def __init__(self, compiled: Any, max_rewinds: int, max_pending_tokens: int, vocab: Any) -> None: ...
    @property
    def position(self) -> int: ...
    @property
    def n_released(self) -> int: ...
    @property
    def pending_tokens(self) -> list[int]: ...
    @property
    def rewinds(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def banned_tokens(self, position: int) -> list[int]: ...
    def fill_banned(self, out_words: Any, position: int) -> int: ...
    def push(self, token_id: int, logprob: Any = None) -> PhraseEvent: ...
    def finish(self, stop_token_included: bool = False, stop_token: int | None = None) -> PhraseEvent: ...

def build_fold_table() -> None: ...
