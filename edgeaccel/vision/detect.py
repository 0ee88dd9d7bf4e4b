"""Detection decoders, vectorized numpy: SSD models ending in TFLite_Detection_PostProcess, YOLO layouts
(v5 with objectness, v8/v11 without; [1, 4+C, N] or [1, N, 4+C]) with class-aware NMS, and exports whose NMS
is already in the graph ([1, N, 6]: x1 y1 x2 y2 score class)."""

from __future__ import annotations

import numpy as np

from .errors import TaskError
from ..modelfiles.labels import Labels
from .nms import nms, xywh_to_xyxy
from .plausible import check_boxes, check_scores
from .preprocess import Frame
from .results import Box, DetectResult, xyxy_of

MAX_NMS_CANDIDATES = 30000  # as Ultralytics: the best-scoring candidates that go into NMS
LAYOUTS = ("ssd-postprocess", "yolov8", "yolov5", "nms-in-graph")


def ssd_outputs(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """boxes (N x 4, ymin xmin ymax xmax, normalized), classes, scores and count of TFLite_Detection_PostProcess.
    Found by shape (boxes end in 4, count has one value); classes are told from scores by being whole numbers,
    for exports that list them in another order."""
    boxes = next((a for a in arrays if a.ndim == 3 and a.shape[-1] == 4), None)
    if boxes is None:
        raise TaskError("no output of shape [1, N, 4] (boxes) among the detection outputs")
    n = boxes.shape[1]
    flat = [a for a in arrays if a is not boxes and a.ndim == 2 and a.shape[1] == n]
    count = next((a for a in arrays if a.size == 1), None)
    if len(flat) < 2:
        raise TaskError("the detection outputs lack classes and scores of shape [1, N]")
    classes, scores = flat[0][0], flat[1][0]
    if _whole(scores) and not _whole(classes):
        classes, scores = scores, classes
    total = n if count is None else int(np.clip(count.reshape(-1)[0], 0, n))
    return boxes[0, :total], classes[:total], scores[:total], total


def _whole(values: np.ndarray) -> bool:
    return bool(np.all(values == np.round(values)))


def decode_ssd(arrays, frame: Frame, labels: Labels, conf: float, max_det: int) -> DetectResult:
    boxes, classes, scores, _ = ssd_outputs(arrays)
    keep = scores >= conf
    boxes, classes, scores = boxes[keep], classes[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")[:max_det]
    yxyx = boxes[order]
    xyxy = np.stack([yxyx[:, 1] * frame.input_width, yxyx[:, 0] * frame.input_height,
                     yxyx[:, 3] * frame.input_width, yxyx[:, 2] * frame.input_height], axis=1)
    return _result(frame.to_image(xyxy), scores[order], classes[order].astype(np.int64), labels, frame,
                   "ssd-postprocess")


def yolo_layout(shape: tuple, classes: int | None = None) -> str:
    """yolov8 (v8/v11: 4 box + C class columns), yolov5 (4 box + objectness + C) or nms-in-graph, from the
    output's shape [1, a, b]: Ultralytics v8/v11 exports are channel-major ([1, 84, 8400]); row-major outputs
    are v5 ([1, 25200, 85]) unless the class count says 4 + C; a few rows of 6 or 7 are final detections.
    A dynamic dimension is the candidates' (their number grows with the input size)."""
    _, a, b = shape
    if b in (6, 7) and a is not None and a != b and a <= 1000:  # [1, 300, 6]: x1 y1 x2 y2 score class
        return "nms-in-graph"
    if b is None or (a is not None and a < b):  # channel-major, N last: Ultralytics v8/v11 (and v5u)
        return "yolov8"
    if classes and b == 4 + classes:  # row-major without objectness: a transposed v8 export
        return "yolov8"
    return "yolov5"


def decode_yolo(pred: np.ndarray, frame: Frame, labels: Labels, layout: str, conf: float, iou: float,
                max_det: int, classes: int | None = None) -> DetectResult:
    if pred.ndim == 2:
        pred = pred[None]
    if pred.ndim != 3:
        raise TaskError(f"a YOLO output has 3 dimensions [1, 4+C, N] or [1, N, 4+C]; this one is {list(pred.shape)}")
    p = pred[0].astype(np.float32, copy=False)
    if layout == "nms-in-graph":
        return _decode_final(p, frame, labels, conf, max_det)
    # keep the model's own memory order: reducing over the class axis of a transposed view is 10x slower
    channel_major = p.shape[0] < p.shape[1] and (layout == "yolov8" or p.shape[0] < 512)
    if not channel_major:
        p = p.T  # a view: rows are now values, columns candidates
    first = 5 if layout == "yolov5" else 4
    if p.shape[0] <= first:
        raise TaskError(f"a {layout} output needs more than {first} values per candidate; it has {p.shape[0]}")
    # rows after the classes (mask coefficients, keypoints) are not classes: the declared class count bounds them
    count = classes if classes and first + classes <= p.shape[0] else p.shape[0] - first
    labels.check_count(count)
    if layout == "yolov5":
        check_scores(p[4], "the objectness column", layout)
        p = p[:, p[4] >= conf]  # objectness first: most candidates end here
        check_scores(p[first:first + count], "the class columns", layout)
        cls = p[first:first + count] * p[4]
    else:
        cls = p[first:first + count]
    score = cls.max(axis=0) if channel_major else np.ascontiguousarray(cls.T).max(axis=1)
    if layout != "yolov5":
        check_scores(score, "the class scores", layout)  # the best class of every candidate: one pass
    live = np.flatnonzero(score >= conf)
    if len(live) > MAX_NMS_CANDIDATES:
        live = live[np.argpartition(-score[live], MAX_NMS_CANDIDATES)[:MAX_NMS_CANDIDATES]]
    class_id = cls[:, live].argmax(axis=0)
    score = score[live]
    xyxy = _to_input_pixels(xywh_to_xyxy(np.ascontiguousarray(p[:4, live].T)), frame)
    keep = nms(xyxy, score, class_id, iou, max_det)
    check_boxes(xyxy[keep], frame.input_width, frame.input_height, layout)
    return _result(frame.to_image(xyxy[keep]), score[keep], class_id[keep], labels, frame, layout)


def _decode_final(p: np.ndarray, frame: Frame, labels: Labels, conf: float, max_det: int) -> DetectResult:
    if p.shape[1] == 7:  # batch index first
        p = p[:, 1:]
    check_scores(p[:, 4], "the score column", "nms-in-graph")
    p = p[p[:, 4] >= conf]
    p = p[np.argsort(-p[:, 4], kind="stable")[:max_det]]
    xyxy = _to_input_pixels(p[:, :4], frame)
    check_boxes(xyxy, frame.input_width, frame.input_height, "nms-in-graph")
    return _result(frame.to_image(xyxy), p[:, 4], p[:, 5].astype(np.int64), labels, frame, "nms-in-graph")


def _to_input_pixels(xyxy: np.ndarray, frame: Frame) -> np.ndarray:
    """Some TFLite exports give normalized boxes: coordinates that all fit in 0..1.5 are scaled to the input."""
    if len(xyxy) and float(np.abs(xyxy).max()) <= 1.5 and frame.input_width > 4:
        xyxy = xyxy * np.array([frame.input_width, frame.input_height] * 2, np.float32)
    return xyxy


def _result(xyxy, scores, classes, labels: Labels, frame: Frame, decoder: str) -> DetectResult:
    boxes = [Box(xyxy_of(b), float(s), int(c), labels.name(c))
             for b, s, c in zip(xyxy, scores, classes, strict=True)]
    return DetectResult("detect", frame, boxes=boxes, decoder=decoder)


SSD_SCALES = (10.0, 10.0, 5.0, 5.0)  # y, x, h, w: TensorFlow Object Detection's box coder


def load_anchors(anchors) -> np.ndarray:
    """Anchors (N x 4: y_center, x_center, height, width, normalized) from an array, a .npy or a .csv/.txt file."""
    if isinstance(anchors, (str, bytes)) or hasattr(anchors, "__fspath__"):
        from pathlib import Path

        from ..errors import InputError

        path = Path(anchors)
        try:
            anchors = np.load(path) if path.suffix == ".npy" else np.loadtxt(path, delimiter=",", ndmin=2)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read anchors {path}: {exc}",
                             hint="give an N x 4 array (y_center, x_center, height, width) as .npy or .csv") from exc
    anchors = np.asarray(anchors, np.float32)
    if anchors.ndim != 2 or anchors.shape[1] != 4:
        raise TaskError(f"anchors must be N x 4 (y_center, x_center, height, width); these are {list(anchors.shape)}")
    return anchors


def raw_ssd_outputs(shapes: list[tuple], anchors: int) -> tuple[int, int] | None:
    """(box encodings, class scores) output indices: [1, N, 4] and [1, N, C] with N the anchors' count."""
    boxes = next((i for i, s in enumerate(shapes) if len(s) in (3, 4) and s[-1] == 4 and s[1] == anchors), None)
    scores = next((i for i, s in enumerate(shapes) if i != boxes and len(s) == 3 and s[1] == anchors), None)
    return None if boxes is None or scores is None else (boxes, scores)


def decode_ssd_anchors(encodings: np.ndarray, logits: np.ndarray, anchors: np.ndarray, frame: Frame,
                       labels: Labels, conf: float, iou: float, max_det: int, background: bool = True) -> DetectResult:
    """SSD outputs before TFLite_Detection_PostProcess: box encodings against anchors (TensorFlow's box coder)
    and class scores with the background in column 0 (``background``); sigmoid when they are logits."""
    enc = encodings.reshape(-1, 4).astype(np.float32)
    scores = logits.reshape(enc.shape[0], -1).astype(np.float32)
    if scores.min() < 0 or scores.max() > 1:
        scores = (1 / (1 + np.exp(-scores))).astype(np.float32, copy=False)  # float32 in, float32 out
    if background:
        scores = scores[:, 1:]
    labels.check_count(scores.shape[1])
    ya, xa, ha, wa = anchors.T
    sy, sx, sh, sw = SSD_SCALES
    yc, xc = enc[:, 0] / sy * ha + ya, enc[:, 1] / sx * wa + xa
    h, w = np.exp(enc[:, 2] / sh) * ha, np.exp(enc[:, 3] / sw) * wa
    class_id = scores.argmax(axis=1)
    score = scores[np.arange(len(scores)), class_id]
    live = np.flatnonzero(score >= conf)
    xyxy = np.stack([(xc - w / 2) * frame.input_width, (yc - h / 2) * frame.input_height,
                     (xc + w / 2) * frame.input_width, (yc + h / 2) * frame.input_height], axis=1)[live]
    keep = nms(xyxy, score[live], class_id[live], iou, max_det)
    return _result(frame.to_image(xyxy[keep]), score[live][keep], class_id[live][keep], labels, frame, "ssd-anchors")
