"""Scenes with known object paths, for checking a tracker and line counts against the truth.

Each object moves in a straight line at constant speed (pixels per second) and is detected on every frame
where it is in view, with box jitter and a score, except where it is hidden: behind an obstacle (a time span of
its own) or behind another object (a box it overlaps by more than ``hide_iou`` and that is nearer: lower in the
image). An object counts as in view (in the truth, and detected) while ``min_shown`` of its box is inside the
frame; its box is then cut at the frame's edges. Frames are sampled at ``fps`` with some dropped, so
timestamps are uneven as on a live source."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Mover:
    start: tuple[float, float]  # centre at t = 0
    velocity: tuple[float, float]  # pixels per second
    size: tuple[float, float]  # width, height
    class_id: int = 0
    hidden: tuple[float, float] | None = None  # seconds when an obstacle hides it

    def box(self, t: float) -> np.ndarray:
        cx, cy = self.start[0] + self.velocity[0] * t, self.start[1] + self.velocity[1] * t
        w, h = self.size
        return np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])


@dataclass
class SceneFrame:
    timestamp: float
    truth: dict  # object index -> box (x1, y1, x2, y2), every object in view (hidden ones too)
    detections: list  # (object index or -1 for a false one, box, score, class_id)


def scene(movers: list[Mover], size=(640, 480), seconds: float = 6.0, fps: float = 30.0, drop: float = 0.2,
          jitter: float = 1.5, hide_iou: float = 0.3, false_rate: float = 0.2, min_shown: float = 0.3,
          seed: int = 0) -> list[SceneFrame]:
    rng = np.random.default_rng(seed)
    width, height = size
    frames = []
    for k in range(int(seconds * fps)):
        if k and rng.random() < drop:
            continue  # a dropped frame: the next one comes later
        t = k / fps
        truth = {}
        for i, m in enumerate(movers):
            box = m.box(t)
            inside = np.clip(box, [0, 0, 0, 0], [width, height, width, height])
            shown = (inside[2] - inside[0]) * (inside[3] - inside[1]) / ((box[2] - box[0]) * (box[3] - box[1]))
            if shown >= min_shown:  # a detector does not see the sliver of an object coming in
                truth[i] = inside
        detections = []
        for i, box in truth.items():
            m = movers[i]
            if m.hidden and m.hidden[0] <= t < m.hidden[1]:
                continue
            covered = max((_iou(box, other) for j, other in truth.items() if j != i and other[3] > box[3]),
                          default=0.0)
            if covered > hide_iou:
                continue  # behind a nearer object
            # partly covered: the detector is less sure (ByteTrack's second association keeps it)
            score = float(rng.uniform(0.12, 0.24)) if covered > 0.1 else float(rng.uniform(0.5, 0.95))
            noisy = box + rng.normal(0, jitter, 4)
            detections.append((i, noisy, score, m.class_id))
        if rng.random() < false_rate:  # a one-frame false detection somewhere
            x, y = rng.uniform(0, width - 40), rng.uniform(0, height - 40)
            detections.append((-1, np.array([x, y, x + 30, y + 30]), float(rng.uniform(0.3, 0.5)), 0))
        frames.append(SceneFrame(t, truth, detections))
    return frames


def crowd(n: int, size=(640, 480), seconds: float = 6.0, seed: int = 0) -> list[Mover]:
    """``n`` objects crossing the frame in every direction (for load: 20 objects at once)."""
    rng = np.random.default_rng(seed)
    width, height = size
    movers = []
    for _ in range(n):
        start = (rng.uniform(0.1, 0.9) * width, rng.uniform(0.1, 0.9) * height)
        end = (rng.uniform(0.1, 0.9) * width, rng.uniform(0.1, 0.9) * height)
        velocity = ((end[0] - start[0]) / seconds, (end[1] - start[1]) / seconds)
        movers.append(Mover(start, velocity, (rng.uniform(20, 50), rng.uniform(20, 50)), int(rng.integers(0, 3))))
    return movers


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
