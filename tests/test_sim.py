"""The simulator: heat model physics, the kernel's throttling, the files it writes for the real readers, energy
truth against what the readers account across counter wraps, the computed optimum, and its labels."""

from __future__ import annotations

import pytest

from edgeaccel.scheduling import make_policy
from edgeaccel.sim.clock import SimClock
from edgeaccel.sim.heat import DeviceParams, HeatModel
from edgeaccel.sim.optimum import sustained_optimum, window_bound
from edgeaccel.sim.run import Arrivals, simulate
from edgeaccel.sim.world import SimWorld
from edgeaccel.telemetry import TelemetrySampler, discover

DEVICE = DeviceParams("d", layout="hwmon", ambient_c=30.0, r_c_per_w=10.0, c_j_per_c=3.0, idle_w=0.5, busy_w=5.0,
                      service_s=0.02, passive_c=70.0, critical_c=90.0)


def busy_for(model: HeatModel, seconds: float, duty: float = 1.0) -> None:
    """Keep the device busy a ``duty`` share of each 100 ms, for ``seconds``."""
    t = model.t
    end = t + seconds
    while t < end:
        model._busy.append((t, t + 0.1 * duty))
        model.advance(t + 0.1)
        t += 0.1


def test_heats_toward_its_steady_state_and_cools_toward_ambient():
    cool = DeviceParams("c", ambient_c=30.0, r_c_per_w=5.0, c_j_per_c=3.0, idle_w=0.5, busy_w=5.0, service_s=0.02,
                        passive_c=70.0, critical_c=90.0)
    model = HeatModel(cool)
    busy_for(model, 10 * cool.tau_s, duty=0.5)
    assert model.temp_c == pytest.approx(cool.steady_c(0.5), abs=0.3)  # 30 + 5 * (0.5 + 0.5 * 4.5) = 43.75
    model.advance(model.t + 10 * cool.tau_s)
    assert model.temp_c == pytest.approx(cool.steady_c(0.0), abs=0.1)
    assert model.energy_j > 0 and model.level == 0


def test_the_kernel_throttles_above_the_passive_trip():
    model = HeatModel(DEVICE)  # full load settles at 80 C, above the 70 C passive trip
    busy_for(model, 600)
    assert model.level > 0 and model.speed < 1.0 and model.service_time() > DEVICE.service_s
    assert model.temp_c == pytest.approx(70.0, abs=3.0)  # held around the trip, as step_wise does
    assert 0.2 * 600 < model.above_passive_s < 600
    assert model.throttled_s > 0


def test_apex_driver_divides_the_clock_by_trip_point():
    apex = DeviceParams("tpu", layout="apex", ambient_c=30.0, r_c_per_w=20.0, c_j_per_c=20.0, idle_w=0.5, busy_w=5.0,
                        service_s=0.01, passive_c=85.0, critical_c=110.0, governor_s=5.0)
    model = HeatModel(apex, start_c=92.0)
    model.advance(5.0)
    assert model.level == 2 and model.speed == 0.25  # above trips 0 (85) and 1 (90), below 2 (95)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="ambient < passive < critical"):
        DeviceParams("x", ambient_c=50.0, passive_c=40.0)
    with pytest.raises(ValueError, match="layout"):
        DeviceParams("x", layout="fpga")


def test_world_writes_what_the_real_readers_read(tmp_path):
    cpu = DeviceParams("cpu", layout="cpu", ambient_c=30.0, passive_c=85.0, critical_c=100.0, sensor_step_c=1.0,
                       energy_range_j=20.0)
    tpu = DeviceParams("tpu", layout="apex", ambient_c=30.0, passive_c=85.0, critical_c=110.0)
    world = SimWorld([cpu, tpu], tmp_path)
    assert {s.name for s in discover(tmp_path)} >= {"thermal:thermal_zone0", "rapl:package-0", "apex:apex_1",
                                                   "cooling:cooling_device0"}
    sampler = TelemetrySampler(world.specs(), tmp_path, min_interval_s=0.5)
    t, first_truth = 0.0, None
    for _ in range(240):  # 2 minutes at full load: the 20 J RAPL range wraps many times
        for model in world.models.values():
            while model.t + model.service_time() <= t + 0.5 and (not model._busy or model._busy[-1][1] < t + 0.5):
                model.begin(max(t, model._busy[-1][1]) if model._busy else t)
        t += 0.5
        world.sync(t)
        samples = sampler.sample(t)
        if first_truth is None:
            first_truth = world.models["cpu"].energy_j  # the sampler counts from its first reading
    truth = world.models["cpu"].energy_j - first_truth
    assert truth > 20 * 20.0
    assert samples["cpu"].energy_j == pytest.approx(truth, rel=1e-3)
    assert samples["cpu"].temp_c == pytest.approx(world.models["cpu"].temp_c, abs=1.5)
    assert samples["tpu"].temp_c == pytest.approx(world.models["tpu"].temp_c, abs=1.0)
    assert samples["cpu"].passive_c == 85.0 and samples["tpu"].critical_c == pytest.approx(110.0, abs=0.25)
    assert samples["tpu"].energy_j is None and "no power or energy sensor" in samples["tpu"].energy_reason


