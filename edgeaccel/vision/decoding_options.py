"""Which of a Task's decoding options (conf, iou, max_det, top_k) its decoder reads, and whether it answers masks, so
that a caller who sets one that changes nothing is told so instead of getting the default answer: ``?iou=0.3`` on an
SSD whose NMS runs in the graph, ``?conf=0.9`` on a classifier (it keeps ``top_k`` classes, whatever their score) or
on a semantic segmenter. Kept beside the decoders (Task.postprocess) that it describes."""

from __future__ import annotations

from typing import Any

# decoder kind -> the options it reads; kinds not listed read none
READ_BY_KIND = {
    "ssd-postprocess": ("conf", "max_det"),  # TFLite_Detection_PostProcess: NMS already ran in the graph
    "nms-in-graph": ("conf", "max_det"),
    "ssd-mediapipe": ("conf", "max_det"),  # overlap from the preset's min_suppression_threshold
    "ssd-anchors": ("conf", "iou", "max_det"),
    "yolov8": ("conf", "iou", "max_det"),
    "yolov5": ("conf", "iou", "max_det"),
    "yolo-seg": ("conf", "iou", "max_det"),
    "yolo-pose": ("conf", "iou", "max_det"),
    "multipose": ("conf",),  # MoveNet multi-pose: the lowest pose score kept
    "landmarks": ("conf",),  # the presence a face or hand must have
}
WHY_NOT = {
    "classify": "a classifier keeps its top_k classes whatever their scores",
    "segment": "a semantic segmenter labels every pixel",
    "pose": "a single-pose model answers its one pose",
}


def options_read(task: Any) -> tuple[str, ...]:
    """The decoding options ``task`` (an edgeaccel.vision.Task) reads."""
    if task.name == "classify":
        return ("top_k",)
    return READ_BY_KIND.get(task.kind, ())


def answers_masks(task: Any) -> bool:
    """Whether ``task``'s results carry masks (a semantic segmenter's, a YOLO -seg head's instance masks)."""
    return task.name == "segment" or task.kind == "yolo-seg"


def not_read_reason(task: Any) -> str:
    """Why options are not read, in a few words, for an error message."""
    if task.kind in ("ssd-postprocess", "nms-in-graph"):
        return "its NMS runs inside the model"
    if task.kind == "ssd-mediapipe":
        return "its overlap is the preset's min_suppression_threshold"
    return WHY_NOT.get(task.name, f"its {task.kind} decoder has no such option")
