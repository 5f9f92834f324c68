"""The fused GPU kernel behind :func:`glrmask.apply_token_bitmask_` on CUDA tensors.

One program masks ``BLOCK`` consecutive tokens of one row: it loads the ``BLOCK / 32`` mask words
that cover them, expands each word to its 32 bits in registers, and stores -inf only where a bit is
clear. The logits are never read, so an allowed token costs no memory traffic at all, and there is
no temporary tensor: the whole apply is one launch, whatever the batch. Words past the end of the
mask load as 0, so logits wider than the mask become -inf (the contract of ``apply.py``).

Importable without Triton: :func:`supports` is then always False and the caller falls back to the
torch implementation.
"""
from __future__ import annotations

from typing import Any

try:  # optional: only on machines with a Triton build (CUDA)
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None
    tl = None

__all__ = ["supports", "apply"]

#: Tokens per program: 128 mask words, 16 KB of fp32 logits at most.
BLOCK = 4096


def supports(logits: Any) -> bool:
    """Whether the fused kernel can mask ``logits`` (a 2-D torch tensor) in place: Triton present,
    a CUDA tensor of a float dtype, tokens contiguous within a row."""
    if triton is None or not getattr(logits, "is_cuda", False):
        return False
    import torch  # noqa: PLC0415 - a tensor was given, so torch is imported

    return (
        logits.dim() == 2
        and logits.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
        and logits.stride(1) == 1
    )


def apply(logits: Any, bitmask: Any, indices: Any = None) -> None:
    """Mask the rows of ``logits`` (``(batch, width)``, row stride free, token stride 1) with the same
    rows of ``bitmask`` (``(mask_batch, words)`` int32 on the same device); ``indices`` (int tensor
    on the device) restricts it to those rows. Arguments are checked by the caller."""
    if triton is None:
        raise RuntimeError("glrmask.kernels.triton_apply.apply needs Triton")
    rows, width = logits.shape
    bitmask = bitmask.contiguous()
    n_rows = rows if indices is None else indices.numel()
    if n_rows == 0 or width == 0:
        return
    if indices is not None:
        indices = indices.to(device=logits.device).contiguous()
    grid = (n_rows, triton.cdiv(width, BLOCK))
    _mask_kernel[grid](
        logits,
        bitmask,
        indices if indices is not None else bitmask,  # unused pointer when HAS_INDICES is False
        width,
        bitmask.shape[1],
        logits.stride(0),
        bitmask.stride(0),
        HAS_INDICES=indices is not None,
        BLOCK=BLOCK,
        num_warps=4,
    )


if triton is not None:

    @triton.jit
    def _mask_kernel(
        logits_ptr,
        bitmask_ptr,
        indices_ptr,
        width,
        n_words,
        logits_row_stride,
        bitmask_row_stride,
        HAS_INDICES: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        pid_row = tl.program_id(0)
        pid_block = tl.program_id(1)
        if HAS_INDICES:
            row = tl.load(indices_ptr + pid_row).to(tl.int64)
        else:
            row = pid_row.to(tl.int64)
        WORDS: tl.constexpr = BLOCK // 32
        word = pid_block * WORDS + tl.arange(0, WORDS)
        words = tl.load(bitmask_ptr + row * bitmask_row_stride + word, mask=word < n_words, other=0)
        bit = tl.arange(0, 32)
        allowed = (words[:, None] >> bit[None, :]) & 1  # (WORDS, 32): token word*32 + bit
        token = word[:, None] * 32 + bit[None, :]
        # (made in float32 and cast: Triton's CPU interpreter has no bfloat16 constants)
        neg_inf = tl.full((WORDS, 32), float("-inf"), tl.float32).to(logits_ptr.dtype.element_ty)
        tl.store(logits_ptr + row * logits_row_stride + token, neg_inf, mask=(allowed == 0) & (token < width))
