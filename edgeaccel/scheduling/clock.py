"""Clocks the scheduler runs on. Everything that needs time takes a clock, so a simulated clock can drive a
half hour of scheduling in seconds and tests never depend on the wall clock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    simulated: bool

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
