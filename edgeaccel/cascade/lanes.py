"""One lane per device: the only thread that calls the models placed on that device.

Two stages placed on one device (say an Edge TPU, which holds one model at a time) are never run at once: their
calls take turns in the device's lane, so the device neither thrashes between models nor idles while either
stage has work. The lane runs only ``model.run``: sampling crops and pre- and post-processing happen in the
cascade's CPU steps, on other frames meanwhile, so a device waits for no CPU work it could have been spared.
Of the work waiting, the latest stage goes first (a frame already in flight finishes before a new one starts),
so frames do not pile up between stages; the sources' turns are kept by the order the frames came in.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from ..sources.queues import Closed


class Lane:
    def __init__(self, device: str, stages: list[int], run: Callable, done: Callable) -> None:
        self.device = device
        self.stages = sorted(stages)
        self._run = run  # run(k, work) -> outputs: the model calls of stage k on one frame (``work.pieces``)
        self._done = done  # done(k, work, outputs, seconds): hand the frame to the CPU step after stage k
        self._queues = {k: deque() for k in self.stages}
        self._cond = threading.Condition()
        self._closed = False
        self._ended: set[int] = set()
        self.busy_s = 0.0  # since the governor last read it (``take_busy``)
        self.total_busy_s = 0.0
        self.runs = 0
        self.switches = 0  # runs of one stage after another's on this device: model changes an Edge TPU pays for
        self._last_stage: int | None = None
        self.active = 0  # runs in progress: at most one (tests read it)
        self.peak = 0

    def put(self, k: int, work) -> None:
        with self._cond:
            if self._closed:
                raise Closed
            self._queues[k].append(work)
            self._cond.notify()

    def backlog(self, k: int) -> int:
        return len(self._queues[k])

    def end(self, k: int) -> None:
        """Stage ``k`` gets no more work after what is queued (its end marker follows it through)."""
        self.put(k, None)

    def take_busy(self) -> float:
        with self._cond:
            busy, self.busy_s = self.busy_s, 0.0
        return busy

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not any(self._queues.values()):
                    self._cond.wait(0.5)
                if self._closed:
                    raise Closed
                k = next(k for k in reversed(self.stages) if self._queues[k])
                work = self._queues[k].popleft()
            if work is None:  # stage k's end
                self._done(k, None, None, 0.0)
                self._ended.add(k)
                if len(self._ended) == len(self.stages):
                    return
                continue
            if not work.pieces:  # shed, or no crop to look at: passed on in its turn, so frames stay in order
                self._done(k, work, [], 0.0)
                continue
            with self._cond:
                self.active += 1
                self.peak = max(self.peak, self.active)
            start = time.perf_counter()
            try:
                outputs = self._run(k, work)
            finally:
                took = time.perf_counter() - start
                with self._cond:
                    self.active -= 1
                    self.busy_s += took
                    self.total_busy_s += took
                    self.runs += 1
                    if self._last_stage is not None and self._last_stage != k:
                        self.switches += 1
                    self._last_stage = k
            self._done(k, work, outputs, took)
