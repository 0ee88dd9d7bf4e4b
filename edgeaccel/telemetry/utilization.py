"""Utilization while a model runs: CPU per core, this process's CPU and resident memory, and where the machine
exposes them GPU load and memory (NVML), Intel NPU busy time, Rockchip NPU load and Jetson's tegrastats.

    with UtilizationSampler(0.2) as sampler:
        ...  # run the model
    print(sampler.summary())   # JSON-ready; sampler.lines() for a table

A daemon thread samples every ``interval_s``; a last sample is taken on exit. Every source is read below
``root`` (tests write fake trees) and the clock is injectable. A source with nothing to read is listed in
``summary()["sources"]`` with the reason, never reported as zero. Means are taken over the whole window (first
and last counter readings), maxima over the sampling intervals. CPU counters move in whole ticks (USER_HZ,
usually 100 a second), so a CPU share needs ``MIN_CPU_TICKS`` of them: a shorter interval is merged into the
next, and a shorter window reports no CPU share and says why (two ticks would read as 0%, 50% or 100%).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ..hardware.fs import Tree, natural_key
from . import nvml as nvml_reader
from .npu_load import NPU_BUSY_MIN_PERIOD_S, read_intel_npu_busy, read_rknpu_load
from .procstat import CpuTimes, busy_percent, parse_cpu_times, parse_process_ticks, parse_status_kb
from .tegrastats_process import TegrastatsProcess

SOURCES = ("cpu", "process", "nvml", "intel_npu", "rockchip_npu", "tegrastats")
_LABELS = {"cpu": "CPU", "process": "process", "nvml": "NVML", "intel_npu": "Intel NPU",
           "rockchip_npu": "Rockchip NPU", "tegrastats": "tegrastats"}
_KB_PER_MB = 1024.0
MIN_CPU_TICKS = 20  # per core (or of this process's CPU time): a share to 5 points, 0.2 s at USER_HZ 100


def _mean_max(values: list[float], mean: float | None = None, digits: int = 1) -> dict | None:
    if not values and mean is None:
        return None
    if mean is None:
        mean = sum(values) / len(values)
    peak = max(values) if values else mean
    return {"mean": round(mean, digits), "max": round(max(peak, mean), digits)}


def _start_peak_end(values: list[float], peak: float | None = None) -> dict | None:
    if not values:
        return None
    return {"start": round(values[0], 1), "peak": round(max(max(values), peak or 0.0), 1), "end": round(values[-1], 1)}


class _Counter:
    """A cumulative counter read at intervals: the first and last readings give the mean rate over the window,
    each interval's rate gives the maximum."""

    def __init__(self, cap: float | None = 100.0, min_span_s: float = 0.0) -> None:
        self.cap = cap  # a device is at most 100% busy; a process's CPU time may be several cores' worth
        self.min_span_s = min_span_s  # a counter that moves in coarse steps: rates over shorter spans are noise
        self.first: tuple[float, float] | None = None  # (counter, time)
        self.last: tuple[float, float] | None = None
        self.mark: tuple[float, float] | None = None  # where the current interval began
        self.rates: list[float] = []

    def add(self, value: float, now: float, scale: float) -> None:
        """``scale`` turns counter units per second into percent."""
        if self.last is not None and value < self.last[0]:  # the counter restarted (driver reloaded): a new window
            self.first = self.mark = None
        elif self.mark is not None and now > self.mark[1] and now - self.mark[1] >= self.min_span_s:
            self.rates.append(self._capped(scale * (value - self.mark[0]) / (now - self.mark[1])))
            self.mark = (value, now)
        if self.first is None:
            self.first = self.mark = (value, now)
        self.last = (value, now)

    def mean(self, scale: float) -> float | None:
        if self.first is None or self.last is None or self.last[1] <= self.first[1] \
                or self.last[1] - self.first[1] < self.min_span_s:
            return None
        return self._capped(scale * (self.last[0] - self.first[0]) / (self.last[1] - self.first[1]))

    def _capped(self, value: float) -> float:
        return value if self.cap is None else min(self.cap, value)


