"""A lumped RC heat model of one device, with the kernel's own throttling.

    C dT/dt = P(t) - (T - T_ambient) / R,     P = P_idle + (P_busy - P_idle) * busy(t) * speed

``busy(t)`` is 1 while the device runs an inference. Above its passive trip the device slows itself as the
kernel would: layout "cpu"/"hwmon" like the step_wise governor (one cooling step more per poll while at or above
the trip and rising, one less once below trip - hysteresis and not rising; speed falls linearly to
``min_speed``); layout "apex" like the
gasket driver (clock divided by 2, 4, 8 above trip points 0, 1, 2, no hysteresis). A slower device takes
longer per inference and draws proportionally less dynamic power. Integration is exact for piecewise-constant
power over steps of at most ``STEP_S``. Everything here is simulated.
"""

from __future__ import annotations

import math
import random
import threading
from collections import deque
from dataclasses import dataclass

STEP_S = 0.1


@dataclass(frozen=True)
class DeviceParams:
    name: str  # "accel", "cpu"
    layout: str = "hwmon"  # the files it writes: "cpu" (thermal zone + cooling device + RAPL), "apex", "hwmon"
    ambient_c: float = 25.0
    r_c_per_w: float = 8.0  # thermal resistance to ambient
    c_j_per_c: float = 5.0  # heat capacity
    idle_w: float = 0.5
    busy_w: float = 6.0  # total power while running at full speed
    service_s: float = 0.02  # one inference at full speed
    passive_c: float = 85.0
    critical_c: float = 105.0
    min_speed: float = 0.25
    governor_s: float = 1.0  # how often the kernel re-evaluates throttling
    governor_steps: int = 3
    hysteresis_c: float = 0.0  # trip_point_hyst (x86_pkg_temp and most SoC zones: 0)
    sensor_noise_c: float = 0.15
    sensor_step_c: float = 0.001  # resolution of the temperature file (x86_pkg_temp: 1 C; apex: 0.25 C)
    energy_range_j: float | None = None  # RAPL wrap-around range

    def __post_init__(self) -> None:
        if self.layout not in ("cpu", "apex", "hwmon"):
            raise ValueError(f"layout must be cpu, apex or hwmon, not {self.layout!r}")
        if not (self.critical_c > self.passive_c > self.ambient_c):
            raise ValueError(f"{self.name}: need ambient < passive < critical "
                             f"({self.ambient_c}, {self.passive_c}, {self.critical_c})")
        if self.busy_w <= self.idle_w or self.service_s <= 0 or self.r_c_per_w <= 0 or self.c_j_per_c <= 0:
            raise ValueError(f"{self.name}: busy power must exceed idle power; service time, R and C must be positive")

    @property
    def tau_s(self) -> float:
        return self.r_c_per_w * self.c_j_per_c

    def steady_c(self, duty: float, speed: float = 1.0) -> float:
        """Temperature the device settles at when busy a ``duty`` share of the time at ``speed``."""
        return self.ambient_c + self.r_c_per_w * (self.idle_w + (self.busy_w - self.idle_w) * duty * speed)

    def sustainable_duty(self, limit_c: float | None = None) -> float:
        """The largest duty at full speed whose steady state stays at or below ``limit_c`` (default: passive)."""
        limit = self.passive_c if limit_c is None else limit_c
        duty = ((limit - self.ambient_c) / self.r_c_per_w - self.idle_w) / (self.busy_w - self.idle_w)
        return min(1.0, max(0.0, duty))

    def rate(self, duty: float = 1.0, speed: float = 1.0) -> float:
        """Inferences per second."""
        return duty * speed / self.service_s


