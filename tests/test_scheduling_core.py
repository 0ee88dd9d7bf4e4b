"""The scheduler engine driven by hand: routing, duty-cycle budgets, deadlines, energy attribution, the trace.
Time is whatever the test says it is."""

from __future__ import annotations

import pytest

from edgeaccel.scheduling import Decision, make_policy
from edgeaccel.scheduling.core import DeviceBudget, ExecutorSlot, Scheduler
from edgeaccel.telemetry.sampler import DeviceSample


class ScriptedSampler:
    """Stands in for TelemetrySampler: returns whatever the test scripted for each device."""

    min_interval_s = 0.5
    samples = 0
    cpu_s = 0.0

    def __init__(self, **devices):
        self.devices = devices

    def sample(self, now):
        self.samples += 1
        return {name: DeviceSample(name, now, **fields) for name, fields in self.devices.items()}


def two_slots():
    return [ExecutorSlot("fast", "accel", 1, 0.01), ExecutorSlot("slow", "cpu", 1, 0.05)]


def run_until(scheduler, end, step=0.001, durations=None):
    """Advance in small steps; every started request takes its slot's nominal latency."""
    running = []
    t = 0.0
    done = []
    while t < end:
        scheduler.maybe_decide(t)
        for item in [r for r in running if r[2] <= t]:
            running.remove(item)
            scheduler.finished(item[0], item[1], item[2])
            done.append(item)
        assigned, _ = scheduler.dispatch(t)
        for request, slot in assigned:
            running.append((request, slot, t + (durations or {}).get(slot.name, slot.latency_s)))
        t = round(t + step, 9)
    return done


def test_one_request_goes_to_the_fastest_and_a_backlog_spills_to_the_slow_one():
    scheduler = Scheduler(two_slots(), make_policy("latency"))
    scheduler.maybe_decide(0.0, force=True)
    scheduler.submit(scheduler.new_request(0.0))
    assigned, _ = scheduler.dispatch(0.0)
    assert [s.name for _, s in assigned] == ["fast"]
    scheduler.finished(*assigned[0], 0.01)
    for _ in range(20):
        scheduler.submit(scheduler.new_request(0.0))
    done = run_until(scheduler, 0.5)
    by_slot = {name: sum(1 for _, s, _ in done if s.name == name) for name in ("fast", "slow")}
    assert by_slot["slow"] >= 2 and by_slot["fast"] > 3 * by_slot["slow"]  # 5x faster: most go to it


def test_earliest_deadline_first_and_shedding_the_hopeless():
    scheduler = Scheduler([ExecutorSlot("only", "cpu", 1, 0.05)], make_policy("latency"))
    scheduler.maybe_decide(0.0, force=True)
    late = scheduler.new_request(0.0, deadline=1.0)
    urgent = scheduler.new_request(0.0, deadline=0.2)
    hopeless = scheduler.new_request(0.0, deadline=0.01)  # cannot finish a 50 ms run in 10 ms
    for r in (late, urgent, hopeless):
        scheduler.submit(r)
    assigned, shed = scheduler.dispatch(0.0)
    assert shed == [hopeless] and [r for r, _ in assigned] == [urgent]
    assert scheduler.shed == 1


def test_duty_budget_limits_busy_time():
    budget = DeviceBudget(capacity=1, bucket_s=1.0)
    budget.set_duty(0.25, 0.0)
    busy, t = 0.0, 0.0
    while t < 100.0:
        budget.refill(t)
        if budget.ready_at(t) <= t:
            budget.charge(0.1)
            busy += 0.1
        t += 0.1
    # the duty, plus a bank of one bucket at the new rate (0.25 s), not the 1 s banked at the old one
    assert busy == pytest.approx(0.25 * 100 + 0.25, abs=0.15)
    assert DeviceBudget(1).ready_at(5.0) == 5.0  # duty 1: never waits
    zero = DeviceBudget(1)
    zero.set_duty(0.0, 0.0)
    zero.charge(2.0)
    assert zero.ready_at(0.0) == float("inf")


def test_a_limited_device_gets_its_duty_and_the_rest_moves_to_the_other():
    class HalfAccel:
        name, route = "test", "earliest"

        def initial_state(self):
            return None

        def decide(self, obs, state):
            return Decision({"accel": 0.5, "cpu": 1.0}, {"fast": True, "slow": True}, {"fast": 1, "slow": 1},
                            "earliest", (), "duty_cycle", "accel at half duty"), state

    scheduler = Scheduler(two_slots(), HalfAccel(), bucket_s=0.2)
    scheduler.maybe_decide(0.0, force=True)
    for _ in range(2000):
        scheduler.submit(scheduler.new_request(0.0))
    done = run_until(scheduler, 10.0)
    fast_busy = sum(0.01 for _, s, _ in done if s.name == "fast")
    slow = sum(1 for _, s, _ in done if s.name == "slow")
    assert fast_busy == pytest.approx(5.0, rel=0.06)  # half of 10 s
    assert slow >= 150  # the CPU took over the rest: ~10 s / 50 ms
    assert scheduler.device_counters["accel"].limited_s == pytest.approx(10.0, abs=0.6)


