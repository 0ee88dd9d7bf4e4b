"""Which task a model serves, from its inputs, outputs, operators and metadata, and why; or why not."""

from __future__ import annotations

from dataclasses import dataclass

from . import blaze, classify, landmarks, plausible, pose
from .anchors import matching_preset
from .detect import yolo_layout
from .errors import LayoutRefused, TaskError
from .preprocess import is_image_input

TASKS = ("classify", "detect", "segment", "pose")
SSD_OP = "TFLite_Detection_PostProcess"


@dataclass(frozen=True)
class Recognized:
    task: str
    kind: str  # the decoder's layout: top-k, ssd-postprocess, yolov8, yolov5, nms-in-graph, ids, scores, ...
    which: int  # the output it reads first
    reason: str
    variant: str | None = None  # the named layout: an SSD anchor preset (ssd-mediapipe), a landmark layout
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


def fits(task: str, info, inputs, outputs, classes: int | None = None,
         imgsz: tuple[int, int] | None = None, explicit: bool = True) -> Recognized:
    """How ``task`` reads this model's outputs, or TaskError saying why it cannot. ``imgsz`` is the size a
    dynamic image input is fed at (its metadata's), for the checks that depend on it; ``explicit``: the task
    was asked for (recognition keeps to clear cases and refuses ambiguous ones)."""
    shapes = _shapes(outputs)
    names = [t.name for t in outputs]
    described = ", ".join(f"{n or i} {list(s)}" for i, (n, s) in enumerate(zip(names, shapes, strict=True)))
    if task == "detect":
        if SSD_OP in (*info.custom_ops, *info.operators) or any(SSD_OP in (n or "") for n in names):
            return Recognized(task, "ssd-postprocess", 0, f"the model ends in {SSD_OP} (an SSD detector)")
        ih, iw = _image_size(inputs)
        if (not ih or not iw) and imgsz:
            ih, iw = imgsz
        anchored = _anchor_ssd(shapes, (ih, iw), info, described)
        if anchored is not None:
            return anchored
        refusals = []
        for i, shape in enumerate(shapes):
            if len(shape) == 3 and shape[0] in (1, None) and _candidates(shape, outputs[i].dtype):
                kind = yolo_layout(shape, classes)
                if kind == "nms-in-graph" and shape[1] in plausible.yolo_counts(ih, iw):
                    kind = "yolov5"  # a grid's count of rows of 6 or 7: candidates of 1-3 classes, not final boxes
                if not explicit and kind == "yolov8" and _yolo_pose_width(shape) and not classes:
                    raise LayoutRefused(f"output {names[i] or i} {list(shape)} looks like a YOLO pose head (box, one "
                                        f"class, 17 keypoints x 3) or a {shape[1] - 4}-class detector",
                                        hint="pass task='pose' or task='detect' (Ultralytics exports say which in "
                                             "their metadata)")
                if kind != "nms-in-graph":
                    n = shape[2] if kind == "yolov8" and (shape[1] or 0) < (shape[2] or 1 << 30) else shape[1]
                    by_count = plausible.yolo_count_layout(n, ih, iw)
                    if by_count is None:
                        refusals.append(f"output {names[i] or i} {list(shape)} has {n} candidates, but a YOLO head "
                                        + (f"on a {ih}x{iw} input gives {plausible.expected_counts(ih, iw)}"
                                           if ih and iw else "gives 21 per 32x32 pixels (x3 for v5)"))
                        continue
                    row_major = kind == "yolov5" or (shape[1] or 0) > (shape[2] or 0)
                    if by_count and row_major:
                        kind = "yolov8" if classes and shape[2] == 4 + classes else \
                            "yolov5" if classes and shape[2] == 5 + classes else \
                            _row_major_kind(by_count, shape, names[i] or i)
                return Recognized(task, kind, i, f"output {names[i] or i} {list(shape)} has the {kind} layout")
        if refusals:
            raise LayoutRefused(f"{info.path.name} does not look like a detector edgeaccel knows: "
                            + "; ".join(refusals), hint=plausible.FORCE_HINT)
    elif task == "pose":
        found = landmarks.find(shapes, explicit)
        if found:
            i, lay = found
            return Recognized(task, "landmarks", i, f"output {names[i] or i} {list(shapes[i])} holds {lay.points} "
                                                    f"{lay.name} landmarks ({lay.values} values each)",
                              variant=lay.name)
        ih, iw = _image_size(inputs)
        for i, shape in enumerate(shapes):
            if len(shape) == 3 and _yolo_pose_width(shape) \
                    and plausible.yolo_count_layout(shape[2], ih, iw) is not None:
                return Recognized(task, "yolo-pose", i, f"output {names[i] or i} {list(shape)} is a YOLO pose head "
                                                        "(box, score, 17 keypoints x, y, visibility)")
        pose_kind = pose.layout(shapes)
        if pose_kind:
            return Recognized(task, pose_kind, 0, f"output {list(shapes[0])} holds {pose_kind} (y, x, score)")
        ih, iw = _image_size(inputs)
        spatial = len(shapes[0]) == 4 and _spatial(shapes[0], outputs[0].dtype)
        channels = (shapes[0][3] if spatial == shapes[0][1:3] else shapes[0][1]) if spatial else 0
        # heatmaps: several channels at a fraction of the input's resolution (a full-size one-channel output
        # is a mask, not a keypoint)
        if explicit and spatial and channels >= 2 and (not ih or spatial[0] < ih):
            return Recognized(task, "heatmaps-only", 0, f"output {list(shapes[0])} read as keypoint heatmaps "
                                                        "(argmax per channel, no offsets)")
    elif task == "segment":
        ih, iw = _image_size(inputs)
        if _yolo_with_prototypes(shapes, outputs):
            i = next(i for i, s in enumerate(shapes) if len(s) == 3)
            return Recognized(task, "yolo-seg", i, f"output {names[i] or i} {list(shapes[i])} holds YOLO candidates "
                                                   f"with mask coefficients beside mask prototypes")
        for i, shape in enumerate(shapes):
            spatial = _spatial(shape, outputs[i].dtype)
            if spatial and _aspect_fits(spatial, ih, iw):
                channels = None if len(shape) == 3 else shape[3] if spatial == (shape[1], shape[2]) else shape[1]
                kind = "ids" if len(shape) == 3 else "mask" if channels == 1 else \
                    "two-class" if channels == 2 else "scores"
                if kind == "scores" and not explicit and channels in KEYPOINT_COUNTS and ih \
                        and spatial[0] * 2 <= ih:
                    raise LayoutRefused(f"output {names[i] or i} {list(shape)} looks like {channels} keypoint "
                                        f"heatmaps or a {channels}-class segmentation at 1/{ih // spatial[0]} of "
                                        f"the input", hint="pass task='pose' or task='segment'")
                what = {"ids": "a map of class ids", "scores": "per-class scores (argmax)",
                        "mask": "a one-channel mask (sigmoid or logits, threshold 0.5)",
                        "two-class": "two-class scores (background, foreground)"}[kind]
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
    "pose": "pose needs keypoints [1, 1, K, 3] (MoveNet), [1, P, 56], a YOLO pose head [1, 56, N], landmarks "
            "[1, 63] / [1, 1404] / [1, 1434] / [1, 195] / [1, 165] or heatmaps [1, h, w, K] (+ offsets [1, h, w, 2K])",
    "segment": "segmentation needs a map [1, H, W] of class ids, scores [1, H, W, C] / [1, C, H, W], a one-channel "
               "mask [1, H, W, 1] or YOLO candidates with mask prototypes",
    "classify": "classification needs one output of class scores, [1, C]",
}


