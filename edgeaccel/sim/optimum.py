"""The best throughput any schedule can sustain without exceeding the passive trips, computed from the heat
model (not guessed).

Steady state: a device busy a share u of the time at full speed settles at T_a + R (P_idle + u (P_busy - P_idle)).
Integrating C dT/dt = P - (T - T_a)/R over a long window shows that no schedule holding T <= T_passive can
average more power than (T_passive - T_a)/R, so the largest sustainable share is
u* = ((T_passive - T_a)/R - P_idle) / (P_busy - P_idle), capped at 1, and the sustained optimum is the sum of
u*/service over the devices (their heat is independent). Throttling never helps: a slowed device does less work
per joule of heat budget only if dynamic power falls faster than speed, which this model (and the bound) does
not assume.

For a finite window the stored heat matters: a device that enters the window cold can sprint. ``window_bound``
computes that best case exactly (full speed until the trip, then exactly the power that holds it), an upper
bound no real schedule reaches in steady operation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .heat import DeviceParams


def sustained_optimum(devices: Sequence[DeviceParams]) -> tuple[float, dict[str, float]]:
    """(inferences per second, sustainable duty per device)."""
    duty = {d.name: d.sustainable_duty() for d in devices}
    return sum(d.rate(duty[d.name]) for d in devices), duty


def window_bound(devices: Sequence[DeviceParams], window_s: float, step_s: float = 0.05) -> float:
    """Most inferences per second over ``window_s`` for devices starting at ambient, never above passive."""
    total = 0.0
    for d in devices:
        temp, work, t = d.ambient_c, 0.0, 0.0
        decay = math.exp(-step_s / d.tau_s)
        while t < window_s - 1e-9:
            full = d.ambient_c + (temp - d.ambient_c) * decay + d.busy_w * d.r_c_per_w * (1 - decay)
            if full <= d.passive_c:
                duty, temp = 1.0, full
            else:
                # the power that lands exactly on the trip, as a share of the dynamic range
                power = (d.passive_c - d.ambient_c - (temp - d.ambient_c) * decay) / (d.r_c_per_w * (1 - decay))
                duty = min(1.0, max(0.0, (power - d.idle_w) / (d.busy_w - d.idle_w)))
                temp = d.ambient_c + (temp - d.ambient_c) * decay + (
                    d.idle_w + duty * (d.busy_w - d.idle_w)) * d.r_c_per_w * (1 - decay)
            work += duty * step_s / d.service_s
            t += step_s
        total += work / window_s
    return total


def power_optimum(devices: Sequence[DeviceParams], budget_w: float) -> tuple[float, dict[str, float]]:
    """Most inferences per second with total power at most ``budget_w`` (idle power included), ignoring heat:
    a fractional knapsack, solved exactly by filling the devices in order of inferences per dynamic watt."""
    remaining = budget_w - sum(d.idle_w for d in devices)
    duty = {d.name: 0.0 for d in devices}
    if remaining <= 0:
        return 0.0, duty
    for d in sorted(devices, key=lambda d: (1.0 / d.service_s) / (d.busy_w - d.idle_w), reverse=True):
        share = min(1.0, remaining / (d.busy_w - d.idle_w))
        duty[d.name] = share
        remaining -= share * (d.busy_w - d.idle_w)
        if remaining <= 0:
            break
    return sum(d.rate(duty[d.name]) for d in devices), duty
