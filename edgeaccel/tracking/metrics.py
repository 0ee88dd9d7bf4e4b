"""Lines and zones as Prometheus metrics, read from the live trackers at every scrape (``run --metrics-port``):

    edgeaccel_line_crossings_total{source, line, direction, class}   tracks that crossed a line, "in" or "out"
    edgeaccel_zone_entries_total{source, zone, class}                tracks that entered a zone
    edgeaccel_zone_exits_total{source, zone, class}                  tracks that left it (an ended track is not an exit)
    edgeaccel_zone_occupancy{source, zone}                           tracks inside now
    edgeaccel_zone_dwell_seconds{source, zone, class}                histogram: time in the zone of each track that
                                                                     left it (or ended inside it)
    edgeaccel_tracks_total{source}                                   track ids given out

Counts come from the same counters as the JSON summary, so the two always agree. prometheus-client is
imported only when metrics are served (the ``serve`` extra, or ``pip install prometheus-client``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

DWELL_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class Dwell:
    """A histogram of dwell times per (zone, class), cumulative as Prometheus wants it at collection."""

    def __init__(self, buckets: tuple[float, ...] = DWELL_BUCKETS) -> None:
        self.buckets = buckets
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.sums: dict[tuple[str, str], float] = {}

    def observe(self, zone: str, label: str, seconds: float) -> None:
        key = (zone, label)
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self.sums[key] = self.sums.get(key, 0.0) + seconds

    def cumulative(self) -> dict[tuple[str, str], tuple[list[tuple[str, int]], float]]:
        out = {}
        for key, counts in self.counts.items():
            running, rows = 0, []
            for bound, n in zip((*[repr(float(b)) for b in self.buckets], "+Inf"), counts, strict=True):
                running += n
                rows.append((bound, running))
            out[key] = (rows, self.sums[key])
        return out


class TrackingCollector:
    """A prometheus-client collector over ``trackers()``: [(source name, SourceTracking)], read at each scrape."""

    def __init__(self, trackers: Callable[[], list]) -> None:
        self.trackers = trackers

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        crossings = CounterMetricFamily("edgeaccel_line_crossings", "Tracks that crossed a line",
                                        labels=["source", "line", "direction", "class"])
        entries = CounterMetricFamily("edgeaccel_zone_entries", "Tracks that entered a zone",
                                      labels=["source", "zone", "class"])
        exits = CounterMetricFamily("edgeaccel_zone_exits", "Tracks that left a zone", labels=["source", "zone", "class"])
        occupancy = GaugeMetricFamily("edgeaccel_zone_occupancy", "Tracks inside a zone now", labels=["source", "zone"])
        dwell = HistogramMetricFamily("edgeaccel_zone_dwell_seconds", "Time in a zone of each track that left it",
                                      labels=["source", "zone", "class"])
        tracks = CounterMetricFamily("edgeaccel_tracks", "Track ids given out", labels=["source"])
        for source, tracking in self.trackers():
            summary, histogram = tracking.snapshot()
            tracks.add_metric([source], summary["tracks"])
            for line, counts in summary.get("lines", {}).items():
                for direction in ("in", "out"):
                    for label, n in counts[direction].items():
                        crossings.add_metric([source, line, direction, str(label)], n)
            for zone, counts in summary.get("zones", {}).items():
                for label, n in counts["in"].items():
                    entries.add_metric([source, zone, str(label)], n)
                for label, n in counts["out"].items():
                    exits.add_metric([source, zone, str(label)], n)
                occupancy.add_metric([source, zone], counts.get("inside", 0))
            for (zone, label), (buckets, total) in histogram.items():
                dwell.add_metric([source, zone, str(label)], buckets, total)
        yield from (crossings, entries, exits, occupancy, dwell, tracks)


def serve_metrics(port: int, trackers: Callable[[], list], addr: str = "0.0.0.0"):
    """Serve /metrics on ``port`` (0: any free port) from a thread; returns (server, port). ``server.shutdown()``
    stops it."""
    from prometheus_client import CollectorRegistry, start_http_server

    from ..errors import InputError

    registry = CollectorRegistry()
    registry.register(TrackingCollector(trackers))
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise InputError(f"cannot serve metrics on port {port}: {exc.strerror or exc}",
                         hint="give a free port to --metrics-port (0 picks one)") from exc
    return server, server.server_address[1]
