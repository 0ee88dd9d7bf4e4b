"""OpenVINO's performance counters: ``PERF_COUNT`` at compile time, ``InferRequest.get_profiling_info()``.

The executor is loaded as ``edgeaccel.load`` loads it, with ``PERF_COUNT`` added to its compile config, and
the runs go through an infer request of that compiled model. Each ProfilingInfo names a node of the compiled
graph (node_name, node_type, exec_type: the kernel), its status (EXECUTED, NOT_RUN, OPTIMIZED_OUT) and its
real_time. Measured with openvino 2026.4: real_time is the node's average over every inference of the compiled
model so far, in whole microseconds (the differences of the running total match the whole-model time). So
each run's time per node is recovered as k * avg_k - (k - 1) * avg_(k-1), to within k microseconds.
"""

from __future__ import annotations

from .collect import Collected, ProfileJob
from .schema import OpEvent, RunRecord

EXECUTED = "EXECUTED"


def collect(job: ProfileJob) -> Collected:
    executor = job.open(config={"PERF_COUNT": True})
    request = executor.new_request()
    request.feed(job.inputs)
    devices = executor.info.details.get("execution_devices") or [executor.device]
    device = devices[0] if len(devices) == 1 else "/".join(devices)
    state: dict = {"totals": {}, "infos": []}

    def after(k: int, record: RunRecord | None) -> None:
        infos = request.request.get_profiling_info()
        totals = {info.node_name: microseconds(info.real_time) * k for info in infos}
        if record is not None:
            record.ops = run_events(infos, totals, state["totals"], device)
        state["totals"], state["infos"] = totals, infos

    records = job.time_runs(request.request.infer, after)
    statuses = [status_name(info.status) for info in state["infos"]]
    skipped = {s: statuses.count(s) for s in set(statuses) if s != EXECUTED}
    graph = {"execution_devices": devices, "not_executed_by_status": skipped,
             "resolution_us": job.warmup + job.runs}
    note = ("OpenVINO performance counters (real_time per node of the compiled graph); per-run times recovered "
            f"from OpenVINO's running average, to within {job.warmup + job.runs} us per node")
    return Collected(records, True, note, graph, not_executed=sum(skipped.values()))


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
