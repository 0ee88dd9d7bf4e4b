"""``discover(root)``: every telemetry source present below ``root`` and whether this user can read it.

The probe lists these in its report; the scheduler binds devices to them (``sensors.auto_spec``). Reading is
tried for real (one small read per source): ``os.access`` is wrong for root and for sysfs attributes whose
permission is decided by the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import coral, hwmon, jetson, rapl, rpi, thermal
from .sysfs import children, read_text, readable, under


@dataclass(frozen=True)
class Source:
    kind: str  # "thermal_zone", "cooling_device", "hwmon", "rapl", "apex", "ina3221", "ina3221x", "rpi_throttled", "nvml"
    name: str  # spec usable in a SensorSpec, e.g. "thermal:x86_pkg_temp", "rapl:package-0", "apex:apex_0"
    path: str
    quantities: tuple[str, ...]  # "temperature", "trips", "power", "energy", "voltage", "current", "throttle"
    readable: bool
    reason: str | None = None  # why not readable
    detail: str = ""  # zone type, chip name, rail names

    def __str__(self) -> str:
        state = "readable" if self.readable else f"NOT readable: {self.reason}"
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind:15} {self.name}{extra}: {', '.join(self.quantities)}; {state}"


def discover(root: Path = Path("/"), nvml: Any | None = None) -> list[Source]:
    """Sources below ``root``. NVML is not below any root: pass an initialised ``nvml`` module (or leave None
    to try ``pynvml`` when ``root`` is "/")."""
    root = Path(root)
    sources: list[Source] = []
    sources += _thermal(root)
    sources += _hwmon(root)
    sources += _rapl(root)
    sources += _apex(root)
    sources += _ina(root)
    sources += _rpi(root)
    sources += _nvml(root, nvml)
    return sources


def _thermal(root: Path) -> list[Source]:
    out = []
    base = under(root, thermal.THERMAL)
    for zone in children(base, "thermal_zone*"):
        kind, _ = read_text(zone / "type")
        ok, reason = readable(zone / "temp")
        quantities = ["temperature"] + (["trips"] if children(zone, "trip_point_*_temp") else [])
        out.append(Source("thermal_zone", f"thermal:{zone.name}", str(zone), tuple(quantities), ok, reason,
                          kind or ""))
    for dev in children(base, "cooling_device*"):
        kind, _ = read_text(dev / "type")
        ok, reason = readable(dev / "cur_state")
        out.append(Source("cooling_device", f"cooling:{dev.name}", str(dev), ("throttle",), ok, reason, kind or ""))
    return out


def _hwmon(root: Path) -> list[Source]:
    out = []
    for chip in children(under(root, hwmon.HWMON), "hwmon*"):
        info = hwmon.read_chip(chip)
        for channel in info.channels:
            label = channel.label or f"{channel.kind}{channel.index}"
            out.append(Source("hwmon", f"hwmon:{info.chip or chip.name}/{label}", channel.reading.path or str(chip),
                              (channel.reading.quantity,), channel.reading.ok, channel.reading.reason,
                              f"{chip.name} {info.chip or '?'}"))
    return out


def _rapl(root: Path) -> list[Source]:
    out = []
    for zone in rapl.read_rapl(root):
        out.append(Source("rapl", f"rapl:{zone.name or zone.zone}", zone.energy.path or "", ("energy",),
                          zone.energy.ok, zone.energy.reason,
                          f"{zone.zone}, wraps at {zone.max_range_j:.0f} J" if zone.max_range_j else zone.zone))
    return out


def _apex(root: Path) -> list[Source]:
    out = []
    for dev in coral.read_apex(root):
        out.append(Source("apex", f"apex:{dev.name}", dev.temperature.path or "", ("temperature", "trips", "throttle"),
                          dev.temperature.ok, dev.temperature.reason, "Coral Edge TPU (PCIe)"))
    return out


def _ina(root: Path) -> list[Source]:
    out = []
    for rail in jetson.read_rails(root):
        kind = "ina3221" if rail.layout == "hwmon" else "ina3221x"
        out.append(Source(kind, f"{kind}:{rail.name}", rail.power.path or "", ("power", "voltage", "current"),
                          rail.power.ok, rail.power.reason, "Jetson power rail"))
    return out


def _rpi(root: Path) -> list[Source]:
    path = rpi.find_get_throttled(root)
    if path is None:
        return []
    ok, reason = readable(path)
    return [Source("rpi_throttled", "rpi:get_throttled", str(path), ("throttle",), ok, reason, "Raspberry Pi firmware")]


def _nvml(root: Path, nvml: Any | None) -> list[Source]:
    from . import nvml as nvml_reader

    if nvml is None:
        if root != Path("/"):
            return []  # a fake tree has no NVML
        nvml, reason = nvml_reader.load_nvml()
        if nvml is None:
            return []  # absent is not a source; the probe reports NVML's absence itself
    gpus, reason = nvml_reader.read_gpus(nvml)
    if reason:
        return [Source("nvml", "nvml", "nvml", (), False, reason)]
    return [Source("nvml", f"nvml:{g.index}", f"nvml:{g.index}", ("temperature", "power", "energy", "throttle"),
                   g.temperature.ok, g.temperature.reason, g.name or "") for g in gpus]
