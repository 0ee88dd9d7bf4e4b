"""What a profile says (schema ``edgeaccel.profile/1``): per operator and per model, the same on every runtime.

A runtime's collector (``edgeaccel/profiling/<runtime>.py``) hands back raw ``RunRecord``s: one per timed run,
each with the whole-model time measured around the runtime's inference call and the operators the runtime
timed in that run. ``aggregate`` turns them into ``OpProfile``s (median over runs per operator name) and the
figures of an ``ExecutorProfile``. Where a runtime gives no per-operator time, ``per_op_available`` is False,
``note`` says why, and the operators are listed with ``median_ms`` None: never an invented number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SCHEMA = "edgeaccel.profile/1"


@dataclass
class OpEvent:
    """One operator in one run, as the runtime reported it. ``start_us`` is from the run's start, None where
    the runtime gives durations only (OpenVINO: the trace then lays operators end to end in execution order)."""

    name: str
    op_type: str
    device: str
    dur_us: float | None
    start_us: float | None = None
    output_bytes: int | None = None
    kernel: str | None = None


@dataclass
class RunRecord:
    """One timed run: when it started (seconds on the profile's clock), its whole-model time, its operators."""

    start_s: float
    wall_ms: float
    ops: list[OpEvent] = field(default_factory=list)


@dataclass
class OpProfile:
    """One operator (or fused node) of the graph as the runtime ran it."""

    name: str
    op_type: str
    device: str  # where it ran: ORT's execution provider, OpenVINO's device, LiteRT's delegate or CPU kernels
    median_ms: float | None  # median over the runs it ran in; None where the runtime gives no per-op time
    share: float | None = None  # of the sum of every operator's median
    runs: int = 0  # timed runs it appeared in
    output_bytes: int | None = None  # memory where the runtime tells (ORT: the operator's output size)
    kernel: str | None = None  # the implementation the runtime chose (OpenVINO exec_type: jit_avx512_I8, ...)

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.op_type, "device": self.device,
                "median_ms": _r(self.median_ms), "share": _r(self.share), "runs": self.runs,
                "output_bytes": self.output_bytes, "kernel": self.kernel}


@dataclass
class DeviceShare:
    """How much of the graph one device (or delegate, or execution provider) ran."""

    device: str
    ops: int
    op_share: float  # of the operators that ran
    time_ms: float | None  # sum of its operators' medians; None without per-op times
    time_share: float | None

    def to_dict(self) -> dict:
        return {"device": self.device, "ops": self.ops, "op_share": _r(self.op_share), "time_ms": _r(self.time_ms),
                "time_share": _r(self.time_share)}


@dataclass
class ExecutorProfile:
    """Everything measured about one executor running the model: per operator, and for the whole model."""

    executor: str  # the candidate's name ("onnxruntime:CPU")
    runtime: str
    version: str
    device: str
    precision: str
    threads: int | None
    artifact: str  # the model file this executor ran
    runs: int
    warmup: int
    whole_model_ms: float  # median over the same timed runs the operators were timed in
    whole_model_p90_ms: float
    load_s: float  # load and compile, as edgeaccel.load does it
    peak_rss_mb: float | None  # the process's peak resident memory from before the load to the last run
    peak_rss_note: str
    rss_before_mb: float | None  # resident memory just before the load: the peak less this is the model's
    per_op_available: bool
    note: str  # what the runtime gives and what it does not
    ops: list[OpProfile] = field(default_factory=list)
    devices: list[DeviceShare] = field(default_factory=list)
    not_executed: int = 0  # operators the runtime lists but did not run (OpenVINO: optimized out, not run)
    graph: dict = field(default_factory=dict)  # runtime facts: LiteRT's delegated partitions, OV devices, ...
    utilization: dict | None = None
    utilization_lines: list[str] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list, repr=False)  # for --trace; not in to_dict

    @property
    def op_sum_ms(self) -> float | None:
        if not self.per_op_available:
            return None
        return float(sum(op.median_ms or 0.0 for op in self.ops))

    @property
    def coverage(self) -> float | None:
        """How much of the whole-model time the operators account for: per run, the sum of its operators' times
        over its whole-model time; the median over the runs (one slow run moves neither much)."""
        if not self.per_op_available or not self.records:
            return None
        ratios = [sum(e.dur_us or 0.0 for e in r.ops) / 1e3 / r.wall_ms for r in self.records if r.wall_ms > 0]
        return float(np.median(ratios)) if ratios else None

    def top(self, n: int) -> list[OpProfile]:
        timed = [op for op in self.ops if op.median_ms is not None]
        return sorted(timed, key=lambda op: -(op.median_ms or 0.0))[:n] if timed else self.ops[:n]

    def to_dict(self) -> dict:
        return {
            "executor": self.executor, "runtime": self.runtime, "version": self.version, "device": self.device,
            "precision": self.precision, "threads": self.threads, "artifact": self.artifact,
            "runs": self.runs, "warmup": self.warmup,
            "whole_model_ms": _r(self.whole_model_ms), "whole_model_p90_ms": _r(self.whole_model_p90_ms),
            "op_sum_ms": _r(self.op_sum_ms), "coverage": _r(self.coverage),
            "load_s": _r(self.load_s), "peak_rss_mb": _r(self.peak_rss_mb), "peak_rss_note": self.peak_rss_note,
            "rss_before_mb": _r(self.rss_before_mb),
            "per_op_available": self.per_op_available, "note": self.note,
            "devices": [d.to_dict() for d in self.devices], "not_executed": self.not_executed,
            "graph": self.graph, "ops": [op.to_dict() for op in self.ops],
            "utilization": self.utilization,
        }


