"""Drawing results on images with Pillow (the ``images`` extra), imported only when something is drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError, RuntimeNotInstalledError


def _pil():
    try:
        from PIL import Image, ImageDraw
    except ImportError as exc:
        raise RuntimeNotInstalledError("drawing results needs Pillow", hint="pip install 'edgeaccel[images]'") from exc
    return Image, ImageDraw


def palette(n: int) -> np.ndarray:
    """n distinct RGB colours (Pascal VOC's bit-interleaved palette: class 0 is black)."""
    ids = np.arange(n)
    colours = np.zeros((n, 3), np.int64)
    for bit in range(8):
        for channel in range(3):
            colours[:, channel] |= ((ids >> (bit * 3 + channel)) & 1) << (7 - bit)
    return colours.astype(np.uint8)


def draw(result, image: np.ndarray) -> np.ndarray:
    from .results import ClassifyResult, DetectResult, PoseResult, SegmentResult

    Image, ImageDraw = _pil()
    if isinstance(result, SegmentResult):
        image = blend_mask(image, result.mask, background=result.background)
    canvas = Image.fromarray(image)
    pen = ImageDraw.Draw(canvas)
    width = max(2, round(max(image.shape[:2]) / 300))
    boxes = result.boxes if isinstance(result, DetectResult) else \
        result.instances if isinstance(result, SegmentResult) else []
    if boxes:
        colours = palette(max([b.class_id for b in boxes], default=0) + 2)
        for box in boxes:
            colour = tuple(int(c) for c in colours[box.class_id + 1])
            pen.rectangle(box.xyxy, outline=colour, width=width)
            text = f"{box.label} {box.score:.2f}"
            x, y = box.xyxy[0], max(0, box.xyxy[1] - 12)
            left, top, right, bottom = pen.textbbox((x, y), text)
            pen.rectangle((left - 1, top - 1, right + 1, bottom + 1), fill=colour)
            pen.text((x, y), text, fill=(255, 255, 255))
            r = max(2, width)
            for k in box.keypoints:
                pen.ellipse((k.x - r, k.y - r, k.x + r, k.y + r), fill=(255, 0, 255))
    if isinstance(result, ClassifyResult):
        for i, c in enumerate(result.classes[:5]):
            text = f"{c.label} {c.score:.2f}"
            left, top, right, bottom = pen.textbbox((4, 4 + 14 * i), text)
            pen.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=(0, 0, 0))
            pen.text((4, 4 + 14 * i), text, fill=(255, 255, 255))
    elif isinstance(result, SegmentResult) and not result.instances:
        colours = palette(max(result.labels, default=0) + max([c["class_id"] for c in result.classes], default=0) + 2)
        for i, c in enumerate(result.classes[:8]):
            text = f"{c['label']} {c['fraction']:.0%}"
            pen.rectangle((4, 4 + 14 * i, 14, 14 + 14 * i), fill=tuple(int(v) for v in colours[c["class_id"]]))
            pen.text((18, 4 + 14 * i), text, fill=(255, 255, 255))
    elif isinstance(result, PoseResult):
        r = max(3, width + 1)
        for pose in result.poses:
            if pose.box is not None:  # YOLO pose: the person's box
                pen.rectangle(pose.box, outline=(0, 255, 0), width=width)
            points = pose.keypoints
            for a, b in result.edges:
                if max(a, b) < len(points) and min(points[a].score, points[b].score) >= result.min_score:
                    pen.line((points[a].x, points[a].y, points[b].x, points[b].y), fill=(0, 255, 255), width=width)
            for k in points:
                if k.score >= result.min_score:
                    pen.ellipse((k.x - r, k.y - r, k.x + r, k.y + r), fill=(255, 0, 255))
    return np.asarray(canvas)


def blend_mask(image: np.ndarray, mask: np.ndarray, alpha: float = 0.5, background: int = 0) -> np.ndarray:
    """Colour every class but ``background`` (0; -1 where an instance mask has no instance) over the image."""
    shift = 1 if background < 0 else 0  # instance masks: class 0 is a class, drawn in palette colour 1
    colours = palette(int(mask.max()) + 1 + shift)
    coloured = colours[np.clip(mask + shift, 0, None)]
    keep = (mask > background)[..., None]
    mixed = image.astype(np.float32) * (1 - alpha) + coloured.astype(np.float32) * alpha
    return np.where(keep, mixed, image).astype(np.uint8)


def save_image(image: np.ndarray, path: str | Path) -> Path:
    Image, _ = _pil()
    path = Path(path)
    try:
        Image.fromarray(image).save(path)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot write {path}: {exc}", hint="use a writable path ending in .png or .jpg") from exc
    return path
