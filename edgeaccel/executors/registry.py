"""The executor registry: one table from runtime name to executor class (as fsspec's registry keeps one from
protocol to class path), plus third-party executors from the ``edgeaccel.executors`` entry-point group.

Every runtime's facts live on its class (``Executor``: formats, devices and their kinds, precisions, what
installs it, its survey and error rules), so what is registered here is only where each class is. Importing an
executor module imports no runtime. A plug-in that fails to import or declares itself wrongly is listed in
``broken()`` with its error (``edgeaccel probe`` shows it) and never breaks edgeaccel.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from dataclasses import dataclass

from ..errors import ConfigError
from .base import Executor
from .facts import DEVICE_KINDS, DeviceSpec

log = logging.getLogger("edgeaccel.registry")
ENTRY_POINT_GROUP = "edgeaccel.executors"

# name -> "module:Class". The runtimes edgeaccel ships and trusts: calibration's accuracy reference is always
# computed by one of these on the CPU, never by a plug-in that happens to rank first.
BUILTIN = {
    "litert": "edgeaccel.executors.litert:LiteRTExecutor",
    "onnxruntime": "edgeaccel.executors.onnxruntime:OnnxRuntimeExecutor",
    "openvino": "edgeaccel.executors.openvino:OpenVINOExecutor",
    "tensorflow": "edgeaccel.executors.tensorflow:TensorFlowExecutor",
    "tensorrt": "edgeaccel.executors.tensorrt:TensorRTExecutor",
}
BUILTIN_RUNTIMES = frozenset(BUILTIN)


def is_builtin(runtime: str) -> bool:
    return runtime in BUILTIN_RUNTIMES


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry-point plug-in that could not be registered, and why."""

    name: str  # the entry point's name
    target: str  # "module:Class"
    distribution: str | None
    error: str

    def __str__(self) -> str:
        where = f" (from {self.distribution})" if self.distribution else ""
        return f"executor plug-in {self.name}{where}: {self.error}"


def runtimes() -> dict[str, type[Executor]]:
    """Every usable executor class by runtime name: the built-ins, then entry-point plug-ins."""
    return dict(_registered()[0])


def broken() -> tuple[BrokenPlugin, ...]:
    """Plug-ins found but not registered, each with its error."""
    return _registered()[1]


def get(name: str) -> type[Executor]:
    found = _registered()[0]
    if name not in found:
        raise KeyError(name)
    return found[name]


def plugin_distribution(name: str) -> str | None:
    """The distribution that installed plug-in runtime ``name``; None for a built-in."""
    return _registered()[2].get(name)


def installed_version(name: str) -> str | None:
    """The installed version of runtime ``name``: its class's ``distributions``, else, for a plug-in that names
    none, the distribution that registered it (it is installed: it was just loaded from it)."""
    version = get(name).installed()
    dist = plugin_distribution(name)
    if version is None and dist is not None:
        from importlib.metadata import PackageNotFoundError, version as dist_version

        try:
            return dist_version(dist)
        except PackageNotFoundError:
            return "unknown"
    return version


def refresh() -> None:
    """Forget what was registered (tests install plug-ins while running)."""
    _registered.cache_clear()


@functools.lru_cache(maxsize=1)
def _registered() -> tuple[dict[str, type[Executor]], tuple[BrokenPlugin, ...], dict[str, str | None]]:
    found: dict[str, type[Executor]] = {}
    for name, target in BUILTIN.items():
        found[name] = load_class(target, f"built-in {name}")
    bad: list[BrokenPlugin] = []
    dists: dict[str, str | None] = {}
    for ep_name, target, dist, load in _entry_points():
        try:
            cls = load()
            check_plugin(cls, target)
            if cls.runtime in found:
                raise ConfigError(f"its runtime name {cls.runtime!r} is taken by {found[cls.runtime].__module__}")
        except Exception as exc:  # a broken plug-in must not break edgeaccel
            problem = BrokenPlugin(ep_name, target, dist, exc.message if isinstance(exc, ConfigError) else
                                   f"{type(exc).__name__}: {exc}")
            log.warning("%s", problem)
            bad.append(problem)
            continue
        found[cls.runtime] = cls
        dists[cls.runtime] = dist
    return found, tuple(bad), dists


def load_class(target: str, source: str) -> type[Executor]:
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"executor {target!r} cannot be imported: {exc}", path=source, key="executor") from exc
    check_plugin(cls, target)
    return cls


def check_plugin(cls: object, target: str) -> None:
    """What a class needs to be ranked like a built-in; ConfigError naming what is missing."""
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise ConfigError(f"{target!r} is not a subclass of edgeaccel.executors.Executor")
    for attr in ("runtime", "formats"):
        if not getattr(cls, attr, None):
            raise ConfigError(f"{target!r} does not set the class attribute {attr!r}")
    if getattr(cls, "__abstractmethods__", None):
        raise ConfigError(f"{target!r} does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    wrong = [s for s in cls.device_specs if not isinstance(s, DeviceSpec)]
    if wrong:
        raise ConfigError(f"{target!r} declares {wrong[0]!r}: device_specs must be DeviceSpec(name, kind) "
                          "objects, e.g. (DeviceSpec('Hailo8', 'npu'),)")
    for name, kind in cls.device_kinds.items():
        if kind not in DEVICE_KINDS:
            raise ConfigError(f"{target!r} declares device {name!r} of kind {kind!r}; kinds are "
                              f"{', '.join(DEVICE_KINDS)}")
    if cls.kindless_devices:
        raise ConfigError(f"{target!r} lists devices {list(cls.kindless_devices)} without their kinds: declare "
                          "device_specs, e.g. (DeviceSpec('Hailo8', 'npu'),)")


def _any_plugin_installed() -> bool:
    """A cheap look for the group in installed distributions' entry_points.txt: importlib.metadata costs
    ~6 MB of imports (email, zipfile, csv), too much to pay on every load when no plug-in is installed."""
    marker = f"[{ENTRY_POINT_GROUP}]"
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(folder or ".", name, "entry_points.txt"), encoding="utf-8") as f:
                        if marker in f.read():
                            return True
                except OSError:
                    continue
    return False


def _entry_points():
    if not _any_plugin_installed():
        return []
    from importlib.metadata import entry_points

    return [(ep.name, ep.value, ep.dist.name if ep.dist else None, ep.load)
            for ep in entry_points(group=ENTRY_POINT_GROUP)]
