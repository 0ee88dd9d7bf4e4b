"""Probes: re-measuring an executor whose estimate went stale on the host's own inputs, never on a caller's
request (a caller would get another executor's answer), while the model is in use and its device is idle. The
Scheduler books them as it books requests (scheduling/core.py)."""

from __future__ import annotations

from typing import Any

from .slots import ExecutorSlot, Request

# ``sched`` below is the scheduling.core.Scheduler these functions were cut from; it is not imported (core
# imports this module), so it goes unannotated.


def due_probe(sched, now: float) -> ExecutorSlot | None:
    """An executor whose estimate is older than ``remeasure_s``, to measure on the host's own inputs now:
    only while no request is queued and nothing runs on its device (a probe never delays a caller's request
    that is already waiting, and is measured alone), only one in rotation with duty budget, and only while
    the model is in use (a request arrived within twice ``remeasure_s``, at least 1 s): an idle model is not
    woken every few seconds to measure executors nobody asks for."""
    if sched.remeasure_with_requests or sched._queue or sched.last_arrival is None:
        return None
    if now - sched.last_arrival > max(2 * sched.remeasure_s, 1.0):
        return None
    for slot in sched.slots:
        if slot.measured_at is None or now - slot.measured_at <= sched.remeasure_s:
            continue
        if slot.failed_permanently or not sched.decision.enabled.get(slot.name, True):
            continue
        if sched.decision.concurrency.get(slot.name, slot.max_concurrency) <= 0 or sched._running_on[slot.device]:
            continue
        budget = sched.budgets[slot.device]
        budget.refill(now)
        if budget.duty < 1.0 and budget.tokens <= 0:
            continue
        return slot
    return None


def probe_due_at(sched, now: float) -> float | None:
    """When an executor's estimate goes stale while the model is in use (the dispatcher wakes then to probe
    it, since no arrival or completion may come to wake it), or None."""
    if sched.remeasure_with_requests or sched.last_arrival is None:
        return None
    in_use_until = sched.last_arrival + max(2 * sched.remeasure_s, 1.0)
    stale = [slot.measured_at + sched.remeasure_s for slot in sched.slots if slot.measured_at is not None]
    due = max(min(stale), now) if stale else None
    return due if due is not None and due <= in_use_until else None


def start_probe(sched, slot: ExecutorSlot, now: float, payload: Any = None) -> Request:
    """Book a probe on ``slot`` as dispatch books a request (it holds the device while it runs)."""
    request = Request(-1, now, None, payload, None, probe=True)
    latency = slot.latency_s or sched._guess_latency()
    request.alone, request.expected_s, request.started, request.attempts = True, latency, now, 1
    sched._running_on[slot.device].add(request)
    slot.running += 1
    slot.ends.append(now + latency)
    slot.measured_at = now
    sched.budgets[slot.device].charge(latency)
    return request