def _row_major_kind(by_count: str, shape: tuple, name) -> str:
    """[1, N, V] without a class count: three candidates a cell is YOLOv5 (objectness); one a cell is either a
    transposed v8 export (4 + C) or an anchor-free head with objectness (YOLOX, 5 + C): told apart only by the
    80 COCO classes, else refused as ambiguous."""
    if by_count == "yolov5":
        return "yolov5"
    values = shape[2]
    if values - 4 == 80:
        return "yolov8"
    if values - 5 == 80:
        return "yolov5"
    raise LayoutRefused(f"output {name} {list(shape)} has one candidate per grid cell with {values} values each: "
                        f"{values - 4} classes without objectness (a transposed YOLOv8 export) or {values - 5} with "
                        "objectness (YOLOX-style); the model does not say how many classes it has",
                        hint="pass labels= (or metadata names) with the class count, or TaskOptions(decoder={'layout': "
                             "'yolov8'}) / {'layout': 'yolov5'} (objectness)")


def _anchor_ssd(shapes: list[tuple], image_size, info, described: str) -> Recognized | None:
    """MediaPipe-style SSD detectors: regressors [1, N, 4 + 2K] beside scores [1, N, C] with the same N. Their
    anchors are not in the file: a preset whose anchor count, keypoints and input size match claims the model;
    any other such pair is refused with the hint to give the anchor options (never decoded as YOLO)."""
    pairs = [(blaze.outputs(shapes, s[1]), s) for s in shapes if len(s) == 3 and s[1]]
    pair = next(((found, s) for found, s in pairs if found is not None), None)
    if pair is None:
        return None
    (boxes, scores), _ = pair
    n, values = shapes[boxes][1], shapes[boxes][2]
    found = matching_preset(n, values, image_size)
    if found is not None:
        k = found.decode.num_keypoints
        return Recognized("detect", "ssd-mediapipe", boxes,
                          f"regressors {list(shapes[boxes])} and scores {list(shapes[scores])} match the "
                          f"{found.name} preset ({found.what}: {n} anchors, box + {k} keypoints)", variant=found.name)
    raise LayoutRefused(f"{info.path.name} looks like an anchor-based SSD detector (regressors {list(shapes[boxes])}, "
                    f"scores {list(shapes[scores])}: {n} anchors) whose anchors are not in the file, and no preset "
                    f"has {n} anchors with {values} values each; its outputs are {described}",
                    hint="pass the anchors: TaskOptions(decoder={'anchors': {'input_size_height': H, 'input_size_width': "
                         "W, 'min_scale': ..., 'max_scale': ..., 'strides': [...], ...}}) (MediaPipe's SSD anchor "
                         "options) or an N x 4 array/.npy/.csv, and 'ssd': {'num_keypoints': K} (on the command line "
                         "--task-option anchors='{...}' --task-option ssd='{...}'); docs/vision.md")


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


