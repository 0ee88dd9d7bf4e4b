"""The executor registry: runtime descriptors (runtimes/*.yaml) plus third-party executors that register
through the ``edgeaccel.executors`` entry-point group. Executor classes are imported only when asked for.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .._data import data_dir
from ..errors import ConfigError
from ..modelinfo import Format
from ..schema import Field, load_yaml, validate
from .base import Executor

log = logging.getLogger("edgeaccel.registry")
ENTRY_POINT_GROUP = "edgeaccel.executors"

DEVICE_KINDS = ("cpu", "gpu", "npu", "tpu", "edgetpu", "dsp", "auto")
# The runtimes edgeaccel ships and trusts: calibration's accuracy reference is always computed by one of
# these on the CPU, never by a plug-in that happens to rank first.
BUILTIN_RUNTIMES = frozenset({"litert", "onnxruntime", "openvino", "tensorflow"})


def is_builtin(runtime: str) -> bool:
    return runtime in BUILTIN_RUNTIMES
FORMATS = tuple(f.value for f in Format)
# How one runtime reaches one device. ``via`` is free text for people; the other keys are what code needs:
# the ONNX Runtime execution provider, the LiteRT delegate library, the runtime's own device string, and
# what installs it when that differs from the runtime's (onnxruntime-gpu for CUDA, libedgetpu for Edge TPU).
DEVICE_SCHEMA = {
    "name": Field(str, required=True),
    "kind": Field(str, required=True, choices=DEVICE_KINDS),
    "via": Field(str),
    "provider": Field(str),
    "delegate": Field(str),
    "device_name": Field(str),
    "extra": Field(str),
    "packages": Field([str]),
    "requires": Field(str),  # what pip cannot install (a system library, a driver)
    "formats": Field([str], choices=FORMATS),  # only where the device reads other formats than the runtime
    "planned": Field(bool),  # described, but the executor does not drive it yet: not offered to the selector
}
RUNTIME_SCHEMA = {
    "name": Field(str, required=True),
    "executor": Field(str, required=True),
    "extra": Field(str),
    "packages": Field([str]),
    "formats": Field([str], required=True, choices=FORMATS),
    "devices": Field([DEVICE_SCHEMA], required=True),
    "preference": Field(int, minimum=0),
    "notes": Field(str),
}


@dataclass(frozen=True)
class DeviceTarget:
    """One device a runtime reaches, and how."""

    name: str
    kind: str
    via: str = ""
    provider: str | None = None
    delegate: str | None = None
    device_name: str | None = None
    extra: str | None = None
    packages: tuple[str, ...] = ()
    requires: str | None = None
    formats: frozenset[Format] | None = None  # None: the runtime's formats
    planned: bool = False


@dataclass(frozen=True)
class RuntimeDescriptor:
    name: str
    executor: str  # "module:Class"
    extra: str | None
    packages: tuple[str, ...]
    formats: frozenset[Format]
    devices: tuple[tuple[str, str], ...]  # (device name, kind)
    preference: int
    notes: str = ""
    source: str = ""
    targets: tuple[DeviceTarget, ...] = ()  # every device described, planned ones included

    def target(self, device: str) -> DeviceTarget | None:
        base = device.split(":")[0].split(".")[0]
        return next((t for t in self.targets if t.name == base), None)

    def reads(self, fmt: Format, device: str | None = None) -> bool:
        """Whether the runtime reads ``fmt`` (on ``device``, which may read other formats than the runtime)."""
        target = self.target(device) if device else None
        formats = target.formats if target is not None and target.formats is not None else self.formats
        return fmt in formats

    def device_kind(self, device: str) -> str:
        base = device.split(":")[0].split(".")[0]
        return next((kind for name, kind in self.devices if name == base), "cpu")

    def install_hint(self, device: str | None = None) -> str:
        """What installs the runtime, or its build for ``device`` (CUDA needs onnxruntime-gpu, not onnxruntime)."""
        target = self.target(device) if device else None
        extra, packages = self.extra, self.packages
        if target is not None and (target.extra or target.packages):
            extra, packages = target.extra, target.packages
        hint = f"pip install 'edgeaccel[{extra}]'" if extra else (f"pip install {' '.join(packages)}" if packages
                                                                   else "")
        if target is not None and target.requires:
            hint = f"{hint}; also {target.requires}" if hint else target.requires
        return hint

    def load_class(self) -> type[Executor]:
        module_name, _, class_name = self.executor.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"executor {self.executor!r} cannot be imported: {exc}", path=self.source,
                              key="executor") from exc
        if not (isinstance(cls, type) and issubclass(cls, Executor)):
            raise ConfigError(f"{self.executor!r} is not an Executor subclass", path=self.source, key="executor")
        return cls


def parse_descriptor(data: object, source: str) -> RuntimeDescriptor:
    validate(data, RUNTIME_SCHEMA, source)
    assert isinstance(data, dict)
    if ":" not in data["executor"]:
        raise ConfigError("must be 'module:Class'", path=source, key="executor")
    targets = tuple(_target(d) for d in data["devices"])
    names = [t.name for t in targets]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigError(f"device {name!r} is described twice", path=source, key=f"devices[{i}].name")
    return RuntimeDescriptor(
        name=data["name"],
        executor=data["executor"],
        extra=data.get("extra"),
        packages=tuple(data.get("packages") or ()),
        formats=frozenset(Format(f) for f in data["formats"]),
        # what the selector iterates: the devices the executor drives today
        devices=tuple((t.name, t.kind) for t in targets if not t.planned),
        preference=int(data.get("preference", 50)),
        notes=(data.get("notes") or "").strip(),
        source=source,
        targets=targets,
    )


def _target(d: dict) -> DeviceTarget:
    return DeviceTarget(
        name=d["name"], kind=d["kind"], via=(d.get("via") or "").strip(), provider=d.get("provider"),
        delegate=d.get("delegate"), device_name=d.get("device_name"), extra=d.get("extra"),
        packages=tuple(d.get("packages") or ()), requires=d.get("requires"),
        formats=frozenset(Format(f) for f in d["formats"]) if d.get("formats") else None,
        planned=bool(d.get("planned", False)),
    )


def load_descriptor(path: str | Path) -> RuntimeDescriptor:
    return parse_descriptor(load_yaml(path), str(path))


@functools.lru_cache(maxsize=1)
def runtimes() -> dict[str, RuntimeDescriptor]:
    """Every known runtime by name: the shipped descriptors, then entry-point plug-ins."""
    found: dict[str, RuntimeDescriptor] = {}
    for path in sorted(data_dir("runtimes").glob("*.yaml")):
        desc = load_descriptor(path)
        found[desc.name] = desc
    for desc in _entry_point_descriptors():
        if desc.name in found:
            log.warning("executor plug-in %s ignored: the name is taken by %s", desc.source, found[desc.name].source)
            continue
        found[desc.name] = desc
    return found


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


def _entry_point_descriptors() -> list[RuntimeDescriptor]:
    """Plug-ins point at an Executor subclass; its class attributes describe it."""
    if not _any_plugin_installed():
        return []
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
            out.append(RuntimeDescriptor(
                name=cls.runtime, executor=ep.value, extra=None, packages=(ep.dist.name if ep.dist else ep.name,),
                formats=frozenset(cls.formats), devices=tuple((d, "cpu" if d == "CPU" else "auto") for d in cls.devices),
                preference=int(getattr(cls, "preference", 50)), source=f"entry point {ep.name}",
                targets=tuple(DeviceTarget(d, "cpu" if d == "CPU" else "auto") for d in cls.devices),
            ))
        except Exception as exc:  # a broken plug-in must not break edgeaccel
            log.warning("executor plug-in %s failed to load: %s", ep.name, exc)
    return out
