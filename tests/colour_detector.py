"""A YOLOv8-layout ONNX detector whose boxes follow the truth of a drawn video: class k is the one colour
``COLOURS[k]``; its box is the extent of the pixels of that colour (one object per colour), at score 0.9 when
any pixel has it. Built from ONNX ops (no weights), so any runtime that reads ONNX runs it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

COLOURS = [(230, 30, 30), (30, 200, 30), (40, 40, 230), (230, 230, 30), (230, 30, 230), (30, 220, 220)]


def colour_detector(path: Path, size: int = 128, tolerance: float = 0.3) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from edgeaccel.vision.plausible import grid_cells

    classes = len(COLOURS)
    cells = grid_cells(size, size, (8, 16, 32))
    nodes, tables = [], []

    def const(name, value):
        tables.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op, inputs, output, **attrs):
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    xs = const("xs", np.arange(size, dtype=np.float32)[None, None, :])
    ys = const("ys", np.arange(size, dtype=np.float32)[None, :, None])
    xs1 = const("xs1", np.arange(1, size + 1, dtype=np.float32)[None, None, :])
    ys1 = const("ys1", np.arange(1, size + 1, dtype=np.float32)[None, :, None])
    full = const("full", np.float32(size))
    half = const("half", np.float32(0.5))
    axes = tables.append(numpy_helper.from_array(np.array([1], np.int64), "channel_axis")) or "channel_axis"
    rows = []
    for k, colour in enumerate(COLOURS):
        c = const(f"c{k}", (np.asarray(colour, np.float32) / 255)[None, :, None, None])
        diff = node("Abs", [node("Sub", ["images", c], f"d{k}")], f"a{k}")
        distance = node("ReduceSum", [diff, axes], f"s{k}", keepdims=0)  # [1, S, S]
        mask = node("Cast", [node("Less", [distance, const(f"t{k}", tolerance)], f"l{k}")], f"m{k}",
                    to=TensorProto.FLOAT)
        seen = node("ReduceMax", [mask], f"any{k}", axes=[1, 2], keepdims=0)  # [1]
        x2 = node("ReduceMax", [node("Mul", [mask, xs1], f"mx{k}")], f"x2{k}", axes=[1, 2], keepdims=0)
        y2 = node("ReduceMax", [node("Mul", [mask, ys1], f"my{k}")], f"y2{k}", axes=[1, 2], keepdims=0)
        x1 = node("Sub", [full, node("ReduceMax", [node("Mul", [mask, node("Sub", [full, xs], f"rx{k}")], f"nx{k}")],
                                     f"rxm{k}", axes=[1, 2], keepdims=0)], f"x1{k}")
        y1 = node("Sub", [full, node("ReduceMax", [node("Mul", [mask, node("Sub", [full, ys], f"ry{k}")], f"ny{k}")],
                                     f"rym{k}", axes=[1, 2], keepdims=0)], f"y1{k}")
        cx = node("Mul", [node("Add", [x1, x2], f"sx{k}"), half], f"cx{k}")
        cy = node("Mul", [node("Add", [y1, y2], f"sy{k}"), half], f"cy{k}")
        w = node("Sub", [x2, x1], f"w{k}")
        h = node("Sub", [y2, y1], f"h{k}")
        onehot = const(f"onehot{k}", np.eye(classes, dtype=np.float32)[k] * 0.9)
        scores = node("Mul", [seen, onehot], f"sc{k}")  # [C]
        box = node("Concat", [cx, cy, w, h], f"b{k}", axis=0)  # [4]
        rows.append(node("Unsqueeze", [node("Concat", [box, scores], f"r{k}", axis=0), "zero_axis"], f"row{k}"))
    tables.append(numpy_helper.from_array(np.array([0], np.int64), "zero_axis"))
    padding = const("padding", np.zeros((cells - classes, 4 + classes), np.float32))
    table = node("Concat", [*rows, padding], "table", axis=0)  # [N, 4 + C]
    node("Unsqueeze", [node("Transpose", [table], "t", perm=[1, 0]), "zero_axis"], "output0")
    graph = helper.make_graph(nodes, "colour_detector",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + classes, cells])],
                              tables)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def draw_squares(paths: list[tuple[tuple[float, float], tuple[float, float]]], count: int, fps: float,
                 size=(320, 240), side: int = 24) -> list[np.ndarray]:
    """Frames of squares of COLOURS moving from start at velocity (pixels per second) on a grey floor."""
    width, height = size
    frames = []
    for n in range(count):
        image = np.full((height, width, 3), 90, np.uint8)
        t = n / fps
        for k, ((x, y), (vx, vy)) in enumerate(paths):
            cx, cy = x + vx * t, y + vy * t
            x1, y1 = int(round(cx - side / 2)), int(round(cy - side / 2))
            image[max(0, y1):max(0, y1 + side), max(0, x1):max(0, x1 + side)] = COLOURS[k]
        frames.append(image)
    return frames
