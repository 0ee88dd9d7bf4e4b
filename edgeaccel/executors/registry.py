"""The executor registry: runtime descriptors (runtimes/*.yaml) plus third-party executors that register
through the ``edgeaccel.executors`` entry-point group. Executor classes are imported only when asked for.
"""

from __future__ import annotations

import functools
import importlib
import logging
from dataclasses import dataclass
from pathlib import Path

from .._data import data_dir
from ..errors import ConfigError
from ..modelinfo import Format
from ..schema import Field, load_yaml, validate
from .base import Executor

log = logging.getLogger("edgeaccel.registry")
ENTRY_POINT_GROUP = "edgeaccel.executors"

DEVICE_KINDS = ("cpu", "gpu", "npu", "tpu", "edgetpu", "auto")
RUNTIME_SCHEMA = {
    "name": Field(str, required=True),
    "executor": Field(str, required=True),
    "extra": Field(str),
    "packages": Field([str]),
    "formats": Field([str], required=True, choices=tuple(f.value for f in Format)),
    "devices": Field([{"name": Field(str, required=True), "kind": Field(str, required=True, choices=DEVICE_KINDS),
                       "via": Field(str)}], required=True),
    "preference": Field(int, minimum=0),
    "notes": Field(str),
}


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

    def device_kind(self, device: str) -> str:
        base = device.split(":")[0].split(".")[0]
        return next((kind for name, kind in self.devices if name == base), "cpu")

    def install_hint(self) -> str:
        return f"pip install 'edgeaccel[{self.extra}]'" if self.extra else f"pip install {' '.join(self.packages)}"

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
    return RuntimeDescriptor(
        name=data["name"],
        executor=data["executor"],
        extra=data.get("extra"),
        packages=tuple(data.get("packages") or ()),
        formats=frozenset(Format(f) for f in data["formats"]),
        devices=tuple((d["name"], d["kind"]) for d in data["devices"]),
        preference=int(data.get("preference", 50)),
        notes=(data.get("notes") or "").strip(),
        source=source,
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


def _entry_point_descriptors() -> list[RuntimeDescriptor]:
    """Plug-ins point at an Executor subclass; its class attributes describe it."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
            out.append(RuntimeDescriptor(
                name=cls.runtime, executor=ep.value, extra=None, packages=(ep.dist.name if ep.dist else ep.name,),
                formats=frozenset(cls.formats), devices=tuple((d, "cpu" if d == "CPU" else "auto") for d in cls.devices),
                preference=int(getattr(cls, "preference", 50)), source=f"entry point {ep.name}",
            ))
        except Exception as exc:  # a broken plug-in must not break edgeaccel
            log.warning("executor plug-in %s failed to load: %s", ep.name, exc)
    return out
