"""The offline compiler's stages after the LR table (DESIGN §4.5 onwards).

Each stage lives in its own module; this package re-exports their public entry points.
"""
from glrmask.compiler.stack_effects import (
    DEFAULT_MAX_STATES,
    EffectAutomaton,
    StackEffectError,
    StackEffects,
)

__all__ = ["DEFAULT_MAX_STATES", "EffectAutomaton", "StackEffectError", "StackEffects"]
