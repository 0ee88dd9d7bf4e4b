"""Counters of a pipeline, per source: frames read, served, failed, dropped by stage, latency percentiles and
where that latency went (``stages_ms``: decode, queue, preprocess, inference, postprocess), reconnects and time without frames; and whether a scheduling policy is shedding load now."""

from __future__ import annotations

import threading
import time
from collections import deque

from .frame import STAGES

DROP_STAGES = ("source", "max_fps", "policy")  # queue full at the source; over max_fps; the scheduler shedding


class SourceStats:
    def __init__(self, name: str) -> None:
        self.name = name
        self.frames_in = 0
        self.frames_out = 0
        self.failed = 0
        self.dropped = dict.fromkeys(DROP_STAGES, 0)
        self.latencies_ms: deque[float] = deque(maxlen=4096)  # the recent ones: bounded memory on endless streams
        self.stages_ms: dict[str, deque[float]] = {s: deque(maxlen=4096) for s in STAGES}
        self.error: str | None = None

    def add(self, latency_ms: float, timing_ms: dict) -> None:
        self.latencies_ms.append(latency_ms)
        for stage, values in self.stages_ms.items():
            values.append(timing_ms.get(stage, 0.0))


class PipelineStats:
    def __init__(self, names: list[str]) -> None:
        self.lock = threading.Lock()
        self.sources = [SourceStats(n) for n in names]
        self.started = time.monotonic()

    def as_dict(self, sources=None) -> dict:
        """Totals and per-source figures (``sources``: the Source objects, for reconnects and events)."""
        import numpy as np

        with self.lock:
            per = []
            for i, s in enumerate(self.sources):
                lat = np.asarray(s.latencies_ms)
                src = sources[i] if sources else None
                per.append({"source": s.name, "frames_in": s.frames_in, "frames_out": s.frames_out,
                            "failed": s.failed, "dropped": dict(s.dropped), "error": s.error,
                            "latency_ms": _percentiles(lat, np),
                            "stages_ms": {k: _percentiles(np.asarray(v), np) for k, v in s.stages_ms.items()},
                            "reconnects": getattr(src, "reconnects", 0),
                            "outage_s": round(getattr(src, "outage_s", 0.0), 3),
                            "events": list(getattr(src, "events", []))})
            every = [x for s in self.sources for x in s.latencies_ms]
            stages = {k: [x for s in self.sources for x in s.stages_ms[k]] for k in STAGES}
        elapsed = time.monotonic() - self.started
        out = sum(p["frames_out"] for p in per)
        return {"elapsed_s": round(elapsed, 3), "frames_in": sum(p["frames_in"] for p in per), "frames_out": out,
                "failed": sum(p["failed"] for p in per),
                "dropped": {k: sum(p["dropped"][k] for p in per) for k in DROP_STAGES},
                "fps": round(out / elapsed, 2) if elapsed > 0 else 0.0,
                "latency_ms": _percentiles(np.asarray(every), np),
                "stages_ms": {k: _percentiles(np.asarray(v), np) for k, v in stages.items()}, "sources": per}


def _percentiles(lat, np) -> dict:
    if not lat.size:
        return {"p50": None, "p99": None}
    p50, p99 = np.percentile(lat, [50, 99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3)}


class PolicyWatch:
    """Whether a ScheduledModel's policy limits serving now (duty cycle below 1, an executor backed off):
    frames a source loses meanwhile are counted as shed by the policy. Read at most once per second."""

    LIMITING = ("duty_cycle", "back_off", "lower_concurrency", "shift")

    def __init__(self, model) -> None:
        self.model = model if hasattr(model, "trace") and hasattr(model, "policy") else None
        self.checked = 0.0
        self.limiting: str | None = None

    def now(self) -> str | None:
        if self.model is None:
            return None
        now = time.monotonic()
        if now - self.checked >= 1.0:
            self.checked = now
            try:
                records = self.model.trace.records
                last = records[-1] if records else None
            except Exception:  # the model is closing
                last = None
            limited = last is not None and (last.action in self.LIMITING or any(v < 1.0 for v in last.duty.values()))
            self.limiting = f"{last.action}: {last.reason}" if limited else None
        return self.limiting
