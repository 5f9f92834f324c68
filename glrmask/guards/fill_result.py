"""What :meth:`NoRepeatNGramState.fill_banned` returns.

It lives apart from ``ngram.py`` so that the native state (``glrmask_ext.guard_ngram``) can build
it without importing the module that imports the native state.
"""
from __future__ import annotations

from typing import NamedTuple


class FillResult(NamedTuple):
    """Outcome of :meth:`NoRepeatNGramState.fill_banned`."""

    cleared: int
    """Number of allowed tokens whose bits the guard cleared."""
    relaxed: bool
    """True when the ban was skipped because it would have emptied the row."""
