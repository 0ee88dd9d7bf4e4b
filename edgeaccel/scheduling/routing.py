"""The routing pass's arithmetic (scheduling/core.py): when an executor can next start a request, whose turn it is
on a shared device, and which executor of a device takes its work. Pure functions of the slots and budgets.

Executors on one device take turns: while one has requests running there, the others on that device start
none. Each runtime sizes its threads (or streams) to the whole device, so two side by side (LiteRT and
OpenVINO on one CPU) only preempt each other: measured on a 2-core CPU with mobilenet_v2, 4 requests in flight
over both ran at 0.8x the rate of either alone, and each one's latency estimate, taken under the other's load,
misled the routing. A device's capacity is therefore its largest executor's concurrency, not their sum.
"""

from __future__ import annotations

import math

from .slots import DeviceBudget, ExecutorSlot

SWITCH_MARGIN = 0.1  # another executor on a device takes its work when measured this much faster alone


def first_per_device(candidates: list, order: dict[str, int], index: dict[str, int]) -> list:
    """Routing for time: one executor per device, the first there in the policy's order (the ranking's where
    it gives none), unless another there was measured faster alone (``alone_s``, both measured, by more than
    ``SWITCH_MARGIN``). The others are its fallbacks, not its rivals: they share its cores, and comparing a
    latency measured alone with one measured under load (an executor running two at once) handed the device
    back and forth (on a 2-core CPU, OpenVINO took turns with LiteRT's two streams at 0.7x their rate). A
    stale estimate is still measured again (``Scheduler.dispatch``), so a faster executor is found."""
    by_device: dict[str, list] = {}
    for c in candidates:
        by_device.setdefault(c[0].device, []).append(c)
    chosen = []
    for group in by_device.values():
        group.sort(key=lambda c: order.get(c[0].name, len(order) + index[c[0].name]))
        best = group[0]
        for c in group[1:]:
            mine, theirs = c[0].alone_s, best[0].alone_s
            if mine is not None and theirs is not None and mine < theirs * (1 - SWITCH_MARGIN):
                best = c
        chosen.append(best)
    return chosen


def turn(slot: ExecutorSlot, on_device: list[ExecutorSlot], now: float) -> float:
    """When ``slot``'s turn on its device comes: now, or once the other executors there have finished
    what they run (just after now if one runs past its expected end: it still holds the device)."""
    t = now
    for other in on_device:
        if other is not slot and other.running:
            t = max(t, max(other.ends, default=now), math.nextafter(now, math.inf))
    return t


def ready_time(slot: ExecutorSlot, conc: int, budget: DeviceBudget, now: float) -> float:
    if slot.running < conc and (budget.duty >= 1.0 or budget.tokens > 0):
        return now
    t = now
    if slot.running >= conc:
        ends = sorted(slot.ends)
        index = slot.running - conc
        t = max(now, ends[index]) if index < len(ends) else now
    return max(t, budget.ready_at(now))
