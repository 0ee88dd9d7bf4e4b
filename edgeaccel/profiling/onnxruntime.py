"""ONNX Runtime's per-node times: the session's own profiler (``SessionOptions.enable_profiling``).

The executor is loaded as ``edgeaccel.load`` loads it, with ``profile_file_prefix`` among its runtime options
(``session_options`` then switches ORT's profiler on). ``end_profiling()`` writes a Chrome-trace JSON list:
per run one "model_run" event (cat "Session") and per node one "<node>_kernel_time" event (cat "Node", "dur"
in microseconds, "args": op_name, provider, output_size). Nodes are the optimized graph's: fused nodes keep
one name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from .job import Collected, ProfileJob
from .schema import OpEvent

KERNEL_SUFFIX = "_kernel_time"


def collect(job: ProfileJob) -> Collected:
    from ..executors.onnxruntime import OnnxRuntimeExecutor  # loaded already: it is the class being profiled

    # collector_for chose this collector by the executor's class
    executor = cast(OnnxRuntimeExecutor, job.open(profile_file_prefix=str(job.workdir / "onnxruntime")))
    records = job.time_runs(lambda: executor.run(job.inputs))
    trace = Path(executor.session.end_profiling())
    try:
        events = json.loads(trace.read_text())
    finally:
        trace.unlink(missing_ok=True)
    runs = parse_runs(events)
    note = "ONNX Runtime's profiler: per node of the optimized graph, kernel time"
    if len(runs) < len(records):  # a run went to the ORT_ENABLE_EXTENDED twin session (WindowGuard): not traced
        return Collected(records, False, f"ONNX Runtime traced {len(runs)} of {len(records) + job.warmup} runs "
                         "(inputs the window guard sent to its second session are not traced): whole-model time only")
    for record, (_, _, ops) in zip(records, runs[-len(records):], strict=True):
        record.ops = ops
    model_run = sorted(dur for _, dur, _ in runs[-len(records):])
    graph = {"ort_model_run_median_ms": round(model_run[len(model_run) // 2] / 1e3, 4),
             "providers": executor.info.details.get("providers")}
    return Collected(records, True, note, graph)


def parse_runs(events: list[dict]) -> list[tuple[float, float, list[OpEvent]]]:
    """(start µs, duration µs, node events) per "model_run" in the trace, in order; each node's ``start_us`` is
    from its run's start."""
    runs = sorted((e["ts"], e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    nodes = sorted((e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)),
                   key=lambda e: e["ts"])
    out: list[tuple[float, float, list[OpEvent]]] = []
    i = 0
    for start, dur in runs:
        ops = []
        while i < len(nodes) and nodes[i]["ts"] < start:
            i += 1  # a node outside every run (none expected): skipped
        while i < len(nodes) and nodes[i]["ts"] <= start + dur:
            ops.append(node_event(nodes[i], start))
            i += 1
        out.append((float(start), float(dur), ops))
    return out


def node_event(event: dict, run_start: float) -> OpEvent:
    args = event.get("args", {})
    size = args.get("output_size")
    return OpEvent(name=event["name"][: -len(KERNEL_SUFFIX)], op_type=str(args.get("op_name", "?")),
                   device=str(args.get("provider", "?")), dur_us=float(event["dur"]),
                   start_us=float(event["ts"]) - run_start,
                   output_bytes=int(size) if str(size).isdigit() else None)
