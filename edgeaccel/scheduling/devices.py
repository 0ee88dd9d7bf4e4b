"""Which thermal/power domain an executor runs on, and which sensors describe that domain."""

from __future__ import annotations

from dataclasses import replace
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
    return device_of_name(str(executor.info.device))


def device_of_name(device: str) -> str:
    """The domain name for an executor's device string ("CUDA:1" -> "gpu")."""
    base = device.split(":")[0].split(".")[0].lower()
    return _KINDS.get(base, base or "unknown")


def sensors_for(devices: list[str], root: Path, nvml: Any | None = None) -> dict[str, SensorSpec]:
    """Sensors per device kind. A GPU on the real root is read through NVML when pynvml is importable."""
    notes: tuple[str, ...] = ()
    if nvml is None and "gpu" in devices and Path(root) == Path("/"):
        from ..telemetry.nvml import load_nvml

        nvml, reason = load_nvml()
        notes = (f"NVML: {reason}",) if reason else ()
    specs = {name: auto_spec(name, root, nvml) for name in devices}
    if notes and "gpu" in specs:
        specs["gpu"] = replace(specs["gpu"], notes=specs["gpu"].notes + notes)
    return specs
