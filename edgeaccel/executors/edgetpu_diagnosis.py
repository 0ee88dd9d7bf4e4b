"""Why the Edge TPU delegate cannot (or can) be used here, in words a user can act on.

LiteRT's own answer is "Failed to load delegate from libedgetpu.so.1" with an empty native message
(DESIGN.md): libedgetpu returns NULL without a reason when it opens no device. This module asks the
questions behind it, through the probe's readers so that it works on a fake tree (``root=``) and for
another account (``identity=``): is the library on the loader path and does it load, is an Edge TPU of the
asked kind present (USB 1a6e:089a before its firmware, 18d1:9302 after; /dev/apex_N), can this user open
it, is a USB one on a USB 3 link, and do the libedgetpu build and this LiteRT go together.

``edgetpu_explanation`` builds on it for one compiled model (the three pieces, the CPU twin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..devfs import Root, Tree, as_tree, words
from ..hardware.access import Access, Identity
from ..hardware.common import Accelerator
from ..hardware.edgetpu import LIBRARY_FIX, read_edgetpu
from ..hardware.libraries import LibraryLookup, find_edgetpu_library, find_library
from . import edgetpu
from .edgetpu import EdgeTpuDevice, LibraryCheck

NO_DEVICE_FIX = ("connect a Coral Edge TPU (USB Accelerator, or an M.2/PCIe card with gasket-dkms installed); "
                 "`edgeaccel probe` lists what it finds")
USB3_FIX = "connect it to a USB 3 port (blue), with the cable that came with it"
NEWER_LIBEDGETPU_FIX = ("install a libedgetpu built against a TensorFlow close to this LiteRT (Google's last release, "
                        "16.0, was built against TensorFlow 2.5; community rebuilds such as "
                        "https://github.com/feranick/libedgetpu/releases track newer ones)")
# Google's libedgetpu 16.0 packages are built against TensorFlow 2.5; TFLite 2.12 and later are reported to
# crash in the delegate (google-coral/edgetpu#812). ai-edge-litert is newer than all of those.
FIRST_BAD_TFLITE = (2, 12)
DPKG_PACKAGES = ("libedgetpu1-std", "libedgetpu1-max", "libedgetpu1-legacy-std", "libedgetpu1-legacy-max")


@dataclass(frozen=True)
class Finding:
    """One answer: ``blocking`` findings stop the Edge TPU from being used, the others are warnings."""

    topic: str  # "library", "device", "access", "usb-speed", "version"
    text: str
    fix: str | None = None
    blocking: bool = False


@dataclass(frozen=True)
class Diagnosis:
    device: str
    findings: tuple[Finding, ...] = ()
    library: str | None = None  # what load_delegate should be given: a path where one was found
    accelerators: tuple[Accelerator, ...] = ()  # the Edge TPUs of the asked kind that are present
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(f.blocking for f in self.findings)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.blocking]

    @property
    def reason(self) -> str:
        if not self.ok:
            return "; ".join(f.text for f in self.blocking)
        found = ", ".join(a.name for a in self.accelerators) or "an Edge TPU"
        text = f"{found} with the delegate {self.library}"
        return text + "".join(f"; {w.text}" for w in self.warnings)

    @property
    def fix(self) -> str | None:
        fixes = [f.fix for f in (self.blocking if not self.ok else self.warnings) if f.fix]
        return "; then ".join(dict.fromkeys(fixes)) or None

    def report(self) -> str:
        """Every finding on its own line, for an error message."""
        lines = []
        for f in self.findings:
            mark = "x" if f.blocking else ("!" if f.fix else "-")  # blocking, a warning with a fix, a fact
            lines.append(f"  [{mark}] {f.text}" + (f" (fix: {f.fix})" if f.fix else ""))
        return "\n".join(lines)


def diagnose(device: str = "EdgeTPU", *, root: Root = Path("/"), identity: Identity | None = None,
             litert: tuple[str, str] | None = None, library: str | None = None) -> Diagnosis:
    """What stands between this process (or ``identity``) and the Edge TPU ``device`` below ``root``.

    ``litert`` is (distribution, version) of the interpreter in use, for the version check; ``library``
    the delegate name or path (default: $EDGEACCEL_EDGETPU_LIBRARY, else the OS's libedgetpu name).
    Never raises for a bad tree; a bad device string raises ValueError."""
    spec = edgetpu.parse_device(device)
    tree = as_tree(root)
    findings: list[Finding] = []
    lookup, check = _library(tree, library or edgetpu.library_name())
    found = read_edgetpu(tree, Access(tree, identity), library=lookup)
    present = [a for a in found.accelerators if a.present and _kind_matches(a, spec)]
    findings.extend(_library_findings(lookup, check, tree, present))
    findings.extend(_device_findings(spec, found.accelerators, present, tree))
    findings.extend(_usb_speed_findings(present))
    findings.extend(_version_findings(tree, check, litert))
    order = {"device": 0, "access": 1, "library": 2, "usb-speed": 3, "version": 4}
    findings.sort(key=lambda f: (not f.blocking, order.get(f.topic, 9)))
    details = {"library_lookup": lookup.to_dict(), "runtime_version": check.runtime_version if check else None,
               "usb_speed_mbps": [a.details.get("usb_speed_mbps") for a in present if "usb_speed_mbps" in a.details]}
    return Diagnosis(device, tuple(findings), lookup.path or lookup.filename, tuple(present), details)


def _library(tree: Tree, name: str) -> tuple[LibraryLookup, LibraryCheck | None]:
    """Where the loader finds ``name`` below the tree; dlopen it only on this machine's own root."""
    if "/" in name or "\\" in name:  # an explicit path ($EDGEACCEL_EDGETPU_LIBRARY), on this machine
        exists = Path(name).is_file()
        lookup = LibraryLookup("Edge TPU delegate for LiteRT", Path(name).name, name if exists else None,
                               f"${edgetpu.LIBRARY_ENV}" if exists else None, (name,),
                               None if exists else f"{name} {words.MISSING}")
    elif name == edgetpu.default_library_name():
        lookup = find_edgetpu_library(tree)
    else:
        lookup = find_library(tree, name, "Edge TPU delegate for LiteRT")
    if not lookup.found or not tree.is_real:
        return lookup, None
    return lookup, edgetpu.check_library(lookup.path)


def _library_findings(lookup: LibraryLookup, check: LibraryCheck | None, tree: Tree,
                      present: list[Accelerator]) -> list[Finding]:
    if not lookup.found:
        searched = ", ".join(lookup.searched[:6]) + (", ..." if len(lookup.searched) > 6 else "")
        there = f", though {', '.join(a.name for a in present)} is present" if present else ""
        return [Finding("library", f"{lookup.filename} (the Edge TPU delegate) is not on the loader path "
                                   f"(searched {searched}){there}", LIBRARY_FIX, blocking=True)]
    if check is None:
        return [Finding("library", f"{lookup.filename} found at {lookup.path} (not loaded: the probed root is "
                                   "not this machine)")] if not tree.is_real else []
    if not check.loaded:
        return [Finding("library", f"{lookup.path} is there but the loader refuses it: {check.error}",
                        "reinstall it and its dependency libusb-1.0-0 (sudo apt-get install --reinstall "
                        "libedgetpu1-std libusb-1.0-0); a library for another CPU architecture fails the same way",
                        blocking=True)]
    if not check.is_delegate:
        return [Finding("library", f"{lookup.path} loads but is not a TFLite delegate plugin: {check.error}",
                        f"point ${edgetpu.LIBRARY_ENV} at libedgetpu, or unset it", blocking=True)]
    return []


def _kind_matches(acc: Accelerator, spec: EdgeTpuDevice) -> bool:
    return spec.kind is None or f"EdgeTPU:{spec.kind}" in acc.devices


def _device_findings(spec: EdgeTpuDevice, all_found: tuple[Accelerator, ...], present: list[Accelerator],
                     tree: Tree) -> list[Finding]:
    if not present:
        # a card on the PCI bus without its driver is found but not present: its reason says what is missing
        absent = [a for a in all_found if not a.present and _kind_matches(a, spec)]
        if absent:
            return [Finding("device", absent[0].reason, absent[0].fix, blocking=True)]
        others = [a for a in all_found if a.present]
        where = {"usb": "no Coral USB Accelerator on the USB bus (USB id 1a6e:089a before its firmware is loaded, "
                        "18d1:9302 after)",
                 "pci": "no PCIe/M.2 Edge TPU (no /sys/class/apex/apex_N, no /dev/apex_N)",
                 None: "no Edge TPU on this machine: no Coral USB Accelerator on the USB bus (USB id 1a6e:089a "
                       "before its firmware is loaded, 18d1:9302 after) and no PCIe/M.2 one (/dev/apex_N)"}[spec.kind]
        if not tree.is_real:
            where = where.replace("this machine", str(tree.root))
        fix = NO_DEVICE_FIX
        if others:
            names = ", ".join(f"{a.name} ({a.devices[-1]})" for a in others)
            where += f"; there is {names}"
            fix = f"use device {others[0].devices[-1]!r}"
        return [Finding("device", where, fix, blocking=True)]
    findings: list[Finding] = []
    if spec.index is not None:
        count, source = len(present), "sysfs"
        listed = edgetpu.pycoral_edge_tpus() if tree.is_real else None
        if listed is not None:
            count = len([d for d in listed if spec.kind is None or d.get("type") == spec.kind])
            source = "pycoral.utils.edgetpu.list_edge_tpus()"
        if spec.index >= count:
            findings.append(Finding("device", f"{spec.name} asks for {spec.label.replace('#', 'number ')} "
                                              f"(counting from 0) but {count} {'is' if count == 1 else 'are'} "
                                              f"here ({source})",
                                    f"use an index below {count}, or no index", blocking=True))
    usable = [a for a in present if a.usable]
    if not usable:
        acc = present[0]
        findings.append(Finding("access", f"{acc.name}: {acc.reason}", acc.fix, blocking=True))
    return findings


def _usb_speed_findings(present: list[Accelerator]) -> list[Finding]:
    findings = []
    for acc in present:
        speed = acc.details.get("usb_speed_mbps")
        if acc.details.get("firmware_loaded") and speed is not None and speed < 5000:
            findings.append(Finding("usb-speed", f"{acc.name} runs at {speed:g} Mb/s (a USB 2 link): it works, but "
                                                 "inference is several times slower than on USB 3", USB3_FIX))
        elif acc.details.get("firmware_loaded") is False:
            findings.append(Finding("usb-speed", f"{acc.name} has not loaded its firmware yet (libedgetpu loads it "
                                                 "on first use; it then re-enumerates as 18d1:9302 and its link "
                                                 "speed can be judged)"))
    return findings


def parse_dpkg_versions(text: str, names: tuple[str, ...] = DPKG_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` from /var/lib/dpkg/status (deb822 stanzas)."""
    found = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[:1].isspace())
        if fields.get("Package") in names and "installed" in fields.get("Status", "installed"):
            found[fields["Package"]] = fields.get("Version", "?")
    return found


def _tflite_equivalent(dist: str, version: str) -> tuple[int, int] | None:
    """The TensorFlow release a LiteRT build corresponds to, where that is known: tflite-runtime and
    tensorflow carry TF's own numbers; every ai-edge-litert postdates TF 2.16."""
    if dist == "ai-edge-litert":
        return (2, 16)
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _version_findings(tree: Tree, check: LibraryCheck | None, litert: tuple[str, str] | None) -> list[Finding]:
    findings = []
    packages = parse_dpkg_versions(tree.read("/var/lib/dpkg/status", limit=64 << 20).text or "")
    runtime = edgetpu.runtime_version_number(check.runtime_version if check else None)
    if runtime is not None:
        findings.append(Finding("version", f"Edge TPU runtime version {runtime} (models compiled by edgetpu_compiler "
                                           "need at most this version: compile with -m "
                                           f"{runtime} if one asks for more)"))
    for package, version in packages.items():
        built_for = re.search(r"tf(\d+\.\d+(?:\.\d+)?)", version)
        if built_for:
            findings.append(Finding("version", f"{package} {version} is built against TensorFlow {built_for.group(1)}"
                                               + (f"; this LiteRT is {litert[0]} {litert[1]}" if litert else "")))
            continue
        tflite = _tflite_equivalent(*litert) if litert else None
        if tflite is not None and tflite >= FIRST_BAD_TFLITE:
            findings.append(Finding(
                "version", f"{package} {version} is Google's build against TensorFlow 2.5, and this LiteRT "
                           f"({litert[0]} {litert[1]}) is newer than 2.11: that pair is reported to crash in the "
                           "delegate (google-coral/edgetpu#812)", NEWER_LIBEDGETPU_FIX))
    return findings