def test_sustained_optimum_is_the_heat_balance():
    rate, duty = sustained_optimum([DEVICE])
    expected = ((70.0 - 30.0) / 10.0 - 0.5) / (5.0 - 0.5)  # 0.777...
    assert duty["d"] == pytest.approx(expected) and rate == pytest.approx(expected / 0.02)
    model = HeatModel(DEVICE)
    busy_for(model, 20 * DEVICE.tau_s, duty=duty["d"])
    assert model.temp_c == pytest.approx(70.0, abs=0.2)  # the optimum sits exactly on the trip
    bound = window_bound([DEVICE], 600.0)
    assert rate < bound < rate * 1.1  # starting cold buys a little over one window


def test_simulated_results_are_labelled(tmp_path):
    result = simulate([DEVICE], make_policy("thermal"), Arrivals(rate=30.0), 60.0, seed=3, root=tmp_path,
                      keep_trace=True)
    assert result.stats.simulated and "simulated" in result.stats.as_dict()
    assert all(line.startswith("[simulated]") for line in result.stats.lines())
    # requests without deadlines cannot be late: the line says there were none rather than "0 late"
    assert any("no deadlines" in line for line in result.stats.lines())
    assert not any(" 0 late" in line or "nan" in line for line in result.stats.lines())
    header = result.trace.to_csv().splitlines()[0]
    assert header.startswith("simulated_time_s,") and "simulated_d_temp_c" in header


def test_late_counts_only_requests_that_carried_a_deadline(tmp_path):
    result = simulate([DEVICE], make_policy("thermal"), Arrivals(rate=30.0, deadline_s=0.5), 20.0, seed=3,
                      root=tmp_path)
    line = next(x for x in result.stats.lines() if "done," in x)
    assert "late of" in line and "with a deadline" in line


def test_arrivals_are_bursty_with_the_asked_mean():
    times = Arrivals(rate=20.0, burst=2.0, burst_share=0.3).times(2000.0, seed=5)
    assert len(times) / 2000.0 == pytest.approx(20.0, rel=0.1)
    per_second = [0] * 2000
    for t in times:
        per_second[int(t)] += 1
    mean = sum(per_second) / len(per_second)
    variance = sum((n - mean) ** 2 for n in per_second) / len(per_second)
    assert variance > 2 * mean  # a Poisson stream would have variance == mean


def test_sim_clock():
    clock = SimClock(5.0)
    clock.sleep(1.5)
    clock.advance_to(4.0)  # never backwards
    assert clock.now() == 6.5 and clock.simulated
    with pytest.raises(ValueError):
        clock.advance(-1)


COOL_PAIR = [
    DeviceParams("accel", layout="hwmon", ambient_c=25.0, r_c_per_w=5.0, c_j_per_c=4.0, idle_w=0.5, busy_w=4.0,
                 service_s=0.02, passive_c=85.0, critical_c=100.0),
    DeviceParams("cpu", layout="cpu", ambient_c=25.0, r_c_per_w=2.0, c_j_per_c=10.0, idle_w=2.0, busy_w=12.0,
                 service_s=0.05, passive_c=90.0, critical_c=100.0, sensor_step_c=1.0, energy_range_j=50.0),
]


@pytest.mark.slow
def test_power_budget_is_held_near_the_best_split(tmp_path):
    from edgeaccel.sim.optimum import power_optimum

    budget = 9.0
    best, duty = power_optimum(COOL_PAIR, budget)
    assert duty == {"accel": 1.0, "cpu": pytest.approx(0.3)}  # the efficient accelerator first
    result = simulate(COOL_PAIR, make_policy("power", budget), Arrivals(rate=1.5 * best), 300.0, seed=2,
                      root=tmp_path, keep_trace=True)
    late = [r for r in result.trace.records if r.time >= 150.0]
    average = sum(sum(v.power_w for v in r.devices.values()) for r in late) / len(late)
    assert average <= budget
    assert result.throughput(150.0, 300.0) >= 0.9 * best


@pytest.mark.slow
def test_efficiency_policy_uses_the_cheaper_executor(tmp_path):
    result = simulate(COOL_PAIR, make_policy("efficiency"), Arrivals(rate=20.0), 200.0, seed=2, root=tmp_path)
    by = {name: e.completed for name, e in result.stats.executors.items()}
    assert by["sim:accel"] > 0.95 * (by["sim:accel"] + by["sim:cpu"])
    energy = {name: e.energy_per_inference_j for name, e in result.stats.executors.items()}
    assert energy["sim:accel"] < energy["sim:cpu"]


def test_a_device_on_a_real_clock_starts_now_not_at_the_clocks_origin():
    """time.monotonic() counts from boot: a heat model left at t=0 would simulate the whole uptime at the first
    run (1.7 s after 15 h up, and a scheduler timing its first run expired 299 of 300 requests)."""
    from edgeaccel.sim.executor import SimulatedExecutor

    class UpForADay:  # a real clock (not simulated) on a machine up for a day
        simulated = False

        def now(self) -> float:
            return 86400.0

    clock = UpForADay()
    heat = HeatModel(DeviceParams("cpu", layout="cpu", service_s=0.002))
    SimulatedExecutor(heat, clock)
    assert heat.t == 86400.0
    simulated = HeatModel(DeviceParams("cpu", layout="cpu", service_s=0.002))
    SimulatedExecutor(simulated, SimClock())  # a simulated clock's time is the model's own: left alone
    assert simulated.t == 0.0
    ran = HeatModel(DeviceParams("cpu", layout="cpu", service_s=0.002))
    ran.advance(5.0)
    before = ran.t
    SimulatedExecutor(ran, clock)  # a model that has run keeps its time
    assert ran.t == before
