"""Executor classes described by a table, for selector tests that need facts and no runtime."""

from __future__ import annotations

from edgeaccel.executors import Availability, Executor, ExecutorInfo
from edgeaccel.executors.facts import DeviceSpec
from edgeaccel.modelinfo import Format


def described(name: str, formats: list[str], devices: list[dict], preference: int = 50, extra: str | None = None,
              presence: str = "probe", **attrs) -> type[Executor]:
    """An Executor subclass that only declares facts (``devices``: DeviceSpec fields as dicts)."""
    targets = tuple(DeviceSpec(**{**d, "formats": frozenset(Format(f) for f in d["formats"])} if "formats" in d
                                 else d) for d in devices)

    def nothing(*_args, **_kwargs):
        raise AssertionError("a described executor never runs")

    namespace = {"runtime": name, "formats": frozenset(Format(f) for f in formats), "device_specs": targets,
                 "preference": preference, "extra": extra, "presence": presence,
                 "availability": classmethod(lambda cls, device=None: Availability(True, "described")),
                 "info": property(lambda self: ExecutorInfo(name, "0", self.device, "f32")),
                 "run": nothing, "close": nothing, **attrs}
    return type(f"Described_{name}", (Executor,), namespace)


def table(*rows: dict) -> dict[str, type[Executor]]:
    return {row["name"]: described(**row) for row in rows}
