"""Cloud TPU VMs: Google's PCI vendor id 0x1ae0 with a TPU device id (the table of
AI-Hypercomputer/cloud-accelerator-diagnostics tpu_info/device.py and jax/_src/hardware_utils.py).
TPU v2-v4 chips are opened as /dev/accelN, v5e and later through VFIO as /dev/vfio/N. JAX and PyTorch/XLA
drive them through libtpu (pip install libtpu, or jax[tpu]).
"""

from __future__ import annotations

from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, Problem, node_verdict
from .families import among_pci
from ..devfs import Root, as_tree
from .pci import PciDevice, read_pci

GOOGLE_VENDOR = "0x1ae0"
# device id -> chip; 0x0027 is v2 or v3, told apart by subsystem_device 0x004e / 0x004f
TPU_CHIPS = {"0x005e": "v4", "0x0063": "v5e", "0x0062": "v5p", "0x006f": "v6e", "0x0076": "7x"}
VFIO_CHIPS = ("v5e", "v5p", "v6e", "7x")
LOOKED_FOR = (f"PCI vendor 0x1ae0 with a TPU device id ({', '.join(['0x0027', *TPU_CHIPS])}) in /sys/bus/pci/devices",
              "device nodes /dev/accelN (v2-v4) or /dev/vfio/N (v5e and later)", "the libtpu package")
NODE_FIX = "run as a user that may open the TPU device nodes (on Cloud TPU VMs the default user may), or " \
           "give them to the user's group with a udev rule"


def chip_of(dev: PciDevice) -> str | None:
    if dev.device == "0x0027":
        return {"0x004e": "v2", "0x004f": "v3"}.get(dev.subsystem_device or "", "v2/v3")
    return TPU_CHIPS.get(dev.device or "")


def read_tpu(root: Root = Path("/"), access: Access | None = None, pci: list[PciDevice] | None = None,
             libtpu: str | None = None, libtpu_reason: str | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    chips = [(dev, chip_of(dev)) for dev in pci if dev.vendor == GOOGLE_VENDOR and chip_of(dev)]
    looked = (Looked("cloud-tpu", LOOKED_FOR, f"no Google TPU (vendor 0x1ae0) {among_pci(pci)}"
                                            + (f"; {libtpu_reason}" if libtpu_reason else "")),)
    if not chips:
        return Found(looked=looked)
    accelerators = []
    for index, (dev, chip) in enumerate(chips):
        node_path = f"/dev/vfio/{index}" if chip in VFIO_CHIPS else f"/dev/accel{index}"
        nodes = (access.node(node_path),)
        usable, why, fix = node_verdict(nodes, NODE_FIX)
        if why and not nodes[0].exists:
            why = f"{node_path} is missing: the TPU driver ({'vfio-pci' if chip in VFIO_CHIPS else 'accel'}) " \
                  "has not made the device node"
        accelerators.append(Accelerator(
            "cloud-tpu", f"Cloud TPU {chip} chip {index}", ("TPU",), f"PCI {dev.location} (1ae0:{dev.device[2:]})",
            present=nodes[0].exists, usable=usable, reason=why or f"{node_path} read-write", fix=fix, nodes=nodes,
            details={"chip": chip, "bus": dev.address, "driver": dev.driver, "libtpu": libtpu,
                     "libtpu_reason": libtpu_reason}))
    problems = ()
    if libtpu is None and libtpu_reason and "not checked" not in libtpu_reason:
        problems = (Problem("Cloud TPU", f"{libtpu_reason}: JAX and PyTorch/XLA cannot use the TPU",
                            "pip install libtpu (or 'jax[tpu]')"),)
    return Found(tuple(accelerators), problems, looked)
