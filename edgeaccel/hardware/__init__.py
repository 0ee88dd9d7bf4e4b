"""The hardware survey behind ``edgeaccel.probe()`` and ``edgeaccel probe``.

    report = edgeaccel.probe()            # this machine, its runtimes included
    report.present_devices()              # frozenset({"CPU", "EdgeTPU", ...}) for the selector
    report.to_dict()                      # the JSON of `edgeaccel probe --json`, schema "edgeaccel.probe/1"
    edgeaccel.probe(root="/mnt/image")    # another device's file system, read only below that root

This package reads hardware only and imports no executor: ``survey_device`` surveys the runtimes through the
``RuntimeSurveyHook`` its caller hands in (``edgeaccel.probe``, defined in ``edgeaccel/__init__.py``, hands in
``edgeaccel.selection.inventory.RUNTIME_SURVEY``). One module per concern: ``fs`` (reading below a root),
``access`` (who may open a device node), the machine (``cpu``, ``memory``, ``system``, ``board``), each
accelerator family, ``runtimes``, ``telemetry_sources``; ``survey`` runs them and ``report`` holds the result.
"""

from __future__ import annotations

from .access import DeviceNode, Identity
from .common import Accelerator, Problem
from .report import SCHEMA, ProbeReport
from .runtimes import RuntimeSurveyHook
from .survey import survey_device

__all__ = ["survey_device", "RuntimeSurveyHook", "ProbeReport", "Accelerator", "Problem", "DeviceNode", "Identity",
           "SCHEMA"]
