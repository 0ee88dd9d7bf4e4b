"""Intel NPU (Core Ultra): the intel_vpu driver (drivers/accel/ivpu) makes /dev/accel/accelN, seen as
/sys/class/accel/accelN whose parent's driver is intel_vpu. PCI ids from drivers/accel/ivpu/ivpu_drv.h.
The user-space driver (intel/linux-npu-driver) documents giving the node to group render
(SUBSYSTEM=="accel", KERNEL=="accel*", GROUP="render", MODE="0660").
"""

from __future__ import annotations

from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from .families import among_pci, class_devices
from ..devfs import Root, as_tree
from .pci import PciDevice, read_class, read_pci

INTEL_VENDOR = "0x8086"
NPU_PCI = {"0x7d1d": "Meteor Lake", "0xad1d": "Arrow Lake", "0x643e": "Lunar Lake", "0xb03e": "Panther Lake",
           "0xfd3e": "Wildcat Lake", "0xd71d": "Nova Lake"}
RENDER_FIX = ("sudo sh -c 'echo SUBSYSTEM==\\\"accel\\\", KERNEL==\\\"accel*\\\", GROUP=\\\"render\\\", "
              "MODE=\\\"0660\\\" > /etc/udev/rules.d/10-intel-vpu.rules'; sudo udevadm trigger; "
              "sudo usermod -aG render $USER, then log in again")
LOOKED_FOR = ("/sys/class/accel/accelN bound to the intel_vpu driver",
              f"Intel NPU PCI ids 8086:{{{','.join(d[2:] for d in NPU_PCI)}}} in /sys/bus/pci/devices",
              "device node /dev/accel/accelN")


def read_intel_npu(root: Root = Path("/"), access: Access | None = None, pci: list[PciDevice] | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    accelerators = []
    bound = set()
    accel = read_class(tree, "accel", r"accel\d+", "/dev/accel")
    for dev in accel:
        if dev.driver != "intel_vpu":
            continue
        generation = NPU_PCI.get(dev.device or "", "")
        nodes = (access.node(dev.node),)
        usable, why, fix = node_verdict(nodes, RENDER_FIX)
        bound.add(dev.device)
        accelerators.append(Accelerator(
            "intel-npu", f"Intel NPU{' (' + generation + ')' if generation else ''} {dev.name}", ("NPU",),
            f"{dev.sysfs} (driver intel_vpu)", present=True, usable=usable,
            reason=why or f"intel_vpu loaded, {dev.node} read-write", fix=fix, nodes=nodes,
            details={"pci_device": dev.device, "generation": generation or None}))
    for dev in pci:
        if dev.vendor != INTEL_VENDOR or dev.device not in NPU_PCI or dev.device in bound:
            continue
        state = ("intel_vpu is bound to it but made no /dev/accel node (see dmesg: firmware or kernel too old)"
                 if dev.driver == "intel_vpu" else
                 f"the intel_vpu driver does not have it ({'bound to ' + dev.driver if dev.driver else 'no driver'})")
        accelerators.append(Accelerator(
            "intel-npu", f"Intel NPU ({NPU_PCI[dev.device]}) at {dev.address}", ("NPU",), f"PCI {dev.location}",
            present=False, usable=False, reason=f"an Intel NPU is on the PCI bus but {state}",
            fix="use a kernel with intel_vpu (6.3 or later; sudo modprobe intel_vpu) and install the NPU "
                "firmware and user-space driver from https://github.com/intel/linux-npu-driver/releases",
            details={"pci_device": dev.device, "generation": NPU_PCI[dev.device]}))
    absent = (f"no device in /sys/class/accel is bound to intel_vpu ({class_devices(tree, 'accel', accel)}) and no "
              f"Intel NPU PCI id {among_pci(pci)}")
    return Found(tuple(accelerators), looked=(Looked("intel-npu", LOOKED_FOR, absent),))
