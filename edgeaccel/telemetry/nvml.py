"""NVIDIA GPUs through NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package), used only when importable.

Figures per the NVML API reference: temperature in C (``nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)``),
power in mW (``nvmlDeviceGetPowerUsage``), total energy since the driver loaded in mJ
(``nvmlDeviceGetTotalEnergyConsumption``, Volta and later), the slowdown / shutdown thresholds in C, and the
clock-event (formerly "throttle") reason bit mask. Each call that fails (NVML_ERROR_NOT_SUPPORTED on older
boards, a lost GPU) becomes a reading with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from .reading import Reading, missing
from .thermal import TripPoint
from .units import to_si

# nvmlClocksEventReasons / nvmlClocksThrottleReasons bits
CLOCK_EVENT_BITS = {
    0x1: "gpu idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
THROTTLING_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # bits that mean "slowed down for power or heat"
TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
THRESHOLD_SHUTDOWN = 0  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
THRESHOLD_SLOWDOWN = 1  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str | None
    temperature: Reading
    power: Reading
    energy: Reading  # total since driver load, J
    slowdown_c: float | None
    shutdown_c: float | None
    clock_events: int | None
    clock_events_reason: str | None = None

    @property
    def trips(self) -> tuple[TripPoint, ...]:
        """The slowdown and shutdown thresholds in the thermal zones' terms (passive and critical)."""
        limits = (("passive", self.slowdown_c), ("critical", self.shutdown_c))
        return tuple(TripPoint(i, kind, temp) for i, (kind, temp) in enumerate(limits) if temp is not None)

    @property
    def throttled(self) -> bool | None:
        return None if self.clock_events is None else bool(self.clock_events & THROTTLING_BITS)

    @property
    def clock_event_names(self) -> list[str]:
        if self.clock_events is None:
            return []
        return [name for bit, name in CLOCK_EVENT_BITS.items() if self.clock_events & bit]


def load_nvml() -> tuple[Any | None, str | None]:
    """(pynvml module, None) once initialised, or (None, why not)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, "pynvml is not installed (pip install 'edgeaccel[gpu]' installs nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not initialise: {exc or type(exc).__name__} (no NVIDIA driver here?)"
    return pynvml, None


def read_gpus(nvml: Any) -> tuple[list[GpuReading], str | None]:
    """Every GPU NVML sees, through an initialised ``nvml`` module (or a fake with the same functions)."""
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception as exc:
        return [], f"nvmlDeviceGetCount failed: {exc}"
    return [read_gpu(nvml, i) for i in range(count)], None


def read_gpu(nvml: Any, index: int) -> GpuReading:
    label = f"nvml/gpu{index}"
    handle, reason = _call(nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        gone = missing(label, "temperature", "C", reason or "no handle")
        return GpuReading(index, None, gone, missing(label, "power", "W", reason or ""),
                          missing(label, "energy", "J", reason or ""), None, None, None, reason)
    name, _ = _call(nvml.nvmlDeviceGetName, handle)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    temp, t_reason = _call(nvml.nvmlDeviceGetTemperature, handle, TEMPERATURE_GPU)
    power_mw, p_reason = _call(nvml.nvmlDeviceGetPowerUsage, handle)
    energy_mj, e_reason = _call(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
    slowdown, _ = _call(nvml.nvmlDeviceGetTemperatureThreshold, handle, THRESHOLD_SLOWDOWN)
    shutdown, _ = _call(nvml.nvmlDeviceGetTemperatureThreshold, handle, THRESHOLD_SHUTDOWN)
    events_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    events, ev_reason = _call(events_fn, handle) if events_fn else (None, "this pynvml has no clock-event call")
    return GpuReading(
        index, name,
        _value(label, "temperature", temp, "degree_celsius", t_reason),
        _value(label, "power", power_mw, "milliwatt", p_reason),
        _value(label, "energy", energy_mj, "millijoule", e_reason),
        float(slowdown) if slowdown else None, float(shutdown) if shutdown else None,
        int(events) if events is not None else None, ev_reason,
    )


def _call(fn: Callable | None, *args) -> tuple[Any, str | None]:
    if fn is None:
        return None, "not available"
    try:
        return fn(*args), None
    except Exception as exc:  # pynvml.NVMLError and subclasses; a fake may raise anything
        return None, f"{getattr(fn, '__name__', 'nvml call')} failed: {exc or type(exc).__name__}"


def _value(label: str, quantity: str, raw: Any, unit: str, reason: str | None) -> Reading:
    if raw is None:
        return missing(label, quantity, to_si(0, unit)[1], reason or "unknown")
    try:
        value, si = to_si(float(raw), unit)
    except (TypeError, ValueError):
        return missing(label, quantity, to_si(0, unit)[1], f"NVML returned {raw!r}")
    return Reading(label, quantity, value, si)


@dataclass(frozen=True)
class GpuLoad:
    """How busy one GPU is now: NVML's utilization (the share of the last sample period, 1/6 s to 1 s by
    board, in which a kernel ran), device memory in use and total, and this process's share where NVML says."""

    index: int
    name: str | None
    util_percent: float | None
    memory_used_mb: float | None
    memory_total_mb: float | None
    process_memory_mb: float | None = None
    reason: str | None = None  # why a figure is None


def read_load(nvml: Any, index: int, pid: int | None = None) -> GpuLoad:
    """GPU ``index``'s load through an initialised ``nvml`` module (or a fake with the same functions)."""
    handle, reason = _call(nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return GpuLoad(index, None, None, None, None, None, reason or "no handle")
    name, _ = _call(nvml.nvmlDeviceGetName, handle)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    rates, u_reason = _call(nvml.nvmlDeviceGetUtilizationRates, handle)
    memory, m_reason = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
    mine = None
    if pid is not None:
        running, _ = _call(getattr(nvml, "nvmlDeviceGetComputeRunningProcesses", None), handle)
        used = [getattr(p, "usedGpuMemory", None) for p in running or () if getattr(p, "pid", None) == pid]
        mine = sum(used) / (1 << 20) if used and None not in used else None  # None: NVML cannot say (WDDM)
    mb = 1 << 20
    return GpuLoad(index, name, float(rates.gpu) if rates is not None else None,
                   memory.used / mb if memory is not None else None, memory.total / mb if memory is not None else None,
                   mine, "; ".join(r for r in (u_reason, m_reason) if r) or None)
