"""A YOLOv8-style float ONNX detector built by the tests, and the images it detects: coloured squares.

The graph has the parts of an Ultralytics v8 export that quantization has to get right, with hand-set weights
that really detect something (no training):

- backbone: a 1x1 Conv scores each pixel's likeness to each class colour (red, green, blue), a depthwise 3x3
  Conv smooths it, Clip keeps per-pixel class evidence in 0..1; a 1x1 Conv sums it into a foreground mask;
- head, two scales (strides 8 and 16) like v8's three: a box Conv of 48x48 windows centred on each anchor
  computes the foreground's moments (area, x and y offset sums), a class Conv the mean class evidence of each
  anchor's cell as a logit; per scale Concat(box, class) -> Reshape [1, 3+C, h*w], scales joined by Concat;
- decode: Split into moments and logits, cx = anchor_x + sum_x / area, cy likewise, w = h = sqrt(area),
  Sigmoid class scores, and the final Concat [1, 4+C, N] of box pixels (0..128) and scores (0..1) that a
  whole-graph int8 quantization puts under one scale;
- Ultralytics' metadata_props: names, imgsz, task=detect, stride.

``squares(seed)`` draws a 128x128 RGB image with one to three separated squares on a noisy grey background
and returns their ground truth; calibration and held-out sets use different seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIZE = 128  # imgsz
CLASSES = ("red", "green", "blue")
COLOURS = np.array([[230, 30, 30], [30, 210, 40], [40, 50, 230]], np.float32)
STRIDES = (8, 16)
WINDOW = 48  # box window side: holds a square of up to 20 px seen from any anchor that scores it
SIDES = (12, 20)  # square side range in pixels


def build(path: Path, *, opset: int = 17) -> Path:
    """Write the detector to ``path`` (static input images [1, 3, 128, 128] float 0..1, output0 [1, 7, 320])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = len(CLASSES)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    # backbone: per-pixel class evidence, clip(4 * (own channel - mean of the others) - 0.8, 0, 1)
    match = np.full((c, 3), -2.0, np.float32)
    np.fill_diagonal(match, 4.0)
    nodes.append(helper.make_node("Conv", ["images", const("colour.w", match.reshape(c, 3, 1, 1)),
                                           const("colour.b", np.full(c, -0.8))], ["colour"], name="backbone.colour"))
    nodes.append(helper.make_node("Clip", ["colour", const("zero", 0.0), const("one", 1.0)], ["evidence0"],
                                  name="backbone.clip0"))
    smooth = np.full((c, 1, 3, 3), 1.6 / 9, np.float32)  # a box filter that re-saturates the square's inside
    nodes.append(helper.make_node("Conv", ["evidence0", const("smooth.w", smooth), const("smooth.b", np.full(c, -0.3))],
                                  ["smoothed"], name="backbone.smooth", group=c, pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Clip", ["smoothed", "zero", "one"], ["evidence"], name="backbone.clip1"))
    nodes.append(helper.make_node("Conv", ["evidence", const("fg.w", np.ones((1, c, 1, 1)))], ["foreground"],
                                  name="backbone.foreground"))

    # head: per scale, moments of the foreground in a window centred on each anchor, and class logits
    per_scale, anchors = [], []
    offsets = np.arange(WINDOW, dtype=np.float32) - WINDOW / 2 + 0.5  # pixel centre minus window centre
    moments = np.stack([np.ones((WINDOW, WINDOW)), np.tile(offsets, (WINDOW, 1)),
                        np.tile(offsets[:, None], (1, WINDOW))])[:, None].astype(np.float32)  # area, sum dx, sum dy
    for s in STRIDES:
        cells = SIZE // s
        pad = WINDOW // 2 - s // 2  # window [s*i - pad, s*i - pad + WINDOW) is centred on the anchor s*i + s/2
        nodes.append(helper.make_node("Conv", ["foreground", const(f"box{s}.w", moments)], [f"box{s}"],
                                      name=f"head{s}.box", strides=[s, s], pads=[pad] * 4))
        cls_w = np.zeros((c, c, s, s), np.float32)
        for k in range(c):
            cls_w[k, k] = 10.0 / (s * s)  # 10 * (mean evidence of the cell - 0.5): a logit
        cls_b = const(f"cls{s}.b", np.full(c, -5.0))
        nodes.append(helper.make_node("Conv", ["evidence", const(f"cls{s}.w", cls_w), cls_b], [f"cls{s}"],
                                      name=f"head{s}.cls", strides=[s, s]))
        nodes.append(helper.make_node("Concat", [f"box{s}", f"cls{s}"], [f"cat{s}"], name=f"head{s}.concat", axis=1))
        nodes.append(helper.make_node("Reshape", [f"cat{s}", _shape(inits, f"flat{s}", [1, 3 + c, cells * cells])],
                                      [f"flat{s}"], name=f"head{s}.reshape"))
        per_scale.append(f"flat{s}")
        centres = (np.arange(cells, dtype=np.float32) + 0.5) * s
        ys, xs = np.meshgrid(centres, centres, indexing="ij")
        anchors.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
    nodes.append(helper.make_node("Concat", per_scale, ["raw"], name="head.concat", axis=2))

    # decode, as Ultralytics' Detect head does it after the last convolutions
    nodes.append(helper.make_node("Split", ["raw", _shape(inits, "split", [1, 2, c])], ["area", "sums", "logits"],
                                  name="decode.split", axis=1))
    nodes.append(helper.make_node("Max", ["area", const("eps", 1.0)], ["area1"], name="decode.area_floor"))
    nodes.append(helper.make_node("Div", ["sums", "area1"], ["mean_offset"], name="decode.centroid"))
    nodes.append(helper.make_node("Add", ["mean_offset", const("anchors", np.concatenate(anchors, axis=1)[None])],
                                  ["centre"], name="decode.anchors"))
    nodes.append(helper.make_node("Sqrt", ["area"], ["side"], name="decode.side"))
    nodes.append(helper.make_node("Concat", ["centre", "side", "side"], ["xywh"], name="decode.box", axis=1))
    nodes.append(helper.make_node("Sigmoid", ["logits"], ["scores"], name="decode.sigmoid"))
    nodes.append(helper.make_node("Concat", ["xywh", "scores"], ["output0"], name="decode.output", axis=1))

    n = sum((SIZE // s) ** 2 for s in STRIDES)
    graph = helper.make_graph(nodes, "yolo_like",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + c, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9,
                              producer_name="edgeaccel-tests")
    for key, value in metadata().items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def metadata() -> dict[str, str]:
    """What Ultralytics writes into an exported ONNX model's metadata_props."""
    return {"description": "edgeaccel test detector (YOLOv8-style)", "author": "edgeaccel tests",
            "task": "detect", "stride": str(max(STRIDES)), "batch": "1", "imgsz": f"[{SIZE}, {SIZE}]",
            "names": str(dict(enumerate(CLASSES)))}


def _shape(inits, name, values) -> str:
    from onnx import numpy_helper

    inits.append(numpy_helper.from_array(np.asarray(values, np.int64), f"{name}.shape"))
    return f"{name}.shape"


def squares(seed: int) -> tuple[np.ndarray, list[tuple[int, tuple[float, float, float, float]]]]:
    """A SIZE x SIZE RGB uint8 image and its squares as (class, (x1, y1, x2, y2)) in pixels."""
    rng = np.random.default_rng(seed)
    grey = rng.uniform(60, 150)
    image = np.full((SIZE, SIZE, 3), grey, np.float32) + rng.normal(0, 8, (SIZE, SIZE, 3))
    placed: list[tuple[int, tuple[float, float, float, float]]] = []
    for _ in range(int(rng.integers(1, 4))):
        for _try in range(50):
            side = int(rng.integers(SIDES[0], SIDES[1] + 1))
            x, y = (int(v) for v in rng.integers(2, SIZE - side - 2, 2))
            cx, cy = x + side / 2, y + side / 2
            # apart by more than a box window: no anchor that scores one square sees another
            if all(max(abs(cx - (b[0] + b[2]) / 2), abs(cy - (b[1] + b[3]) / 2)) > WINDOW for _, b in placed):
                break
        else:
            continue
        cls = int(rng.integers(len(CLASSES)))
        shade = rng.uniform(0.85, 1.1)
        image[y:y + side, x:x + side] = COLOURS[cls] * shade + rng.normal(0, 8, (side, side, 3))
        placed.append((cls, (float(x), float(y), float(x + side), float(y + side))))
    return np.clip(image, 0, 255).astype(np.uint8), placed


def moving_squares(frames: int, seed: int = 0, step: int = 3) -> list[tuple[np.ndarray, list]]:
    """Frames of a short video: a red square moving right along the top and a blue one moving left along the
    bottom, ``step`` pixels a frame, on a fresh noisy grey background each frame; each frame's truth as
    ``squares`` gives it (the red one first)."""
    rng = np.random.default_rng(seed)
    side, out = 16, []
    for i in range(frames):
        image = np.full((SIZE, SIZE, 3), 100.0, np.float32) + rng.normal(0, 8, (SIZE, SIZE, 3))
        truth = []
        for cls, x, y in ((0, 10 + step * i, 20), (2, SIZE - 26 - step * i, SIZE - 40)):
            image[y:y + side, x:x + side] = COLOURS[cls] + rng.normal(0, 8, (side, side, 3))
            truth.append((cls, (float(x), float(y), float(x + side), float(y + side))))
        out.append((np.clip(image, 0, 255).astype(np.uint8), truth))
    return out


def write_images(folder: Path, seeds) -> Path:
    """PNG files of ``squares(seed)`` for each seed (a calibration folder convert reads)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        Image.fromarray(squares(seed)[0]).save(folder / f"squares_{seed:05d}.png")
    return folder


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match(found, expected, threshold: float = 0.5) -> tuple[int, int, int]:
    """(true positives, found, expected): greedy one-to-one matching by IoU >= threshold and the same class,
    ``found`` and ``expected`` lists of (class, xyxy), ``found`` best-first."""
    used, hits = set(), 0
    for cls, box in found:
        best, best_iou = None, threshold
        for j, (want_cls, want_box) in enumerate(expected):
            if j in used or want_cls != cls:
                continue
            overlap = iou(box, want_box)
            if overlap >= best_iou:
                best, best_iou = j, overlap
        if best is not None:
            used.add(best)
            hits += 1
    return hits, len(found), len(expected)
