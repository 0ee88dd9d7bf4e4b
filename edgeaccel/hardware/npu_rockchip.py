"""Rockchip NPU (RK3588, RK3576, RK3568...), through either kernel driver:

- Rockchip's vendor driver rknpu (platform driver "RKNPU", rknpu_drv.c): built for DRM it makes a DRM device
  ("[drm] Initialized rknpu 0.9.x ... for fdab0000.npu"), so a /sys/class/drm/renderDN whose driver is
  RKNPU; built for DMA heaps it makes the misc device /dev/rknpu. Its version is in
  /sys/kernel/debug/rknpu/version (or /proc/rknpu/version): "RKNPU driver: v0.9.6". This is the driver
  Rockchip's RKNN runtime (librknnrt, rknn-toolkit-lite2) needs.
- the mainline accel driver rocket (Documentation/accel/rocket, Linux 6.18+): /dev/accel/accelN per NPU
  core, driver "rocket", used through Mesa's Teflon TFLite delegate.
The device tree describes the NPU as npu@fdab0000 with compatible "rockchip,rk3588-rknpu" (vendor binding)
or "rockchip,rk3588-rknn-core" (mainline binding); a node with status "disabled" is switched off.
"""

from __future__ import annotations

import re
from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from ..devfs import Root, Tree, as_tree
from .pci import read_class

RENDER_FIX = "add the user to group 'render' (or the group owning the node): sudo usermod -aG render $USER"
RKNPU_VERSION_FILES = ("/sys/kernel/debug/rknpu/version", "/proc/rknpu/version")
LOOKED_FOR = ("device-tree nodes npu@* compatible with rknpu or rknn-core (/proc/device-tree)",
              "the vendor rknpu driver: a /sys/class/drm render node driven by RKNPU, or /sys/class/misc/rknpu",
              "the mainline rocket driver: /sys/class/accel/accelN driven by rocket",
              f"the rknpu driver version in {' or '.join(RKNPU_VERSION_FILES)}")


def parse_rknpu_version(text: str) -> str | None:
    m = re.search(r"v(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def _dt_npu_nodes(tree: Tree) -> list[tuple[str, str, str | None]]:
    """(node, compatible, status) for device-tree nodes of a Rockchip NPU."""
    found = []
    for base in ("/proc/device-tree", "/sys/firmware/devicetree/base"):
        names, reason = tree.listdir(base)
        for name in names:
            if not name.startswith("npu@"):
                continue
            compatible = (tree.read(f"{base}/{name}/compatible").text or "").replace("\x00", " ").strip()
            if "rknpu" in compatible or "rknn" in compatible:
                status = tree.read(f"{base}/{name}/status").strip()
                found.append((f"{base}/{name}", compatible, status or None))
        if not reason:
            break
    return found


def _version(tree: Tree) -> tuple[str | None, str]:
    reasons = []
    for path in RKNPU_VERSION_FILES:
        read = tree.read(path)
        if read.text:
            return parse_rknpu_version(read.text), path
        reasons.append(f"{path} {read.reason}")
    return None, "; ".join(reasons)


def read_rockchip_npu(root: Root = Path("/"), access: Access | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    accelerators = []
    dt_nodes = _dt_npu_nodes(tree)
    version, version_source = _version(tree)
    render_nodes = read_class(tree, "drm", r"renderD\d+", "/dev/dri")
    vendor_nodes = [d for d in render_nodes if (d.driver or "").lower() == "rknpu"]
    misc = tree.exists("/sys/class/misc/rknpu")
    if vendor_nodes or misc:
        node_path = vendor_nodes[0].node if vendor_nodes else "/dev/rknpu"
        nodes = (access.node(node_path),)
        usable, why, fix = node_verdict(nodes, RENDER_FIX)
        found_by = vendor_nodes[0].sysfs + " (driver RKNPU)" if vendor_nodes else "/sys/class/misc/rknpu"
        accelerators.append(Accelerator(
            "rockchip-npu", "Rockchip NPU (rknpu driver)", ("RKNPU",), found_by, present=True, usable=usable,
            reason=why or f"rknpu {version or '(version unknown)'} loaded, {node_path} read-write", fix=fix,
            nodes=nodes, details={"driver": "rknpu", "driver_version": version, "version_source": version_source,
                                  "runtime": "RKNN (librknnrt, rknn-toolkit-lite2)",
                                  "device_tree": [c for _, c, _ in dt_nodes]}))
    accel = read_class(tree, "accel", r"accel\d+", "/dev/accel")
    rocket = [d for d in accel if d.driver == "rocket"]
    if rocket:
        nodes = tuple(access.node(d.node) for d in rocket)
        usable, why, fix = node_verdict(nodes, RENDER_FIX)
        accelerators.append(Accelerator(
            "rockchip-npu", f"Rockchip NPU (rocket driver, {len(rocket)} cores)", ("RKNPU",),
            ", ".join(d.sysfs for d in rocket) + " (driver rocket)", present=True, usable=usable,
            reason=why or "rocket loaded, nodes read-write", fix=fix, nodes=nodes,
            details={"driver": "rocket", "runtime": "Mesa Teflon TFLite delegate (libteflon.so)",
                     "device_tree": [c for _, c, _ in dt_nodes]}))
    if not accelerators and dt_nodes:
        node, compatible, status = dt_nodes[0]
        disabled = status == "disabled"
        accelerators.append(Accelerator(
            "rockchip-npu", "Rockchip NPU", ("RKNPU",), f"{node} ({compatible})", present=False, usable=False,
            reason=("the device tree describes the NPU but switches it off (status \"disabled\")" if disabled
                    else "the device tree describes the NPU but no NPU driver (rknpu or rocket) has it"),
            fix=("enable the NPU with the board's device-tree overlay (e.g. armbian-config or "
                 "/boot/extlinux overlays), then reboot" if disabled else
                 "use the vendor kernel with the rknpu driver (for RKNN) or Linux 6.18+ with rocket (for Mesa)"),
            details={"device_tree": [c for _, c, _ in dt_nodes], "status": status}))
    drivers = {d.driver for d in render_nodes + accel if d.driver}
    absent = ("the device tree describes no Rockchip NPU (no npu@* node compatible with rknpu or rknn-core), no "
              "render node is driven by RKNPU, there is no /sys/class/misc/rknpu and no accel device is driven by "
              f"rocket{' (drivers here: ' + ', '.join(sorted(drivers)) + ')' if drivers else ''}")
    return Found(tuple(accelerators), looked=(Looked("rockchip-npu", LOOKED_FOR, absent),))
