"""Linux thermal zones (``/sys/class/thermal/thermal_zone*``): temperature, trip points and the cooling devices
bound to them. Units per the kernel's sysfs-api: temperatures and hysteresis in millidegrees Celsius.

A zone's ``passive`` trip is where the kernel starts throttling (cpufreq/devfreq cooling); ``critical`` is where
it shuts the machine down; ``hot`` (rare) is a notification before critical.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .reading import Reading, missing
from .sysfs import children, is_dir, parse_celsius, parse_int, read_int, read_text, under

THERMAL = "/sys/class/thermal"


@dataclass(frozen=True)
class TripPoint:
    index: int
    type: str  # "active", "passive", "hot", "critical" (or whatever the driver says)
    temp_c: float | None
    hyst_c: float | None = None
    reason: str | None = None  # why temp_c is None


@dataclass(frozen=True)
class CoolingDevice:
    name: str  # "cooling_device0"
    type: str | None  # "Processor", "thermal-cpufreq-0", "pwm-fan", ...
    cur_state: int | None
    max_state: int | None
    reason: str | None = None

    @property
    def engaged(self) -> bool | None:
        """Is the kernel using this device to cool right now (state above 0)? None when unknown."""
        return None if self.cur_state is None else self.cur_state > 0

    @property
    def fraction(self) -> float | None:
        if self.cur_state is None or not self.max_state:
            return None
        return self.cur_state / self.max_state


@dataclass(frozen=True)
class ThermalZone:
    name: str  # "thermal_zone0"
    type: str | None  # "x86_pkg_temp", "cpu-thermal", "CPU-therm", "acpitz", ...
    temperature: Reading
    trips: tuple[TripPoint, ...] = ()
    cooling: tuple[CoolingDevice, ...] = ()
    mode: str | None = None  # "enabled" / "disabled"
    policy: str | None = None  # governor: "step_wise", "power_allocator", ...

    def trip_c(self, kind: str) -> float | None:
        temps = [t.temp_c for t in self.trips if t.type == kind and t.temp_c is not None]
        return min(temps) if temps else None

    @property
    def passive_c(self) -> float | None:
        return self.trip_c("passive")

    @property
    def critical_c(self) -> float | None:
        return self.trip_c("critical")

    @property
    def hot_c(self) -> float | None:
        return self.trip_c("hot")

    @property
    def throttled(self) -> bool | None:
        """True when a bound cooling device is engaged; None when no bound device's state is known."""
        states = [c.engaged for c in self.cooling if c.engaged is not None]
        return any(states) if states else None


# Where a passive or critical trip of real silicon lies. Outside it a trip is not meant: older kernels list
# the unprogrammed passive trips of x86_pkg_temp as 0 C, some ACPI tables give -273.2 C (0 decikelvin) or
# absurd highs. Taken at face value a 0 C passive trip backs the CPU off forever.
PLAUSIBLE_TRIP_C = (40.0, 150.0)


def implausible_trip(kind: str, temp_c: float | None) -> str | None:
    """Why a ``kind`` ("passive", "critical") trip at ``temp_c`` cannot be meant, or None when it can."""
    if temp_c is None:
        return None
    low, high = PLAUSIBLE_TRIP_C
    if temp_c <= 0.0:
        return (f"{kind} trip {temp_c:g} C ignored: unprogrammed (older kernels list unused x86_pkg_temp trips "
                "as 0 C)")
    if not low <= temp_c <= high:
        return f"{kind} trip {temp_c:g} C ignored: outside {low:g}-{high:g} C, where the trips of silicon lie"
    return None


def plausible_trips(passive_c: float | None, critical_c: float | None) -> tuple[float | None, float | None, str | None]:
    """(passive, critical, why some were dropped): trips that cannot be meant are dropped with a reason, and
    a passive trip at or above the critical one is dropped (the critical trip is the one the kernel acts on)."""
    notes = []
    why = implausible_trip("passive", passive_c)
    if why:
        passive_c = None
        notes.append(why)
    why = implausible_trip("critical", critical_c)
    if why:
        critical_c = None
        notes.append(why)
    if passive_c is not None and critical_c is not None and passive_c >= critical_c:
        notes.append(f"passive trip {passive_c:g} C ignored: not below the critical trip {critical_c:g} C")
        passive_c = None
    return passive_c, critical_c, "; ".join(notes) or None


