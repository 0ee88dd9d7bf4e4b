#!/usr/bin/env python3
"""Benchmark of power- and thermal-aware scheduling. Prints every target, measured.

Simulated part (every figure is simulated): seeded scenarios of a hot, fast accelerator beside a slower CPU
(ambient 25-45 C, bursty random arrivals, 30 simulated minutes by default), run through the same scheduler
engine a ScheduledModel uses, with the real telemetry readers reading the simulator's fake sysfs tree.

    samples at/above a critical trip           target 0
    time above a passive trip                  target <= 5%
    sustained throughput, last third of run    target >= 90% of the computed optimum (heat-model steady state)
    requests meeting their deadline at 70%     target >= 95%
    naive "always the fastest" breaks the cap  target: in at least half the scenarios
    energy accounting across counter wraps     target within 2% of the simulator's truth

Real part (this machine): the cost of one scheduling decision (routing pass, and policy decision) at p99 with
real executors serving a real model (target <= 1 ms), and the CPU the telemetry sampler uses at its default
rate (target <= 2% of one core), on this machine's / and on a fake tree the size of a big edge board.

    python tools/sched_bench.py                     # 20 scenarios x 30 simulated minutes, then the real part
    python tools/sched_bench.py --scenarios 3 --minutes 5 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgeaccel.sim.suite import DEADLINE_LOAD, DEADLINE_S, OVERLOAD, PASSIVE_CAP_PCT, run_scenario  # noqa: E402


def _one(args: tuple[int, float]):
    seed, minutes = args
    started = time.perf_counter()
    result = run_scenario(seed, minutes)
    return result, time.perf_counter() - started


def simulated_part(n: int, minutes: float, jobs: int, seed0: int) -> dict:
    seeds = [(seed0 + i, minutes) for i in range(n)]
    print(f"[simulated] {n} scenarios x {minutes:g} simulated minutes; overload runs at {OVERLOAD}x the optimum, "
          f"deadline runs at {DEADLINE_LOAD:.0%} with {DEADLINE_S * 1000:.0f} ms deadlines")
    head = (f"{'seed':>4} {'amb C':>5} {'accel':>6} {'opt/s':>6} {'got/s':>6} {'ratio':>6} {'bound':>6} {'crit':>4} "
            f"{'>pass%':>6} {'dl met%':>7} {'naive>pass%':>11} {'breaks':>6} {'energy err%':>11} {'wraps':>5} {'wall s':>6}")
    print("[simulated] " + head, flush=True)
    results, rows = [], []
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    try:
        for r, wall in (pool.imap(_one, seeds) if pool else map(_one, seeds)):
            results.append((r, wall))
            sc = r.scenario
            err = max(r.energy_error_pct.values()) if r.energy_error_pct else float("nan")
            wraps = sum(r.energy_wraps.values())
            print(f"[simulated] {sc.seed:>4} {sc.ambient_c:5.1f} {sc.accelerator.layout:>6} {r.optimum_per_s:6.2f} "
                  f"{r.throughput_per_s:6.2f} {r.throughput_ratio:6.3f} {r.throughput_per_s / r.window_bound_per_s:6.3f} "
                  f"{r.critical_samples:>4} {r.above_passive_pct:6.2f} {r.deadline_met_pct:7.2f} "
                  f"{r.naive_above_passive_pct:11.1f} {'yes' if r.naive_breaks_cap else 'no':>6} {err:11.2e} {wraps:>5} "
                  f"{wall:6.1f}", flush=True)
            rows.append({"seed": sc.seed, "ambient_c": sc.ambient_c, "accelerator": sc.accelerator.layout,
                         "scenario": sc.describe(), "optimum_per_s": r.optimum_per_s,
                         "window_bound_per_s": r.window_bound_per_s, "throughput_per_s": r.throughput_per_s,
                         "throughput_ratio": r.throughput_ratio, "critical_samples": r.critical_samples,
                         "critical_truth_s": r.critical_truth_s, "above_passive_pct": r.above_passive_pct,
                         "deadline_met_pct": r.deadline_met_pct, "deadline_requests": r.deadline_requests,
                         "naive_above_passive_pct": r.naive_above_passive_pct, "naive_critical_s": r.naive_critical_s,
                         "naive_throughput_per_s": r.naive_throughput_per_s, "naive_breaks_cap": r.naive_breaks_cap,
                         "energy_error_pct": r.energy_error_pct, "energy_wraps": r.energy_wraps,
                         "unwrapped_error_pct": r.unwrapped_error_pct})
    finally:
        if pool:
            pool.close()
            pool.join()
    res = [r for r, _ in results]
    crit = sum(r.critical_samples for r in res)
    crit_truth = sum(r.critical_truth_s for r in res)
    worst_above = max(r.above_passive_pct for r in res)
    worst_ratio = min(r.throughput_ratio for r in res)
    mean_ratio = sum(r.throughput_ratio for r in res) / len(res)
    worst_deadline = min(r.deadline_met_pct for r in res)
    breaks = sum(r.naive_breaks_cap for r in res)
    errors = [e for r in res for e in r.energy_error_pct.values()]
    worst_energy = max(errors) if errors else float("nan")
    ignoring = [e for r in res for name, e in r.unwrapped_error_pct.items() if r.energy_wraps.get(name)]
    best_ignoring = min(ignoring) if ignoring else float("nan")
    total_wraps = sum(sum(r.energy_wraps.values()) for r in res)
    summary = [
        ("samples at/above critical trip", f"{crit} (simulated time at/above: {crit_truth:.1f} s)", "0", crit == 0),
        ("time above passive trip, worst scenario", f"{worst_above:.2f}%", f"<= {PASSIVE_CAP_PCT:g}%",
         worst_above <= PASSIVE_CAP_PCT),
        ("sustained throughput vs optimum, worst", f"{worst_ratio:.3f} (mean {mean_ratio:.3f})", ">= 0.90",
         worst_ratio >= 0.90),
        (f"requests meeting deadline at {DEADLINE_LOAD:.0%} load, worst", f"{worst_deadline:.2f}%", ">= 95%",
         worst_deadline >= 95.0),
        ("naive always-fastest breaks the cap", f"{breaks}/{len(res)} scenarios", f">= {len(res) / 2:g}",
         breaks >= len(res) / 2),
        ("energy accounting across wraps, worst error", f"{worst_energy:.2e}% over {total_wraps} counter wraps "
                                                        f"(ignoring wraps: >= {best_ignoring:.0f}%)",
         "<= 2%", worst_energy <= 2.0),
    ]
    _print_summary("[simulated] ", summary)
    return {"simulated": {"scenarios": rows, "targets": [list(s) for s in summary]}}


def _print_summary(tag: str, rows) -> None:
    print(f"{tag}{'target':48} {'measured':44} {'goal':>8}  ")
    for name, measured, goal, ok in rows:
        print(f"{tag}{name:48} {measured:44} {goal:>8}  {'PASS' if ok else 'FAIL'}")


def real_part(seconds: float) -> dict:
    """Decision cost with real executors and sampling CPU at the default rate, on this machine."""
    import numpy as np

    from edgeaccel.loader import schedule
    from edgeaccel.sim.fakesys import FakeSysfs
    from edgeaccel.telemetry import TelemetrySampler, auto_spec, discover

    sample = ROOT / "edgeaccel" / "samples" / "mobilenet_v1_0.25_128_quant.tflite"
    out: dict = {}
    with schedule(sample, "thermal") as model:
        names = list(model.executors)
        arrays = np.zeros(model.inputs[0].shape, model.inputs[0].dtype)
        end = time.monotonic() + seconds
        pending = []
        while time.monotonic() < end:
            pending.append(model.submit(arrays))
            if len(pending) >= 4:
                pending.pop(0).result()
        for f in pending:
            f.result()
        stats = model.stats
    sources = discover(Path("/"))
    print(f"real machine: {os.cpu_count()} cores; telemetry sources under /: "
          f"{', '.join(s.name for s in sources) or 'none'}")
    print(f"real machine: {stats.completed} inferences over {seconds:g} s on {', '.join(names)} (policy thermal)")
    for line in stats.lines()[1:]:
        print(f"real machine: {line}")
    # sampling CPU on a fake tree the size of a big edge board, at the default rate, in real time
    with tempfile.TemporaryDirectory() as tmp:
        fs = FakeSysfs(tmp)
        for i in range(8):
            fs.cooling_device(i, f"thermal-cpufreq-{i}", 0, 10)
        for i in range(12):
            fs.thermal_zone(i, "x86_pkg_temp" if i == 0 else f"zone{i}", 50.0 + i,
                            trips=(("passive", 85.0), ("hot", 95.0), ("critical", 105.0)), cooling=(i % 8,))
        for i in range(4):
            fs.hwmon(i, f"chip{i}", {f"temp{j}_input": 40000 + j for j in range(1, 6)})
        fs.rapl_zone("intel-rapl:0", "package-0", 1000)
        fs.rapl_zone("intel-rapl:0:0", "core", 1000)
        fs.apex(0, 60.0)
        specs = {"cpu": auto_spec("cpu", Path(tmp)), "edgetpu": auto_spec("edgetpu", Path(tmp))}
        sampler = TelemetrySampler(specs, Path(tmp))  # default 0.5 s interval
        cpu_share = _sampling_share(sampler, seconds)
    real_sampler = TelemetrySampler({"cpu": auto_spec("cpu")})
    real_share = _sampling_share(real_sampler, min(seconds, 5.0))
    isolated_p99 = _isolated_decision_p99()
    dispatch_p99 = stats.dispatch_us["p99"]
    decision_p99 = stats.decision_us["p99"]
    rows = [
        ("routing pass (per dispatch) p99", f"{dispatch_p99:.1f} us (p50 {stats.dispatch_us['p50']:.1f}, "
                                              f"max {stats.dispatch_us['p100']:.1f})", "<= 1 ms", dispatch_p99 <= 1000),
        ("policy decision (per sample) p99", f"{decision_p99:.1f} us (max {stats.decision_us['p100']:.1f})",
         "<= 1 ms", decision_p99 <= 1000),
        ("policy decision in isolation (2 hot devices), p99", f"{isolated_p99:.1f} us", "<= 1 ms",
         isolated_p99 <= 1000),
        ("whole decision step incl. sensor reads, p99", f"{stats.tick_us['p99']:.1f} us "
                                                        f"(max {stats.tick_us['p100']:.1f})", "<= 1 ms",
         stats.tick_us["p99"] <= 1000),
        ("telemetry sampling CPU, 2 Hz, fake big board", f"{100 * cpu_share:.3f}% of one core", "<= 2%",
         cpu_share <= 0.02),
        ("telemetry sampling CPU, 2 Hz, this machine's /", f"{100 * real_share:.4f}% of one core", "<= 2%",
         real_share <= 0.02),
        ("telemetry sampling CPU inside the served run", f"{100 * stats.telemetry_cpu_share:.3f}% of one core "
                                                          f"({stats.telemetry_samples} samples)", "<= 2%",
         stats.telemetry_cpu_share <= 0.02),
    ]
    _print_summary("real machine: ", rows)
    out["real"] = {"targets": [list(r) for r in rows], "stats": stats.as_dict()}
    return out


def _isolated_decision_p99(n: int = 5000) -> float:
    """The thermal policy deciding for two devices near their trips, alone on the interpreter (the served
    run's figure also holds the time the dispatcher waits for the GIL and the cores behind inference threads)."""
    from edgeaccel.scheduling import DeviceView, ExecutorView, Observation, make_policy

    policy = make_policy("thermal")
    state = policy.initial_state()
    executors = (ExecutorView("tpu", "accel", 0.01), ExecutorView("cpu", "cpu", 0.05))
    costs = []
    for i in range(n):
        devices = {"accel": DeviceView("accel", 80.0 + i % 5, passive_c=85.0, critical_c=100.0, slope_c_per_s=0.1,
                                       busy=0.9),
                   "cpu": DeviceView("cpu", 70.0, passive_c=90.0, critical_c=100.0, busy=0.5)}
        started = time.perf_counter()
        _, state = policy.decide(Observation(i * 0.5, devices, executors), state)
        costs.append(time.perf_counter() - started)
    costs.sort()
    return costs[int(0.99 * (n - 1))] * 1e6


def _sampling_share(sampler, seconds: float) -> float:
    """Thread CPU time the sampler spends per second of wall time when called at its own bounded rate."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        now = time.monotonic()
        sampler.sample(now)
        time.sleep(max(0.0, sampler.min_interval_s - (time.monotonic() - now)))
    return sampler.cpu_s / (time.monotonic() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", type=int, default=20)
    p.add_argument("--minutes", type=float, default=30.0, help="simulated minutes per run (default 30)")
    p.add_argument("--seed0", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="scenarios run in parallel processes")
    p.add_argument("--real-seconds", type=float, default=15.0, help="wall seconds of the real-machine part")
    p.add_argument("--skip-real", action="store_true")
    p.add_argument("--skip-simulated", action="store_true")
    p.add_argument("--json", help="also write every figure to this JSON file")
    args = p.parse_args(argv)
    report: dict = {}
    started = time.perf_counter()
    if not args.skip_simulated:
        report.update(simulated_part(args.scenarios, args.minutes, args.jobs, args.seed0))
    if not args.skip_real:
        report.update(real_part(args.real_seconds))
    print(f"bench wall time {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    failed = [t for part in report.values() for t in part["targets"] if not t[3]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
