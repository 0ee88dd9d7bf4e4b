"""What a scheduled model reports: per-executor counts, latency percentiles and energy per inference; per
device temperatures, time limited by the scheduler and time throttled by the hardware; what scheduling itself
cost. Figures of a simulated run are labelled simulated in text and in dict keys."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field

from ..quantiles import percentiles

# ``sched`` below is the scheduling.core.Scheduler these functions were cut from; it is not imported (core
# imports this module), so it goes unannotated.


@dataclass
class ExecutorCounters:
    device: str
    completed: int = 0
    failed: int = 0
    deadline_met: int = 0
    deadline_missed: int = 0  # ran, but finished after its deadline
    busy_s: float = 0.0
    energy_j: float = 0.0  # device energy attributed to this executor's runs
    energy_runs: int = 0  # completions in intervals whose energy was measured
    probes: int = 0  # re-measurements on the host's own inputs (not requests: not in completed)
    service_s: deque = field(default_factory=lambda: deque(maxlen=50_000))
    latency_s: deque = field(default_factory=lambda: deque(maxlen=50_000))  # arrival to completion


@dataclass
class DeviceCounters:
    limited_s: float = 0.0  # the scheduler held it below full use
    hw_throttled_s: float = 0.0  # the kernel/firmware reported throttling
    above_passive_s: float = 0.0
    samples_at_critical: int = 0
    samples: int = 0
    max_temp_c: float | None = None
    last_temp_c: float | None = None
    temp_reason: str | None = None
    limits_note: str | None = None  # trip points ignored, and why
    energy_j: float | None = None
    energy_reason: str | None = None
    idle_energy_j: float = 0.0  # energy in intervals when none of its executors ran
    last_energy_j: float | None = None
    interval_busy: dict = field(default_factory=dict)  # executor -> busy seconds since the last sample
    interval_runs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ExecutorStats:
    device: str
    completed: int
    failed: int
    deadline_met: int
    deadline_missed: int
    service_ms: dict | None
    latency_ms: dict | None
    busy_s: float
    energy_per_inference_j: float | None
    energy_reason: str | None
    # where no counter measures it: power figure x measured service time, and where the figure comes from
    estimated_energy_per_inference_j: float | None = None
    estimate_source: str | None = None
    probes: int = 0  # re-measurements on the model's own sample inputs while the device was idle


@dataclass(frozen=True)
class DeviceStats:
    last_temp_c: float | None
    max_temp_c: float | None
    temp_reason: str | None
    limited_s: float
    hw_throttled_s: float
    above_passive_s: float
    samples_at_critical: int
    energy_j: float | None
    energy_reason: str | None
    idle_energy_j: float  # measured while none of its executors ran (not charged to any inference)
    limits_note: str | None = None  # trip points the sensor gave that were ignored, and why


@dataclass(frozen=True)
class SchedulerStats:
    policy: str
    simulated: bool
    elapsed_s: float
    completed: int
    shed: int  # refused at once: no executor could meet their deadline
    throughput_per_s: float
    executors: dict[str, ExecutorStats]
    devices: dict[str, DeviceStats]
    dispatch_us: dict | None  # cost of one routing pass (per dispatch call)
    decision_us: dict | None  # cost of one policy decision
    tick_us: dict | None  # one whole decision step: telemetry sample, policy, apply, trace record
    telemetry_samples: int
    telemetry_cpu_s: float
    decisions: int

    @property
    def telemetry_cpu_share(self) -> float:
        return self.telemetry_cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict:
        """Plain data; a simulated run's figures sit under a top-level ``simulated`` key."""
        body = asdict(self)
        body["telemetry_cpu_share"] = self.telemetry_cpu_share
        if self.simulated:
            return {"simulated": body}
        return body

    def lines(self) -> list[str]:
        tag = "[simulated] " if self.simulated else ""
        out = [f"{tag}policy {self.policy}: {self.completed} inferences in {self.elapsed_s:.1f} s "
               f"({self.throughput_per_s:.1f}/s), {self.shed} shed for their deadline, {self.decisions} decisions"]
        for name, e in self.executors.items():
            lat = e.latency_ms or {}
            if e.energy_per_inference_j is not None:
                energy = f"{e.energy_per_inference_j * 1000:.1f} mJ/inference"
            elif e.estimated_energy_per_inference_j is not None:
                energy = (f"~{e.estimated_energy_per_inference_j * 1000:.1f} mJ/inference {e.estimate_source} "
                          f"(not measured: {e.energy_reason})")
            else:
                energy = f"energy n/a ({e.energy_reason})"
            # "0 late" where no request carried a deadline says nothing: say there were none to miss
            late = (f"{e.deadline_missed} late of {e.deadline_met + e.deadline_missed} with a deadline"
                    if e.deadline_met + e.deadline_missed else "no deadlines")
            latency = (f"latency p50 {lat['p50']:.2f} p99 {lat['p99']:.2f} ms" if "p50" in lat and "p99" in lat
                       else "latency n/a (nothing completed)")
            out.append(f"{tag}  {name:22} {e.completed:7d} done, {e.failed} failed, {late}; {latency}; {energy}")
        for name, d in self.devices.items():
            temp = (f"{d.last_temp_c:.1f} C (max {d.max_temp_c:.1f} C)" if d.last_temp_c is not None
                    else f"no temperature ({d.temp_reason})")
            out.append(f"{tag}  device {name:15} {temp}; scheduler-limited {d.limited_s:.1f} s, hardware-throttled "
                       f"{d.hw_throttled_s:.1f} s, above passive trip {d.above_passive_s:.1f} s"
                       + (f"; {d.limits_note}" if d.limits_note else ""))
        if self.dispatch_us:
            out.append(f"{tag}  routing cost p50 {self.dispatch_us['p50']:.1f} us p99 {self.dispatch_us['p99']:.1f} us; "
                       f"telemetry {self.telemetry_samples} samples, {100 * self.telemetry_cpu_share:.3f}% of one core")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def scheduler_stats(sched, now: float) -> SchedulerStats:
    """The scheduler's figures so far (``Scheduler.stats``)."""
    start = sched._started_at if sched._started_at is not None else now
    elapsed = max(0.0, now - start)
    executors = {}
    for slot in sched.slots:
        c = sched.exec_counters[slot.name]
        device = sched.device_counters[slot.device]
        energy = c.energy_j / c.energy_runs if c.energy_runs else None
        reason = None
        if energy is None:
            reason = device.energy_reason or ("no runs in a measured interval yet" if device.energy_j is not None
                                              else "not sampled yet")
        estimate = slot.power.energy_j(slot.latency_s) if slot.power is not None and energy is None else None
        executors[slot.name] = ExecutorStats(
            slot.device, c.completed, c.failed, c.deadline_met, c.deadline_missed,
            _ms(percentiles(c.service_s)), _ms(percentiles(c.latency_s)), c.busy_s, energy, reason, estimate,
            slot.power.source if estimate is not None else None, c.probes)
    devices = {name: DeviceStats(d.last_temp_c, d.max_temp_c, d.temp_reason, d.limited_s, d.hw_throttled_s,
                                 d.above_passive_s, d.samples_at_critical, d.energy_j, d.energy_reason,
                                 d.idle_energy_j, d.limits_note)
               for name, d in sched.device_counters.items()}
    completed = sum(c.completed for c in sched.exec_counters.values())
    return SchedulerStats(
        str(sched.policy), sched.simulated, elapsed, completed, sched.shed, completed / elapsed if elapsed > 0 else 0.0,
        executors, devices, _us(percentiles(sched.dispatch_cost_s, (50, 99, 100))),
        _us(percentiles(sched.decision_cost_s, (50, 99, 100))), _us(percentiles(sched.tick_cost_s, (50, 99, 100))),
        sched.sampler.samples if sched.sampler else 0, sched.sampler.cpu_s if sched.sampler else 0.0, sched.decisions)


def _ms(p: dict | None) -> dict | None:
    return None if p is None else {k: v * 1000.0 for k, v in p.items()}


def _us(p: dict | None) -> dict | None:
    return None if p is None else {k: v * 1e6 for k, v in p.items()}
