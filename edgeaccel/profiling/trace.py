"""``--trace``: a profile as Chrome trace format JSON (opens in Perfetto, chrome://tracing).

One process per executor (pid 1, 2, ... named after it), thread 1 "runs" with one complete event ("ph": "X")
per timed run, thread 2 "operators" with one per operator per run; "ts" and "dur" in microseconds from the
executor's profile start. Operators sit on their own thread because a runtime's operator times need not nest
inside the run measured around it (OpenVINO gives durations only: its operators are laid end to end from the
run's start, in execution order, and args say so). An executor without per-operator times has runs only.
"""

from __future__ import annotations

import json
from pathlib import Path

from .schema import ExecutorProfile

RUNS_TID, OPS_TID = 1, 2


def trace_events(profiles: list[ExecutorProfile]) -> list[dict]:
    events: list[dict] = []
    for pid, profile in enumerate(profiles, start=1):
        events += [_meta(pid, None, "process_name", profile.executor),
                   _meta(pid, RUNS_TID, "thread_name", "runs"), _meta(pid, OPS_TID, "thread_name", "operators")]
        for number, record in enumerate(profile.records):
            start = record.start_s * 1e6
            events.append({"name": "model run", "cat": "run", "ph": "X", "pid": pid, "tid": RUNS_TID,
                           "ts": round(start, 3), "dur": round(record.wall_ms * 1e3, 3), "args": {"run": number}})
            if not profile.per_op_available:
                continue
            offset = 0.0
            for op in record.ops:
                laid_out = op.start_us is None
                at = offset if op.start_us is None else op.start_us
                args = {"run": number, "type": op.op_type, "device": op.device}
                if op.kernel:
                    args["kernel"] = op.kernel
                if laid_out:
                    args["ts"] = "laid out end to end: the runtime gives durations only"
                events.append({"name": op.name, "cat": "op", "ph": "X", "pid": pid, "tid": OPS_TID,
                               "ts": round(start + at, 3), "dur": round(op.dur_us or 0.0, 3), "args": args})
                offset = at + (op.dur_us or 0.0)
    return events


def write_trace(profiles: list[ExecutorProfile], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": trace_events(profiles), "displayTimeUnit": "ms",
                                "otherData": {"producer": "edgeaccel profile"}}))
    return path


def _meta(pid: int, tid: int | None, name: str, value: str) -> dict:
    event = {"name": name, "ph": "M", "pid": pid, "args": {"name": value}}
    if tid is not None:
        event["tid"] = tid
    return event
