"""What a task returns: classes, boxes, a mask or keypoints in the original image's pixels, each with
``to_dict()`` / ``to_json()`` (schema ``edgeaccel.vision/1``, docs/vision.md), ``render(image)`` (an annotated
copy; Pillow) and ``save(path)``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..errors import InputError
from .preprocess import Frame

SCHEMA = "edgeaccel.vision/1"


@dataclass
class Result:
    # what the overlay draws (edgeaccel.vision.overlay reads it, so that it needs no result class): classes,
    # boxes, mask or poses
    drawn_as: ClassVar[str] = ""

    task: str
    frame: Frame
    model: str = ""
    timing_ms: dict = field(default_factory=dict)  # preprocess, inference, postprocess (predict fills them)
    image: np.ndarray | None = field(default=None, repr=False)  # the original RGB image, when predict() had it

    def to_dict(self) -> dict:
        out = {"schema": SCHEMA, "task": self.task, "model": self.model,
               "image": {"width": self.frame.width, "height": self.frame.height},
               "input": {"width": self.frame.input_width, "height": self.frame.input_height}}
        out.update(self._payload())
        if self.timing_ms:
            out["timing_ms"] = {k: round(v, 3) for k, v in self.timing_ms.items()}
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def _payload(self) -> dict:
        raise NotImplementedError

    def render(self, image: np.ndarray | None = None) -> np.ndarray:
        """The image (the one predicted on by default) with this result drawn on it: a new RGB uint8 array."""
        from . import overlay

        base = self.image if image is None else image
        if base is None:
            raise InputError("this result has no image to draw on", hint="pass the image: result.render(image)")
        from .preprocess import as_rgb

        return overlay.draw(self, as_rgb(base))

    def save(self, path: str | Path, image: np.ndarray | None = None) -> Path:
        """Write the rendered image (PNG, JPEG, ... by the file's extension)."""
        from .overlay import save_image

        return save_image(self.render(image), path)


@dataclass
class Classification:
    class_id: int
    label: str
    score: float

    def to_dict(self) -> dict:
        return {"class_id": self.class_id, "label": self.label, "score": round(self.score, 6)}


@dataclass
class ClassifyResult(Result):
    drawn_as: ClassVar[str] = "classes"

    classes: list[Classification] = field(default_factory=list)  # best first
    probabilities: bool = True  # scores are probabilities (sum to 1), else raw scores

    @property
    def top(self) -> Classification | None:
        return self.classes[0] if self.classes else None

    def _payload(self) -> dict:
        return {"classes": [c.to_dict() for c in self.classes], "probabilities": self.probabilities}


@dataclass
class Keypoint:
    name: str
    x: float  # original image's pixels
    y: float
    score: float

    def to_dict(self) -> dict:
        return {"name": self.name, "x": round(self.x, 2), "y": round(self.y, 2), "score": round(self.score, 6)}


def xyxy_of(values) -> tuple[float, float, float, float]:
    """Four numbers (an array row, a list) as the (x1, y1, x2, y2) floats a Box holds."""
    x1, y1, x2, y2 = (float(v) for v in values)
    return x1, y1, x2, y2


@dataclass
class Box:
    xyxy: tuple[float, float, float, float]  # x1, y1, x2, y2 in the original image's pixels
    score: float
    class_id: int
    label: str
    # points the detector places with the box (MediaPipe detectors: eyes, nose, ...; YOLO pose: the skeleton);
    # "keypoints" in the JSON only when there are some, so boxes of other detectors keep their exact schema
    keypoints: list[Keypoint] = field(default_factory=list)
    # the object's id over frames when a live source is tracked (watch(track=True)); "track_id" in the JSON
    # only then
    track_id: int | None = None
    # what later stages of a cascade (edgeaccel.cascade) found on this box: {stage name: Result}, mapped to the
    # original image's pixels; "stages" in the JSON only when there are some
    stages: dict = field(default_factory=dict)

    @property
    def xywh(self) -> tuple[float, float, float, float]:
        x1, y1, x2, y2 = self.xyxy
        return (x1, y1, x2 - x1, y2 - y1)

    def to_dict(self) -> dict:
        out = {"xyxy": [round(v, 2) for v in self.xyxy], "score": round(self.score, 6),
               "class_id": self.class_id, "label": self.label}
        if self.keypoints:
            out["keypoints"] = [k.to_dict() for k in self.keypoints]
        if self.track_id is not None:
            out["track_id"] = self.track_id
        if self.stages:
            out["stages"] = {name: _stage_dict(r) for name, r in self.stages.items()}
        return out


def _stage_dict(result) -> dict:
    """A later stage's result inside its box: without the schema and image size the top level already says."""
    out = {k: v for k, v in result.to_dict().items() if k not in ("schema", "image")}
    crop = getattr(result, "crop", None)
    if crop is not None:
        out["crop"] = crop.to_dict()
    return out


@dataclass
class DetectResult(Result):
    drawn_as: ClassVar[str] = "boxes"

    boxes: list[Box] = field(default_factory=list)  # best first
    decoder: str = ""  # which layout was decoded: ssd-postprocess, yolov8, yolov5, nms-in-graph

    def _payload(self) -> dict:
        return {"decoder": self.decoder, "boxes": [b.to_dict() for b in self.boxes]}


@dataclass
class SegmentResult(Result):
    drawn_as: ClassVar[str] = "mask"

    mask: np.ndarray | None = field(default=None, repr=False)  # H x W class ids at the original image's size
    labels: dict[int, str] = field(default_factory=dict)
    classes: list[dict] = field(default_factory=list)  # {class_id, label, pixels, fraction}, largest first
    # instance segmentation (YOLO -seg): the boxes of the instances, best first; the mask then holds -1 where
    # no instance is and is not a class, so ``background`` (the id drawn transparent) is -1 instead of 0
    instances: list[Box] = field(default_factory=list)
    background: int = 0

    def _payload(self) -> dict:
        out = {"classes": self.classes}
        if self.instances:
            out["instances"] = [b.to_dict() for b in self.instances]
        return out


@dataclass
class Pose:
    keypoints: list[Keypoint]
    score: float
    box: tuple[float, float, float, float] | None = None  # x1 y1 x2 y2 of the person (YOLO pose), when given

    def to_dict(self) -> dict:
        out = {"score": round(self.score, 6), "keypoints": [k.to_dict() for k in self.keypoints]}
        if self.box is not None:
            out["box"] = [round(v, 2) for v in self.box]
        return out


@dataclass
class PoseResult(Result):
    drawn_as: ClassVar[str] = "poses"

    poses: list[Pose] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)  # skeleton: pairs of keypoint indices
    min_score: float = 0.2  # keypoints below it are not drawn
    layout: str = ""  # the named keypoint layout (hand-21, face-mesh-468, blazepose-39, coco-17, ...)

    @property
    def keypoints(self) -> list[Keypoint]:
        return self.poses[0].keypoints if self.poses else []

    def _payload(self) -> dict:
        out = {"poses": [p.to_dict() for p in self.poses], "edges": [list(e) for e in self.edges]}
        if self.layout:
            out["layout"] = self.layout
        return out
