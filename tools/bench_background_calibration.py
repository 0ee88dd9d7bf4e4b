#!/usr/bin/env python3
"""What load()'s background calibration costs a model that is busy from the start: throughput with 4 requests
in flight over the first seconds after load(runtime=RuntimeOptions(cache=False)), with the default (measure in the
background, holding back while the model serves) against SelectionOptions(calibrate=False), in alternating pairs. A ratio near 1.0 means the
calibration waited for the load to pause rather than measuring beside it.

    python tools/bench_background_calibration.py                    # mobilenet_v2 ONNX from ../shared/models
    python tools/bench_background_calibration.py MODEL --pairs 5 --seconds 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))


def saturated_rate(model_path: Path, calibrate, seconds: float, in_flight: int = 4) -> tuple[float, str]:
    import numpy as np

    import edgeaccel
    from bench_serve import saturated_throughput  # this folder is on sys.path when a tool runs

    with edgeaccel.load(model_path, selection=edgeaccel.SelectionOptions(calibrate=calibrate),
                        runtime=edgeaccel.RuntimeOptions(cache=False)) as model:
        spec = model.inputs[0]
        rng = np.random.default_rng(0)
        x = rng.integers(0, 255, spec.shape, dtype=spec.dtype) if np.issubdtype(spec.dtype, np.integer) \
            else rng.random(spec.shape, dtype=np.float32).astype(spec.dtype)
        rate = saturated_throughput(model, x, in_flight, seconds)
        return rate, str(model.calibration)[:120]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path, nargs="?", default=SHARED / "models" / "mobilenet_v2_1.0_224_quant.onnx")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=12.0, help="window after load (default 12 s)")
    args = p.parse_args()
    rates: dict[str, list[float]] = {"background": [], "off": []}
    for _ in range(args.pairs):
        for label, calibrate in (("background", None), ("off", False)):
            rate, status = saturated_rate(args.model, calibrate, args.seconds)
            rates[label].append(rate)
            print(f"  {label:10s} {rate:7.1f}/s   calibration: {status}", flush=True)
            time.sleep(2)
    ratio = statistics.median(rates["background"]) / statistics.median(rates["off"])
    print(f"{args.model.name}: first {args.seconds:g} s after load, 4 in flight, median of {args.pairs} pairs: "
          f"background calibration / calibrate=False = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
