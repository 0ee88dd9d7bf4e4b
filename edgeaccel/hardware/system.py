"""Operating system and kernel: /etc/os-release, /proc/sys/kernel/{osrelease,arch}."""

from __future__ import annotations

import platform
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, as_tree


@dataclass(frozen=True)
class OsInfo:
    name: str | None
    kernel: str | None
    arch: str | None
    python: str  # the interpreter running the probe (not necessarily one of the probed root)
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "kernel": self.kernel, "arch": self.arch, "python": self.python,
                "reason": self.reason}


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value lines with shell quoting (os-release(5))."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or not key or key.startswith("#"):
            continue
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value.strip("\"'")]
        values[key] = parts[0] if parts else ""
    return values


def read_os(root: Root = Path("/"), cpu_arch: str | None = None) -> OsInfo:
    tree = as_tree(root)
    release = tree.read("/etc/os-release")
    if not release:
        release = tree.read("/usr/lib/os-release")
    fields = parse_os_release(release.text or "")
    name = fields.get("PRETTY_NAME") or " ".join(filter(None, (fields.get("NAME"), fields.get("VERSION")))) or None
    kernel = tree.read("/proc/sys/kernel/osrelease").strip() or None
    arch = tree.read("/proc/sys/kernel/arch").strip() or None  # written by kernels since 6.1
    if arch is None and tree.is_real:
        arch = platform.machine() or None
    if arch is None and cpu_arch:
        arch = {"x86": "x86 (from /proc/cpuinfo)", "arm": "arm (from /proc/cpuinfo)"}.get(cpu_arch)
    missing = [what for what, value in (("/etc/os-release", name), ("/proc/sys/kernel/osrelease", kernel)) if not value]
    reason = f"not found or unreadable: {', '.join(missing)}" if missing else None
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return OsInfo(name, kernel, arch, python, reason)
