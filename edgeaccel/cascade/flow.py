"""The threads of a live cascade (``live.CascadeRun`` holds the options, the counters and the caller's side):
read (one per source) -> admit (sources in turn; the first stage's input) -> lane of the first stage's device
-> step 0 (decode, track, crops for stage 1) -> lane of stage 1's device -> step 1 -> ... -> the caller."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..sources.intake import End, Intake
from ..sources.queues import Closed, DropQueue
from .governor import Plan, Share
from .lanes import Lane
from .stage import boxes_of

EMA = 0.2  # weight of a new frame in a stage's moving average of device time a frame


@dataclass
class Item:
    source: int
    index: int
    timestamp: float | None
    captured: float  # monotonic: the frame's arrival
    image: Any
    result: Any = None
    pieces: list = field(default_factory=list)  # the stage's model calls on it (none: shed, or no crop)
    outputs: list = field(default_factory=list)
    stage_ms: dict = field(default_factory=dict)
    shed: dict = field(default_factory=dict)
    tracks: list | None = None
    events: list | None = None
    zones: dict | None = None
    zone_shapes: Any = None


class Flow:
    """The threads and their queues. The subclass (``CascadeRun``) sets, before calling this ``__init__``:
    ``cascade``, ``sources``, ``drops``, ``queue_size``, ``in_flight``, ``counts``, ``stats``, ``governor``,
    ``clock`` and ``tracking``."""

    END = object()
    cascade: Any
    sources: list
    drops: list[str]
    queue_size: int
    in_flight: int
    counts: list
    stats: list
    governor: Any
    clock: Any
    tracking: list | None

    def __init__(self) -> None:
        stages = self.cascade.stages
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._intake = Intake(self.sources, self.drops, self.queue_size, self._stop, make=self._made,
                              on_drop=self._dropped, on_error=self._source_failed)
        self.errors: dict[str, BaseException] = {}  # source name -> why it ended early (the others go on)
        deep = self.in_flight + 2  # never full: the in-flight bound holds every queue below it
        self._after = [DropQueue(deep, "none") for _ in stages]
        self._out = DropQueue(self.queue_size, "none")  # the caller is never dropped from: it sets the pace
        self._slots = threading.Semaphore(self.in_flight)
        on: dict[str, list[int]] = {}
        for k, stage in enumerate(stages):
            on.setdefault(stage.device, []).append(k)
        self._lanes = {device: Lane(device, ks, self._run_stage, self._ran) for device, ks in on.items()}
        self._lane_of = [self._lanes[s.device] for s in stages]
        self._shares = [Share() for _ in stages]
        self.plan = Plan()
        self._offered = 0  # frames read since the governor's last tick
        self._last_tick: float | None = None
        self._next_admit = 0.0
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self._started = self._ended = None

    def _start(self) -> None:
        self._started = time.perf_counter()
        targets = [(f"read:{s.name}", self._intake.read, i) for i, s in enumerate(self.sources)]
        targets.append(("admit", self._admit))
        targets += [(f"lane:{lane.device}", lane.loop) for lane in self._lanes.values()]
        targets += [(f"after:{s.name}", self._step, k) for k, s in enumerate(self.cascade.stages)]
        for name, target, *args in targets:
            thread = threading.Thread(target=self._guarded, args=(target, *args), name=f"cascade-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _guarded(self, target, *args) -> None:
        try:
            target(*args)
        except Closed:
            pass
        except BaseException as exc:  # noqa: BLE001 -- a stage or a source failed: the caller gets it, the rest stops
            with self._lock:
                self._error = self._error or exc
            self._shut()

    def _made(self, i: int, index: int, raw) -> Item:
        with self._lock:
            self.counts[i].read += 1
            self._offered += 1
        return Item(i, index, raw.timestamp, raw.captured, raw.image)

    def _dropped(self, i: int, why: str) -> None:
        with self._lock:  # replaced while waiting: the policy's frame rate, or the stages' pace
            self.counts[i].dropped["policy" if self.plan.max_fps is not None else "overload"] += 1

    def _source_failed(self, i: int, exc: BaseException) -> None:
        with self._lock:
            self.errors[self.sources[i].name] = exc

    # -- admitting frames: sources in turn, the in-flight bound, the policy's frame rate ----------------------------
    def _admit(self) -> None:
        first = self.cascade.stages[0]
        while self._intake.active:
            while not self._slots.acquire(timeout=0.05):
                if self._stop.is_set():
                    raise Closed
                self._tick()
            self._pace()
            item = None
            while item is None:  # the sources in turn: none starves another
                self._tick()
                item = self._intake.take()
            if isinstance(item, End):
                self._slots.release()
                continue
            item.pieces, _ = first.prepare(item.image, None)
            self._lane_of[0].put(0, item)
        self._lane_of[0].end(0)

    def _pace(self) -> None:
        """Under the policy's frame rate, wait for this frame's turn (the sources' queues meanwhile keep the
        newest frames: a live source's others are dropped as the policy's, a file waits)."""
        while self.plan.max_fps is not None:
            fps = self.plan.max_fps
            now = self.clock.now()
            if fps > 0 and now >= self._next_admit:
                self._next_admit = max(self._next_admit + 1.0 / fps, now - 1.0 / fps)
                return
            # a rate of 0: the policy backed the first stage's device off; nothing starts until it returns
            wait = min(self._next_admit - now, 0.05) if fps > 0 else 0.05
            if self._stop.wait(wait):
                raise Closed
            self._tick()

    def _tick(self) -> None:
        governor = self.governor
        if governor is None:
            return
        now = self.clock.now()
        if not governor.due(now):
            return
        busy = {device: lane.take_busy() for device, lane in self._lanes.items()}
        with self._lock:
            offered, self._offered = self._offered, 0
            stage_s = {s.name: st.device_s for s, st in zip(self.cascade.stages, self.stats, strict=True)}
        last = self._last_tick
        rate = offered / (now - last) if last is not None and now > last else 0.0
        self._last_tick = now
        self.plan = governor.tick(now, busy, stage_s, rate)

    # -- the lanes' work, and the CPU step after each stage --------------------------------------------------------
    def _run_stage(self, k: int, item: Item) -> list:
        model = self.cascade.stages[k].model
        return [model.run(piece.inputs) for piece in item.pieces]

    def _ran(self, k: int, item: Item | None, outputs, seconds: float) -> None:
        if item is None:
            self._after[k].put_end(self.END)
            return
        item.outputs = outputs
        if item.pieces:
            stats = self.stats[k]
            item.stage_ms[self.cascade.stages[k].name] = seconds * 1e3
            with self._lock:
                stats.frames += 1
                stats.calls += len(item.pieces)
                stats.busy_s += seconds
                stats.times.append(seconds * 1e3)
                stats.device_s = seconds if stats.device_s == 0.0 else stats.device_s + EMA * (seconds - stats.device_s)
        self._after[k].put(item)

    def _step(self, k: int) -> None:
        stages = self.cascade.stages
        while True:
            item = self._after[k].get()
            if item is self.END:
                if k + 1 < len(stages):
                    self._lane_of[k + 1].end(k + 1)
                else:
                    self._out.put_end(self.END)
                return
            start = time.perf_counter()
            if item.pieces:
                result = stages[k].finish(item.pieces, item.outputs)
                if k == 0:
                    item.result = result
                    if self.tracking is not None:  # in frame order per source: this step is one thread
                        self.tracking[item.source].apply(item)
            item.pieces, item.outputs = [], []
            self.stats[k].cpu_times.append((time.perf_counter() - start) * 1e3)
            if k + 1 < len(stages):
                start = time.perf_counter()
                self._next(k + 1, item)
                if item.pieces:
                    self.stats[k + 1].cpu_times.append((time.perf_counter() - start) * 1e3)
                self._lane_of[k + 1].put(k + 1, item)
            else:
                self._out.put(item)
                with self._lock:
                    self.counts[item.source].delivered += 1
                self._slots.release()

    def _next(self, k: int, item: Item) -> None:
        """Stage ``k``'s crops of ``item``, or why it is shed: the policy's share, or its device behind."""
        stage, stats = self.cascade.stages[k], self.stats[k]
        reason = None
        if not self._shares[k].take(item.source, self.plan.keep.get(stage.name, 1.0)):
            reason = "policy"
        elif self.drops[item.source] != "none" and self._lane_of[k].backlog(k) >= max(1, self.queue_size - 1):
            reason = "overload"
        if reason is not None:
            item.shed[stage.name] = reason
            with self._lock:
                stats.shed[reason] += 1
            return
        parent = None if k == 1 else self.cascade.stages[k - 1].name
        item.pieces, skipped = stage.prepare(item.image, boxes_of(item.result, parent))
        if skipped:
            with self._lock:
                stats.skipped += skipped

    # -- stopping -------------------------------------------------------------------------------------------------
    def _shut(self) -> None:
        self._stop.set()
        self._intake.close()
        for queue in (*self._after, self._out):
            queue.close()
        for lane in self._lanes.values():
            lane.close()

    def close(self) -> None:
        if self._ended is None and self._started is not None:
            self._ended = time.perf_counter()
        self._shut()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=10)
        for source in self.sources:
            source.close()

