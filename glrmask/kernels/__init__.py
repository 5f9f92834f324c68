"""Kernels that apply packed token bitmasks to logits (CPU, torch devices, a fused Triton kernel).

``apply_token_bitmask_`` is the one entry point; it picks the implementation from the logits'
type and device (see :mod:`glrmask.kernels.apply`). torch and Triton are optional imports.
"""
from .apply import BitmaskError, allocate_token_bitmask, apply_token_bitmask_

__all__ = ["BitmaskError", "allocate_token_bitmask", "apply_token_bitmask_"]
