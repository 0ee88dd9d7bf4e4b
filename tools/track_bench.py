"""How long tracking plus lines and zones take per frame at 20 objects, next to a detector's inference
(the target: at most 5% of it). A benchmark that prints figures, not a test.

    PYTHONPATH=. python tools/track_bench.py [--objects 20] [--runs 30]

Tracking: edgeaccel.testing.scenes.crowd(N): N objects crossing a 640x480 frame for 6 s at 30 FPS, each
detected every frame with jitter (plus false boxes), through the live pipeline's per-source hook
(SourceTracking.apply: the tracker, 2 lines and 2 zones), timed per frame. Inference: model.run on one input,
for ../shared/models/traffic_model.tflite (an SSD on LiteRT) and the YOLOv8-layout ONNX model of
tools/vision_postprocess_bench.py (a third of YOLOv8n's FLOPs, on ONNX Runtime): a smaller model than users
run, so the share is overstated rather than flattered.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))


def tracking_ms(objects: int) -> tuple[list[float], float]:
    from edgeaccel.testing.scenes import crowd, scene
    from edgeaccel.tracking import Line, TrackerOptions, Zone, Zones
    from edgeaccel.tracking.live import SourceTracking
    from edgeaccel.vision.results import Box

    frames = scene(crowd(objects, seed=1), drop=0.0, seed=1)
    zones = Zones([Line("h", [(0, 240), (640, 240)]), Line("v", [(320, 0), (320, 480)])],
                  [Zone("a", [(50, 50), (300, 50), (300, 200), (50, 200)]),
                   Zone("b", [(350, 250), (600, 260), (580, 450), (360, 430)])])
    tracking = SourceTracking(TrackerOptions(), zones)
    times, boxes_seen = [], []
    for f in frames:
        boxes = [Box(tuple(float(v) for v in box), score, cls, str(cls)) for _, box, score, cls in f.detections]
        boxes_seen.append(len(boxes))
        frame = SimpleNamespace(result=SimpleNamespace(boxes=boxes), timestamp=f.timestamp, captured=0.0)
        began = time.perf_counter()
        tracking.apply(frame)
        times.append((time.perf_counter() - began) * 1e3)
    return times[5:], statistics.mean(boxes_seen)  # the first frames import SciPy


def inference_ms(model_path: Path, executor: str, runs: int) -> float:
    import edgeaccel

    with edgeaccel.load(model_path, executor=executor) as model:
        inputs = [np.zeros(s.shape, s.dtype) for s in model.inputs]
        for _ in range(3):
            model.run(inputs)
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            model.run(inputs)
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def yolo_model(folder: Path) -> Path:
    source = ROOT / "tools" / "vision_postprocess_bench.py"
    spec = importlib.util.spec_from_file_location("vision_postprocess_bench", source)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.build(folder / "yolo_like.onnx", worst=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    times, boxes = tracking_ms(args.objects)
    p50, p99 = statistics.median(times), float(np.percentile(times, 99))
    print(f"tracking + 2 lines + 2 zones, {args.objects} objects ({boxes:.1f} boxes a frame): "
          f"p50 {p50:.3f} ms, p99 {p99:.3f} ms per frame over {len(times)} frames")
    models = []
    if (SHARED / "models" / "traffic_model.tflite").exists():
        models.append(("SSD traffic_model.tflite", SHARED / "models" / "traffic_model.tflite", "litert"))
    with tempfile.TemporaryDirectory() as folder:
        models.append(("YOLOv8-layout 640 (1/3 of v8n)", yolo_model(Path(folder)), "onnxruntime"))
        for name, path, executor in models:
            ms = inference_ms(path, executor, args.runs)
            print(f"{name} on {executor}: inference p50 {ms:.2f} ms; tracking is {100 * p50 / ms:.2f}% of it "
                  f"at p50 ({100 * p99 / ms:.2f}% at tracking's p99); target <= 5%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
