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


def font_for(height: int, width: int):
    """Pillow's own font at a size that reads on this image (10 px on a small one, larger on a large frame),
    or its fixed bitmap font where Pillow has no FreeType."""
    from PIL import ImageFont

    size = max(11, round(max(height, width) / 60))
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # Pillow < 10.1 or without FreeType: one size only
        return ImageFont.load_default()


def label_parts(pen, xy: tuple[float, float], parts: list[str], font) -> tuple[list[tuple[float, str]], tuple]:
    """Where each part of a label goes, drawn from ``xy`` with a visible gap between parts: at small sizes the
    font's space is 2 px, and "FACE 0.79" read as "FACE0.79". Returns [(x, text)] and the whole label's bbox."""
    gap = max(5, round(_height(pen, font) * 0.6))
    x, y = xy
    placed, right, top, bottom = [], x, None, None
    for text in parts:
        left_, top_, right_, bottom_ = pen.textbbox((x, y), text, font=font)
        placed.append((x, text))
        right = right_
        top = top_ if top is None else min(top, top_)
        bottom = bottom_ if bottom is None else max(bottom, bottom_)
        x = right_ + gap
    return placed, (xy[0], top, right, bottom)


def _height(pen, font) -> int:
    left, top, right, bottom = pen.textbbox((0, 0), "Ag0", font=font)
    return bottom - top


def label_origin(box: tuple[float, float, float, float], size: tuple[int, int], image: tuple[int, int],
                 pad: int = 2) -> tuple[float, float]:
    """Top-left corner of a label of ``size`` (width, height) for ``box`` (x1, y1, x2, y2) in an ``image``
    (height, width): above the box where it fits, else inside it under its top edge; moved left when it would
    pass the right edge, never past the left one, so that it is never cut off by the frame."""
    label_w, label_h = size
    height, width = image
    x1, y1 = box[0], box[1]
    y = y1 - label_h - pad  # its background then ends on the box's top edge
    if y < 0:  # the box touches the top: inside it
        y = y1 + pad
    y = max(0.0, min(y, height - label_h - pad))
    x = max(float(pad), min(x1 + pad, width - label_w - pad))
    return x, y


def palette(n: int) -> np.ndarray:
    """n distinct RGB colours (Pascal VOC's bit-interleaved palette: class 0 is black)."""
    ids = np.arange(n)
    colours = np.zeros((n, 3), np.int64)
    for bit in range(8):
        for channel in range(3):
            colours[:, channel] |= ((ids >> (bit * 3 + channel)) & 1) << (7 - bit)
    return colours.astype(np.uint8)


def draw(result, image: np.ndarray) -> np.ndarray:
    """``image`` with ``result`` (an edgeaccel.vision Result) drawn on it, by what it holds (``drawn_as``)."""
    kind = result.drawn_as
    Image, ImageDraw = _pil()
    if kind == "mask":
        image = blend_mask(image, result.mask, background=result.background)
    canvas = Image.fromarray(image)
    pen = ImageDraw.Draw(canvas)
    width = max(2, round(max(image.shape[:2]) / 300))
    font = font_for(*image.shape[:2])
    line = _height(pen, font) + 6  # one listed class per line
    boxes = result.boxes if kind == "boxes" else result.instances if kind == "mask" else []
    if boxes:
        colours = palette(max([b.class_id for b in boxes], default=0) + 2)
        for box in boxes:
            colour = tuple(int(c) for c in colours[box.class_id + 1])
            pen.rectangle(box.xyxy, outline=colour, width=width)
            parts = [box.label, f"{box.score:.2f}"]
            if box.track_id is not None:
                parts.insert(0, f"#{box.track_id}")
            _, (left, top, right, bottom) = label_parts(pen, (0, 0), parts, font)
            x, y = label_origin(box.xyxy, (right - left, bottom), image.shape[:2])
            placed, (left, top, right, bottom) = label_parts(pen, (x, y), parts, font)
            pen.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=colour)
            for px, text in placed:
                pen.text((px, y), text, fill=(255, 255, 255), font=font)
            r = max(2, width)
            for k in box.keypoints:
                pen.ellipse((k.x - r, k.y - r, k.x + r, k.y + r), fill=(255, 0, 255))
    if kind == "classes":
        for i, c in enumerate(result.classes[:5]):
            placed, (left, top, right, bottom) = label_parts(pen, (4, 4 + line * i), [c.label, f"{c.score:.2f}"], font)
            pen.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=(0, 0, 0))
            for px, text in placed:
                pen.text((px, 4 + line * i), text, fill=(255, 255, 255), font=font)
    elif kind == "mask" and not result.instances:
        colours = palette(max(result.labels, default=0) + max([c["class_id"] for c in result.classes], default=0) + 2)
        swatch = line - 6
        for i, share in enumerate(result.classes[:8]):
            y = 4 + line * i
            pen.rectangle((4, y, 4 + swatch, y + swatch), fill=tuple(int(v) for v in colours[share["class_id"]]))
            placed, (left, top, right, bottom) = label_parts(
                pen, (8 + swatch, y), [share["label"], f"{share['fraction']:.0%}"], font)
            pen.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=(0, 0, 0))  # readable on any mask
            for px, text in placed:
                pen.text((px, y), text, fill=(255, 255, 255), font=font)
    elif kind == "poses":
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


def draw_zones(image: np.ndarray, shapes, counts: dict | None) -> np.ndarray:
    """Lines (yellow) and zones (cyan outlines) of ``shapes`` (an ``edgeaccel.tracking.Zones``) on a copy of the
    image, each named with its counts so far: in/out over all classes."""
    Image, ImageDraw = _pil()
    canvas = Image.fromarray(image)
    pen = ImageDraw.Draw(canvas)
    width = max(2, round(max(image.shape[:2]) / 300))
    font = font_for(*image.shape[:2])
    counts = counts or {}
    for kind, items, colour in (("lines", shapes.lines, (255, 220, 0)), ("zones", shapes.zones, (0, 220, 255))):
        for item in items:
            points = [tuple(p) for p in item.points]
            pen.line(points + points[:1] if kind == "zones" else points, fill=colour, width=width)
            tally = counts.get(kind, {}).get(item.name, {})
            text = [item.name, f"in {sum(tally.get('in', {}).values())}", f"out {sum(tally.get('out', {}).values())}"]
            x, y = min(p[0] for p in points), min(p[1] for p in points)
            x, y = max(2.0, min(x, image.shape[1] - 2.0)), max(2.0, min(y, image.shape[0] - 2.0))
            placed, (left, top, right, bottom) = label_parts(pen, (x, y), text, font)
            pen.rectangle((left - 2, top - 2, right + 2, bottom + 2), fill=(0, 0, 0))
            for px, part in placed:
                pen.text((px, y), part, fill=colour, font=font)
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
