"""YOLO-layout ONNX models whose outputs the tests choose: the output is a constant (plus 0 x the image's sum,
so that the image input is really read), so every box, score and class the decoder must find is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np

INPUT = 64  # the size the tests feed (imgsz)


def cells(size: int = INPUT) -> int:
    """Candidates a YOLO head gives on a size x size input: one per cell of its stride 8, 16 and 32 grids
    (edgeaccel refuses other counts as not YOLO): 84 for 64."""
    return sum((size // s) ** 2 for s in (8, 16, 32))


def candidates(rows: list[tuple], classes: int, n: int | None = None, objectness: bool = False) -> np.ndarray:
    """[N, 4 (+1) + C] rows: (cx, cy, w, h, class, score) given, the rest background at score 0.01. N is the
    count a YOLO head has on the test input: ``cells()``, three times that for v5's anchors (objectness)."""
    n = n or cells() * (3 if objectness else 1)
    width = 4 + int(objectness) + classes
    out = np.zeros((n, width), np.float32)
    out[:, :4] = [5, 5, 4, 4]
    out[:, 4:] = 0.01
    for i, (cx, cy, w, h, cls, score) in enumerate(rows):
        out[i, :4] = [cx, cy, w, h]
        if objectness:
            out[i, 4] = 1.0
            out[i, 5 + cls] = score
        else:
            out[i, 4 + cls] = score
    return out


def constant_output(path: Path, values: np.ndarray, *, dynamic: bool = True, metadata: dict | None = None,
                    nchw: bool = True) -> Path:
    return constant_outputs(path, {"output0": values}, dynamic=dynamic, metadata=metadata, nchw=nchw)


def constant_outputs(path: Path, outputs: dict[str, np.ndarray], *, dynamic: bool = True,
                     metadata: dict | None = None, nchw: bool = True, size: int = INPUT) -> Path:
    """A model of one float image input (size x size unless dynamic) whose outputs are the given arrays."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, 3, "height", "width"] if dynamic else [1, 3, size, size]
    if not nchw:
        shape = [1, "height", "width", 3] if dynamic else [1, size, size, 3]
    nodes = [helper.make_node("ReduceSum", ["images"], ["total"], keepdims=0),
             helper.make_node("Mul", ["total", "zero"], ["nothing"])]
    tables = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    for name, values in outputs.items():
        nodes.append(helper.make_node("Add", [f"{name}_table", "nothing"], [name]))
        tables.append(numpy_helper.from_array(values.astype(np.float32), f"{name}_table"))
    graph = helper.make_graph(
        nodes, path.stem, [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(v.shape)) for name, v in outputs.items()],
        tables)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def detector_trap(path: Path, *, signal: float = 0.05, weight: float = 100.0, seed: int = 0) -> Path:
    """A YOLOv8-layout detector ([1, 4 + 2, 8400]: 24 boxes, the rest background; 640 x 640 input, Ultralytics metadata) whose box coordinates
    span the whole 0..640 input (so the output's range is set by pixels) and whose class scores sit near the
    0.25 threshold: score = T + f @ (A + D) - f @ A, f from the image's mean colour. |A| ~ ``weight`` and
    |D| ~ ``signal``: float32 keeps D (scores T + f @ D, some above the threshold, some below), bfloat16
    rounds A + D to A's grid and loses it, so the detections change while the raw output moves by well under
    1% of its range. ``signal=0`` makes a detector bf16 keeps (nothing for it to lose)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    n, classes, count = 64, 2, 24
    total = cells(640)  # the candidates a YOLO head has on 640 x 640; those after the first `count` are background
    centres = [(48 + 104 * (i % 6), 64 + 160 * (i // 6)) for i in range(count)]  # 6 x 4 boxes, none overlapping
    centres += [(320, 320)] * (total - count)
    boxes = np.array([[x for x, _ in centres], [y for _, y in centres], [64] * total, [96] * total], np.float32)
    base = np.full((classes, total), 0.01, np.float32)
    for i in range(count):  # every third box clear (0.6), the others 0.03-0.1 either side of the threshold
        base[i % classes, i] = 0.6 if i % 3 == 0 else 0.25 + (0.03 + 0.07 * rng.random()) * (1 if i % 2 else -1)
    project = rng.standard_normal((3, n)).astype(np.float32)
    a = (rng.standard_normal((n, classes * count)) * weight).astype(np.float32)
    d = (rng.standard_normal((n, classes * count)) * signal).astype(np.float32)
    nodes = [helper.make_node("ReduceMean", ["images"], ["mean"], axes=[2, 3], keepdims=0),
             helper.make_node("MatMul", ["mean", "project"], ["f"]),
             helper.make_node("MatMul", ["f", "a_plus_d"], ["k"]), helper.make_node("MatMul", ["f", "a"], ["h"]),
             helper.make_node("Sub", ["k", "h"], ["signal"]),
             helper.make_node("Reshape", ["signal", "score_shape"], ["signal3"]),
             helper.make_node("Concat", ["signal3", "quiet"], ["signal_all"], axis=2),
             helper.make_node("Add", ["signal_all", "base"], ["raw_scores"]),
             helper.make_node("Clip", ["raw_scores", "score_min", "score_max"], ["scores"]),  # 0..1 as a sigmoid's
             helper.make_node("ReduceSum", ["images"], ["total"], keepdims=0),
             helper.make_node("Mul", ["total", "zero"], ["nothing"]),
             helper.make_node("Add", ["boxes", "nothing"], ["placed"]),
             helper.make_node("Concat", ["placed", "scores"], ["output0"], axis=1)]
    tables = {"project": project, "a": a, "a_plus_d": a + d, "base": base[None], "boxes": boxes[None],
              "zero": np.zeros((), np.float32), "score_shape": np.array([1, classes, count], np.int64),
              "quiet": np.zeros((1, classes, total - count), np.float32),
              "score_min": np.zeros((), np.float32), "score_max": np.ones((), np.float32)}
    graph = helper.make_graph(
        nodes, path.stem, [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + classes, total])],
        [numpy_helper.from_array(v, k) for k, v in tables.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    for key, value in {"task": "detect", "names": "{0: 'cat', 1: 'dog'}", "imgsz": "[640, 640]"}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path
