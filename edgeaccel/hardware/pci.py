"""PCI devices and character-device classes from sysfs, shared by the accelerator readers.

/sys/bus/pci/devices/<address>/{vendor,device,class,subsystem_device} hold hex ids such as "0x10de", and
the ``driver`` symlink names the bound driver (Documentation/ABI/testing/sysfs-bus-pci). Class
devices (/sys/class/<class>/<name>) link ``device`` to their parent, whose ``driver`` link names the
driver that made the node in /dev.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, Tree, as_tree

PCI_DEVICES = "/sys/bus/pci/devices"


@dataclass(frozen=True)
class PciDevice:
    address: str
    vendor: str | None  # "0x10de", lower case
    device: str | None
    pci_class: str | None  # "0x030200"
    subsystem_device: str | None
    driver: str | None

    @property
    def location(self) -> str:
        return f"{PCI_DEVICES}/{self.address}"


def parse_hex_id(text: str | None) -> str | None:
    """ "0x10DE\\n" -> "0x10de"; anything else -> None."""
    if text is None:
        return None
    value = text.strip().lower()
    return value if re.fullmatch(r"0x[0-9a-f]{1,8}", value) else None


def read_pci(root: Root = Path("/")) -> tuple[list[PciDevice], str | None]:
    tree = as_tree(root)
    names, reason = tree.listdir(PCI_DEVICES)
    devices = []
    for name in names:
        base = f"{PCI_DEVICES}/{name}"
        devices.append(PciDevice(
            address=name,
            vendor=parse_hex_id(tree.read(f"{base}/vendor").text),
            device=parse_hex_id(tree.read(f"{base}/device").text),
            pci_class=parse_hex_id(tree.read(f"{base}/class").text),
            subsystem_device=parse_hex_id(tree.read(f"{base}/subsystem_device").text),
            driver=tree.link_name(f"{base}/driver"),
        ))
    return devices, reason


@dataclass(frozen=True)
class ClassDevice:
    """A node of a device class: name ("accel0"), its /dev path, the driver behind it and its PCI ids."""

    name: str
    node: str
    driver: str | None
    vendor: str | None
    device: str | None
    sysfs: str


def read_class(tree: Tree, cls: str, pattern: str, dev_dir: str) -> list[ClassDevice]:
    """Devices of /sys/class/<cls> whose name matches ``pattern``; their nodes are <dev_dir>/<name>."""
    names, _ = tree.listdir(f"/sys/class/{cls}")
    found = []
    for name in names:
        if not re.fullmatch(pattern, name):
            continue
        base = f"/sys/class/{cls}/{name}/device"
        found.append(ClassDevice(
            name=name,
            node=f"{dev_dir}/{name}",
            driver=tree.link_name(f"{base}/driver"),
            vendor=parse_hex_id(tree.read(f"{base}/vendor").text),
            device=parse_hex_id(tree.read(f"{base}/device").text),
            sysfs=f"/sys/class/{cls}/{name}",
        ))
    return found
