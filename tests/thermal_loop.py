"""A closed thermal loop for tests: the project's heat model (edgeaccel/sim/heat.py) heats with the work the
scheduler admits and writes its temperature into a kernel-shaped thermal zone (edgeaccel.testing.FakeTree:
x86_pkg_temp, millidegrees, 1 C steps, passive and critical trips); the real TelemetrySampler reads it and the
real Scheduler decides, on a clock that is only what this loop says. A saturating load keeps the device as busy
as the policy lets it (from ``load_from_s`` on: idle before). ``outage`` removes the temperature file for a
while: the sensor stops answering. Every figure here is simulated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from edgeaccel.scheduling.core import ExecutorSlot, Scheduler
from edgeaccel.scheduling.policies import Policy
from edgeaccel.sim.heat import DeviceParams, HeatModel
from edgeaccel.telemetry.sampler import TelemetrySampler
from edgeaccel.telemetry.sensors import SensorSpec
from edgeaccel.testing import FakeTree

ZONE = "/sys/class/thermal/thermal_zone0"
STEP_S = 0.002  # the loop's tick: well below a service time


@dataclass
class LoopRecord:
    time: float
    hidden_c: float  # the heat model's temperature (what the sensor would say, were it answering)
    sensed: bool  # the sensor answered at this decision
    duty: float
    action: str
    reason: str


@dataclass
class LoopResult:
    records: list[LoopRecord] = field(default_factory=list)
    peak_c: float = 0.0
    completed: int = 0
    model: HeatModel | None = None

    def window(self, start: float, end: float) -> list[LoopRecord]:
        return [r for r in self.records if start <= r.time < end]


def device(seed: int, passive_c: float = 70.0, critical_c: float = 85.0, tau_s: tuple = (4.0, 20.0),
           duty: tuple = (0.2, 0.4)) -> DeviceParams:
    """A device that runs far hotter than its trips at full load (it sustains only a ``duty`` share of full
    load at its passive trip) and heats fast (time constant ``tau_s``: at full load it passes critical
    seconds after its passive trip), drawn from ``seed``."""
    rng = random.Random(seed)
    ambient = rng.uniform(25.0, 35.0)
    idle, busy = 1.0, rng.uniform(9.0, 12.0)
    share = rng.uniform(*duty)
    r = (passive_c - ambient) / (idle + (busy - idle) * share)  # steady state at passive for that duty
    return DeviceParams("cpu", layout="cpu", ambient_c=ambient, r_c_per_w=r, c_j_per_c=rng.uniform(*tau_s) / r,
                        idle_w=idle, busy_w=busy, service_s=rng.uniform(0.008, 0.02), passive_c=passive_c,
                        critical_c=critical_c, sensor_step_c=1.0, sensor_noise_c=0.3)


def run_loop(params: DeviceParams, policy: Policy, duration_s: float, root: Path, seed: int = 0,
             outage: tuple[float, float] | None = None, sample_interval_s: float = 0.5,
             start_c: float | None = None, load_from_s: float = 0.0) -> LoopResult:
    tree = FakeTree(root)
    heat = HeatModel(params, seed, start_c=start_c)
    tree.thermal_zone(0, "x86_pkg_temp", int(heat.temp_c * 1000),
                      [("passive", int(params.passive_c * 1000)), ("critical", int(params.critical_c * 1000))])
    answering = [True]

    def write_zone(t: float) -> None:
        heat.advance(t)
        blind = outage is not None and outage[0] <= t < outage[1]
        answering[0] = not blind
        temp = tree.local(f"{ZONE}/temp")
        if blind:
            temp.unlink(missing_ok=True)
        else:
            tree.file(f"{ZONE}/temp", f"{int(round(heat.sensed_c())) * 1000}\n")

    sampler = TelemetrySampler({"cpu": SensorSpec(temperature="thermal:x86_pkg_temp")}, root,
                               min_interval_s=sample_interval_s)
    slot = ExecutorSlot("loop", "cpu", 1, params.service_s)
    scheduler = Scheduler([slot], policy, sampler, interval_s=sample_interval_s, simulated=True,
                          before_sample=write_zone)
    result = LoopResult(model=heat)
    running: list[tuple[float, object]] = []
    t = 0.0
    while t < duration_s:
        while t >= load_from_s and scheduler.queued < 4:
            scheduler.submit(scheduler.new_request(t))
        for end, request in [item for item in running if item[0] <= t]:
            running.remove((end, request))
            scheduler.finished(request, slot, end)
            result.completed += 1
        if scheduler.maybe_decide(t):
            last = scheduler.trace.records[-1]
            result.records.append(LoopRecord(t, heat.temp_c, answering[0], last.duty["cpu"], last.action,
                                             last.reason))
        assigned, _ = scheduler.dispatch(t)
        for request, _slot in assigned:
            running.append((t + heat.begin(t), request))
        t = round(t + STEP_S, 9)
    heat.advance(t)
    result.peak_c = heat.max_temp_c
    return result
