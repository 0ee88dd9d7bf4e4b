"""``discover(root)``: every telemetry source present below ``root`` and whether this user can read it.

The probe lists these in its report; the scheduler binds devices to them (``sensors.auto_spec``). Both go
through ``read_inventory``, which runs each reader once, so every sysfs layout is parsed in its reader only.

Readable means a real read answered with a value: ``os.access`` is wrong for root and for sysfs attributes
whose permission the driver decides, and a file present but failing (EIO from an I2C sensor that does not
answer, a garbage value) is no source to schedule on. The probe narrows this for another account
(``edgeaccel.probe.Identity``) with the file's mode bits, since it cannot read as someone else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import coral, hwmon, jetson, rapl, rpi, sysfs, thermal
from .reading import Reading
from .sysfs import under


@dataclass(frozen=True)
class Source:
    kind: str  # thermal_zone, cooling_device, hwmon, rapl, apex, ina3221, ina3221x, rpi_throttled, nvml
    name: str  # spec usable in a SensorSpec, e.g. "thermal:x86_pkg_temp", "rapl:package-0", "apex:apex_0"
    path: str  # the file read ("nvml:N" for NVML)
    quantities: tuple[str, ...]  # "temperature", "trips", "power", "energy", "voltage", "current", "throttle"
    readable: bool
    reason: str | None = None  # why not readable
    detail: str = ""  # zone type, chip name, rail names
    trips: tuple[thermal.TripPoint, ...] = ()  # where the source has limits: thermal zones, apex, NVML

    def __str__(self) -> str:
        state = "readable" if self.readable else f"NOT readable: {self.reason}"
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind:15} {self.name}{extra}: {', '.join(self.quantities)}; {state}"


@dataclass(frozen=True)
class Inventory:
    """What every reader found below ``root``, read once."""

    root: Path
    zones: tuple[thermal.ThermalZone, ...] = ()
    cooling: tuple[thermal.CoolingDevice, ...] = ()
    chips: tuple[hwmon.HwmonChip, ...] = ()
    rapl: tuple[rapl.RaplZone, ...] = ()
    apex: tuple[coral.ApexDevice, ...] = ()
    rails: tuple[jetson.Rail, ...] = ()
    throttled: rpi.ThrottleFlags | None = None  # None: no get_throttled file (not a Raspberry Pi)
    gpus: tuple[Any, ...] = ()  # nvml.GpuReading
    nvml_reason: str | None = None  # NVML loaded but could not list its GPUs

    def sources(self) -> list[Source]:
        """One Source per sensor, named as a SensorSpec names it."""
        out = [_from("thermal_zone", f"thermal:{z.name}", z.temperature, ("temperature", "trips") if z.trips
                     else ("temperature",), z.type or "", z.trips) for z in self.zones]
        for dev in self.cooling:
            ok, path = dev.cur_state is not None, under(self.root, thermal.THERMAL) / dev.name / "cur_state"
            out.append(Source("cooling_device", f"cooling:{dev.name}", str(path), ("throttle",), ok,
                              None if ok else dev.reason, dev.type or ""))
        out += [_from("hwmon", f"hwmon:{chip.chip or chip.name}/{c.label or f'{c.kind}{c.index}'}", c.reading,
                      (c.reading.quantity,), f"{chip.name} {chip.chip or '?'}")
                for chip in self.chips for c in chip.channels]
        out += [_from("rapl", f"rapl:{z.name or z.zone}", z.energy, ("energy",),
                      f"{z.zone}, wraps at {z.max_range_j:.0f} J" if z.max_range_j else z.zone) for z in self.rapl]
        out += [_from("apex", f"apex:{d.name}", d.temperature, ("temperature", "trips", "throttle"),
                      "Coral Edge TPU (PCIe)", d.trips) for d in self.apex]
        for rail in self.rails:
            kind = "ina3221" if rail.layout == "hwmon" else "ina3221x"
            out.append(_from(kind, f"{kind}:{rail.name}", rail.power, ("power", "voltage", "current"),
                             "Jetson power rail"))
        if self.throttled is not None:
            out.append(Source("rpi_throttled", "rpi:get_throttled", self.throttled.path or "", ("throttle",),
                              self.throttled.raw is not None, self.throttled.reason, "Raspberry Pi firmware"))
        if self.nvml_reason:
            return out + [Source("nvml", "nvml", "nvml", (), False, self.nvml_reason)]
        gpu = ("temperature", "power", "energy", "throttle")
        return out + [Source("nvml", f"nvml:{g.index}", f"nvml:{g.index}", gpu, g.temperature.ok, g.temperature.reason,
                             g.name or "", g.trips) for g in self.gpus]


def read_inventory(root: Path = Path("/"), nvml: Any | None = None) -> Inventory:
    """Run every reader below ``root`` (and only below it). NVML is not below any root: pass an initialised
    ``nvml`` module (or leave None to try ``pynvml`` when ``root`` is "/")."""
    with sysfs.confined(Path(root)):
        return _read_inventory(Path(root), nvml)


def _read_inventory(root: Path, nvml: Any | None) -> Inventory:
    from . import nvml as nvml_reader

    cooling = thermal.read_cooling_devices(root)
    throttled = rpi.read_throttled(root)
    gpus: list = []
    nvml_reason = None
    if nvml is None and root == Path("/"):
        nvml, _ = nvml_reader.load_nvml()  # absent is not a source; the probe reports NVML's absence itself
    if nvml is not None:
        gpus, nvml_reason = nvml_reader.read_gpus(nvml)
    return Inventory(root, tuple(thermal.read_thermal_zones(root, cooling)), tuple(cooling),
                     tuple(hwmon.read_hwmon(root)), tuple(rapl.read_rapl(root)), tuple(coral.read_apex(root)),
                     tuple(jetson.read_rails(root)), throttled if throttled.path else None, tuple(gpus), nvml_reason)


def discover(root: Path = Path("/"), nvml: Any | None = None) -> list[Source]:
    """Sources below ``root`` (and NVML's GPUs, see ``read_inventory``)."""
    return read_inventory(root, nvml).sources()


def _from(kind: str, name: str, reading: Reading, quantities: tuple[str, ...], detail: str,
          trips: tuple[thermal.TripPoint, ...] = ()) -> Source:
    return Source(kind, name, reading.path or "", quantities, reading.ok, reading.reason, detail, trips)