class HeatModel:
    """One simulated device's state. Thread-safe: a threaded scheduled model and its sampler may share it."""

    def __init__(self, params: DeviceParams, seed: int = 0, start_c: float | None = None, t0: float = 0.0) -> None:
        self.p = params
        self.t = t0
        self.temp_c = params.ambient_c if start_c is None else start_c
        self.level = 0  # cooling state the "kernel" applies
        self.energy_j = 0.0  # ground truth, for checking the energy accounting
        self.last_power_w = params.idle_w
        self.above_passive_s = 0.0
        self.at_critical_s = 0.0
        self.max_temp_c = self.temp_c
        self.busy_s = 0.0
        self.throttled_s = 0.0
        self._busy: deque[tuple[float, float]] = deque()
        self._next_governor = t0 + params.governor_s
        self._last_governed_c = self.temp_c
        self._rng = random.Random(seed)
        self._lock = threading.RLock()

    @property
    def speed(self) -> float:
        if self.p.layout == "apex":
            return 1.0 / (2 ** self.level)
        return 1.0 - (1.0 - self.p.min_speed) * self.level / self.p.governor_steps

    def start_at(self, t: float) -> None:
        """Move the start of a model that has not run yet to ``t`` (a real clock's time: its origin is the
        machine's boot, and advancing from 0 would simulate the whole uptime first, 1.7 s after 15 h up)."""
        with self._lock:
            if self.busy_s == 0.0 and not self._busy and self.energy_j == 0.0:
                self._next_governor += t - self.t
                self.t = t

    def service_time(self) -> float:
        return self.p.service_s / self.speed

    def begin(self, start: float) -> float:
        """A run starts at ``start`` (the model advanced to it first); returns how long it takes."""
        with self._lock:
            self.advance(start)
            duration = self.service_time()
            busy_from = max(start, self._busy[-1][1]) if self._busy else start
            self._busy.append((busy_from, busy_from + duration))
            return duration

    def advance(self, to_t: float) -> None:
        with self._lock:
            p = self.p
            tau = p.tau_s
            while self.t < to_t - 1e-12:
                end = min(to_t, self.t + STEP_S, self._next_governor)
                dt = end - self.t
                busy = self._busy_share(self.t, end)
                power = p.idle_w + (p.busy_w - p.idle_w) * busy * self.speed
                decay = math.exp(-dt / tau)
                new = p.ambient_c + (self.temp_c - p.ambient_c) * decay + power * p.r_c_per_w * (1.0 - decay)
                if max(self.temp_c, new) > p.passive_c:
                    self.above_passive_s += dt * _share_above(self.temp_c, new, p.passive_c)
                if max(self.temp_c, new) >= p.critical_c:
                    self.at_critical_s += dt * _share_above(self.temp_c, new, p.critical_c)
                if self.level > 0:
                    self.throttled_s += dt
                self.energy_j += power * dt
                self.busy_s += busy * dt
                self.last_power_w = power
                self.temp_c = new
                self.max_temp_c = max(self.max_temp_c, new)
                self.t = end
                if self.t >= self._next_governor - 1e-12:
                    self._govern()
                    self._next_governor += p.governor_s
            while self._busy and self._busy[0][1] <= self.t:
                self._busy.popleft()

    def _busy_share(self, t0: float, t1: float) -> float:
        covered = 0.0
        for start, end in self._busy:
            if start >= t1:
                break
            covered += max(0.0, min(end, t1) - max(start, t0))
        return min(1.0, covered / (t1 - t0)) if t1 > t0 else 0.0

    def _govern(self) -> None:
        p = self.p
        if p.layout == "apex":
            trips = (p.passive_c, p.passive_c + 5.0, p.passive_c + 10.0)
            self.level = sum(1 for trip in trips if self.temp_c >= trip)
        else:
            # Linux step_wise: while at or above the trip and still rising, one cooling step more; once below
            # trip - hysteresis and no longer rising, one step less. The temperature therefore settles around
            # the trip, above it about as often as below.
            rising = self.temp_c > self._last_governed_c
            if self.temp_c >= p.passive_c and rising:
                self.level = min(self.level + 1, p.governor_steps)
            elif self.temp_c < p.passive_c - p.hysteresis_c and not rising:
                self.level = max(self.level - 1, 0)
        self._last_governed_c = self.temp_c

    def sensed_c(self) -> float:
        """What the sensor file shows: the temperature plus noise, at the sensor's resolution."""
        with self._lock:
            value = self.temp_c + self._rng.gauss(0.0, self.p.sensor_noise_c)
            step = self.p.sensor_step_c
            return round(value / step) * step if step > 0 else value


def _share_above(a: float, b: float, limit: float) -> float:
    """Share of a linear segment from a to b that lies at or above ``limit``."""
    if a >= limit and b >= limit:
        return 1.0
    if a == b:
        return 0.0
    high = max(a, b)
    return (high - limit) / abs(b - a)
