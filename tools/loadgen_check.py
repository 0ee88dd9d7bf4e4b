"""`edgeaccel bench` against MLPerf LoadGen: the same model measured by both, in alternating rounds.

    pip install mlcommons-loadgen      # MLCommons' own LoadGen (the PyPI name "mlperf-loadgen" does not exist)
    python tools/loadgen_check.py MODEL [--executor NAME] [--seconds 10] [--rounds 2]

SingleStream: LoadGen issues one query at a time; the SUT answers it with ``model.run``. Its 90th percentile
latency is compared with `edgeaccel bench --mode latency`'s p90.
Offline: LoadGen issues every sample at once; the SUT hands each to ``model.submit`` on a model loaded with
``runtime=RuntimeOptions(performance_hint="throughput")`` (what the README says to do for throughput) and completes it from the
future's callback. Its samples per second are compared with `edgeaccel bench --mode throughput`'s FPS.

The SUT here is written the way the README's API is documented, not through any private path, so that a
harness written by someone else measures the same thing. Inputs are random, drawn once per sample index.
Target: each LoadGen figure within 10% of bench's (ratios printed, medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent
SAMPLES = 64
MIN_QUERIES = 100  # LoadGen SingleStream's min_query_count here, and bench's --runs


def loadgen_run(model_path: str, scenario: str, seconds: float, executor: str | None, expected_qps: float) -> dict:
    """One LoadGen test in this process; returns the summary's figures."""
    import mlperf_loadgen as lg

    import edgeaccel
    from edgeaccel.tensors import random_array

    hint = "throughput" if scenario == "Offline" else "latency"  # latency: RuntimeOptions' default
    model = edgeaccel.load(model_path, executor=executor, runtime=edgeaccel.RuntimeOptions(performance_hint=hint))
    rng = np.random.default_rng(0)
    data = [[random_array(spec, rng) for spec in model.inputs] for _ in range(SAMPLES)]

    def complete(sample_id: int):
        def done(future):
            future.result()
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, 0, 0)])
        return done

    def issue_queries(samples):
        if scenario == "SingleStream":
            for s in samples:
                model.run(data[s.index])
                lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0)])
        else:
            for s in samples:
                model.submit(data[s.index]).add_done_callback(complete(s.id))

    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = int(seconds * 1000)
    if scenario == "SingleStream":
        settings.scenario = lg.TestScenario.SingleStream
        settings.single_stream_expected_latency_ns = int(1e9 / max(expected_qps, 1.0))
        settings.min_query_count = MIN_QUERIES
    else:
        settings.scenario = lg.TestScenario.Offline
        settings.offline_expected_qps = expected_qps
        settings.min_query_count = 1
    sut = lg.ConstructSUT(issue_queries, lambda: None)
    qsl = lg.ConstructQSL(SAMPLES, SAMPLES, lambda ids: None, lambda ids: None)
    with tempfile.TemporaryDirectory() as out:
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        try:
            lg.StartTestWithLogSettings(sut, qsl, settings, log)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
            model.close()
        summary = (Path(out) / "mlperf_log_summary.txt").read_text()
    return _parse_summary(summary)


def _parse_summary(text: str) -> dict:
    def number(label: str) -> float | None:
        m = re.search(re.escape(label) + r"\s*:\s*([0-9.eE+-]+)", text)
        return float(m.group(1)) if m else None
    return {"samples_per_second": number("Samples per second"),
            "p90_ms": (number("90.00 percentile latency (ns)") or 0) / 1e6 or None,
            "mean_ms": (number("Mean latency (ns)") or 0) / 1e6 or None,
            "valid": "Result is : VALID" in text}


def bench_run(model_path: str, mode: str, executor: str | None, seconds: float) -> dict:
    """`edgeaccel bench` as a user runs it, for LoadGen's minimum duration and query count."""
    cmd = [str(BIN / "edgeaccel"), "bench", model_path, "--mode", mode, "--json", "--min-seconds", str(seconds),
           "--runs", str(MIN_QUERIES)] + (["--executor", executor] if executor else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["results"][0]


def loadgen_in_subprocess(args, scenario: str, expected_qps: float) -> dict:
    """Each LoadGen test runs in its own process, as bench does, so neither inherits the other's threads."""
    cmd = [sys.executable, __file__, args.model, "--child", scenario, "--seconds", str(args.seconds),
           "--expected-qps", str(expected_qps)] + (["--executor", args.executor] if args.executor else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--executor")
    p.add_argument("--seconds", type=float, default=10.0, help="LoadGen min_duration per test (default 10)")
    p.add_argument("--rounds", type=int, default=2, help="alternating bench/LoadGen rounds (default 2)")
    p.add_argument("--child", choices=("SingleStream", "Offline"), help=argparse.SUPPRESS)
    p.add_argument("--expected-qps", type=float, default=100.0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(loadgen_run(args.model, args.child, args.seconds, args.executor, args.expected_qps)))
        return 0

    lat = {"bench": [], "loadgen": []}
    fps = {"bench": [], "loadgen": []}
    per_s = max(bench_run(args.model, "latency", args.executor, 1.0)["fps"], 1.0)  # LoadGen's expected QPS
    for round_index in range(args.rounds):
        order = ("bench", "loadgen") if round_index % 2 == 0 else ("loadgen", "bench")
        for who in order:
            time.sleep(0.5)
            if who == "bench":
                b = bench_run(args.model, "latency", args.executor, args.seconds)
                lat["bench"].append(b["latency_ms"]["p90"])
            else:
                g = loadgen_in_subprocess(args, "SingleStream", per_s)
                lat["loadgen"].append(g["p90_ms"])
        for who in order:
            time.sleep(0.5)
            if who == "bench":
                b = bench_run(args.model, "throughput", args.executor, args.seconds)
                fps["bench"].append(b["fps"])
            else:
                g = loadgen_in_subprocess(args, "Offline", fps["bench"][-1] if fps["bench"] else 2 * per_s)
                fps["loadgen"].append(g["samples_per_second"])
        print(f"round {round_index + 1}: p90 ms bench {lat['bench'][-1]:.3f} loadgen {lat['loadgen'][-1]:.3f}; "
              f"FPS bench {fps['bench'][-1]:.1f} loadgen {fps['loadgen'][-1]:.1f}", flush=True)
    ok = True
    for name, figures in (("SingleStream p90 latency", lat), ("Offline samples/s", fps)):
        ratio = statistics.median(figures["loadgen"]) / statistics.median(figures["bench"])
        ok &= abs(ratio - 1) <= 0.10
        print(f"{name:<26} loadgen/bench {ratio:.3f}  (medians of {args.rounds} rounds; target within 10%) "
              f"{'PASS' if abs(ratio - 1) <= 0.10 else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
