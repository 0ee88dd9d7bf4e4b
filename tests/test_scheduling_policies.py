"""The policies are pure: observations and state in, decision out. Table-driven, no files, no clocks."""

from __future__ import annotations

import random

import pytest

from edgeaccel.scheduling import (AlwaysFastest, DeviceView, EfficiencyPolicy, ExecutorView, Observation,
                                  PowerBudgetPolicy, ThermalConfig, make_policy)
from edgeaccel.scheduling.control import DeviceControl, thermal_step

EXECUTORS = (ExecutorView("tpu", "edgetpu", latency_s=0.01), ExecutorView("cpu", "cpu", latency_s=0.05))


def obs(now: float, tpu: DeviceView, cpu: DeviceView | None = None, executors=EXECUTORS) -> Observation:
    cpu = cpu or DeviceView("cpu", temp_c=50.0, passive_c=90.0, critical_c=100.0)
    return Observation(now, {"edgetpu": tpu, "cpu": cpu}, executors)


def hot(temp, slope=0.0, busy=1.0, passive=85.0, critical=105.0):
    return DeviceView("edgetpu", temp_c=temp, passive_c=passive, critical_c=critical, slope_c_per_s=slope, busy=busy)


@pytest.mark.parametrize("temp, slope, want_duty, action", [
    (40.0, 0.0, 1.0, "hold"),  # far below: unlimited
    (84.0, 0.5, "<1", "duty_cycle"),  # forecast past passive - margin: duty cut
    (101.5, 0.0, 0.0, "back_off"),  # within 4 C of critical: hard back-off
    (99.0, 1.0, 0.0, "back_off"),  # heading for critical within the horizon
])
def test_thermal_policy_table(temp, slope, want_duty, action):
    policy = make_policy("thermal")
    decision, _ = policy.decide(obs(10.0, hot(temp, slope)), policy.initial_state())
    duty = decision.duty["edgetpu"]
    assert duty < 1.0 if want_duty == "<1" else duty == want_duty
    assert decision.action == action
    assert decision.duty["cpu"] == 1.0
    assert decision.enabled["tpu"] is (duty > 0)
    assert "edgetpu" in decision.reason or action == "hold"


def test_back_off_has_hysteresis_and_returns_when_cool():
    policy = make_policy("thermal")
    state = policy.initial_state()
    trail = []
    for t, temp in enumerate([102.0, 95.0, 86.0, 81.0, 79.0, 70.0]):  # passive 85, resume below 80
        decision, state = policy.decide(obs(float(t), hot(temp, slope=0.0, busy=0.0)), state)
        trail.append((temp, decision.enabled["tpu"], decision.action))
    assert [on for _, on, _ in trail] == [False, False, False, False, True, True]
    assert trail[0][2] == "back_off" and trail[4][2] == "return"


def test_thermal_control_does_not_flap_under_sensor_noise():
    """A device held near its target with noisy, 1 C-quantised readings changes its limited/unlimited state
    rarely, not every sample."""
    cfg = ThermalConfig()
    ctl = DeviceControl()
    rng = random.Random(1)
    flips, previous = 0, None
    for _ in range(600):
        temp = round(83.0 + rng.gauss(0, 0.6))
        step = thermal_step(hot(temp, slope=rng.gauss(0, 0.05), busy=0.9 * ctl.duty + 0.1), ctl, cfg, 0.5)
        ctl = step.control
        if previous is not None and ctl.limited != previous:
            flips += 1
        previous = ctl.limited
    assert flips <= 4


def test_no_temperature_keeps_serving_with_the_reason():
    policy = make_policy("thermal")
    blind = DeviceView("edgetpu", temp_reason="no /sys/class/apex/apex_* (USB Accelerators have none)")
    decision, _ = policy.decide(obs(0.0, blind), policy.initial_state())
    assert decision.duty["edgetpu"] == 1.0 and decision.enabled["tpu"]
    assert decision.action == "no_telemetry" and "USB Accelerators have none" in decision.reason


