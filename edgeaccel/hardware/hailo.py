"""Hailo-8/8L/10 over PCIe: the hailo_pci driver (hailo-ai/hailort-drivers linux/pcie) makes /dev/hailoN;
its udev rule (51-hailo-udev.rules) sets the node's permissions. Hailo's PCI vendor id is 0x1e60.
"""

from __future__ import annotations

import re
from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from .families import among_pci
from ..devfs import Root, as_tree
from .pci import PciDevice, read_pci

HAILO_VENDOR = "0x1e60"
RULE_FIX = "install the udev rule of the Hailo PCIe driver: sudo cp hailort-drivers/linux/pcie/51-hailo-udev.rules " \
           "/etc/udev/rules.d/ && sudo udevadm control --reload-rules && sudo udevadm trigger"
LOOKED_FOR = ("device nodes /dev/hailoN (made by the hailo_pci driver)", "PCI vendor 0x1e60 in /sys/bus/pci/devices")


def read_hailo(root: Root = Path("/"), access: Access | None = None, pci: list[PciDevice] | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    names, dev_reason = tree.listdir("/dev")
    nodes_found = [n for n in names if re.fullmatch(r"hailo\d+", n)]
    accelerators = []
    for name in nodes_found:
        nodes = (access.node(f"/dev/{name}"),)
        usable, why, fix = node_verdict(nodes, RULE_FIX)
        accelerators.append(Accelerator(
            "hailo", f"Hailo accelerator {name}", ("Hailo",), f"/dev/{name}", present=True, usable=usable,
            reason=why or f"hailo_pci loaded, /dev/{name} read-write", fix=fix, nodes=nodes,
            details={"runtime": "HailoRT"}))
    if not accelerators:
        for dev in pci:
            if dev.vendor == HAILO_VENDOR:
                accelerators.append(Accelerator(
                    "hailo", f"Hailo accelerator at {dev.address}", ("Hailo",), f"PCI {dev.location}", present=False,
                    usable=False, reason="a Hailo device is on the PCI bus but there is no /dev/hailo* node "
                    f"({'driver ' + dev.driver if dev.driver else 'no driver bound'})",
                    fix="install hailort-pcie-driver (or build hailo-ai/hailort-drivers) matching your HailoRT "
                        "version, then sudo modprobe hailo_pci",
                    details={"pci_device": dev.device}))
    absent = f"{dev_reason or 'no /dev/hailoN node'} and no PCI device of vendor 0x1e60 {among_pci(pci)}"
    return Found(tuple(accelerators), looked=(Looked("hailo", LOOKED_FOR, absent),))
