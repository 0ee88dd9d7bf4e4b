"""Vision tasks over any model: classify, detect, segment, pose. ``edgeaccel.load(path, task=...,
task_options=TaskOptions(labels=...))`` binds one (or recognizes it), ``model.predict(image)`` returns a Result in
the original image's pixels.
Only numpy is imported here; Pillow when a result is drawn."""

from .errors import LayoutRefused, TaskError
from ..modelfiles.labels import Labels, read_labels
from .preprocess import Frame
from .recognize import TASKS, Recognized, recognize
from .results import (SCHEMA, Box, Classification, ClassifyResult, DetectResult, Keypoint, Pose, PoseResult, Result,
                      SegmentResult)
from .task import Task, make_task

__all__ = ["SCHEMA", "TASKS", "Box", "Classification", "ClassifyResult", "DetectResult", "Frame", "Keypoint",
           "Labels", "LayoutRefused", "Pose", "PoseResult", "Recognized", "Result", "SegmentResult", "Task",
           "TaskError", "make_task", "read_labels", "recognize"]
