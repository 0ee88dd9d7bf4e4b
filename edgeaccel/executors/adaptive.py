"""One executor that runs a lone request on every core and concurrent requests on throughput streams
(``performance_hint="adaptive"``, what ``edgeaccel serve`` loads by default).

A latency configuration (one runtime object, all cores' threads on each request) is fastest for one request
at a time. Under concurrent load it loses: every other thread of the process (a server's event loop, its
clients on the same board) preempts one of the request's threads, and the parallel operators wait for it, so
each millisecond spent elsewhere costs a millisecond of the whole device. A throughput configuration (streams
of one thread each on up to 7 cores, a few threads each on more: ``throughput_stream_threads``) loses only that
stream's share, but a lone request runs on one stream.

Measured on a 2-core CPU with mobilenet_v2 behind ``edgeaccel serve`` (tools/bench_serve.py): 4 concurrent
clients reached about 0.78 of the in-process throughput under the latency hint and about 0.95 under the
throughput hint, while one client's request took 3.7 ms under the latency hint and 6.5 ms under the throughput
one. This executor holds both, built by the runtime's own executor class, and chooses per request: alone (no
other request of this executor running) on the latency twin, else on a throughput stream. The two sets of
threads overlap only while the load changes (a lone request still running when others arrive). The price is a
second copy of the runtime's objects (weights are shared through the page cache where the runtime mmaps), and
with ONNX Runtime on 8 cores or more one copy of the weights per stream session (up to 4 on 16 cores), each made
when that many requests first overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from .base import Executor, ExecutorInfo, ExecutorOptions
from .executor_options import throughput_stream_threads


def open_adaptive(open_with: Any, options: ExecutorOptions) -> Any:
    """``open_with(options)`` once per configuration; an AdaptiveExecutor, or the latency executor alone
    where the throughput configuration has one stream (a one-core machine, a device that runs one request at
    a time): there is nothing to adapt to."""
    wide = options.with_runtime(performance_hint="latency")
    narrow = options.with_runtime(performance_hint="throughput",
                                  stream_width=throughput_stream_threads())
    latency = open_with(wide)
    if narrow.streams() < 2:
        return latency
    try:
        throughput = open_with(narrow)
    except BaseException:
        latency.close()
        raise
    if throughput.concurrency < 2:
        throughput.close()
        return latency
    return AdaptiveExecutor(latency, throughput)


class AdaptiveExecutor:
    """Everything but ``run``, ``submit``, ``info``, ``concurrency`` and ``close`` is the throughput twin's (the
    same model, runtime and device)."""

    def __init__(self, latency: Executor, throughput: Executor) -> None:
        self.latency = latency
        self.throughput = throughput
        self._lock = threading.Lock()
        self._running = 0
        self.runs = {"latency": 0, "throughput": 0}  # which configuration took each request
        self._workers: ThreadPoolExecutor | None = None

    @property
    def concurrency(self) -> int:
        return self.throughput.concurrency

    @property
    def info(self) -> ExecutorInfo:
        base = self.throughput.info
        wide = self.latency.info
        details = {**base.details, "adaptive": True, "latency_threads": wide.threads,
                   "throughput_streams": self.throughput.concurrency, "runs": dict(self.runs)}
        if not getattr(self.throughput, "sizes_own_streams", False):
            details["stream_threads"] = base.threads
        return replace(base, threads=wide.threads, details=details)

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            alone = self._running == 0
            self._running += 1
            self.runs["latency" if alone else "throughput"] += 1
        try:
            return (self.latency if alone else self.throughput).run(inputs)
        finally:
            with self._lock:
                self._running -= 1

    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """As Executor.submit: ``concurrency`` worker threads calling ``run`` (which picks the twin)."""
        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"{self.runtime}-adaptive")
            workers = self._workers
        return workers.submit(self.run, inputs)

    def close(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=True)
        try:
            self.throughput.close()
        finally:
            self.latency.close()

    def __getattr__(self, name: str):
        if name in ("latency", "throughput"):  # not set yet: no twin to ask (and no endless recursion)
            raise AttributeError(name)
        return getattr(self.throughput, name)
