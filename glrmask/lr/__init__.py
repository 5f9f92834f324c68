"""LR(1) tables with conflicts kept (DESIGN §4.4); the GLR driver over them is the reference's
(:mod:`glrmask.reference.glr`)."""
from glrmask.lr.table import AUG_START, END, Action, LRTable

__all__ = [
    "AUG_START",
    "END",
    "Action",
    "LRTable",
]
