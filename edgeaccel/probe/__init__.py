"""The hardware survey behind ``edgeaccel.probe()`` and ``edgeaccel probe``.

    report = edgeaccel.probe()            # this machine
    report.present_devices()              # frozenset({"CPU", "EdgeTPU", ...}) for the selector
    report.to_dict()                      # the JSON of `edgeaccel probe --json`, schema "edgeaccel.probe/1"
    edgeaccel.probe(root="/mnt/image")    # another device's file system, read only below that root

One module per concern: ``fs`` (reading below a root), ``access`` (who may open a device node), the
machine (``cpu``, ``memory``, ``system``, ``board``), each accelerator family, ``runtimes``,
``telemetry_sources``; ``survey`` runs them and ``report`` holds the result.
"""

from __future__ import annotations

import sys
import types

from .access import DeviceNode, Identity
from .common import Accelerator, Problem
from .report import SCHEMA, ProbeReport
from .survey import probe

__all__ = ["probe", "ProbeReport", "Accelerator", "Problem", "DeviceNode", "Identity", "SCHEMA"]


class _CallableModule(types.ModuleType):
    """``edgeaccel.probe`` names both this package and the function. Importing the package (or any of its
    modules) makes Python set it as the attribute ``probe`` of ``edgeaccel``, replacing whatever was there;
    so ``edgeaccel.probe`` is always this package, made callable: ``edgeaccel.probe()`` surveys and
    ``edgeaccel.probe.Identity`` is the class, whichever was touched first."""

    def __call__(self, *args, **kwargs) -> ProbeReport:
        return probe(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
callable_package = sys.modules[__name__]  # what edgeaccel's lazy "probe" resolves to
