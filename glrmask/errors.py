"""Every error glrmask raises on bad input derives from :class:`GlrmaskError`.

Callers (serving engines) catch one base class; each subclass says which input was wrong so the
message can point at it (grammar line and column, the regex, the schema path, the artifact).
"""
from __future__ import annotations


class GlrmaskError(Exception):
    """Base class of all glrmask errors."""


class GrammarError(GlrmaskError):
    """The grammar text is malformed or refers to unknown rules/terminals."""


class RegexError(GrammarError):
    """A terminal's regex uses a construct outside the supported subset (DESIGN §2)."""


class GrammarTooComplex(GlrmaskError):
    """A compilation budget (states, edges, time) was exceeded; the message names the stage and limit."""


class UnsupportedSchema(GlrmaskError):
    """A JSON Schema uses keywords that cannot be enforced; the message lists them with JSON pointers."""


class VocabError(GlrmaskError):
    """A tokenizer could not be loaded or does not fit the request."""


class ArtifactError(GlrmaskError):
    """A compiled artifact is corrupt, of another format version, or bound to another vocabulary."""
