"""Crop geometry: where a later stage looks in the frame, and how its answers come back.

A crop is a (possibly rotated) rectangle of the original frame: centre, width and height in the frame's pixels
and an angle (radians, image coordinates: y down, positive turns the crop's x axis towards +y). It is sampled
into an image of ``out_w`` x ``out_h`` pixels by one affine map, and the same map takes the later stage's points
and boxes (in that crop image's pixels) back to the frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class CropOptions:
    """How a box of the stage before becomes a crop.

    scale: the crop's side over the box's (1.0: the box itself; MediaPipe's face mesh wants 1.5, hands 2.6).
    square: make the crop square (the longer side), as landmark models expect; False keeps the box's aspect.
    shift: (x, y) moves the crop's centre by these fractions of its size, along its own axes (hands: (0, -0.5)).
    rotate: (i, j, degrees): turn the crop so that the vector from keypoint i to keypoint j of the box points
        at ``degrees`` (counter-clockwise from the right, as MediaPipe states it: face 0 from the right eye to the
        left eye, palm 90 from the wrist to the middle finger); None: no rotation.
    keypoints: indices of the box's keypoints whose bounding box is the region instead of the box itself.
    """

    scale: float = 1.0
    square: bool = True
    shift: tuple[float, float] = (0.0, 0.0)
    rotate: tuple[int, int, float] | None = None
    keypoints: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.scale, (int, float)) and 0 < self.scale <= 10):
            raise ConfigError(f"crop scale must be a number in (0, 10], not {self.scale!r}",
                              hint="1.0 crops the box itself; 1.5 adds a quarter of its size on each side")
        if len(self.shift) != 2:
            raise ConfigError(f"crop shift is (x, y) fractions of the crop, not {self.shift!r}")
        if self.rotate is not None and (len(self.rotate) != 3 or int(self.rotate[0]) == int(self.rotate[1])):
            raise ConfigError(f"crop rotate is [keypoint i, keypoint j, degrees] with i != j, not {self.rotate!r}",
                              hint="MediaPipe face detections: [0, 1, 0]; palm detections: [0, 2, 90]")

    @classmethod
    def from_dict(cls, data: dict | None, where: str) -> CropOptions:
        data = dict(data or {})
        unknown = set(data) - {"scale", "square", "shift", "rotate", "keypoints"}
        if unknown:
            raise ConfigError(f"{where}: unknown crop keys {sorted(unknown)}",
                              hint="known: scale, square, shift, rotate, keypoints")
        for key in ("shift", "rotate", "keypoints"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)


@dataclass(frozen=True)
class Crop:
    cx: float
    cy: float
    width: float  # in the frame's pixels
    height: float
    angle: float  # radians
    out_w: int  # the crop image's size
    out_h: int

    def matrix(self) -> np.ndarray:
        """2 x 3 affine map: crop-image pixel (x, y, 1) -> frame pixel."""
        c, s = math.cos(self.angle), math.sin(self.angle)
        sx, sy = self.width / self.out_w, self.height / self.out_h
        a = np.array([[c * sx, -s * sy], [s * sx, c * sy]])
        offset = np.array([self.cx, self.cy]) - a @ np.array([self.out_w / 2, self.out_h / 2])
        return np.hstack([a, offset[:, None]])

    def points_to_frame(self, xy: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        m = self.matrix()
        return xy @ m[:, :2].T + m[:, 2]

    def box_to_frame(self, xyxy) -> tuple[float, float, float, float]:
        """An axis-aligned box in the crop -> the axis-aligned box around its four corners in the frame."""
        x1, y1, x2, y2 = xyxy
        corners = self.points_to_frame(np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]]))
        return (float(corners[:, 0].min()), float(corners[:, 1].min()),
                float(corners[:, 0].max()), float(corners[:, 1].max()))

    def corners(self) -> list[list[float]]:
        """The crop's four corners in the frame (for drawing and the JSON)."""
        pts = self.points_to_frame(np.array([[0, 0], [self.out_w, 0], [self.out_w, self.out_h], [0, self.out_h]]))
        return [[round(float(x), 2), round(float(y), 2)] for x, y in pts]

    def to_dict(self) -> dict:
        return {"center": [round(self.cx, 2), round(self.cy, 2)], "size": [round(self.width, 2), round(self.height, 2)],
                "angle_deg": round(math.degrees(self.angle), 3), "corners": self.corners()}


def crop_for(box, options: CropOptions, out_size: tuple[int, int] | None) -> Crop | None:
    """The crop for ``box`` (an ``edgeaccel.vision.Box``), sampled at ``out_size`` (w, h; None: the crop's own
    size in pixels). None when the region is empty (a degenerate box) or the keypoints it needs are missing."""
    if options.keypoints:
        if max(options.keypoints) >= len(box.keypoints):
            return None
        pts = np.array([[box.keypoints[i].x, box.keypoints[i].y] for i in options.keypoints])
        x1, y1 = pts.min(axis=0)
        x2, y2 = pts.max(axis=0)
    else:
        x1, y1, x2, y2 = box.xyxy
    w, h = float(x2 - x1), float(y2 - y1)
    if not (w > 0 and h > 0) and not options.keypoints:
        return None
    angle = 0.0
    if options.rotate is not None:
        i, j, degrees = int(options.rotate[0]), int(options.rotate[1]), float(options.rotate[2])
        if max(i, j) >= len(box.keypoints):
            return None
        a, b = box.keypoints[i], box.keypoints[j]
        # the vector's angle in image coordinates (y down) minus where it should point (stated y up)
        angle = _normalized(math.atan2(b.y - a.y, b.x - a.x) + math.radians(degrees))
    if options.square:
        w = h = max(w, h)
    w, h = w * options.scale, h * options.scale
    if not (w >= 1 and h >= 1):
        return None
    c, s = math.cos(angle), math.sin(angle)
    dx, dy = options.shift[0] * w, options.shift[1] * h
    cx = (x1 + x2) / 2 + c * dx - s * dy
    cy = (y1 + y2) / 2 + s * dx + c * dy
    if out_size is None:
        out_size = (max(1, round(w)), max(1, round(h)))
    return Crop(float(cx), float(cy), float(w), float(h), angle, int(out_size[0]), int(out_size[1]))


def sample(image: np.ndarray, crop: Crop) -> np.ndarray:
    """The crop's pixels: (out_h, out_w, 3) uint8, bilinear; outside the frame is black (as MediaPipe pads)."""
    from PIL import Image

    m = crop.matrix()
    coefficients = (m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2])
    # PIL's AFFINE maps each output pixel's centre-less coordinate to the input: the crop -> frame map itself
    out = Image.fromarray(image).transform((crop.out_w, crop.out_h), Image.Transform.AFFINE, coefficients,
                                           resample=Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))
    return np.asarray(out)


def _normalized(angle: float) -> float:
    return angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