KEYPOINT_COUNTS = (17, 21, 33, 39)  # COCO, hand, BlazePose (+ auxiliary): heatmaps that look like class scores


def _yolo_pose_width(shape: tuple) -> bool:
    """[1, 56, N]: box, one class score and 17 keypoints (x, y, visibility): Ultralytics' pose head."""
    return shape[1] == 56 and (shape[2] is None or shape[2] > 56)


def _yolo_with_prototypes(shapes: list[tuple], outputs) -> bool:
    """YOLOv8-seg: [1, 4+C+32, N] candidates beside [1, 32, h, w] (or TFLite's [1, h, w, 32]) mask prototypes."""
    has_candidates = any(len(s) == 3 and _candidates(s, o.dtype) for s, o in zip(shapes, outputs, strict=True))
    has_prototypes = any(len(s) == 4 and 32 in (s[1], s[3]) and s[1] != s[3] for s in shapes)
    return has_candidates and has_prototypes


def _spatial(shape: tuple, dtype) -> tuple[int, int] | None:
    if len(shape) == 3 and shape[0] in (1, None) and all(d and d >= 16 for d in shape[1:]):
        return shape[1], shape[2]
    if len(shape) == 4 and shape[0] in (1, None) and all(d for d in shape[1:]):
        _, a, b, c = shape
        if c >= 1 and a >= 16 and b >= 16 and c < min(a, b):
            return a, b
        if a >= 1 and b >= 16 and c >= 16 and a < min(b, c):
            return b, c
    return None


def _aspect_fits(spatial: tuple[int, int], ih: int | None, iw: int | None) -> bool:
    h, w = spatial
    if not ih or not iw:
        return 0.5 <= h / w <= 2
    return 0.66 <= (h / w) / (ih / iw) <= 1.5


def recognize(info, inputs, outputs, metadata: dict | None = None, classes: int | None = None,
              imgsz: tuple[int, int] | None = None) -> tuple[Recognized | None, str]:
    """The task the model serves and why, or (None, why none): a layout that looks like a task's but fails its
    checks (an anchor-based detector without known anchors, a YOLO-shaped output whose candidate count does not
    fit the input) raises that task's TaskError rather than being claimed by another task."""
    said = (metadata or {}).get("task")
    if said in TASKS:
        try:
            found = fits(said, info, inputs, outputs, classes, imgsz)
            return Recognized(found.task, found.kind, found.which, f"the model's metadata says task={said}; "
                                                                   f"{found.reason}", variant=found.variant, declared=True), found.reason
        except TaskError:
            pass
    if not any(is_image_input(s) for s in inputs):
        return None, "no input is an image (N x H x W x C or N x C x H x W)"
    refused = []
    order: tuple[str, ...] = ("detect", "pose", "segment", "classify")
    if _yolo_with_prototypes(_shapes(outputs), outputs):
        order = ("segment", *order)  # a -seg export's masks, not only its boxes
    for task in order:
        try:
            found = fits(task, info, inputs, outputs, classes, imgsz, explicit=False)
        except LayoutRefused as exc:  # a layout recognized, then refused: say why, claim nothing
            refused.append(exc)
            continue
        except TaskError:
            continue
        if refused:
            break
        return found, found.reason
    if refused:
        raise refused[0]
    return None, "its outputs fit no task: " + ", ".join(str(list(s)) for s in _shapes(outputs))
