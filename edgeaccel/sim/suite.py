"""The scenario suite behind tools/sched_bench.py and its bounded CI test: for one seeded scenario, run the
thermal policy under overload and at 70% of sustained capacity with deadlines, and the naive "always the
fastest executor" schedule, and measure each target. All figures are simulated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..scheduling.policies import AlwaysFastest, make_policy
from .optimum import sustained_optimum, window_bound
from .run import Arrivals, simulate
from .scenarios import Scenario, make_scenario

OVERLOAD = 1.3  # mean offered load in the throughput runs, times the sustained optimum
DEADLINE_LOAD = 0.7  # offered load in the deadline runs
DEADLINE_S = 0.5
PASSIVE_CAP_PCT = 5.0


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's simulated measurements."""

    scenario: Scenario
    optimum_per_s: float  # best sustained throughput under the passive trips (steady state)
    window_bound_per_s: float  # best possible over the measured window starting cold (upper bound)
    throughput_per_s: float  # thermal policy, last third of the run
    critical_samples: int  # telemetry samples at or above a critical trip (thermal policy, both runs)
    critical_truth_s: float  # simulated time at or above a critical trip
    above_passive_pct: float  # worst device and run (overload and 70%), share of run time above its passive trip
    deadline_met_pct: float  # thermal policy at 70% load: requests finished by their deadline
    deadline_requests: int
    naive_above_passive_pct: float
    naive_critical_s: float
    naive_throughput_per_s: float
    energy_error_pct: dict[str, float]  # |telemetry - truth| / truth, devices with an energy counter
    energy_wraps: dict[str, int]
    unwrapped_error_pct: dict[str, float]  # the same for a reader that ignored wrap-around (shows the check bites)

    @property
    def throughput_ratio(self) -> float:
        return self.throughput_per_s / self.optimum_per_s if self.optimum_per_s else 0.0

    @property
    def naive_breaks_cap(self) -> bool:
        return self.naive_above_passive_pct > PASSIVE_CAP_PCT or self.naive_critical_s > 0


def run_scenario(seed: int, minutes: float = 30.0, sample_interval_s: float = 0.5) -> ScenarioResult:
    scenario = make_scenario(seed)
    devices = list(scenario.devices)
    duration = minutes * 60.0
    window = duration / 3.0  # "the last 10 minutes" of 30
    optimum, _ = sustained_optimum(devices)
    overload = Arrivals(rate=optimum * OVERLOAD)
    thermal = simulate(devices, make_policy("thermal"), overload, duration, seed, sample_interval_s=sample_interval_s)
    timed = simulate(devices, make_policy("thermal"), Arrivals(rate=optimum * DEADLINE_LOAD, deadline_s=DEADLINE_S),
                     duration, seed + 10_000, sample_interval_s=sample_interval_s)
    naive = simulate(devices, AlwaysFastest(), overload, duration, seed, sample_interval_s=sample_interval_s)
    energy_error, wraps, unwrapped = {}, {}, {}
    for name, spent in thermal.truth_from_first_sample_j.items():
        measured = thermal.telemetry_energy_j.get(name)
        if measured is not None and spent > 0:
            energy_error[name] = 100.0 * abs(measured - spent) / spent
            unwrapped[name] = 100.0 * abs(thermal.unwrapped_energy_j[name] - spent) / spent
            wraps[name] = thermal.counter_wraps.get(name, 0)
    return ScenarioResult(
        scenario, optimum, window_bound(devices, window),
        thermal.throughput(duration - window, duration),
        thermal.samples_at_critical + timed.samples_at_critical,
        sum(t["at_critical_s"] for r in (thermal, timed) for t in r.truth.values()),
        100.0 * max(t["above_passive_s"] for r in (thermal, timed) for t in r.truth.values()) / duration,
        100.0 * timed.deadline_met / timed.deadline_total if timed.deadline_total else 100.0,
        timed.deadline_total,
        100.0 * max(t["above_passive_s"] for t in naive.truth.values()) / duration,
        sum(t["at_critical_s"] for t in naive.truth.values()),
        naive.throughput(duration - window, duration),
        energy_error, wraps, unwrapped,
    )
