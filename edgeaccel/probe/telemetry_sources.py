"""Which telemetry sources exist and whether this user may read them: thermal zones with their trip
points, hwmon sensors, powercap RAPL energy counters. Presence only: reading values is the job of
``edgeaccel.telemetry``; this list is meant to be pointed at that package later.

Layouts: /sys/class/thermal/thermal_zoneN/{type,temp,trip_point_K_type,trip_point_K_temp} in millidegrees
Celsius (Documentation/driver-api/thermal/sysfs-api.rst); /sys/class/hwmon/hwmonN/name and
{temp,power,energy,curr,in,fan}M_input (Documentation/hwmon/sysfs-interface.rst); /sys/class/powercap/
intel-rapl:N[:M]/{name,energy_uj} (Documentation/power/powercap/powercap.rst), root-only since Linux 5.10
(CVE-2020-8694).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .access import Access, Identity
from .fs import Root, Tree, as_tree

RAPL_FIX = ("energy_uj is readable by root only since Linux 5.10: run as root, or allow a group with a udev rule "
            "or systemd-tmpfiles, e.g. 'z /sys/class/powercap/intel-rapl:0/energy_uj 0440 root power'")


@dataclass(frozen=True)
class TripPoint:
    type: str | None
    temp_c: float | None


@dataclass(frozen=True)
class ThermalZone:
    name: str
    type: str | None
    readable: bool
    trip_points: tuple[TripPoint, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "readable": self.readable, "reason": self.reason,
                "trip_points": [{"type": t.type, "temp_c": t.temp_c} for t in self.trip_points]}


@dataclass(frozen=True)
class HwmonDevice:
    name: str
    chip: str | None
    sensors: dict[str, list[str]]  # kind -> input files, e.g. {"temp": ["temp1_input"]}
    readable: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "chip": self.chip, "sensors": {k: list(v) for k, v in self.sensors.items()},
                "readable": self.readable}


@dataclass(frozen=True)
class RaplDomain:
    name: str
    label: str | None
    readable: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "readable": self.readable}


@dataclass(frozen=True)
class TelemetrySources:
    thermal_zones: tuple[ThermalZone, ...] = ()
    hwmon: tuple[HwmonDevice, ...] = ()
    rapl: tuple[RaplDomain, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)  # source kind -> why there is none

    def to_dict(self) -> dict:
        return {"thermal_zones": [z.to_dict() for z in self.thermal_zones], "hwmon": [h.to_dict() for h in self.hwmon],
                "rapl": [r.to_dict() for r in self.rapl], "reasons": dict(self.reasons)}


def parse_millidegrees(text: str | None) -> float | None:
    value = (text or "").strip()
    return int(value) / 1000 if re.fullmatch(r"-?\d+", value) else None


def parse_hwmon_inputs(names: list[str]) -> dict[str, list[str]]:
    """kind -> sensor files (temp1_input, power1_average, ...) among a hwmon directory's entries."""
    sensors: dict[str, list[str]] = {}
    for name in names:
        m = re.fullmatch(r"(temp|power|energy|curr|in|fan)\d+_(input|average)", name)
        if m:
            sensors.setdefault(m.group(1), []).append(name)
    return sensors


def _absence(tree: Tree, base: str, what: str) -> str:
    names, reason = tree.listdir(base)
    if reason:
        return f"{reason}: the kernel exposes no {what} here"
    return f"{base} is empty: no {what} (usual in virtual machines and containers)"


def _thermal(tree: Tree, access: Access) -> tuple[list[ThermalZone], str | None]:
    base = "/sys/class/thermal"
    names, _ = tree.listdir(base)
    zones = []
    for name in (n for n in names if n.startswith("thermal_zone")):
        zone = f"{base}/{name}"
        entries, _ = tree.listdir(zone)
        trips = []
        for entry in entries:
            m = re.fullmatch(r"trip_point_(\d+)_temp", entry)
            if m:
                kind = tree.read(f"{zone}/trip_point_{m.group(1)}_type").strip()
                trips.append(TripPoint(kind or None, parse_millidegrees(tree.read(f"{zone}/{entry}").text)))
        # Readable is judged without reading the sensor: some (ACPI) zones take milliseconds per read.
        state = tree.file_state(f"{zone}/temp")
        readable = state is None and access.can(f"{zone}/temp", os.R_OK)
        zones.append(ThermalZone(name, tree.read(f"{zone}/type").strip() or None, readable, tuple(trips),
                                 None if readable else f"{zone}/temp {state or 'not readable by this user'}"))
    return zones, None if zones else _absence(tree, base, "thermal zones")


def _hwmon(tree: Tree, access: Access) -> tuple[list[HwmonDevice], str | None]:
    base = "/sys/class/hwmon"
    names, _ = tree.listdir(base)
    devices = []
    for name in names:
        entries, _ = tree.listdir(f"{base}/{name}")
        sensors = parse_hwmon_inputs(entries)
        first = next((files[0] for files in sensors.values()), None)
        readable = bool(first) and tree.file_state(f"{base}/{name}/{first}") is None \
            and access.can(f"{base}/{name}/{first}", os.R_OK)
        devices.append(HwmonDevice(name, tree.read(f"{base}/{name}/name").strip() or None, sensors, readable))
    return devices, None if devices else _absence(tree, base, "hwmon sensors")


def _rapl(tree: Tree, access: Access) -> tuple[list[RaplDomain], str | None]:
    base = "/sys/class/powercap"
    names, _ = tree.listdir(base)
    domains = []
    for name in names:
        if not re.fullmatch(r"intel-rapl(-mmio)?:\d+(:\d+)?", name):
            continue
        counter = f"{base}/{name}/energy_uj"
        readable = tree.file_state(counter) is None and access.can(counter, os.R_OK)
        domains.append(RaplDomain(name, tree.read(f"{base}/{name}/name").strip() or None, readable))
    return domains, None if domains else _absence(tree, base, "RAPL energy counters")


def _telemetry_sources(root: Root = Path("/"), identity: Identity | None = None) -> TelemetrySources:
    """The telemetry sources present below ``root`` and whether this user (or ``identity``) may read them."""
    tree = as_tree(root)
    access = Access(tree, identity)
    zones, no_zones = _thermal(tree, access)
    hwmon, no_hwmon = _hwmon(tree, access)
    rapl, no_rapl = _rapl(tree, access)
    reasons = {kind: why for kind, why in (("thermal_zones", no_zones), ("hwmon", no_hwmon), ("rapl", no_rapl)) if why}
    return TelemetrySources(tuple(zones), tuple(hwmon), tuple(rapl), reasons)
