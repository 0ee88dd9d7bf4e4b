"""Placement: each stage's ``load`` chooses the best executor for that model alone, so two stages often land on
the same device (the fastest one), where they take turns. A cascade's rate is its slowest device's: the sum of
the per-frame times of the stages on it. ``place`` measures each stage where it loaded, and moves a stage that
shares its device onto the next device its own ranking offers (one no other stage uses) when that makes the
slowest device at least 5% faster; every move, and every try that was not worth it, is said.

A stage's time is one call on its inputs (a later stage runs once per crop, so per frame it costs that many
calls: the estimate counts one, the usual case of landmarks on one face or one hand)."""

from __future__ import annotations

import time

from ..errors import EdgeAccelError

GAIN = 0.95  # a move must bring the slowest device to at most this share of its time
CALLS = 5  # timed calls per measurement, after one untimed


def measure_ms(model) -> float:
    """Median time of one call of ``model`` on zero inputs (ms)."""
    from ..vision.preprocess import zeros_for

    arrays = [zeros_for(spec) for spec in model.inputs]
    model.run(arrays)
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        model.run(arrays)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def slowest_device_ms(devices: list[str], times: list[float]) -> float:
    per_device: dict[str, float] = {}
    for device, ms in zip(devices, times, strict=True):
        per_device[device] = per_device.get(device, 0.0) + ms
    return max(per_device.values())


def place(stages: list) -> list[str]:
    """Move stages between devices as the module says; the notes of what it measured and did."""
    from ..load_keywords import from_flat
    from ..loader import load

    times = [measure_ms(s.model) for s in stages]
    notes = [f"{s.name}: {s.executor_name} {t:.2f} ms a call" for s, t in zip(stages, times, strict=True)]
    for i in reversed(range(len(stages))):
        stage = stages[i]
        devices = [s.device for s in stages]
        others = set(devices[:i] + devices[i + 1:])
        if stage.device not in others or not stage.owned or {"executor", "device"} & set(stage.load_options):
            continue  # alone on its device, given loaded, or pinned by the user
        before = slowest_device_ms(devices, times)
        ranking = getattr(stage.model, "ranking", None)
        for candidate in ranking.candidates if ranking is not None else []:
            if candidate.device in others or candidate.device == stage.device:
                continue
            options = {**stage.load_options, "executor": candidate.runtime, "device": candidate.device}
            if candidate.precision:
                options["precision"] = candidate.precision
            try:
                moved = load(stage.source, **from_flat(options))
            except EdgeAccelError as exc:
                notes.append(f"{stage.name}: {candidate.name} did not load ({exc.message})")
                continue
            ms = measure_ms(moved)
            trial_devices = devices[:i] + [moved.executor.device] + devices[i + 1:]
            trial_times = times[:i] + [ms] + times[i + 1:]
            after = slowest_device_ms(trial_devices, trial_times)
            if after <= before * GAIN:
                notes.append(f"{stage.name}: moved from {stage.executor_name} (shared with another stage) to "
                             f"{moved.executor.name}, {ms:.2f} ms a call: slowest device {before:.2f} -> "
                             f"{after:.2f} ms a frame")
                stage.model.close()
                stage.model = moved
                times[i] = ms
                break
            notes.append(f"{stage.name}: stays on {stage.executor_name}: on {moved.executor.name} ({ms:.2f} ms) "
                         f"the slowest device would take {after:.2f} ms a frame, not less than {before:.2f}")
            moved.close()
    return notes
