"""A closed thermal loop: one simulated device (edgeaccel/sim/heat.py) heats with the work the scheduler admits and
writes a kernel-shaped thermal zone (x86_pkg_temp, millidegrees, passive and critical trips, and optionally its
bound cooling device, whose cur_state is the simulated kernel's throttle level); the real TelemetrySampler reads
it and the real Scheduler decides, on a clock that is only what this loop says. A saturating load (``in_flight``
requests queued at all times, from ``load_from_s`` on) keeps the device as busy as the policy lets it.

Disturbances: ``ambient_steps`` ((time, degrees) added to the ambient temperature from then on) and ``outage``
(start, end): the temperature file is gone for that while and the sensor stops answering. Each decision is
recorded with the hidden temperature, the work done and the energy spent so far, so any window can be scored.
Every figure here is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..scheduling.core import ExecutorSlot, Scheduler
from ..scheduling.policies import Policy
from ..telemetry.sampler import TelemetrySampler
from ..telemetry.sensors import SensorSpec
from .fakesys import FakeSysfs
from .heat import DeviceParams, HeatModel

ZONE = "sys/class/thermal/thermal_zone0"
STEP_S = 0.002  # the loop's tick: well below a service time


@dataclass
class LoopRecord:
    time: float
    hidden_c: float  # the heat model's temperature (what the sensor would say, were it answering)
    sensed: bool  # the sensor answered at this decision
    duty: float
    action: str
    reason: str
    completed: int = 0  # inferences finished so far
    energy_j: float = 0.0  # energy the device spent so far (simulated truth)
    above_passive_s: float = 0.0  # time spent above the passive trip so far (simulated truth)
    at_critical_s: float = 0.0
    fallback: str | None = None  # what the policy said it falls back on while the sensor is lost


@dataclass
class LoopResult:
    records: list[LoopRecord] = field(default_factory=list)
    peak_c: float = 0.0
    completed: int = 0
    model: HeatModel | None = None

    def window(self, start: float, end: float) -> list[LoopRecord]:
        return [r for r in self.records if start <= r.time < end]

    def score(self, start: float, end: float) -> dict:
        """Rate, energy per inference, time above passive and at critical, peak, duty reversals over a window."""
        rows = self.window(start, end)
        if len(rows) < 2:
            raise ValueError(f"no decisions between {start} and {end} s")
        first, last = rows[0], rows[-1]
        span = last.time - first.time
        done = last.completed - first.completed
        return {"rate_per_s": done / span, "energy_j_per_inference": (last.energy_j - first.energy_j) / done
                if done else None,
                "above_passive_pct": 100.0 * (last.above_passive_s - first.above_passive_s) / span,
                "at_critical_s": last.at_critical_s - first.at_critical_s,
                "max_c": max(r.hidden_c for r in rows), "duty_reversals": duty_reversals([r.duty for r in rows])}


def duty_reversals(duties: list[float], step: float = 0.1) -> int:
    """How often the duty changes direction by a move of at least ``step`` (noise-sized wiggles are not
    reversals; a back-off and a return are)."""
    reversals, direction, anchor = 0, 0, duties[0] if duties else 0.0
    for duty in duties[1:]:
        move = duty - anchor
        if abs(move) >= step:
            new = 1 if move > 0 else -1
            if direction and new != direction:
                reversals += 1
            direction, anchor = new, duty
        elif direction * move > 0:
            anchor = duty  # still going the same way: the swing is measured from the extreme
    return reversals


def run_closed_loop(params: DeviceParams, policy: Policy, duration_s: float, root: Path | str, seed: int = 0,
                    outage: tuple[float, float] | None = None, sample_interval_s: float = 0.5,
                    start_c: float | None = None, load_from_s: float = 0.0, in_flight: int = 4,
                    ambient_steps: tuple[tuple[float, float], ...] = (), cooling: bool = True) -> LoopResult:
    fs = FakeSysfs(root, atomic=False)
    heat = HeatModel(params, seed, start_c=start_c)
    trips = (("passive", params.passive_c), ("critical", params.critical_c))
    if cooling:  # the zone's bound cooling device: the kernel's throttle level, as the real readers see it
        fs.cooling_device(0, "Processor", 0, params.governor_steps)
    fs.thermal_zone(0, "x86_pkg_temp", round(heat.temp_c), trips=trips, cooling=(0,) if cooling else ())
    steps = sorted(ambient_steps)
    base = params.ambient_c
    answering = [True]

    def write_zone(t: float) -> None:
        heat.advance(t)
        ambient = base + sum(delta for at, delta in steps if at <= t)
        if ambient != heat.p.ambient_c:
            heat.p = replace(heat.p, ambient_c=ambient)  # the room warms: from the next integration step on
        blind = outage is not None and outage[0] <= t < outage[1]
        answering[0] = not blind
        if blind:
            fs.path(f"{ZONE}/temp").unlink(missing_ok=True)
            fs.forget(f"{ZONE}/temp")
        else:
            fs.zone_temp(0, round(heat.sensed_c()))  # 1 C steps, as x86_pkg_temp reads
        if cooling:
            fs.write("sys/class/thermal/cooling_device0/cur_state", heat.level)

    spec = SensorSpec(temperature="thermal:x86_pkg_temp", throttle="thermal:x86_pkg_temp" if cooling else None)
    sampler = TelemetrySampler({"cpu": spec}, Path(root), min_interval_s=sample_interval_s)
    slot = ExecutorSlot("loop", "cpu", 1, params.service_s)
    scheduler = Scheduler([slot], policy, sampler, interval_s=sample_interval_s, simulated=True,
                          before_sample=write_zone)
    result = LoopResult(model=heat)
    running: list[tuple[float, object]] = []
    t = 0.0
    while t < duration_s:
        while t >= load_from_s and scheduler.queued < in_flight:
            scheduler.submit(scheduler.new_request(t))
        for end, request in [item for item in running if item[0] <= t]:
            running.remove((end, request))
            scheduler.finished(request, slot, end)
            result.completed += 1
        if scheduler.maybe_decide(t):
            last = scheduler.trace.records[-1]
            ctl = scheduler.state.controls.get("cpu")
            result.records.append(LoopRecord(t, heat.temp_c, answering[0], last.duty["cpu"], last.action,
                                             last.reason, result.completed, heat.energy_j, heat.above_passive_s,
                                             heat.at_critical_s, getattr(ctl, "fallback", None) if not answering[0]
                                             else None))
        assigned, _ = scheduler.dispatch(t)
        for request, _slot in assigned:
            running.append((t + heat.begin(t), request))
        t = round(t + STEP_S, 9)
    heat.advance(t)
    result.peak_c = heat.max_temp_c
    return result
