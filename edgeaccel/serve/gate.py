"""One limit per device on the requests running at once, shared by every model the server holds.

Each served model is a ScheduledModel with its own scheduler (deadline order, the thermal/power policy, its own
executors' concurrency). Alone, two models on one Edge TPU would each think they hold it; the gate is what
makes them share: every run of every model on a device first takes one of that device's places, and waiting
runs are let in by their model's priority (higher first), then in arrival order. A device's limit is the
largest concurrency any of its executors declares (1 for an Edge TPU: one request at a time holds it), unless
the command line sets it (``--device-limit cpu=2``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import defaultdict
from contextlib import contextmanager
from typing import Any


class DeviceGate:
    def __init__(self, limits: dict[str, int] | None = None) -> None:
        self._fixed = {k.lower(): int(v) for k, v in (limits or {}).items()}
        for device, n in self._fixed.items():
            if n < 1:
                raise ValueError(f"the limit of device {device} must be at least 1, not {n}")
        self._limits: dict[str, int] = dict(self._fixed)
        self._cond = threading.Condition()
        self._running: dict[str, int] = defaultdict(int)
        self._waiting: dict[str, list] = defaultdict(list)  # heap of (-priority, seq)
        self._seq = itertools.count()
        self.peak: dict[str, int] = defaultdict(int)  # most runs at once seen on each device
        self.runs: dict[str, int] = defaultdict(int)

    def register(self, device: str, concurrency: int) -> None:
        """A model's executor runs on ``device`` and can take ``concurrency`` requests at once."""
        with self._cond:
            if device not in self._fixed:
                self._limits[device] = max(self._limits.get(device, 1), int(concurrency))

    def limit(self, device: str) -> int:
        return self._limits.get(device, 1)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """Per device: limit, running, waiting, peak, runs (for /metrics and the tests)."""
        with self._cond:
            devices = set(self._limits) | set(self.runs)
            return {d: {"limit": self.limit(d), "running": self._running[d], "waiting": len(self._waiting[d]),
                        "peak": self.peak[d], "runs": self.runs[d]} for d in sorted(devices)}

    @contextmanager
    def hold(self, device: str, priority: int = 0):
        with self._cond:
            ticket = (-priority, next(self._seq))
            queue = self._waiting[device]
            heapq.heappush(queue, ticket)
            while self._running[device] >= self.limit(device) or queue[0] != ticket:
                self._cond.wait()
            heapq.heappop(queue)
            self._running[device] += 1
            self.runs[device] += 1
            self.peak[device] = max(self.peak[device], self._running[device])
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._cond:
                self._running[device] -= 1
                self._cond.notify_all()


class GatedExecutor:
    """An executor whose runs take a place at the gate first; everything else is the executor's own."""

    def __init__(self, inner: Any, gate: DeviceGate, device: str, priority: int) -> None:
        self._inner = inner
        self._gate = gate
        self._device = device
        self._priority = priority

    def run(self, arrays):
        with self._gate.hold(self._device, self._priority):
            return self._inner.run(arrays)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def gate_model(model: Any, gate: DeviceGate, priority: int) -> list[str]:
    """Put every executor of a ScheduledModel behind the gate; the devices it runs on.

    The scheduler's slots hold the executors it calls (ScheduledModel._run_one calls ``slot.executor.run``);
    the slots are swapped before the first request, while nothing runs."""
    devices = []
    for slot in model._scheduler.slots:
        gate.register(slot.device, slot.max_concurrency)
        slot.executor = GatedExecutor(slot.executor, gate, slot.device, priority)
        devices.append(slot.device)
    return devices
