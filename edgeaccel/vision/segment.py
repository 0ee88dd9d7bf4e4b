"""Segmentation: a class-id map ([1, H, W]), per-class scores ([1, H, W, C] / [1, C, H, W], argmax), a
one-channel mask ([1, H, W, 1]: a probability or a logit, thresholded) or two-class scores ([1, H, W, 2]:
background, foreground), mapped back to the original image's pixels (nearest), with each class's area."""

from __future__ import annotations

import numpy as np

from ..modelfiles.labels import Labels
from .preprocess import Frame
from .results import SegmentResult


def class_map(array: np.ndarray) -> np.ndarray:
    """H x W class ids from a map of ids or of per-class scores; the channel axis of 4-D scores is the one
    smaller than both spatial axes (NHWC when it is last)."""
    a = array[0] if array.ndim in (3, 4) and array.shape[0] == 1 else array
    if a.ndim == 2:
        return a.astype(np.int32)
    if a.shape[-1] <= min(a.shape[0], a.shape[1]) and not a.shape[0] < min(a.shape[1], a.shape[2]):
        return a.argmax(axis=-1).astype(np.int32)
    return a.argmax(axis=0).astype(np.int32)


def classes_in(array_shape: tuple) -> int | None:
    a = array_shape[1:] if len(array_shape) in (3, 4) and array_shape[0] == 1 else array_shape
    if len(a) != 3:
        return None
    return a[-1] if a[-1] <= min(a[0], a[1]) else a[0]


def to_image(ids: np.ndarray, frame: Frame) -> np.ndarray:
    """Nearest-neighbour map of the model's mask (covering the whole input) onto the original image."""
    rows, cols = pixel_map(frame, *ids.shape)
    return ids[rows[:, None], cols[None, :]]


def pixel_map(frame: Frame, mh: int, mw: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of the image's rows and columns, the row and column of an mh x mw mask (covering the whole
    input) whose cell holds its centre."""
    ys = ((np.arange(frame.height) + 0.5) * frame.scale_y + frame.pad_y) * mh / frame.input_height
    xs = ((np.arange(frame.width) + 0.5) * frame.scale_x + frame.pad_x) * mw / frame.input_width
    return np.clip(ys.astype(np.int64), 0, mh - 1), np.clip(xs.astype(np.int64), 0, mw - 1)


def foreground(array: np.ndarray, kind: str, threshold: float) -> np.ndarray:
    """H x W ids (1 = foreground) of a one-channel mask or two-class scores: probabilities at or above
    ``threshold``; values outside 0..1 are logits (a sigmoid, or a softmax over the two classes)."""
    a = array.reshape(array.shape[-3:]) if array.ndim == 4 else array
    nchw = a.shape[0] <= 2 and a.shape[-1] > 2
    a = np.moveaxis(a, 0, -1) if nchw else a
    a = a.astype(np.float32)
    if not np.all(np.isfinite(a)):
        from .errors import LayoutRefused

        raise LayoutRefused("the mask holds NaN or infinite values: the model's output is broken for this input",
                            hint="check the input's normalization (TaskOptions(normalize=...))")
    if kind == "mask":
        p = a[..., 0]
        if p.min() < 0 or p.max() > 1:
            p = 1 / (1 + np.exp(-p.astype(np.float64)))
    else:
        probabilities = a.min() >= 0 and a.max() <= 1 and np.allclose(a.sum(axis=-1), 1, atol=0.05)
        if probabilities:
            p = a[..., 1]
        else:
            e = np.exp(a - a.max(axis=-1, keepdims=True))
            p = e[..., 1] / e.sum(axis=-1)
    return (p >= threshold).astype(np.int32)


def decode(array: np.ndarray, frame: Frame, labels: Labels, kind: str = "", threshold: float = 0.5) -> SegmentResult:
    if kind in ("mask", "two-class"):
        if len(labels) <= 1:  # a one-class model's single label names its foreground (selfie_segmentation's)
            name = next(iter(labels.names.values()), "foreground")
            labels = Labels({0: "background", 1: name}, source=f"{labels.source}: the mask's foreground")
        return _result(to_image(foreground(array, kind, threshold), frame), frame, labels)
    count = classes_in(array.shape) if array.ndim == 4 else None
    if count:
        labels.check_count(count)
    return _result(to_image(class_map(array), frame), frame, labels)


def _result(mask: np.ndarray, frame: Frame, labels: Labels, **extra) -> SegmentResult:
    pixels = np.bincount(mask.ravel()[mask.ravel() >= 0], minlength=1)
    total = mask.size
    present = np.flatnonzero(pixels)
    present = present[np.argsort(-pixels[present], kind="stable")]
    classes = [{"class_id": int(c), "label": labels.name(int(c)), "pixels": int(pixels[c]),
                "fraction": round(float(pixels[c]) / total, 6)} for c in present]
    names = {int(c): labels.name(int(c)) for c in present}
    return SegmentResult("segment", frame, mask=mask, labels=names, classes=classes, **extra)
