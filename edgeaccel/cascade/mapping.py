"""A later stage's Result, computed on a crop, moved into the original frame's pixels (in place)."""

from __future__ import annotations

from ..vision.results import Box, ClassifyResult, DetectResult, Keypoint, PoseResult, Result, SegmentResult
from .geometry import Crop


def to_frame(result: Result, crop: Crop) -> Result:
    """Points, boxes and keypoints of ``result`` (in the crop image's pixels) -> the frame's pixels. A class
    needs no mapping; a segmentation mask stays the crop's (its ``crop`` says where it lies) while its instance
    boxes move. ``result.crop`` keeps the crop; the crop image is not kept (memory on live sources)."""
    if isinstance(result, DetectResult):
        result.boxes = [_box(b, crop) for b in result.boxes]
    elif isinstance(result, PoseResult):
        for pose in result.poses:
            pose.keypoints = _points(pose.keypoints, crop)
            if pose.box is not None:
                pose.box = crop.box_to_frame(pose.box)
    elif isinstance(result, SegmentResult):
        result.instances = [_box(b, crop) for b in result.instances]
    elif not isinstance(result, ClassifyResult):
        raise TypeError(f"cannot map a {type(result).__name__} back to the frame")
    result.crop = crop
    result.image = None
    return result


def _box(box: Box, crop: Crop) -> Box:
    box.xyxy = crop.box_to_frame(box.xyxy)
    box.keypoints = _points(box.keypoints, crop)
    return box


def _points(points: list[Keypoint], crop: Crop) -> list[Keypoint]:
    if not points:
        return points
    import numpy as np

    xy = crop.points_to_frame(np.array([[k.x, k.y] for k in points]))
    # plain floats (tolist), new Keypoints: a face mesh is 468 points on every frame of a live cascade
    return [Keypoint(k.name, x, y, k.score) for k, (x, y) in zip(points, xy.tolist(), strict=True)]
