"""How an isolated worker's memory is limited, chosen per device, and the two resident-memory guards.

An address-space limit (RLIMIT_AS) is cheap and exact, but counts reserved virtual memory: CUDA's unified
addressing and TensorRT reserve large virtual ranges at start and GPU plugins map device memory into the
process, so a limit that suits a CPU runtime would refuse a GPU runtime's start. So RLIMIT_AS is applied only
when the worker runs on the CPU, and every worker gets a limit on *resident* memory as well:

- a cgroup v2 ``memory.max`` when this process may create a child cgroup with the memory controller (the
  kernel then enforces it, and its OOM kill is counted in ``memory.events``);
- otherwise a watchdog in the caller that reads the worker's VmRSS from /proc/<pid>/status every
  ``IsolationLimits.watchdog_interval`` seconds and kills it (SIGKILL) above the limit. A spike shorter than
  the interval can escape it; the cgroup cannot be escaped.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .limits import IsolationLimits

CGROUP_ROOT = Path("/sys/fs/cgroup")  # module attributes, read at each call: tests point them at a fake tree
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
_names = itertools.count()


@dataclass(frozen=True)
class MemoryPlan:
    """What limits one worker: ``address_space`` bytes of RLIMIT_AS (0: none), ``resident`` bytes enforced
    by ``guard`` ("cgroup", "watchdog" or None), and why."""

    address_space: int
    resident: int
    guard: str | None
    reason: str
    cgroup: Path | None = None

    def to_dict(self) -> dict:
        return {"address_space_bytes": self.address_space, "resident_bytes": self.resident, "guard": self.guard,
                "cgroup": str(self.cgroup) if self.cgroup else None, "reason": self.reason}


def on_cpu(device: str) -> bool:
    return device.split(":")[0].split(".")[0].upper() == "CPU"


def plan(device: str, limits: IsolationLimits) -> MemoryPlan:
    """The limits for a worker on ``device``: RLIMIT_AS on the CPU only; the resident limit through a new
    cgroup where one can be made (``limits.resident_guard`` "auto" or "cgroup"), else the watchdog."""
    if on_cpu(device):
        address_space, why = limits.memory_bytes, "address space limited (CPU worker)"
    else:
        address_space = 0
        why = f"no address-space limit on {device}: GPU and NPU runtimes reserve far more than they use"
    if not limits.resident_bytes:
        return MemoryPlan(address_space, 0, None, f"{why}; no resident-memory limit (resident_bytes=0)")
    if limits.resident_guard in ("auto", "cgroup"):
        cgroup, failed = make_cgroup(limits.resident_bytes)
        if cgroup is not None:
            return MemoryPlan(address_space, limits.resident_bytes, "cgroup", f"{why}; resident memory limited by "
                              f"{cgroup}/memory.max", cgroup)
        if limits.resident_guard == "cgroup":
            return MemoryPlan(address_space, limits.resident_bytes, "watchdog",
                              f"{why}; resident_guard='cgroup' asked but {failed}: the watchdog limits it instead")
        return MemoryPlan(address_space, limits.resident_bytes, "watchdog",
                          f"{why}; resident memory watched every {limits.watchdog_interval:g} s (no cgroup: {failed})")
    return MemoryPlan(address_space, limits.resident_bytes, "watchdog",
                      f"{why}; resident memory watched every {limits.watchdog_interval:g} s")


# -- cgroup v2 ----------------------------------------------------------------------------------------------------

def own_cgroup() -> tuple[Path | None, str]:
    """This process's cgroup v2 folder, or None and why not (cgroup v1, or hybrid without memory in v2)."""
    cgroup_root, proc_self_cgroup = CGROUP_ROOT, PROC_SELF_CGROUP
    try:
        lines = proc_self_cgroup.read_text().splitlines()
    except OSError as exc:
        return None, f"{proc_self_cgroup} cannot be read ({exc.strerror})"
    unified = next((line[3:] for line in lines if line.startswith("0::")), None)
    if unified is None:
        return None, "this system has no cgroup v2 hierarchy"
    if any("memory" in line.split(":")[1].split(",") for line in lines if line.count(":") >= 2 and line[:3] != "0::"):
        return None, "the memory controller is on a cgroup v1 hierarchy"
    return cgroup_root / unified.lstrip("/"), ""


