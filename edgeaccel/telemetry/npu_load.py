"""How busy an NPU is, from what its kernel driver exposes (read below a root, never raising):

- Intel NPU (intel_vpu / ivpu, drivers/accel/ivpu/ivpu_sysfs.c): ``npu_busy_time_us`` on the PCI device, seen
  as /sys/class/accel/accelN/device/npu_busy_time_us, is the time the NPU spent executing jobs since the driver
  loaded; the busy share is its difference over wall time. The driver asks to read it at most once a second
  (more often may slow job submission), so readers keep to NPU_BUSY_MIN_PERIOD_S.
- Rockchip NPU (vendor rknpu driver): /sys/kernel/debug/rknpu/load (debugfs, root only) or /proc/rknpu/load,
  text such as ``NPU load:  Core0:  5%, Core1:  0%, Core2:  0%,`` (RK3588) or ``NPU load:  12%`` (one core).
"""

from __future__ import annotations

import re

from ..hardware.fs import Tree

INTEL_NPU_CLASS = "/sys/class/accel"
INTEL_NPU_BUSY = "device/npu_busy_time_us"
NPU_BUSY_MIN_PERIOD_S = 1.0
RKNPU_LOAD_FILES = ("/sys/kernel/debug/rknpu/load", "/proc/rknpu/load")
_CORE = re.compile(r"Core(\d+):\s*(\d+(?:\.\d+)?)\s*%")
_SINGLE = re.compile(r"NPU load:\s*(\d+(?:\.\d+)?)\s*%")


def read_intel_npu_busy(tree: Tree) -> tuple[dict[str, int], str | None]:
    """({"accel0": busy microseconds, ...}, None), or ({}, why there is none)."""
    names, reason = tree.listdir(INTEL_NPU_CLASS)
    if reason:
        return {}, f"{reason} (no accel device: no Intel NPU driver loaded)"
    found: dict[str, int] = {}
    reasons = []
    for name in names:
        if not re.fullmatch(r"accel\d+", name):
            continue
        path = f"{INTEL_NPU_CLASS}/{name}/{INTEL_NPU_BUSY}"
        read = tree.read(path)
        if read.text is None:
            reasons.append(f"{path} {read.reason}")
            continue
        try:
            found[name] = int(read.text.strip())
        except ValueError:
            reasons.append(f"{path} holds {read.text.strip()[:40]!r}, not a number of microseconds")
    if found:
        return found, None
    if not reasons:
        return {}, f"no accelN device in {INTEL_NPU_CLASS}"
    return {}, "; ".join(reasons) + " (an Intel NPU needs intel_vpu from Linux 6.11 for npu_busy_time_us)"


def parse_rknpu_load(text: str) -> dict[str, float]:
    """{"core0": 5.0, ...} or {"npu": 12.0} for a one-core NPU; {} when the text is neither."""
    cores = {f"core{n}": float(v) for n, v in _CORE.findall(text)}
    if cores:
        return cores
    single = _SINGLE.search(text)
    return {"npu": float(single.group(1))} if single else {}


def read_rknpu_load(tree: Tree) -> tuple[dict[str, float], str | None, str | None]:
    """(load per core, the file it came from, None) or ({}, None, why there is none)."""
    reasons = []
    for path in RKNPU_LOAD_FILES:
        read = tree.read(path)
        if read.text is None:
            reasons.append(f"{path} {read.reason}")
            continue
        load = parse_rknpu_load(read.text)
        if load:
            return load, path, None
        reasons.append(f"{path} holds {read.text.strip()[:60]!r}, not 'NPU load: ...%'")
    if all(r.endswith(" missing") for r in reasons):
        return {}, None, f"neither {' nor '.join(RKNPU_LOAD_FILES)} exists (no rknpu driver)"
    denied = any("permission denied" in r for r in reasons)
    return {}, None, "; ".join(reasons) + (" (debugfs is readable by root only: run as root)" if denied else "")
