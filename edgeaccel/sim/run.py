"""The discrete-event simulator: one scheduler engine (the same ``Scheduler`` a ScheduledModel runs), simulated
devices writing a fake sysfs tree, the real telemetry readers reading it, and a simulated clock that jumps from
event to event. 30 simulated minutes take seconds. Every figure in a SimResult is simulated.
"""

from __future__ import annotations

import heapq
import itertools
import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..scheduling.core import ExecutorSlot, Scheduler
from ..scheduling.energy import PowerFigure
from ..scheduling.policies import Policy
from ..scheduling.stats import SchedulerStats
from ..telemetry.sampler import DeviceLimits, TelemetrySampler
from .clock import SimClock
from .executor import SimulatedExecutor
from .heat import DeviceParams
from .world import SimWorld


def scratch_dir() -> str | None:
    """Where simulated sysfs trees go: a RAM file system when there is one (the simulator rewrites its files
    thousands of times a simulated minute), else the default temporary directory."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@dataclass(frozen=True)
class Arrivals:
    """Bursty arrivals: a two-state Markov-modulated Poisson process. In the burst state requests arrive at
    ``rate * burst``, in the calm state at the rate that keeps the long-run mean at ``rate``."""

    rate: float  # mean requests per second
    burst: float = 1.5
    burst_share: float = 0.3  # share of time in the burst state
    mean_dwell_s: float = 8.0
    deadline_s: float | None = None  # relative deadline carried by every request

    def times(self, duration_s: float, seed: int) -> list[float]:
        if self.rate <= 0:
            return []
        rng = random.Random(seed)
        high = self.rate * self.burst
        low = max(0.0, (self.rate - self.burst_share * high) / (1.0 - self.burst_share))
        out, t = [], 0.0
        bursting = rng.random() < self.burst_share
        while t < duration_s:
            dwell = rng.expovariate(1.0 / (self.mean_dwell_s * (self.burst_share if bursting else
                                                                 1 - self.burst_share) * 2))
            end = min(duration_s, t + dwell)
            lam = high if bursting else low
            if lam > 0:
                s = t + rng.expovariate(lam)
                while s < end:
                    out.append(s)
                    s += rng.expovariate(lam)
            t, bursting = end, not bursting
        return out


@dataclass
class SimResult:
    """Everything measured in one simulated run (all simulated figures)."""

    policy: str
    duration_s: float
    completed_times: list[tuple[float, str]]  # (completion time, executor)
    deadline_met: int
    deadline_total: int
    stats: SchedulerStats
    truth: dict[str, dict] = field(default_factory=dict)  # per device: above_passive_s, at_critical_s, max_temp_c, energy_j
    telemetry_energy_j: dict[str, float | None] = field(default_factory=dict)
    # what the counter alone says (last raw value - first), as a reader that ignores wrap-around would report
    unwrapped_energy_j: dict[str, float | None] = field(default_factory=dict)
    truth_from_first_sample_j: dict[str, float] = field(default_factory=dict)
    counter_wraps: dict[str, int] = field(default_factory=dict)  # wrap-arounds the sampler saw
    trace: object | None = None  # the scheduler's Trace (labelled simulated), when asked to keep it
    samples_at_critical: int = 0

    def throughput(self, start: float, end: float) -> float:
        done = sum(1 for t, _ in self.completed_times if start <= t < end)
        return done / (end - start) if end > start else 0.0


def simulate(devices: list[DeviceParams], policy: Policy, arrivals: Arrivals, duration_s: float, seed: int = 0,
             root: Path | str | None = None, sample_interval_s: float = 0.5, keep_trace: bool = False,
             max_queue: int | None = 2000, progress=None, power: dict[str, PowerFigure] | None = None) -> SimResult:
    """Run ``policy`` over simulated ``devices`` for ``duration_s`` simulated seconds of ``arrivals``.
    Requests arriving to a full queue (``max_queue``) are refused, as a bounded service would.
    ``progress(t, scheduler)`` is called after every decision (the CLI prints from it). ``power``: device
    name -> the power figure a profile would give it (what the policies use where no counter measures)."""
    if root is None:
        with tempfile.TemporaryDirectory(prefix="edgeaccel-sim-", dir=scratch_dir()) as tmp:
            return simulate(devices, policy, arrivals, duration_s, seed, tmp, sample_interval_s, keep_trace, max_queue,
                            progress, power)
    clock = SimClock()
    world = SimWorld(devices, root, seed, atomic=False)  # nothing reads while it writes: no need for renames
    executors = {name: SimulatedExecutor(model, clock) for name, model in world.models.items()}
    sampler = TelemetrySampler(world.specs(), Path(root), min_interval_s=sample_interval_s,
                               limits={d.name: DeviceLimits(d.passive_c, d.critical_c) for d in devices})
    slots = [ExecutorSlot(ex.name, name, 1, ex.nominal_latency_s, ex) for name, ex in executors.items()]
    for slot in slots:
        slot.power = (power or {}).get(slot.device)
    first_energy: dict[str, float] = {}

    def sync(t: float) -> None:
        world.sync(t)
        if not first_energy:  # the sampler counts energy from its first reading, which follows this sync
            first_energy.update({name: m.energy_j for name, m in world.models.items()})

    scheduler = Scheduler(slots, policy, sampler, interval_s=sample_interval_s, simulated=True,
                          before_sample=sync, max_queue=max_queue)
    events: list[tuple[float, int, str, object]] = []
    order = itertools.count()
    for t in arrivals.times(duration_s, seed):
        heapq.heappush(events, (t, next(order), "arrive", None))
    heapq.heappush(events, (0.0, next(order), "decide", None))
    completed: list[tuple[float, str]] = []
    met = total = 0
    wake_at: float | None = None
    while events:
        t, _, kind, data = heapq.heappop(events)
        if t > duration_s:
            break
        clock.advance_to(t)
        if kind == "arrive":
            deadline = t + arrivals.deadline_s if arrivals.deadline_s is not None else None
            scheduler.submit(scheduler.new_request(t, deadline))
            if deadline is not None:
                total += 1
        elif kind == "done":
            request, slot = data
            scheduler.finished(request, slot, t, ok=True)
            completed.append((t, slot.name))
            if request.deadline is not None and t <= request.deadline:
                met += 1
        elif kind == "wake" and wake_at == t:
            wake_at = None
        if scheduler.decision_due(t):
            scheduler.maybe_decide(t)
            heapq.heappush(events, (t + scheduler.interval_s, next(order), "decide", None))
            if progress is not None:
                progress(t, scheduler)
        assigned, _shed = scheduler.dispatch(t)
        for request, slot in assigned:
            duration = slot.executor.begin(t)
            heapq.heappush(events, (t + duration, next(order), "done", (request, slot)))
        nxt = scheduler.next_wakeup(t)
        if scheduler.queued and nxt is not None and nxt > t and (wake_at is None or nxt < wake_at):
            wake_at = nxt
            heapq.heappush(events, (nxt, next(order), "wake", None))
    world.sync(duration_s)
    truth = {name: {"above_passive_s": m.above_passive_s, "at_critical_s": m.at_critical_s,
                    "max_temp_c": m.max_temp_c, "energy_j": m.energy_j, "throttled_s": m.throttled_s,
                    "busy_s": m.busy_s}
             for name, m in world.models.items()}
    sampler_energy = {name: s.energy_j for name, s in sampler.sample(duration_s + sample_interval_s).items()}
    unwrapped = {name: (acc.last_raw_j - acc.first_raw_j) if acc.first_raw_j is not None else None
                 for name, acc in sampler.energy_counters.items()}
    stats = scheduler.stats(duration_s)
    return SimResult(str(policy), duration_s, completed, met, total, stats, truth, sampler_energy, unwrapped,
                     {name: m.energy_j - first_energy.get(name, 0.0) for name, m in world.models.items()},
                     {name: acc.wraps for name, acc in sampler.energy_counters.items()},
                     scheduler.trace if keep_trace else None,
                     sum(d.samples_at_critical for d in stats.devices.values()))
