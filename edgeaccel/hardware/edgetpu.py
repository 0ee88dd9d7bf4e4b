"""Coral Edge TPU over USB and over PCIe/M.2 (also the one on the Coral Dev Board's SoM).

USB: /sys/bus/usb/devices/<port>/{idVendor,idProduct,speed,busnum,devnum} (Documentation/ABI/testing/
sysfs-bus-usb; speed in Mb/s: 480 is USB 2, 5000 USB 3). The accelerator enumerates as 1a6e:089a (Global
Unichip) until libedgetpu loads its firmware, then as 18d1:9302 (Google); libedgetpu's udev rule
(google-coral/libedgetpu debian/edgetpu-accelerator.rules) gives both ids to group plugdev. User space opens
it through /dev/bus/usb/<busnum>/<devnum>.
PCIe: the gasket/apex driver (google/gasket-driver src/apex_driver.c) binds PCI 1ac1:089a, makes /dev/apex_N
and /sys/class/apex/apex_N with ``temp`` and ``trip_point{0,1,2}_temp`` (read by ``telemetry.coral``); Coral's
M.2 guide adds the rule SUBSYSTEM=="apex", MODE="0660", GROUP="apex".
"""

from __future__ import annotations

import re
from pathlib import Path

from ..telemetry.coral import read_apex_device
from .access import Access
from .common import Accelerator, Found, Looked, Problem, node_verdict
from .families import among_pci
from ..devfs import Root, Tree, as_tree
from .libraries import LibraryLookup, find_edgetpu_library
from .pci import PciDevice, read_pci

USB_BOOTLOADER = ("1a6e", "089a")  # before the firmware is loaded
USB_RUNTIME = ("18d1", "9302")  # after
PCI_IDS = ("0x1ac1", "0x089a")

USB_RULE_FIX = ("install libedgetpu1-std from the Coral apt repository (its udev rule gives the accelerator to "
                "group plugdev) or write /etc/udev/rules.d/99-edgetpu-accelerator.rules with "
                "SUBSYSTEM==\"usb\",ATTRS{idVendor}==\"1a6e\",GROUP=\"plugdev\" and "
                "SUBSYSTEM==\"usb\",ATTRS{idVendor}==\"18d1\",GROUP=\"plugdev\"; run sudo udevadm control "
                "--reload-rules && sudo udevadm trigger, replug it, and add the user to plugdev")
APEX_RULE_FIX = ("sudo sh -c 'echo SUBSYSTEM==\\\"apex\\\", MODE=\\\"0660\\\", GROUP=\\\"apex\\\" > "
                 "/etc/udev/rules.d/65-apex.rules'; sudo groupadd apex; sudo usermod -aG apex $USER; reboot "
                 "(https://coral.ai/docs/m2/get-started/)")
USB_DEVICES = "/sys/bus/usb/devices"
LOOKED_FOR_USB = (f"USB devices in {USB_DEVICES} with id 1a6e:089a (before its firmware is loaded) or 18d1:9302 "
                  "(after)", "their node /dev/bus/usb/<busnum>/<devnum>", "the delegate library libedgetpu")
LOOKED_FOR_PCIE = ("/sys/class/apex/apex_N (made by the gasket/apex driver)",
                   "PCI id 1ac1:089a in /sys/bus/pci/devices", "device node /dev/apex_N",
                   "the delegate library libedgetpu")
LIBRARY_FIX = ("install the Edge TPU runtime: sudo apt-get install libedgetpu1-std from the Coral apt repository "
               "(https://coral.ai/docs/accelerator/get-started/)")


def parse_usb_id(text: str | None) -> str | None:
    value = (text or "").strip().lower()
    return value if re.fullmatch(r"[0-9a-f]{4}", value) else None


def parse_usb_speed(text: str | None) -> float | None:
    try:
        return float((text or "").strip())
    except ValueError:
        return None


def _usb_node(tree: Tree, base: str) -> str | None:
    bus, dev = tree.read(f"{base}/busnum").strip(), tree.read(f"{base}/devnum").strip()
    if bus and dev and bus.isdigit() and dev.isdigit():
        return f"/dev/bus/usb/{int(bus):03d}/{int(dev):03d}"
    return None


def _library_problem(library: LibraryLookup, name: str) -> Problem | None:
    if library.found:
        return None
    return Problem(name, f"{library.filename} (the Edge TPU delegate) is not findable by the loader, so no "
                         f"runtime can use the Edge TPU", LIBRARY_FIX)


def _library_state(library: LibraryLookup) -> str:
    if library.found:
        return f"{library.filename} is at {library.path}"
    return f"{library.filename} is not on the loader path either ({len(library.searched)} places searched)"


