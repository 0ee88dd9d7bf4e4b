"""MediaPipe-style SSD detectors (BlazeFace, palm, BlazePose detector): regressors [1, N, 4 + 2K] and scores
[1, N, C] against anchors generated from SSD anchor options (anchors.py), decoded as MediaPipe's
TensorsToDetectionsCalculator does (box centre and keypoints as offsets from the anchor centre scaled by the
input size, sigmoid scores with clipping), then weighted (MediaPipe's default) or plain NMS. Keypoints come back
with each box."""

from __future__ import annotations

import numpy as np

from .anchors import DecodeOptions
from .errors import TaskError
from ..modelfiles.labels import Labels
from .nms import iou_matrix, nms
from .preprocess import Frame
from .results import Box, DetectResult, Keypoint, xyxy_of


def outputs(shapes: list[tuple], anchors: int) -> tuple[int, int] | None:
    """(regressors, scores) output indices: [1, N, 4 + 2K] and [1, N, C] (C small) with N the anchor count.
    When both are [1, N, 4] wide... the scores are the narrower one."""
    three = [(i, s) for i, s in enumerate(shapes) if len(s) == 3 and s[1] == anchors and s[2]]
    if len(three) < 2:
        return None
    three.sort(key=lambda t: -t[1][2])
    (boxes, bs), (scores, ss) = three[0], three[-1]
    if bs[2] < 4 or ss[2] >= bs[2]:
        return None
    return boxes, scores


def decode(regressors: np.ndarray, logits: np.ndarray, anchors: np.ndarray, o: DecodeOptions, frame: Frame,
           labels: Labels, conf: float, max_det: int, label: str = "object") -> DetectResult:
    raw = regressors.reshape(len(anchors), -1).astype(np.float32)
    need = max(o.box_coord_offset + 4, o.keypoint_coord_offset + o.num_keypoints * o.num_values_per_keypoint
               if o.num_keypoints else 0)
    if raw.shape[1] < need:
        raise TaskError(f"the regressors hold {raw.shape[1]} values per anchor; the decode options need {need} "
                        f"(4 box values + {o.num_keypoints} keypoints x {o.num_values_per_keypoint})",
                        hint="set num_keypoints in TaskOptions(decoder={'ssd': {...}}) to match the model")
    scores = logits.reshape(len(anchors), -1).astype(np.float32)
    if o.sigmoid_score:
        if o.score_clipping_thresh:
            scores = np.clip(scores, -o.score_clipping_thresh, o.score_clipping_thresh)
        scores = (1 / (1 + np.exp(-scores.astype(np.float64)))).astype(np.float32)
    class_id = scores.argmax(axis=1)
    score = scores[np.arange(len(scores)), class_id]
    ya, xa, ha, wa = anchors.T
    xs, ys = o.x_scale or frame.input_width, o.y_scale or frame.input_height
    ws, hs = o.w_scale or frame.input_width, o.h_scale or frame.input_height
    b = raw[:, o.box_coord_offset:o.box_coord_offset + 4]
    dx, dy, dw, dh = (b.T if o.reverse_output_order else b[:, [1, 0, 3, 2]].T)
    xc, yc = dx / xs * wa + xa, dy / ys * ha + ya
    if o.apply_exponential_on_box_size:
        w, h = np.exp(dw / ws) * wa, np.exp(dh / hs) * ha
    else:
        w, h = dw / ws * wa, dh / hs * ha
    boxes = np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=1)  # normalized xyxy
    k = o.num_keypoints
    points = np.zeros((len(anchors), k, 2), np.float32)
    if k:
        start = o.keypoint_coord_offset
        kp = raw[:, start:start + k * o.num_values_per_keypoint].reshape(-1, k, o.num_values_per_keypoint)
        px, py = (kp[..., 0], kp[..., 1]) if o.reverse_output_order else (kp[..., 1], kp[..., 0])
        points[..., 0] = px / xs * wa[:, None] + xa[:, None]
        points[..., 1] = py / ys * ha[:, None] + ya[:, None]
    threshold = max(conf, 0.0)
    live = np.flatnonzero((score >= threshold) & (w > 0) & (h > 0))  # MediaPipe drops boxes without area
    boxes, score, class_id, points = boxes[live], score[live], class_id[live], points[live]
    if o.nms == "weighted":
        boxes, score, class_id, points = weighted_nms(boxes, score, class_id, points,
                                                      o.min_suppression_threshold, max_det)
    else:
        keep = nms(boxes, score, class_id, o.min_suppression_threshold, max_det)
        boxes, score, class_id, points = boxes[keep], score[keep], class_id[keep], points[keep]
    scale = np.array([frame.input_width, frame.input_height], np.float32)
    xyxy = frame.to_image(boxes * np.tile(scale, 2))
    names = list(o.keypoint_names) + [f"keypoint_{i}" for i in range(len(o.keypoint_names), k)]
    found = []
    for box, s, c, pts in zip(xyxy, score, class_id, points, strict=True):
        image_points = frame.points_to_image(pts * scale) if k else np.empty((0, 2), np.float32)
        keypoints = [Keypoint(n, float(x), float(y), float(s)) for n, (x, y) in zip(names, image_points, strict=True)]
        name = labels.name(int(c)) if len(labels) else label
        found.append(Box(xyxy_of(box), float(s), int(c), name, keypoints))
    return DetectResult("detect", frame, boxes=found, decoder="ssd-mediapipe")


def weighted_nms(boxes, scores, classes, points, threshold: float, max_det: int):
    """MediaPipe's WEIGHTED non-maximum suppression: the best remaining box and every box overlapping it by more
    than ``threshold`` (itself included) are merged into their score-weighted mean (box and keypoints); the
    merged detection keeps the best score. Per class, like the calculator (which sees one class at a time)."""
    order = np.argsort(-scores, kind="stable")
    kept_boxes: list[np.ndarray] = []
    kept_scores: list[float] = []
    kept_classes: list[int] = []
    kept_points: list[np.ndarray] = []
    remaining = order
    while remaining.size and len(kept_boxes) < max_det:
        top = remaining[0]
        overlap = iou_matrix(boxes[top][None], boxes[remaining])[0]
        group = (overlap > threshold) & (classes[remaining] == classes[top])
        group[0] = True
        members = remaining[group]
        weights = scores[members][:, None]
        total = float(weights.sum())
        kept_boxes.append((boxes[members] * weights).sum(axis=0) / total)
        kept_points.append((points[members] * weights[:, :, None]).sum(axis=0) / total)
        kept_scores.append(scores[top])
        kept_classes.append(classes[top])
        remaining = remaining[~group]
    k = points.shape[1] if points.ndim == 3 else 0
    return (np.asarray(kept_boxes, np.float32).reshape(-1, 4), np.asarray(kept_scores, np.float32),
            np.asarray(kept_classes, np.int64), np.asarray(kept_points, np.float32).reshape(-1, k, 2))
