"""What an emulated accelerator does to the numbers: the answers it gives for its ``numerics`` (exact, rounded to
f16 or bf16, requantized to int8, or deliberately corrupt), and the key under which an input's real answer is
kept (``emulated``'s memo)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

NUMERICS = ("exact", "f16", "bf16", "int8", "corrupt")


def _digest(inputs: Sequence[np.ndarray]) -> bytes | None:
    """A key for the memo: dtype, shape and bytes of every input; None for what has no buffer (objects)."""
    h = hashlib.blake2b(digest_size=16)
    try:
        for a in inputs:
            if not isinstance(a, np.ndarray) or a.dtype.hasobject:
                return None
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    except (TypeError, ValueError, BufferError):
        return None
    return h.digest()


def _numerics(a: np.ndarray, numerics: str) -> np.ndarray:
    if numerics == "exact" or not isinstance(a, np.ndarray):
        return a.copy() if isinstance(a, np.ndarray) else a
    if numerics == "corrupt":  # values move along the last axis (and the top-1 class with them); single ones flip
        if a.ndim and a.shape[-1] > 1:
            return np.roll(a, max(1, a.shape[-1] // 3), axis=-1)
        return ~a if a.dtype.kind in "iub" else (1.0 - a).astype(a.dtype)
    if a.dtype.kind != "f":
        return a.copy()  # integer outputs (quantized, class ids) pass unchanged
    if numerics == "f16":
        return a.astype(np.float16).astype(a.dtype)
    if numerics == "bf16":
        return _bf16(a)
    scale = float(np.max(np.abs(a))) / 127 if a.size else 0.0  # int8: symmetric per-tensor requantization
    return (np.round(a / scale) * scale).astype(a.dtype) if scale > 0 else a.copy()


def _bf16(a: np.ndarray) -> np.ndarray:
    """Round to the nearest bfloat16 (ties to even), as f32 values."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(a.dtype)
