"""A simulated clock: time moves only when told to, so 30 simulated minutes take as long as the work done
in them. ``sleep`` advances it (for code that sleeps on the clock it was given)."""

from __future__ import annotations

import threading


class SimClock:
    simulated = True

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        with self._lock:
            if t > self._now:
                self._now = float(t)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)
