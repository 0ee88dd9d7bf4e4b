"""The bounded CI version of tools/sched_bench.py: two scenarios (a hwmon accelerator and a Coral), five
simulated minutes each instead of twenty scenarios of thirty, the same targets. Simulated figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgeaccel.sim.suite import PASSIVE_CAP_PCT, run_scenario

from conftest import ROOT

pytestmark = pytest.mark.slow  # slow tier: scheduling benchmarks


@pytest.mark.parametrize("seed", [0, 4])
def test_scenario_meets_the_targets(seed):
    r = run_scenario(seed, minutes=5.0)
    assert r.critical_samples == 0 and r.critical_truth_s == 0.0
    assert r.above_passive_pct <= PASSIVE_CAP_PCT
    assert r.throughput_ratio >= 0.90, r.scenario.describe()
    assert r.deadline_met_pct >= 95.0
    assert r.naive_breaks_cap, "the scenario is too easy: always-fastest stays under the cap"
    assert r.energy_error_pct and max(r.energy_error_pct.values()) <= 2.0
    assert sum(r.energy_wraps.values()) > 0  # the counter really wrapped


def test_the_tool_prints_every_target():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "sched_bench.py"), "--scenarios", "1", "--minutes",
                          "1", "--seed0", "4", "--skip-real"], capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr  # one simulated minute need not meet every target
    for target in ("samples at/above critical trip", "time above passive trip", "sustained throughput vs optimum",
                   "requests meeting deadline", "naive always-fastest breaks the cap", "energy accounting"):
        assert target in out.stdout
    assert all(line.startswith(("[simulated]", "bench wall time")) for line in out.stdout.splitlines())


def test_the_thermal_bench_prints_every_figure_labelled_simulated_with_a_verdict_per_target():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "thermal_bench.py"), "--plants", "0",
                          "--random-plants", "1", "--seed", "3", "--outages", "5"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 1), out.stderr
    lines = out.stdout.splitlines()
    assert lines and all(line.startswith("[simulated]") for line in lines)
    for policy in ("thermal", "latency"):
        assert any(f"{policy}  steady" in line and ("PASS" in line or "FAIL" in line) for line in lines)
        assert any(f"{policy}  ambient" in line for line in lines)
        outage = [line for line in lines if line.split()[1:3] == [policy, "5"]]
        assert outage and outage[0].count("PASS") + outage[0].count("FAIL") == 3, outage
        assert any(line.split()[1:3] == [policy, "20"] and "info (no model yet)" in line for line in lines)
    assert any("x thermal" in line for line in lines if "latency  steady" in line)
    assert "rate/s" in out.stdout and "J/inf" in out.stdout and "revs" in out.stdout
    assert ("all targets met" in lines[-1]) == (out.returncode == 0)


def test_the_thermal_bench_draws_the_same_plants_from_the_same_seed():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from thermal_bench import random_plants
    finally:
        sys.path.remove(str(ROOT / "tools"))
    first, again, other = random_plants(6, 5), random_plants(6, 5), random_plants(6, 6)
    assert first == again and first != other
    for plant in first:
        assert 2.0 <= plant.tau_s <= 30.0 and 75.0 <= plant.flat_out_c <= 140.0
        assert plant.ambient_c < plant.passive_c < plant.critical_c
