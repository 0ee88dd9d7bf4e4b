"""Intel integrated GPU for OpenVINO's GPU plugin: a DRM render node (/dev/dri/renderD128, seen as
/sys/class/drm/renderDN) whose driver is i915 or xe. Distributions give render nodes to group render;
OpenVINO also needs the compute runtime (intel-opencl-icd), which it reports as a missing GPU device.
"""

from __future__ import annotations

from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from .families import class_devices
from ..devfs import Root, as_tree
from .pci import read_class

INTEL_GPU_DRIVERS = ("i915", "xe")
RENDER_GROUP_FIX = "add the user to group 'render': sudo usermod -aG render $USER, then log in again"
LOOKED_FOR = (f"DRM render nodes /sys/class/drm/renderDN driven by {' or '.join(INTEL_GPU_DRIVERS)}",
              "device node /dev/dri/renderDN")


def read_intel_gpu(root: Root = Path("/"), access: Access | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    accelerators = []
    render = read_class(tree, "drm", r"renderD\d+", "/dev/dri")
    for dev in render:
        if dev.driver not in INTEL_GPU_DRIVERS:
            continue
        nodes = (access.node(dev.node),)
        usable, why, fix = node_verdict(nodes, RENDER_GROUP_FIX)
        accelerators.append(Accelerator(
            "intel-gpu", f"Intel GPU {dev.name}", ("GPU",), f"{dev.sysfs} (driver {dev.driver})", present=True,
            usable=usable, reason=why or f"{dev.driver} loaded, {dev.node} read-write", fix=fix, nodes=nodes,
            details={"driver": dev.driver, "pci_device": dev.device}))
    absent = f"no render node is driven by i915 or xe ({class_devices(tree, 'drm', render)})"
    return Found(tuple(accelerators), looked=(Looked("intel-gpu", LOOKED_FOR, absent),))
