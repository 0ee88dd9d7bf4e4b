"""What ``explain`` and the selector tell a user about one Edge TPU-compiled model.

``explain_edgetpu_model`` answers with each of the three pieces the Edge TPU needs (a device, the libedgetpu
library, permission to open the device), missing or not, each with its own fix, and the model's CPU twin (the
.tflite edgetpu_compiler was given), which runs wherever the Edge TPU cannot. The questions behind each piece
are ``edgetpu_diagnosis``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, Tree, as_tree
from ..hardware import udev
from ..hardware.access import Identity, group_names
from ..hardware.edgetpu import APEX_RULE_FIX, USB_RULE_FIX
from . import edgetpu
from .edgetpu import EdgeTpuDevice
from .edgetpu_diagnosis import NO_DEVICE_FIX, Diagnosis, diagnose

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
