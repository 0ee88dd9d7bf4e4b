"""Ultralytics YOLO v5/v8/v11 segment and pose heads. Segment: candidates [1, 4+C+M, N] (box, class scores, M
mask coefficients) beside prototypes [1, M, h, w] (or [1, h, w, M]); each kept instance's mask is
sigmoid(coefficients x prototypes), cropped to its box, at or above 0.5. Pose: [1, 4+1+3K, N] (box, the person
score, K keypoints x, y, visibility); boxes and keypoints in the input's pixels, as Ultralytics exports them."""

from __future__ import annotations

import numpy as np

from .detect import _to_input_pixels
from .errors import TaskError
from ..modelfiles.labels import Labels
from .nms import nms, xywh_to_xyxy
from .plausible import check_boxes, check_scores
from .pose import COCO_EDGES, _names
from .preprocess import Frame
from .results import Box, Keypoint, Pose, PoseResult, SegmentResult, xyxy_of
from .segment import _result as segment_result
from .segment import pixel_map

MASK_THRESHOLD = 0.5


def _channel_major(pred: np.ndarray) -> np.ndarray:
    p = pred.reshape(pred.shape[-2], pred.shape[-1]).astype(np.float32, copy=False)
    return p if p.shape[0] < p.shape[1] else p.T


def _kept(p: np.ndarray, first: int, count: int, frame: Frame, conf: float, iou: float, max_det: int, decoder: str,
          agnostic: bool = False):
    cls = p[first:first + count]
    score = cls.max(axis=0)
    check_scores(score, "the class scores", decoder)
    live = np.flatnonzero(score >= conf)
    class_id = cls[:, live].argmax(axis=0)
    box = np.ascontiguousarray(p[:4, live].T)
    normalized = len(box) and float(np.abs(box).max()) <= 1.5
    xyxy = _to_input_pixels(xywh_to_xyxy(box), frame)
    keep = nms(xyxy, score[live], None if agnostic else class_id, iou, max_det)
    check_boxes(xyxy[keep], frame.input_width, frame.input_height, decoder)
    return live[keep], xyxy[keep], score[live][keep], class_id[keep], normalized


def _nhwc(shape: tuple, aspect: float) -> bool:
    """Prototypes [M, h, w] or [h, w, M]: the two spatial dimensions are the pair in the input's aspect."""
    a, b, c = shape
    if b == c:
        return False
    if a == b:
        return True
    return abs(a / b - aspect) < abs(b / c - aspect)


def decode_segment(pred: np.ndarray, protos: np.ndarray, frame: Frame, labels: Labels, conf: float, iou: float,
                   max_det: int, classes: int | None = None, threshold: float = MASK_THRESHOLD) -> SegmentResult:
    pr = protos.reshape(protos.shape[-3], protos.shape[-2], protos.shape[-1]).astype(np.float32)
    if _nhwc(pr.shape, frame.input_height / frame.input_width):  # TFLite exports
        pr = np.moveaxis(pr, -1, 0)
    m, ph, pw = pr.shape
    p = _channel_major(pred)
    count = classes if classes and 4 + classes + m <= p.shape[0] else p.shape[0] - 4 - m
    if count < 1:
        raise TaskError(f"the candidates hold {p.shape[0]} values; a YOLO -seg head needs 4 + classes + {m} mask "
                        f"coefficients (the prototypes' channels)")
    labels.check_count(count)
    index, xyxy, score, class_id, _ = _kept(p, 4, count, frame, conf, iou, max_det, "yolo-seg")
    coefficients = p[4 + count:4 + count + m, index].T  # K x M
    image_boxes = frame.to_image(xyxy)
    ids = paint_instances(coefficients, pr, image_boxes, score, class_id, frame, threshold)
    instances = [Box(xyxy_of(b), float(s), int(c), labels.name(c))
                 for b, s, c in zip(image_boxes, score, class_id, strict=True)]
    return segment_result(ids, frame, labels, instances=instances, background=-1)


