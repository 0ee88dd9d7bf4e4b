"""A cascade on live frames: one thread per stage, so that while the last stage reads the crops of frame n the
first detects on frame n+1, each on its own executor and device. Bounded queues (``sources.queues.DropQueue``)
sit before every stage. With ``drop="none"`` (files, folders, iterables) a full queue makes the stage before it
wait and every frame comes out with every stage's answers. With "oldest" or "latest" (cameras and streams by
default) load is shed in a stated order: first a later stage's work (a later stage that finds its queue full
passes the frame on without looking at its crops: the frame comes out with the earlier stages' answers and
``shed`` names the stage), then whole frames at the source queue (dropped before the first stage, counted).
Nothing is lost unsaid: ``report()`` has read = delivered + dropped (+ abandoned when the caller stopped early)
and each stage's ``shed`` frames."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..sources.queues import DROP_POLICIES, Closed, DropQueue

_END = object()
KEPT_TIMES = 2048  # per-stage times kept for the percentiles: memory stays flat on endless sources


@dataclass
class CascadeFrame:
    index: int  # the frame's number in its source, counting dropped ones
    timestamp: float | None
    result: Any  # the first stage's DetectResult, boxes carrying the later stages' answers
    stage_ms: dict[str, float] = field(default_factory=dict)  # each stage's time on this frame
    latency_ms: float = 0.0  # from the frame's arrival to its last stage's end
    shed: list[str] = field(default_factory=list)  # later stages that passed this frame on unlooked (overload)

    def to_dict(self) -> dict:
        out = {"index": self.index, "timestamp": self.timestamp, "latency_ms": round(self.latency_ms, 3),
               "stage_ms": {k: round(v, 3) for k, v in self.stage_ms.items()}}
        if self.shed:
            out["shed"] = list(self.shed)
        out.update(self.result.to_dict())
        return out


@dataclass
class _Item:
    index: int
    timestamp: float | None
    captured: float
    image: Any
    result: Any = None
    stage_ms: dict = field(default_factory=dict)
    shed: list = field(default_factory=list)


@dataclass
class _StageStats:
    frames: int = 0
    calls: int = 0  # model calls: one a frame for the first stage, one a crop after
    skipped: int = 0
    dropped: int = 0  # frames dropped while waiting for this stage (the first: the source's queue)
    shed: int = 0  # frames passed on without this stage's work, its queue being full (a later stage)
    busy_s: float = 0.0
    times: deque = field(default_factory=lambda: deque(maxlen=KEPT_TIMES))


class CascadeRun:
    """Iterate for CascadeFrames (in order); ``report()`` any time, ``close()`` to stop early (``with`` does)."""

    def __init__(self, cascade, source, *, drop: str | None = None, queue_size: int = 4, name: str | None = None):
        from ..sources.readers import open_source

        if drop is not None and drop not in DROP_POLICIES:
            raise InputError(f"drop must be one of {', '.join(DROP_POLICIES)}, not {drop!r}",
                             hint="none: every frame (files); oldest / latest: keep up with a live source")
        if not isinstance(queue_size, int) or queue_size < 1:
            raise InputError(f"queue_size must be a whole number >= 1, not {queue_size!r}")
        self.cascade = cascade
        self.source = open_source(source, name=name)
        self.source.open()
        self.drop = drop or ("latest" if self.source.live else "none")
        self.queue_size = queue_size
        n = len(cascade.stages)
        # only the source's queue drops frames; between stages a full queue waits (drop "none") or, under a
        # dropping policy, makes the later stage shed its work on the frames it takes (see _work)
        self._queues = [DropQueue(queue_size, self.drop)] + [DropQueue(queue_size, "none") for _ in range(n - 1)]
        self._out = DropQueue(queue_size, "none")  # the caller is never dropped from: it sets the pace it wants
        self._stats = [_StageStats() for _ in range(n)]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self.read = self.delivered = 0
        self._started = self._ended = None

    # -- the threads ---------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._started = time.perf_counter()
        self._threads = [threading.Thread(target=self._guarded, args=(self._read,), name="cascade-reader",
                                          daemon=True)]
        for k, stage in enumerate(self.cascade.stages):
            self._threads.append(threading.Thread(target=self._guarded, args=(self._work, k),
                                                  name=f"cascade-{stage.name}", daemon=True))
        for thread in self._threads:
            thread.start()

    def _guarded(self, target, *args) -> None:
        try:
            target(*args)
        except Closed:
            pass
        except BaseException as exc:  # noqa: BLE001 -- a stage or the source failed: the caller gets it, the rest stops
            with self._lock:
                self._error = self._error or exc
            self._shut()

    def _read(self) -> None:
        for raw in self.source.frames(self._stop):
            item = _Item(self.read, raw.timestamp, raw.captured, raw.image)
            self.read += 1
            self._put(0, item)
        self._queues[0].put_end(_END)

    def _put(self, k: int, item: _Item) -> None:
        """Into the queue before stage ``k`` (past the last stage: the caller's)."""
        if k == len(self._queues):
            self._out.put(item)
            return
        if self._queues[k].put(item) is not None:
            with self._lock:
                self._stats[k].dropped += 1

    def _work(self, k: int) -> None:
        stage, stats = self.cascade.stages[k], self._stats[k]
        while True:
            item = self._queues[k].get()
            if item is _END:
                if k + 1 < len(self._queues):
                    self._queues[k + 1].put_end(_END)
                else:
                    self._out.put_end(_END)
                return
            if k > 0 and self.drop != "none" and len(self._queues[k]) >= max(1, self._queues[k].size - 1):
                # behind: frames wait for this stage; pass this one on with the earlier stages' answers
                item.shed.append(stage.name)
                with self._lock:
                    stats.shed += 1
                self._put(k + 1, item)
                continue
            start = time.perf_counter()
            if k == 0:
                item.result = self.cascade.first(item.image)
                done = {"crops": 1, "skipped": 0}  # one call on the whole frame
            else:
                done = self.cascade.later(k, item.image, item.result)
            took = time.perf_counter() - start
            item.stage_ms[stage.name] = took * 1e3
            with self._lock:
                stats.frames += 1
                stats.calls += done["crops"]
                stats.skipped += done["skipped"]
                stats.busy_s += took
                stats.times.append(took * 1e3)
            self._put(k + 1, item)

    # -- the caller's side ---------------------------------------------------------------------------------
    def __iter__(self):
        if self._started is not None:
            raise InputError("this cascade run was already iterated", hint="call cascade.watch(...) again")
        self._start()
        try:
            while True:
                try:
                    item = self._out.get(timeout=0.5)
                except TimeoutError:
                    if self._error is not None:
                        break
                    continue
                except Closed:
                    break
                if item is _END:
                    break
                self.delivered += 1
                item.result.image = item.image
                yield CascadeFrame(item.index, item.timestamp, item.result, item.stage_ms,
                                   (time.monotonic() - item.captured) * 1e3, item.shed)
        finally:
            self.close()
        if self._error is not None:
            raise self._error

    def run(self) -> dict:
        """Drain every frame (discarding them) and return the report."""
        for _ in self:
            pass
        return self.report()

    def _shut(self) -> None:
        self._stop.set()
        for queue in (*self._queues, self._out):
            queue.close()

    def close(self) -> None:
        if self._ended is None and self._started is not None:
            self._ended = time.perf_counter()
        self._shut()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=10)
        self.source.close()

    def __enter__(self) -> CascadeRun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def report(self) -> dict:
        """Frames read, delivered, dropped (per stage waited for) and abandoned; end-to-end fps; per stage its
        executor, device, frames, calls, skipped boxes, p50/p95 ms a frame and busy share of the wall time."""
        from ..quantiles import percentiles

        end = self._ended or time.perf_counter()
        wall = max(end - (self._started or end), 1e-9)
        with self._lock:
            dropped = {s.name: st.dropped for s, st in zip(self.cascade.stages, self._stats, strict=True)}
            stages = []
            for stage, st in zip(self.cascade.stages, self._stats, strict=True):
                q = percentiles(st.times, (50, 95)) or {}
                stages.append({"name": stage.name, "executor": stage.executor_name, "device": stage.device,
                               "frames": st.frames, "calls": st.calls, "skipped": st.skipped, "shed": st.shed,
                               "p50_ms": round(q["p50"], 3) if q else None,
                               "p95_ms": round(q["p95"], 3) if q else None,
                               "busy": round(st.busy_s / wall, 3)})
        abandoned = self.read - self.delivered - sum(dropped.values())
        return {"schema": "edgeaccel.cascade-run/1", "source": self.source.name, "drop": self.drop,
                "queue_size": self.queue_size,
                "frames": {"read": self.read, "delivered": self.delivered, "dropped": dropped,
                           "abandoned": abandoned},
                "wall_s": round(wall, 3), "fps": round(self.delivered / wall, 2), "stages": stages,
                "placement": list(self.cascade.placement)}
