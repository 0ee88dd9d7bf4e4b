"""The clocks the scheduler runs on: ``edgeaccel.clock``, below both the scheduler and background calibration,
which take the same clock. Re-exported here, where the scheduler's users import them."""

from ..clock import Clock, MonotonicClock

__all__ = ["Clock", "MonotonicClock"]
