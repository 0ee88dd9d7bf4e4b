"""Profiling one candidate: load it as ``edgeaccel.load`` would (with the runtime's profiling switched on), run
it, and turn what the runtime's collector gathered into an ``ExecutorProfile``.

The built-in runtimes' collectors are listed here (``BUILTIN_COLLECTORS``), beside them, so that no executor
names a profiling module (profiling sits above the executors); a plug-in executor names its own in its class's
``profiler`` ("module:function"). A collector is ``collect(job: ProfileJob) -> Collected`` (``job.py``). A
runtime without a collector gets ``collect_whole_model``: whole-model time only, said so.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..errors import EdgeAccelError
from ..executors.base import Executor, ExecutorOptions
from . import memory
from .job import Collected, ProfileJob, UtilizationSampler
from .schema import ExecutorProfile, OpProfile, aggregate, device_split


PAUSE_S = 0.05  # before each executor: a runtime's threads busy after a run bill the next one (runtime facts)


# built-in executor class -> its collector ("module:function" both); a subclass (a plug-in built on one) inherits it
BUILTIN_COLLECTORS: dict[str, str] = {
    "edgeaccel.executors.litert:LiteRTExecutor": "edgeaccel.profiling.litert:collect",
    "edgeaccel.executors.onnxruntime:OnnxRuntimeExecutor": "edgeaccel.profiling.onnxruntime:collect",
    "edgeaccel.executors.openvino:OpenVINOExecutor": "edgeaccel.profiling.openvino:collect",
}


def collector_for(cls: type[Executor]) -> Callable[[ProfileJob], Collected]:
    """The collector a plug-in class names ("module:function" in its ``profiler``), else that of the built-in
    class it is or extends, else the whole-model one."""
    path = getattr(cls, "profiler", None) or next(
        (BUILTIN_COLLECTORS[key] for key in (f"{k.__module__}:{k.__qualname__}" for k in cls.__mro__)
         if key in BUILTIN_COLLECTORS), None)
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
