"""RAPL energy counters through powercap (``/sys/class/powercap/intel-rapl:N[:M]``, also ``intel-rapl-mmio``;
AMD Zen exposes its counters here too). ``energy_uj`` counts microjoules and wraps to 0 after
``max_energy_range_uj``. Since Linux 5.10 ``energy_uj`` is readable by root only (the Platypus side channel,
CVE-2020-8694); an unreadable counter is a reading with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .reading import Reading, missing
from .sysfs import children, read_int, read_text, under
from .units import to_si

POWERCAP = "/sys/class/powercap"


@dataclass(frozen=True)
class RaplZone:
    zone: str  # "intel-rapl:0", "intel-rapl:0:1"
    name: str | None  # "package-0", "core", "uncore", "dram", "psys"
    energy: Reading  # raw counter value in J (not yet wrap-corrected: feed it to an EnergyAccumulator)
    max_range_j: float | None

    @property
    def label(self) -> str:
        return f"rapl/{self.name or self.zone}"

    @property
    def is_package(self) -> bool:
        return (self.name or "").startswith("package")


def read_rapl(root: Path = Path("/")) -> list[RaplZone]:
    return [read_rapl_zone(path) for path in children(under(root, POWERCAP), "intel-rapl*:*")]


def read_rapl_zone(path: Path) -> RaplZone:
    name, _ = read_text(path / "name")
    label = f"rapl/{name or path.name}"
    raw, reason = read_int(path / "energy_uj")
    if raw is not None and raw < 0:
        raw, reason = None, f"{path / 'energy_uj'} is negative ({raw})"
    if raw is None and reason and "not readable" in reason:
        reason += "; since Linux 5.10 energy_uj is root-only (CVE-2020-8694): run as root or grant read access"
    top, _ = read_int(path / "max_energy_range_uj")
    range_j = to_si(top, "microjoule")[0] if top and top > 0 else None
    energy = (Reading(label, "energy", to_si(raw, "microjoule")[0], "J", None, str(path / "energy_uj"))
              if raw is not None else missing(label, "energy", "J", reason or "unknown", str(path / "energy_uj")))
    return RaplZone(path.name, name, energy, range_j)


def package_power_limit(root: Path = Path("/")) -> tuple[float | None, str]:
    """The CPU package's long-term power limit (PL1, about its TDP) in W and where it was read, or None and
    why. Unlike ``energy_uj`` the constraint files stay world-readable, so this is known without root."""
    for path in children(under(root, POWERCAP), "intel-rapl*:*"):
        name, _ = read_text(path / "name")
        if not (name or "").startswith("package"):
            continue
        for index in range(3):
            kind, _ = read_text(path / f"constraint_{index}_name")
            if kind not in (None, "long_term"):
                continue
            limit, _ = read_int(path / f"constraint_{index}_power_limit_uw")
            if limit and limit > 0:
                return limit / 1e6, f"{path.name} {name} long-term power limit"
    return None, f"no RAPL package power limit below {under(root, POWERCAP)}"
