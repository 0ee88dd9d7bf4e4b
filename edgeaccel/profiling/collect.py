"""Profiling one candidate: load it as ``edgeaccel.load`` would (with the runtime's profiling switched on), run
it, and turn what the runtime's collector gathered into an ``ExecutorProfile``.

Each executor class names its collector in ``profiler`` ("module:function"); a plug-in executor can name its
own. A collector is ``collect(job: ProfileJob) -> Collected``: it opens the executor through ``job.open``
(which times the load and passes the runtime's profiling switches as runtime options), runs it through
``job.time_runs`` (warm-up excluded, each run timed around the runtime's inference call) and parses what the
runtime reports. A runtime without a collector gets ``collect_whole_model``: whole-model time only, said so.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import EdgeAccelError
from ..executors.base import Executor, ExecutorOptions
from . import memory
from .schema import ExecutorProfile, OpEvent, OpProfile, RunRecord, aggregate, device_split

if TYPE_CHECKING:
    from ..selector import Candidate


class UtilizationSampler(Protocol):
    """What ``sampler()`` makes: a context manager around the timed runs that then describes them."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> Any: ...

    def summary(self) -> dict: ...

    def lines(self) -> Iterable[str]: ...

PAUSE_S = 0.05  # before each executor: runtime facts, ONNX Runtime's threads spin after a run and bill the next one


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
        self.executor = open_candidate(self.candidate, replace(self.options, runtime_options=merged))
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


def collector_for(cls: type[Executor]) -> Callable[[ProfileJob], Collected]:
    """The executor class's collector ("module:function" in its ``profiler``), or the whole-model one."""
    path = getattr(cls, "profiler", None)
    if not path:
        return collect_whole_model
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def collect_whole_model(job: ProfileJob) -> Collected:
    """For a runtime edgeaccel has no per-operator collector for: the whole-model time, said so."""
    executor = job.open()
    records = job.time_runs(lambda: executor.run(job.inputs))
    label = getattr(type(executor), "label", "") or executor.runtime
    return Collected(records, False, f"{label} gives no per-operator times through edgeaccel: whole-model time only")


def profile_candidate(candidate, options: ExecutorOptions, inputs: Sequence[np.ndarray], runs: int, warmup: int,
                      *, sampler: Callable[[], UtilizationSampler] | None = None,
                      pause_s: float = PAUSE_S) -> ExecutorProfile:
    """Load ``candidate`` with its runtime's profiling on, run it ``warmup`` + ``runs`` times, and describe it."""
    from ..loader import executor_class

    collect = collector_for(executor_class(candidate.runtime))
    time.sleep(pause_s)
    reset = memory.reset_peak()
    before = memory.rss_mb()
    with tempfile.TemporaryDirectory(prefix="edgeaccel-profile-") as workdir:
        job = ProfileJob(candidate, options, list(inputs), runs, warmup, Path(workdir), sampler)
        try:
            collected = collect(job)
            peak = memory.peak_rss_mb()
            if job.executor is None or not collected.records:
                raise EdgeAccelError(f"the profiler of {candidate.runtime} ran nothing (a bug in its collector)",
                                     hint="a collector loads through job.open() and runs through job.time_runs()")
            info = job.executor.info
        finally:
            if job.executor is not None:
                job.executor.close()
    walls = [r.wall_ms for r in collected.records]
    if collected.per_op_available:
        ops = aggregate(collected.records)
    else:
        ops = [OpProfile(e.name, e.op_type, e.device, None, output_bytes=e.output_bytes, kernel=e.kernel)
               for e in collected.listed]
    profile = ExecutorProfile(
        executor=candidate.name, runtime=info.runtime, version=info.version, device=info.device,
        precision=info.precision, threads=info.threads, artifact=str(candidate.artifact.path), runs=runs,
        warmup=warmup, whole_model_ms=float(np.median(walls)), whole_model_p90_ms=float(np.percentile(walls, 90)),
        load_s=job.load_s, peak_rss_mb=peak,
        peak_rss_note=memory.PEAK_NOTE if reset else memory.PEAK_NOTE_UNRESET, rss_before_mb=before,
        per_op_available=collected.per_op_available, note=collected.note, ops=ops, devices=device_split(ops),
        not_executed=collected.not_executed, graph=collected.graph, records=collected.records)
    if job.sampled is not None:
        profile.utilization = job.sampled.summary()
        profile.utilization_lines = list(job.sampled.lines())
    return profile
