"""How long a vision task's post-processing takes next to inference (the target: at most 15% of it
for an SSD or YOLO model on this machine). A benchmark that prints figures, not a test.

    PYTHONPATH=. python tools/vision_postprocess_bench.py [--runs 50] [--image ../shared/images/traffic_0001.png]

SSD: ../shared/models/traffic_model.tflite (TFLite_Detection_PostProcess, boxes already final).
YOLO: a YOLOv8-layout ONNX model built here: a real strided-conv backbone (about 2.5 GFLOPs at 640x640, under a
third of YOLOv8n's 8.7, so post-processing's share is overstated rather than flattered) whose [1, 84, 8400]
output is a realistic table plus 0.001 x the head: ten objects, each seen by a cluster of about 30 anchors
above the 0.25 threshold, the other anchors at background scores, as a trained detector's output looks. A
worst case is timed too: every one of the 8400 anchors above the threshold.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))


def anchors(size: int = 640) -> np.ndarray:
    """(cx, cy, stride) of YOLOv8's 8400 anchors at 640: strides 8, 16, 32."""
    rows = []
    for stride in (8, 16, 32):
        n = size // stride
        ys, xs = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        rows.append(np.stack([(xs.ravel() + 0.5) * stride, (ys.ravel() + 0.5) * stride,
                              np.full(n * n, stride)], axis=1))
    return np.concatenate(rows).astype(np.float32)


def table(worst: bool, classes: int = 80, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = anchors()
    n = len(a)
    out = np.zeros((4 + classes, n), np.float32)
    out[0], out[1] = a[:, 0], a[:, 1]
    out[2] = out[3] = a[:, 2] * 4
    out[4:] = rng.uniform(0.0, 0.03, (classes, n))  # background
    if worst:
        out[4 + rng.integers(0, classes, n), np.arange(n)] = rng.uniform(0.3, 1.0, n)
        return out
    for _ in range(10):  # ten objects, each seen by the anchors around its centre
        cx, cy, w, h = rng.uniform(80, 560), rng.uniform(80, 560), rng.uniform(40, 200), rng.uniform(40, 200)
        cls = rng.integers(0, classes)
        near = np.argsort(np.hypot(a[:, 0] - cx, a[:, 1] - cy) / a[:, 2])[:30]
        out[0, near], out[1, near] = cx + rng.normal(0, 3, 30), cy + rng.normal(0, 3, 30)
        out[2, near], out[3, near] = w + rng.normal(0, 4, 30), h + rng.normal(0, 4, 30)
        out[4 + cls, near] = rng.uniform(0.3, 0.9, 30)
    return out


def build(path: Path, worst: bool) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits, nodes = {}, []

    def conv(x: str, cin: int, cout: int, stride: int, name: str, k: int = 3) -> str:
        inits[name + "_w"] = (rng.standard_normal((cout, cin, k, k)) * (2 / (cin * k * k)) ** 0.5).astype(np.float32)
        inits[name + "_b"] = np.zeros(cout, np.float32)
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], strides=[stride] * 2,
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    x = conv("images", 3, 16, 2, "c1")
    x = conv(x, 16, 32, 2, "c2")
    p3 = conv(conv(x, 32, 64, 2, "c3"), 64, 64, 1, "c3b")
    p4 = conv(conv(p3, 64, 128, 2, "c4"), 128, 128, 1, "c4b")
    p5 = conv(conv(p4, 128, 256, 2, "c5"), 256, 256, 1, "c5b")
    heads = []
    for i, (p, c) in enumerate(((p3, 64), (p4, 128), (p5, 256))):
        h = conv(p, c, 84, 1, f"head{i}", k=1)
        inits[f"shape{i}"] = np.array([1, 84, -1], np.int64)
        nodes.append(helper.make_node("Reshape", [h, f"shape{i}"], [f"flat{i}"]))
        heads.append(f"flat{i}")
    nodes.append(helper.make_node("Concat", heads, ["head"], axis=2))
    inits["tiny"] = np.array(1e-3, np.float32)
    inits["table"] = table(worst)[None]
    nodes.append(helper.make_node("Mul", ["head", "tiny"], ["small"]))
    nodes.append(helper.make_node("Add", ["table", "small"], ["output0"]))
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                               [1, 3, 640, 640])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 84, 8400])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def report(name: str, staged) -> None:
    d = staged.as_dict()
    print(f"{name:<44} pre {d['preprocess_ms']['p50']:7.2f} ms  inference {d['inference_ms']['p50']:8.2f} ms  "
          f"post {d['postprocess_ms']['p50']:6.2f} ms  post/inference {d['postprocess_share_of_inference']:.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--image", default=str(SHARED / "images" / "traffic_0001.png"))
    args = parser.parse_args()
    import edgeaccel
    from edgeaccel import bench
    from edgeaccel.vision.preprocess import as_rgb

    image = as_rgb(args.image)
    uncalibrated = edgeaccel.SelectionOptions(calibrate=False)
    with edgeaccel.load(SHARED / "models" / "traffic_model.tflite", task="detect", selection=uncalibrated) as model:
        report("SSD traffic_model.tflite (litert)", bench.stages("ssd", model, model.task, image, args.runs))
    with tempfile.TemporaryDirectory() as folder:
        for worst in (False, True):
            path = build(Path(folder) / f"yolo_{'worst' if worst else 'typical'}.onnx", worst)
            with edgeaccel.load(path, task="detect", executor="onnxruntime", selection=uncalibrated) as model:
                staged = bench.stages("yolo", model, model.task, image, args.runs)
                boxes = len(model.predict(image).boxes)
            label = "every anchor above 0.25" if worst else "10 objects x 30 anchors"
            report(f"YOLOv8 layout, {label} ({boxes} boxes, ort)", staged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
