"""The shapes every accelerator reader returns: an ``Accelerator`` and the ``Problem``s found on the way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .access import DeviceNode


@dataclass(frozen=True)
class Problem:
    """Something missing or unusable, why, and what to do about it where something can be done."""

    subject: str
    reason: str
    fix: str | None = None

    def to_dict(self) -> dict:
        return {"subject": self.subject, "reason": self.reason, "fix": self.fix}


@dataclass(frozen=True)
class Accelerator:
    """One accelerator found on the device.

    ``present``: the hardware is there and its kernel driver has it (for a USB device: it enumerated).
    ``usable``: present, and this user can open its device nodes now. Missing user-space libraries
    (libedgetpu, a runtime build) do not clear it: they are the runtimes' part, reported as problems.
    ``devices``: the device names executors use for it ("CUDA", "EdgeTPU", "NPU", ...).
    """

    kind: str
    name: str
    devices: tuple[str, ...]
    found_by: str
    present: bool
    usable: bool
    reason: str
    fix: str | None = None
    nodes: tuple[DeviceNode, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def problem(self) -> Problem | None:
        if self.usable:
            return None
        return Problem(self.name, self.reason, self.fix)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "name": self.name, "devices": list(self.devices), "found_by": self.found_by,
            "present": self.present, "usable": self.usable, "reason": self.reason, "fix": self.fix,
            "nodes": [n.to_dict() for n in self.nodes], "details": dict(self.details),
        }


@dataclass(frozen=True)
class Looked:
    """What one reader looked at for one accelerator family (an id of ``families.FAMILIES``), and why it
    found none there (shown only when it found none)."""

    family: str
    looked_for: tuple[str, ...]
    absent: str


@dataclass(frozen=True)
class Found:
    """What one reader returns: accelerators, the problems that are not about one accelerator, and what it
    looked at for each family it covers (so that "none found" says what was looked for)."""

    accelerators: tuple[Accelerator, ...] = ()
    problems: tuple[Problem, ...] = ()
    looked: tuple[Looked, ...] = ()


def node_verdict(nodes: tuple[DeviceNode, ...], documented_fix: str) -> tuple[bool, str | None, str | None]:
    """(usable, why not, fix) from the device nodes an accelerator needs: all must exist and be read-write."""
    from .access import permission_fix

    for node in nodes:
        if not node.exists:
            return False, f"{node.path} is missing", documented_fix
        if not (node.readable and node.writable):
            want = "read and write" if not node.readable else "write"
            owner = f" (group {node.group}, mode {node.mode})" if node.group else ""
            return False, f"this user cannot {want} {node.path}{owner}", permission_fix(node, documented_fix)
    return True, None, None
