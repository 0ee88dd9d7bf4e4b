"""One limit per device on the requests running at once, and one duty cycle, shared by every model the server
holds.

Each served model is a ScheduledModel with its own scheduler (deadline order, the thermal/power policy, its own
executors' concurrency). Alone, two models on one Edge TPU would each think they hold it; the gate is what
makes them share: every run of every model on a device first takes one of that device's places, and waiting
runs are let in by their model's priority (higher first), then in arrival order. A device's limit is the most
runs any one model can have on it at once: its largest executor's concurrency there (a model's executors on one
device take turns, as the scheduler runs them: ``scheduling/core.py``; 1 for an Edge TPU: one request at a time
holds it), unless the command line sets it (``--device-limit cpu=2``).

The policies act on the device as a whole too: each model's policy cuts its own runs to a duty cycle when the
device is hot, but two models each at half duty would keep the device fully busy. So the gate also holds a
duty budget per device (the scheduler's own token bucket of busy-seconds, ``scheduling.slots.DeviceBudget``)
at the lowest duty any model's policy asks for that device now: together, all models' runs on it stay within
what one policy allows.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from ..scheduling.slots import DeviceBudget

DUTY_POLL_S = 0.05  # a run held back by the duty budget looks again this often (a policy may raise the duty)


class DeviceGate:
    def __init__(self, limits: dict[str, int] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._fixed = {k.lower(): int(v) for k, v in (limits or {}).items()}
        for device, n in self._fixed.items():
            if n < 1:
                raise ValueError(f"the limit of device {device} must be at least 1, not {n}")
        self._limits: dict[str, int] = dict(self._fixed)
        self._clock = clock
        self._cond = threading.Condition()
        self._running: dict[str, int] = defaultdict(int)
        self._waiting: dict[str, list] = defaultdict(list)  # heap of (-priority, seq)
        self._seq = itertools.count()
        self._budgets: dict[str, DeviceBudget] = {}
        self._duties: dict[str, list[Callable[[], float | None]]] = defaultdict(list)
        self.peak: dict[str, int] = defaultdict(int)  # most runs at once seen on each device
        self.runs: dict[str, int] = defaultdict(int)

    def register(self, device: str, concurrency: int, duty: Callable[[], float | None] | None = None) -> None:
        """A model's executor runs on ``device`` and can take ``concurrency`` requests at once; ``duty()`` says
        the duty cycle that model's policy wants for the device now (None once the model is gone)."""
        with self._cond:
            if device not in self._fixed:
                self._limits[device] = max(self._limits.get(device, 1), int(concurrency))
            if duty is not None:
                self._duties[device].append(duty)

    def idle(self, device: str) -> bool:
        """Nothing runs or waits on ``device`` and no policy duty-cycles it: a run would take its place at once.
        Read without the lock (a stale answer costs one run's wait, never a wrong answer): for the HTTP side to
        decide whether a short request may run on the event loop's thread, which must not wait here."""
        if self._running.get(device) or self._waiting.get(device):
            return False
        # the duty the policies want now, not the budget's copy from the last run: a duty cut since then would
        # hold the loop's own run at the gate, in duty polls, with every HTTP client waiting
        wanted = (source() for source in list(self._duties.get(device, ())))
        return min((value for value in wanted if value is not None), default=1.0) >= 1.0

    def limit(self, device: str) -> int:
        return self._limits.get(device, 1)

    def duty(self, device: str) -> float:
        """The lowest duty cycle any live model's policy wants for ``device`` (1.0: unlimited)."""
        live, wanted = [], []
        for source in self._duties.get(device, ()):
            value = source()
            if value is not None:  # None: the model was unloaded; forget it
                live.append(source)
                wanted.append(value)
        self._duties[device] = live
        return min(wanted, default=1.0)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per device: limit, running, waiting, peak, runs, duty (for /metrics and the tests)."""
        with self._cond:
            devices = set(self._limits) | set(self.runs)
            return {d: {"limit": self.limit(d), "running": self._running[d], "waiting": len(self._waiting[d]),
                        "peak": self.peak[d], "runs": self.runs[d], "duty": self.duty(d)} for d in sorted(devices)}

    def _budget(self, device: str, now: float) -> DeviceBudget:
        budget = self._budgets.get(device)
        if budget is None or budget.capacity != self.limit(device):
            budget = self._budgets[device] = DeviceBudget(self.limit(device))
        duty = self.duty(device)
        if duty != budget.duty:
            budget.set_duty(duty, now)
        budget.refill(now)
        return budget

    @contextmanager
    def hold(self, device: str, priority: int = 0):
        with self._cond:
            ticket = (-priority, next(self._seq))
            queue = self._waiting[device]
            heapq.heappush(queue, ticket)
            while True:
                if self._running[device] < self.limit(device) and queue[0] == ticket:
                    now = self._clock()
                    if self._budget(device, now).ready_at(now) <= now:
                        break
                    self._cond.wait(DUTY_POLL_S)  # the device is over its duty budget: the policies hold it back
                else:
                    self._cond.wait()
            heapq.heappop(queue)
            self._running[device] += 1
            self.runs[device] += 1
            self.peak[device] = max(self.peak[device], self._running[device])
            self._cond.notify_all()  # the next in line may fit too
            started = self._clock()
        try:
            yield
        finally:
            with self._cond:
                self._running[device] -= 1
                self._budgets[device].charge(max(0.0, self._clock() - started))
                self._cond.notify_all()


# The executor that answered a request, as its worker thread saw it: the scheduler settles a request's future in
# the thread that ran it, so the core's callback reads it there (ran_by). Keyed by the request's first input
# array, so a callback that runs in another thread (a future already done) finds no stale name.
_RAN = threading.local()


def ran_by(first_input: Any) -> str | None:
    """The name of the executor that ran the request whose first input array is ``first_input``, or None."""
    seen = getattr(_RAN, "last", None)
    return seen[1] if seen is not None and seen[0] is first_input else None


class GatedExecutor:
    """An executor whose runs take a place at the gate first; everything else is the executor's own."""

    def __init__(self, inner: Any, gate: DeviceGate, device: str, priority: int, name: str = "") -> None:
        self._inner = inner
        self._gate = gate
        self._device = device
        self._priority = priority
        self._name = name

    def run(self, arrays):
        with self._gate.hold(self._device, self._priority):
            results = self._inner.run(arrays)
        _RAN.last = (arrays[0] if len(arrays) else None, self._name)
        return results

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def gate_model(model: Any, gate: DeviceGate, priority: int) -> list[str]:
    """Put every executor of a ScheduledModel behind the gate; the devices it runs on. The slots are swapped
    before the first request, while nothing runs."""
    places: dict[str, int] = {}
    for slot in model.slots:
        places[slot.device] = max(places.get(slot.device, 0), slot.max_concurrency)
        slot.executor = GatedExecutor(slot.executor, gate, slot.device, priority, slot.name)
    for device, concurrency in places.items():
        gate.register(device, concurrency, _duty_of(model, device))
    return list(places)


def _duty_of(model: Any, device: str) -> Callable[[], float | None]:
    """The duty the model's latest policy decision gives ``device``; None once the model is closed or gone
    (a weak reference: the gate must not keep an unloaded model alive)."""
    owner = weakref.ref(model)

    def duty() -> float | None:
        alive = owner()
        return None if alive is None else alive.duty(device)

    return duty
