"""Timing several executors side by side so that the figures agree with a separate side-by-side measurement.

What made calibration's figures differ from an independent one (tools/calibration_fidelity.py): a block size sized
from the first, cold call (a runtime's first inference can take 10x a warm one, so a fast candidate got three calls
per block, one of them right after a pause); candidates always timed in the same order; and two leaders within the
noise decided by chance. So each candidate is warmed first and its block sized from warm calls; blocks alternate in
order (forward, then backward) with a pause before each (docs/runtime-facts.md: a runtime's threads can stay busy
after a run, as ONNX Runtime's spin where a session's stop is off, and bill whoever runs next) and one untimed
call after it; and when the two fastest are within the noise they are timed again head to head in adjacent pairs
of blocks, the decision resting on the median of the pairs' ratios.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import EdgeAccelError
from ..executors.base import Executor

PAUSE_S = 0.05
MIN_BLOCK_CALLS = 5
MIN_BLOCKS = 6  # blocks per candidate before its median counts as stable, budget permitting
OVERRUN = 3  # timing may run to this multiple of its budget to reach min_runs and MIN_BLOCKS
MAX_BLOCK_CALLS = 200
NOISE_FLOOR = 0.05  # two medians closer than this (relative) are never trusted to rank by themselves

Runner = tuple[str, Executor, Sequence[Sequence[np.ndarray]]]


@dataclass
class Timing:
    """Seconds per timed call, the median of each block, and the error that stopped the candidate."""

    calls: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)
    per_call: float = 0.0
    error: EdgeAccelError | None = None

    def summary_ms(self) -> dict:
        ms = np.asarray(self.calls) * 1e3
        q25, q75 = np.percentile(ms, [25, 75]) if ms.size else (0.0, 0.0)  # read only when ms.size
        return {"p10_ms": _r(np.percentile(ms, 10)) if ms.size else None,
                "p50_ms": _r(np.median(ms)) if ms.size else None,
                "p90_ms": _r(np.percentile(ms, 90)) if ms.size else None,
                "iqr_ms": _r(q75 - q25) if ms.size else None, "runs": int(ms.size), "blocks": len(self.blocks)}

    def block_noise(self) -> float:
        """Relative interquartile range of the block medians: how much one block's figure wanders."""
        if len(self.blocks) < 2:
            return 1.0
        q25, q50, q75 = np.percentile(self.blocks, [25, 50, 75])
        return float((q75 - q25) / q50) if q50 > 0 else 1.0


def _r(value) -> float:
    return round(float(value), 4)


def measure(runners: Sequence[Runner], budget_s: float, block_s: float = 0.05, max_rounds: int = 16,
            min_runs: int = 20, warmup_s: float = 0.1,
            clock: Callable[[], float] = time.perf_counter, pause_s: float = PAUSE_S,
            stop=None, before_block: Callable[[], None] | None = None) -> dict[str, Timing]:
    """Time each runner in alternating blocks until ``budget_s`` is spent and each has ``min_runs`` calls in
    ``MIN_BLOCKS`` blocks (up to ``OVERRUN`` times the budget), or ``max_rounds`` rounds are done. A runner that
    raises stops with its error."""
    timings = {key: Timing() for key, _, _ in runners}
    live = []
    for key, executor, samples in runners:
        try:
            timings[key].per_call = _warm(executor, samples, warmup_s, clock)
            live.append((key, executor, samples))
        except EdgeAccelError as exc:
            timings[key].error = exc
    started = clock()
    for round_no in range(max_rounds):
        if stop is not None and stop.is_set():  # the caller ends it early (a closed model, interpreter exit)
            break
        order = live if round_no % 2 == 0 else live[::-1]
        for key, executor, samples in list(order):
            try:
                _block(timings[key], executor, samples, block_s, clock, pause_s, before_block)
            except EdgeAccelError as exc:
                timings[key].error = exc
                live = [r for r in live if r[0] != key]
        spent = clock() - started
        enough = all(len(timings[k].calls) >= min_runs and len(timings[k].blocks) >= MIN_BLOCKS for k, _, _ in live)
        if spent > OVERRUN * budget_s or (spent > budget_s and enough):
            break
    return timings


def head_to_head(a: Runner, b: Runner, budget_s: float, block_s: float = 0.05, min_pairs: int = 6,
                 max_pairs: int = 40, clock: Callable[[], float] = time.perf_counter, pause_s: float = PAUSE_S,
                 stop=None, before_block: Callable[[], None] | None = None) -> tuple[Timing, Timing, float | None]:
    """``a`` and ``b`` timed in adjacent pairs of blocks (a b, b a, ...); returns both timings and the median
    ratio a/b of the pairs' block medians, the figure a side-by-side comparison gives (None when one of them
    failed: its Timing carries the error)."""
    ta, tb = Timing(), Timing()
    ratios: list[float] = []
    started = clock()
    for pair in range(max_pairs):
        if stop is not None and stop.is_set() and ratios:
            break
        first, second = ((ta, a), (tb, b)) if pair % 2 == 0 else ((tb, b), (ta, a))
        for timing, (_, executor, samples) in (first, second):
            try:
                if not timing.per_call:
                    timing.per_call = _warm(executor, samples, 0.02, clock)
                _block(timing, executor, samples, block_s, clock, pause_s, before_block)
            except EdgeAccelError as exc:
                timing.error = exc
                return ta, tb, None
        ratios.append(ta.blocks[-1] / tb.blocks[-1])
        if pair + 1 >= min_pairs and clock() - started > budget_s:
            break
    return ta, tb, float(np.median(ratios))


def within_noise(a: Timing, b: Timing) -> bool:
    pa, pb = float(np.median(a.calls)), float(np.median(b.calls))
    gap = abs(pa - pb) / min(pa, pb) if min(pa, pb) > 0 else 0.0
    return gap < max(NOISE_FLOOR, a.block_noise(), b.block_noise())


def _warm(executor: Executor, samples, warmup_s: float, clock) -> float:
    """Untimed calls until ``warmup_s`` has passed (at least two); the median warm call, for block sizes."""
    calls: list[float] = []
    end = clock() + warmup_s
    while len(calls) < 2 or (clock() < end and len(calls) < MAX_BLOCK_CALLS):
        x = samples[len(calls) % len(samples)]
        start = clock()
        executor.run(x)
        calls.append(clock() - start)
    return max(float(np.median(calls[1:])), 1e-6)


def _block(timing: Timing, executor: Executor, samples, block_s: float, clock, pause_s: float = PAUSE_S,
           before_block: Callable[[], None] | None = None) -> None:
    time.sleep(pause_s)
    if before_block is not None:  # background calibration: waits while the model serves
        before_block()
    executor.run(samples[0])  # untimed: wakes the runtime's threads after the pause
    n = max(MIN_BLOCK_CALLS, min(MAX_BLOCK_CALLS, int(block_s / timing.per_call)))
    block = []
    for i in range(n):
        x = samples[i % len(samples)]
        start = clock()
        executor.run(x)
        block.append(clock() - start)
    timing.calls.extend(block)
    timing.blocks.append(float(np.median(block)))
