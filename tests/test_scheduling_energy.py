"""Executors without an energy sensor are ranked by estimates, never starved.

The efficiency and power policies used to put every executor whose device has no energy counter last: on x86
with a Coral (RAPL on the CPU, nothing on the Edge TPU) every request went to the CPU. Now an executor without a
counter is ranked by its power figure (a profile's typical power, the Edge TPU's 2 W, the CPU's share of its
package power) times its measured service time, labelled estimated. Simulated figures are labelled so.
"""

from __future__ import annotations

import pytest

from edgeaccel.profiles import get_profile
from edgeaccel.scheduling import DeviceView, EfficiencyPolicy, ExecutorView, Observation, PowerBudgetPolicy, make_policy
from edgeaccel.scheduling.devices import place_device
from edgeaccel.scheduling.energy import PowerFigure, cpu_share, power_figures
from edgeaccel.sim.heat import DeviceParams
from edgeaccel.sim.run import Arrivals, simulate
from edgeaccel.testing import FakeTree

CORAL = PowerFigure(2.0, "estimated: 2 W typical for EdgeTPU (profile rpi5-coral-usb)")


def views(tpu_power=CORAL):
    return (ExecutorView("tpu", "edgetpu", 0.006, None, False, power_w=tpu_power.watts if tpu_power else None,
                         power_source=tpu_power.source if tpu_power else None),
            ExecutorView("cpu", "cpu", 0.005, 0.075, True))


def observe(executors, now=0.0, tpu_busy=0.0):
    devices = {"edgetpu": DeviceView("edgetpu", 50.0, passive_c=85.0, critical_c=105.0, busy=tpu_busy),
               "cpu": DeviceView("cpu", 50.0, passive_c=90.0, critical_c=100.0, power_w=15.0, busy=1.0)}
    return Observation(now, devices, executors)


def test_efficiency_ranks_an_unmeasured_accelerator_by_its_estimate():
    policy = EfficiencyPolicy()
    decision, _ = policy.decide(observe(views()), policy.initial_state())
    assert decision.order[0] == "tpu" and decision.route == "cheapest"  # 12 mJ estimated < 75 mJ measured
    assert "tpu 0.0120 J (estimated: 2 W typical for EdgeTPU" in decision.reason
    assert "cpu 0.0750 J (measured)" in decision.reason


def test_an_executor_with_no_figure_at_all_is_tried_after_the_others_and_says_why():
    policy = EfficiencyPolicy()
    decision, _ = policy.decide(observe(views(tpu_power=None)), policy.initial_state())
    assert decision.order == ("cpu", "tpu")
    assert "no energy figure for tpu (no counter, no power figure)" in decision.reason


def test_power_budget_duty_cycles_the_estimated_cheap_device_last():
    """The Edge TPU has no power sensor: its 2 W figure counts against the budget and ranks it first."""
    policy = PowerBudgetPolicy(8.0)
    state = policy.initial_state()
    duty = {"edgetpu": 1.0, "cpu": 1.0}
    for t in range(120):  # the CPU draws 3 + 9 W x its duty (measured); the TPU 2 W x its busy share (estimated)
        devices = {"edgetpu": DeviceView("edgetpu", 50.0, passive_c=85.0, critical_c=105.0, busy=duty["edgetpu"]),
                   "cpu": DeviceView("cpu", 50.0, passive_c=90.0, critical_c=100.0, power_w=3 + 9 * duty["cpu"],
                                     busy=duty["cpu"])}
        decision, state = policy.decide(Observation(t * 0.5, devices, views()), state)
        duty = decision.duty
    # the cheap TPU at full duty (2 W), the CPU with the rest: (8 x 0.97 - 2 - 3) / 9 = 0.31
    assert duty["edgetpu"] == 1.0 and duty["cpu"] == pytest.approx(0.31, abs=0.03)
    assert "estimated (no power sensor): edgetpu 2.00 W = 2.00 W busy x its busy share" in decision.reason


PAIR = [  # an Edge TPU (no energy sensor) beside a CPU with RAPL, as on x86 with a Coral
    DeviceParams("edgetpu", layout="apex", ambient_c=25.0, r_c_per_w=5.0, c_j_per_c=4.0, idle_w=0.5, busy_w=2.5,
                 service_s=0.02, passive_c=85.0, critical_c=100.0),
    DeviceParams("cpu", layout="cpu", ambient_c=25.0, r_c_per_w=2.0, c_j_per_c=10.0, idle_w=2.0, busy_w=12.0,
                 service_s=0.05, passive_c=90.0, critical_c=100.0, sensor_step_c=1.0, energy_range_j=50.0),
]


def test_simulated_coral_beside_a_rapl_cpu_takes_the_work_under_efficiency(tmp_path):
    result = simulate(PAIR, make_policy("efficiency"), Arrivals(rate=10.0), 120.0, seed=1, root=tmp_path,
                      power={"edgetpu": CORAL})
    done = {name: e.completed for name, e in result.stats.executors.items()}
    assert result.stats.simulated
    assert done["sim:edgetpu"] > 0.9 * (done["sim:edgetpu"] + done["sim:cpu"]), done
    tpu = result.stats.executors["sim:edgetpu"]
    assert tpu.energy_per_inference_j is None and tpu.estimated_energy_per_inference_j == pytest.approx(0.04, rel=0.1)
    line = next(x for x in result.stats.lines() if "sim:edgetpu" in x)
    assert line.startswith("[simulated]") and "~40.0 mJ/inference estimated: 2 W typical" in line


@pytest.mark.slow
def test_without_any_figure_the_accelerator_is_not_starved(tmp_path):
    """Still ranked after the measured CPU, but measured again now and then rather than never run."""
    result = simulate(PAIR, make_policy("efficiency"), Arrivals(rate=10.0), 120.0, seed=1, root=tmp_path)
    assert result.stats.executors["sim:edgetpu"].completed >= 10


def test_power_figures_come_from_the_profile_the_kind_or_the_cpu_package(tmp_path):
    class Fake:
        def __init__(self, threads):
            self.info = type("Info", (), {"threads": threads})()

    tree = FakeTree(tmp_path).rapl("intel-rapl:0", "package-0", 0)
    tree.file("/sys/class/powercap/intel-rapl:0/constraint_0_name", "long_term\n")
    tree.file("/sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw", "28000000\n")
    executors = {"litert:CPU": (Fake(2), place_device("CPU")), "litert:EdgeTPU": (Fake(1), place_device("EdgeTPU")),
                 "ort:CUDA": (Fake(1), place_device("CUDA:0"))}
    pi = power_figures(executors, get_profile("rpi5-coral-usb"), tmp_path)
    assert pi["litert:EdgeTPU"].watts == 2.0 and "profile rpi5-coral-usb" in pi["litert:EdgeTPU"].source
    generic = power_figures(executors, get_profile("generic-x86"), tmp_path)
    assert generic["litert:EdgeTPU"].watts == 2.0 and "Coral datasheets" in generic["litert:EdgeTPU"].source
    cpu = generic["litert:CPU"]
    assert cpu.estimated and cpu.source.startswith("estimated: 28 W intel-rapl:0 package-0 long-term power limit")
    assert "ort:CUDA" not in generic  # a GPU has NVML; no figure is made up for it
    assert cpu_share((28.0, "PL1"), threads=2, cores=8).watts == pytest.approx(7.0)
    assumed = cpu_share((None, "no RAPL"), threads=None, cores=4)
    assert "assumed" in assumed.source and assumed.watts in (15.0, 5.0)
