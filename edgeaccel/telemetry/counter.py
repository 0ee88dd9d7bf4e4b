"""Cumulative energy from a counter that wraps (RAPL ``energy_uj`` wraps at ``max_energy_range_uj``) or resets
(a driver reload, NVML after a GPU reset).

The accumulator sees raw counter values in order. A value below the previous one is a wrap when the counter
has a known range (delta = range - previous + value), a reset otherwise (the new value is all that is known to
have been spent since). Several wraps between two samples cannot be told apart from one: sample at least once
per ``max_safe_interval_s``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EnergyAccumulator:
    range_j: float | None = None  # the counter wraps to 0 after this many joules; None: it does not wrap
    total_j: float = 0.0
    last_raw_j: float | None = None
    wraps: int = 0
    resets: int = 0
    first_raw_j: float | None = None

    def update(self, raw_j: float) -> float:
        """Feed one raw counter value (J); return the energy spent since the previous value."""
        if self.last_raw_j is None:
            self.last_raw_j = self.first_raw_j = raw_j
            return 0.0
        delta = raw_j - self.last_raw_j
        if delta < 0:
            if self.range_j:
                delta = self.range_j - self.last_raw_j + raw_j
                self.wraps += 1
            else:
                delta = raw_j
                self.resets += 1
        self.last_raw_j = raw_j
        self.total_j += delta
        return delta


def max_safe_interval_s(range_j: float, peak_w: float) -> float:
    """The longest sampling interval at which a counter of ``range_j`` cannot wrap twice at ``peak_w``."""
    return range_j / peak_w if peak_w > 0 else float("inf")
