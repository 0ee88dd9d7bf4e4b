#!/usr/bin/env python3
"""Soak: N threads x M calls on every executor (in process and isolated); every output must equal the
single-threaded output for its input, and no call may raise.

    python tools/soak_threads.py                 # 8 threads x 500 calls, every case
    python tools/soak_threads.py --calls 100 --case onnxruntime

runtime facts: a shared LiteRT Interpreter or OpenVINO InferRequest gives wrong answers across threads; the
executors keep one per caller. Inputs differ per call so that a crossed-over result cannot hide.
Exit status 1 on any wrong output or error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgeaccel  # noqa: E402

CASES = {
    "litert": ("mobilenet_v1_0.25_128_quant.tflite", {}),
    "litert-multi-io": ("split_concat.tflite", {}),
    "openvino-tflite": ("mobilenet_v1_0.25_128_quant.tflite", {"executor": "openvino"}),
    "openvino-onnx": ("mobilenet_v2_1.0_224_quant.onnx", {"executor": "openvino"}),
    "openvino-ir": ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
    "onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
    "isolated-litert": ("mobilenet_v1_0.25_128_quant.tflite", {"runtime": edgeaccel.RuntimeOptions(isolate=True)}),
    "isolated-onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {"runtime": edgeaccel.RuntimeOptions(isolate=True)}),
    "isolated-openvino": ("openvino/mobilenet_v2_1.0_224_quant.xml", {"runtime": edgeaccel.RuntimeOptions(isolate=True)}),
}


def soak(models: Path, case: str, threads: int, calls: int, distinct: int = 8) -> dict:
    name, kwargs = CASES[case]
    rng = np.random.default_rng(7)
    with edgeaccel.load(models / name, selection=edgeaccel.SelectionOptions(strict=True), **kwargs) as model:
        inputs = [[rng.integers(0, 256, size=s.shape, dtype=np.uint8) for s in model.inputs] for _ in range(distinct)]
        expected = [list(model.run(x)) for x in inputs]
        errors: list[str] = []

        def call(i: int) -> int:
            k = i % distinct
            try:
                got = model.run(inputs[k])
            except Exception as exc:  # counted, and the first few kept for the report
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
                return 0
            return sum(not np.array_equal(g, e) for g, e in zip(got, expected[k], strict=True))

        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            wrong = sum(pool.map(call, range(threads * calls)))
        seconds = time.perf_counter() - started
        return {"case": case, "executor": str(model.executor.name), "threads": threads, "calls": threads * calls,
                "wrong": wrong, "errors": len(errors), "first_errors": errors[:3], "seconds": round(seconds, 2),
                "fallbacks": [str(f) for f in model.fallbacks]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--calls", type=int, default=500, help="calls per thread")
    p.add_argument("--case", action="append", choices=sorted(CASES), help="default: every case")
    p.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    args = p.parse_args()
    bad = 0
    for case in args.case or list(CASES):
        result = soak(args.models, case, args.threads, args.calls)
        bad += result["wrong"] + result["errors"]
        print(json.dumps(result), flush=True)
        time.sleep(0.1)  # ORT threads spin after a run (runtime facts): let them settle before the next case
    print(f"{'FAIL' if bad else 'OK'}: {bad} wrong outputs or errors", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
