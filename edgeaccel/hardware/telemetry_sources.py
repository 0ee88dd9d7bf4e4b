"""The probe's telemetry section: the sources ``edgeaccel.telemetry`` finds below the root, why a kind is
absent, and the problems that follow. Nothing is parsed here: every sysfs layout (thermal zones and their
trips, hwmon, RAPL, Coral apex, Jetson INA3221 rails, Raspberry Pi throttling, NVML) has one reader, in that
package, which the scheduler uses too.

Readable, for the running process, is what the reader's real read gave (see ``telemetry.inventory``): mode
bits lie for root and for sysfs attributes whose driver decides or fails (EIO from an I2C sensor), and the
scheduler will bind only to sources that answer. The probe used to judge without reading, because an ACPI
zone's read can take milliseconds; one read per sensor costs a few milliseconds on such a machine, well
inside the probe's one second. For another account (``Identity``) the probe cannot read as them, so it
narrows that answer with each file's mode bits, as the kernel would judge them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .access import Access, Identity
from .common import Problem
from ..devfs import Root, Tree, as_tree

if TYPE_CHECKING:  # the telemetry readers are imported when a survey reads telemetry, not with the probe
    from ..telemetry.inventory import Source
    from ..telemetry.hwmon import HwmonChip
    from ..telemetry.rapl import RaplZone
    from ..telemetry.thermal import ThermalZone, TripPoint

RAPL_FIX = ("energy_uj is readable by root only since Linux 5.10: run as root, or allow a group with a udev rule "
            "or systemd-tmpfiles, e.g. 'z /sys/class/powercap/intel-rapl:0/energy_uj 0440 root power'")


@dataclass(frozen=True)
class TelemetrySources:
    """The telemetry readers' own objects, by kind, and discover's list of every source."""

    thermal_zones: tuple[ThermalZone, ...] = ()
    hwmon: tuple[HwmonChip, ...] = ()
    rapl: tuple[RaplZone, ...] = ()
    sources: tuple[Source, ...] = ()  # paths as on the device
    reasons: dict[str, str] = field(default_factory=dict)  # source kind -> why there is none

    def to_dict(self) -> dict:
        """``sources`` lists everything; ``thermal_zones``, ``hwmon`` and ``rapl`` keep the shape version 1 of
        the schema began with."""
        return {
            "thermal_zones": [{"name": z.name, "type": z.type, "readable": z.temperature.ok,
                               "reason": z.temperature.reason, "trip_points": _trips(z.trips)}
                              for z in self.thermal_zones],
            "hwmon": [{"name": c.name, "chip": c.chip, "sensors": _files_by_kind(c),
                       "readable": any(ch.reading.ok for ch in c.channels)} for c in self.hwmon],
            "rapl": [{"name": z.zone, "label": z.name, "readable": z.energy.ok} for z in self.rapl],
            "sources": [{"kind": s.kind, "name": s.name, "path": s.path, "quantities": list(s.quantities),
                         "readable": s.readable, "reason": s.reason, "detail": s.detail, "trips": _trips(s.trips)}
                        for s in self.sources],
            "reasons": dict(self.reasons),
        }


def _trips(trips: tuple[TripPoint, ...]) -> list[dict]:
    return [{"type": t.type, "temp_c": t.temp_c} for t in trips]


def _files_by_kind(chip: HwmonChip) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for channel in chip.channels:
        files.setdefault(channel.kind, []).append(Path(channel.reading.path or "").name)
    return files


def telemetry_sources(root: Root = Path("/"), identity: Identity | None = None) -> TelemetrySources:
    """The telemetry sources present below ``root`` and whether this process (or ``identity``) may read them."""
    from ..telemetry.inventory import read_inventory

    tree = as_tree(root)
    found = read_inventory(tree.root)
    if identity is not None:
        found = _as_seen_by(found, tree, Access(tree, identity))
    sources = tuple(dataclasses.replace(s, path=tree.on_device(s.path)) for s in found.sources())
    absent = (("thermal_zones", found.zones, "/sys/class/thermal", "thermal zones"),
              ("hwmon", found.chips, "/sys/class/hwmon", "hwmon sensors"),
              ("rapl", found.rapl, "/sys/class/powercap", "RAPL energy counters"))
    reasons = {kind: _absence(tree, base, what) for kind, present, base, what in absent if not present}
    return TelemetrySources(found.zones, found.chips, found.rapl, sources, reasons)


def _absence(tree: Tree, base: str, what: str) -> str:
    names, reason = tree.listdir(base)
    if reason:
        return f"{reason}: the kernel exposes no {what} here"
    if names:
        return f"{base} has no {what}"
    return f"{base} is empty: no {what} (usual in virtual machines and containers)"


def _as_seen_by(value: Any, tree: Tree, access: Access) -> Any:
    """``value`` (the inventory, or a part of it) with each reading whose file ``access``'s identity may not
    read made a missing one. Readings are found wherever they sit, so a reader added to the inventory is covered."""
    from ..telemetry.reading import Reading
    from ..telemetry.rpi import ThrottleFlags

    if isinstance(value, (Reading, ThrottleFlags)) and value.reason is None and value.path:
        target = tree.on_device(value.path)
        if access.can(target, os.R_OK):
            return value
        why = f"{target} is not readable by uid {access.identity.uid} (mode bits)"  # type: ignore[union-attr]
        if isinstance(value, Reading):
            return dataclasses.replace(value, value=None, reason=why)
        return dataclasses.replace(value, raw=None, reason=why)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _as_seen_by(getattr(value, f.name), tree, access)
                                             for f in dataclasses.fields(value)})
    if isinstance(value, tuple):
        return tuple(_as_seen_by(item, tree, access) for item in value)
    return value


def telemetry_problems(telemetry: TelemetrySources) -> list[Problem]:
    problems = []
    if not telemetry.sources:
        problems.append(Problem("telemetry", "no thermal zones, hwmon sensors, RAPL counters or other telemetry "
                                             "sources: edgeaccel cannot see temperature or power here (the "
                                             "telemetry section says why for each kind)"))
    unreadable = [z.zone for z in telemetry.rapl if not z.energy.ok]
    if unreadable:
        problems.append(Problem("RAPL energy counters", f"{', '.join(unreadable)}: energy_uj not readable by this "
                                                         "user", RAPL_FIX))
    zones = [z.name for z in telemetry.thermal_zones if not z.temperature.ok]
    if zones:
        problems.append(Problem("thermal zones", f"{', '.join(zones)}: temp not readable"))
    return problems
