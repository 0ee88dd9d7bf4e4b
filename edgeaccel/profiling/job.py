"""What a runtime's collector works with: the ``ProfileJob`` it is handed and the ``Collected`` it returns.

A collector is ``collect(job: ProfileJob) -> Collected``: it opens the executor through ``job.open`` (which
times the load and passes the runtime's profiling switches as runtime options), runs it through
``job.time_runs`` (warm-up excluded, each run timed around the runtime's inference call) and parses what the
runtime reports. These types sit apart from the driver (``collect.py``), which picks each runtime's collector,
so that the collectors import them without importing the driver that imports them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..executors.base import Executor, ExecutorOptions
from .schema import OpEvent, RunRecord

if TYPE_CHECKING:
    from ..selection.selector import Candidate


class UtilizationSampler(Protocol):
    """What ``sampler()`` makes: a context manager around the timed runs that then describes them."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> Any: ...

    def summary(self) -> dict: ...

    def lines(self) -> Iterable[str]: ...


@dataclass
class Collected:
    """What a runtime's collector gathered: per timed run, the whole-model time and the operators it timed."""

    records: list[RunRecord]
    per_op_available: bool
    note: str
    graph: dict = field(default_factory=dict)
    not_executed: int = 0
    listed: list[OpEvent] = field(default_factory=list)  # the operators, where the runtime times none of them


@dataclass
class ProfileJob:
    """One candidate to profile and how: the collector's view of the driver."""

    candidate: Candidate  # runtime, device, artifact
    options: ExecutorOptions
    inputs: Sequence[np.ndarray]
    runs: int
    warmup: int
    workdir: Path
    sampler: Callable[[], UtilizationSampler] | None = None  # made around the timed runs (utilization)
    clock: Callable[[], float] = time.perf_counter
    load_s: float = 0.0
    executor: Executor | None = None
    sampled: UtilizationSampler | None = None
    t0: float = field(default_factory=time.perf_counter)

    def open(self, **runtime_options) -> Executor:
        """The candidate's executor, loaded with the job's options plus ``runtime_options`` (a runtime's
        profiling switches; nested dicts such as OpenVINO's "config" are merged, the caller's keys kept)."""
        from ..loader import open_candidate
        from ..tensors import InputBinder

        merged = dict(self.options.runtime_options)
        for key, value in runtime_options.items():
            merged[key] = {**value, **merged.get(key, {})} if isinstance(value, dict) else value
        start = self.clock()
        self.executor = open_candidate(self.candidate, self.options.with_runtime(native=merged))
        self.load_s = self.clock() - start
        self.inputs = InputBinder(self.executor.inputs).bind(list(self.inputs))
        return self.executor

    def time_runs(self, run_once: Callable[[], object],
                  after: Callable[[int, RunRecord | None], None] | None = None) -> list[RunRecord]:
        """``warmup`` untimed calls, then ``runs`` timed ones (inside the utilization sampler when there is one);
        ``after(k, record)`` is called after each timed run, outside its timing (k counts every call, warm-up
        included, from 1; the record is None after a warm-up call)."""
        for k in range(1, self.warmup + 1):
            run_once()
            if after is not None:
                after(k, None)
        records = []
        sampler = self.sampler() if self.sampler is not None else None
        if sampler is not None:
            sampler.__enter__()
        try:
            for k in range(self.warmup + 1, self.warmup + self.runs + 1):
                start = self.clock()
                run_once()
                end = self.clock()
                record = RunRecord(start - self.t0, (end - start) * 1e3)
                records.append(record)
                if after is not None:
                    after(k, record)
        finally:
            if sampler is not None:
                sampler.__exit__(None, None, None)
                self.sampled = sampler
        return records
