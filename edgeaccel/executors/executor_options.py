"""``ExecutorOptions``: what one executor is opened with, the caller's ``RuntimeOptions`` (validated in
``edgeaccel.options``) plus the precision the selector chose for this candidate. The runtime fields are read
through it (``options.threads``, ``options.gpu_mem_limit_mb``, ...) and declared nowhere else.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, replace

from ..options import RuntimeOptions

# the keywords ExecutorOptions took before RuntimeOptions held them: old name -> RuntimeOptions field
_MOVED = {"threads": "threads", "performance_hint": "performance_hint", "cache_dir": "cache_dir",
          "runtime_options": "native", "gpu_mem_limit_mb": "gpu_mem_limit_mb"}


@dataclass(frozen=True, init=False)
class ExecutorOptions:
    """What one executor runs with. ``precision`` None means the model's own precision, f32 for float math:
    reduced precision (bf16, f16) is an opt-in because it changes answers (runtime facts: OpenVINO bf16).
    ``runtime.cache_dir`` is the folder this executor may keep compiled models in, None when it keeps none.
    ``stream_width``: threads of one throughput stream where the caller sizes them (the adaptive executor's
    twin: ``throughput_stream_threads``); None, one each (the throughput hint's own: the most answers a second
    with many requests in flight). ``runtime.threads``, where given, wins over both."""

    runtime: RuntimeOptions
    precision: str | None
    stream_width: int | None

    def __init__(self, runtime: RuntimeOptions | None = None, precision: str | None = None, *,
                 stream_width: int | None = None, **moved) -> None:
        if runtime is not None and not isinstance(runtime, RuntimeOptions):
            from ..errors import ConfigError

            raise ConfigError(f"ExecutorOptions(runtime=...) takes a RuntimeOptions, not {type(runtime).__name__}",
                              key="runtime", hint="write ExecutorOptions(RuntimeOptions(threads=2), precision='f16')")
        if moved:
            unknown = sorted(set(moved) - set(_MOVED))
            if unknown:
                raise TypeError(f"ExecutorOptions() got unexpected keyword arguments {unknown}")
            new = {_MOVED[k]: v for k, v in moved.items()}
            spelled = ", ".join(f"{k}={v!r}" for k, v in new.items())
            warnings.warn(f"ExecutorOptions({', '.join(moved)}=...) is deprecated: write "
                          f"ExecutorOptions(RuntimeOptions({spelled}), precision=...)", DeprecationWarning,
                          stacklevel=2)
            runtime = replace(runtime or RuntimeOptions(), **new)
        object.__setattr__(self, "runtime", runtime or RuntimeOptions())
        object.__setattr__(self, "precision", precision)
        object.__setattr__(self, "stream_width", stream_width)

    def with_runtime(self, stream_width: int | None = None, **changes) -> ExecutorOptions:
        """A copy whose RuntimeOptions fields ``changes`` replace (validated again)."""
        return ExecutorOptions(replace(self.runtime, **changes), self.precision,
                               stream_width=stream_width or self.stream_width)

    # the runtime's fields, read where executors always read them
    @property
    def threads(self) -> int | None:
        return self.runtime.threads

    @property
    def performance_hint(self) -> str:
        return self.runtime.performance_hint

    @property
    def gpu_mem_limit_mb(self) -> float | None:
        return self.runtime.gpu_mem_limit_mb

    @property
    def runtime_options(self) -> dict:
        """Options passed to the runtime as they are (``RuntimeOptions.native``)."""
        return self.runtime.native

    @property
    def cache_dir(self) -> str | None:
        return os.fspath(self.runtime.cache_dir) if self.runtime.cache and self.runtime.cache_dir else None

    def resolved_threads(self) -> int:
        return self.threads or default_threads()

    @property
    def throughput(self) -> bool:
        return self.performance_hint == "throughput"

    def stream_threads(self) -> int:
        """Threads per stream: all cores for one stream (latency), ``stream_width`` or one under throughput."""
        if self.threads:
            return self.threads
        return (self.stream_width or 1) if self.throughput else default_threads()

    def streams(self) -> int:
        """Concurrent requests that keep the cores busy."""
        return max(1, default_threads() // self.stream_threads()) if self.throughput else 1


def throughput_stream_threads(cores: int | None = None) -> int:
    """Threads of one stream of the adaptive executor's throughput twin on ``cores`` cores: 1 below 8 cores
    (on 2 cores, 4 clients were served best so: executors/adaptive.py), then cores // 4 up to the square root of
    the cores (8: 4 streams of 2, 16: 4 of 4, 64: 8 of 8). Streams of one thread each keep only as many cores
    busy as requests overlap: 4 clients of a 16-core server used 4 cores, each request taking the
    single-threaded time (the 16-core host's figures in README: 4 clients reached 0.57 of in-process). Wider streams keep
    every core busy from 4 overlapping requests on, at the intra-op scaling of 2-8 threads (the price, against
    one stream per core, when more requests overlap than there are streams); ``--threads`` / ``threads=``
    chooses otherwise. Arithmetic on those figures, not measured on a many-core machine yet. ``cores``: this
    process's (``default_threads``) unless given."""
    cores = default_threads() if cores is None else cores
    return max(1, min(cores // 4, math.isqrt(cores)))


def default_threads() -> int:
    """Cores this process may use (affinity and cgroup CPU sets respected), the best thread count for one model."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)

