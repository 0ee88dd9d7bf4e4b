"""A cascade's result drawn on its frame: the first stage's boxes (labelled with what a classifier stage read on
each), each later stage's landmarks, boxes or instances, and the (possibly rotated) crop they were read in."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

CROP_COLOUR = (255, 0, 255)


def render(result, image: np.ndarray | None = None) -> np.ndarray:
    from ..vision import overlay
    from ..vision.preprocess import as_rgb
    from ..vision.results import ClassifyResult

    base = as_rgb(result.image if image is None else image)
    labelled = []
    for box in result.boxes:
        words = [box.label] + [r.top.label for r in box.stages.values() if isinstance(r, ClassifyResult) and r.top]
        labelled.append(replace(box, label=" / ".join(w for w in words if w)))
    out = overlay.draw(replace(result, boxes=labelled, image=None), base)
    return _nested(result.boxes, out)


def _nested(boxes, image: np.ndarray) -> np.ndarray:
    from PIL import Image, ImageDraw

    from ..vision import overlay
    from ..vision.results import ClassifyResult, DetectResult

    for box in boxes:
        for inner in box.stages.values():
            crop = getattr(inner, "crop", None)
            if crop is not None:
                canvas = Image.fromarray(image)
                ImageDraw.Draw(canvas).polygon([tuple(p) for p in crop.corners()], outline=CROP_COLOUR)
                image = np.asarray(canvas)
            if not isinstance(inner, ClassifyResult):
                image = overlay.draw(inner, image)
            if isinstance(inner, DetectResult):
                image = _nested(inner.boxes, image)
    return image