@dataclass
class ModelProfile:
    """A profile of one model on one or several executors (``--all``), with the operators matched across them."""

    model: str
    executors: list[ExecutorProfile] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # executor -> why it could not be profiled
    matching: dict | None = None  # --all, two executors or more: matching.match_ops(...).to_dict()
    compare: dict | None = None  # --compare: edgeaccel.profiling.compare's LayerComparison.to_dict()
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = {"schema": SCHEMA, "model": self.model, "executors": [e.to_dict() for e in self.executors],
               "failed": dict(self.failed), "notes": list(self.notes)}
        if self.matching is not None:
            out["matching"] = self.matching
        if self.compare is not None:
            out["compare"] = self.compare
        return out


def aggregate(records: list[RunRecord]) -> list[OpProfile]:
    """Per operator name over the runs: the median of its time per run (an operator listed twice in one run,
    a loop body, counts once with the sum), its share of the sum of medians; in first-run order."""
    per_name: dict[str, list[float]] = {}
    first: dict[str, OpEvent] = {}
    for record in records:
        in_run: dict[str, float] = {}
        for event in record.ops:
            first.setdefault(event.name, event)
            if event.dur_us is not None:
                in_run[event.name] = in_run.get(event.name, 0.0) + event.dur_us
        for name, dur in in_run.items():
            per_name.setdefault(name, []).append(dur)
    ops = []
    for name, event in first.items():
        times = per_name.get(name)
        median = float(np.median(times)) / 1e3 if times else None
        ops.append(OpProfile(name, event.op_type, event.device, median, runs=len(times or ()),
                             output_bytes=event.output_bytes, kernel=event.kernel))
    total = sum(op.median_ms or 0.0 for op in ops)
    for op in ops:
        op.share = op.median_ms / total if op.median_ms is not None and total > 0 else None
    return ops


def device_split(ops: list[OpProfile]) -> list[DeviceShare]:
    """The share of the graph (operators, and time where known) each device ran, largest first."""
    if not ops:
        return []
    timed = any(op.median_ms is not None for op in ops)
    total_ms = sum(op.median_ms or 0.0 for op in ops)
    by_device: dict[str, list[OpProfile]] = {}
    for op in ops:
        by_device.setdefault(op.device, []).append(op)
    out = []
    for device, members in by_device.items():
        ms = sum(op.median_ms or 0.0 for op in members) if timed else None
        out.append(DeviceShare(device, len(members), len(members) / len(ops), ms,
                               ms / total_ms if ms is not None and total_ms > 0 else None))
    return sorted(out, key=lambda d: (-(d.time_ms or 0.0), -d.ops))


def _r(value, digits: int = 4):
    return None if value is None else round(float(value), digits)