def parse_trip(index: int, type_text: str | None, temp_text: str | None, hyst_text: str | None = None) -> TripPoint:
    """A trip point from the texts of its three files (pure)."""
    temp_c, reason = (None, "no trip_point temp file") if temp_text is None else parse_celsius(temp_text, what="trip")
    hyst_c = None
    if hyst_text is not None:
        raw, _ = parse_int(hyst_text)
        hyst_c = raw / 1000.0 if raw is not None and raw >= 0 else None
    return TripPoint(index, (type_text or "unknown").strip(), temp_c, hyst_c, reason)


def read_cooling_devices(root: Path = Path("/")) -> list[CoolingDevice]:
    devices = []
    for path in children(under(root, THERMAL), "cooling_device*"):
        devices.append(_read_cooling(path))
    return devices


def _read_cooling(path: Path) -> CoolingDevice:
    kind, kind_reason = read_text(path / "type")
    cur, cur_reason = read_int(path / "cur_state")
    top, top_reason = read_int(path / "max_state")
    reason = cur_reason or top_reason or kind_reason
    return CoolingDevice(path.name, kind, cur, top, reason)


def read_thermal_zones(root: Path = Path("/"), cooling: list[CoolingDevice] | None = None) -> list[ThermalZone]:
    """Every thermal zone below ``root``; [] when there are none (containers, most VMs). ``cooling``: the
    cooling devices if already read."""
    by_name = {c.name: c for c in (read_cooling_devices(root) if cooling is None else cooling)}
    return [read_zone(path, by_name) for path in children(under(root, THERMAL), "thermal_zone*")]


def read_zone(path: Path, cooling: dict[str, CoolingDevice] | None = None, trips: bool = True) -> ThermalZone:
    """One zone. ``cooling`` maps names to already-read cooling devices; without it the bound devices are read
    from the zone's sibling ``cooling_deviceN`` folders. ``trips=False`` skips the trip points (they rarely
    change; a sampler re-reads them now and then)."""
    kind, _ = read_text(path / "type")
    temp_text, reason = read_text(path / "temp")
    if temp_text is not None:
        value, reason = parse_celsius(temp_text, what=f"{path.name} temp")
    else:
        value = None
    label = f"{path.name}({kind})" if kind else path.name
    temperature = (Reading(label, "temperature", value, "C", None, str(path / "temp")) if value is not None
                   else missing(label, "temperature", "C", reason or "unknown", str(path / "temp")))
    found_trips = []
    for trip_type in children(path, "trip_point_*_type") if trips else ():
        index_text = trip_type.name[len("trip_point_"):-len("_type")]
        if not index_text.isdigit():
            continue
        type_text, _ = read_text(trip_type)
        temp, _ = read_text(path / f"trip_point_{index_text}_temp")
        hyst, _ = read_text(path / f"trip_point_{index_text}_hyst")
        found_trips.append(parse_trip(int(index_text), type_text, temp, hyst))
    mode = policy = None
    if trips:
        mode, _ = read_text(path / "mode")
        policy, _ = read_text(path / "policy")
    return ThermalZone(path.name, kind, temperature, tuple(found_trips), _bound_cooling(path, cooling), mode, policy)


def _bound_cooling(zone: Path, cooling: dict[str, CoolingDevice] | None) -> tuple[CoolingDevice, ...]:
    """Cooling devices bound to a zone: its ``cdevN`` entries are symlinks to ``cooling_deviceM``. Only the
    link's last component is used, so a link pointing outside ``root`` is never followed."""
    bound = []
    for link in children(zone, "cdev*"):
        if not link.name[4:].isdigit():
            continue  # cdev0_trip_point, cdev0_weight
        try:
            target = os.readlink(link)
        except OSError:
            continue
        name = Path(target).name
        if not name.startswith("cooling_device"):
            continue
        device = cooling.get(name) if cooling is not None else None
        if device is None and cooling is None and is_dir(zone.parent / name):
            device = _read_cooling(zone.parent / name)
        if device is not None and device not in bound:
            bound.append(device)
    return tuple(bound)
