"""The report's runtimes section: which inference runtimes are installed and what each reaches here.

What each runtime reaches is its executor's own ``survey()`` (edgeaccel/executors); ``edgeaccel.selection.inventory``
collects them and registers itself here. Only the real root is surveyed: the Python environment of another
root is not this one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import packages
from ..runtimeinfo import RuntimeInfo
from ..packages import installed
from .libraries import LibraryLookup

# Packages accelerators need beside the runtimes: name -> what for.
HELPER_PACKAGES = {
    "nvidia-ml-py": "NVML: NVIDIA GPU memory, compute capability, power",
    "libtpu": "Cloud TPU runtime for JAX and PyTorch/XLA",
    "rknn-toolkit-lite2": "Rockchip RKNN runtime",
    "hailort": "Hailo runtime",
}


@dataclass(frozen=True)
class Runtimes:
    surveyed: bool
    reason: str | None
    items: tuple[RuntimeInfo, ...] = ()
    libraries: tuple[LibraryLookup, ...] = ()
    packages: dict[str, str | None] = field(default_factory=dict)

    def get(self, name: str) -> RuntimeInfo | None:
        return next((r for r in self.items if r.name == name), None)

    def to_dict(self) -> dict:
        return {"surveyed": self.surveyed, "reason": self.reason, "items": [r.to_dict() for r in self.items],
                "libraries": [lib.to_dict() for lib in self.libraries], "packages": dict(self.packages)}


def helper_packages() -> dict[str, str | None]:
    versions = {}
    for name in HELPER_PACKAGES:
        versions[name] = installed(packages.HELPERS[name])[1]
    return versions


# The runtime survey is assembled above both the probe and the executors (edgeaccel.selection.inventory registers it
# here when imported), so that the probe, which executors ask about hardware, imports no executor.
# The registered survey also judges the accelerators against the runtimes (which runtime reaches which).
_SURVEYS: list[RuntimeSurveyHook] = []


@dataclass(frozen=True)
class RuntimeSurveyHook:
    runtimes: Callable[[], tuple[RuntimeInfo, ...]]
    problems: Callable[[Runtimes, list], list]  # (runtimes, accelerators) -> [Problem]
    views: Callable[[Runtimes, list], list]  # (runtimes, accelerators) -> accelerators noting who reaches them
    plugins: Callable[[], list]  # -> [PluginSeen]: the executor plug-ins family of the report


def register_survey(hook: RuntimeSurveyHook) -> None:
    if hook not in _SURVEYS:
        _SURVEYS.append(hook)


def runtime_problems(runtimes: Runtimes, accelerators: list) -> list:
    return [p for hook in _SURVEYS for p in hook.problems(runtimes, accelerators)]


def with_plugins(report):
    for hook in _SURVEYS:
        report = report.with_plugins(hook.plugins())
    return report


def with_runtime_views(runtimes: Runtimes, accelerators: list) -> list:
    for hook in _SURVEYS:
        accelerators = hook.views(runtimes, accelerators)
    return accelerators


def survey_runtimes(edgetpu: LibraryLookup) -> Runtimes:
    if not _SURVEYS:
        # The layer above registers itself when imported; load it by name, as entry points are loaded, so
        # that edgeaccel.probe() surveys runtimes whatever was imported first (probe/ imports no executor).
        importlib.import_module("edgeaccel.selection.inventory")
    if not _SURVEYS:
        return skipped_runtimes("not surveyed: edgeaccel.selection.inventory, which knows the executors, is not imported "
                                "(edgeaccel.probe() and `edgeaccel probe` import it)", edgetpu)
    items = tuple(item for hook in _SURVEYS for item in hook.runtimes())
    return Runtimes(True, None, items, (edgetpu,), helper_packages())


def skipped_runtimes(reason: str, edgetpu: LibraryLookup) -> Runtimes:
    return Runtimes(False, reason, (), (edgetpu,), {})
