"""Seeded scenarios for the scheduling benchmark: an accelerator that is fast and runs hot (a Coral on PCIe or
a generic hwmon accelerator) beside a slower CPU, in an ambient of 25-45 C. Parameters are drawn so that the
accelerator at full load usually settles above its passive trip: the schedule that ignores heat breaks the cap.
All simulated."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .heat import DeviceParams


@dataclass(frozen=True)
class Scenario:
    seed: int
    ambient_c: float
    devices: tuple[DeviceParams, ...]

    @property
    def accelerator(self) -> DeviceParams:
        return self.devices[0]

    def describe(self) -> str:
        a, c = self.devices
        return (f"seed {self.seed}: ambient {self.ambient_c:.1f} C; {a.name} ({a.layout}) {1000 * a.service_s:.0f} ms, "
                f"full-load steady {a.steady_c(1):.0f} C vs passive {a.passive_c:.0f} C, tau {a.tau_s:.0f} s; "
                f"{c.name} {1000 * c.service_s:.0f} ms, full-load steady {c.steady_c(1):.0f} C vs passive {c.passive_c:.0f} C")


def make_scenario(seed: int) -> Scenario:
    rng = random.Random(seed)
    ambient = rng.uniform(25.0, 45.0)
    if rng.random() < 0.5:
        accel = DeviceParams(
            "edgetpu", layout="apex", ambient_c=ambient, r_c_per_w=rng.uniform(9.0, 14.0),
            c_j_per_c=rng.uniform(2.5, 6.0), idle_w=rng.uniform(0.4, 0.8), busy_w=rng.uniform(5.0, 7.5),
            service_s=rng.uniform(0.030, 0.050), passive_c=85.0, critical_c=110.0, sensor_noise_c=0.2,
            sensor_step_c=0.25, governor_s=5.0)  # the apex driver polls every 5 s by default
    else:
        passive = rng.uniform(80.0, 90.0)
        accel = DeviceParams(
            "accel", layout="hwmon", ambient_c=ambient, r_c_per_w=rng.uniform(8.0, 13.0),
            c_j_per_c=rng.uniform(3.0, 8.0), idle_w=rng.uniform(0.5, 1.0), busy_w=rng.uniform(5.5, 8.0),
            service_s=rng.uniform(0.030, 0.050), passive_c=passive, critical_c=passive + rng.uniform(12.0, 20.0),
            sensor_noise_c=0.2)
    passive = rng.uniform(85.0, 95.0)
    cpu = DeviceParams(
        "cpu", layout="cpu", ambient_c=ambient, r_c_per_w=rng.uniform(2.5, 4.5), c_j_per_c=rng.uniform(10.0, 30.0),
        idle_w=rng.uniform(2.0, 4.0), busy_w=rng.uniform(11.0, 18.0), service_s=rng.uniform(0.120, 0.200),
        passive_c=passive, critical_c=passive + rng.uniform(10.0, 15.0), sensor_noise_c=0.3, sensor_step_c=1.0,
        energy_range_j=rng.uniform(40.0, 90.0))  # a small counter range: it wraps every few seconds
    return Scenario(seed, ambient, (accel, cpu))
