"""hwmon sensors (``/sys/class/hwmon/hwmon*``) per Documentation/hwmon/sysfs-interface: temperatures in
millidegrees C (``tempN_input``, ``tempN_max``, ``tempN_crit``, ``tempN_emergency``), power in microwatts
(``powerN_input`` or ``powerN_average``), energy in microjoules (``energyN_input``), voltage in millivolts
(``inN_input``), current in milliamperes (``currN_input``), fan speed in RPM (``fanN_input``). Older drivers put
the attributes under ``device/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .reading import Reading, missing
from .sysfs import children, exists, read_celsius, read_scaled, read_text, under

HWMON = "/sys/class/hwmon"

_CHANNEL = re.compile(r"^(temp|power|energy|in|curr|fan)(\d+)_(input|average)$")
_UNITS = {"temp": ("temperature", "millidegree_celsius", "C"), "power": ("power", "microwatt", "W"),
          "energy": ("energy", "microjoule", "J"), "in": ("voltage", "millivolt", "V"),
          "curr": ("current", "milliampere", "A"), "fan": ("fan speed", "rpm", "rpm")}


@dataclass(frozen=True)
class HwmonChannel:
    kind: str  # "temp", "power", "energy", "in", "curr", "fan"
    index: int
    label: str | None
    reading: Reading
    max_c: float | None = None  # temperature limits, where the driver gives them
    crit_c: float | None = None
    emergency_c: float | None = None


@dataclass(frozen=True)
class HwmonChip:
    name: str  # "hwmon2"
    chip: str | None  # contents of "name": "coretemp", "k10temp", "amdgpu", "ina3221", ...
    path: Path
    channels: tuple[HwmonChannel, ...] = field(default_factory=tuple)

    def of(self, kind: str) -> list[HwmonChannel]:
        return [c for c in self.channels if c.kind == kind]

    def find(self, kind: str, label_or_index: str) -> HwmonChannel | None:
        for channel in self.of(kind):
            if channel.label == label_or_index or f"{kind}{channel.index}" == label_or_index:
                return channel
        return None


def read_hwmon(root: Path = Path("/")) -> list[HwmonChip]:
    return [read_chip(path) for path in children(under(root, HWMON), "hwmon*")]


def read_chip(path: Path) -> HwmonChip:
    base = path if exists(path / "name") or not exists(path / "device" / "name") else path / "device"
    chip, _ = read_text(base / "name")
    return HwmonChip(path.name, chip, path, tuple(read_channels(base, f"{path.name}:{chip or '?'}")))


def read_channels(base: Path, label_prefix: str) -> list[HwmonChannel]:
    channels: dict[tuple[str, int], Path] = {}
    for entry in children(base, "*_*"):
        match = _CHANNEL.match(entry.name)
        if not match:
            continue
        kind, index, which = match.group(1), int(match.group(2)), match.group(3)
        # prefer the instantaneous input over the driver's average when both exist
        if (kind, index) not in channels or which == "input":
            channels[(kind, index)] = entry
    return [read_channel(base, kind, index, label_prefix, True, entry) for (kind, index), entry in sorted(channels.items())]


def read_channel(base: Path, kind: str, index: int, label_prefix: str, limits: bool = True,
                 entry: Path | None = None) -> HwmonChannel:
    """One channel of a chip; ``limits`` also reads a temperature's max/crit/emergency."""
    quantity, unit, si = _UNITS[kind]
    if entry is None:
        entry = base / f"{kind}{index}_input"
        if not exists(entry) and exists(base / f"{kind}{index}_average"):
            entry = base / f"{kind}{index}_average"
    label, _ = read_text(base / f"{kind}{index}_label")
    source = f"{label_prefix}/{label or f'{kind}{index}'}"
    if kind == "temp":
        value, reason = read_celsius(entry)
    else:
        value, reason = read_scaled(entry, unit)
    reading = (Reading(source, quantity, value, si, None, str(entry)) if value is not None
               else missing(source, quantity, si, reason or "unknown", str(entry)))
    found = {}
    if kind == "temp" and limits:
        for limit in ("max", "crit", "emergency"):
            found[f"{limit}_c"] = read_celsius(base / f"temp{index}_{limit}")[0]
    return HwmonChannel(kind, index, label, reading, **found)
