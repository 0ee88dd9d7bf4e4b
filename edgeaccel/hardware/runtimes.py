"""The report's runtimes section: which inference runtimes are installed and what each reaches here.

What each runtime reaches is its executor's own ``survey()`` (edgeaccel/executors); the hardware survey imports
no executor, so the caller hands it a ``RuntimeSurveyHook`` (``edgeaccel.probe()`` passes
``edgeaccel.selection.inventory.RUNTIME_SURVEY``). Only the real root is surveyed: the Python environment of
another root is not this one.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class RuntimeSurveyHook:
    """What the layer that knows the executors hands to the hardware survey; it also judges the accelerators
    against the runtimes (which runtime reaches which)."""

    runtimes: Callable[[], tuple[RuntimeInfo, ...]]
    problems: Callable[[Runtimes, list], list]  # (runtimes, accelerators) -> [Problem]
    views: Callable[[Runtimes, list], list]  # (runtimes, accelerators) -> accelerators noting who reaches them
    plugins: Callable[[], list]  # -> [PluginSeen]: the executor plug-ins family of the report


def survey_runtimes(edgetpu: LibraryLookup, hook: RuntimeSurveyHook) -> Runtimes:
    return Runtimes(True, None, tuple(hook.runtimes()), (edgetpu,), helper_packages())


def skipped_runtimes(reason: str, edgetpu: LibraryLookup) -> Runtimes:
    return Runtimes(False, reason, (), (edgetpu,), {})
