"""The reference: the ground truth every faster path is tested against, and ``mode="dynamic"``.

* :mod:`.glr` — a GLR recognizer over interned, persistent stacks (parser side);
* :mod:`.recognizer` — lexer lanes × GLR frontiers × pending conditions, byte by byte, a lazily
  built DFA over configuration sets (text side);
* :mod:`.dynamic_masker` — masks by walking the vocabulary trie through the recognizer.

They favour obvious correctness over speed. The compiler does not import them (the stage tests
do); the native runtime uses them only to answer a configuration its Parser DWA has no root for.
"""
from .dynamic_masker import DEFAULT_STEP_TRANSITIONS, DynamicMasker
from .glr import EMPTY_FRONTIER, GLR, Frontier, GLRError, StackNode, recognize
from .recognizer import BOUNDARY, Config, ConfigSet, Recognizer

__all__ = ["BOUNDARY", "Config", "ConfigSet", "DEFAULT_STEP_TRANSITIONS", "DynamicMasker", "EMPTY_FRONTIER",
           "Frontier", "GLR", "GLRError", "Recognizer", "StackNode", "recognize"]
