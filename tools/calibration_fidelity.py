"""Does calibration's timing agree with a separate side-by-side measurement? (faithful calibration)

For each model: calibrate (accuracy tolerance opened wide, so that every candidate that runs is timed), then
time the same candidates again here with a loop that shares no code with calibration: a fixed number of
calls per block, candidates in a shuffled order each round, a pause before each block, and the ratio of each
candidate to the first one taken per round from adjacent blocks (the median over rounds). Prints, per
candidate, calibration's p50 and spread, both ratios and their agreement (calibration ratio / side-by-side).

    python tools/calibration_fidelity.py [MODEL ...] [--rounds 30] [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from edgeaccel.selection.calibration import sample_inputs
from edgeaccel.loader import open_candidate, select
from edgeaccel.options import RuntimeOptions, SelectionOptions

SHARED = Path(os.environ.get("EDGEACCEL_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "models"
DEFAULT_MODELS = ["mobilenet_v2_1.0_224_quant.tflite", "movenet_single_pose_lightning_ptq.tflite",
                  "mobilenet_v2_1.0_224_quant.onnx"]


def side_by_side(executors: dict, samples, rounds: int, calls: int) -> dict[str, list[float]]:
    """Block medians (seconds) per candidate, one per round."""
    blocks: dict[str, list[float]] = {name: [] for name in executors}
    for executor in executors.values():
        for x in samples * 3:
            executor.run(x)
    order = list(executors)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            executor = executors[name]
            time.sleep(0.05)
            executor.run(samples[0])
            times = []
            for i in range(calls):
                start = time.perf_counter()
                executor.run(samples[i % len(samples)])
                times.append(time.perf_counter() - start)
            blocks[name].append(float(np.median(times)))
    return blocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--budget", type=float, default=7.0, help="calibration budget (seconds)")
    args = parser.parse_args()
    random.seed(0)
    worst = 1.0
    for path in args.models or [SHARED / m for m in DEFAULT_MODELS]:
        sel = select(path, selection=SelectionOptions(calibrate=True, accuracy_tolerance=1.0,
                                                      calibration_budget_s=args.budget),
                     runtime=RuntimeOptions(cache=False))
        timed = [c for c in sel.ranking.candidates if sel.measurements.get(c.key) and sel.measurements[c.key].p50_ms]
        if len(timed) < 2:
            print(f"{path.name}: fewer than two timed candidates")
            continue
        executors = {c.name: open_candidate(c, sel.options) for c in timed}
        samples = sample_inputs(executors[timed[0].name].inputs, 8, 0)
        try:
            blocks = side_by_side(executors, samples, args.rounds, args.calls)
        finally:
            for executor in executors.values():
                executor.close()
        base = timed[0]
        print(f"{path.name}: calibration chose {base.name}")
        for cand in timed:
            m = sel.measurements[cand.key]
            cal_ratio = m.p50_ms / sel.measurements[base.key].p50_ms
            sbs = float(np.median(np.asarray(blocks[cand.name]) / np.asarray(blocks[base.name])))
            t = m.accuracy.get("timing", {})
            agreement = cal_ratio / sbs
            worst = max(worst, agreement, 1 / agreement)
            note = " (re-measured head to head)" if "head_to_head" in t else ""
            print(f"  {cand.name:<22} calibration p50 {m.p50_ms:7.3f} ms (p10-p90 {t.get('p10_ms', 0):.3f}-"
                  f"{t.get('p90_ms', 0):.3f}, {m.runs} runs) ratio {cal_ratio:5.3f} | side by side "
                  f"{np.median(blocks[cand.name]) * 1e3:7.3f} ms ratio {sbs:5.3f} | agreement {agreement:5.3f}{note}")
        if sbs_best := min(timed, key=lambda c: np.median(np.asarray(blocks[c.name]) / np.asarray(blocks[base.name]))):
            chosen_vs_best = float(np.median(np.asarray(blocks[base.name]) / np.asarray(blocks[sbs_best.name])))
            print(f"  chosen/best side by side: {chosen_vs_best:.3f} (best {sbs_best.name})")
    print(f"worst disagreement between calibration's ratios and side-by-side ratios: {worst:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
