"""The CPU from /proc/cpuinfo: model, cores, and the instruction-set features inference kernels use.

x86 reports ``flags`` and ``model name``; arm64 reports ``Features`` and implementer/part numbers
(no model name), so the core names come from the part table of the kernel's
arch/arm64/include/asm/cputype.h.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..devfs import Root, as_tree

# Features that decide which kernels XNNPACK, oneDNN and OpenVINO can use; name -> the cpuinfo flag(s).
X86_ISA = {
    "fma": ("fma",), "f16c": ("f16c",), "avx2": ("avx2",), "avx512f": ("avx512f",),
    "avx512_vnni": ("avx512_vnni",), "avx_vnni": ("avx_vnni",), "avx512_bf16": ("avx512_bf16",),
    "avx512_fp16": ("avx512_fp16",), "amx_tile": ("amx_tile",), "amx_bf16": ("amx_bf16",), "amx_int8": ("amx_int8",),
}
# arm64 calls NEON "asimd"; 32-bit Arm kernels call it "neon".
ARM_ISA = {
    "neon": ("asimd", "neon"), "fp16": ("asimdhp", "fphp"), "dotprod": ("asimddp",), "i8mm": ("i8mm",),
    "bf16": ("bf16",), "sve": ("sve",), "sve2": ("sve2",),
}
# (implementer, part) -> core name; arch/arm64/include/asm/cputype.h
ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD42): "Cortex-A78AE", (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710", (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4A): "Neoverse-E1", (0x41, 0xD4B): "Cortex-A78C", (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD80): "Cortex-A520", (0x41, 0xD81): "Cortex-A720", (0x41, 0xD82): "Cortex-X4",
    (0x41, 0xD84): "Neoverse-V3", (0x41, 0xD8E): "Neoverse-N3", (0x4E, 0x004): "NVIDIA Carmel",
    (0xC0, 0xAC3): "Ampere-1",
}
ARM_IMPLEMENTERS = {0x41: "Arm", 0x42: "Broadcom", 0x4E: "NVIDIA", 0x51: "Qualcomm", 0x61: "Apple", 0xC0: "Ampere"}


@dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says (pure parse)."""

    arch: str | None  # "x86" or "arm", from which fields the kernel writes
    vendor: str | None
    model: str | None
    logical: int
    physical_cores: int | None
    core_types: dict[str, int] = field(default_factory=dict)
    isa: dict[str, bool] = field(default_factory=dict)
    board_model: str | None = None  # the Raspberry Pi kernel adds "Model : Raspberry Pi 5 ..."


@dataclass(frozen=True)
class Cpu:
    arch: str | None
    vendor: str | None
    model: str | None
    logical_cpus: int | None
    physical_cores: int | None
    online_cpus: int | None
    usable_cpus: int | None
    core_types: dict[str, int]
    isa: dict[str, bool]
    source: str
    reason: str | None = None
    board_model: str | None = None

    def to_dict(self) -> dict:
        return {"arch": self.arch, "vendor": self.vendor, "model": self.model, "logical_cpus": self.logical_cpus,
                "physical_cores": self.physical_cores, "online_cpus": self.online_cpus,
                "usable_cpus": self.usable_cpus, "core_types": dict(self.core_types), "isa": dict(self.isa),
                "source": self.source, "reason": self.reason}


def _blocks(text: str) -> list[dict[str, str]]:
    blocks, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip().lower()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> CpuInfo | None:
    """None when the text is not a cpuinfo of a kind we know."""
    blocks = _blocks(text)
    cpus = [b for b in blocks if "processor" in b and ("flags" in b or "features" in b or "model name" in b)]
    extra = {k: v for b in blocks for k, v in b.items()}
    if not cpus:
        return None
    first = cpus[0]
    if "flags" in first:
        flags = set(first["flags"].split())
        cores = {(b.get("physical id"), b.get("core id")) for b in cpus if "core id" in b}
        return CpuInfo(
            arch="x86", vendor=first.get("vendor_id"), model=first.get("model name"), logical=len(cpus),
            physical_cores=len(cores) or None,
            isa={name: any(f in flags for f in alts) for name, alts in X86_ISA.items()},
        )
    features = set(first.get("features", "").split())
    types: Counter[str] = Counter()
    vendors = set()
    for b in cpus:
        implementer, part = _int(b.get("cpu implementer")), _int(b.get("cpu part"))
        if implementer is None:
            continue
        vendors.add(ARM_IMPLEMENTERS.get(implementer, f"implementer {implementer:#x}"))
        types[ARM_PARTS.get((implementer, part), f"part {part:#x}" if part is not None else "unknown")] += 1
    by_count = sorted(types.items(), key=lambda kv: kv[1])
    model = " + ".join(f"{n}x {name}" for name, n in by_count) or first.get("model name")
    return CpuInfo(
        arch="arm", vendor=", ".join(sorted(vendors)) or None, model=model or extra.get("hardware"), logical=len(cpus),
        physical_cores=len(cpus), core_types=dict(types),
        isa={name: any(f in features for f in alts) for name, alts in ARM_ISA.items()},
        board_model=extra.get("model"),
    )


def parse_cpu_list(text: str) -> int | None:
    """Count of a kernel CPU list such as "0-3,6,8-9" (sysfs ``online``); None if it is not one."""
    count = 0
    for part in text.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return None
        count += hi - lo + 1
    return count or None


def read_cpu(root: Root = Path("/")) -> Cpu:
    tree = as_tree(root)
    read = tree.read("/proc/cpuinfo")
    online_read = tree.read("/sys/devices/system/cpu/online")
    online = parse_cpu_list(online_read.text) if online_read.text else None
    usable = None
    if tree.is_real:
        try:
            usable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            usable = None
    info = parse_cpuinfo(read.text) if read.text else None
    if info is None:
        reason = (f"/proc/cpuinfo {read.reason}" if read.reason
                  else "/proc/cpuinfo has no processor entries we recognize")
        return Cpu(None, None, None, None, None, online, usable, {}, {}, "/proc/cpuinfo", reason)
    return Cpu(info.arch, info.vendor, info.model, info.logical, info.physical_cores, online, usable,
               info.core_types, info.isa, "/proc/cpuinfo", None, info.board_model)
