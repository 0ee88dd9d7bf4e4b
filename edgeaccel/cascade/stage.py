"""One stage of a cascade: a loaded model (its own executor, chosen and guarded by ``edgeaccel.load``), which
boxes of the stage before it looks at, and how it crops them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InputError
from .geometry import CropOptions, crop_for, sample
from .mapping import to_frame

# load() options a stage may give (the rest of load's are for one model alone or make no sense per stage)
LOAD_KEYS = ("executor", "device", "precision", "threads", "goal", "profile", "calibrate", "strict", "task",
             "labels", "task_options", "cache_dir", "cache")
STAGE_KEYS = ("name", "model", "classes", "min_score", "max_crops", "crop", *LOAD_KEYS)


@dataclass
class Stage:
    name: str
    model: Any  # an edgeaccel Model (or ScheduledModel): anything with predict(image) and executor
    classes: frozenset | None = None  # class ids or labels of the boxes before it to look at; None: all
    min_score: float = 0.0  # boxes before it scoring less are not looked at
    max_crops: int = 16  # at most this many boxes a frame (the best scoring); the rest are counted as skipped
    crop: CropOptions = field(default_factory=CropOptions)
    owned: bool = True  # loaded by the cascade (closed with it) rather than given loaded
    source: Any = None  # what it was loaded from, with load_options: to load it again elsewhere (placement)
    load_options: dict = field(default_factory=dict)
    input_size: tuple[int, int] | None = None  # (w, h) of its image input: crops are sampled at it

    def __post_init__(self) -> None:
        if self.max_crops < 0 or not 0 <= self.min_score <= 1:
            raise ConfigError(f"stage {self.name!r}: max_crops must be >= 0 and min_score in 0..1",
                              hint="e.g. max_crops: 16, min_score: 0.5")
        if self.input_size is None:
            self.input_size = image_size(self.model)

    @property
    def device(self) -> str:
        return self.model.executor.device

    @property
    def executor_name(self) -> str:
        return self.model.executor.name

    def wants(self, box) -> bool:
        if box.score < self.min_score:
            return False
        return self.classes is None or box.class_id in self.classes or box.label in self.classes

    def on_boxes(self, image, boxes: list) -> dict:
        """Run on the crops of ``boxes`` of ``image`` (the frame), attaching each answer to its box
        (``box.stages[name]``, in the frame's pixels). Returns counts and time: {crops, skipped, ms}."""
        start = time.perf_counter()
        pieces, skipped = self.prepare(image, boxes)
        self.finish(pieces, [self.model.run(p.inputs) for p in pieces])
        return {"crops": len(pieces), "skipped": skipped, "ms": (time.perf_counter() - start) * 1e3}

    # The three parts of a stage's work, apart so that a live cascade runs only ``model.run`` on the device's
    # thread and the CPU work (sampling crops, pre- and post-processing) of other frames meanwhile.
    def prepare(self, image, boxes: list | None) -> tuple[list[Piece], int]:
        """The model inputs for ``image``: the whole frame (``boxes`` None: a first stage), else one per crop of
        the boxes it looks at (the best ``max_crops``). Returns (pieces, boxes skipped)."""
        task = self.model.task
        if boxes is None:
            inputs, meta = task.preprocess(image)
            return [Piece(None, None, list(inputs), meta)], 0
        chosen = sorted((b for b in boxes if self.wants(b)), key=lambda b: -b.score)
        skipped = max(0, len(chosen) - self.max_crops)
        pieces = []
        for box in chosen[: self.max_crops]:
            crop = crop_for(box, self.crop, self.input_size)
            if crop is None:  # an empty box, or the keypoints its crop needs are missing
                skipped += 1
                continue
            inputs, meta = task.preprocess(sample(image, crop))
            pieces.append(Piece(box, crop, list(inputs), meta))
        return pieces, skipped

    def finish(self, pieces: list[Piece], outputs: list) -> Any:
        """Decode each piece's outputs; a crop's answer goes onto its box, in the frame's pixels. Returns the
        first stage's result (a piece without a box), else None."""
        task = self.model.task
        for piece, out in zip(pieces, outputs, strict=True):
            result = task.postprocess(out, piece.meta)
            if piece.box is None:
                return result
            piece.box.stages[self.name] = to_frame(result, piece.crop)
        return None

    def close(self) -> None:
        if self.owned:
            self.model.close()


@dataclass
class Piece:
    """One model call of a stage: on a frame (``box`` None) or on the crop of one box."""

    box: Any
    crop: Any
    inputs: list
    meta: Any


def image_size(model) -> tuple[int, int] | None:
    """(w, h) of the model's image input, or None (dynamic, or no image input: crops keep their own size)."""
    from ..vision.preprocess import image_layout, is_image_input

    for spec in model.inputs:
        if is_image_input(spec):
            try:
                _, h, w = image_layout(spec, None)
            except InputError:  # a dynamic size: the task resizes the crop itself
                return None
            return (w, h)
    return None


def boxes_of(result, stage_name: str | None) -> list:
    """The boxes the stage after ``stage_name`` looks at: the first stage's (``stage_name`` None), else every
    box that the detections of stage ``stage_name`` found, however deep in the tree (a detector after a
    detector after a detector)."""
    from ..vision.results import DetectResult

    if stage_name is None:
        return list(result.boxes)
    out: list = []

    def walk(boxes: list) -> None:
        for box in boxes:
            for name, inner in box.stages.items():
                if isinstance(inner, DetectResult):
                    if name == stage_name:
                        out.extend(inner.boxes)
                    else:
                        walk(inner.boxes)

    walk(result.boxes)
    return out
