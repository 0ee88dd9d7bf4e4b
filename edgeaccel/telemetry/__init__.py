"""Telemetry readers: thermal zones, hwmon, RAPL, NVML, Coral PCIe, Jetson INA3221 and tegrastats, Raspberry Pi
throttling flags. Every reader takes ``root`` and reads only below it; parsing is pure and separate from
reading; units are converted once (``units.to_si``); a missing, unreadable or garbage sensor is a value with a
reason, never an exception. ``discover(root)`` lists the sources present; ``TelemetrySampler`` samples the
sensors of each device at a bounded rate for the scheduler.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Resolved on first use: importing one reader (the probe's Edge TPU survey reads the Coral temperature) must
# not import the sampler, the status maths and every other reader with it.
_LAZY = {
    "Source": "inventory", "discover": "inventory", "Reading": "reading", "DeviceLimits": "sampler",
    "DeviceSample": "sampler", "TelemetrySampler": "sampler", "SensorSpec": "sensors", "auto_spec": "sensors",
    "ThermalStatus": "status", "Thresholds": "status", "thresholds_from_trips": "status",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'edgeaccel.telemetry' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .inventory import Source, discover
    from .reading import Reading
    from .sampler import DeviceLimits, DeviceSample, TelemetrySampler
    from .sensors import SensorSpec, auto_spec
    from .status import ThermalStatus, Thresholds, thresholds_from_trips
