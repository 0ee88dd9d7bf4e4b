"""The plant model the thermal and latency policies forecast with (edgeaccel/scheduling/plant.py), identified from
readings of the project's heat model: 1 C steps with noise, as x86_pkg_temp reads, on devices of several time
constants and gains. Every figure is simulated."""

from __future__ import annotations

import math
import random

import pytest

from edgeaccel.scheduling.plant import PlantModel
from edgeaccel.sim.heat import DeviceParams, HeatModel

# (tau s, flat-out steady C, ambient C): none of them is a plant the code was tuned on
PLANTS = [(4.5, 130.0, 27.0), (9.0, 160.0, 33.0), (16.0, 115.0, 22.0), (2.5, 140.0, 38.0)]


def plant(tau: float, flat_out: float, ambient: float) -> DeviceParams:
    r = (flat_out - ambient) / 10.0
    return DeviceParams("cpu", layout="cpu", ambient_c=ambient, r_c_per_w=r, c_j_per_c=tau / r, idle_w=1.0,
                        busy_w=10.0, service_s=0.01, passive_c=300.0, critical_c=400.0, min_speed=1.0,
                        sensor_step_c=1.0, sensor_noise_c=0.3)


def drive(params: DeviceParams, duties: list[float], seed: int, dt: float = 0.5) -> PlantModel:
    heat = HeatModel(params, seed)
    model = PlantModel(80.0)
    t, before = 0.0, round(heat.sensed_c())
    for duty in duties:
        heat._busy.append((t, t + dt * duty))
        heat.advance(t + dt)
        t += dt
        after = round(heat.sensed_c())
        model = model.update(before, duty, after, dt)
        before = after
    return model


def pattern(seed: int, n: int = 240) -> list[float]:
    """Full load from idle, then random holds between 0.1 and 0.8 (what a controller's duty looks like)."""
    rng = random.Random(seed)
    out = [1.0] * 16
    while len(out) < n:
        out += [rng.uniform(0.1, 0.8)] * rng.randint(6, 20)
    return out[:n]


@pytest.mark.parametrize("tau, flat_out, ambient", PLANTS)
def test_the_time_constant_and_steady_states_are_identified(tau, flat_out, ambient):
    params = plant(tau, flat_out, ambient)
    model = drive(params, pattern(int(tau * 10)), int(tau))
    assert model.identified, model.describe()
    assert model.tau_s == pytest.approx(tau, rel=0.25), model.describe()
    for duty in (0.2, 0.5):
        assert model.steady_c(duty) == pytest.approx(params.steady_c(duty), abs=4.0), model.describe()
    assert model.gain_c == pytest.approx(params.steady_c(1.0) - params.steady_c(0.0), rel=0.25)
    # a forecast five seconds ahead from a reading, at a duty, against the heat model's own
    for start, duty in ((60.0, 1.0), (90.0, 0.1)):
        truth = params.steady_c(duty) + (start - params.steady_c(duty)) * math.exp(-5.0 / tau)
        assert model.forecast_c(start, duty, 5.0) == pytest.approx(truth, abs=3.0)


def test_the_duty_for_a_target_holds_it_at_the_target_and_is_higher_below():
    params = plant(8.0, 150.0, 30.0)
    model = drive(params, pattern(3), 3)
    hold = model.duty_for(85.0, 85.0, 5.0)
    assert model.steady_c(hold) == pytest.approx(85.0, abs=1e-6)
    assert model.duty_for(70.0, 85.0, 5.0) > hold > model.duty_for(95.0, 85.0, 5.0)
    assert model.forecast_c(70.0, model.duty_for(70.0, 85.0, 5.0), 5.0) == pytest.approx(85.0, abs=1e-6)


def test_without_excitation_nothing_is_identified():
    params = plant(8.0, 150.0, 30.0)
    steady = drive(params, [0.0] * 100, 1)  # idle: the temperature never moves, the duty never varies
    assert not steady.identified and "not identified" in steady.describe()
    one_duty = drive(params, [1.0] * 60, 1)  # heats, but at one duty only: the gain is not known
    assert not one_duty.identified
    with pytest.raises(ValueError, match="not identified"):
        PlantModel(80.0).forecast_c(50.0, 1.0, 5.0)


def test_held_for_minutes_it_keeps_what_it_learned():
    """A controller holding one temperature for minutes (1 C steps of noise, the duty reacting to them) must not
    un-learn the time constant: plain least squares with forgetting read a 25 s device as 1900 s."""
    params = plant(12.0, 140.0, 30.0)
    heat, model = HeatModel(params, 5), PlantModel(80.0)
    t, before, duty = 0.0, round(heat.sensed_c()), 1.0
    for k in range(900):  # 7.5 minutes; a proportional controller holds 80 C after the first seconds
        heat._busy.append((t, t + 0.5 * duty))
        heat.advance(t + 0.5)
        t += 0.5
        after = round(heat.sensed_c())
        model = model.update(before, duty, after, 0.5)
        before = after
        duty = 1.0 if k < 10 else min(1.0, max(0.05, 0.45 + 0.05 * (80.0 - after)))
    assert model.identified and model.tau_s == pytest.approx(12.0, rel=0.35), model.describe()
    assert model.steady_c(duty) == pytest.approx(params.steady_c(duty), abs=3.0)


def test_an_interval_unlike_the_others_is_not_fitted():
    model = PlantModel(80.0).update(50.0, 1.0, 51.0, 0.5)
    assert model.update(51.0, 1.0, 52.0, 0.1) == model  # a forced extra decision
    assert model.update(51.0, 1.0, 60.0, 5.0) == model  # a stall
    assert model.update(51.0, 1.0, 52.0, 0.5).samples == 2
