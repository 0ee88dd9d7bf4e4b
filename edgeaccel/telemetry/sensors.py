"""Which sensors describe one device (the CPU, a GPU, an Edge TPU), and reading them.

A ``SensorSpec`` names sources by kind and name, the same names ``discover`` lists:

    temperature  "thermal:x86_pkg_temp" (zone type or thermal_zoneN), "hwmon:k10temp/Tctl", "apex:apex_0", "nvml:0",
                 "npusmi:0" (an Ascend NPU through npu-smi)
    energy       "rapl:package-0", "hwmon:amdgpu/energy1", "nvml:0"
    power        "hwmon:ina3221/power1", "ina3221:VDD_IN", "ina3221x:POM_5V_IN", "nvml:0", "npusmi:0"
    throttle     "thermal:<zone>" (its cooling devices engaged), "rpi:get_throttled", "apex:apex_0", "nvml:0"

Trip points come with the temperature source (zone trips, hwmon max/crit, apex trip 0 / hw_temp_warn2, NVML
slowdown / shutdown). ``auto_spec`` picks sources for a device kind from what is present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import coral, hwmon, jetson, npu_smi, nvml as nvml_reader, rapl, rpi, thermal
from .reading import Reading, missing
from .sysfs import children, is_dir, read_text, under

CPU_ZONE_TYPES = ("x86_pkg_temp", "cpu-thermal", "cpu_thermal", "CPU-therm", "cpu", "soc_thermal", "soc-thermal",
                  "cpu0-thermal", "acpitz")
CPU_HWMON = (("coretemp", "Package id 0"), ("k10temp", "Tctl"), ("k10temp", "Tdie"), ("cpu_thermal", None),
             ("zenpower", "Tdie"))
GPU_ZONE_TYPES = ("GPU-therm", "gpu-thermal", "gpu_thermal", "gpu")
# An NPU with a zone of its own: Rockchip rk3588 ("npu-thermal", rk3588s.dtsi), Qualcomm's NSP ("nspss-0",
# "nsphvx-0" on recent Snapdragons). The Intel NPU sits in the CPU package and has no zone of its own.
NPU_ZONE_TYPES = ("npu-thermal", "npu_thermal", "npu", "nspss-0", "nsphvx-0", "nsphmx-0")


@dataclass(frozen=True)
class SensorSpec:
    temperature: str | None = None
    energy: str | None = None
    power: str | None = None
    throttle: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)  # why a source was chosen or is absent

    def note_for(self, quantity: str) -> str | None:
        """The notes that concern one quantity ("temperature", "energy", ...), or all of them."""
        own = [n for n in self.notes if quantity in n]
        return "; ".join(own or self.notes) or None


@dataclass(frozen=True)
class TempSample:
    reading: Reading
    passive_c: float | None = None
    critical_c: float | None = None
    hot_c: float | None = None
    throttled: bool | None = None  # from the same source, when it says (a zone's cooling devices)


def split(spec: str) -> tuple[str, str]:
    kind, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"sensor spec {spec!r} must be KIND:NAME, e.g. thermal:x86_pkg_temp or rapl:package-0")
    return kind, name


def read_temperature(spec: str, root: Path, nvml: Any | None = None, limits: bool = True) -> TempSample:
    """The temperature, and with ``limits`` the trip points (they rarely change: samplers skip them mostly)."""
    kind, name = split(spec)
    if kind == "thermal":
        zone_path = _zone_path(root, name)
        if zone_path is None:
            return TempSample(missing(spec, "temperature", "C", f"no thermal zone {name!r} below {root}"))
        zone = thermal.read_zone(zone_path, trips=limits)
        return TempSample(zone.temperature, zone.passive_c, zone.critical_c, zone.hot_c, zone.throttled)
    if kind == "hwmon":
        channel = _hwmon_channel(root, name, "temp", limits)
        if isinstance(channel, str):
            return TempSample(missing(spec, "temperature", "C", channel))
        return TempSample(channel.reading, channel.max_c, channel.crit_c or channel.emergency_c)
    if kind == "apex":
        path = under(root, coral.APEX) / name
        if not is_dir(path):
            return TempSample(missing(spec, "temperature", "C", f"no Coral PCIe device {path}"))
        dev = coral.read_apex_device(path, limits)
        return TempSample(dev.temperature, dev.passive_c, dev.critical_c)
    if kind == "nvml":
        gpu = _gpu(nvml, name)
        if isinstance(gpu, str):
            return TempSample(missing(spec, "temperature", "C", gpu))
        return TempSample(gpu.temperature, gpu.slowdown_c, gpu.shutdown_c)
    if kind == "npusmi":
        found = npu_smi.chip(root, name)
        return TempSample(missing(spec, "temperature", "C", found) if isinstance(found, str) else found.temperature)
    return TempSample(missing(spec, "temperature", "C", f"unknown temperature source kind {kind!r}"))


def read_energy(spec: str, root: Path, nvml: Any | None = None) -> tuple[Reading, float | None]:
    """The raw energy counter in J and its wrap range (None when it does not wrap)."""
    kind, name = split(spec)
    if kind == "rapl":
        zone_path = _rapl_path(root, name)
        if zone_path is None:
            return missing(spec, "energy", "J", f"no RAPL zone {name!r} below {under(root, rapl.POWERCAP)}"), None
        zone = rapl.read_rapl_zone(zone_path)
        return zone.energy, zone.max_range_j
    if kind == "hwmon":
        channel = _hwmon_channel(root, name, "energy", False)
        if isinstance(channel, str):
            return missing(spec, "energy", "J", channel), None
        return channel.reading, None
    if kind == "nvml":
        gpu = _gpu(nvml, name)
        if isinstance(gpu, str):
            return missing(spec, "energy", "J", gpu), None
        return gpu.energy, None
    return missing(spec, "energy", "J", f"unknown energy source kind {kind!r}"), None


def read_power(spec: str, root: Path, nvml: Any | None = None) -> Reading:
    kind, name = split(spec)
    if kind == "hwmon":
        channel = _hwmon_channel(root, name, "power", False)
        return missing(spec, "power", "W", channel) if isinstance(channel, str) else channel.reading
    if kind in ("ina3221", "ina3221x"):
        rails = jetson.read_rails_hwmon(root) if kind == "ina3221" else jetson.read_rails_iio(root)
        for rail in rails:
            if rail.name == name:
                return rail.power
        return missing(spec, "power", "W", f"no INA3221 rail {name!r} ({kind} layout) below {root}")
    if kind == "nvml":
        gpu = _gpu(nvml, name)
        return missing(spec, "power", "W", gpu) if isinstance(gpu, str) else gpu.power
    if kind == "npusmi":
        found = npu_smi.chip(root, name)
        return missing(spec, "power", "W", found) if isinstance(found, str) else found.power
    return missing(spec, "power", "W", f"unknown power source kind {kind!r}")


def read_throttle(spec: str, root: Path, nvml: Any | None = None) -> tuple[bool | None, str | None]:
    """Is the hardware or kernel slowing the device down now? (value, reason when unknown)"""
    kind, name = split(spec)
    if kind == "thermal":
        zone_path = _zone_path(root, name)
        if zone_path is None:
            return None, f"no thermal zone {name!r}"
        zone = thermal.read_zone(zone_path, trips=False)
        throttled = zone.throttled
        return throttled, None if throttled is not None else f"{zone.name} has no cooling device with a known state"
    if kind == "rpi":
        flags = rpi.read_throttled(root)
        return flags.throttled_now, flags.reason
    if kind == "apex":
        path = under(root, coral.APEX) / name
        divider = coral.read_apex_device(path).clock_divider if is_dir(path) else None
        return (None, f"no clock divider known for {name}") if divider is None else (divider > 1, None)
    if kind == "nvml":
        gpu = _gpu(nvml, name)
        if isinstance(gpu, str):
            return None, gpu
        return gpu.throttled, gpu.clock_events_reason
    return None, f"unknown throttle source kind {kind!r}"


def auto_spec(kind: str, root: Path = Path("/"), nvml: Any | None = None) -> SensorSpec:
    """Sources for a device kind ("cpu", "gpu", "edgetpu", "npu") from what is present below ``root``."""
    kind = kind.lower()
    notes: list[str] = []
    temperature = energy = power = throttle = None
    if kind == "cpu":
        zone = _first_zone(root, CPU_ZONE_TYPES)
        if zone:
            temperature = throttle = f"thermal:{zone}"
        else:
            for chip, label in CPU_HWMON:
                found = _hwmon_channel(root, f"{chip}/{label or 'temp1'}", "temp", False)
                if not isinstance(found, str):
                    temperature = f"hwmon:{chip}/{label or 'temp1'}"
                    break
        if temperature is None:
            notes.append(f"no CPU temperature: no thermal zone of type {', '.join(CPU_ZONE_TYPES[:4])}... and no "
                         f"coretemp/k10temp hwmon below {root}")
        packages = [z for z in rapl.read_rapl(root) if z.is_package]
        if packages:
            energy = f"rapl:{packages[0].name}"
        else:
            notes.append(f"no CPU energy counter: no RAPL package zone below {under(root, rapl.POWERCAP)}")
        if rpi.find_get_throttled(root) is not None:
            throttle = "rpi:get_throttled"
    elif kind in ("gpu", "cuda"):
        if nvml is not None:
            temperature = energy = power = throttle = "nvml:0"
        else:
            zone = _first_zone(root, GPU_ZONE_TYPES)
            if zone:
                temperature = throttle = f"thermal:{zone}"
            rails = [r for r in jetson.read_rails(root) if "GPU" in r.name.upper()]
            if rails:
                power = f"{'ina3221' if rails[0].layout == 'hwmon' else 'ina3221x'}:{rails[0].name}"
            if temperature is None:
                notes.append("no GPU temperature: NVML not loaded and no GPU thermal zone")
    elif kind in ("edgetpu", "coral", "apex"):
        devices = children(under(root, coral.APEX), "apex_*")
        if devices:
            temperature = throttle = f"apex:{devices[0].name}"
        else:
            notes.append(f"no Edge TPU temperature: no {under(root, coral.APEX)}/apex_* (USB Accelerators have none)")
        notes.append("the Edge TPU has no power or energy sensor")
    elif kind == "npu":
        zone = _first_zone(root, NPU_ZONE_TYPES)
        chips = npu_smi.read_chips(root)[0] if zone is None and npu_smi.find(root) else []
        if zone:
            temperature = f"thermal:{zone}"
        elif chips:  # an Ascend NPU: npu-smi reports its temperature and power
            temperature = chips[0].spec
            power = chips[0].spec if chips[0].power.ok else None
        else:
            notes.append(f"no NPU temperature: no thermal zone of type {', '.join(NPU_ZONE_TYPES[:3])}... and no "
                         "npu-smi")
        if power is None:
            notes.append("no NPU power or energy sensor is known")
    else:
        notes.append(f"no known sensors for a {kind!r} device")
    return SensorSpec(temperature, energy, power, throttle, tuple(notes))


# Where a named source lives, resolved once per (root, name): scanning every zone or chip on each sample would
# cost more than the reading itself. A cached path that stops existing is resolved again.
_RESOLVED: dict[tuple[str, str, str], Any] = {}


def _zone_path(root: Path, name: str) -> Path | None:
    key = (str(root), "thermal", name)
    cached = _RESOLVED.get(key)
    if cached is not None and is_dir(cached):
        return cached
    base = under(root, thermal.THERMAL)
    found = None
    direct = base / name
    if name.startswith("thermal_zone") and is_dir(direct):
        found = direct
    else:
        for zone in children(base, "thermal_zone*"):
            kind, _ = read_text(zone / "type")
            if kind == name:
                found = zone
                break
    if found is not None:
        _RESOLVED[key] = found
    return found


def _rapl_path(root: Path, name: str) -> Path | None:
    key = (str(root), "rapl", name)
    cached = _RESOLVED.get(key)
    if cached is not None and is_dir(cached):
        return cached
    for zone_path in children(under(root, rapl.POWERCAP), "intel-rapl*:*"):
        zone_name, _ = read_text(zone_path / "name")
        if name in (zone_name, zone_path.name):
            _RESOLVED[key] = zone_path
            return zone_path
    return None


def _first_zone(root: Path, types: tuple[str, ...]) -> str | None:
    present = {}
    for zone in children(under(root, thermal.THERMAL), "thermal_zone*"):
        kind, _ = read_text(zone / "type")
        if kind and kind not in present:
            present[kind] = zone.name
    for kind in types:
        if kind in present:
            return kind
    return None


def _hwmon_channel(root: Path, name: str, kind: str, limits: bool = True) -> hwmon.HwmonChannel | str:
    chip_name, _, channel = name.partition("/")
    wanted = channel or f"{kind}1"
    key = (str(root), f"hwmon-{kind}", name)
    cached = _RESOLVED.get(key)
    if cached is None or not is_dir(cached[0]):
        cached = None
        for path in children(under(root, hwmon.HWMON), "hwmon*"):
            chip = hwmon.read_chip(path)
            if chip_name in (chip.chip, path.name):
                found = chip.find(kind, wanted)
                if found is None:
                    return f"hwmon chip {chip_name} has no {kind} channel {wanted!r}"
                base = Path(found.reading.path).parent if found.reading.path else path
                cached = (base, found.index, f"{path.name}:{chip.chip or '?'}")
                _RESOLVED[key] = cached
                break
        if cached is None:
            return f"no hwmon chip {chip_name!r} below {under(root, hwmon.HWMON)}"
    base, index, prefix = cached
    return hwmon.read_channel(base, kind, index, prefix, limits)


def _gpu(nvml: Any | None, name: str) -> nvml_reader.GpuReading | str:
    if nvml is None:
        return "NVML is not loaded (pynvml missing or no NVIDIA driver)"
    try:
        index = int(name)
    except ValueError:
        return f"NVML GPU index {name!r} is not a number"
    return nvml_reader.read_gpu(nvml, index)
