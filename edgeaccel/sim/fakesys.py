"""Write the files the telemetry readers read, below a root, in the kernel's own units and layouts.

Small and reusable: tests build fake sensor trees with it (including garbage and unreadable files) and the
simulator writes its devices' state through it. Writes are atomic (write then rename), so a reader running in
another thread never sees half a number.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

THERMAL = "sys/class/thermal"
HWMON = "sys/class/hwmon"
POWERCAP = "sys/class/powercap"
APEX = "sys/class/apex"


def millis(value: float) -> int:
    return int(round(value * 1000))


class FakeSysfs:
    def __init__(self, root: Path | str, atomic: bool = True) -> None:
        self.root = Path(root)
        self.atomic = atomic  # False when nothing reads concurrently (the discrete-event simulator): cheaper
        self._written: dict[Path, bytes] = {}

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def write(self, rel: str, value: object) -> Path:
        """Write ``value`` (bytes written as they are, anything else as text with a newline) atomically."""
        path = self.path(rel)
        data = value if isinstance(value, bytes) else f"{value}\n".encode()
        if self._written.get(path) == data:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.atomic:
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        else:
            with open(path, "wb") as handle:
                handle.write(data)
        self._written[path] = data
        return path

    def link(self, rel: str, target: str) -> None:
        path = self.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(target, path)

    # -- thermal ------------------------------------------------------------------------------------
    def thermal_zone(self, index: int, kind: str, temp_c: float,
                     trips: Iterable[tuple[str, float] | tuple[str, float, float]] = (("passive", 85.0), ("critical", 100.0)),
                     cooling: Iterable[int] = (), policy: str = "step_wise") -> Path:
        base = f"{THERMAL}/thermal_zone{index}"
        self.write(f"{base}/type", kind)
        self.write(f"{base}/temp", millis(temp_c))
        self.write(f"{base}/mode", "enabled")
        self.write(f"{base}/policy", policy)
        for i, trip in enumerate(trips):
            self.write(f"{base}/trip_point_{i}_type", trip[0])
            self.write(f"{base}/trip_point_{i}_temp", millis(trip[1]))
            self.write(f"{base}/trip_point_{i}_hyst", millis(trip[2]) if len(trip) > 2 else 0)  # type: ignore[misc]
        for i, device in enumerate(cooling):
            # the kernel links to /sys/devices/virtual/thermal/cooling_deviceN; readers use only the name
            self.link(f"{base}/cdev{i}", f"../cooling_device{device}")
            self.write(f"{base}/cdev{i}_trip_point", 0)
        return self.path(base)

    def zone_temp(self, index: int, temp_c: float) -> None:
        self.write(f"{THERMAL}/thermal_zone{index}/temp", millis(temp_c))

    def cooling_device(self, index: int, kind: str, cur_state: int, max_state: int) -> Path:
        base = f"{THERMAL}/cooling_device{index}"
        self.write(f"{base}/type", kind)
        self.write(f"{base}/cur_state", cur_state)
        self.write(f"{base}/max_state", max_state)
        return self.path(base)

    # -- powercap RAPL --------------------------------------------------------------------------------
    def rapl_zone(self, zone: str = "intel-rapl:0", name: str = "package-0", energy_uj: int = 0,
                  max_range_uj: int = 262143328850) -> Path:
        base = f"{POWERCAP}/{zone}"
        self.write(f"{base}/name", name)
        self.write(f"{base}/energy_uj", energy_uj)
        self.write(f"{base}/max_energy_range_uj", max_range_uj)
        self.write(f"{base}/enabled", 1)
        return self.path(base)

    def rapl_energy(self, zone: str, energy_uj: int) -> None:
        self.write(f"{POWERCAP}/{zone}/energy_uj", energy_uj)

    # -- hwmon --------------------------------------------------------------------------------------
    def hwmon(self, index: int, name: str, files: dict[str, object]) -> Path:
        """A chip with raw attribute files, e.g. {"temp1_input": 45000, "temp1_label": "Tctl", "power1_input": ...}."""
        base = f"{HWMON}/hwmon{index}"
        self.write(f"{base}/name", name)
        for key, value in files.items():
            self.write(f"{base}/{key}", value)
        return self.path(base)

    # -- Coral PCIe ----------------------------------------------------------------------------------------
    def apex(self, index: int, temp_c: float, trips_c: tuple[float, float, float] = (85.0, 90.0, 95.0),
             warn_c: tuple[float, float] = (100.0, 110.0), warn_enabled: tuple[int, int] = (0, 0),
             poll_ms: int = 5000) -> Path:
        base = f"{APEX}/apex_{index}"
        self.write(f"{base}/temp", apex_millis(temp_c))
        for i, trip in enumerate(trips_c):
            self.write(f"{base}/trip_point{i}_temp", apex_millis(trip))
        for i, (warn, enabled) in enumerate(zip(warn_c, warn_enabled, strict=True), start=1):
            self.write(f"{base}/hw_temp_warn{i}", apex_millis(warn))
            self.write(f"{base}/hw_temp_warn{i}_en", enabled)
        self.write(f"{base}/temp_poll_interval", poll_ms)
        return self.path(base)

    def apex_temp(self, index: int, temp_c: float) -> None:
        self.write(f"{APEX}/apex_{index}/temp", apex_millis(temp_c))

    # -- Jetson INA3221 -----------------------------------------------------------------------------------
    def ina3221_hwmon(self, rails: Iterable[tuple[str, float, float]], bus: str = "1-0040", hwmon: str = "hwmon3") -> Path:
        """rails: (label, millivolts, milliamperes) for channels 1..3."""
        base = f"sys/bus/i2c/drivers/ina3221/{bus}/hwmon/{hwmon}"
        self.write(f"{base}/name", "ina3221")
        for i, (label, mv, ma) in enumerate(rails, start=1):
            self.write(f"{base}/in{i}_label", label)
            self.write(f"{base}/in{i}_input", int(mv))
            self.write(f"{base}/curr{i}_input", int(ma))
        return self.path(base)

    def ina3221_iio(self, rails: Iterable[tuple[str, float, float, float]], bus: str = "6-0040",
                    device: str = "iio:device0") -> Path:
        """rails: (name, milliwatts, milliamperes, millivolts) for channels 0..2."""
        base = f"sys/bus/i2c/drivers/ina3221x/{bus}/{device}"
        for i, (name, mw, ma, mv) in enumerate(rails):
            self.write(f"{base}/rail_name_{i}", name)
            self.write(f"{base}/in_power{i}_input", int(mw))
            self.write(f"{base}/in_current{i}_input", int(ma))
            self.write(f"{base}/in_voltage{i}_input", int(mv))
        return self.path(base)

    # -- Raspberry Pi -------------------------------------------------------------------------------------
    def rpi_throttled(self, value: int) -> Path:
        return self.write("sys/devices/platform/soc/soc:firmware/get_throttled", f"{value:x}")


def apex_millis(temp_c: float) -> int:
    """What the apex driver prints: its ADC has 0.25 C steps, ``(662 - adc) * 250 + 550`` millidegrees."""
    adc = round((550 - millis(temp_c)) / 250 + 662)
    return (662 - adc) * 250 + 550
