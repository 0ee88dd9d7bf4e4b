"""GPU memory guards: ``RuntimeOptions(gpu_mem_limit_mb=N)`` (validated there) caps what the runtime may take
on the GPU.

- ONNX Runtime (CUDA, and the CUDA provider behind TensorRT): the CUDA provider's ``gpu_mem_limit`` (bytes,
  the cap of its BFC arena) with ``arena_extend_strategy`` ``kSameAsRequested``, so that the arena grows by what
  is asked rather than to the next power of two, which near the cap would refuse an allocation that fits. With
  TensorRT, ``trt_max_workspace_size`` is capped too; TensorRT's engines themselves are allocated outside ORT's
  arena, so the cap bounds the CUDA part and the builder's scratch space, not the engine's weights.
- OpenVINO's GPU plugin has no such setting: its memory properties are read-only (GPU_DEVICE_TOTAL_MEM_SIZE,
  GPU_DEVICE_MAX_ALLOC_MEM_SIZE, GPU_MEMORY_STATISTICS), and AVAILABLE_DEVICE_MEM_SIZE only sizes the
  MAX_BATCH_SIZE estimate. A limit is therefore refused there (and on AUTO, which may pick the GPU), never
  ignored; so is any other GPU an executor does not declare in ``gpu_mem_limit_devices``.
- A candidate that uses no GPU (CPU, NPU, Edge TPU) runs as asked, with a note that the limit does not apply.

When a model does not fit, ORT's allocation failure ("Failed to allocate memory for requested buffer of size N",
"Available memory of 0 is smaller than requested bytes of N", both from BFCArena) becomes GpuMemoryLimitError,
which names the limit and what to do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import GpuMemoryLimitError
from .device import base_of
from .translate import ErrorRule, Failure

if TYPE_CHECKING:
    from .executor_options import ExecutorOptions

log = logging.getLogger("edgeaccel")

ARENA_STRATEGY = "kSameAsRequested"
# What ORT's BFC arena says when an allocation does not fit (onnxruntime/core/framework/bfc_arena.cc)
ALLOCATION_FAILED = ("Failed to allocate memory", "BFCArena", "Available memory of")
OPENVINO_HAS_NONE = ("OpenVINO's GPU plugin has no GPU memory limit to set (its memory properties "
                     "GPU_DEVICE_TOTAL_MEM_SIZE, GPU_DEVICE_MAX_ALLOC_MEM_SIZE and GPU_MEMORY_STATISTICS are "
                     "read-only; AVAILABLE_DEVICE_MEM_SIZE only sizes the MAX_BATCH_SIZE estimate)")


def limit_bytes(limit_mb: float) -> int:
    return int(limit_mb * (1 << 20))


def ort_provider_options(provider: str, limit_mb: float | None) -> dict[str, object]:
    """The provider options that hold ONNX Runtime's ``provider`` to the limit ({} without one)."""
    if limit_mb is None:
        return {}
    if provider == "CUDAExecutionProvider":
        return {"gpu_mem_limit": limit_bytes(limit_mb), "arena_extend_strategy": ARENA_STRATEGY}
    if provider == "TensorrtExecutionProvider":
        return {"trt_max_workspace_size": limit_bytes(limit_mb)}
    return {}


def refusal(cls: type, device: str, options: ExecutorOptions) -> str | None:
    """Why ``cls`` cannot run on ``device`` under the caller's GPU memory limit: it would use a GPU (or may, on
    AUTO) without a way to cap its memory. None when there is no limit, the executor applies it, or the device
    is not a GPU."""
    limit = getattr(options, "gpu_mem_limit_mb", None)
    if limit is None or base_of(device) in getattr(cls, "gpu_mem_limit_devices", frozenset()):
        return None
    kind = cls.kind_of(device)
    if kind not in ("gpu", "auto"):
        return None
    if cls.runtime == "openvino":
        why = OPENVINO_HAS_NONE + (", and AUTO may place the model on the GPU" if kind == "auto" else "")
    else:
        why = f"{getattr(cls, 'label', cls.runtime)} offers no GPU memory limit on {device} that edgeaccel can set"
    return (f"gpu_mem_limit_mb={limit:g} asked for, but {why}: pin a device it applies to "
            "(onnxruntime on CUDA), or leave the limit out")


def note(cls: type, device: str, options: ExecutorOptions) -> str | None:
    """What to say when a limit is set and ``device`` uses no GPU: the limit does not apply (not silence)."""
    limit = getattr(options, "gpu_mem_limit_mb", None)
    if limit is None or base_of(device) in getattr(cls, "gpu_mem_limit_devices", frozenset()):
        return None
    return f"gpu_mem_limit_mb={limit:g} does not apply to {cls.runtime}:{device}: it uses no GPU memory"


_noted: set[str] = set()


def log_note(text: str | None) -> None:
    """Log each note once per process: calibration and fallback open the same candidate again."""
    if text and text not in _noted:
        _noted.add(text)
        log.warning(text)


def _over_limit(f: Failure) -> bool:
    limit = getattr(f.options, "gpu_mem_limit_mb", None)
    return limit is not None and base_of(f.device) in ("CUDA", "TensorRT")


def _message(f: Failure) -> str:
    limit = f.options.gpu_mem_limit_mb
    return (f"{f.runtime} could not fit {f.name} on {f.device} within gpu_mem_limit_mb={limit:g} "
            f"({limit_bytes(limit)} bytes, the CUDA arena's gpu_mem_limit): {f.message}")


def _hint(f: Failure) -> str:
    return (f"raise gpu_mem_limit_mb above {f.options.gpu_mem_limit_mb:g}, run smaller inputs (batch, resolution), "
            "or let the model fall back to another executor (the default without strict=True)")


# ONNX Runtime's allocation failure under a limit: at load (initializers, TensorRT's engine) or at run
ORT_LIMIT_RULE = ErrorRule(GpuMemoryLimitError, contains=ALLOCATION_FAILED, stages=("load", "run"),
                           message=_message, hint=_hint, when=_over_limit)
