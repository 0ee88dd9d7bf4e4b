"""Why the Edge TPU delegate cannot (or can) be used here, in words a user can act on.

LiteRT's own answer is "Failed to load delegate from libedgetpu.so.1" with an empty native message
(DESIGN.md): libedgetpu returns NULL without a reason when it opens no device. This module asks the
questions behind it, through the probe's readers so that it works on a fake tree (``root=``) and for
another account (``identity=``): is the library on the loader path and does it load, is an Edge TPU of the
asked kind present (USB 1a6e:089a before its firmware, 18d1:9302 after; /dev/apex_N), can this user open
it, is a USB one on a USB 3 link, and do the libedgetpu build and this LiteRT go together.

``explain_edgetpu_model`` answers for one compiled model what ``explain`` and the selector tell a user: each
of the three pieces the Edge TPU needs (a device, the libedgetpu library, permission to open the device),
missing or not, each with its own fix, and the model's CPU twin (the .tflite edgetpu_compiler was given),
which runs wherever the Edge TPU cannot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..hardware import udev
from ..hardware.access import Access, Identity, group_names
from ..hardware.common import Accelerator
from ..hardware.edgetpu import APEX_RULE_FIX, LIBRARY_FIX, USB_RULE_FIX, read_edgetpu
from ..hardware.fs import Root, Tree, as_tree
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
                               None if exists else f"{name} does not exist")
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


# -- one compiled model: the three pieces and the CPU twin -----------------------------------------------------------

PIECES = ("device", "library", "permission")
_TOPIC_OF_PIECE = {"device": "device", "library": "library", "permission": "access"}
# the match keys of libedgetpu's udev rule (both USB ids) and of Coral's apex rule
_USB_RULE = re.compile(r'idVendor\}\s*==\s*"(1a6e|18d1)"', re.IGNORECASE)
_APEX_RULE = re.compile(r'(SUBSYSTEM|KERNEL)\s*==\s*"apex', re.IGNORECASE)
TWIN_SOURCE_FIX = ("edgetpu_compiler does not keep the model it was given: get that .tflite from where this model "
                   "came from (Coral's models are published with both, e.g. https://github.com/google-coral/test_data),"
                   " or build a quantized .tflite from the original model (`edgeaccel convert MODEL --to tflite-int8`)")


@dataclass(frozen=True)
class Piece:
    """One of the three things the Edge TPU needs (``name`` in PIECES): there, or ``missing`` with a fix."""

    name: str
    missing: bool
    text: str
    fix: str | None = None


@dataclass(frozen=True)
class CpuTwin:
    """The .tflite a compiled model was made from. ``path`` when it is beside the model (same name without
    ``_edgetpu``) and is a plain TFLite model; otherwise ``fix`` says how to get it."""

    path: Path | None
    text: str
    fix: str | None = None


@dataclass(frozen=True)
class EdgeTpuExplanation:
    model: Path
    device: str
    pieces: tuple[Piece, ...]
    twin: CpuTwin
    diagnosis: Diagnosis

    @property
    def ok(self) -> bool:
        return self.diagnosis.ok and not self.missing

    @property
    def missing(self) -> list[Piece]:
        return [p for p in self.pieces if p.missing]

    @property
    def reason(self) -> str:
        """One line: what is missing, piece by piece; or that the Edge TPU can run it. The CPU twin is in ``fix``
        (the way to run the model now), not repeated here."""
        if self.ok:
            return f"the Edge TPU can run {self.model.name}: " + "; ".join(p.text for p in self.pieces)
        missing = "; ".join(f"{p.name}: {p.text}" for p in self.missing)
        other = "; ".join(f.text for f in self.diagnosis.blocking if f.topic not in _TOPIC_OF_PIECE.values())
        return f"the Edge TPU cannot run {self.model.name}: {missing}" + (f"; {other}" if other else "")

    @property
    def fix(self) -> str | None:
        """Each missing piece's fix in turn, then the twin (the way to run the model now)."""
        if self.ok:
            return None
        fixes = [f"{p.name}: {p.fix}" for p in self.missing if p.fix]
        twin = (f"or run it on the CPU now: load its CPU twin {self.twin.path}" if self.twin.path else
                f"or run its CPU twin: {self.twin.fix}")
        return "; ".join(fixes + [twin])

    def lines(self) -> list[str]:
        """For explain: one line per piece ([x] missing, [ok] there) with its fix, warnings, then the twin."""
        lines = []
        for p in self.pieces:
            lines.append(f"[{'x' if p.missing else 'ok'}] {p.name}: {p.text}" + (f" (fix: {p.fix})" if p.fix else ""))
        lines += [f"[!] {w.text}" + (f" (fix: {w.fix})" if w.fix else "") for w in self.diagnosis.warnings if w.fix]
        lines.append(f"[{'ok' if self.twin.path else '-'}] CPU twin: {self.twin.text}"
                     + (f" (fix: {self.twin.fix})" if self.twin.fix else ""))
        return lines

    def to_dict(self) -> dict:
        return {"model": str(self.model), "device": self.device, "ok": self.ok,
                "pieces": [{"name": p.name, "missing": p.missing, "text": p.text, "fix": p.fix} for p in self.pieces],
                "cpu_twin": {"path": str(self.twin.path) if self.twin.path else None, "text": self.twin.text,
                             "fix": self.twin.fix}}


