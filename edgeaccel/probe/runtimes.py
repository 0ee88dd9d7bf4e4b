"""Which inference runtimes are installed, their versions, and which devices each reaches here.

Versions come from package metadata (no import). What a runtime reaches needs it imported: ONNX Runtime's
``get_available_providers()``, OpenVINO's ``Core().available_devices`` (the same cached Core the OpenVINO
executor uses), LiteRT's interpreter plus whether the Edge TPU delegate library is findable and loads.
Importing costs time (the whole survey's budget is about a second), so each import is timed and reported.
Only the real root is surveyed: the Python environment of another root is not this one.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any

from .. import packages
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
class RuntimeInfo:
    name: str  # the executor registry's name: litert, onnxruntime, openvino
    installed: bool
    version: str | None
    package: str | None
    usable: bool
    reaches: tuple[str, ...]  # device names executors use
    reason: str
    fix: str | None = None
    import_ms: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "installed": self.installed, "version": self.version, "package": self.package,
                "usable": self.usable, "reaches": list(self.reaches), "reason": self.reason, "fix": self.fix,
                "import_ms": self.import_ms, "details": dict(self.details)}


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


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def _error(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


def onnxruntime_info() -> RuntimeInfo:
    dist, version = installed(packages.ONNXRUNTIME)
    if dist is None:
        return RuntimeInfo("onnxruntime", False, None, None, False, (), "onnxruntime is not installed",
                           "pip install 'edgeaccel[onnx]'")
    start = time.perf_counter()
    try:
        ort = importlib.import_module("onnxruntime")
        providers = list(ort.get_available_providers())
    except Exception as exc:
        return RuntimeInfo("onnxruntime", True, version, dist, False, (), f"onnxruntime failed to import: "
                           f"{_error(exc)}", f"pip install --force-reinstall {dist}", _ms(start))
    took = _ms(start)
    from ..executors.onnxruntime import PROVIDERS

    by_provider = {names[0]: device for device, names in PROVIDERS.items()}
    reaches = tuple(by_provider[p] for p in providers if p in by_provider)
    return RuntimeInfo("onnxruntime", True, version, dist, True, reaches, f"providers: {', '.join(providers)}",
                       None, took, {"providers": providers})


def openvino_info() -> RuntimeInfo:
    dist, version = installed(packages.OPENVINO)
    if dist is None:
        return RuntimeInfo("openvino", False, None, None, False, (), "openvino is not installed",
                           "pip install 'edgeaccel[openvino]'")
    start = time.perf_counter()
    try:
        from ..executors.openvino import available_devices, core

        devices = list(available_devices())
    except Exception as exc:
        return RuntimeInfo("openvino", True, version, dist, False, (), f"openvino failed to start: {_error(exc)}",
                           f"pip install --force-reinstall {dist}", _ms(start))
    took = _ms(start)
    names = {}
    for device in devices:
        try:
            names[device] = str(core().get_property(device, "FULL_DEVICE_NAME"))
        except Exception:
            names[device] = None
    return RuntimeInfo("openvino", True, version, dist, True, tuple(devices), f"devices: {', '.join(devices)}",
                       None, took, {"devices": names})


def _load_check(library: LibraryLookup) -> str | None:
    """Why the found delegate library fails to load (a missing libusb, a wrong architecture), None if it loads."""
    import ctypes

    try:
        ctypes.CDLL(library.path)
    except OSError as exc:
        return _error(exc)
    return None


def litert_info(edgetpu: LibraryLookup) -> RuntimeInfo:
    dist, version = installed(packages.LITERT)
    details: dict[str, Any] = {"edgetpu_delegate": edgetpu.path, "edgetpu_delegate_loads": None}
    if dist is None:
        return RuntimeInfo("litert", False, None, None, False, (), "no TFLite interpreter is installed",
                           "pip install ai-edge-litert", details=details)
    start = time.perf_counter()
    try:
        from ..executors.litert import interpreter_module

        found = interpreter_module()
    except Exception as exc:
        found = f"failed to import: {_error(exc)}"
    took = _ms(start)
    if isinstance(found, str):
        return RuntimeInfo("litert", True, version, dist, False, (), f"no usable TFLite interpreter: {found}",
                           "pip install -U ai-edge-litert", took, details)
    _, used_dist, used_version = found
    reaches = ["CPU"]
    reason = f"{used_dist} interpreter with XNNPACK"
    fix = None
    if edgetpu.found:
        failure = _load_check(edgetpu)
        details["edgetpu_delegate_loads"] = failure is None
        if failure is None:
            reaches.append("EdgeTPU")
            reason += f"; Edge TPU delegate {edgetpu.path}"
        else:
            details["edgetpu_delegate_error"] = failure
            reason += f"; Edge TPU delegate {edgetpu.path} does not load: {failure}"
            fix = "reinstall libedgetpu1-std and its dependency libusb-1.0-0 (sudo apt-get install --reinstall " \
                  "libedgetpu1-std libusb-1.0-0)"
    else:
        reason += f"; no Edge TPU delegate ({edgetpu.filename} not found)"
    return RuntimeInfo("litert", True, used_version, used_dist, True, tuple(reaches), reason, fix, took, details)


def survey_runtimes(edgetpu: LibraryLookup) -> Runtimes:
    items = []
    for probe_one in (lambda: litert_info(edgetpu), onnxruntime_info, openvino_info):
        try:
            items.append(probe_one())
        except Exception as exc:  # the last guard: a runtime that misbehaves becomes a reason
            items.append(RuntimeInfo("?", False, None, None, False, (), f"survey failed: {_error(exc)}"))
    return Runtimes(True, None, tuple(items), (edgetpu,), helper_packages())


def skipped_runtimes(reason: str, edgetpu: LibraryLookup) -> Runtimes:
    return Runtimes(False, reason, (), (edgetpu,), {})
