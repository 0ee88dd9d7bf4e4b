"""Artifacts whose recorded check failed (``edgeaccel convert`` measured them against the float reference on
held-out samples and they gave other answers) are never picked silently: ``edgeaccel.load`` leaves them out of
the selection with the reason (``explain`` lists them as rejected, ``model.fallbacks`` as passed over). One that
the caller pins, by loading the file alone or naming the only executor that reads it, still runs, with a loud
warning: a pin is a pin. When every artifact failed, the bundle's float reference runs instead, said the same
way; without one, loading fails with what to do."""

from __future__ import annotations

import contextvars
import logging
import warnings
from dataclasses import dataclass, field, replace

from ..modelfiles import bundle
from .. import formats
from ..errors import EdgeAccelError, ModelError
from .selector import Rejection

log = logging.getLogger("edgeaccel")

# set by `edgeaccel check` while it opens each artifact alone on purpose: measuring a failed artifact again is
# not running it in production, and warning about it there would only repeat the check's own verdict
RECHECKING = contextvars.ContextVar("edgeaccel_rechecking", default=False)

FIX = ("convert again with calibration data like the inputs it will see (or deploy the float artifact); to run "
       "it anyway, pin it: load the file alone, or pass the executor that reads it")


@dataclass
class CheckedArtifacts:
    artifacts: bundle.ArtifactSet  # what selection may pick
    rejected: list[Rejection] = field(default_factory=list)  # the failed ones left out, with their reasons
    warnings: list[str] = field(default_factory=list)  # failed ones kept because pinned, or the reference's stand-in


def leave_out_failed(found: bundle.ArtifactSet, executor: str | None = None) -> CheckedArtifacts:
    failed = {a.path: reason for a in found.artifacts if (reason := found.failed_check(a.path))}
    if not failed:
        return CheckedArtifacts(found)
    if found.pinned:
        return CheckedArtifacts(found, warnings=[_pinned(a.path.name, failed[a.path], "it was loaded alone")
                                                 for a in found.artifacts])
    passed = [a for a in found.artifacts if a.path not in failed]
    kept_failed = []
    if executor:
        from ..executors.registry import runtimes

        cls = runtimes().get(executor)
        if cls is not None and not any(cls.reads(a.format) for a in passed):
            kept_failed = [a for a in found.artifacts if a.path in failed and cls.reads(a.format)]
    notes = [_pinned(a.path.name, failed[a.path], f"executor={executor!r} reads no other artifact")
             for a in kept_failed]
    left_out = [a for a in found.artifacts if a.path in failed and a not in kept_failed]
    rejected = [Rejection(a, "any", "any", f"left out: it failed its check against the float reference when "
                          f"converted: {failed[a.path]}", FIX) for a in left_out]
    usable = passed + kept_failed
    if not usable:
        reference = _reference(found)
        if reference is None:
            reasons = "".join(f"\n  - {a.path.name}: {failed[a.path]}" for a in left_out)
            raise ModelError(f"every artifact of {found.name} failed its check against the float reference when "
                             f"converted:{reasons}", hint=FIX)
        usable = [reference]
        notes.append(f"every artifact of {found.name} failed its check against the float reference; the float "
                     f"reference {reference.path.name} runs instead")
    return CheckedArtifacts(replace(found, artifacts=usable), rejected, notes)


def announce(checked: CheckedArtifacts) -> None:
    """Say every kept failed artifact out loud: a log warning and a Python warning."""
    if RECHECKING.get():
        return
    for line in checked.warnings:
        log.warning("%s", line)
        warnings.warn(line, UserWarning, stacklevel=4)


def _pinned(name: str, reason: str, why: str) -> str:
    return (f"{name} FAILED its check against the float reference when converted ({reason}); it runs because "
            f"{why} (pinned), but its answers differ from the float model's")


def _reference(found: bundle.ArtifactSet):
    if found.reference is None or not found.reference.exists():
        return None
    try:
        return formats.describe(found.reference)
    except EdgeAccelError as exc:
        log.warning("the float reference %s does not load: %s", found.reference, exc.message)
        return None
