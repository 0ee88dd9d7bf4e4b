"""OpenVINO's performance counters: ``PERF_COUNT`` at compile time, ``InferRequest.get_profiling_info()``.

The executor is loaded as ``edgeaccel.load`` loads it, with ``PERF_COUNT`` added to its compile config, and
the runs go through an infer request of that compiled model. Each ProfilingInfo names a node of the compiled
graph (node_name, node_type, exec_type: the kernel), its status (EXECUTED, NOT_RUN, OPTIMIZED_OUT) and its
real_time in whole microseconds.

Measured with openvino 2026.4 on the CPU: real_time is the node's average over every inference of the compiled
model so far, not the last one (the differences of the running total match the whole-model time run by run).
So run k's time per node is k * avg_k - (k - 1) * avg_(k-1), to within k microseconds. Other plugins may report
the last inference instead; both readings are made, and the one whose per-run operator sums follow the
measured run times more closely (smaller spread of their ratio) is kept and named in ``graph``.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..errors import EdgeAccelError
from .job import Collected, ProfileJob
from .schema import OpEvent

EXECUTED = "EXECUTED"
RUNNING_AVERAGE, PER_INFERENCE = "running average", "per inference"


def collect(job: ProfileJob) -> Collected:
    try:
        executor = job.open(config={"PERF_COUNT": True})
    except EdgeAccelError as exc:  # a plugin that refuses performance counters: whole-model time, said so
        executor = job.open()
        records = job.time_runs(lambda: executor.run(job.inputs))
        return Collected(records, False, f"OpenVINO on {executor.device} refused PERF_COUNT ({exc.message}): "
                         "whole-model time only")
    from ..executors.openvino import OpenVINOExecutor  # loaded already: it is the class being profiled

    request = cast(OpenVINOExecutor, executor).new_request()  # collector_for chose this collector by its class
    request.feed(job.inputs)
    devices = executor.info.details.get("execution_devices") or [executor.device]
    device = devices[0] if len(devices) == 1 else "/".join(devices)
    snapshots: list[list] = []  # get_profiling_info after every call, warm-up included
    records = job.time_runs(request.request.infer,
                            lambda k, record: snapshots.append(request.request.get_profiling_info()))
    semantics, per_run = read_counters(snapshots, job.warmup, [r.wall_ms for r in records], device)
    for record, ops in zip(records, per_run, strict=True):
        record.ops = ops
    statuses = [status_name(info.status) for info in snapshots[-1]]
    skipped = {s: statuses.count(s) for s in set(statuses) if s != EXECUTED}
    graph = {"execution_devices": devices, "not_executed_by_status": skipped, "counters": semantics}
    precision = f", to within {len(snapshots)} us per node" if semantics == RUNNING_AVERAGE else ""
    note = (f"OpenVINO performance counters (real_time per node of the compiled graph, read as a {semantics}"
            f"{precision})")
    return Collected(records, True, note, graph, not_executed=sum(skipped.values()))


def read_counters(snapshots: list[list], warmup: int, walls_ms: list[float], device: str
                  ) -> tuple[str, list[list[OpEvent]]]:
    """Per timed run its executed nodes, under the reading of the counters whose per-run sums track the
    measured run times best: (which reading, events per run)."""
    readings = {}
    for semantics in (RUNNING_AVERAGE, PER_INFERENCE):
        before: dict[str, float] = {}
        runs = []
        for k, infos in enumerate(snapshots, start=1):
            if semantics == RUNNING_AVERAGE:
                totals = {info.node_name: microseconds(info.real_time) * k for info in infos}
            else:
                totals = {info.node_name: microseconds(info.real_time) + before.get(info.node_name, 0.0)
                          for info in infos}
            if k > warmup:
                runs.append(run_events(infos, totals, before, device))
            before = totals
        readings[semantics] = runs
    return min(readings.items(), key=lambda item: _spread(item[1], walls_ms))


def _spread(runs: list[list[OpEvent]], walls_ms: list[float]) -> float:
    """Interquartile range of (operator sum / run time) over the runs, relative to its median."""
    ratios = [sum(e.dur_us or 0.0 for e in ops) / 1e3 / wall
              for ops, wall in zip(runs, walls_ms, strict=True) if wall > 0]
    if len(ratios) < 2:
        return 0.0
    q25, q50, q75 = np.percentile(ratios, [25, 50, 75])
    return float((q75 - q25) / q50) if q50 > 0 else float("inf")


def run_events(infos, totals: dict[str, float], before: dict[str, float], device: str) -> list[OpEvent]:
    """The executed nodes of one run, in execution order, with the time this run added to each."""
    out = []
    for info in infos:
        if status_name(info.status) != EXECUTED:
            continue
        dur = max(0.0, totals[info.node_name] - before.get(info.node_name, 0.0))
        out.append(OpEvent(info.node_name, info.node_type, device, dur, kernel=info.exec_type))
    return out


def microseconds(delta) -> float:
    """A ProfilingInfo time (datetime.timedelta) in microseconds."""
    return delta.days * 86_400e6 + delta.seconds * 1e6 + delta.microseconds


def status_name(status) -> str:
    return str(status).rsplit(".", 1)[-1]
