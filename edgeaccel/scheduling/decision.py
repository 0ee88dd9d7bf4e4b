"""What a policy sees (Observation) and what it decides (Decision). Plain frozen data: policies are pure
functions of these, so tests drive them from tables and the trace records them as they were."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceView:
    """One thermal/power domain (the CPU package, a GPU, an Edge TPU) as the policy sees it."""

    name: str
    temp_c: float | None = None
    temp_reason: str | None = None  # why temp_c is None
    passive_c: float | None = None
    critical_c: float | None = None
    slope_c_per_s: float | None = None
    power_w: float | None = None
    power_reason: str | None = None
    throttled: bool | None = None  # the kernel/firmware is slowing it down now
    busy: float = 0.0  # share of its capacity used since the previous decision (0..1)
    status: str | None = None  # Android thermal status name
    headroom: float | None = None
    limits_note: str | None = None  # trip points the sensor gave that were ignored, and why


@dataclass(frozen=True)
class ExecutorView:
    name: str  # "litert:CPU", "sim:accel"
    device: str  # the DeviceView it runs on
    latency_s: float | None = None  # measured service time (EMA); None before the first run
    energy_j: float | None = None  # measured energy per inference; None when not (yet) known
    energy_measurable: bool = False  # its device has an energy counter
    max_concurrency: int = 1
    completed: int = 0
    power_w: float | None = None  # what its device draws busy where no counter measures it (an estimate)
    power_source: str | None = None  # where power_w comes from ("estimated: 2 W typical for EdgeTPU (...)")

    @property
    def estimated_energy_j(self) -> float | None:
        """Energy per inference from the power figure and the measured service time (an estimate)."""
        if self.power_w is None or self.latency_s is None:
            return None
        return self.power_w * self.latency_s


@dataclass(frozen=True)
class Observation:
    now: float
    devices: dict[str, DeviceView]
    executors: tuple[ExecutorView, ...]
    queued: int = 0
    arrival_rate: float = 0.0  # requests per second, recent


@dataclass(frozen=True)
class Decision:
    duty: dict[str, float]  # device -> share of time it may be busy (1.0: unlimited)
    enabled: dict[str, bool]  # executor -> may it take requests
    concurrency: dict[str, int]  # executor -> requests in flight at most
    route: str = "earliest"  # "earliest": least expected completion; "cheapest": first in ``order`` meeting deadlines
    order: tuple[str, ...] = ()  # executor preference for "cheapest"
    action: str = "hold"  # hold, shift, lower_concurrency, duty_cycle, back_off, return, no_telemetry
    reason: str = ""


@dataclass(frozen=True)
class DecisionRecord:
    """One line of the trace: when, what was read, what was decided and why."""

    time: float  # seconds since the scheduler started
    policy: str
    action: str
    reason: str
    devices: dict[str, DeviceView] = field(default_factory=dict)
    duty: dict[str, float] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)
    concurrency: dict[str, int] = field(default_factory=dict)
