"""An ONNX graph with the topology of an Ultralytics YOLOv8 detector export, at a small width and random weights.

It detects nothing; it is there for what depends on the graph's shape: the Conv+SiLU body (Conv, Sigmoid, Mul),
C2f blocks (Split, bottlenecks, Concat), SPPF (MaxPool chain, Concat), the FPN/PAN neck (Resize, Concat), and
the Detect head as Ultralytics exports it: per scale a box branch ending in a Conv of 4 x 16 DFL bins and a class
branch ending in a Conv of C logits, Concat + Reshape per scale, Concat of scales, Split, DFL (Reshape,
Transpose, Softmax, a fixed 1x1 Conv of weights 0..15, Reshape), dist2bbox (Slice, Sub, Add, Div, Concat, Mul by
strides), Sigmoid, and the final Concat [1, 4 + C, N]. Body nodes are named ``model.*``, head nodes
``detect.*`` and the last convolutions ``detect.cv2.*.2`` / ``detect.cv3.*.2``, as Ultralytics names them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

REG_MAX = 16


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.channels: dict[str, int] = {}

    def const(self, name: str, array) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, outputs: int = 1, **attrs) -> list[str]:
        from onnx import helper

        outs = [name if outputs == 1 else f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs

    def conv(self, x: str, c_out: int, name: str, k: int = 1, s: int = 1, act: bool = True) -> str:
        c_in = self.channels[x]
        w = self.rng.normal(0, np.sqrt(2.0 / (c_in * k * k)), (c_out, c_in, k, k)).astype(np.float32)
        b = self.rng.normal(0, 0.1, c_out).astype(np.float32)
        (y,) = self.node("Conv", [x, self.const(f"{name}.weight", w), self.const(f"{name}.bias", b)],
                         f"{name}/conv/Conv", kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4)
        if act:  # SiLU as the export writes it: x * sigmoid(x)
            (g,) = self.node("Sigmoid", [y], f"{name}/act/Sigmoid")
            (y,) = self.node("Mul", [y, g], f"{name}/act/Mul")
        self.channels[y] = c_out
        return y

    def c2f(self, x: str, c_out: int, name: str, n: int = 1, shortcut: bool = True) -> str:
        half = c_out // 2
        y = self.conv(x, 2 * half, f"{name}/cv1")
        parts = self.node("Split", [y, self.const(f"{name}.split", np.array([half, half], np.int64))],
                          f"{name}/Split", outputs=2, axis=1)
        for p in parts:
            self.channels[p] = half
        last = parts[-1]
        for i in range(n):
            h = self.conv(self.conv(last, half, f"{name}/m.{i}/cv1", k=3), half, f"{name}/m.{i}/cv2", k=3)
            if shortcut:
                (h,) = self.node("Add", [last, h], f"{name}/m.{i}/Add")
                self.channels[h] = half
            parts.append(h)
            last = h
        (cat,) = self.node("Concat", parts, f"{name}/Concat", axis=1)
        self.channels[cat] = half * len(parts)
        return self.conv(cat, c_out, f"{name}/cv2")

    def sppf(self, x: str, c_out: int, name: str) -> str:
        y = self.conv(x, self.channels[x] // 2, f"{name}/cv1")
        pooled = [y]
        for i in range(3):
            (p,) = self.node("MaxPool", [pooled[-1]], f"{name}/m_{i}/MaxPool", kernel_shape=[5, 5], pads=[2] * 4,
                             strides=[1, 1])
            pooled.append(p)
        (cat,) = self.node("Concat", pooled, f"{name}/Concat", axis=1)
        self.channels[cat] = 4 * self.channels[y]
        return self.conv(cat, c_out, f"{name}/cv2")

    def upsample(self, x: str, name: str) -> str:
        (y,) = self.node("Resize", [x, "", self.const(f"{name}.scales", np.array([1, 1, 2, 2], np.float32))],
                         f"{name}/Resize", mode="nearest")
        self.channels[y] = self.channels[x]
        return y

    def concat(self, xs: list[str], name: str) -> str:
        (y,) = self.node("Concat", xs, f"{name}/Concat", axis=1)
        self.channels[y] = sum(self.channels[x] for x in xs)
        return y


def build(path: Path, *, size: int = 64, classes: int = 3, width: int = 8, seed: int = 0,
          names: dict[int, str] | None = None) -> Path:
    """Write the graph to ``path``: input ``images`` [1, 3, size, size] float 0..1, output0 [1, 4 + C, N]."""
    import onnx
    from onnx import TensorProto, helper

    b = _Builder(seed)
    b.channels["images"] = 3
    w = width
    x = b.conv("images", w, "/model.0", k=3, s=2)
    x = b.conv(x, 2 * w, "/model.1", k=3, s=2)
    x = b.c2f(x, 2 * w, "/model.2")
    x = b.conv(x, 4 * w, "/model.3", k=3, s=2)
    p3 = b.c2f(x, 4 * w, "/model.4", n=2)
    x = b.conv(p3, 8 * w, "/model.5", k=3, s=2)
    p4 = b.c2f(x, 8 * w, "/model.6", n=2)
    x = b.conv(p4, 16 * w, "/model.7", k=3, s=2)
    x = b.c2f(x, 16 * w, "/model.8")
    p5 = b.sppf(x, 16 * w, "/model.9")
    x = b.c2f(b.concat([b.upsample(p5, "/model.10"), p4], "/model.11"), 8 * w, "/model.12", shortcut=False)
    n3 = b.c2f(b.concat([b.upsample(x, "/model.13"), p3], "/model.14"), 4 * w, "/model.15", shortcut=False)
    n4 = b.c2f(b.concat([b.conv(n3, 4 * w, "/model.16", k=3, s=2), x], "/model.17"), 8 * w, "/model.18",
               shortcut=False)
    n5 = b.c2f(b.concat([b.conv(n4, 8 * w, "/model.19", k=3, s=2), p5], "/model.20"), 16 * w, "/model.21",
               shortcut=False)

    no = 4 * REG_MAX + classes
    flat, anchors, strides = [], [], []
    for i, (feat, stride) in enumerate(((n3, 8), (n4, 16), (n5, 32))):
        box = b.conv(b.conv(b.conv(feat, 4 * REG_MAX, f"/model.22/cv2.{i}/cv2.{i}.0", k=3),
                            4 * REG_MAX, f"/model.22/cv2.{i}/cv2.{i}.1", k=3),
                     4 * REG_MAX, f"/model.22/cv2.{i}/cv2.{i}.2", act=False)
        cls = b.conv(b.conv(b.conv(feat, max(w, classes), f"/model.22/cv3.{i}/cv3.{i}.0", k=3),
                            max(w, classes), f"/model.22/cv3.{i}/cv3.{i}.1", k=3),
                     classes, f"/model.22/cv3.{i}/cv3.{i}.2", act=False)
        (cat,) = b.node("Concat", [box, cls], f"/model.22/Concat_{i}", axis=1)
        cells = size // stride
        (f,) = b.node("Reshape", [cat, b.const(f"/model.22/shape_{i}", np.array([1, no, -1], np.int64))],
                      f"/model.22/Reshape_{i}")
        flat.append(f)
        centres = np.arange(cells, dtype=np.float32) + 0.5
        ys, xs = np.meshgrid(centres, centres, indexing="ij")
        anchors.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        strides.append(np.full(cells * cells, stride, np.float32))
    (raw,) = b.node("Concat", flat, "/model.22/Concat_3", axis=2)
    n = sum((size // s) ** 2 for s in (8, 16, 32))
    box, cls = b.node("Split", [raw, b.const("/model.22/split", np.array([4 * REG_MAX, classes], np.int64))],
                      "/model.22/Split", outputs=2, axis=1)
    (d,) = b.node("Reshape", [box, b.const("/model.22/dfl/shape", np.array([1, 4, REG_MAX, n], np.int64))],
                  "/model.22/dfl/Reshape")
    (d,) = b.node("Transpose", [d], "/model.22/dfl/Transpose", perm=[0, 2, 1, 3])
    (d,) = b.node("Softmax", [d], "/model.22/dfl/Softmax", axis=1)
    proj = np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1)
    (d,) = b.node("Conv", [d, b.const("/model.22/dfl/conv.weight", proj)], "/model.22/dfl/conv/Conv")
    (d,) = b.node("Reshape", [d, b.const("/model.22/dfl/shape2", np.array([1, 4, n], np.int64))],
                  "/model.22/dfl/Reshape_1")
    lt, rb = b.node("Split", [d, b.const("/model.22/split2", np.array([2, 2], np.int64))], "/model.22/Split_1",
                    outputs=2, axis=1)
    grid = b.const("/model.22/anchors", np.concatenate(anchors, axis=1)[None])
    (x1y1,) = b.node("Sub", [grid, lt], "/model.22/Sub")
    (x2y2,) = b.node("Add", [grid, rb], "/model.22/Add")
    (s,) = b.node("Add", [x1y1, x2y2], "/model.22/Add_1")
    (cxy,) = b.node("Div", [s, b.const("/model.22/two", np.array(2, np.float32))], "/model.22/Div")
    (wh,) = b.node("Sub", [x2y2, x1y1], "/model.22/Sub_1")
    (xywh,) = b.node("Concat", [cxy, wh], "/model.22/Concat_4", axis=1)
    (dbox,) = b.node("Mul", [xywh, b.const("/model.22/strides", np.concatenate(strides)[None, None])],
                     "/model.22/Mul_2")
    (scores,) = b.node("Sigmoid", [cls], "/model.22/Sigmoid")
    b.node("Concat", [dbox, scores], "/model.22/Concat_5", axis=1)
    b.nodes[-1].output[0] = "output0"

    graph = helper.make_graph(b.nodes, "yolov8_topology",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + classes, n])],
                              b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    names = names or {i: f"class{i}" for i in range(classes)}
    for key, value in {"task": "detect", "stride": "32", "imgsz": f"[{size}, {size}]", "names": str(names)}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path
