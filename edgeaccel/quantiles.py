"""Percentiles of a few thousand timings in plain Python: numpy's ``percentile`` is the same linear
interpolation but imports ``numpy.ma`` and more on first use (2 MB of peak memory for `edgeaccel run`)."""

from __future__ import annotations


def percentiles(values, points=(50, 90, 99)) -> dict[str, float] | None:
    """{"p50": ..., ...} by linear interpolation between the closest ranks (numpy's default); None if empty."""
    data = sorted(values)
    if not data:
        return None
    out = {}
    for p in points:
        k = (len(data) - 1) * p / 100.0
        lo, hi = int(k), min(int(k) + 1, len(data) - 1)
        out[f"p{p}"] = data[lo] + (data[hi] - data[lo]) * (k - lo)
    return out