def paint_instances(coefficients: np.ndarray, protos: np.ndarray, image_boxes: np.ndarray, score: np.ndarray,
                    class_id: np.ndarray, frame: Frame, threshold: float, chunk: int = 64) -> np.ndarray:
    """The image's ids: at each pixel the class of the instance on top, -1 where none. Each instance's mask
    (sigmoid(coefficients x prototypes) at or above ``threshold``, nearest-neighbour onto the image's pixels) is
    painted inside its box, the best last, on top.

    Only the pixels of each box are computed, and the masks a chunk of instances at a time: done over the whole
    image per instance, a request for many (max_det=10000, a low conf and iou=1 keep thousands) took 105 s and
    4.1 GB for 8,400 instances on a 1080p image, against 4.5 s and 25 MB this way (memory: the image's ids plus
    one chunk; time follows the boxes' area)."""
    m, ph, pw = protos.shape
    rows_of, cols_of = pixel_map(frame, ph, pw)
    centres_y, centres_x = np.arange(frame.height) + 0.5, np.arange(frame.width) + 0.5
    flat = protos.reshape(m, -1)
    ids = np.full((frame.height, frame.width), -1, np.int32)
    order = np.argsort(score, kind="stable")
    for start in range(0, len(order), chunk):
        part = order[start:start + chunk]
        logits = (coefficients[part] @ flat).reshape(-1, ph, pw)
        for k, logit in zip(part, logits, strict=True):
            x1, y1, x2, y2 = image_boxes[k]
            if not np.isfinite(image_boxes[k]).all():  # a NaN edge holds no pixel (searchsorted puts NaN last)
                continue
            # the pixels whose centres lie in the box
            r0, r1 = np.searchsorted(centres_y, y1, "left"), np.searchsorted(centres_y, y2, "right")
            c0, c1 = np.searchsorted(centres_x, x1, "left"), np.searchsorted(centres_x, x2, "right")
            if r0 >= r1 or c0 >= c1:
                continue
            window = logit[rows_of[r0:r1, None], cols_of[None, c0:c1]]
            ids[r0:r1, c0:c1][1 / (1 + np.exp(-window.astype(np.float64))) >= threshold] = class_id[k]
    return ids


def decode_pose(pred: np.ndarray, frame: Frame, conf: float, iou: float, max_det: int,
                kpt_shape: tuple[int, int] | None = None) -> PoseResult:
    p = _channel_major(pred)
    values = p.shape[0] - 5
    k, v = kpt_shape if kpt_shape else (values // 3, 3) if values % 3 == 0 else (values // 2, 2)
    if k * v != values or k < 1:
        raise TaskError(f"a YOLO pose head holds 4 box values, a score and K keypoints x {v}; {p.shape[0]} values "
                        f"do not divide so", hint="give the keypoint shape: the model's metadata kpt_shape")
    index, xyxy, score, _, normalized = _kept(p, 4, 1, frame, conf, iou, max_det, "yolo-pose", agnostic=True)
    points = p[5:, index].T.reshape(-1, k, v)
    image_boxes = frame.to_image(xyxy)
    scale = np.array([frame.input_width, frame.input_height], np.float32) if normalized else 1.0
    names = _names(k)
    poses = []
    for box, s, kp in zip(image_boxes, score, points, strict=True):
        xy = frame.points_to_image(kp[:, :2] * scale)
        vis = kp[:, 2] if v == 3 else np.full(k, s)
        if v == 3 and (vis.min() < 0 or vis.max() > 1):
            vis = 1 / (1 + np.exp(-vis.astype(np.float64)))
        keypoints = [Keypoint(n, float(x), float(y), float(c)) for n, (x, y), c in zip(names, xy, vis, strict=True)]
        poses.append(Pose(keypoints, float(s), xyxy_of(box)))
    return PoseResult("pose", frame, poses=poses, edges=COCO_EDGES if k == 17 else [],
                      layout="coco-17" if k == 17 else f"keypoints-{k}")
