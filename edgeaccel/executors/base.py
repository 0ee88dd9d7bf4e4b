"""The small contract every executor implements: availability with a reason, load, run, close.

An executor owns one loaded model on one device of one runtime. ``run`` receives inputs already validated
by the Model (count, order, dtype, shape), is safe to call from many threads at once (each executor keeps
the runtime objects that are not thread-safe in a pool), and returns outputs in the model's order.
Runtimes are imported inside the executor's methods, never when edgeaccel is imported.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:  # concurrent.futures costs start-up memory; only the asynchronous path needs it
    from concurrent.futures import Future, ThreadPoolExecutor

from ..modelinfo import Format, ModelInfo, TensorSpec
from ..packages import installed_version


@dataclass(frozen=True)
class Availability:
    """Whether a runtime (or a device through it) can be used here, and if not why and how to fix it."""

    ok: bool
    reason: str
    fix: str | None = None
    version: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        text = self.reason if not self.version else f"{self.reason} (version {self.version})"
        return f"{text}; fix: {self.fix}" if self.fix else text


@dataclass(frozen=True)
class ExecutorOptions:
    """What the caller may tune. ``precision`` None means the model's own precision, f32 for float math:
    reduced precision (bf16, f16) is an opt-in because it changes answers (FINDINGS: OpenVINO bf16)."""

    threads: int | None = None
    precision: str | None = None
    performance_hint: str = "latency"  # or "throughput"
    cache_dir: str | None = None
    runtime_options: dict = field(default_factory=dict)  # passed to the runtime as they are

    def resolved_threads(self) -> int:
        return self.threads or default_threads()

    @property
    def throughput(self) -> bool:
        return self.performance_hint == "throughput"

    def stream_threads(self) -> int:
        """Threads per stream: all cores for one stream (latency), one each for one stream per core
        (throughput: FINDINGS, independent streams scale better than intra-op threads)."""
        if self.threads:
            return self.threads
        return 1 if self.throughput else default_threads()

    def streams(self) -> int:
        """Concurrent requests that keep the cores busy."""
        return max(1, default_threads() // self.stream_threads()) if self.throughput else 1


def default_threads() -> int:
    """Cores this process may use (affinity and cgroup CPU sets respected), the best thread count for one model."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ExecutorInfo:
    """What runs the model: shown by ``print(model.executor)``."""

    runtime: str
    version: str
    device: str
    precision: str
    threads: int | None = None
    reason: str = ""
    artifact: str = ""
    details: dict = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return f"{self.runtime}:{self.device}"

    def __str__(self) -> str:
        parts = [f"{self.runtime} {self.version} on {self.device}", f"precision {self.precision}"]
        if self.threads:
            parts.append(f"{self.threads} threads")
        text = ", ".join(parts)
        return f"{text} ({self.reason})" if self.reason else text


class Executor(ABC):
    """Base class. Subclasses set ``runtime``, ``formats`` and ``devices`` and implement the four methods."""

    runtime: ClassVar[str]
    formats: ClassVar[frozenset[Format]]
    devices: ClassVar[tuple[str, ...]] = ("CPU",)
    # precisions the caller may ask for; None is "the model's own" (f32 math for float models)
    precisions: ClassVar[tuple[str | None, ...]] = (None, "f32")
    # (top-level module, pip distribution) pairs that provide the runtime, any one suffices (checked
    # without importing it)
    distributions: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        self.model = model
        self.device = device
        self.options = options
        self._workers: ThreadPoolExecutor | None = None
        self._workers_lock = threading.Lock()

    @classmethod
    def installed(cls) -> str | None:
        """The installed version of the runtime's package, from metadata alone (no import: cheap)."""
        return installed_version(cls.distributions)

    @classmethod
    @abstractmethod
    def availability(cls, device: str | None = None) -> Availability:
        """Can this runtime (and ``device``, when given) be used in this process? Cheap; never raises."""

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        """Why this executor cannot run ``model`` on ``device``, from the description alone; None if it may.
        Pure: no runtime import, no device access."""
        if model.format not in cls.formats:
            readable = ", ".join(sorted(f.value for f in cls.formats))
            return f"{cls.runtime} reads {readable}, not {model.format.value}"
        if options.precision not in cls.precisions:
            allowed = ", ".join(p for p in cls.precisions if p)
            return f"{cls.runtime} on {device} cannot run at precision {options.precision} (it offers {allowed})"
        return None

    @property
    @abstractmethod
    def info(self) -> ExecutorInfo: ...

    @abstractmethod
    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run once. ``inputs`` are in the model's input order, already validated."""

    @abstractmethod
    def close(self) -> None:
        """Release every runtime object. Idempotent. Subclasses call ``self.stop_workers()`` first."""

    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Run in the background and return a Future of the outputs. The default keeps ``streams()``
        worker threads calling ``run`` (each takes its own runtime object from the executor's pool);
        executors with a native asynchronous API override this."""
        workers = self._workers
        if workers is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._workers_lock:
                if self._workers is None:
                    self._workers = ThreadPoolExecutor(self.options.streams(), thread_name_prefix=self.runtime)
                workers = self._workers
        return workers.submit(self.run, inputs)

    @property
    def concurrency(self) -> int:
        """How many requests may be in flight at once to keep the device busy."""
        return self.options.streams()

    def stop_workers(self) -> None:
        with self._workers_lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=True)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.model.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.model.outputs


T = TypeVar("T")


class Pool(Generic[T]):
    """A free list of runtime objects that must not be shared between threads (a LiteRT Interpreter, an
    OpenVINO InferRequest). A caller takes one, uses it alone, and gives it back; a new one is made when
    all are busy, up to ``limit``, after which callers wait.
    """

    def __init__(self, factory: Callable[[], T], limit: int, close: Callable[[T], None] | None = None) -> None:
        self._factory = factory
        self._close = close
        self._free: list[T] = []
        self._all: list[T] = []
        self._limit = max(1, limit)
        self._cond = threading.Condition(threading.Lock())

    def prime(self, item: T) -> None:
        with self._cond:
            self._all.append(item)
            self._free.append(item)

    def take(self) -> T:
        with self._cond:
            while True:
                if self._free:
                    return self._free.pop()
                if len(self._all) < self._limit:
                    break
                self._cond.wait()
            self._all.append(None)  # reserve the slot while the new object is built outside the lock
        try:
            item = self._factory()
        except BaseException:
            with self._cond:
                self._all.remove(None)
                self._cond.notify()
            raise
        with self._cond:
            self._all[self._all.index(None)] = item
        return item

    def give(self, item: T) -> None:
        with self._cond:
            self._free.append(item)
            self._cond.notify()

    def drain(self) -> None:
        with self._cond:
            items, self._free, self._all = [i for i in self._all if i is not None], [], []
        if self._close:
            for item in items:
                self._close(item)

    def __len__(self) -> int:
        return len(self._all)