def test_energy_is_attributed_to_the_executors_that_ran():
    sampler = ScriptedSampler(cpu=dict(temp_c=50.0, energy_j=0.0))
    scheduler = Scheduler([ExecutorSlot("a", "cpu", 1, 0.01), ExecutorSlot("b", "cpu", 1, 0.01)],
                          make_policy("efficiency"), sampler)
    scheduler.maybe_decide(0.0, force=True)
    joules = 0.0
    for k in range(1, 41):  # 20 s: each 0.5 s, "a" runs 10 requests and "b" 5, the device spends 3 J
        for name, n in (("a", 10), ("b", 5)):
            slot = scheduler.by_name[name]
            for _ in range(n):
                request = scheduler.new_request(k * 0.5 - 0.4)
                request.started, request.expected_s = k * 0.5 - 0.4, 0.01
                slot.running += 1
                scheduler.finished(request, slot, k * 0.5 - 0.39)
        joules += 3.0
        sampler.devices["cpu"]["energy_j"] = joules
        scheduler.maybe_decide(k * 0.5)
    stats = scheduler.stats(20.0)
    # 3 J per interval split 2:1 by busy time over 10 and 5 runs: 0.2 J each
    assert stats.executors["a"].energy_per_inference_j == pytest.approx(0.2)
    assert stats.executors["b"].energy_per_inference_j == pytest.approx(0.2)
    assert stats.devices["cpu"].energy_j == pytest.approx(120.0)


def test_trace_records_every_decision_with_readings():
    sampler = ScriptedSampler(accel=dict(temp_c=70.0, passive_c=85.0, critical_c=100.0),
                              cpu=dict(temp_c=None, temp_reason="no sensor"))
    scheduler = Scheduler(two_slots(), make_policy("thermal"), sampler)
    for t in (0.0, 0.1, 0.5, 1.0, 1.2, 1.5):
        scheduler.maybe_decide(t)
    assert [round(r.time, 3) for r in scheduler.trace] == [0.0, 0.5, 1.0, 1.5]  # bounded to one per 0.5 s
    record = scheduler.trace.records[-1]
    assert record.devices["accel"].temp_c == 70.0 and record.devices["cpu"].temp_reason == "no sensor"
    csv_text = scheduler.trace.to_csv()
    header = csv_text.splitlines()[0].split(",")
    assert {"time_s", "action", "reason", "accel_temp_c", "accel_duty", "fast_enabled"} <= set(header)
    assert len(csv_text.splitlines()) == 5


def test_queue_bound():
    scheduler = Scheduler(two_slots(), make_policy("latency"), max_queue=3)
    results = [scheduler.submit(scheduler.new_request(0.0)) for _ in range(5)]
    assert results == [True, True, True, False, False] and scheduler.rejected == 2


def test_scheduler_refuses_bad_configuration():
    with pytest.raises(ValueError, match="at least one executor"):
        Scheduler([], make_policy("latency"))
    with pytest.raises(ValueError, match="unique"):
        Scheduler([ExecutorSlot("a", "cpu"), ExecutorSlot("a", "cpu")], make_policy("latency"))
    with pytest.raises(ValueError, match="at least 1"):
        ExecutorSlot("a", "cpu", 0)


def test_a_stale_latency_estimate_is_measured_again():
    """An executor whose estimate says slow (a cold first run) is tried again after REMEASURE_S; if it is in
    fact the faster one, work moves to it."""
    scheduler = Scheduler([ExecutorSlot("a", "cpu", 1, 0.01), ExecutorSlot("b", "cpu", 1, 0.05)],
                          make_policy("latency"))
    actual = {"a": 0.01, "b": 0.004}
    running, t, served = None, 0.0, []
    while t < 12.0:
        scheduler.maybe_decide(t)
        if running and running[2] <= t:
            scheduler.finished(running[0], running[1], running[2])
            served.append((t, running[1].name))
            running = None
        if running is None:
            if not scheduler.queued:
                scheduler.submit(scheduler.new_request(t))
            assigned, _ = scheduler.dispatch(t)
            if assigned:
                request, slot = assigned[0]
                running = (request, slot, t + actual[slot.name])
        t = round(t + 0.001, 9)
    early = {name for when, name in served if when < 5.0}
    late = [name for when, name in served if when > 6.0]
    assert early == {"a"}
    assert late.count("b") > 0.95 * len(late)


