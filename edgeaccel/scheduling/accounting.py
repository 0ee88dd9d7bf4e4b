"""What the scheduler learns at each decision (scheduling/core.py): the time each device spent limited, throttled
or above its passive trip, energy shared out among the executors that spent it, and the Observation the policy
decides from (each device's reading and busy share, each executor's estimates, the arrival rate)."""

from __future__ import annotations


from ..telemetry.sampler import DeviceSample
from .decision import DeviceView, ExecutorView, Observation
from .slots import ExecutorSlot

# ``sched`` below is the scheduling.core.Scheduler these functions were cut from; it is not imported (core
# imports this module), so it goes unannotated.


def observe(sched, now: float, samples: dict[str, DeviceSample]) -> Observation:
    dt = (now - sched._last_decision) if sched._last_decision is not None else 0.0
    devices = {}
    for name in sched.devices:
        counters = sched.device_counters[name]
        capacity = sched.budgets[name].capacity
        busy = sum(counters.interval_busy.values())
        share = min(1.0, busy / (dt * capacity)) if dt > 0 else 0.0
        s = samples.get(name)
        if s is None:
            devices[name] = DeviceView(name, temp_reason="no telemetry for this device", busy=share)
        else:
            devices[name] = DeviceView(name, s.temp_c, s.temp_reason, s.passive_c, s.critical_c, s.slope_c_per_s,
                                       s.power_w, s.power_reason, s.throttled, share,
                                       str(s.status) if s.status is not None else None, s.headroom,
                                       s.limits_note)
    if dt > 0:
        rate = sched._arrivals / dt
        sched._arrival_rate = rate if sched._last_decision is None else 0.7 * sched._arrival_rate + 0.3 * rate
    sched._arrivals = 0
    for counters in sched.device_counters.values():
        counters.interval_busy.clear()
        counters.interval_runs.clear()
    sched._last_decision = now
    executors = tuple(executor_view(sched, s) for s in sched.slots)
    return Observation(now, devices, executors, len(sched._queue), sched._arrival_rate)


def executor_view(sched, slot: ExecutorSlot) -> ExecutorView:
    c = sched.exec_counters[slot.name]
    measurable = sched.device_counters[slot.device].energy_j is not None
    energy = c.energy_j / c.energy_runs if c.energy_runs >= 10 else None
    power = slot.power
    return ExecutorView(slot.name, slot.device, slot.latency_s, energy, measurable, slot.max_concurrency,
                        c.completed, power.watts if power is not None else None,
                        power.source if power is not None else None)


def account(sched, now: float, samples: dict[str, DeviceSample]) -> None:
    """Time limited / throttled / above passive since the last decision, and energy attributed to executors."""
    dt = (now - sched._last_decision) if sched._last_decision is not None else 0.0
    for name in sched.devices:
        counters = sched.device_counters[name]
        if dt > 0 and (sched.decision.duty.get(name, 1.0) < 1.0 or
                       any(not sched.decision.enabled.get(s.name, True) for s in sched.slots if s.device == name)):
            counters.limited_s += dt
        s = samples.get(name)
        if s is None:
            continue
        if s.temp_c is not None:
            counters.samples += 1
            counters.last_temp_c = s.temp_c
            counters.max_temp_c = s.temp_c if counters.max_temp_c is None else max(counters.max_temp_c, s.temp_c)
            if s.passive_c is not None and s.temp_c > s.passive_c:
                counters.above_passive_s += dt
            if s.critical_c is not None and s.temp_c >= s.critical_c:
                counters.samples_at_critical += 1
        counters.temp_reason = s.temp_reason
        counters.limits_note = s.limits_note
        if s.throttled:
            counters.hw_throttled_s += dt
        counters.energy_reason = s.energy_reason
        if s.energy_j is not None:
            if counters.last_energy_j is not None:
                spent = s.energy_j - counters.last_energy_j
                busy = sum(counters.interval_busy.values())
                if busy > 0:
                    for executor, seconds in counters.interval_busy.items():
                        c = sched.exec_counters[executor]
                        c.energy_j += spent * seconds / busy
                        c.energy_runs += counters.interval_runs.get(executor, 0)
                else:
                    counters.idle_energy_j += spent
            counters.last_energy_j = s.energy_j
            counters.energy_j = s.energy_j
    sched.samples = samples
