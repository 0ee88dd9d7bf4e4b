"""The limits an isolated worker runs under."""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30
GUARDS = ("auto", "cgroup", "watchdog")


@dataclass(frozen=True)
class IsolationLimits:
    """Limits of the worker process that loads and runs an untrusted model (``load(..., isolate=...)``).

    memory_bytes: address-space limit (RLIMIT_AS) of a worker on the CPU; 0 for none. Address space, not
        resident memory: runtimes reserve far more than they touch (measured: see the README), so the default
        leaves room for that while stopping a model that declares tens of GiB. Not applied on other devices:
        CUDA, TensorRT and GPU plugins reserve address space on the scale of the device's memory.
    resident_bytes: resident-memory limit of every worker, whatever its device; 0 for none. Enforced by a
        cgroup v2 memory.max where this process may create one, else by a watchdog (see resident_guard).
        A worker over it is killed and the caller gets WorkerMemoryError naming the limit.
    resident_guard: "auto" (a cgroup where possible, else the watchdog), "cgroup" (the same, but the reason
        in executor.details says the cgroup was asked for), or "watchdog" (never a cgroup).
    watchdog_interval: seconds between two reads of the worker's VmRSS by the watchdog.
    load_timeout: seconds for starting the worker, importing the runtime and loading/compiling the model.
    run_timeout: seconds for one run() (queueing in the worker included).
    python: the interpreter that runs the worker; default ``sys.executable``.
    """

    memory_bytes: int = 16 * GiB
    load_timeout: float = 120.0
    run_timeout: float = 60.0
    python: str | None = None
    resident_bytes: int = 8 * GiB
    resident_guard: str = "auto"
    watchdog_interval: float = 0.05

    def __post_init__(self) -> None:
        if self.memory_bytes < 0 or self.resident_bytes < 0 or self.load_timeout <= 0 or self.run_timeout <= 0 \
                or self.watchdog_interval <= 0:
            raise ValueError("IsolationLimits: memory_bytes >= 0, resident_bytes >= 0 and positive timeouts and "
                             "watchdog_interval are required")
        if self.resident_guard not in GUARDS:
            raise ValueError(f"IsolationLimits: resident_guard must be one of {', '.join(GUARDS)}, "
                             f"not {self.resident_guard!r}")
