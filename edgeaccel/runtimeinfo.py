"""One runtime on this machine as ``edgeaccel probe`` reports it: an executor's ``survey()`` makes it, the probe
report carries it. Kept apart from both so that neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuntimeInfo:
    """One runtime on this machine: installed, usable, which devices it reaches, and why not."""

    name: str  # the registry's name: litert, onnxruntime, openvino, a plug-in's runtime
    installed: bool
    version: str | None
    package: str | None
    usable: bool
    reaches: tuple[str, ...]  # device names as executors use them
    reason: str
    fix: str | None = None
    import_ms: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    plugin: str | None = None  # the distribution of a third-party executor

    def to_dict(self) -> dict:
        return {"name": self.name, "installed": self.installed, "version": self.version, "package": self.package,
                "usable": self.usable, "reaches": list(self.reaches), "reason": self.reason, "fix": self.fix,
                "import_ms": self.import_ms, "details": dict(self.details), "plugin": self.plugin}
