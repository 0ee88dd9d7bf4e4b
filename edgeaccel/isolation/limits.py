"""The limits an isolated worker runs under."""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class IsolationLimits:
    """Limits of the worker process that loads and runs an untrusted model (``load(..., isolate=...)``).

    memory_bytes: address-space limit (RLIMIT_AS) of the worker; 0 for none. Address space, not resident
        memory: runtimes reserve far more than they touch (measured: see the README), so the default leaves
        room for that while stopping a model that declares tens of GiB.
    load_timeout: seconds for starting the worker, importing the runtime and loading/compiling the model.
    run_timeout: seconds for one run() (queueing in the worker included).
    python: the interpreter that runs the worker; default ``sys.executable``.
    """

    memory_bytes: int = 16 * GiB
    load_timeout: float = 120.0
    run_timeout: float = 60.0
    python: str | None = None

    def __post_init__(self) -> None:
        if self.memory_bytes < 0 or self.load_timeout <= 0 or self.run_timeout <= 0:
            raise ValueError("IsolationLimits: memory_bytes >= 0 and positive timeouts are required")
