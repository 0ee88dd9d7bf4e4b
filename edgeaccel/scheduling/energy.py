"""What an executor's device draws while busy where no energy counter measures it: the figure the efficiency
and power policies rank it by instead of putting it last (an Edge TPU has no energy sensor, so "measured
first" sent every request to the CPU beside it).

In order: the device profile's typical power for the device (a vendor figure, cited in the profile); the
figure every device of a kind shares (the Edge TPU's 2 W) where the profile has none; for the CPU, its share
of the package power: the package's long-term power limit (RAPL PL1, about the TDP, readable without root)
or, where none is readable, ``ASSUMED_PACKAGE_W`` for the architecture, times the executor's threads over the
cores. Energy per inference is then that power times the measured service time. Every figure says where it
came from and is labelled estimated wherever it is shown; a measured figure (RAPL, NVML, hwmon, INA3221)
replaces it as soon as the device's counter gives one.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..telemetry.rapl import package_power_limit
from .devices import Placement

# Busy power by device kind where a profile gives none, only for kinds whose figure does not depend on the
# product: every Coral (USB, PCIe, M.2, Dev Board) is the same Edge TPU, "4 TOPS ... using 2 watts of power"
# (Coral USB Accelerator and M.2 datasheets).
TYPICAL_W_BY_KIND = {"edgetpu": (2.0, "the Edge TPU's 2 W (Coral datasheets: 4 TOPS using 2 W)")}
# A package power to assume when nothing better is known, by architecture: 15 W is the common TDP of mobile
# x86 parts (Intel U/P series, AMD U series); 5 W the sustained draw of a 4-core Arm SBC (Raspberry Pi 5,
# RK3588) under a CPU load. Only used to rank executors without energy sensors, and labelled so.
ASSUMED_PACKAGE_W = {"x86_64": 15.0, "amd64": 15.0}
ASSUMED_PACKAGE_W_OTHER = 5.0


@dataclass(frozen=True)
class PowerFigure:
    """The power a device draws while it runs one executor's requests, with where the figure comes from."""

    watts: float
    source: str  # "2 W typical for EdgeTPU (profile rpi5-coral-usb)", "estimated: ..."
    estimated: bool = True

    def energy_j(self, service_s: float | None) -> float | None:
        return None if service_s is None else self.watts * service_s

    def __str__(self) -> str:
        return f"{self.watts:.2f} W ({self.source})"


def power_figures(executors: dict[str, tuple[Any, Placement]], profile: Any | None = None,
                  root: Path = Path("/")) -> dict[str, PowerFigure]:
    """A figure for every executor that has one: executor name -> PowerFigure."""
    out: dict[str, PowerFigure] = {}
    package: tuple[float | None, str] | None = None
    for name, (executor, placement) in executors.items():
        spec = profile.accelerator(placement.device) if profile is not None else None
        if spec is not None and spec.typical_power_w:
            out[name] = PowerFigure(float(spec.typical_power_w), f"estimated: {spec.typical_power_w:g} W typical for "
                                    f"{placement.device} (profile {profile.name})")
        elif placement.kind in TYPICAL_W_BY_KIND:
            watts, why = TYPICAL_W_BY_KIND[placement.kind]
            out[name] = PowerFigure(watts, f"estimated: {why}")
        elif placement.kind == "cpu":
            if package is None:
                package = package_power_limit(root)
            threads = getattr(getattr(executor, "info", None), "threads", None)
            out[name] = cpu_share(package, threads)
    return out


def cpu_share(package: tuple[float | None, str], threads: int | None, cores: int | None = None) -> PowerFigure:
    """The CPU estimate: package power x the share of the cores the executor's threads use."""
    cores = cores or os.cpu_count() or 1
    used = min(cores, threads or cores)
    watts, where = package
    if watts is None:
        arch = platform.machine().lower()
        watts = ASSUMED_PACKAGE_W.get(arch, ASSUMED_PACKAGE_W_OTHER)
        where = f"{watts:g} W assumed for a {arch or 'CPU'} package ({where})"
    else:
        where = f"{watts:g} W {where}"
    return PowerFigure(watts * used / cores, f"estimated: {where} x {used}/{cores} cores")
