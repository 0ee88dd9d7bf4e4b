"""The profile model the selector and the scheduler consume. Loading and validation live beside it."""

from __future__ import annotations

from dataclasses import dataclass, field

GOALS = ("latency", "efficiency")


@dataclass(frozen=True)
class AcceleratorSpec:
    """One compute device of the family, with the vendor's published figures (``source`` cites them)."""

    device: str  # the device name executors use: "CPU", "GPU", "NPU", "CUDA", "TensorRT", "EdgeTPU", "TPU"
    kind: str  # cpu | gpu | npu | edgetpu | tpu
    name: str  # e.g. "Coral USB Accelerator (Edge TPU)"
    precisions: tuple[str, ...] = ()  # what it runs well: int8, f16, bf16, f32
    tops_int8: float | None = None
    tflops_f16: float | None = None
    memory_mb: float | None = None
    typical_power_w: float | None = None
    source: str = ""


@dataclass(frozen=True)
class ThermalLimits:
    """Trip points in degrees C: passive = the device starts to throttle; critical = it shuts down."""

    passive_c: float | None = None
    critical_c: float | None = None
    source: str = ""


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    accelerators: tuple[AcceleratorSpec, ...]
    # goal -> device names, best first; a device absent from the list ranks after those present in it
    preference: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # device -> runtime names, best first, for the selector's rules when nothing was measured
    runtimes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    power_budget_w: float | None = None
    idle_power_w: float | None = None
    thermal: ThermalLimits = ThermalLimits()
    notes: str = ""
    source_file: str = ""

    def accelerator(self, device: str) -> AcceleratorSpec | None:
        base = device.split(":")[0].split(".")[0]
        return next((a for a in self.accelerators if a.device == base), None)

    def device_rank(self, goal: str, device: str) -> int:
        order = self.preference.get(goal) or self.preference.get("latency") or ()
        base = device.split(":")[0].split(".")[0]
        return order.index(base) if base in order else len(order)

    def runtime_rank(self, device: str, runtime: str) -> int | None:
        order = self.runtimes.get(device.split(":")[0].split(".")[0])
        if not order:
            return None
        return order.index(runtime) if runtime in order else len(order)
