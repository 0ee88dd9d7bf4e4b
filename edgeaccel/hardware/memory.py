"""Memory from /proc/meminfo (kB) and the cgroup v2 limit a container runs under."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, as_tree


@dataclass(frozen=True)
class Memory:
    total_mib: int | None
    available_mib: int | None
    cgroup_limit_mib: int | None
    source: str
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"total_mib": self.total_mib, "available_mib": self.available_mib,
                "cgroup_limit_mib": self.cgroup_limit_mib, "source": self.source, "reason": self.reason}


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> kB for lines like "MemTotal:       24684092 kB"."""
    values = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and parts and parts[0].isdigit():
            values[key.strip()] = int(parts[0])
    return values


def parse_cgroup_max(text: str) -> int | None:
    """memory.max holds bytes or "max" (no limit)."""
    value = text.strip()
    return int(value) // (1 << 20) if value.isdigit() else None


def read_memory(root: Root = Path("/")) -> Memory:
    tree = as_tree(root)
    read = tree.read("/proc/meminfo")
    limit_read = tree.read("/sys/fs/cgroup/memory.max")
    limit = parse_cgroup_max(limit_read.text) if limit_read.text else None
    fields = parse_meminfo(read.text or "")
    if "MemTotal" not in fields:
        why = f"/proc/meminfo {read.reason}" if read.reason else "/proc/meminfo has no MemTotal line"
        return Memory(None, None, limit, "/proc/meminfo", why)
    available = fields.get("MemAvailable")
    return Memory(fields["MemTotal"] // 1024, available // 1024 if available is not None else None, limit,
                  "/proc/meminfo")
