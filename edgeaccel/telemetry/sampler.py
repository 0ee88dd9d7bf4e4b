"""The telemetry sampler: reads each device's sensors at a bounded rate and turns raw readings into what a
scheduler needs: temperature with trip points, thermal status and headroom, power, wrap-corrected energy, and
whether the hardware is throttling. Time comes in as an argument, so a simulated clock drives it as easily as
the real one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .counter import EnergyAccumulator
from .sysfs import confined
from .sensors import SensorSpec, read_energy, read_power, read_temperature, read_throttle
from .status import ThermalStatus, TrendForecaster, normalized_headroom, thresholds_from_trips
from .thermal import plausible_trips

FORECAST_S = 10.0  # headroom is forecast this far ahead (Android's apps commonly ask for 10 s)
# A sample this far off the trend restarts its fit: a load starting is seen at the next sample, not after the
# 30-sample window fills (x86_pkg_temp reads in 1 C steps with noise; 2.5 C is beyond both). See TrendForecaster.
TREND_JUMP_C = 2.5


@dataclass(frozen=True)
class DeviceLimits:
    """Trip points to assume when the sensor does not give them (from a device profile)."""

    passive_c: float | None = None
    critical_c: float | None = None


@dataclass(frozen=True)
class DeviceSample:
    device: str
    time: float
    temp_c: float | None
    temp_reason: str | None = None
    passive_c: float | None = None
    critical_c: float | None = None
    limits_from: str = "none"  # "sensor", "profile", or "none"
    power_w: float | None = None
    power_reason: str | None = None
    energy_j: float | None = None  # spent since the sampler started, across counter wraps
    energy_reason: str | None = None
    throttled: bool | None = None  # the kernel / firmware / hardware is slowing the device now
    throttle_reason: str | None = None
    status: ThermalStatus | None = None
    headroom: float | None = None  # Android-normalised forecast: 1.0 = SEVERE (passive trip)
    slope_c_per_s: float | None = None
    seconds_to_passive: float | None = None
    limits_note: str | None = None  # trip points the sensor gave that were ignored, and why
    # what the scheduler's policy adds (ScheduledModel.telemetry; None from the sampler itself):
    fallback: str | None = None  # temperature lost: "model" (its estimate), "conservative duty", "share of last duty"
    estimated_temp_c: float | None = None  # temperature lost: the plant model's estimate
    plant: dict | None = None  # the identified plant model: identified, tau_s, gain_c, steady_full_c, ...


class TelemetrySampler:
    """Samples every device at most once per ``min_interval_s``; a call sooner returns the previous samples."""

    def __init__(self, specs: dict[str, SensorSpec], root: Path = Path("/"), nvml: Any | None = None,
                 min_interval_s: float = 0.5, limits: dict[str, DeviceLimits] | None = None,
                 trip_refresh_s: float = 30.0) -> None:
        if min_interval_s <= 0:
            raise ValueError("min_interval_s must be positive: telemetry is sampled at a bounded rate")
        self.specs = dict(specs)
        self.root = Path(root)
        self.nvml = nvml
        self.min_interval_s = min_interval_s
        self.limits = dict(limits or {})
        self.trip_refresh_s = trip_refresh_s
        self.samples = 0
        self.cpu_s = 0.0  # thread CPU time spent reading and parsing
        self._last: dict[str, DeviceSample] = {}
        self._last_time: float | None = None
        self._energy = {name: EnergyAccumulator() for name in specs}
        self._energy_time: dict[str, float] = {}
        self._trend = {name: TrendForecaster(jump_c=TREND_JUMP_C) for name in specs}
        self._trips: dict[str, tuple] = {}  # device -> (read at, passive, critical, hot)

    @property
    def energy_counters(self) -> dict[str, EnergyAccumulator]:
        """Each device's energy accumulator (raw counter values seen, wraps, resets)."""
        return dict(self._energy)

    @property
    def latest(self) -> dict[str, DeviceSample]:
        return dict(self._last)

    def due(self, now: float) -> bool:
        return self._last_time is None or now - self._last_time >= self.min_interval_s

    def sample(self, now: float) -> dict[str, DeviceSample]:
        if not self.due(now):
            return dict(self._last)
        started = time.thread_time()
        with confined(self.root):
            self._last = {name: self._sample_device(name, spec, now) for name, spec in self.specs.items()}
        self._last_time = now
        self.samples += 1
        self.cpu_s += time.thread_time() - started
        return dict(self._last)

    def _sample_device(self, name: str, spec: SensorSpec, now: float) -> DeviceSample:
        temp_c = temp_reason = passive = critical = hot = limits_note = None
        temp_throttled = None
        limits_from = "none"
        if spec.temperature:
            cached = self._trips.get(name)
            refresh = cached is None or now - cached[0] >= self.trip_refresh_s
            temp = read_temperature(spec.temperature, self.root, self.nvml, limits=refresh)
            temp_c, temp_reason = temp.reading.value, temp.reading.reason
            temp_throttled = temp.throttled
            if refresh:
                sane_passive, sane_critical, dropped = plausible_trips(temp.passive_c, temp.critical_c)
                self._trips[name] = cached = (now, sane_passive, sane_critical, temp.hot_c, dropped)
            passive, critical, hot, limits_note = cached[1], cached[2], cached[3], cached[4]
            if passive is not None or critical is not None:
                limits_from = "sensor"
        else:
            temp_reason = spec.note_for("temperature") or f"no temperature source for {name}"
        configured = self.limits.get(name)
        if configured:
            if passive is None and configured.passive_c is not None:
                passive, limits_from = configured.passive_c, "profile"
            if critical is None and configured.critical_c is not None:
                critical = configured.critical_c
                limits_from = "profile" if limits_from == "none" else limits_from
        trend = self._trend[name]
        if temp_c is not None:
            trend.add(now, temp_c)
        slope = trend.slope() if temp_c is not None else None
        status = headroom = to_passive = None
        if temp_c is not None and passive is not None:
            top = critical if critical is not None and critical > passive else passive + 20.0
            status = thresholds_from_trips(passive, top, hot).status(temp_c)
            forecast = trend.forecast(FORECAST_S)
            headroom = normalized_headroom(forecast if forecast is not None else temp_c, passive)
            to_passive = trend.seconds_until(passive)
        energy_j, energy_reason, derived_w = self._energy_of(name, spec, now)
        power_w, power_reason = None, None
        if spec.power:
            reading = read_power(spec.power, self.root, self.nvml)
            power_w, power_reason = reading.value, reading.reason
        if power_w is None and derived_w is not None:
            power_w, power_reason = derived_w, None
        elif power_w is None and power_reason is None:
            power_reason = energy_reason or f"no power or energy source for {name}"
        if spec.throttle and spec.throttle == spec.temperature and spec.throttle.split(":")[0] in ("thermal", "apex"):
            # the same source already said it: a zone's cooling devices, or the apex driver's rule (clock
            # divided at and above trip point 0)
            throttled = temp_throttled
            if throttled is None and temp_c is not None and passive is not None and spec.throttle.startswith("apex"):
                throttled = temp_c >= passive
            throttle_reason = None if throttled is not None else f"no throttle state known for {name}"
        elif spec.throttle:
            throttled, throttle_reason = read_throttle(spec.throttle, self.root, self.nvml)
        else:
            throttled, throttle_reason = None, f"no throttle indicator for {name}"
        return DeviceSample(name, now, temp_c, temp_reason, passive, critical, limits_from, power_w, power_reason,
                            energy_j, energy_reason, throttled, throttle_reason, status, headroom, slope, to_passive,
                            limits_note)

    def _energy_of(self, name: str, spec: SensorSpec, now: float) -> tuple[float | None, str | None, float | None]:
        if not spec.energy:
            note = spec.note_for("energy")
            return None, note or f"no energy counter for {name}", None
        reading, range_j = read_energy(spec.energy, self.root, self.nvml)
        if reading.value is None:
            return None, reading.reason, None
        acc = self._energy[name]
        if range_j:
            acc.range_j = range_j
        first = acc.last_raw_j is None
        delta = acc.update(reading.value)
        derived = None
        previous = self._energy_time.get(name)
        if not first and previous is not None and now > previous:
            derived = delta / (now - previous)
        self._energy_time[name] = now
        return acc.total_j, None, derived
