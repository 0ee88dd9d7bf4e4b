"""Pose: MoveNet-style keypoints ([1, 1, K, 3] or [1, K, 3]: y, x, score normalized to the input; multi-pose
[1, P, 56]) and heatmap + offset layouts (PoseNet: [1, h, w, K] heatmaps, [1, h, w, 2K] offsets), with the
COCO skeleton for 17 keypoints."""

from __future__ import annotations

import numpy as np

from .errors import TaskError
from .preprocess import Frame
from .results import Keypoint, Pose, PoseResult

COCO_KEYPOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
                  "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
                  "right_knee", "left_ankle", "right_ankle")
COCO_EDGES = [(0, 1), (0, 2), (1, 3), (2, 4), (0, 5), (0, 6), (5, 7), (7, 9), (6, 8), (8, 10), (5, 6), (5, 11),
              (6, 12), (11, 12), (11, 13), (13, 15), (12, 14), (14, 16)]


def layout(shapes: list[tuple]) -> str | None:
    """'keypoints', 'multipose', 'heatmaps' or None, from the output shapes."""
    first = shapes[0] if shapes else ()
    if len(first) in (3, 4) and first[-1] == 3 and all(d == 1 for d in first[:-2]) and (first[-2] or 0) >= 2:
        return "keypoints"
    if len(first) == 3 and first[-1] == 56 and (first[1] or 0) <= 100:  # MoveNet multi-pose: [1, 6, 56]
        return "multipose"
    if len(shapes) >= 2 and len(shapes[0]) == 4 and len(shapes[1]) == 4 and shapes[0][-1] and shapes[1][-1] \
            and shapes[1][-1] == 2 * shapes[0][-1]:
        return "heatmaps"
    return None


def _names(k: int) -> list[str]:
    return list(COCO_KEYPOINTS) if k == 17 else [f"keypoint_{i}" for i in range(k)]


def _pose(yxs: np.ndarray, frame: Frame) -> Pose:
    """Rows of (y, x, score) normalized to the input -> a Pose in the original image's pixels."""
    xy = np.stack([yxs[:, 1] * frame.input_width, yxs[:, 0] * frame.input_height], axis=1)
    xy = frame.points_to_image(xy)
    names = _names(len(yxs))
    points = [Keypoint(n, float(x), float(y), float(s)) for n, (x, y), s in zip(names, xy, yxs[:, 2], strict=True)]
    return Pose(points, float(yxs[:, 2].mean()))


def decode(arrays: list[np.ndarray], frame: Frame, kind: str, min_pose_score: float = 0.2) -> PoseResult:
    if kind == "keypoints":
        poses = [_pose(arrays[0].reshape(-1, 3).astype(np.float32), frame)]
    elif kind == "multipose":
        poses = []
        for row in arrays[0].reshape(-1, 56).astype(np.float32):
            if row[55] >= min_pose_score:
                pose = _pose(row[:51].reshape(17, 3), frame)
                poses.append(Pose(pose.keypoints, float(row[55])))
    elif kind == "heatmaps":
        poses = [_from_heatmaps(arrays[0][0].astype(np.float32), arrays[1][0].astype(np.float32), frame)]
    elif kind == "heatmaps-only":
        return _heatmap_peaks(arrays[0][0].astype(np.float32), frame)
    else:
        raise TaskError(f"unknown pose layout {kind!r}")
    if kind == "keypoints":
        _check_normalized(arrays[0])
    k = len(poses[0].keypoints) if poses else 17
    return PoseResult("pose", frame, poses=poses, edges=COCO_EDGES if k == 17 else [],
                      layout="coco-17" if k == 17 else f"keypoints-{k}")


def _check_normalized(array: np.ndarray) -> None:
    """MoveNet's (y, x, score) are all in 0..1: other values are another layout (landmarks in pixels)."""
    low, high = float(np.min(array)), float(np.max(array))
    if low < -0.5 or high > 1.5:
        from .errors import LayoutRefused

        raise LayoutRefused(f"the keypoints [..., K, 3] range {low:.4g}..{high:.4g}: not MoveNet's (y, x, score) "
                            "normalized to the input", hint="a landmark model's points in pixels are read as "
                                                            "task='pose' from a flat output (docs/vision.md)")


def _heatmap_peaks(heat: np.ndarray, frame: Frame) -> PoseResult:
    """One keypoint per channel at its heatmap's peak (the cell's centre, no offsets to refine it)."""
    from .landmarks import LAYOUTS

    if heat.shape[0] < heat.shape[-1]:  # NCHW
        heat = np.moveaxis(heat, 0, -1)
    h, w, k = heat.shape
    flat = heat.reshape(h * w, k)
    best = flat.argmax(axis=0)
    score = flat[best, np.arange(k)]
    if score.min() < 0 or score.max() > 1:
        score = 1 / (1 + np.exp(-score.astype(np.float64)))
    xy = np.stack([(best % w + 0.5) * frame.input_width / w, (best // w + 0.5) * frame.input_height / h], axis=1)
    named = {lay.points: lay for lay in LAYOUTS.values() if lay.names}
    layout = named.get(k)
    names = list(layout.names)[:k] if layout else _names(k)
    points = [Keypoint(n, float(x), float(y), float(s)) for n, (x, y), s in zip(names, frame.points_to_image(xy),
                                                                                  score, strict=True)]
    edges = COCO_EDGES if k == 17 else list(layout.edges) if layout else []
    return PoseResult("pose", frame, poses=[Pose(points, float(score.mean()))], edges=edges,
                      layout=(layout.name if layout else f"keypoints-{k}") + " heatmaps")


def _from_heatmaps(heat: np.ndarray, offsets: np.ndarray, frame: Frame) -> Pose:
    h, w, k = heat.shape
    flat = heat.reshape(h * w, k)
    best = flat.argmax(axis=0)
    rows, cols = best // w, best % w
    score = flat[best, np.arange(k)]
    if score.min() < 0 or score.max() > 1:  # logits
        score = 1 / (1 + np.exp(-score))
    stride_y = (frame.input_height - 1) / max(h - 1, 1)
    stride_x = (frame.input_width - 1) / max(w - 1, 1)
    y = rows * stride_y + offsets[rows, cols, np.arange(k)]
    x = cols * stride_x + offsets[rows, cols, k + np.arange(k)]
    yxs = np.stack([y / frame.input_height, x / frame.input_width, score], axis=1)
    return _pose(yxs, frame)