def test_latency_policy_routes_earliest_but_backs_off_near_critical():
    policy = make_policy("latency")
    calm, _ = policy.decide(obs(0.0, hot(60.0, slope=0.2)), policy.initial_state())
    assert calm.route == "earliest" and all(calm.enabled.values()) and calm.duty["edgetpu"] == 1.0
    # before its plant model is identified it serves as the thermal policy does (it used to serve flat out
    # until a straight-line forecast crossed critical: bang-bang, and less than the thermal policy overall)
    warm, _ = policy.decide(obs(0.0, hot(84.0, slope=1.0)), policy.initial_state())
    thermal, _ = make_policy("thermal").decide(obs(0.0, hot(84.0, slope=1.0)), make_policy("thermal").initial_state())
    assert warm.duty["edgetpu"] == thermal.duty["edgetpu"] < 1.0 and "not identified" in warm.reason
    near, _ = policy.decide(obs(0.0, hot(102.0)), policy.initial_state())
    assert near.enabled == {"tpu": False, "cpu": True} and near.action == "back_off"


def test_efficiency_prefers_the_cheapest_and_switches_only_for_a_clear_gain():
    policy = EfficiencyPolicy()
    state = policy.initial_state()

    def executors(tpu_j, cpu_j):
        return (ExecutorView("tpu", "edgetpu", 0.01, tpu_j, True), ExecutorView("cpu", "cpu", 0.05, cpu_j, True))

    decision, state = policy.decide(obs(0.0, hot(50.0), executors=executors(None, 0.5)), state)
    assert decision.order[0] == "tpu" and "measuring tpu" in decision.reason  # unknown cost: measure it first
    decision, state = policy.decide(obs(1.0, hot(50.0), executors=executors(0.10, 0.50)), state)
    assert decision.order[0] == "tpu" and decision.route == "cheapest"
    decision, state = policy.decide(obs(2.0, hot(50.0), executors=executors(0.10, 0.095)), state)
    assert decision.order[0] == "tpu"  # 5% cheaper is not worth a switch
    decision, state = policy.decide(obs(3.0, hot(50.0), executors=executors(0.10, 0.08)), state)
    assert decision.order[0] == "cpu" and decision.action == "shift"


def test_efficiency_without_energy_counters_routes_for_latency_and_says_so():
    decision, _ = EfficiencyPolicy().decide(obs(0.0, hot(50.0)), EfficiencyPolicy().initial_state())
    assert decision.route == "earliest" and "not measurable" in decision.reason


def test_power_budget_cuts_the_least_efficient_device_first():
    policy = PowerBudgetPolicy(10.0)
    state = policy.initial_state()
    executors = (ExecutorView("tpu", "edgetpu", 0.01, 0.05, True), ExecutorView("cpu", "cpu", 0.05, 0.6, True))
    duty = {"edgetpu": 1.0, "cpu": 1.0}
    for t in range(120):  # both busy as allowed: 1 + 3 W and 3 + 9 W at full duty, 16 W against 10 W
        tpu = DeviceView("edgetpu", 60.0, passive_c=85.0, critical_c=105.0, power_w=1 + 3 * duty["edgetpu"],
                         busy=duty["edgetpu"])
        cpu = DeviceView("cpu", 60.0, passive_c=90.0, critical_c=100.0, power_w=3 + 9 * duty["cpu"], busy=duty["cpu"])
        decision, state = policy.decide(Observation(t * 0.5, {"edgetpu": tpu, "cpu": cpu}, executors), state)
        duty = decision.duty
    # the best split: the cheap TPU at full duty (4 W), the CPU with the rest: (9.7 - 4 - 3) / 9 = 0.3
    assert duty["edgetpu"] == 1.0 and duty["cpu"] == pytest.approx(0.3, abs=0.03)
    assert decision.action == "duty_cycle" and "of 10 W budget" in decision.reason


def test_power_budget_without_power_readings_says_it_cannot_hold():
    decision, _ = PowerBudgetPolicy(5.0).decide(obs(0.0, hot(50.0)), PowerBudgetPolicy(5.0).initial_state())
    assert decision.action == "no_telemetry" and "cannot be held" in decision.reason


def test_naive_baseline_sends_everything_to_the_fastest():
    decision, _ = AlwaysFastest().decide(obs(0.0, hot(104.0)), AlwaysFastest().initial_state())
    assert decision.enabled == {"tpu": True, "cpu": False}  # even at 104 C: it is the naive baseline


