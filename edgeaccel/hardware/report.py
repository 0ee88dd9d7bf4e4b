"""The survey's result, ``ProbeReport``, and its JSON form (schema "edgeaccel.probe/1", see schema.json
and docs/probe.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from .common import Accelerator, Problem
from .families import Family, PluginSeen, plugin_family
from .machine import Machine
from .runtimes import Runtimes
from .telemetry_sources import TelemetrySources

SCHEMA = "edgeaccel.probe/1"


@dataclass(frozen=True)
class ProbeReport:
    root: str
    machine: Machine
    accelerators: tuple[Accelerator, ...]
    runtimes: Runtimes
    telemetry: TelemetrySources
    problems: tuple[Problem, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)
    # every accelerator family looked for (families.FAMILIES order), with what was looked at and why absent
    families: tuple[Family, ...] = ()
    schema: str = SCHEMA

    def family(self, id: str) -> Family | None:
        return next((f for f in self.families if f.id == id), None)

    def with_plugins(self, plugins: Iterable[PluginSeen]) -> ProbeReport:
        """This report with the executor plug-ins family filled in from the registry (an empty list says
        none is installed). The survey itself does not import the registry."""
        family = plugin_family(plugins)
        families = tuple(family if f.id == family.id else f for f in self.families)
        return dataclasses.replace(self, families=families if family in families else (*families, family))

    def present_devices(self) -> frozenset[str]:
        """Device names executors use for what is here: "CPU" always, plus the ``devices`` of every
        accelerator whose hardware is present with its kernel driver ("CUDA" and "TensorRT" for an NVIDIA
        or Jetson GPU, "EdgeTPU" with "EdgeTPU:usb" / "EdgeTPU:pci", "NPU" for an Intel NPU, "GPU" for an
        Intel GPU, "TPU", "RKNPU", "Hailo", "QNN"). A device present but not usable by this user (node
        permissions) is listed: the executor that opens it reports why it cannot, with the fix."""
        names = {"CPU"}
        for acc in self.accelerators:
            if acc.present:
                names.update(acc.devices)
        return frozenset(names)

    def usable_devices(self) -> frozenset[str]:
        """Like ``present_devices`` but only accelerators this user can open now."""
        names = {"CPU"}
        for acc in self.accelerators:
            if acc.usable:
                names.update(acc.devices)
        return frozenset(names)

    def to_dict(self) -> dict:
        from .._version import __version__

        return {
            "schema": self.schema,
            "edgeaccel_version": __version__,
            "root": self.root,
            "machine": self.machine.to_dict(),
            "accelerators": [a.to_dict() for a in self.accelerators],
            "families": [f.to_dict() for f in self.families],
            "present_devices": sorted(self.present_devices()),
            "usable_devices": sorted(self.usable_devices()),
            "runtimes": self.runtimes.to_dict(),
            "telemetry": self.telemetry.to_dict(),
            "problems": [p.to_dict() for p in self.problems],
            "timings_ms": dict(self.timings_ms),
        }
