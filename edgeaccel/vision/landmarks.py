"""Landmark models (MediaPipe hand, face mesh and BlazePose landmarks, and exports of the same layouts): one
flat output of K points x V values (x, y, z in the input's pixels, BlazePose adding visibility and presence
logits) beside a presence flag, decoded as keypoints with a named layout. A flat output of another length is
not claimed (it may be class scores), and values that look like probabilities are refused."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .errors import LayoutRefused
from .preprocess import Frame
from .results import Keypoint, Pose, PoseResult

HAND_POINTS = ("wrist", "thumb_cmc", "thumb_mcp", "thumb_ip", "thumb_tip", "index_finger_mcp", "index_finger_pip",
               "index_finger_dip", "index_finger_tip", "middle_finger_mcp", "middle_finger_pip", "middle_finger_dip",
               "middle_finger_tip", "ring_finger_mcp", "ring_finger_pip", "ring_finger_dip", "ring_finger_tip",
               "pinky_mcp", "pinky_pip", "pinky_dip", "pinky_tip")
HAND_EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (5, 9), (9, 10), (10, 11), (11, 12),
              (9, 13), (13, 14), (14, 15), (15, 16), (13, 17), (0, 17), (17, 18), (18, 19), (19, 20)]
BLAZEPOSE_POINTS = ("nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner", "right_eye",
                    "right_eye_outer", "left_ear", "right_ear", "mouth_left", "mouth_right", "left_shoulder",
                    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_pinky",
                    "right_pinky", "left_index", "right_index", "left_thumb", "right_thumb", "left_hip", "right_hip",
                    "left_knee", "right_knee", "left_ankle", "right_ankle", "left_heel", "right_heel",
                    "left_foot_index", "right_foot_index")
BLAZEPOSE_EDGES = [(0, 1), (1, 2), (2, 3), (3, 7), (0, 4), (4, 5), (5, 6), (6, 8), (9, 10), (11, 12), (11, 13),
                   (13, 15), (15, 17), (15, 19), (15, 21), (17, 19), (12, 14), (14, 16), (16, 18), (16, 20),
                   (16, 22), (18, 20), (11, 23), (12, 24), (23, 24), (23, 25), (24, 26), (25, 27), (26, 28),
                   (27, 29), (28, 30), (29, 31), (30, 32), (27, 31), (28, 32)]


@dataclass(frozen=True)
class Layout:
    name: str
    points: int
    values: int  # per point: x, y, z (+ visibility, presence logits)
    names: tuple[str, ...] = ()
    edges: tuple = ()


LAYOUTS = {lay.points * lay.values: lay for lay in (
    Layout("hand-21", 21, 3, HAND_POINTS, tuple(HAND_EDGES)),
    Layout("face-mesh-468", 468, 3),
    Layout("face-mesh-478", 478, 3),  # with the iris refinement
    Layout("blazepose-39", 39, 5, BLAZEPOSE_POINTS + ("body_center", "body_top", "aux_0", "aux_1", "aux_2", "aux_3"),
           tuple(BLAZEPOSE_EDGES)),
    Layout("blazepose-33", 33, 5, BLAZEPOSE_POINTS, tuple(BLAZEPOSE_EDGES)),
    Layout("eye-71", 71, 3),  # MediaPipe's iris model: eye contour and brow ...
    Layout("iris-5", 5, 3),  # ... beside the iris centre and four points on its edge
)}

LAYOUTS_BY_NAME = {lay.name: lay for lay in LAYOUTS.values()}


def _flat(shape: tuple) -> int | None:
    dims = [d for d in shape if d != 1]
    return dims[0] if len(dims) == 1 and dims[0] else None


def find(shapes: list[tuple], explicit: bool) -> tuple[int, Layout] | None:
    """(output index, layout) of the first flat output whose length is a known landmark layout. Recognition
    (not ``explicit``) also wants evidence beside it, as landmark models have: a presence flag (a one-value
    output) or a second landmark output (the iris model's eye and iris); a lone flat output of 63 values could
    be class scores."""
    flag = any(all(d == 1 for d in s) and len(s) >= 1 for s in shapes)
    found = [(i, LAYOUTS[n]) for i, s in enumerate(shapes) if (n := _flat(s)) is not None and n in LAYOUTS]
    if found and (explicit or flag or len(found) >= 2):
        return found[0]
    return None


def decode(arrays: list[np.ndarray], which: int, layout: Layout, frame: Frame, min_presence: float) -> PoseResult:
    same = [i for i, a in enumerate(arrays) if a.size == layout.points * layout.values]
    # several outputs of this size (a hand model gives image and world coordinates): the one spread over pixels
    which = max(same, key=lambda i: float(np.ptp(arrays[i].reshape(layout.points, -1)[:, :2])), default=which)
    values = arrays[which].reshape(layout.points, layout.values).astype(np.float32)
    xy = values[:, :2]
    if not np.all(np.isfinite(xy)):
        raise LayoutRefused(f"the {layout.name} landmarks hold NaN or infinite values")
    probabilities = arrays[which].min() >= 0 and arrays[which].max() <= 1 and abs(float(arrays[which].sum()) - 1) < 0.05
    if probabilities:
        raise LayoutRefused(f"output {which} has the length of {layout.name} landmarks ({layout.points} x "
                            f"{layout.values}) but sums to 1 in 0..1: class probabilities, not points",
                            hint="load it with task='classify'")
    span = float(np.abs(xy).max())
    if span <= 1.5:  # normalized coordinates
        xy = xy * np.array([frame.input_width, frame.input_height], np.float32)
    inside = ((xy[:, 0] > -0.5 * frame.input_width) & (xy[:, 0] < 1.5 * frame.input_width)
              & (xy[:, 1] > -0.5 * frame.input_height) & (xy[:, 1] < 1.5 * frame.input_height))
    presence = _presence(arrays, which)
    if inside.mean() < 0.5 and (presence is None or presence >= min_presence):
        raise LayoutRefused(f"output {which} has the length of {layout.name} landmarks, but most of its points lie "
                            f"outside the {frame.input_width}x{frame.input_height} input: not landmarks in "
                            "pixels", hint="pass the model's task= (docs/vision.md lists the layouts)")
    if layout.values >= 4:
        scores = 1 / (1 + np.exp(-values[:, 3].astype(np.float64)))  # BlazePose visibility logits
    else:
        scores = np.full(layout.points, 1.0 if presence is None else presence)
    image_xy = frame.points_to_image(xy)
    # plain floats first: a cascade decodes 468 points a face on every frame, and numpy scalars cost 3x more
    points = [Keypoint(n, x, y, s) for n, (x, y), s in zip(_names(layout), image_xy.tolist(), scores.tolist(), strict=True)]
    score = presence if presence is not None else float(np.mean(scores))
    poses = [Pose(points, float(score))] if presence is None or presence >= min_presence else []
    return PoseResult("pose", frame, poses=poses, edges=list(layout.edges), layout=layout.name)


def _names(layout: Layout) -> tuple[str, ...]:
    """Every point's name: the layout's, then "<family>_<index>" for the rest."""
    return _named(layout.name, tuple(layout.names), layout.points)


@functools.lru_cache(maxsize=64)
def _named(name: str, names: tuple[str, ...], points: int) -> tuple[str, ...]:
    family = name.split("-")[0]
    return names + tuple(f"{family}_{i}" for i in range(len(names), points))


def _presence(arrays: list[np.ndarray], which: int) -> float | None:
    """The first one-value output (the model's presence flag): a probability, or a logit put through a sigmoid."""
    for i, a in enumerate(arrays):
        if i != which and a.size == 1:
            v = float(a.reshape(-1)[0])
            return v if 0 <= v <= 1 else float(1 / (1 + np.exp(-v)))
    return None
