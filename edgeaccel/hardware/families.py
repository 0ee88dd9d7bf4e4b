"""Every accelerator family the probe looks for, what it looked at, and why each is absent or present.

A survey that finds nothing must still say what "nothing" covers: a user on a machine without accelerators
(or with one the probe missed) needs to see that the CUDA driver files, the Coral USB ids, the apex driver
and so on were looked for, and what was there instead. Each reader says what it looked at and, when it
found nothing of its family, why (a ``Looked`` in its ``Found``); ``summarize`` joins that with the
accelerators found into one ``Family`` per entry of ``FAMILIES``, in that order.

Executor plug-ins are a family too. Their entries come from the executor registry, which the probe does not
import (it would import plug-in modules); the registry hands them in with ``ProbeReport.with_plugins``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .common import Accelerator, Looked
from ..devfs import Tree
from .pci import PCI_DEVICES, ClassDevice, PciDevice

# status, best first: a usable accelerator; one present that this user cannot open; hardware seen (on a bus,
# in the device tree) without its driver; nothing of the family; not looked at (the reader failed, or the
# plug-ins the registry has not handed in).
STATUSES = ("usable", "present", "no-driver", "absent", "not-checked")


@dataclass(frozen=True)
class FamilySpec:
    id: str
    name: str
    devices: tuple[str, ...]  # device names executors use for it


FAMILIES = (
    FamilySpec("cuda-gpu", "NVIDIA CUDA GPU", ("CUDA", "TensorRT")),
    FamilySpec("jetson", "NVIDIA Jetson integrated GPU", ("CUDA", "TensorRT")),
    FamilySpec("edgetpu-usb", "Coral Edge TPU (USB)", ("EdgeTPU", "EdgeTPU:usb")),
    FamilySpec("edgetpu-pcie", "Coral Edge TPU (PCIe/M.2)", ("EdgeTPU", "EdgeTPU:pci")),
    FamilySpec("intel-npu", "Intel NPU", ("NPU",)),
    FamilySpec("intel-gpu", "Intel GPU", ("GPU",)),
    FamilySpec("rockchip-npu", "Rockchip NPU", ("RKNPU",)),
    FamilySpec("hailo", "Hailo", ("Hailo",)),
    FamilySpec("qualcomm-npu", "Qualcomm NPU (Hexagon DSP)", ("QNN",)),
    FamilySpec("ascend-npu", "Huawei Ascend NPU", ("CANN",)),
    FamilySpec("cloud-tpu", "Cloud TPU", ("TPU",)),
    FamilySpec("plugins", "executor plug-ins", ()),
)
PLUGIN_GROUP = "edgeaccel.executors"  # the entry-point group of executor plug-ins (executors/registry.py)


@dataclass(frozen=True)
class Family:
    """One family: ``status`` (one of STATUSES), ``reason`` (why absent, or what was found), what was
    ``looked_for``, and the names of what was ``found`` (accelerators, or plug-ins)."""

    id: str
    name: str
    devices: tuple[str, ...]
    status: str
    reason: str
    looked_for: tuple[str, ...]
    found: tuple[str, ...] = ()
    fix: str | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "devices": list(self.devices), "status": self.status,
                "reason": self.reason, "looked_for": list(self.looked_for), "found": list(self.found),
                "fix": self.fix}


@dataclass(frozen=True)
class PluginSeen:
    """One executor plug-in as the registry sees it, for ``ProbeReport.with_plugins``."""

    name: str
    devices: tuple[str, ...]
    available: bool
    reason: str
    fix: str | None = None


def family_of(acc: Accelerator) -> str:
    """The FAMILIES id of an accelerator (its kind, with Edge TPUs split by bus)."""
    if acc.kind == "edgetpu":
        return "edgetpu-usb" if "EdgeTPU:usb" in acc.devices else "edgetpu-pcie"
    return {"nvidia-gpu": "cuda-gpu", "jetson-gpu": "jetson", "qualcomm-dsp": "qualcomm-npu"}.get(acc.kind, acc.kind)


def among_pci(pci: list[PciDevice]) -> str:
    """ "among the 7 PCI devices in /sys/bus/pci/devices", or that there are none (an Arm board, a fake tree)."""
    if not pci:
        return f"(no PCI devices are listed in {PCI_DEVICES})"
    return f"among the {len(pci)} PCI devices in {PCI_DEVICES}"


def class_devices(tree: Tree, cls: str, devices: list[ClassDevice]) -> str:
    """What /sys/class/<cls> holds instead of the device looked for: its devices and their drivers, or why
    there are none."""
    if devices:
        return "it has " + ", ".join(f"{d.name} (driver {d.driver or 'none'})" for d in devices)
    _, reason = tree.listdir(f"/sys/class/{cls}")
    return reason or f"/sys/class/{cls} has none"


def summarize(accelerators: Iterable[Accelerator], looked: Iterable[Looked]) -> tuple[Family, ...]:
    """One Family per FAMILIES entry; plug-ins are "not-checked" until the registry hands them in."""
    by_family: dict[str, list[Accelerator]] = {}
    for acc in accelerators:
        by_family.setdefault(family_of(acc), []).append(acc)
    looked_by = {item.family: item for item in looked}
    families = []
    for spec in FAMILIES:
        if spec.id == "plugins":
            families.append(plugin_family(None))
            continue
        seen = looked_by.get(spec.id)
        looked_for = seen.looked_for if seen else ()
        found = by_family.get(spec.id, [])
        if found:
            families.append(_found(spec, found, looked_for))
        elif seen is None:  # the reader failed before saying what it looked at; the problem says why
            families.append(Family(spec.id, spec.name, spec.devices, "not-checked",
                                   "its reader failed (see problems)", ()))
        else:
            families.append(Family(spec.id, spec.name, spec.devices, "absent", seen.absent, looked_for))
    return tuple(families)


def _found(spec: FamilySpec, found: list[Accelerator], looked_for: tuple[str, ...]) -> Family:
    if any(a.usable for a in found):
        status = "usable"
    elif any(a.present for a in found):
        status = "present"
    else:
        status = "no-driver"
    reason = "; ".join(f"{a.name}: {a.reason}" for a in found)
    fix = next((a.fix for a in found if not a.usable and a.fix), None) if status != "usable" else None
    return Family(spec.id, spec.name, spec.devices, status, reason, looked_for, tuple(a.name for a in found), fix)


def plugin_family(plugins: Iterable[PluginSeen] | None) -> Family:
    """The plug-ins family: ``None`` before the registry has been asked, else its plug-ins."""
    spec = next(s for s in FAMILIES if s.id == "plugins")
    looked_for = (f"executor plug-ins: installed distributions with entry points in group {PLUGIN_GROUP!r}",)
    if plugins is None:
        return Family(spec.id, spec.name, spec.devices, "not-checked",
                      "listed by the executor registry, which the hardware survey does not import", looked_for)
    plugins = list(plugins)
    devices = tuple(dict.fromkeys(d for p in plugins for d in p.devices))
    if not plugins:
        return Family(spec.id, spec.name, devices, "absent",
                      f"no installed distribution declares an executor in group {PLUGIN_GROUP!r}", looked_for)
    status = "usable" if any(p.available for p in plugins) else "present"
    reason = "; ".join(f"{p.name} ({', '.join(p.devices) or 'no devices'}): "
                       f"{'available' if p.available else 'not available'}: {p.reason}" for p in plugins)
    fix = next((p.fix for p in plugins if not p.available and p.fix), None) if status != "usable" else None
    return Family(spec.id, spec.name, devices, status, reason, looked_for, tuple(p.name for p in plugins), fix)