def test_without_request_remeasuring_a_stale_executor_is_probed_only_while_its_device_is_idle():
    """ScheduledModel's mode: a caller's request never goes to an executor to measure it. A stale executor is
    offered as a probe only while nothing is queued and nothing runs on its device; the probe holds the device
    while it runs, updates the estimate (work then moves to it if faster alone) and is no completed request."""
    a, b = ExecutorSlot("a", "cpu", 1, 0.01), ExecutorSlot("b", "cpu", 1, 0.05)
    scheduler = Scheduler([a, b], make_policy("latency"), remeasure_with_requests=False)
    scheduler.maybe_decide(0.0, force=True)
    t = 0.0
    while t < 6.0:  # one request at a time, back to back: the queue never empties while b is stale
        request = scheduler.new_request(t)
        scheduler.submit(request)
        assert scheduler.due_probe(t) is None  # a request waits: no probe
        (assigned,) = scheduler.dispatch(t)[0]
        assert assigned[1] is a  # never handed to b to measure it
        assert scheduler.due_probe(t) is None  # a runs on the device
        t = round(t + 0.01, 9)
        scheduler.finished(*assigned, t)
    assert b.measured == 0 and t - b.measured_at > scheduler.remeasure_s
    slot = scheduler.due_probe(t)  # idle now
    assert slot is b
    probe = scheduler.start_probe(b, t)
    assert probe.probe and scheduler.due_probe(t) is None  # one at a time, and it holds the device
    scheduler.submit(scheduler.new_request(t))
    assert scheduler.dispatch(t)[0] == []  # a caller's request waits for the probe's turn to end
    scheduler.finished(probe, b, t + 0.004)
    assert b.alone_s == pytest.approx(0.004) and scheduler.exec_counters["b"].completed == 0
    assert scheduler.exec_counters["b"].probes == 1
    (assigned,) = scheduler.dispatch(t + 0.004)[0]
    assert assigned[1] is b  # measured faster alone by more than SWITCH_MARGIN: the device's work moves
    scheduler.finished(*assigned, t + 0.008)
    assert scheduler.due_probe(t + 5.5) is a  # stale while the model is in use (a request within 2 x 5 s)
    assert scheduler.due_probe(t + 10.5) is None  # nothing arrived for 10 s: an idle model is not probed


def test_executors_on_one_device_take_turns_and_its_work_goes_to_the_fastest_alone():
    """Two runtimes on one CPU each size their threads to all of it: never both at once. Work for the device
    goes to the executor measured fastest when it ran alone there; another device's executor runs meanwhile."""
    a, b, gpu = ExecutorSlot("a", "cpu", 2, 0.004), ExecutorSlot("b", "cpu", 6, 0.003), ExecutorSlot("g", "gpu", 1, 0.01)
    scheduler = Scheduler([a, b, gpu], make_policy("latency"))
    assert scheduler.budgets["cpu"].capacity == 6  # the largest executor's concurrency, not the sum
    for _ in range(20):
        scheduler.submit(scheduler.new_request(0.0))
    assigned, _ = scheduler.dispatch(0.0)
    names = [slot.name for _, slot in assigned]
    assert "a" not in names and 1 <= names.count("b") <= 6 and names.count("g") == 1
    for request, slot in assigned:  # b's runs overlapped: its estimate stays, none of them ran alone
        scheduler.finished(request, slot, 0.02 if slot is b else 0.01)
    assert b.alone_s == 0.003
    assigned, _ = scheduler.dispatch(0.02)
    assert {slot.name for _, slot in assigned} <= {"b", "g"} and "b" in {slot.name for _, slot in assigned}
    for request, slot in assigned:
        scheduler.finished(request, slot, 0.03)

    # a lone run of a (b skipped for it, as after a failure there) measures a alone, faster than b: the CPU's
    # work moves to a
    a, b = ExecutorSlot("a", "cpu", 2, 0.004), ExecutorSlot("b", "cpu", 6, 0.003)
    scheduler = Scheduler([a, b], make_policy("latency"))
    lone = scheduler.new_request(0.0)
    lone.tried.add("b")
    scheduler.submit(lone)
    (request, slot), = scheduler.dispatch(0.0)[0]
    assert slot is a and request.alone
    scheduler.finished(request, slot, 0.001)
    assert a.alone_s == 0.001
    for _ in range(4):
        scheduler.submit(scheduler.new_request(0.001))
    assigned, _ = scheduler.dispatch(0.001)
    assert [slot.name for _, slot in assigned] == ["a", "a"]  # a's two places; b waits its turn, unused
