"""Huawei Ascend NPUs (Atlas 200/300/500 boards and cards: Ascend 310, 310B, 310P, 910), as the Ascend driver
lays them out:

- /dev/davinciN, one per NPU chip, and the driver's shared nodes /dev/davinci_manager, /dev/devmm_svm and
  /dev/hisi_hdc: a process needs all of them (every container recipe that passes an NPU through, vLLM-Ascend's
  and MindIE's among them, hands over exactly these four);
- the nodes belong to the driver's run user and group HwHiAiUser (the driver package's default
  --install-username/--install-usergroup), mode 0660: another user joins that group;
- the driver package writes /usr/local/Ascend/driver/version.info, key=value lines ("Version=24.1.rc1",
  "ascendhal_version=...", "Innerversion=...");
- npu-smi (/usr/local/bin/npu-smi, or /usr/local/sbin) is its management tool; ``telemetry.npu_smi`` reads it;
- on PCI, vendor 0x19e5 (Huawei), class 0x1200 (processing accelerator), devices 0xd100 (Ascend 310), 0xd500
  (310P), 0xd801 (910), 0xd802 (910B), 0xd803 (910 A3), as Ascend's own log-collection script names them.
  The Ascend 310B of an Atlas 200I DK A2 is a SoC, not a PCI device: there only the nodes say it is there.

ONNX Runtime's CANN provider (onnxruntime-cann) reaches them as device "CANN".
"""

from __future__ import annotations

import re
from pathlib import Path

from .access import Access
from .common import Accelerator, Found, Looked, node_verdict
from .families import among_pci
from ..devfs import Root, as_tree, natural_key
from .pci import PciDevice, read_pci

HUAWEI_VENDOR = "0x19e5"
ASCEND_PCI = {"0xd100": "Ascend 310", "0xd500": "Ascend 310P", "0xd801": "Ascend 910", "0xd802": "Ascend 910B",
              "0xd803": "Ascend 910 (A3)"}
SHARED_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
DRIVER_VERSION_FILE = "/usr/local/Ascend/driver/version.info"
NPU_SMI_PATHS = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")
GROUP = "HwHiAiUser"
GROUP_FIX = (f"add the user to group {GROUP} (the group the Ascend driver gives its nodes): "
             f"sudo usermod -aG {GROUP} $USER, then log in again")
DRIVER_FIX = ("install the Ascend NPU driver and then its firmware (Ascend-hdk-<chip>-npu-driver_*.run --full "
              "--install-for-all, then Ascend-hdk-<chip>-npu-firmware_*.run --full) and reboot")
LOOKED_FOR = ("device nodes /dev/davinciN and the driver's /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc",
              f"the driver's version file {DRIVER_VERSION_FILE}",
              f"npu-smi at {' or '.join(NPU_SMI_PATHS)}",
              "PCI vendor 0x19e5 (Huawei) devices 0xd100/0xd500/0xd801/0xd802/0xd803 in /sys/bus/pci/devices")


def parse_version_info(text: str) -> dict[str, str]:
    """version.info's key=value lines -> dict (blank and malformed lines skipped)."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip():
            found[key.strip()] = value.strip()
    return found


def driver_version(fields: dict[str, str]) -> str | None:
    return fields.get("Version") or fields.get("package_version")


def read_ascend_npu(root: Root = Path("/"), access: Access | None = None,
                    pci: list[PciDevice] | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    names, dev_reason = tree.listdir("/dev")
    chips = sorted((n for n in names if re.fullmatch(r"davinci\d+", n)), key=natural_key)
    read = tree.read(DRIVER_VERSION_FILE)
    fields = parse_version_info(read.text or "")
    version = driver_version(fields)
    npu_smi = next((p for p in NPU_SMI_PATHS if tree.exists(p)), None)
    cards = [d for d in pci if d.vendor == HUAWEI_VENDOR and d.device in ASCEND_PCI]
    model = ASCEND_PCI[cards[0].device] if cards else None
    details = {"driver_version": version, "version_file": DRIVER_VERSION_FILE if read.text else None,
               "npu_smi": npu_smi, "runtime": "ONNX Runtime's CANN provider (onnxruntime-cann)",
               "pci": [f"{d.address} {ASCEND_PCI[d.device]}" for d in cards]}
    accelerators = []
    shared = tuple(access.node(p) for p in SHARED_NODES)
    missing_shared = [n.path for n in shared if not n.exists]
    for chip in chips:
        node = access.node(f"/dev/{chip}")
        nodes = (node, *shared)
        name = f"Huawei {model or 'Ascend NPU'} /dev/{chip}"
        if missing_shared:
            usable, why, fix = False, (f"/dev/{chip} is there but the driver's {', '.join(missing_shared)} "
                                       f"{'is' if len(missing_shared) == 1 else 'are'} missing"), DRIVER_FIX
        else:
            usable, why, fix = node_verdict(nodes, GROUP_FIX)  # the group owning the nodes, else HwHiAiUser
        accelerators.append(Accelerator(
            "ascend-npu", name, ("CANN",), f"/dev/{chip}", present=True, usable=usable,
            reason=why or f"Ascend driver {version or '(version file missing)'}, /dev/{chip} and the driver's nodes "
            "read-write", fix=fix, nodes=nodes, details={**details, "chip": chip}))
    if not accelerators and cards:
        card = cards[0]
        installed = f"; the driver package is installed (version {version}) but made no node" if version else ""
        accelerators.append(Accelerator(
            "ascend-npu", f"Huawei {model} at {card.address}", ("CANN",), f"PCI {card.location}", present=False,
            usable=False, reason=(f"an {model} is on the PCI bus but there is no /dev/davinciN "
                                  f"({'driver ' + card.driver if card.driver else 'no driver bound'}{installed})"),
            fix=DRIVER_FIX, details=details))
    said = f"says driver {version}" if version else (read.reason or 'is missing')
    absent = (f"{dev_reason or 'no /dev/davinciN node'}, {DRIVER_VERSION_FILE} {said}, and no Huawei Ascend "
              f"device {among_pci(pci)}")
    return Found(tuple(accelerators), looked=(Looked("ascend-npu", LOOKED_FOR, absent),))

