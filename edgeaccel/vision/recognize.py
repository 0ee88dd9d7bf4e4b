"""Which task a model serves, from its inputs, outputs, operators and metadata, and why; or why not."""

from __future__ import annotations

from dataclasses import dataclass

from . import classify, pose
from .detect import yolo_layout
from .errors import TaskError
from .preprocess import is_image_input

TASKS = ("classify", "detect", "segment", "pose")
SSD_OP = "TFLite_Detection_PostProcess"


@dataclass(frozen=True)
class Recognized:
    task: str
    kind: str  # the decoder's layout: top-k, ssd-postprocess, yolov8, yolov5, nms-in-graph, ids, scores, ...
    which: int  # the output it reads first
    reason: str
    declared: bool = False  # the model's metadata names this task (not only inferred from output shapes)


def _shapes(outputs) -> list[tuple]:
    return [tuple(t.shape) for t in outputs]


def _image_size(inputs) -> tuple[int | None, int | None]:
    for spec in inputs:
        if is_image_input(spec):
            s = spec.shape
            if len(s) == 4:
                return (s[2], s[3]) if s[1] in (1, 3) and s[3] not in (1, 3) else (s[1], s[2])
            return s[1], s[2]
    return None, None


def fits(task: str, info, inputs, outputs, classes: int | None = None) -> Recognized:
    """How ``task`` reads this model's outputs, or TaskError saying why it cannot."""
    shapes = _shapes(outputs)
    names = [t.name for t in outputs]
    described = ", ".join(f"{n or i} {list(s)}" for i, (n, s) in enumerate(zip(names, shapes)))
    if task == "detect":
        if SSD_OP in (*info.custom_ops, *info.operators) or any(SSD_OP in (n or "") for n in names):
            return Recognized(task, "ssd-postprocess", 0, f"the model ends in {SSD_OP} (an SSD detector)")
        for i, shape in enumerate(shapes):
            if len(shape) == 3 and shape[0] in (1, None) and _candidates(shape, outputs[i].dtype):
                kind = yolo_layout(shape, classes)
                return Recognized(task, kind, i, f"output {names[i] or i} {list(shape)} has the {kind} layout")
    elif task == "pose":
        kind = pose.layout(shapes)
        if kind:
            return Recognized(task, kind, 0, f"output {list(shapes[0])} holds {kind} (y, x, score)")
    elif task == "segment":
        ih, iw = _image_size(inputs)
        if _yolo_with_prototypes(shapes, outputs):
            raise TaskError(f"{info.path.name} is a YOLO instance-segmentation export (candidates and mask "
                            f"prototypes: {described}); edgeaccel decodes its boxes only",
                            hint="use --task detect for its boxes")
        for i, shape in enumerate(shapes):
            spatial = _spatial(shape, outputs[i].dtype)
            if spatial and _aspect_fits(spatial, ih, iw):
                kind = "ids" if len(shape) == 3 else "scores"
                what = "a map of class ids" if kind == "ids" else "per-class scores (argmax)"
                return Recognized(task, kind, i, f"output {names[i] or i} {list(shape)} is {what}")
    elif task == "classify":
        which = classify.score_output(shapes)
        if which is not None:
            return Recognized(task, "top-k", which, f"output {names[which] or which} {list(shapes[which])} "
                                                    f"holds one score per class")
    else:
        raise TaskError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    raise TaskError(f"--task {task} does not fit {info.path.name}: its outputs are {described}",
                    hint=_EXPECTED[task])


_EXPECTED = {
    "detect": f"detection needs {SSD_OP} outputs or a YOLO output [1, 4+C, N] / [1, N, 5+C] / [1, N, 6]",
    "pose": "pose needs keypoints [1, 1, K, 3] (MoveNet), [1, P, 56] or heatmaps [1, h, w, K] + offsets [1, h, w, 2K]",
    "segment": "segmentation needs a map [1, H, W] of class ids or scores [1, H, W, C] / [1, C, H, W]",
    "classify": "classification needs one output of class scores, [1, C]",
}


def _candidates(shape: tuple, dtype) -> bool:
    """[1, 4+C, N] or [1, N, 4+C]: float (or quantized) values, with many more candidates than values per
    candidate (a square [1, 513, 513] of class ids is a segmentation map, not boxes)."""
    if dtype.kind not in "fu" and dtype != "int8":
        return False
    known = [d for d in shape[1:] if d is not None]
    if not known or min(known) < 5:
        return False
    if shape[2] in (6, 7) and shape[1] != shape[2]:  # [1, N, 6]: final detections, x1 y1 x2 y2 score class
        return True
    return len(known) == 1 or max(known) >= 2 * min(known)


def _yolo_with_prototypes(shapes: list[tuple], outputs) -> bool:
    """YOLOv8-seg: [1, 4+C+32, N] candidates beside [1, 32, h, w] mask prototypes."""
    has_candidates = any(len(s) == 3 and _candidates(s, o.dtype) for s, o in zip(shapes, outputs))
    has_prototypes = any(len(s) == 4 and s[1] == 32 for s in shapes)
    return has_candidates and has_prototypes


def _spatial(shape: tuple, dtype) -> tuple[int, int] | None:
    if len(shape) == 3 and shape[0] in (1, None) and all(d and d >= 16 for d in shape[1:]):
        return shape[1], shape[2]
    if len(shape) == 4 and shape[0] in (1, None) and all(d for d in shape[1:]):
        _, a, b, c = shape
        if c >= 2 and a >= 16 and b >= 16 and c < min(a, b):
            return a, b
        if a >= 2 and b >= 16 and c >= 16 and a < min(b, c):
            return b, c
    return None


def _aspect_fits(spatial: tuple[int, int], ih: int | None, iw: int | None) -> bool:
    h, w = spatial
    if not ih or not iw:
        return 0.5 <= h / w <= 2
    return 0.66 <= (h / w) / (ih / iw) <= 1.5


def recognize(info, inputs, outputs, metadata: dict | None = None, classes: int | None = None) \
        -> tuple[Recognized | None, str]:
    """The task the model serves and why, or (None, why none)."""
    said = (metadata or {}).get("task")
    if said in TASKS:
        try:
            found = fits(said, info, inputs, outputs, classes)
            return Recognized(found.task, found.kind, found.which, f"the model's metadata says task={said}; "
                                                                   f"{found.reason}", declared=True), found.reason
        except TaskError:
            pass
    if not any(is_image_input(s) for s in inputs):
        return None, "no input is an image (N x H x W x C or N x C x H x W)"
    for task in ("detect", "pose", "segment", "classify"):
        try:
            found = fits(task, info, inputs, outputs, classes)
        except TaskError:
            continue
        return found, found.reason
    return None, "its outputs fit no task: " + ", ".join(str(list(s)) for s in _shapes(outputs))
