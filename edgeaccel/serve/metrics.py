"""What the server tells its operator: Prometheus metrics at /metrics and, with ``--log-json``, one JSON line
per request at INFO on the ``edgeaccel.serve.access`` logger.

Metrics (prefix ``edgeaccel_serve_``): requests by model, protocol and status; request latency histogram by
model; batch sizes by model; queue depth (accepted, unanswered requests); per device the gate's limit, running
and waiting runs; per model the fallbacks so far; per device the scheduler's telemetry where a sensor gives it:
temperature, power, time throttled by the hardware and time limited by the policy. A device without a sensor
has no temperature series (the model's stats say why), never a made-up value."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

access_log = logging.getLogger("edgeaccel.serve.access")
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
UNKNOWN = "(not loaded)"


class Metrics:
    def __init__(self, log_json: bool = False) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.log_json = log_json
        self.requests = Counter("edgeaccel_serve_requests", "Inference requests answered",
                                ["model", "protocol", "status"], registry=self.registry)
        self.latency = Histogram("edgeaccel_serve_request_seconds", "Inference request latency, received to answered",
                                 ["model", "protocol"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batches = Histogram("edgeaccel_serve_batch_size", "Rows per run of a dynamically batched model",
                                 ["model"], buckets=BATCH_BUCKETS, registry=self.registry)
        self.core: Any = None
        self._series: dict[tuple, tuple] = {}  # (model, protocol, status) -> its counter and histogram children

    def attach(self, core: Any) -> None:
        """Read the core's live state (queue, gate, models' telemetry) at every scrape."""
        self.core = core
        self.registry.register(_CoreCollector(core))

    def batch(self, model: str, rows: int) -> None:
        self.batches.labels(model).observe(rows)

    def request(self, model: str, protocol: str, status: int, seconds: float, request_id: str = "",
                error: str | None = None) -> None:
        # a name no model has is one label value for all: clients must not grow the series without bound
        label = model if self.core is None or self.core.is_loaded(model) else UNKNOWN
        key = (label, protocol, status)
        series = self._series.get(key)
        if series is None:  # prometheus-client's labels() takes a lock and builds the key on every call: once
            series = self._series[key] = (self.requests.labels(label, protocol, str(status)),
                                          self.latency.labels(label, protocol))
        series[0].inc()
        if status < 400:
            series[1].observe(seconds)
        if self.log_json and access_log.isEnabledFor(logging.INFO):
            line = {"ts": round(time.time(), 6), "model": model, "protocol": protocol, "status": status,
                    "ms": round(seconds * 1000.0, 3)}
            if request_id:
                line["id"] = request_id
            if error:
                line["error"] = error.splitlines()[0][:300]
            access_log.info(json.dumps(line, separators=(",", ":")))

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _CoreCollector:
    def __init__(self, core: Any) -> None:
        self.core = core

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        core = self.core
        queue = GaugeMetricFamily("edgeaccel_serve_queue_depth", "Requests accepted and not answered yet")
        queue.add_metric([], core.pending)
        yield queue
        streams = GaugeMetricFamily("edgeaccel_serve_tracked_streams", "Streams whose frames are tracked (stream=), "
                                    "kept until idle")
        streams.add_metric([], len(core.streams))
        yield streams
        gate = {name: GaugeMetricFamily(f"edgeaccel_serve_device_{name}", text, labels=["device"])
                for name, text in (("limit", "Runs a device may hold at once, all models together"),
                                   ("running", "Runs on a device now"), ("waiting", "Runs waiting for a device"),
                                   ("peak", "Most runs a device held at once"),
                                   ("duty", "Duty cycle the policies allow the device now, all models together"))}
        for device, row in core.gate.snapshot().items():
            for name, family in gate.items():
                family.add_metric([device], row[name])
        yield from gate.values()
        fallbacks = CounterMetricFamily("edgeaccel_serve_fallbacks", "Executors that failed to load or run, and "
                                        "were replaced (model.fallbacks)", labels=["model"])
        temp = GaugeMetricFamily("edgeaccel_serve_device_temperature_celsius", "Latest device temperature",
                                 labels=["device"])
        power = GaugeMetricFamily("edgeaccel_serve_device_power_watts", "Latest device power", labels=["device"])
        throttled = GaugeMetricFamily("edgeaccel_serve_device_throttled_seconds",
                                      "Time the hardware throttled the device (most any model saw)", labels=["device"])
        limited = GaugeMetricFamily("edgeaccel_serve_device_limited_seconds",
                                    "Time the policy limited the device (most any model saw)", labels=["device"])
        runs = CounterMetricFamily("edgeaccel_serve_executor_runs", "Requests an executor of a model ran (where "
                                   "the policy sent them)", labels=["model", "executor", "device"])
        seen: dict[str, tuple] = {}
        for name, served in core.loaded().items():
            model = served.model
            fallbacks.add_metric([name], len(model.fallbacks))
            try:
                stats = model.stats
                samples = model.telemetry
            except Exception:  # a model closing under the scrape: its figures are gone, the others stay
                continue
            devices = stats.devices
            for executor, figures in stats.executors.items():
                runs.add_metric([name, executor, figures.device], figures.completed)
            for device, stats in devices.items():
                sample = samples.get(device)
                was = seen.get(device, (None, None, 0.0, 0.0))
                seen[device] = (stats.last_temp_c if stats.last_temp_c is not None else was[0],
                                sample.power_w if sample is not None and sample.power_w is not None else was[1],
                                max(was[2], stats.hw_throttled_s), max(was[3], stats.limited_s))
        for device, (t, p, thr, lim) in sorted(seen.items()):
            if t is not None:
                temp.add_metric([device], t)
            if p is not None:
                power.add_metric([device], p)
            throttled.add_metric([device], thr)
            limited.add_metric([device], lim)
        yield from (fallbacks, runs, temp, power, throttled, limited)
