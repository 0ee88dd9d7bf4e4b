"""With policy=, a scheduler that limits a hot device sheds load at the source (frames dropped there, counted
as shed by the policy), never by a growing queue. Simulated accelerator on a fake thermal tree, real threads."""

from __future__ import annotations

import time

import numpy as np
import pytest

from edgeaccel.scheduling.clock import MonotonicClock
from edgeaccel.scheduling.model import ScheduledModel
from edgeaccel.sim.executor import SimulatedExecutor
from edgeaccel.sim.heat import DeviceParams
from edgeaccel.sim.world import SimWorld

pytestmark = pytest.mark.slow  # slow tier: a live source for seconds

X = np.zeros((1, 8), np.uint8)


def test_thermal_policy_sheds_frames_at_the_source(tmp_path):
    clock = MonotonicClock()
    # little heat capacity: above the passive trip within a fraction of a second when busy, cool soon when idle
    # (69 C at full duty: above passive, below critical; 46 C idle: the policy's back-offs end)
    hot = DeviceParams("accel", layout="apex", ambient_c=45.0, r_c_per_w=12.0, c_j_per_c=0.05, idle_w=0.1,
                       busy_w=2.0, service_s=0.004, passive_c=60.0, critical_c=85.0, sensor_step_c=0.25)
    sim = SimWorld([hot], tmp_path, t0=clock.now())
    executors = [SimulatedExecutor(m, clock) for m in sim.models.values()]
    image = np.zeros((16, 16, 3), np.uint8)

    def camera():  # a source far faster than the throttled device
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            yield image
            time.sleep(0.0005)

    with ScheduledModel(executors, "thermal", sensors=sim.specs(), root=sim.root, before_sample=sim.sync,
                        sample_interval_s=0.05) as model:
        with model.watch(camera(), drop="latest", preprocess=lambda img: [X]) as pipeline:
            limited_seen = False
            for _frame in pipeline:
                limited_seen = limited_seen or pipeline.shedding is not None
            summary = pipeline.summary()
        actions = {r.action for r in model.trace}
    assert actions & {"duty_cycle", "back_off", "lower_concurrency"}, actions
    assert limited_seen
    assert summary["dropped"]["policy"] > 0
    assert summary["frames_in"] == summary["frames_out"] + sum(summary["dropped"].values()) + summary["failed"]
