"""A Reading: one figure from one sensor, or the reason there is none. Readers never raise for a sensor that
is missing, unreadable or garbage; they return a Reading whose ``value`` is None and whose ``reason`` says why."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    source: str  # what was read, e.g. "thermal_zone0", "hwmon2/temp1", "rapl/package-0"
    quantity: str  # "temperature", "power", "energy", "voltage", "current", "frequency", "flags"
    value: float | None
    unit: str  # "C", "W", "J", "V", "A", "Hz", "" (flags)
    reason: str | None = None  # why value is None; None when the value is good
    path: str | None = None  # the file (or API call) it came from

    @property
    def ok(self) -> bool:
        return self.value is not None

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.source} {self.quantity}: unavailable ({self.reason})"
        return f"{self.source} {self.quantity}: {self.value:.3f} {self.unit}".rstrip()


def missing(source: str, quantity: str, unit: str, reason: str, path: str | None = None) -> Reading:
    return Reading(source, quantity, None, unit, reason, path)
