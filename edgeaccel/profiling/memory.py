"""The process's peak resident memory over one profile: Linux's high-water mark (VmHWM), reset before the load.

Writing "5" to /proc/self/clear_refs resets VmHWM to the current RSS (Linux 4.0+), so the peak read after the
runs belongs to this executor's load and runs, not to whatever the process did before. Where the reset is not
allowed the figure is the process's peak since it started, and the note says so.
"""

from __future__ import annotations

from pathlib import Path

PEAK_NOTE = "process peak RSS (VmHWM) from just before the load to the last run; includes the Python process"
PEAK_NOTE_UNRESET = "process peak RSS since the process started (VmHWM could not be reset): an upper bound"


def reset_peak(proc: Path = Path("/proc")) -> bool:
    """Reset this process's VmHWM; False where the kernel refuses (old kernel, no /proc)."""
    try:
        (proc / "self" / "clear_refs").write_text("5")
        return True
    except OSError:
        return False


def status_kb(field: str, proc: Path = Path("/proc")) -> int | None:
    """A "Vm..." field of /proc/self/status in kB, None where it is not there."""
    prefix = f"{field}:".encode()
    try:
        with open(proc / "self" / "status", "rb") as handle:
            for line in handle:
                if line.startswith(prefix):
                    return int(line.split()[1])  # "VmHWM:   123456 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb(proc: Path = Path("/proc")) -> float | None:
    kb = status_kb("VmHWM", proc)
    return None if kb is None else kb / 1024


def rss_mb(proc: Path = Path("/proc")) -> float | None:
    kb = status_kb("VmRSS", proc)
    return None if kb is None else kb / 1024
