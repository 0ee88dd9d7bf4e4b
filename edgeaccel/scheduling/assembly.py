"""What a ScheduledModel is made of (scheduling/model.py): one slot per executor (a unique name, the device it
runs on, how many requests it takes at once, the power its device draws busy) and the sensors of each device.
Executors of one scheduled model must take the same inputs: checked here, before anything is started."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..executors.base import Executor
from ..telemetry.sensors import SensorSpec
from .devices import Placement, place, sensors_for
from .energy import PowerFigure, power_figures
from .slots import ExecutorSlot


def build_slots(executors: Sequence[Executor], max_concurrency: int | dict | None,
                power: dict[str, PowerFigure] | None, profile: Any | None,
                root: Path) -> tuple[list[ExecutorSlot], list[Placement]]:
    """(one slot per executor, where each was placed); ``power`` overrides the figures found from ``profile``."""
    names = unique_names(executors)
    placed = {name: place(executor) for name, executor in zip(names, executors, strict=True)}
    figures = dict(power) if power is not None else power_figures(
        {name: (executor, placed[name]) for name, executor in zip(names, executors, strict=True)}, profile, root)
    slots = []
    for name, executor in zip(names, executors, strict=True):
        conc = max_concurrency.get(name) if isinstance(max_concurrency, dict) else max_concurrency
        slot = ExecutorSlot(name, placed[name].domain, int(conc or executor.concurrency),
                            getattr(executor, "nominal_latency_s", None), executor)
        slot.power = figures.get(name)
        slots.append(slot)
    return slots, list(placed.values())


def sensor_specs(devices: list[str], sensors: dict[str, SensorSpec] | None, root: Path, nvml: Any | None,
                 placed: list[Placement]) -> dict[str, SensorSpec]:
    """The sensors of each device: those given, else those found below ``root``; a device with none says so."""
    specs = dict(sensors) if sensors is not None else sensors_for(devices, root, nvml, placed)
    for device in devices:
        specs.setdefault(device, SensorSpec(notes=(f"no sensors named for {device}",)))
    return specs


def unique_names(executors: Sequence[Executor]) -> list[str]:
    names: list[str] = []
    for executor in executors:
        base = getattr(executor, "name", None) or executor.info.name
        name, n = base, 2
        while name in names:
            name, n = f"{base}#{n}", n + 1
        names.append(name)
    return names


def check_same_inputs(executors: Sequence[Executor]) -> None:
    first = executors[0]
    want = [(t.dtype, tuple(t.shape)) for t in first.inputs]
    for other in executors[1:]:
        got = [(t.dtype, tuple(t.shape)) for t in other.inputs]
        if got != want:
            raise ValueError(
                f"{other.info.name} takes inputs {got}, {first.info.name} takes {want}: one scheduled model needs "
                "executors of the same model (same input dtypes and shapes); pass artifacts of one model")