class UtilizationSampler:
    """Context manager: samples every ``interval_s`` on a daemon thread from entry to exit.

    root: where /proc and /sys are read (tests: a fake tree). clock: seconds, monotonic. pid: the process whose
    CPU and memory are reported (default this one). nvml: an initialised pynvml module or a fake with its
    functions; by default pynvml is loaded when ``root`` is this machine's, and never for another tree.
    """

    def __init__(self, interval_s: float = 0.2, *, root: str = "/", clock: Callable[[], float] = time.monotonic,
                 pid: int | None = None, nvml: Any | None = None) -> None:
        if not isinstance(interval_s, (int, float)) or not interval_s > 0:
            raise ValueError(f"interval_s must be a positive number of seconds, not {interval_s!r}")
        self.interval_s = float(interval_s)
        self.root = os.fspath(root)
        self.clock = clock
        self.pid = os.getpid() if pid is None else int(pid)
        self._tree = Tree(self.root)
        self._nvml = nvml
        self._reasons: dict[str, str] = {}  # source -> why it gave nothing
        self._found: dict[str, str] = {}  # source -> where its figures came from
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tegra: TegrastatsProcess | None = None
        self._ticks_per_s = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._times: list[float] = []
        self._cpu_first: dict[str, CpuTimes] = {}
        self._cpu_prev: dict[str, CpuTimes] = {}  # where the current interval began
        self._cpu_last: dict[str, CpuTimes] = {}
        self._cpu_pct: dict[str, list[float]] = {}
        self._process = _Counter(cap=None, min_span_s=MIN_CPU_TICKS / self._ticks_per_s)
        self._rss_kb: list[int] = []
        self._hwm_kb: list[int] = []
        self._gpus: dict[int, dict] = {}
        self._gpu_count = 0
        self._npu: dict[str, _Counter] = {}
        self._npu_due = float("-inf")
        self._rknpu: dict[str, list[float]] = {}
        self.sampler_cpu_s = 0.0  # thread CPU time the sampling itself took (part of process_cpu_percent)
        self._state = "new"

    # -- lifetime ------------------------------------------------------------------------------------------
    def __enter__(self) -> UtilizationSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> UtilizationSampler:
        if self._state != "new":
            raise RuntimeError("a UtilizationSampler samples one window: make a new one")
        self._state = "running"
        self._open_nvml()
        self._tegra = TegrastatsProcess(self.root, self.interval_s)
        reason = self._tegra.start()
        if reason:
            self._reasons["tegrastats"] = reason
            self._tegra = None
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="edgeaccel-utilization", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._state != "running":
            return
        self._state = "stopped"
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample(final=True)
        if self._tegra is not None:
            self._tegra.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def _open_nvml(self) -> None:
        if self._nvml is None and self._tree.is_real:
            self._nvml, reason = nvml_reader.load_nvml()
        elif self._nvml is None:
            reason = f"NVML is not asked about another tree (root={self.root}): it reads this machine's driver"
        else:
            reason = None
        if self._nvml is not None:
            try:
                self._gpu_count = int(self._nvml.nvmlDeviceGetCount())
            except Exception as exc:  # pynvml.NVMLError and subclasses
                reason = f"nvmlDeviceGetCount failed: {exc or type(exc).__name__}"
            else:
                reason = None if self._gpu_count else "NVML sees no GPU"
        if reason:
            self._reasons["nvml"] = reason

    # -- sampling ------------------------------------------------------------------------------------------
    def sample(self) -> None:
        """One reading of every source now (the thread calls it; a test may call it with a fake clock)."""
        self._sample(final=False)

    def _sample(self, final: bool) -> None:
        started = time.thread_time()
        now = self.clock()
        with self._lock:
            self._times.append(now)
            self._sample_cpu()
            self._sample_process(now)
            self._sample_gpus()
            if final or now >= self._npu_due:  # the driver asks for at most one read a second
                self._npu_due = now + NPU_BUSY_MIN_PERIOD_S
                self._sample_intel_npu(now)
            self._sample_rockchip()
            self.sampler_cpu_s += time.thread_time() - started

    def _sample_cpu(self) -> None:
        read = self._tree.read("/proc/stat")
        times = parse_cpu_times(read.text) if read.text is not None else {}
        if not times:
            self._reasons["cpu"] = f"/proc/stat {read.reason or 'has no cpu lines'}"
            return
        self._found["cpu"] = "/proc/stat"
        for name, now in times.items():
            before = self._cpu_prev.get(name)
            if before is None or now[1] < before[1]:  # new, or a core brought back online: start again
                self._cpu_first[name] = self._cpu_prev[name] = self._cpu_last[name] = now
                continue
            self._cpu_last[name] = now
            if now[1] - before[1] >= self._ticks_needed(name):  # else too few ticks: the interval goes on
                self._cpu_pct.setdefault(name, []).append(busy_percent(before, now))
                self._cpu_prev[name] = now

    def _ticks_needed(self, name: str) -> int:
        """/proc/stat's "cpu" line sums every core's ticks: it needs MIN_CPU_TICKS per core, as each core does."""
        cores = sum(1 for core in self._cpu_first if core != "cpu")
        return MIN_CPU_TICKS * max(1, cores) if name == "cpu" else MIN_CPU_TICKS

    def _sample_process(self, now: float) -> None:
        stat = self._tree.read(f"/proc/{self.pid}/stat")
        ticks = parse_process_ticks(stat.text) if stat.text is not None else None
        if ticks is None:
            self._reasons["process"] = f"/proc/{self.pid}/stat {stat.reason or 'is not a stat line'}"
            return
        self._found["process"] = f"/proc/{self.pid}/stat, /proc/{self.pid}/status"
        self._process.add(ticks, now, 100.0 / self._ticks_per_s)
        status = self._tree.read(f"/proc/{self.pid}/status")
        rss = parse_status_kb(status.text, "VmRSS") if status.text else None
        hwm = parse_status_kb(status.text, "VmHWM") if status.text else None
        if rss is not None:
            self._rss_kb.append(rss)
        if hwm is not None:
            self._hwm_kb.append(hwm)

    def _sample_gpus(self) -> None:
        for index in range(self._gpu_count):
            load = nvml_reader.read_load(self._nvml, index, self.pid)
            gpu = self._gpus.setdefault(index, {"name": load.name, "util": [], "used": [], "mine": [],
                                                "total": None, "reason": None})
            for key, value in (("util", load.util_percent), ("used", load.memory_used_mb),
                               ("mine", load.process_memory_mb)):
                if value is not None:
                    gpu[key].append(value)
            gpu["total"] = load.memory_total_mb if load.memory_total_mb is not None else gpu["total"]
            gpu["reason"] = load.reason
        if self._gpu_count:
            self._found["nvml"] = "NVML (nvmlDeviceGetUtilizationRates, nvmlDeviceGetMemoryInfo)"

    def _sample_intel_npu(self, now: float) -> None:
        busy, reason = read_intel_npu_busy(self._tree)
        if not busy:
            self._reasons["intel_npu"] = reason or "no reading"
            return
        self._found["intel_npu"] = "/sys/class/accel/accelN/device/npu_busy_time_us"
        for name, microseconds in busy.items():
            self._npu.setdefault(name, _Counter()).add(microseconds, now, 100.0 / 1e6)

    def _sample_rockchip(self) -> None:
        load, path, reason = read_rknpu_load(self._tree)
        if not load:
            self._reasons["rockchip_npu"] = reason or "no reading"
            return
        self._found["rockchip_npu"] = path or ""
        for core, percent in load.items():
            self._rknpu.setdefault(core, []).append(percent)

    # -- results -------------------------------------------------------------------------------------------
    def summary(self) -> dict:
        """JSON-ready figures of the window so far, and ``sources``: which readers found data, which did not
        and why. A source without data has no figures (never zeros)."""
        with self._lock:
            out: dict[str, Any] = {"interval_s": self.interval_s, "samples": len(self._times),
                                   "duration_s": round(self._times[-1] - self._times[0], 3) if self._times else 0.0}
            found = {"cpu": self._cpu_summary(out), "process": self._process_summary(out),
                     "nvml": self._gpu_summary(out), "intel_npu": self._npu_summary(out),
                     "rockchip_npu": self._rknpu_summary(out), "tegrastats": self._jetson_summary(out)}
            out["sampler_cpu_s"] = round(self.sampler_cpu_s, 4)
            out["sources"] = [self._source(name, found[name]) for name in SOURCES]
        return out

    def _source(self, name: str, has_figures: bool) -> dict:
        if has_figures:
            return {"source": name, "found": True, "from": self._found.get(name, "")}
        reason = self._reasons.get(name)
        if reason is None and name in self._found:
            reason = self._too_short() if name == "cpu" else "read, but the window was too short for two readings"
        return {"source": name, "found": False, "reason": reason or "not read yet (the sampler has not started)"}

    def _too_short(self) -> str:
        return (f"read, but the window was too short: a CPU share needs {MIN_CPU_TICKS} clock ticks "
                f"({MIN_CPU_TICKS / self._ticks_per_s:g} s) between the first and last readings")

    def _cpu_summary(self, out: dict) -> bool:
        cores = {name: self._cpu_figures(name) for name in sorted(self._cpu_pct, key=natural_key) if name != "cpu"}
        cores = {name: figures for name, figures in cores.items() if figures}
        if not cores:
            return False
        out["cpu_percent_per_core"] = cores
        whole = self._cpu_figures("cpu")
        if whole:
            out["cpu_percent_all"] = whole
        return True

    def _cpu_figures(self, name: str) -> dict | None:
        first, last = self._cpu_first.get(name), self._cpu_last.get(name)
        if not first or not last or last[1] - first[1] < self._ticks_needed(name):
            return None
        return _mean_max(self._cpu_pct.get(name, []), busy_percent(first, last))

    def _process_summary(self, out: dict) -> bool:
        if not self._rss_kb:
            return False
        mean = self._process.mean(100.0 / self._ticks_per_s)
        # percent of one core: 200 is two cores busy all the time. Not capped at 100 like a single counter.
        out["process_cpu_percent"] = {"missing": self._too_short()} if mean is None else \
            {"mean": round(mean, 1), "max": round(max([mean, *self._process.rates]), 1)}
        rss = [kb / _KB_PER_MB for kb in self._rss_kb]
        # VmHWM rising during the window means the window reached it, between samples or not
        hwm_peak = self._hwm_kb[-1] / _KB_PER_MB if len(self._hwm_kb) > 1 and self._hwm_kb[-1] > self._hwm_kb[0] \
            else None
        out["rss_mb"] = _start_peak_end(rss, hwm_peak)
        if self._hwm_kb:
            out["rss_mb"]["process_high_water_mark"] = round(self._hwm_kb[-1] / _KB_PER_MB, 1)
        return True

    def _gpu_summary(self, out: dict) -> bool:
        gpus = []
        for index, gpu in sorted(self._gpus.items()):
            entry: dict[str, Any] = {"index": index, "name": gpu["name"]}
            for key, figures in (("util_percent", _mean_max(gpu["util"])),
                                 ("memory_used_mb", _start_peak_end(gpu["used"])),
                                 ("process_memory_mb", _start_peak_end(gpu["mine"]))):
                if figures:
                    entry[key] = figures
            if gpu["total"] is not None:
                entry["memory_total_mb"] = round(gpu["total"], 1)
            if gpu["reason"]:
                entry["missing"] = gpu["reason"]
            gpus.append(entry)
        if gpus:
            out["gpu"] = gpus
        return bool(gpus)

    def _npu_summary(self, out: dict) -> bool:
        busy = {}
        for name, counter in sorted(self._npu.items()):
            figures = _mean_max(counter.rates, counter.mean(100.0 / 1e6))
            if figures:
                busy[name] = {"busy_percent": figures}
        if busy:
            out["intel_npu"] = busy
        return bool(busy)

    def _rknpu_summary(self, out: dict) -> bool:
        load = {core: _mean_max(values) for core, values in sorted(self._rknpu.items()) if values}
        if load:
            out["rockchip_npu"] = {"load_percent": load}
        return bool(load)

    def _jetson_summary(self, out: dict) -> bool:
        lines = list(self._tegra.stats) if self._tegra is not None else []
        if not lines:
            if self._tegra is not None:
                self._reasons["tegrastats"] = "tegrastats printed no line yet"
            return False
        self._found["tegrastats"] = f"{self._tegra.path.name} --interval {self._tegra.interval_ms}"
        jetson: dict[str, Any] = {"lines": len(lines)}
        gr3d = [s.gpu_load_pct for s in lines if s.gpu_load_pct is not None]
        if gr3d:
            jetson["gr3d_percent"] = _mean_max([float(v) for v in gr3d])
        ram = [float(s.ram_used_mb) for s in lines if s.ram_used_mb is not None]
        if ram:
            jetson["ram_used_mb"] = _start_peak_end(ram)
            jetson["ram_total_mb"] = next(s.ram_total_mb for s in reversed(lines) if s.ram_total_mb is not None)
        rails = {rail: _mean_max([s.rails_w[rail] for s in lines if rail in s.rails_w], digits=3)
                 for rail in dict.fromkeys(r for s in lines for r in s.rails_w)}
        if rails:
            jetson["rails_w"] = rails
        temps = {}
        for sensor in dict.fromkeys(t for s in lines for t in s.temperatures_c):
            temps[sensor] = max(s.temperatures_c[sensor] for s in lines if sensor in s.temperatures_c)
        if temps:
            jetson["max_temperature_c"] = temps
        out["jetson"] = jetson
        return True

    def lines(self) -> list[str]:
        """A few readable lines for a table: one per source with figures, one per absent source."""
        s = self.summary()
        out = [f"utilization  over {s['duration_s']:.1f} s, {s['samples']} samples every {s['interval_s']:g} s"]
        cores = s.get("cpu_percent_per_core")
        if cores:
            means = [c["mean"] for c in cores.values()]
            detail = (", ".join(f"{k} {v['mean']:.0f}%" for k, v in cores.items()) if len(cores) <= 8
                      else f"cores {min(means):.0f}-{max(means):.0f}%")
            whole = s.get("cpu_percent_all", {}).get("mean", sum(means) / len(means))
            out.append(f"  CPU        {len(cores)} cores: mean {whole:.0f}% ({detail}); busiest core peaked at "
                       f"{max(c['max'] for c in cores.values()):.0f}%")
        if "rss_mb" in s:
            p, rss = s["process_cpu_percent"], s["rss_mb"]
            share = f"CPU n/a (under {MIN_CPU_TICKS} clock ticks)" if "missing" in p else \
                f"{p['mean']:.0f}% of one core (max {p['max']:.0f}%)"
            out.append(f"  process    {share}; RSS {rss['start']:.0f} MB at start, peak {rss['peak']:.0f} MB, "
                       f"{rss['end']:.0f} MB at end")
        for gpu in s.get("gpu", []):
            util, used = gpu.get("util_percent"), gpu.get("memory_used_mb")
            parts = [f"busy mean {util['mean']:.0f}% (max {util['max']:.0f}%)" if util else "busy n/a",
                     f"memory peak {used['peak']:.0f} of {gpu.get('memory_total_mb', 0):.0f} MB" if used
                     else "memory n/a"]
            out.append(f"  GPU{gpu['index']:<7} {gpu['name'] or ''}: {', '.join(parts)}")
        for name, figures in s.get("intel_npu", {}).items():
            busy = figures["busy_percent"]
            out.append(f"  NPU        Intel {name}: busy mean {busy['mean']:.0f}% (max {busy['max']:.0f}%)")
        if "rockchip_npu" in s:
            load = s["rockchip_npu"]["load_percent"]
            out.append("  NPU        Rockchip " + ", ".join(f"{core} mean {v['mean']:.0f}% (max {v['max']:.0f}%)"
                                                         for core, v in load.items()))
        if "jetson" in s:
            j = s["jetson"]
            parts = []
            if "gr3d_percent" in j:
                parts.append(f"GR3D (GPU) mean {j['gr3d_percent']['mean']:.0f}% (max {j['gr3d_percent']['max']:.0f}%)")
            if "ram_used_mb" in j:
                parts.append(f"RAM peak {j['ram_used_mb']['peak']:.0f} of {j['ram_total_mb']} MB")
            out.append(f"  Jetson     {', '.join(parts) or 'tegrastats lines without GPU or RAM figures'}")
        for source in s["sources"]:
            if not source["found"]:
                out.append(f"  absent     {_LABELS[source['source']]}: {_first_clause(source['reason'])}")
        return out


def _first_clause(reason: str, limit: int = 100) -> str:
    text = reason.split("; ")[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."
