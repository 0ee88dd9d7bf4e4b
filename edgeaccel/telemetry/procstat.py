"""Parsers for the /proc files that utilization is read from (pure: text in, numbers out), per proc(5):

- /proc/stat: ``cpuN user nice system idle iowait irq softirq steal guest guest_nice`` in USER_HZ ticks. Guest
  time is already counted in user and nice, so only the first eight fields make the total; idle and iowait are
  the time not busy. Kernels before 2.6.11 print fewer fields (the missing ones are 0).
- /proc/<pid>/stat: field 14 utime and 15 stime in clock ticks, after a command name in parentheses that may
  itself hold spaces and parentheses (so the fields are counted from the last ")").
- /proc/<pid>/status: ``VmRSS:   1234 kB`` (resident now) and ``VmHWM:`` (the resident high-water mark since
  the process started).
"""

from __future__ import annotations

import re

MIN_CPU_TICKS = 20  # per core (or of this process's CPU time): a share to 5 points, 0.2 s at USER_HZ 100

CpuTimes = tuple[int, int]  # (busy ticks, total ticks)


def parse_cpu_times(text: str) -> dict[str, CpuTimes]:
    """{"cpu": (busy, total), "cpu0": ..., ...}: the aggregate line and one per online core."""
    out: dict[str, CpuTimes] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        try:
            values = [int(v) for v in parts[1:9]]
        except ValueError:
            continue
        if len(values) < 4:
            continue
        values += [0] * (8 - len(values))
        idle = values[3] + values[4]
        total = sum(values)
        out[parts[0]] = (total - idle, total)
    return out


def busy_percent(before: CpuTimes, after: CpuTimes) -> float | None:
    """The share of ticks a core was busy between two readings; None when no tick passed (read twice within
    one USER_HZ tick) or the counters went back (a core taken offline and brought back restarts them)."""
    busy, total = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        return None
    # iowait may go backwards on an idle core (proc(5)): busy can exceed the total by a tick or two
    return max(0.0, min(100.0, 100.0 * busy / total))


def parse_process_ticks(text: str) -> int | None:
    """utime + stime (clock ticks) from a /proc/<pid>/stat line; None when the line is not one."""
    close = text.rfind(")")
    if close < 0:
        return None
    fields = text[close + 1:].split()  # fields[0] is field 3 (state)
    try:
        return int(fields[14 - 3]) + int(fields[15 - 3])
    except (IndexError, ValueError):
        return None


def parse_status_kb(text: str, key: str) -> int | None:
    """A ``key:  N kB`` figure of /proc/<pid>/status in kB; None when absent (a kernel thread has no VmRSS)."""
    match = re.search(rf"^{re.escape(key)}:\s*(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None
