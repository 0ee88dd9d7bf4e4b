"""Trip points that cannot be meant are ignored with a reason, and no request waits forever.

Older kernels list the unused passive trips of x86_pkg_temp as 0 C. Taken at face value (a critical trip 15 C
above it, since none is listed) that backed the CPU off forever: no request was served under any policy and
the futures waited without an error.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import DeadlineExceededError, InferenceTimeoutError
from edgeaccel.scheduling.clock import MonotonicClock
from edgeaccel.scheduling.model import ScheduledModel
from edgeaccel.sim.executor import SimulatedExecutor
from edgeaccel.sim.heat import DeviceParams, HeatModel
from edgeaccel.telemetry.sensors import SensorSpec
from edgeaccel.telemetry.thermal import plausible_trips
from edgeaccel.testing import FakeTree

from conftest import SAMPLES

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"


def old_kernel_pkg_zone(root, temp_c=45.0):
    """x86_pkg_temp as older kernels list it: two programmable passive trips, unused, shown as 0 C."""
    return FakeTree(root).thermal_zone(0, "x86_pkg_temp", int(temp_c * 1000), [("passive", 0), ("passive", 0)])


@pytest.mark.parametrize("policy", ["latency", "efficiency", "thermal", "power"])
def test_unprogrammed_zero_trips_are_ignored_and_every_policy_serves(tmp_path, policy):
    old_kernel_pkg_zone(tmp_path)
    with edgeaccel.load(MODEL, policy=policy, power_budget_w=10.0, telemetry_root=tmp_path) as model:
        x = np.zeros(model.inputs[0].shape, np.uint8)
        futures = [model.submit(x) for _ in range(20)]
        assert all(f.result(timeout=30)[0].shape == model.outputs[0].shape for f in futures)
        cpu = model.stats.devices["cpu"]
        assert cpu.last_temp_c == 45.0 and "passive trip 0 C ignored: unprogrammed" in cpu.limits_note
        assert "passive trip 0 C ignored" in str(model.stats)
        assert model.telemetry["cpu"].passive_c is None and model.telemetry["cpu"].limits_from == "none"
        if policy == "thermal":
            assert "no trip points known; passive trip 0 C ignored" in model.trace.records[-1].reason


@pytest.mark.parametrize("passive, critical, kept, why", [
    (85.0, 100.0, (85.0, 100.0), None),
    (0.0, None, (None, None), "passive trip 0 C ignored: unprogrammed"),
    (-273.2, 105.0, (None, 105.0), "passive trip -273.2 C ignored: unprogrammed"),
    (20.0, 90.0, (None, 90.0), "outside 40-150 C"),
    (85.0, 255.0, (85.0, None), "critical trip 255 C ignored: outside"),
    (100.0, 95.0, (None, 95.0), "passive trip 100 C ignored: not below the critical trip 95 C"),
])
def test_plausible_trips(passive, critical, kept, why):
    p, c, note = plausible_trips(passive, critical)
    assert (p, c) == kept
    assert (note is None) if why is None else (why in note)


@pytest.fixture
def scorching(tmp_path):
    """A simulated CPU whose zone reads 99 C against a 100 C critical trip: every policy backs it off."""
    heat = HeatModel(DeviceParams("cpu", layout="cpu", passive_c=85.0, critical_c=100.0, service_s=0.002), start_c=99.0)
    FakeTree(tmp_path).thermal_zone(0, "x86_pkg_temp", 99000, [("passive", 85000), ("critical", 100000)])
    executor = SimulatedExecutor(heat, MonotonicClock())
    return ScheduledModel([executor], "latency", sensors={"cpu": SensorSpec(temperature="thermal:x86_pkg_temp")},
                          root=tmp_path, sample_interval_s=0.05, max_wait_s=0.5)


def test_a_request_without_a_deadline_fails_after_max_wait_saying_what_holds_it(scorching):
    x = np.zeros((1, 8), np.uint8)
    with scorching as model:
        started = time.monotonic()
        future = model.submit(x)
        with pytest.raises(InferenceTimeoutError) as caught:
            future.result(timeout=20)  # the bound is the model's, not this timeout's
        assert time.monotonic() - started < 10
        message = str(caught.value)
        assert "within max_wait_s=0.5 s" in message and "every executor is held back (back_off" in message
        assert "critical trip 100.0 C" in message and "model.trace" in caught.value.hint
        assert model.stats.completed == 0 and model._scheduler.expired == 1


def test_a_request_with_a_deadline_fails_at_its_deadline_while_nothing_can_start(scorching):
    with scorching as model:
        future = model.submit(np.zeros((1, 8), np.uint8), deadline=0.3)
        with pytest.raises(DeadlineExceededError, match="by its deadline"):
            future.result(timeout=20)
        assert model.stats.shed == 1


def test_a_busy_queue_is_not_expired_while_it_is_served(tmp_path):
    """The bound is for requests nothing starts, not for a long queue that is being worked through."""
    heat = HeatModel(DeviceParams("cpu", layout="cpu", service_s=0.002))
    FakeTree(tmp_path).thermal_zone(0, "x86_pkg_temp", 40000, [("passive", 85000), ("critical", 100000)])
    with ScheduledModel([SimulatedExecutor(heat, MonotonicClock())], "latency", root=tmp_path,
                        sensors={"cpu": SensorSpec(temperature="thermal:x86_pkg_temp")}, max_wait_s=2.0) as model:
        futures = [model.submit(np.zeros((1, 8), np.uint8)) for _ in range(300)]  # ~0.6 s of work
        assert all(f.result(timeout=30)[0].shape == (1, 4) for f in futures)
        assert model._scheduler.expired == 0
