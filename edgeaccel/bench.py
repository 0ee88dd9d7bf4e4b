"""Latency and throughput measurement through the public Model API (what users get, not a private path).

latency: a synchronous loop of ``model.run`` (MLPerf's SingleStream: one query at a time), per-call times.
throughput: ``model.stream`` over a loaded-with-``performance_hint="throughput"`` model, keeping
    2 x concurrency requests in flight (MLPerf's Offline: all queries available at once); frames per second
    = completed / wall time, and per-request latency from submit to completion.
Several models measured together alternate in blocks with a pause before each (runtime facts: a runtime's threads
can stay busy after a run and bill whoever runs next, as ONNX Runtime's spin does where a session's stop is off).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PAUSE_S = 0.05
# Requests read their inputs from this many separate copies in turn, as a harness's samples sit in separate
# buffers (MLPerf LoadGen's query sample library): one array reused stays in the CPU's cache and flatters.
INPUT_COPIES = 16
COPIES_MAX_BYTES = 64 << 20
Progress = Callable[[int, int], None]  # (done, total)


@dataclass
class Result:
    name: str
    mode: str  # "latency" or "throughput"
    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    concurrency: int = 1

    @property
    def count(self) -> int:
        return len(self.latencies_ms)

    @property
    def fps(self) -> float:
        if self.mode == "throughput":
            return self.count / self.wall_s if self.wall_s else 0.0
        return 1000.0 / float(np.mean(self.latencies_ms)) if self.latencies_ms else 0.0

    def percentiles(self) -> dict[str, float]:
        ms = np.asarray(self.latencies_ms)
        if not ms.size:
            return {}
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(ms.mean()),
                "min": float(ms.min()), "max": float(ms.max())}

    def as_dict(self) -> dict:
        return {"name": self.name, "mode": self.mode, "count": self.count, "fps": round(self.fps, 3),
                "latency_ms": {k: round(v, 4) for k, v in self.percentiles().items()},
                "wall_s": round(self.wall_s, 3), "concurrency": self.concurrency}


def latency(models: Sequence[tuple[str, Any, list]], runs: int, warmup: int = 5, block: int = 0,
            progress: Progress | None = None, min_seconds: float = 0.0) -> list[Result]:
    """At least ``runs`` timed ``run`` calls per model, and at least ``min_seconds`` of them (MLPerf's
    min_count and min_duration); interleaved in blocks when there are several models."""
    results = [Result(name, "latency") for name, _, _ in models]
    copies = [_copies(arrays) for _, _, arrays in models]
    for _, model, arrays in models:
        for _ in range(warmup):
            model.run(arrays)
    block = block or (runs if len(models) == 1 else max(1, runs // 10))

    def more(result: Result) -> bool:
        return result.count < runs or result.wall_s < min_seconds

    while any(more(r) for r in results):
        for result, inputs, (_, model, _) in zip(results, copies, models, strict=True):
            if not more(result):
                continue
            if len(models) > 1:
                time.sleep(PAUSE_S)
            times = result.latencies_ms
            first = len(times)
            for _ in range(min(block, runs - result.count) if result.count < runs else block):
                arrays = inputs[len(times) % INPUT_COPIES]
                start = time.perf_counter()
                model.run(arrays)
                times.append((time.perf_counter() - start) * 1e3)
            result.wall_s += sum(times[first:]) / 1e3
            if progress:
                progress(sum(min(r.count, runs) for r in results), runs * len(results))
    return results


def throughput(name: str, model, arrays: list, requests: int, warmup: int = 10,
               progress: Progress | None = None, min_seconds: float = 0.0) -> Result:
    """Keep ``2 x model concurrency`` requests in flight until at least ``requests`` have been submitted and
    ``min_seconds`` have passed (MLPerf's min_count and min_duration), then wait for all of them."""
    concurrency = max(1, getattr(model, "concurrency", 1))
    for _ in model.stream([arrays] * warmup):
        pass
    result = Result(name, "throughput", concurrency=concurrency)
    inputs = _copies(arrays)
    in_flight = 2 * concurrency
    pending: list[Future] = []
    start = time.perf_counter()
    i = 0
    while i < requests or time.perf_counter() - start < min_seconds:
        submitted = time.perf_counter()
        future = model.submit(inputs[i % INPUT_COPIES])
        future.add_done_callback(_stamp(result.latencies_ms, submitted))
        pending.append(future)
        if len(pending) >= in_flight:
            pending.pop(0).result()
            if progress and i % 10 == 0:
                progress(i, max(i, requests))
        i += 1
    for future in pending:
        future.result()
    result.wall_s = time.perf_counter() - start
    if progress:
        progress(i, i)
    return result


@dataclass
class StageResult:
    """Where the time of a vision task goes: pre-processing (decode nothing: resize, layout, type), inference
    (``model.run``) and post-processing (decoding, NMS, mapping back), per call."""

    name: str
    task: str
    preprocess_ms: list[float] = field(default_factory=list)
    inference_ms: list[float] = field(default_factory=list)
    postprocess_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        def stats(ms: list[float]) -> dict:
            p50, p90 = np.percentile(ms, [50, 90])
            return {"p50": round(float(p50), 4), "p90": round(float(p90), 4), "mean": round(float(np.mean(ms)), 4)}

        inference = float(np.mean(self.inference_ms))
        return {"name": self.name, "mode": "stages", "task": self.task, "count": len(self.inference_ms),
                "preprocess_ms": stats(self.preprocess_ms), "inference_ms": stats(self.inference_ms),
                "postprocess_ms": stats(self.postprocess_ms),
                "postprocess_share_of_inference": round(float(np.mean(self.postprocess_ms)) / inference, 4)
                if inference else None}


def stages(name: str, model, task, image: np.ndarray, runs: int, warmup: int = 5) -> StageResult:
    """Time the three stages of ``model.predict`` separately: ``task.preprocess`` (from a decoded RGB image),
    ``model.run`` and ``task.postprocess``, ``runs`` times after ``warmup``."""
    result = StageResult(name, task.name)
    for i in range(warmup + runs):
        start = time.perf_counter()
        arrays, frame = task.preprocess(image)
        ran = time.perf_counter()
        outputs = model.run(arrays)
        decoded = time.perf_counter()
        task.postprocess(outputs, frame)
        end = time.perf_counter()
        if i >= warmup:
            result.preprocess_ms.append((ran - start) * 1e3)
            result.inference_ms.append((decoded - ran) * 1e3)
            result.postprocess_ms.append((end - decoded) * 1e3)
    return result


def _copies(arrays: list) -> list[list]:
    """INPUT_COPIES sets of inputs (the same set repeated where separate copies would pass 64 MB)."""
    size = max(1, sum(a.nbytes for a in arrays))
    distinct = [[a.copy() for a in arrays] for _ in range(max(1, min(INPUT_COPIES, COPIES_MAX_BYTES // size)))]
    return [distinct[i % len(distinct)] for i in range(INPUT_COPIES)]


def _stamp(sink: list[float], started: float) -> Callable[[Future], None]:
    def done(_future: Future) -> None:
        sink.append((time.perf_counter() - started) * 1e3)  # list.append is atomic under the GIL
    return done


def plot(results: Sequence[Result], path: str) -> None:
    """The latency distribution per executor as a PNG (needs matplotlib: the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        from .errors import RuntimeNotInstalledError

        raise RuntimeNotInstalledError("--plot needs matplotlib", hint="pip install 'edgeaccel[plot]'") from exc
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.6 * len(results)))
    data = [r.latencies_ms for r in results]
    ax.boxplot(data, vert=False, showfliers=True, whis=(1, 99))
    ax.set_yticks(range(1, len(results) + 1), [f"{r.name} ({r.mode})" for r in results])
    ax.set_xlabel("latency (ms); whiskers at p1 and p99")
    ax.set_title("edgeaccel bench")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
