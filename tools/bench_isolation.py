#!/usr/bin/env python3
"""What isolate=True costs per run() call: the same model loaded in process and isolated, timed in
alternating blocks (a short pause before each block: ORT threads spin after a run, FINDINGS).

    python tools/bench_isolation.py --blocks 20 --calls 25

Prints, per model, the median and p90 per-call latency of each mode over blocks x calls runs, and the
median added cost. Figures drift 2x between runs on a shared machine; compare within one run only.
Also prints the one-off cost of loading isolated (worker start + runtime import + model load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgeaccel  # noqa: E402

CASES = {
    "tiny (split_concat.tflite, litert)": "split_concat.tflite",
    "mobilenet_v2 (tflite, litert)": "mobilenet_v2_1.0_224_quant.tflite",
    "mobilenet_v2 (onnx, onnxruntime)": "mobilenet_v2_1.0_224_quant.onnx",
}


def bench(path: Path, blocks: int, calls: int, pause: float) -> dict:
    t0 = time.perf_counter()
    isolated = edgeaccel.load(path, isolate=True, strict=True)
    load_isolated = time.perf_counter() - t0
    t0 = time.perf_counter()
    direct = edgeaccel.load(path, strict=True)
    load_direct = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    inputs = [rng.integers(0, 256, s.shape, dtype=np.uint8) for s in direct.inputs]
    times: dict[str, list[float]] = {"direct": [], "isolated": []}
    models = {"direct": direct, "isolated": isolated}
    with direct, isolated:
        for model in models.values():
            for _ in range(20):
                model.run(inputs)
        for b in range(blocks):
            order = ("direct", "isolated") if b % 2 == 0 else ("isolated", "direct")
            for mode in order:
                time.sleep(pause)
                run = models[mode].run
                for _ in range(calls):
                    start = time.perf_counter()
                    run(inputs)
                    times[mode].append(time.perf_counter() - start)
    ms = {k: np.asarray(v) * 1e3 for k, v in times.items()}
    med = {k: float(np.median(v)) for k, v in ms.items()}
    return {
        "runs_per_mode": blocks * calls, "blocks": blocks, "calls_per_block": calls,
        "median_ms": {k: round(v, 4) for k, v in med.items()},
        "p90_ms": {k: round(float(np.percentile(v, 90)), 4) for k, v in ms.items()},
        "added_median_ms": round(med["isolated"] - med["direct"], 4),
        "ratio": round(med["isolated"] / med["direct"], 3),
        "load_s": {"direct": round(load_direct, 3), "isolated": round(load_isolated, 3)},
        "input_bytes": int(sum(a.nbytes for a in inputs)),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", type=int, default=20)
    p.add_argument("--calls", type=int, default=25)
    p.add_argument("--pause", type=float, default=0.05)
    p.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    args = p.parse_args()
    for label, name in CASES.items():
        result = bench(args.models / name, args.blocks, args.calls, args.pause)
        print(json.dumps({"model": label, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
