"""Resizing as Pillow's antialiased BILINEAR reduce does it, always edgeaccel's own (results do not depend on
whether Pillow is installed), and fitting an image to a model's input size: stretched, or letterboxed with the
``Frame`` that maps results back to the image's pixels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Antialiased bilinear resize of (H, W, C) uint8, the way reference pipelines do it: Pillow's
    ``Image.resize(BILINEAR)`` when Pillow is installed, else the same algorithm here (a triangle filter
    widened by the reduction factor, 22-bit fixed-point weights, horizontal pass then vertical, each rounded
    to uint8: bit-exact with Pillow up to 12; Pillow 13 sometimes runs the vertical pass first).
    Quantized models are sensitive to one-LSB differences (movenet keypoints moved by 0.025 with a
    float-only resize), so the reference pipeline is matched rather than approximated."""
    if image.shape[:2] == (height, width):
        return image
    try:
        from PIL import Image
    except ImportError:
        out = _horizontal(image, width) if image.shape[1] != width else image
        return np.ascontiguousarray(_vertical(out, height) if image.shape[0] != height else out)
    h, w, c = image.shape
    resized = Image.fromarray(image[..., 0] if c == 1 else image).resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(resized).reshape(height, width, c)


def _vertical(image: np.ndarray, height: int) -> np.ndarray:
    h, w, c = image.shape
    return _pass(image.reshape(h, w * c), _weights(h, height)).reshape(height, w, c)


def _horizontal(image: np.ndarray, width: int) -> np.ndarray:
    h, w, c = image.shape
    out = _pass(image.transpose(1, 0, 2).reshape(w, h * c), _weights(w, width))
    return out.reshape(width, h, c).transpose(1, 0, 2)


_PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed-point precision for 8-bit images


def _pass(data: np.ndarray, taps: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """One separable pass along axis 0: each output row sums a few input rows with integer weights, in
    int64 like Pillow (exact), a tap at a time so that memory stays at one output-sized accumulator."""
    index, weight = taps
    acc = np.full((index.shape[0], data.shape[1]), 1 << (_PRECISION_BITS - 1), np.int64)
    for k in range(index.shape[1]):
        acc += weight[:, k, None] * data[index[:, k]]
    return np.clip(acc >> _PRECISION_BITS, 0, 255).astype(np.uint8)


def _weights(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(input index, fixed-point weight) per output pixel and tap, Pillow's triangle filter and window."""
    scale = size_in / size_out
    support = max(scale, 1.0)
    centers = (np.arange(size_out) + 0.5) * scale
    lo = np.maximum((centers - support + 0.5).astype(np.int64), 0)  # Pillow: int(center - support + 0.5)
    hi = np.minimum((centers + support + 0.5).astype(np.int64), size_in)
    taps = int((hi - lo).max())
    index = lo[:, None] + np.arange(taps)[None, :]
    valid = index < hi[:, None]
    w = np.where(valid, np.maximum(0.0, 1.0 - np.abs(index + 0.5 - centers[:, None]) / support), 0.0)
    w /= w.sum(axis=1, keepdims=True)
    fixed = np.where(w < 0, np.trunc(-0.5 + w * (1 << _PRECISION_BITS)), np.trunc(0.5 + w * (1 << _PRECISION_BITS)))
    return np.minimum(index, size_in - 1), fixed.astype(np.int64)


LETTERBOX_FILL = 114  # the grey Ultralytics pads with: YOLO models were trained on it


@dataclass(frozen=True)
class Frame:
    """How an original image (width x height) became the model's input (input_width x input_height):
    input = original * scale + pad, per axis."""

    width: int
    height: int
    input_width: int
    input_height: int
    scale_x: float
    scale_y: float
    pad_x: float = 0.0
    pad_y: float = 0.0

    def to_image(self, xyxy: np.ndarray) -> np.ndarray:
        """Boxes (N x 4, x1 y1 x2 y2) in input pixels -> original image pixels, clipped to the image."""
        out = np.empty_like(xyxy, dtype=np.float32)
        out[:, 0::2] = (xyxy[:, 0::2] - self.pad_x) / self.scale_x
        out[:, 1::2] = (xyxy[:, 1::2] - self.pad_y) / self.scale_y
        out[:, 0::2] = np.clip(out[:, 0::2], 0, self.width)
        out[:, 1::2] = np.clip(out[:, 1::2], 0, self.height)
        return out

    def points_to_image(self, xy: np.ndarray) -> np.ndarray:
        """Points (N x 2, x y) in input pixels -> original image pixels."""
        return np.stack([(xy[:, 0] - self.pad_x) / self.scale_x, (xy[:, 1] - self.pad_y) / self.scale_y], axis=1)

    def as_dict(self) -> dict:
        return {"width": self.width, "height": self.height, "input_width": self.input_width,
                "input_height": self.input_height, "scale_x": self.scale_x, "scale_y": self.scale_y,
                "pad_x": self.pad_x, "pad_y": self.pad_y}


def fit(image: np.ndarray, height: int, width: int, letterbox: bool,
        fill: int = LETTERBOX_FILL) -> tuple[np.ndarray, Frame]:
    """Resize (stretch) or letterbox an RGB image to height x width (padded with ``fill``: YOLO's grey by
    default, MediaPipe pads with black); the Frame to map results back."""
    h, w = image.shape[:2]
    if not letterbox:
        return resize(image, height, width), Frame(w, h, width, height, width / w, height / h)
    scale = min(width / w, height / h)
    new_w, new_h = max(1, round(w * scale)), max(1, round(h * scale))
    pad_x, pad_y = (width - new_w) // 2, (height - new_h) // 2
    canvas = np.full((height, width, image.shape[2]), fill, np.uint8)
    canvas[pad_y:pad_y + new_h, pad_x:pad_x + new_w] = resize(image, new_h, new_w)
    return canvas, Frame(w, h, width, height, new_w / w, new_h / h, float(pad_x), float(pad_y))
