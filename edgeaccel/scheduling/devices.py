"""Which thermal/power domain an executor runs on, and which sensors describe that domain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..telemetry.sensors import SensorSpec, auto_spec

_KINDS = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "edgetpu": "edgetpu", "tpu": "tpu", "npu": "npu"}


def device_of(executor: Any) -> str:
    """The domain name for an executor: a simulated executor names its device; a real one is grouped by the
    kind of device it runs on ("CPU" -> "cpu", "GPU.0"/"CUDA:1" -> "gpu", "EdgeTPU" -> "edgetpu")."""
    heat = getattr(executor, "heat", None)
    if heat is not None:
        return heat.p.name
    device = str(executor.info.device)
    base = device.split(":")[0].split(".")[0].lower()
    return _KINDS.get(base, base or "unknown")


def sensors_for(devices: list[str], root: Path, nvml: Any | None = None) -> dict[str, SensorSpec]:
    return {name: auto_spec(name, root, nvml) for name in devices}