def make_cgroup(limit: int) -> tuple[Path | None, str]:
    """A new child of this process's cgroup with ``memory.max = limit`` (and no swap), or None and why it
    could not be made: no cgroup v2, no memory controller delegated to this cgroup's children, no write
    permission. Nothing is left behind on failure."""
    parent, why = own_cgroup()
    if parent is None:
        return None, why
    try:
        delegated = "memory" in (parent / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return None, f"{parent}/cgroup.subtree_control cannot be read ({exc.strerror or exc})"
    if not delegated:  # enabling it is the system's or the container's choice, not a library's
        return None, f"the memory controller is not enabled for children of {parent} (cgroup.subtree_control)"
    child = parent / f"edgeaccel-worker-{os.getpid()}-{next(_names)}"
    try:
        child.mkdir()
    except OSError as exc:
        return None, f"cannot create a cgroup in {parent} ({exc.strerror or exc})"
    try:
        (child / "memory.max").write_text(str(limit))
        if (child / "memory.swap.max").exists():
            (child / "memory.swap.max").write_text("0")  # over the limit means killed, not swapped out
    except OSError as exc:
        remove_cgroup(child)
        return None, f"cannot set {child}/memory.max ({exc.strerror or exc})"
    return child, ""


def join_cgroup(cgroup: Path, pid: int) -> str | None:
    """Move ``pid`` into ``cgroup``; None, or why it failed."""
    try:
        (cgroup / "cgroup.procs").write_text(str(pid))
    except OSError as exc:
        return f"cannot move the worker into {cgroup} ({exc.strerror or exc})"
    return None


def oom_kills(cgroup: Path) -> int:
    """How many processes the kernel killed in ``cgroup`` for going over memory.max."""
    try:
        for line in (cgroup / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def remove_cgroup(cgroup: Path) -> None:
    """rmdir the worker's cgroup once it is empty; a fake tree's plain files are removed first."""
    try:
        cgroup.rmdir()
        return
    except OSError:
        pass
    try:  # not a kernel cgroupfs (a test's folder): its files are ordinary
        for item in cgroup.iterdir():
            item.unlink()
        cgroup.rmdir()
    except OSError:
        pass


# -- watchdog ------------------------------------------------------------------------------------------------------

def resident_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """VmRSS of ``pid`` in bytes (anonymous, file and shared memory pages resident now), None once it is gone."""
    try:
        with open(proc / str(pid) / "status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024  # "VmRSS:   123456 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None


class Watchdog:
    """One thread for every watched worker: each is read every ``interval`` seconds (the shortest asked for);
    once its resident memory is above its limit it is no longer watched and ``exceeded(rss)`` is called, which
    must record why and kill it (through its Popen, which knows whether the pid is still its child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._watched: dict[int, tuple[int, float, Callable[[int], None]]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, pid: int, limit: int, interval: float, exceeded: Callable[[int], None]) -> None:
        with self._lock:
            self._watched[pid] = (limit, interval, exceeded)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="edgeaccel-memory-watchdog", daemon=True)
                self._thread.start()
        self._wake.set()

    def unwatch(self, pid: int) -> None:
        with self._lock:
            self._watched.pop(pid, None)

    def _loop(self) -> None:
        while True:
            with self._lock:
                watched = dict(self._watched)
            if not watched:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            for pid, (limit, _, exceeded) in watched.items():
                rss = resident_bytes(pid)
                if rss is not None and rss > limit:
                    self.unwatch(pid)
                    exceeded(rss)
            self._wake.wait(min(interval for _, interval, _ in watched.values()))
            self._wake.clear()


watchdog = Watchdog()
