"""The probe report's runtimes section, assembled above both the hardware probe and the executors.

The hardware survey (``edgeaccel/hardware``) reads hardware only, and executors ask it about their devices; what
each runtime reaches here is the executor class's own ``survey()``. This module joins the two: ``RUNTIME_SURVEY``
is what ``edgeaccel.probe()`` hands the hardware survey, so it and ``edgeaccel probe`` show every registered runtime
(plug-ins included, and broken plug-ins with their error), which runtime reaches each accelerator found, and
the accelerators that no installed runtime reaches, with what installs one.
"""

from __future__ import annotations

import dataclasses
import time

from ..executors import registry
from ..executors.base import Executor
from ..executors.device import base_of
from ..hardware import runtimes as probe_runtimes
from ..hardware.common import Problem
from ..hardware.families import PluginSeen
from ..runtimeinfo import RuntimeInfo


def survey_runtimes() -> tuple[RuntimeInfo, ...]:
    items = []
    for name, cls in registry.runtimes().items():
        start = time.perf_counter()
        try:
            info = cls.survey()
        except Exception as exc:  # the last guard: a runtime (or a plug-in) that misbehaves becomes a reason
            info = RuntimeInfo(name, True, None, None, False, (), f"survey() raised {type(exc).__name__}: {exc}",
                               import_ms=round((time.perf_counter() - start) * 1000, 1))
        dist = registry.plugin_distribution(name)
        items.append(dataclasses.replace(info, plugin=dist) if dist else info)
    for bad in registry.broken():
        items.append(RuntimeInfo(bad.name, True, None, bad.distribution, False, (), f"plug-in not loaded: {bad.error}",
                                 f"fix or uninstall {bad.distribution or bad.target}", plugin=bad.distribution))
    return tuple(items)


def _declared_by(device: str) -> list[type[Executor]]:
    """Runtimes whose classes declare ``device``, driven ones only."""
    return [cls for cls in registry.runtimes().values() if base_of(device) in cls.device_kinds]


def could_use(runtime: str, accelerators: list) -> bool:
    """Whether this machine has something ``runtime`` drives: the CPU, or an accelerator the survey found (a
    runtime this machine cannot use, TensorRT without an NVIDIA GPU say, is not a problem here: the runtimes
    section still says it is not installed and what installs it). A runtime the registry does not know (a
    plug-in that failed to load) is something installed here that is broken: always a problem."""
    cls = registry.runtimes().get(runtime)
    if cls is None:
        return True
    found = {base_of(d) for acc in accelerators for d in acc.devices}
    return any(kind == "cpu" or base_of(device) in found for device, kind in cls.device_kinds.items())


def problems(runtimes: probe_runtimes.Runtimes, accelerators: list) -> list[Problem]:
    """Runtimes that are missing or unusable for a device this machine has, and accelerators present that no
    installed runtime reaches."""
    found = [Problem(r.name, r.reason, r.fix) for r in runtimes.items
             if (not r.usable or r.fix) and could_use(r.name, accelerators)]
    for acc in accelerators:
        if not acc.present or acc.kind == "cpu":
            continue
        reached = [r.name for r in runtimes.items if r.usable and any(base_of(d) in acc.devices for d in r.reaches)]
        if reached:
            continue
        declared = [(cls, d) for d in acc.devices for cls in _declared_by(d)]
        if not declared:
            found.append(Problem(acc.name, f"{acc.name} is here but no registered executor drives "
                                 f"{', '.join(acc.devices)}", "install an executor plug-in for it "
                                 "(README: Write an executor plug-in)"))
            continue
        cls, device = declared[0]
        info = runtimes.get(cls.runtime)
        have = (f"{cls.runtime} ({info.package}) is installed but does not reach {device} (it reaches "
                f"{', '.join(info.reaches) or 'nothing'})" if info and info.usable else f"{cls.runtime} is not usable")
        hints = "; or ".join(dict.fromkeys(c.install_hint(d) for c, d in declared))
        found.append(Problem(cls.runtime, f"{acc.name} is here but no installed runtime reaches it: {have}", hints))
    return found


def views(runtimes: probe_runtimes.Runtimes, accelerators: list) -> list:
    """Each accelerator noting which runtimes reach it here (``details["reached_by"]``)."""
    out = []
    for acc in accelerators:
        reached = [r.name for r in runtimes.items if r.usable and any(base_of(d) in acc.devices for d in r.reaches)]
        out.append(dataclasses.replace(acc, details={**acc.details, "reached_by": reached}))
    return out


def plugins() -> list[PluginSeen]:
    """The executor plug-ins family: each installed plug-in's accelerator devices and whether it reports them
    present; broken plug-ins with their error."""
    seen = []
    for name, cls in registry.runtimes().items():
        dist = registry.plugin_distribution(name)
        if dist is None:
            continue
        devices = tuple(d for d, kind in cls.device_kinds.items() if kind != "cpu")
        present, reasons = [], []
        for device in devices:
            try:
                found = cls.availability(device)
                reason = found.reason
            except Exception as exc:  # a plug-in's bug is its reason
                found, reason = None, f"availability() raised {type(exc).__name__}: {exc}"
            if found:
                present.append(device)
            reasons.append(f"{device}: {reason}")
        seen.append(PluginSeen(f"{name} ({dist})", devices, bool(present), "; ".join(reasons) or "drives the CPU only"))
    seen += [PluginSeen(bad.name, (), False, f"not loaded: {bad.error}", f"fix or uninstall {bad.distribution}")
             for bad in registry.broken()]
    return seen


RUNTIME_SURVEY = probe_runtimes.RuntimeSurveyHook(survey_runtimes, problems, views, plugins)
