"""Telemetry readers: thermal zones, hwmon, RAPL, NVML, Coral PCIe, Jetson INA3221 and tegrastats, Raspberry Pi
throttling flags. Every reader takes ``root`` and reads only below it; parsing is pure and separate from
reading; units are converted once (``units.to_si``); a missing, unreadable or garbage sensor is a value with a
reason, never an exception. ``discover(root)`` lists the sources present; ``TelemetrySampler`` samples the
sensors of each device at a bounded rate for the scheduler.
"""

from __future__ import annotations

from .discover import Source, discover
from .reading import Reading
from .sampler import DeviceLimits, DeviceSample, TelemetrySampler
from .sensors import SensorSpec, auto_spec
from .status import ThermalStatus, Thresholds, thresholds_from_trips

__all__ = ["DeviceLimits", "DeviceSample", "Reading", "SensorSpec", "Source", "TelemetrySampler", "ThermalStatus",
           "Thresholds", "auto_spec", "discover", "thresholds_from_trips"]
