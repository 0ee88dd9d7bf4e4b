"""Coral Edge TPU on PCIe / M.2 (the gasket ``apex`` driver): ``/sys/class/apex/apex_N/``.

From the driver (drivers/staging/gasket/apex_driver.c): ``temp`` is the die temperature in millidegrees C (an
ADC reading in 0.25 C steps); ``trip_point0_temp`` < ``trip_point1_temp`` < ``trip_point2_temp`` (defaults 85,
90, 95 C) are where the driver, polling every ``temp_poll_interval`` ms, divides the TPU clock by 2, 4 and 8;
``hw_temp_warn1`` (default 100 C) raises an interrupt and ``hw_temp_warn2`` (default 110 C) drives the
shutdown alarm line, each only when its ``hw_temp_warnN_en`` is 1. USB Accelerators expose none of this.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .reading import Reading, missing
from .sysfs import children, read_celsius, read_int, under
from .thermal import TripPoint

APEX = "/sys/class/apex"


@dataclass(frozen=True)
class ApexDevice:
    name: str  # "apex_0"
    temperature: Reading
    trips_c: tuple[float | None, float | None, float | None]  # clock /2, /4, /8 above each
    warn1_c: float | None
    warn2_c: float | None
    warn1_enabled: bool | None
    warn2_enabled: bool | None
    poll_interval_ms: int | None

    @property
    def passive_c(self) -> float | None:
        """Where the driver starts throttling: trip point 0."""
        return self.trips_c[0]

    @property
    def critical_c(self) -> float | None:
        """The shutdown alarm (hw_temp_warn2), the chip's own hard limit."""
        return self.warn2_c

    @property
    def trips(self) -> tuple[TripPoint, ...]:
        """The limits in the thermal zones' terms: each clock-halving trip is passive cooling, hw_temp_warn1 a
        warning before the hw_temp_warn2 shutdown alarm (hot and critical)."""
        limits = [("passive", t) for t in self.trips_c] + [("hot", self.warn1_c), ("critical", self.warn2_c)]
        return tuple(TripPoint(i, kind, temp) for i, (kind, temp) in enumerate(limits) if temp is not None)

    @property
    def clock_divider(self) -> int | None:
        """1, 2, 4 or 8: the divider the driver applies at the current temperature (None when unknown)."""
        if self.temperature.value is None or any(t is None for t in self.trips_c):
            return None
        crossed = sum(1 for t in self.trips_c if self.temperature.value >= t)
        return 2 ** crossed


def read_apex(root: Path = Path("/")) -> list[ApexDevice]:
    return [read_apex_device(path) for path in children(under(root, APEX), "apex_*")]


def read_apex_device(path: Path, limits: bool = True) -> ApexDevice:
    """One device; ``limits=False`` reads the temperature only (trip points rarely change)."""
    label = f"coral/{path.name}"
    value, reason = read_celsius(path / "temp")
    temperature = (Reading(label, "temperature", value, "C", None, str(path / "temp")) if value is not None
                   else missing(label, "temperature", "C", reason or "unknown", str(path / "temp")))
    if not limits:
        return ApexDevice(path.name, temperature, (None, None, None), None, None, None, None, None)
    trips = tuple(read_celsius(path / f"trip_point{i}_temp")[0] for i in range(3))
    flags = []
    for i in (1, 2):
        raw, _ = read_int(path / f"hw_temp_warn{i}_en")
        flags.append(None if raw is None else raw != 0)
    poll, _ = read_int(path / "temp_poll_interval")
    return ApexDevice(path.name, temperature, trips,  # type: ignore[arg-type]
                      read_celsius(path / "hw_temp_warn1")[0], read_celsius(path / "hw_temp_warn2")[0],
                      flags[0], flags[1], poll)
