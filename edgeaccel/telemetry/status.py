"""Thermal status with Android's levels, and a headroom forecast.

Android (PowerManager.THERMAL_STATUS_*) grades a device NONE, LIGHT, MODERATE, SEVERE, CRITICAL, EMERGENCY,
SHUTDOWN. Linux gives trip points instead, so the levels are placed on them: SEVERE at the passive trip (the
kernel is throttling), SHUTDOWN at the critical trip (the kernel powers off), LIGHT and MODERATE 10 and 5 C
below passive, CRITICAL at the hot trip (or half-way from passive to critical), EMERGENCY at 90% of the way to
the critical trip.

Headroom follows Android's ThermalManagerService: the forecast temperature normalised so that 1.0 is the SEVERE
threshold and 0.0 is 30 C below it; the forecast is a least-squares line through the recent samples (Android
uses its last 30 samples and needs at least 3).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import IntEnum

DEGREES_BETWEEN_ZERO_AND_ONE = 30.0
MIN_SAMPLES = 3


class ThermalStatus(IntEnum):
    NONE = 0
    LIGHT = 1
    MODERATE = 2
    SEVERE = 3
    CRITICAL = 4
    EMERGENCY = 5
    SHUTDOWN = 6

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Thresholds:
    """The temperature (C) at which each level from LIGHT to SHUTDOWN begins, ascending."""

    light: float
    moderate: float
    severe: float
    critical: float
    emergency: float
    shutdown: float

    def status(self, temp_c: float | None) -> ThermalStatus | None:
        if temp_c is None:
            return None
        level = ThermalStatus.NONE
        for status, limit in zip(list(ThermalStatus)[1:], (self.light, self.moderate, self.severe, self.critical,
                                                            self.emergency, self.shutdown), strict=True):
            if temp_c >= limit:
                level = status
        return level


def thresholds_from_trips(passive_c: float, critical_c: float, hot_c: float | None = None) -> Thresholds:
    if critical_c <= passive_c:
        raise ValueError(f"critical trip {critical_c} C must be above the passive trip {passive_c} C")
    span = critical_c - passive_c
    crit = hot_c if hot_c is not None and passive_c < hot_c < critical_c else passive_c + span / 2
    emergency = max(crit, passive_c + 0.9 * span)
    return Thresholds(passive_c - 10.0, passive_c - 5.0, passive_c, crit, emergency, critical_c)


def normalized_headroom(temp_c: float, severe_c: float) -> float:
    """Android's headroom: 1.0 at the SEVERE threshold, 0.0 at 30 C below it (never negative)."""
    zero = severe_c - DEGREES_BETWEEN_ZERO_AND_ONE
    return max(0.0, (temp_c - zero) / DEGREES_BETWEEN_ZERO_AND_ONE)


class TrendForecaster:
    """Least-squares slope over the last ``size`` (time, temperature) samples.

    ``jump_c``: a sample this far off the line through the samples before it starts the fit afresh from the
    sample before it. A line through a long window lags a device that starts heating: the flat samples from
    before the load hold the slope down for the whole window, and a scheduler forecasting from it cut too late
    (every start from idle overshot the passive trip by 2-8 C in a closed loop with the heat model). A short
    window is no cure: it lags less but is noisier, and on a device heating from cold (a falling slope) it
    under-forecasts more (tools/sched_bench.py: 3 s put a device 1.3% of the time above its passive trip, the
    15 s window 0%). Two samples then make a slope."""

    def __init__(self, size: int = 30, jump_c: float | None = None) -> None:
        self._samples: deque[tuple[float, float]] = deque(maxlen=size)
        self.jump_c = jump_c
        self._fresh = False  # restarted by a jump: two samples suffice

    def add(self, t: float, temp_c: float) -> None:
        if self._samples and t <= self._samples[-1][0]:
            return  # same sample seen twice (a cached telemetry snapshot)
        if self.jump_c is not None and len(self._samples) >= 2:
            expected = self._line_at(t)
            if expected is not None and abs(temp_c - expected) > self.jump_c:
                last = self._samples[-1]
                self._samples.clear()
                self._samples.append(last)
                self._fresh = True
        self._samples.append((t, temp_c))
        if len(self._samples) >= MIN_SAMPLES:
            self._fresh = False

    def _line_at(self, t: float) -> float | None:
        slope = self._fit()
        if slope is None:
            slope = 0.0 if len(self._samples) < 2 else None
        if slope is None:
            return None
        return self._samples[-1][1] + slope * (t - self._samples[-1][0])

    def clear(self) -> None:
        self._samples.clear()

    def slope(self) -> float | None:
        """C per second, or None with fewer than MIN_SAMPLES samples (two after a jump)."""
        if len(self._samples) < (2 if self._fresh else MIN_SAMPLES):
            return None
        return self._fit()

    def _fit(self) -> float | None:
        n = len(self._samples)
        if n < 2:
            return None
        mean_t = sum(t for t, _ in self._samples) / n
        mean_y = sum(y for _, y in self._samples) / n
        var = sum((t - mean_t) ** 2 for t, _ in self._samples)
        if var <= 0:
            return None
        return sum((t - mean_t) * (y - mean_y) for t, y in self._samples) / var

    def forecast(self, seconds: float) -> float | None:
        slope = self.slope()
        if slope is None:
            return None
        return self._samples[-1][1] + slope * seconds

    def seconds_until(self, limit_c: float) -> float | None:
        """When the trend reaches ``limit_c``: 0 if already there, None if not heading there (or unknown)."""
        if not self._samples:
            return None
        current = self._samples[-1][1]
        if current >= limit_c:
            return 0.0
        slope = self.slope()
        if slope is None or slope <= 0:
            return None
        return (limit_c - current) / slope
