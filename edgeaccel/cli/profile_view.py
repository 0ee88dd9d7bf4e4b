"""How `edgeaccel profile` reads on a terminal: per executor the whole-model figures, the device split and the
top operators by time; with --all, the operators matched across executors side by side."""

from __future__ import annotations

from ..profiling.schema import ExecutorProfile, ModelProfile

NAME_WIDTH = 60


def profile_lines(profile: ModelProfile, top: int = 15) -> list[str]:
    lines = [f"model  {profile.model}", *(f"note   {note}" for note in profile.notes)]
    for executor in profile.executors:
        lines += ["", *executor_lines(executor, top)]
    for name, why in profile.failed.items():
        lines += ["", f"{name}: could not be profiled: {why}"]
    if profile.matching is not None:
        lines += ["", *matching_lines(profile.matching, top)]
    return lines


def executor_lines(p: ExecutorProfile, top: int) -> list[str]:
    threads = f", {p.threads} threads" if p.threads else ""
    peak = f"{p.peak_rss_mb:.0f} MB" if p.peak_rss_mb is not None else "unknown"
    if p.peak_rss_mb is not None and p.rss_before_mb is not None:
        peak += f", {p.rss_before_mb:.0f} MB before the load"
    lines = [f"{p.executor}  ({p.runtime} {p.version}, precision {p.precision}{threads})",
             f"  whole model  {p.whole_model_ms:.3f} ms median of {p.runs} runs (p90 {p.whole_model_p90_ms:.3f} ms, "
             f"{p.warmup} warm-up runs not counted)",
             f"  load         {p.load_s:.3f} s      peak RSS {peak} (the process's)"]
    if p.per_op_available:
        lines.append(f"  operators    {sum(op.median_ms is not None for op in p.ops)} timed, medians sum to "
                     f"{p.op_sum_ms:.3f} ms; per-op sum / whole-model time = {p.coverage:.2f} (median over runs)"
                     + (f"; {p.not_executed} more listed but not executed" if p.not_executed else ""))
    else:
        lines.append(f"  operators    {len(p.ops)}, no per-op times: {p.note}")
    if p.devices:
        split = ", ".join(f"{d.device} {d.ops} ops ({d.op_share:.0%})"
                          + (f" {d.time_ms:.3f} ms ({d.time_share:.0%})" if d.time_ms is not None else "")
                          for d in p.devices)
        lines.append(f"  devices      {split}")
    for line in p.utilization_lines:
        lines.append(f"  {line}")
    shown = p.top(top)
    if shown and p.per_op_available:
        lines.append(f"  top {len(shown)} operators by median time:")
        lines.append(f"  {'ms':>9} {'share':>6}  {'type':<18} {'device':<22} name")
        for op in shown:
            lines.append(f"  {op.median_ms:>9.3f} {op.share or 0:>6.1%}  {op.op_type[:18]:<18} {op.device[:22]:<22} "
                         f"{cut(op.name)}")
    elif shown:
        lines.append(f"  first {len(shown)} operators (no times):")
        for op in shown:
            lines.append(f"  {op.op_type[:18]:<18} {op.device[:22]:<22} {cut(op.name)}")
    return lines


def matching_lines(matching: dict, top: int) -> list[str]:
    executors = matching["executors"]
    rows = matching["matched"]
    lines = [f"side by side: {len(rows)} operators matched by name across {', '.join(executors)}"]
    if not rows:
        lines.append("  no operator names in common: these runtimes name the nodes of this model differently "
                     "(OpenVINO's TFLite reader, for one, gives generated names)")
    if rows:
        def biggest(row: dict) -> float:
            return max((v for v in row["median_ms"].values() if v is not None), default=0.0)

        lines.append("  " + " ".join(f"{e[:16]:>16}" for e in executors) + "  name")
        for row in sorted(rows, key=lambda r: -biggest(r))[:top]:
            cells = [row["median_ms"].get(e) for e in executors]
            lines.append("  " + " ".join(f"{'-' if v is None else f'{v:.3f} ms':>16}" for v in cells)
                         + f"  {cut(row['name'])}")
    for executor, names in matching["unmatched"].items():
        if names:
            lines.append(f"  {executor}: {len(names)} operators matched no other executor "
                         f"(e.g. {', '.join(cut(n, 40) for n in names[:3])})")
    return lines


def cut(name: str, width: int = NAME_WIDTH) -> str:
    """A long fused-node name kept to ``width`` characters: its start and its end, which say the most."""
    if len(name) <= width:
        return name
    half = (width - 3) // 2
    return f"{name[:half]}...{name[-(width - 3 - half):]}"
