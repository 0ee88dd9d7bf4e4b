"""The clock that code which waits runs on. Everything that needs time takes a clock, so a simulated clock
(``edgeaccel.sim.clock.SimClock``, or a test's own) can drive a half hour of scheduling in seconds, and tests of
what a thread does while it waits never depend on the wall clock (the scheduler, background calibration)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    simulated: bool  # True: time moves only when told to (``sleep`` advances it), never by itself

    def now(self) -> float:
        """Seconds, monotonic."""

    def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    simulated = False

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)
