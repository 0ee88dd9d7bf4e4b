#!/usr/bin/env python3
"""Thermal policies on a simulated closed-loop plant. Every figure printed is simulated.

Each plant is one device (edgeaccel/sim/heat.py: an RC model with the kernel's step_wise throttling above the
passive trip, unless the plant says the kernel does not throttle) writing a kernel-layout x86_pkg_temp zone in
1 C steps with noise, read by the scheduler's real sampler in (simulated) real time, with 4 requests always in
flight. Plants differ in time constant, how hot they run flat out, ambient, trips, whether the kernel throttles and
whether its cooling device is visible. Per plant and policy:

    steady    from three time constants after the load starts (at least 30 s) for 45 s: rate as a share of
              the optimum (the most a device can sustain at its passive trip, from the heat model), time above
              passive, max temperature, energy per inference, duty reversals (direction changes by >= 0.1)
    ambient   the same over the last 45 s, after the ambient rises (by the plant's step) at the end of steady
              and the device has had three time constants (at least 45 s) to settle again
    outage    the temperature file gone for L seconds from 15 s into steady: time above passive during the
              outage (share of it), max temperature, rate during it as a share of the 20 s before

Targets: latency rate >= thermal rate in every plant and ambient, never critical; outages <= 5% of the outage
above passive, never critical, rate >= 0.5 of before (the thermal policy, which holds the device below passive
before the outage; the latency policy holds it above, so its share above passive is printed, not judged).

    python tools/thermal_bench.py                 # every plant, outages of 5, 15 and 40 s
    python tools/thermal_bench.py --plants 2 --outages 10
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgeaccel.scheduling import make_policy  # noqa: E402
from edgeaccel.sim.closed_loop import run_closed_loop  # noqa: E402
from edgeaccel.sim.heat import DeviceParams  # noqa: E402
from edgeaccel.sim.run import scratch_dir  # noqa: E402


@dataclass(frozen=True)
class Plant:
    name: str
    tau_s: float
    flat_out_c: float  # where it settles flat out (without the kernel's throttling)
    ambient_c: float
    passive_c: float
    critical_c: float
    ambient_step_c: float
    kernel_throttles: bool = True
    cooling_visible: bool = True  # the zone lists its cooling device (only where the kernel throttles)
    service_s: float = 0.012

    def params(self) -> DeviceParams:
        idle, busy = 1.0, 10.0
        r = (self.flat_out_c - self.ambient_c) / busy
        return DeviceParams("cpu", layout="cpu", ambient_c=self.ambient_c, r_c_per_w=r, c_j_per_c=self.tau_s / r,
                            idle_w=idle, busy_w=busy, service_s=self.service_s, passive_c=self.passive_c,
                            critical_c=self.critical_c, sensor_step_c=1.0, sensor_noise_c=0.3,
                            min_speed=0.25 if self.kernel_throttles else 1.0)


PLANTS = (
    Plant("board tau 7 s, no kernel throttling", 7.0, 106.7, 25.0, 70.0, 90.0, 15.0, kernel_throttles=False,
          cooling_visible=False),
    Plant("fast tau 3 s, close trips", 3.0, 120.0, 30.0, 60.0, 72.0, 8.0, cooling_visible=False),
    Plant("slow tau 25 s, hot ambient", 25.0, 140.0, 40.0, 85.0, 105.0, 10.0),
    Plant("very slow tau 60 s", 60.0, 110.0, 22.0, 75.0, 95.0, 12.0, kernel_throttles=False, cooling_visible=False),
    Plant("tau 12 s, throttles unseen", 12.0, 150.0, 28.0, 80.0, 100.0, 15.0, cooling_visible=False),
)
POLICIES = ("thermal", "latency")


def phases(plant: Plant) -> tuple[float, float, float]:
    """(settled from, ambient step at, end): three time constants to settle, at least 30 s."""
    settled = max(30.0, 3.0 * plant.tau_s)
    step = settled + 45.0
    return settled, step, step + max(45.0, 3.0 * plant.tau_s)


def optimum(params: DeviceParams, ambient_c: float) -> float:
    from dataclasses import replace

    shifted = replace(params, ambient_c=ambient_c)
    return shifted.sustainable_duty() / shifted.service_s


def run_plant(plant: Plant, outages: list[float], seed: int) -> dict:
    params = plant.params()
    settled, step_at, end = phases(plant)
    outage_at = settled + 15.0
    out: dict = {"plant": plant.name, "tau_s": plant.tau_s, "passive_c": plant.passive_c,
                 "critical_c": plant.critical_c, "policies": {}}
    for policy in POLICIES:
        with tempfile.TemporaryDirectory(prefix="edgeaccel-thermal-", dir=scratch_dir()) as tmp:
            run = run_closed_loop(params, make_policy(policy), end, tmp, seed,
                                  ambient_steps=((step_at, plant.ambient_step_c),), cooling=plant.cooling_visible)
        steady = run.score(settled, step_at)
        after = run.score(end - 45.0, end)
        steady["share_of_optimum"] = steady["rate_per_s"] / optimum(params, plant.ambient_c)
        after["share_of_optimum"] = after["rate_per_s"] / optimum(params, plant.ambient_c + plant.ambient_step_c)
        rows = {"steady": steady, "ambient": after, "peak_c": run.peak_c, "outages": {}}
        for length in outages:
            with tempfile.TemporaryDirectory(prefix="edgeaccel-thermal-", dir=scratch_dir()) as tmp:
                blind = run_closed_loop(params, make_policy(policy), outage_at + length + 15.0, tmp, seed + 1,
                                        outage=(outage_at, outage_at + length), cooling=plant.cooling_visible)
            before = blind.score(outage_at - 20.0, outage_at)
            during = blind.score(outage_at, outage_at + length)
            modes = sorted({r.fallback for r in blind.window(outage_at, outage_at + length) if r.fallback})
            rows["outages"][length] = {"above_passive_pct": during["above_passive_pct"], "max_c": during["max_c"],
                                       "at_critical_s": during["at_critical_s"] + before["at_critical_s"],
                                       "rate_vs_before": during["rate_per_s"] / before["rate_per_s"],
                                       "fallback": ", ".join(modes) or "none",
                                       "energy_j_per_inference": during["energy_j_per_inference"]}
        out["policies"][policy] = rows
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plants", type=int, default=len(PLANTS), help="how many of the plants to run")
    p.add_argument("--outages", type=float, nargs="+", default=[5.0, 15.0, 40.0], help="outage lengths, s")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write every figure to this JSON file")
    args = p.parse_args(argv)
    started = time.perf_counter()
    tag = "[simulated] "
    results, failures = [], []
    for plant in PLANTS[:args.plants]:
        r = run_plant(plant, args.outages, args.seed)
        results.append(r)
        settled, step_at, end = phases(plant)
        print(f"{tag}plant: {plant.name}: tau {plant.tau_s:g} s, flat out {plant.flat_out_c:g} C, ambient "
              f"{plant.ambient_c:g} C (+{plant.ambient_step_c:g} C at {step_at:g} s), passive {plant.passive_c:g} C, "
              f"critical {plant.critical_c:g} C, kernel throttling {'on' if plant.kernel_throttles else 'off'}"
              f"{'' if plant.cooling_visible else ' (not visible)'}")
        print(f"{tag}  {'policy':8} {'phase':8} {'rate/s':>7} {'of opt':>6} {'>pass%':>6} {'max C':>6} {'J/inf':>7} "
              f"{'revs':>4}")
        for policy, rows in r["policies"].items():
            for phase in ("steady", "ambient"):
                s = rows[phase]
                print(f"{tag}  {policy:8} {phase:8} {s['rate_per_s']:7.1f} {s['share_of_optimum']:6.2f} "
                      f"{s['above_passive_pct']:6.1f} {s['max_c']:6.1f} {s['energy_j_per_inference'] or 0:7.3f} "
                      f"{s['duty_reversals']:>4}")
                if s["at_critical_s"] > 0:
                    failures.append(f"{plant.name}: {policy} {phase} reached critical")
            for length, o in rows["outages"].items():
                print(f"{tag}  {policy:8} outage {length:g} s: {o['above_passive_pct']:.1f}% of it above passive, max "
                      f"{o['max_c']:.1f} C, rate {o['rate_vs_before']:.2f} of before, "
                      f"{o['energy_j_per_inference'] or 0:.3f} J/inf, fallback: {o['fallback']}")
                if o["at_critical_s"] > 0:
                    failures.append(f"{plant.name}: {policy} outage {length:g} s reached critical")
                if policy == "thermal" and (o["above_passive_pct"] > 5.0 or o["rate_vs_before"] < 0.5):
                    failures.append(f"{plant.name}: thermal outage {length:g} s misses a target")
        for phase in ("steady", "ambient"):
            lat, th = r["policies"]["latency"][phase]["rate_per_s"], r["policies"]["thermal"][phase]["rate_per_s"]
            if lat < th:
                failures.append(f"{plant.name}: latency {lat:.1f}/s < thermal {th:.1f}/s ({phase})")
    print(f"{tag}targets: latency rate >= thermal rate at every ambient, never critical; thermal under outage <= 5% "
          "above passive, rate >= 0.5 of before")
    for line in failures:
        print(f"{tag}FAIL {line}")
    print(f"{tag}{'all targets met' if not failures else f'{len(failures)} target(s) missed'}; "
          f"bench wall time {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
