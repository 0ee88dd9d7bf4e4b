"""A two-stage cascade over two emulated accelerators and the CPU (the target: stages placed on
different devices when that is faster, end-to-end FPS >= 0.9x the slowest stage alone, every frame accounted
for). A benchmark that prints figures, not a test.

    PYTHONPATH=. python tools/cascade_bench.py [--frames 60] [--runs 5] [--latency-ms 10 8]

Stages: MediaPipe's face detector, then its face mesh on each face's crop (rotated along the eyes), from
tests/data/mediapipe, on grace_hopper.png turned by a few angles (distinct frames, repeated). Devices: two
emulated accelerators (edgeaccel.testing.emulated, installed as plug-ins) that answer by LiteRT on the CPU and
take --latency-ms a call, one request at a time; every distinct input is computed once for real (a warm-up
pass does that), later calls sleep the modelled time. Printed: where load() put each stage and where placement
put it, then ``--runs`` alternating runs (each stage alone on the same frames, then the cascade's live FPS with
Cascade.watch, drop "none"; the next run the other way round), with placement and without it (both stages on
one device), the frames read / delivered / dropped, and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
MEDIAPIPE = ROOT / "tests" / "data" / "mediapipe"
STAGES = [{"name": "face", "model": str(MEDIAPIPE / "face_detection_short_range.tflite")},
          {"name": "mesh", "model": str(MEDIAPIPE / "face_landmark.tflite"),
           "crop": {"scale": 1.5, "rotate": [0, 1, 0]}}]


def frames(count: int) -> list[np.ndarray]:
    from PIL import Image

    photo = Image.open(SHARED / "images" / "grace_hopper.png").convert("RGB")
    distinct = [np.asarray(photo.rotate(angle, resample=Image.BILINEAR)) for angle in (0, 8, -8, 16, -16, 24)]
    return [distinct[i % len(distinct)] for i in range(count)]


def alone_fps(cascade, images: list[np.ndarray]) -> list[float]:
    """Each stage by itself over the frames, one after another (the later stage on the earlier one's boxes,
    computed beforehand)."""
    start = time.perf_counter()
    results = [cascade.first(image) for image in images]
    fps = [len(images) / (time.perf_counter() - start)]
    for k in range(1, len(cascade.stages)):
        start = time.perf_counter()
        for image, result in zip(images, results, strict=True):
            cascade.later(k, image, result)
        fps.append(len(images) / (time.perf_counter() - start))
    return fps


def live(cascade, images: list[np.ndarray]) -> dict:
    run = cascade.watch(images, drop="none")
    return run.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5, help="alternating runs (alone then cascade, then the other "
                        "way round) per placement; the medians are printed")
    parser.add_argument("--latency-ms", type=float, nargs=2, default=(10.0, 8.0), metavar=("NPU", "GPU"),
                        help="modelled time of one call on each emulated accelerator")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import edgeaccel
    from edgeaccel.testing.emulated import emulated_accelerator
    from edgeaccel.testing.plugins import installed_plugins

    npu = emulated_accelerator("bench-npu", "BenchNPU", "npu", fixed_latency_ms=args.latency_ms[0], speedup=1000,
                               memo=512)
    gpu = emulated_accelerator("bench-gpu", "BenchGPU", "gpu", fixed_latency_ms=args.latency_ms[1], speedup=1000,
                               memo=512)
    images = frames(args.frames)
    with tempfile.TemporaryDirectory() as folder, installed_plugins(folder, npu, gpu):
        for placement in ("auto", "as-loaded"):
            with edgeaccel.Cascade(STAGES, placement=placement) as cascade:
                print(f"placement={placement}: " + " -> ".join(f"{s.name} on {s.executor_name}"
                                                               for s in cascade.stages))
                for note in cascade.placement:
                    print(f"  {note}")
                for image in images[:6]:  # every distinct input once for real: later calls are the model's time
                    cascade.predict(image)
                ratios, live_fps = [], []
                for run in range(args.runs):
                    if run % 2 == 0:  # alternate the order, so that a load that comes and goes hits both
                        fps = alone_fps(cascade, images)
                        report = live(cascade, images)
                    else:
                        report = live(cascade, images)
                        fps = alone_fps(cascade, images)
                    ratios.append(report["fps"] / min(fps))
                    live_fps.append(report["fps"])
                    frames_ = report["frames"]
                    print(f"  run {run + 1}: alone " + ", ".join(f"{s.name} {f:.1f}" for s, f in zip(cascade.stages, fps, strict=True))
                          + f" fps; cascade {report['fps']:.1f} fps = {ratios[-1]:.2f}x the slowest alone; read "
                          f"{frames_['read']}, delivered {frames_['delivered']}, dropped {frames_['dropped']}; "
                          + ", ".join(f"{s['name']} {s['device']} p50 {s['p50_ms']} ms busy {s['busy']:.0%}"
                                      for s in report["stages"]))
                print(f"  median of {args.runs}: cascade {statistics.median(live_fps):.1f} fps = "
                      f"{statistics.median(ratios):.2f}x the slowest stage alone (target >= 0.9 with placement; "
                      f"min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
