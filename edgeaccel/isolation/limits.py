"""The limits an isolated worker runs under."""

from __future__ import annotations

import os
from dataclasses import dataclass

GiB = 1 << 30
GUARDS = ("auto", "cgroup", "watchdog")
SANDBOX_MODES = ("auto", "require", "off")


@dataclass(frozen=True)
class SandboxProbe:
    """For tests only: once the sandbox is up and the model loaded, the worker attempts each forbidden action
    (read /etc/passwd and ``files``, write outside its temp folder, connect to 127.0.0.1:``tcp_port`` and to
    the Unix socket ``unix_socket``, start /bin/sh, ptrace or signal its caller, allocate past its
    address-space limit, open more files than its limit) and reports each outcome in
    ``executor.details["isolated"]["sandbox"]["probe"]``. Off unless ``IsolationLimits(probe=...)`` asks.

    ``bad_reply``: instead, the worker answers every run with that malformed reply (one of probe.BAD_REPLIES), as
    a worker taken over by its model could: offsets and sizes past the shared region, a wrong sequence number,
    garbage, or an attempt to shrink the region under the caller."""

    files: tuple[str, ...] = ()
    tcp_port: int = 9
    unix_socket: str = ""
    bad_reply: str = ""

    def __post_init__(self) -> None:
        import importlib.util

        if importlib.util.find_spec(f"{__package__}.probe") is None:
            from ..errors import ConfigError

            raise ConfigError("SandboxProbe is a test hook, and this install of edgeaccel has no probe module: "
                              "the wheel leaves it out", hint="run the sandbox tests from a source checkout "
                                                              "(pip install -e .)")
        if self.bad_reply:
            from .probe import BAD_REPLIES  # only when a test asks: probe.py is the worker's

            if self.bad_reply not in BAD_REPLIES:
                raise ValueError(f"SandboxProbe: bad_reply must be one of {', '.join(map(repr, BAD_REPLIES))}, "
                                 f"not {self.bad_reply!r}")


def physical_memory() -> int:
    """Bytes of RAM of this machine (0 where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


@dataclass(frozen=True)
class IsolationLimits:
    """Limits of the worker process that loads and runs an untrusted model (``RuntimeOptions(isolate=...)``).

    memory_bytes: address-space limit (RLIMIT_AS) of a worker on the CPU; 0 for none. Address space, not
        resident memory: runtimes reserve far more than they touch (measured: see the README), so the default
        leaves room for that while stopping a model that declares tens of GiB. Not applied on other devices:
        CUDA, TensorRT and GPU plugins reserve address space on the scale of the device's memory.
    resident_bytes: resident-memory limit of every worker, whatever its device; 0 for none; by default
        ``memory_share`` of this machine's RAM (8 GiB where it cannot be read). Enforced by a
        cgroup v2 memory.max where this process may create one, else by a watchdog (see resident_guard).
        A worker over it is killed and the caller gets WorkerMemoryError naming the limit.
    resident_guard: "auto" (a cgroup where possible, else the watchdog), "cgroup" (the same, but the reason
        in executor.details says the cgroup was asked for), or "watchdog" (never a cgroup).
    watchdog_interval: seconds between two reads of the worker's VmRSS by the watchdog.
    load_timeout: seconds for starting the worker, importing the runtime and loading/compiling the model.
    run_timeout: seconds for one run() (queueing in the worker included).
    python: the interpreter that runs the worker; default ``sys.executable``.
    memory_share: the share of this machine's RAM that ``resident_bytes`` defaults to.
    sandbox: "auto" (every sandbox layer the kernel offers, the missing ones named in
        ``executor.details["isolated"]["sandbox"]``), "require" (refuse to load unless every layer is active)
        or "off" (limits only). See sandbox.py and docs/untrusted-models.md.
    readable: more folders or files the sandboxed worker may read (a runtime or plug-in installed outside
        sys.prefix, its data files); the model's folder, the interpreter's and system libraries are readable.
    open_files: the worker's open-file limit (RLIMIT_NOFILE); 0 keeps the inherited one.
    cpu_seconds: CPU time the worker may use over its life (RLIMIT_CPU, all its threads); 0 for none. A
        worker over it is killed and the error names the limit; the next request starts a new worker.
    output_bytes: the most bytes of outputs one run() may send back; 0: 4x the model's declared outputs (at
        least 64 MiB) when each has a fixed shape and a numeric type, else 1 GiB or 4x, whichever is more.
    environment: names of more environment variables the worker may see (a name ending in "*": every variable
        that starts so). By default it sees only what Python and the runtimes need
        (edgeaccel.isolation.environment.WORKER_ENVIRONMENT and the runtime's ``worker_environment``), never the
        rest of the app's environment: API keys and database URLs stay out of its reach.
    output_log_bytes: how much of the worker's stdout and stderr is logged (debug level, "edgeaccel.isolation")
        before its lines are only counted (executor.details["isolated"]["output"]). Whatever the worker writes,
        this process keeps its last 12 lines, each cut to 300 bytes: a worker writing without newlines cannot
        grow this process's memory.
    probe: for tests only (SandboxProbe): the worker attempts forbidden actions and reports the outcomes, or
        answers every run with a malformed reply (SandboxProbe.bad_reply).
    """

    memory_bytes: int = 16 * GiB
    load_timeout: float = 120.0
    run_timeout: float = 60.0
    python: str | None = None
    resident_bytes: int | None = None
    resident_guard: str = "auto"
    watchdog_interval: float = 0.05
    memory_share: float = 0.5
    sandbox: str = "auto"
    readable: tuple[str, ...] = ()
    open_files: int = 1024
    cpu_seconds: float = 0
    output_bytes: int = 0
    environment: tuple[str, ...] = ()
    output_log_bytes: int = 1 << 20
    probe: SandboxProbe | None = None

    def __post_init__(self) -> None:
        if not 0 < self.memory_share <= 1:
            raise ValueError(f"IsolationLimits: memory_share is a share of RAM (0 < share <= 1), "
                             f"not {self.memory_share}")
        if self.resident_bytes is None:
            ram = physical_memory()
            object.__setattr__(self, "resident_bytes", int(ram * self.memory_share) if ram else 8 * GiB)
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"IsolationLimits: sandbox must be one of {', '.join(SANDBOX_MODES)}, "
                             f"not {self.sandbox!r}")
        if self.open_files < 0 or self.cpu_seconds < 0 or self.output_bytes < 0:
            raise ValueError("IsolationLimits: open_files, cpu_seconds and output_bytes are >= 0 (0: no limit)")
        object.__setattr__(self, "readable", tuple(str(p) for p in self.readable))
        if isinstance(self.environment, str):
            raise ValueError(f"IsolationLimits: environment is a tuple of names, not the string {self.environment!r}")
        object.__setattr__(self, "environment", tuple(str(n) for n in self.environment))
        if self.output_log_bytes < 0:
            raise ValueError("IsolationLimits: output_log_bytes is >= 0")
        if self.memory_bytes < 0 or self.resident_bytes < 0 or self.load_timeout <= 0 or self.run_timeout <= 0 \
                or self.watchdog_interval <= 0:
            raise ValueError("IsolationLimits: memory_bytes >= 0, resident_bytes >= 0 and positive timeouts and "
                             "watchdog_interval are required")
        if self.resident_guard not in GUARDS:
            raise ValueError(f"IsolationLimits: resident_guard must be one of {', '.join(GUARDS)}, "
                             f"not {self.resident_guard!r}")