def test_policy_names_and_errors():
    for name in ("latency", "efficiency", "thermal", "fastest"):
        assert make_policy(name).name == name
    assert str(make_policy("power", 7.5)) == "power 7.5 W"
    with pytest.raises(ValueError, match="needs a budget"):
        make_policy("power")
    with pytest.raises(ValueError, match="unknown policy 'coolest'"):
        make_policy("coolest")
    with pytest.raises(ValueError, match="positive number of watts"):
        PowerBudgetPolicy(0)


def test_a_limited_device_runs_fewer_requests_at_once():
    executors = (ExecutorView("tpu", "edgetpu", 0.01, max_concurrency=4), ExecutorView("cpu", "cpu", 0.05))
    policy = make_policy("thermal")
    state = policy.initial_state()
    for t in range(40):  # hot and rising: the duty falls, and with it the requests allowed in flight
        decision, state = policy.decide(obs(t * 0.5, hot(84.0, slope=0.3), executors=executors), state)
    assert decision.duty["edgetpu"] < 0.75 and decision.concurrency["tpu"] < 4
    assert "fewer requests at once" in decision.reason


def test_a_quiet_spell_does_not_wind_the_duty_back_up():
    """After a busy spell has found the duty that holds the target, an idle, cool spell leaves it there, so
    the next burst starts from it rather than from full power."""
    cfg = ThermalConfig()
    ctl = DeviceControl()
    for _ in range(200):  # busy and above target: the integral comes down
        ctl = thermal_step(hot(84.0, slope=0.0, busy=ctl.duty), ctl, cfg, 0.5).control
    held = ctl.integral
    assert held < 0.6
    for _ in range(200):  # quiet: cool, nothing to run
        step = thermal_step(hot(60.0, slope=-0.05, busy=0.0), ctl, cfg, 0.5)
        ctl = step.control
    assert ctl.integral == pytest.approx(held)
    assert step.duty == 1.0  # while cool the proportional term still allows full speed
    burst = thermal_step(hot(82.5, slope=0.1, busy=1.0), ctl, cfg, 0.5)
    assert burst.duty < held + 0.05  # near the target again: back at the held duty, not at 1


def test_the_latency_trace_says_back_off_while_a_device_is_held_off():
    """It used to record "hold ... all devices below their critical margin" while everything was backed off."""
    policy = make_policy("latency")
    state = policy.initial_state()
    trail = []
    for t, temp in enumerate([102.0, 95.0, 88.0, 79.0]):  # passive 85: returns below 80
        decision, state = policy.decide(obs(float(t), hot(temp, busy=0.0)), state)
        trail.append(decision)
    assert [d.action for d in trail] == ["back_off", "back_off", "back_off", "return"]
    assert all("below their critical margin" not in d.reason for d in trail)
    assert "still above 80.0 C after a back-off" in trail[1].reason and "work moves to cpu" in trail[1].reason


def test_a_back_off_halves_the_duty_that_led_to_it():
    """A return that heads straight back into a back-off returns lower the next time: no limit cycle."""
    cfg = ThermalConfig()
    ctl = DeviceControl()
    starts = []
    for _ in range(3):
        ctl = thermal_step(hot(102.0, busy=1.0), ctl, cfg, 0.5).control  # back off
        step = thermal_step(hot(70.0, busy=0.0), ctl, cfg, 0.5)  # cooled: return
        assert step.event == "return"
        starts.append(step.duty)
        ctl = step.control
    assert starts == [0.5, 0.25, 0.125]


def test_the_trend_restarts_when_a_load_starts():
    """A line through 15 s of idle samples lags a start; a sample far off the line restarts the fit."""
    from edgeaccel.telemetry.status import TrendForecaster

    lagging, fresh = TrendForecaster(), TrendForecaster(jump_c=2.5)
    for i in range(30):
        for trend in (lagging, fresh):
            trend.add(i * 0.5, 47.0 + (i % 2))  # idle, 1 C steps of noise
    assert abs(fresh.slope()) < 0.2  # noise is not a jump
    for trend in (lagging, fresh):
        trend.add(15.0, 59.0)
    assert lagging.slope() < 2.0 and fresh.slope() == pytest.approx((59.0 - 48.0) / 0.5)
