"""A two-stage cascade over two emulated accelerators and the CPU (the target: stages placed on
different devices when that is faster, end-to-end FPS >= 0.9x the slowest stage alone, every frame accounted
for). A benchmark that prints figures, not a test.

    PYTHONPATH=. python tools/cascade_bench.py [--frames 60] [--latency-ms 10 8]

Stages: MediaPipe's face detector, then its face mesh on each face's crop (rotated along the eyes), from
tests/data/mediapipe, on grace_hopper.png turned by a few angles (distinct frames, repeated). Devices: two
emulated accelerators (edgeaccel.testing.emulated, installed as plug-ins) that answer by LiteRT on the CPU and
take --latency-ms a call, one request at a time; every distinct input is computed once for real (a warm-up
pass does that), later calls sleep the modelled time. Printed: where load() put each stage and where placement
put it, each stage's FPS alone on the same frames, the cascade's live FPS (Cascade.watch, drop "none") with
placement and without it (both stages on one device), and the frames read / delivered / dropped.
"""

from __future__ import annotations

import argparse
import os
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
                fps = alone_fps(cascade, images)
                report = live(cascade, images)
                slowest = min(fps)
                frames_ = report["frames"]
                alone = zip(cascade.stages, fps, strict=True)
                print("  alone: " + ", ".join(f"{s.name} {f:.1f} fps" for s, f in alone))
                print(f"  cascade live: {report['fps']:.1f} fps = {report['fps'] / slowest:.2f}x the slowest stage "
                      f"alone (target >= 0.9 with placement); frames read {frames_['read']}, delivered "
                      f"{frames_['delivered']}, dropped {frames_['dropped']}, abandoned {frames_['abandoned']}")
                for s in report["stages"]:
                    print(f"    {s['name']}: {s['device']} p50 {s['p50_ms']} ms, busy {s['busy']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
