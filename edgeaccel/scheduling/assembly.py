"""What a ScheduledModel is assembled from, before anything runs: one slot per executor (a unique name, the
device it occupies, how many requests it takes at once, the power it draws) and the sensors to read for each
device. Kept apart from model.py, which runs requests through them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..executors.base import Executor
from ..telemetry.sensors import SensorSpec
from .core import ExecutorSlot
from .devices import place, sensors_for
from .energy import PowerFigure, power_figures


def executor_slots(executors: Sequence[Executor], max_concurrency: int | dict | None,
                   power: dict[str, PowerFigure] | None, profile: Any, root: Path) -> tuple[list[ExecutorSlot], dict]:
    """The scheduler's slots, and where each executor was placed (by slot name)."""
    names = unique_names(executors)
    placed = {name: place(executor) for name, executor in zip(names, executors)}
    figures = dict(power) if power is not None else power_figures(
        {name: (executor, placed[name]) for name, executor in zip(names, executors)}, profile, root)
    slots = []
    for name, executor in zip(names, executors):
        conc = max_concurrency.get(name) if isinstance(max_concurrency, dict) else max_concurrency
        slot = ExecutorSlot(name, placed[name].domain, int(conc or executor.concurrency),
                            getattr(executor, "nominal_latency_s", None), executor)
        slot.power = figures.get(name)
        slots.append(slot)
    return slots, placed


def sensor_specs(devices: list[str], sensors: dict[str, SensorSpec] | None, root: Path, nvml: Any,
                 placements: list) -> dict[str, SensorSpec]:
    """The sensors of each device: the caller's, else those found below ``root``; a note where none is."""
    specs = dict(sensors) if sensors is not None else sensors_for(devices, root, nvml, placements)
    for device in devices:
        specs.setdefault(device, SensorSpec(notes=(f"no sensors named for {device}",)))
    return {d: specs[d] for d in devices}


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
