"""Whether a layout is plausible before a decoder claims a model: YOLO candidate counts that follow from the
input size and the heads' strides, and values that look like scores and boxes once the model has run. A layout
that fails is refused with what was expected, instead of decoded into confident garbage."""

from __future__ import annotations

import math

import numpy as np

from .errors import LayoutRefused

# Ultralytics P3-P5 heads, the P6 models, and two-scale heads (YOLOv3/v4-tiny at 16/32, small custom heads at 8/16)
YOLO_STRIDES = ((8, 16, 32), (8, 16, 32, 64), (16, 32), (8, 16))
FORCE_HINT = "if it is one, pass TaskOptions(decoder={'layout': 'yolov8'}) (or 'yolov5', 'nms-in-graph') to decode it anyway"


def grid_cells(height: int, width: int, strides: tuple[int, ...]) -> int:
    return sum(math.ceil(height / s) * math.ceil(width / s) for s in strides)


def yolo_counts(height: int | None, width: int | None) -> dict[int, str]:
    """Candidate counts a YOLO head gives for this input: one per grid cell (v8/v11, anchor-free v5u) or three
    (v5's anchors), for each set of strides."""
    if not height or not width:
        return {}
    out: dict[int, str] = {}
    for strides in YOLO_STRIDES:
        cells = grid_cells(height, width, strides)
        out.setdefault(cells, "yolov8")
        out.setdefault(3 * cells, "yolov5")
    return out


def yolo_count_layout(candidates: int | None, height: int | None, width: int | None) -> str | None:
    """'yolov8' or 'yolov5' when the candidate count fits the input size; '' when it cannot be told (a dynamic
    dimension, an unknown size that still divides as a YOLO grid does); None when it does not fit."""
    if candidates is None:
        return ""
    counts = yolo_counts(height, width)
    if counts:
        return counts.get(candidates)
    # an unknown input size: 21 cells per 32x32 block with strides 8/16/32 (85 per 64x64 block with P6). A
    # two-scale head (5 cells per block) is not guessed here: every fifth count would pass, and a wrong claim
    # draws garbage; with its size declared (imgsz) it is recognized like the others
    return "" if candidates % 21 == 0 or candidates % 85 == 0 else None


def expected_counts(height: int, width: int) -> str:
    cells = grid_cells(height, width, YOLO_STRIDES[0])
    others = ", ".join(str(grid_cells(height, width, s)) for s in YOLO_STRIDES[1:])
    return (f"{cells} (strides 8/16/32 on {height}x{width}) or {3 * cells} (x3 anchors, YOLOv5); "
            f"{others} for heads with strides 8-64, 16/32 or 8/16")


def check_scores(values: np.ndarray, what: str, decoder: str) -> None:
    """Scores after the model's activation lie in 0..1; anything else is not this decoder's layout."""
    if values.size == 0:
        return
    low, high = float(np.min(values)), float(np.max(values))
    if not np.isfinite(low) or not np.isfinite(high):
        raise LayoutRefused(f"{what} holds NaN or infinite values: the model's outputs are broken for this input",
                        hint="check the input's normalization (TaskOptions(normalize=...))")
    if low < -1e-3 or high > 1 + 1e-3:
        raise LayoutRefused(f"{what} is not {decoder} scores: they range {low:.4g}..{high:.4g}, and a {decoder} head "
                        f"gives scores in 0..1 after its sigmoid; decoding it would draw garbage",
                        hint="this looks like another layout (raw logits, landmarks, anchor-based SSD "
                             "regressors): pass task= / task_options= for it (docs/vision.md)")


def check_boxes(xyxy: np.ndarray, width: int, height: int, decoder: str) -> None:
    """Kept boxes have a positive size and lie (mostly) within the input: a centre far outside it, or a box
    many times the input, says these are not box coordinates."""
    if len(xyxy) == 0:
        return
    w, h = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    cx, cy = (xyxy[:, 0] + xyxy[:, 2]) / 2, (xyxy[:, 1] + xyxy[:, 3]) / 2
    bad = (w <= 0) | (h <= 0) | (cx < -0.5 * width) | (cx > 1.5 * width) | (cy < -0.5 * height) | \
        (cy > 1.5 * height) | (w > 3 * width) | (h > 3 * height)
    if bad.mean() > 0.5:
        raise LayoutRefused(f"{int(bad.sum())} of {len(xyxy)} {decoder} boxes above the score threshold have no area "
                        f"or lie outside the {width}x{height} input: this output is not {decoder} boxes",
                        hint="pass task= / task_options= for the model's real layout")
