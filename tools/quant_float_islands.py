#!/usr/bin/env python3
"""What convert's float islands buy a detector: the YOLOv8-style detector of tests/yolo_like.py converted to
onnx-int8 and openvino-int8, then IoU-matched precision and recall of each int8 artifact's boxes against the float
model's (IoU >= 0.5, same class, pooled over held-out images the calibration never saw) and the number of distinct
class-score values, for convert as it is and for whole-graph int8 (ONNX Runtime's quantize_static on every node,
what convert did before).

    python tools/quant_float_islands.py                      # 32 calibration images, 60 held-out ones
    python tools/quant_float_islands.py --held-out 200 --sensitivity-seconds 0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import edgeaccel  # noqa: E402
import yolo_like  # noqa: E402
from edgeaccel.convert import calibration as calib_mod  # noqa: E402
from edgeaccel.convert import convert  # noqa: E402


def agreement(path: Path, executor: str, reference, seeds) -> str:
    hits = found = expected = 0
    scores: set[float] = set()
    with edgeaccel.load(path, executor=executor, task="detect") as model:
        for seed in seeds:
            image, _ = yolo_like.squares(seed)
            want = [(b.class_id, b.xyxy) for b in reference.predict(image).boxes]
            got = [(b.class_id, b.xyxy) for b in model.predict(image).boxes]
            h, f, e = yolo_like.match(got, want)
            hits, found, expected = hits + h, found + f, expected + e
            arrays, _ = model.task.preprocess(image)
            scores |= set(np.round(np.asarray(model.run(arrays)[0])[0, 4:].ravel(), 5).tolist())
    return (f"precision {hits / max(found, 1):.3f} recall {hits / max(expected, 1):.3f} (matched {hits}, int8 boxes "
            f"{found}, float boxes {expected}), {len(scores)} distinct class-score values")


def whole_graph(detector: Path, calibration: Path, out: Path) -> Path:
    from onnxruntime import quantization as q

    feeds = iter(calib_mod.load(calibration, edgeaccel.describe(detector).inputs).feeds())

    class Reader(q.CalibrationDataReader):
        def get_next(self):
            return next(feeds, None)

    q.quantize_static(str(detector), str(out), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibration", type=int, default=32, help="calibration images (seeds 0..N-1)")
    parser.add_argument("--held-out", type=int, default=60, help="held-out images (seeds 5000..)")
    parser.add_argument("--sensitivity-seconds", type=float, default=30.0)
    args = parser.parse_args()
    seeds = range(5000, 5000 + args.held_out)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        detector = yolo_like.build(tmp / "squares.onnx")
        calibration = yolo_like.write_images(tmp / "calibration", range(args.calibration))
        with edgeaccel.load(detector, executor="onnxruntime", task="detect") as reference:
            print(f"whole graph int8, onnxruntime: "
                  f"{agreement(whole_graph(detector, calibration, tmp / 'whole.onnx'), 'onnxruntime', reference, seeds)}")
            start = time.perf_counter()
            result = convert(detector, "onnx-int8,openvino-int8", tmp / "bundle", calibration=calibration,
                             sensitivity_s=args.sensitivity_seconds)
            print(f"convert took {time.perf_counter() - start:.1f} s; {result.artifacts[0].note}")
            for artifact in result.artifacts:
                executor = "onnxruntime" if artifact.path.suffix == ".onnx" else "openvino"
                print(f"{artifact.target}, {executor}: {agreement(artifact.path, executor, reference, seeds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