def explain_edgetpu_model(model: str | Path, device: str = "EdgeTPU", *, root: Root = Path("/"),
                          identity: Identity | None = None, litert: tuple[str, str] | None = None,
                          library: str | None = None) -> EdgeTpuExplanation:
    """Why an Edge TPU-compiled ``model`` can or cannot run on ``device`` here: the device, the library and
    the permission, each there or missing with its own fix, and its CPU twin. Arguments as ``diagnose``; the
    model is only looked at by name and its twin by content. Never raises for a bad tree; a bad device
    string raises ValueError."""
    model = Path(model)
    diagnosis = diagnose(device, root=root, identity=identity, litert=litert, library=library)
    tree = as_tree(root)
    return EdgeTpuExplanation(model, device, _pieces(diagnosis, tree, identity), cpu_twin(model), diagnosis)


def _pieces(diagnosis: Diagnosis, tree: Tree, identity: Identity | None) -> tuple[Piece, ...]:
    blocking = {f.topic: f for f in reversed(diagnosis.blocking)}  # the first finding of each topic
    lookup = diagnosis.details["library_lookup"]
    nodes = ", ".join(n.path for a in diagnosis.accelerators if a.usable for n in a.nodes)
    there = {"device": ", ".join(a.name for a in diagnosis.accelerators) + " is present",
             "library": f"{lookup['filename']} is at {lookup['path']}",
             "permission": f"this user can open {nodes}"}
    pieces = []
    for name in PIECES:
        finding = blocking.get(_TOPIC_OF_PIECE[name])
        if finding is not None:
            pieces.append(Piece(name, True, finding.text, finding.fix))
        elif name == "permission" and not diagnosis.accelerators:
            pieces.append(_permission_without_device(tree, identity, edgetpu.parse_device(diagnosis.device)))
        elif name == "device" and not diagnosis.accelerators:  # diagnose always says why; never reached today
            pieces.append(Piece(name, True, "no Edge TPU is present", NO_DEVICE_FIX))
        else:
            pieces.append(Piece(name, False, there[name]))
    return tuple(pieces)


def _permission_without_device(tree: Tree, identity: Identity | None, spec: EdgeTpuDevice) -> Piece:
    """With no Edge TPU plugged in, the udev rules say whether this user will be able to open one."""
    who = identity or Identity.current()
    if who.uid == 0:
        return Piece("permission", False, "this process runs as root, which may open any device node")
    gids = {name: gid for gid, name in group_names(tree).items()}
    problems = []
    for kind in ([spec.kind] if spec.kind else ["usb", "pci"]):
        label, rule, rule_fix = (("a Coral USB Accelerator", _USB_RULE, USB_RULE_FIX) if kind == "usb" else
                                 ("a PCIe/M.2 Edge TPU (/dev/apex_N)", _APEX_RULE, APEX_RULE_FIX))
        grants = udev.grants(tree, rule)
        for grant in grants:
            gid = gids.get(grant.group or "", _system_gid(tree, grant.group))
            if grant.open_to_all or (gid is not None and gid in who.gids):
                to = "everyone" if grant.open_to_all else f"group {grant.group}, which this user is in"
                return Piece("permission", False, f"once {label} is plugged in, {grant.rule_file} gives it to {to}")
        group = next((g.group for g in grants if g.group), None)
        if group:
            problems.append((f"{grants[0].rule_file} gives {label} to group {group}, which this user is not in",
                             f"sudo usermod -aG {group} $USER, then log in again"))
        else:
            problems.append((f"no udev rule gives {label} to a group (looked in {', '.join(udev.RULE_DIRS)}): its "
                             "node would be read-write for root only", rule_fix))
    return Piece("permission", True, "; ".join(text for text, _ in problems), problems[0][1])


def _system_gid(tree: Tree, group: str | None) -> int | None:
    """A group's id from the system's name service, on this machine's own root only."""
    if not group or not tree.is_real:
        return None
    try:
        import grp

        return grp.getgrnam(group).gr_gid
    except (KeyError, ImportError):
        return None


def cpu_twin(model: str | Path) -> CpuTwin:
    """The CPU twin of a compiled model: ``NAME_edgetpu.tflite`` was compiled from ``NAME.tflite``, which
    edgetpu_compiler leaves where it was; edgeaccel looks beside the compiled model."""
    model = Path(model)
    if "_edgetpu" not in model.stem:
        return CpuTwin(None, f"{model.name} is not named as edgetpu_compiler names its output (NAME_edgetpu.tflite "
                             "from NAME.tflite), so its CPU twin cannot be named",
                       "load the .tflite that was handed to edgetpu_compiler (the model before compilation): LiteRT "
                       "runs it on the CPU; " + TWIN_SOURCE_FIX)
    head, _, tail = model.stem.rpartition("_edgetpu")
    twin = model.with_name(head + tail + model.suffix)
    if not twin.is_file():
        return CpuTwin(None, f"its CPU twin {twin.name} (the model edgetpu_compiler was given) is not beside it in "
                             f"{model.parent}", f"put {twin.name} beside it and load that: " + TWIN_SOURCE_FIX)
    from ..errors import UnsupportedFormatError
    from ..formats import detect_format
    from ..modelinfo import Format

    try:
        fmt = detect_format(twin)
    except UnsupportedFormatError as exc:
        return CpuTwin(None, f"{twin} is beside it but is not a model ({exc.message})",
                       f"replace {twin.name} with the model edgetpu_compiler was given: " + TWIN_SOURCE_FIX)
    if fmt is not Format.TFLITE:
        return CpuTwin(None, f"{twin} is beside it but is {fmt.value}, not a plain .tflite",
                       f"replace {twin.name} with the model edgetpu_compiler was given: " + TWIN_SOURCE_FIX)
    return CpuTwin(twin, f"its CPU twin {twin} is beside it: edgeaccel.load({str(twin)!r}) runs it on the CPU "
                         "(same inputs and outputs, without the Edge TPU)")
