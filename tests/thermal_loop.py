"""A closed thermal loop for tests: the project's heat model (edgeaccel/sim/heat.py) heats with the work the
scheduler admits and writes its temperature into a kernel-shaped thermal zone; the real TelemetrySampler reads it
and the real Scheduler decides, on a clock that is only what this loop says (edgeaccel/sim/closed_loop.py, which
tools/thermal_bench.py also runs). ``device`` draws plants from a seed. Every figure here is simulated.
"""

from __future__ import annotations

import random
from pathlib import Path

from edgeaccel.scheduling.policies import Policy
from edgeaccel.sim.closed_loop import LoopRecord, LoopResult, duty_reversals, run_closed_loop
from edgeaccel.sim.heat import DeviceParams

__all__ = ["LoopRecord", "LoopResult", "device", "duty_reversals", "run_closed_loop", "run_loop"]


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
             start_c: float | None = None, load_from_s: float = 0.0, **more) -> LoopResult:
    """The loop without a cooling device in the zone unless ``cooling=True`` (the kernel's throttling happens in
    the heat model but the scheduler cannot see it), as the first thermal-loop tests ran it."""
    more.setdefault("cooling", False)
    return run_closed_loop(params, policy, duration_s, root, seed, outage, sample_interval_s, start_c, load_from_s,
                           **more)