def _usb(tree: Tree, access: Access, library: LibraryLookup) -> tuple[list[Accelerator], list[Problem], Looked]:
    accelerators, problems = [], []
    names, reason = tree.listdir(USB_DEVICES)
    devices = [port for port in names if ":" not in port]
    absent = reason or (f"none of the {len(devices)} USB devices in {USB_DEVICES} has id 1a6e:089a or 18d1:9302"
                        if devices else f"{USB_DEVICES} lists no USB devices")
    looked = Looked("edgetpu-usb", LOOKED_FOR_USB, f"{absent}; {_library_state(library)}")
    for port in names:
        if ":" in port:  # interfaces ("1-1:1.0"), not devices
            continue
        base = f"/sys/bus/usb/devices/{port}"
        ids = (parse_usb_id(tree.read(f"{base}/idVendor").text), parse_usb_id(tree.read(f"{base}/idProduct").text))
        if ids not in (USB_BOOTLOADER, USB_RUNTIME):
            continue
        firmware = ids == USB_RUNTIME
        speed = parse_usb_speed(tree.read(f"{base}/speed").text)
        node_path = _usb_node(tree, base)
        name = f"Coral USB Accelerator at USB port {port}"
        nodes = (access.node(node_path),) if node_path else ()
        usable, why, fix = node_verdict(nodes, USB_RULE_FIX) if nodes else (False, f"{base} has no busnum/devnum", None)
        state = "firmware loaded" if firmware else "firmware not loaded yet (libedgetpu loads it on first use, " \
                                                   "then the device re-enumerates as 18d1:9302)"
        details = {"usb_id": ":".join(ids), "firmware_loaded": firmware, "usb_speed_mbps": speed, "usb_port": port,
                   "delegate_library": library.path}
        accelerators.append(Accelerator(
            "edgetpu", name, ("EdgeTPU", "EdgeTPU:usb"), f"USB {':'.join(ids)} at {base}", present=True,
            usable=usable, reason=why or f"{state}; {node_path} read-write", fix=fix, nodes=nodes, details=details))
        if firmware and speed is not None and speed < 5000:
            problems.append(Problem(name, f"runs at {speed:g} Mb/s (USB 2): inference is several times slower",
                                    "connect it to a USB 3 port (blue), with the cable that came with it"))
        problem = _library_problem(library, name)
        if problem:
            problems.append(problem)
    return accelerators, problems, looked


def _pcie(tree: Tree, access: Access, pci: list[PciDevice], library: LibraryLookup,
          board_family: str | None) -> tuple[list[Accelerator], list[Problem], Looked]:
    accelerators, problems = [], []
    names, reason = tree.listdir("/sys/class/apex")
    no_driver = f"no apex driver ({reason})" if reason else "/sys/class/apex is empty"
    looked = Looked("edgetpu-pcie", LOOKED_FOR_PCIE, f"{no_driver} and no PCI device has id 1ac1:089a "
                                                     f"{among_pci(pci)}; {_library_state(library)}")
    label = "Coral Dev Board Edge TPU" if board_family == "coral-dev-board" else "Coral Edge TPU (PCIe/M.2)"
    for apex in names:
        base = f"/sys/class/apex/{apex}"
        sensor = read_apex_device(tree.path(base))  # the telemetry reader: one parser for the apex files
        details = {"delegate_library": library.path, "temp_c": sensor.temperature.value,
                   "trip_points_c": [t for t in sensor.trips_c if t is not None]}
        nodes = (access.node(f"/dev/{apex}"),)
        usable, why, fix = node_verdict(nodes, APEX_RULE_FIX)
        accelerators.append(Accelerator(
            "edgetpu", f"{label} {apex}", ("EdgeTPU", "EdgeTPU:pci"), base, present=True, usable=usable,
            reason=why or f"apex driver loaded, /dev/{apex} read-write", fix=fix, nodes=nodes, details=details))
        problem = _library_problem(library, f"{label} {apex}")
        if problem:
            problems.append(problem)
    if not names:
        for dev in pci:
            if (dev.vendor, dev.device) == PCI_IDS:
                bound = f"bound to {dev.driver}" if dev.driver else "no driver bound"
                state = ("apex is bound to it but made no /sys/class/apex device (see dmesg)" if dev.driver == "apex"
                         else f"the apex driver does not have it ({bound})")
                accelerators.append(Accelerator(
                    "edgetpu", f"{label} at {dev.address}", ("EdgeTPU", "EdgeTPU:pci"), f"PCI {dev.location}",
                    present=False, usable=False,
                    reason=f"a Coral Edge TPU is on the PCI bus but {state}",
                    fix="sudo apt-get install gasket-dkms libedgetpu1-std from the Coral apt repository, then "
                        "reboot (https://coral.ai/docs/m2/get-started/)",
                    details={"bus": dev.address}))
    return accelerators, problems, looked


def read_edgetpu(root: Root = Path("/"), access: Access | None = None, pci: list[PciDevice] | None = None,
                 library: LibraryLookup | None = None, board_family: str | None = None) -> Found:
    tree = as_tree(root)
    access = access if access is not None else Access(tree)
    pci = read_pci(tree)[0] if pci is None else pci
    library = library if library is not None else find_edgetpu_library(tree)
    usb, usb_problems, usb_looked = _usb(tree, access, library)
    pcie, pcie_problems, pcie_looked = _pcie(tree, access, pci, library, board_family)
    return Found(tuple(usb + pcie), tuple(usb_problems + pcie_problems), (usb_looked, pcie_looked))
