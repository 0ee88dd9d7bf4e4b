"""A utilization summary (``UtilizationSampler.summary()``) as a few readable lines: one per source with
figures, one per absent source with the first clause of its reason."""

from __future__ import annotations

from .procstat import MIN_CPU_TICKS

_LABELS = {"cpu": "CPU", "process": "process", "nvml": "NVML", "intel_npu": "Intel NPU",
           "rockchip_npu": "Rockchip NPU", "tegrastats": "tegrastats"}


def summary_lines(s: dict) -> list[str]:
    """The lines of ``s``, a ``UtilizationSampler.summary()``."""
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
