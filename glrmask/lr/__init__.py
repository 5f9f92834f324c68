"""LR(1) tables with conflicts kept, and the reference GLR recognizer (DESIGN §4.4)."""
from glrmask.lr.glr import EMPTY_FRONTIER, GLR, Frontier, GLRError, StackNode, recognize
from glrmask.lr.table import AUG_START, END, Action, LRTable

__all__ = [
    "AUG_START",
    "END",
    "EMPTY_FRONTIER",
    "Action",
    "Frontier",
    "GLR",
    "GLRError",
    "LRTable",
    "StackNode",
    "recognize",
]
