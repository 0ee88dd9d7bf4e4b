"""Which thermal/power domain an executor runs on, and which sensors describe that domain.

A device string ("CPU", "GPU.1", "CUDA:0", "TensorRT:0", "EdgeTPU:usb:0", "QNN", "RKNPU", "Hailo8") is
reduced to its base name (before ':' or '.') and given a kind: the executor class's own ``device_kinds``
first (how a plug-in says what its devices are), then the names of the devices edgeaccel and its profiles
know. The kind names the domain ("gpu" for CUDA and TensorRT alike: one GPU, one set of sensors). A device of
no known kind keeps its own name as its domain and, like any device without sensors, says so: "no sensor for
<device>" is in its notes, which the trace and the stats show; it is never silently run as if it were cool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..executors.device import base_of
from ..telemetry.sensors import SensorSpec, auto_spec

# Device base names -> kind, for executors whose class is hidden (an isolated worker) or declares no kind: every
# device the built-in executor classes and the profiles (profiles/types.py DEVICE_NAMES) name, and common others.
KIND_OF_NAME = {
    "cpu": "cpu", "xnnpack": "cpu",
    "gpu": "gpu", "cuda": "gpu", "tensorrt": "gpu", "rocm": "gpu", "migraphx": "gpu", "dml": "gpu",
    "directml": "gpu", "opencl": "gpu", "vulkan": "gpu", "webgpu": "gpu",
    "npu": "npu", "qnn": "npu", "coreml": "npu", "rknpu": "npu", "rknn": "npu", "hailo": "npu", "vitisai": "npu",
    "cann": "npu", "ascend": "npu",
    "edgetpu": "edgetpu", "coral": "edgetpu", "apex": "edgetpu",
    "tpu": "tpu",
    "dsp": "dsp", "hexagon": "dsp",
    # the runtime chooses the device itself: no one domain to read
    "auto": "auto", "hetero": "auto", "multi": "auto",
}
KINDS = frozenset(KIND_OF_NAME.values())


@dataclass(frozen=True)
class Placement:
    """Where one executor runs, for the scheduler: its device string, the device's kind and the domain whose
    sensors describe it, and how the kind was found."""

    device: str  # as the executor says: "TensorRT:0"
    kind: str  # cpu, gpu, npu, tpu, edgetpu, dsp, auto, or "unknown"
    domain: str  # the scheduler's device name: the kind, a simulated device's own name, or the base name
    found_by: str  # "device_kinds of <Class>", "edgeaccel's device names", "simulated", "unknown"


def base_name(device: str) -> str:
    """"EdgeTPU:usb:0" -> "EdgeTPU", "GPU.1" -> "GPU"."""
    return base_of(device)


def place(executor: Any) -> Placement:
    """The placement of a loaded executor."""
    heat = getattr(executor, "heat", None)
    if heat is not None:  # a simulated device is its own domain
        return Placement(str(executor.info.device), "simulated", heat.p.name, "simulated")
    return place_device(str(executor.info.device), getattr(type(executor), "device_kinds", None) or {},
                        type(executor).__name__)


def place_device(device: str, device_kinds: dict[str, str] | None = None, owner: str = "executor") -> Placement:
    base = base_name(device)
    declared = dict(device_kinds or {})
    kind = declared.get(base)
    if kind is None:
        kind = next((k for name, k in declared.items() if name.lower() == base.lower()), None)
    if kind is not None:
        kind = kind.lower()
        return Placement(device, kind, kind if kind in KINDS else base.lower() or "unknown",
                         f"device_kinds of {owner}")
    kind = KIND_OF_NAME.get(base.lower())
    if kind is not None:
        return Placement(device, kind, kind, "edgeaccel's device names")
    return Placement(device, "unknown", base.lower() or "unknown", "unknown")


def device_of_name(device: str) -> str:
    """The domain name for an executor's device string ("CUDA:1" -> "gpu")."""
    return place_device(device).domain


def sensors_for(devices: list[str], root: Path, nvml: Any | None = None,
                placements: list[Placement] = ()) -> dict[str, SensorSpec]:
    """Sensors per domain. A GPU on the real root is read through NVML when pynvml is importable. A domain
    without a temperature source says which devices have no sensor, and why."""
    notes: tuple[str, ...] = ()
    if nvml is None and "gpu" in devices and Path(root) == Path("/"):
        from ..telemetry.nvml import load_nvml

        nvml, reason = load_nvml()
        notes = (f"NVML: {reason}",) if reason else ()
    specs = {name: auto_spec(name, root, nvml) for name in devices}
    if notes and "gpu" in specs:
        specs["gpu"] = replace(specs["gpu"], notes=specs["gpu"].notes + notes)
    for name, spec in specs.items():
        placed = [p for p in placements if p.domain == name]
        strings = ", ".join(dict.fromkeys(p.device for p in placed)) or name
        missing = [q for q, source in (("temperature", spec.temperature), ("energy", spec.energy or spec.power))
                   if source is None]
        if not missing:
            continue
        kinds = {p.kind for p in placed}
        why = ""
        if "unknown" in kinds:
            why = " (its kind is unknown: declare it in device_specs on its executor class)"
        elif "auto" in kinds:
            why = " (the runtime picks the device itself)"
        extra = tuple(f"no sensor for {strings}: no {q} source{why}" for q in missing)
        specs[name] = replace(spec, notes=extra + spec.notes)
    return specs
