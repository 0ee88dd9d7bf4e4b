"""mAP of one model on one executor over a labelled dataset: every image through ``model.predict`` (the vision
task layer's own decoding, as users get it), boxes mapped to the dataset's classes, then COCO mAP (ours, and
pycocotools' beside it when asked)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .classmap import ClassMapping, map_classes
from .cocomap import MAX_DETS, ClassAP, Detection, MapResult, coco_map
from .dataset import Dataset
from .reader import read_dataset

DEFAULT_CONF = 0.001  # as Ultralytics' val: the whole precision-recall curve, not one operating point
DEFAULT_IOU = 0.7  # NMS overlap, as Ultralytics' val
DEFAULT_MAX_DET = 300
EVALUATORS = ("ours", "pycocotools")


@dataclass
class ValResult:
    model: str
    executor: str
    dataset: str
    images: int
    instances: int
    map50_95: float | None
    map50: float | None
    per_class: dict[str, ClassAP] = field(default_factory=dict)  # dataset class name -> AP
    classes: str = ""  # how model classes were mapped to the dataset's
    ms_per_image: float | None = None  # predict(): pre-processing, inference, decoding; first image left out
    predictions: int = 0
    dropped: int = 0  # boxes of model classes that stand for no dataset class
    library: MapResult | None = None  # pycocotools' figures on the same predictions, when asked for
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = {"model": self.model, "executor": self.executor, "images": self.images, "instances": self.instances,
               "map50_95": _round(self.map50_95), "map50": _round(self.map50),
               "ms_per_image": _round(self.ms_per_image, 3),
               "classes": self.classes, "predictions": self.predictions, "dropped_predictions": self.dropped,
               "per_class": {name: {"ap50_95": _round(ap.ap50_95), "ap50": _round(ap.ap50), "instances": ap.instances,
                                    "detections": ap.detections} for name, ap in self.per_class.items()}}
        if self.library is not None:
            out["pycocotools"] = {"map50_95": _round(self.library.map50_95), "map50": _round(self.library.map50)}
        return out


def _round(value, digits: int = 6):
    return None if value is None else round(float(value), digits)


def evaluate(model_or_path, dataset: Dataset | str | os.PathLike, *, executor: str | None = None,
             conf: float = DEFAULT_CONF, iou: float = DEFAULT_IOU, max_det: int = DEFAULT_MAX_DET,
             labels=None, class_map: dict | None = None, evaluator: str = "ours", images_dir=None,
             max_images: int | None = None, progress: bool | None = False, cache_dir=None,
             cache: bool = True) -> ValResult:
    """mAP50-95 and mAP50 of a detector on a labelled dataset (COCO JSON or YOLO txt labels; see
    ``read_dataset``). ``model_or_path``: a model file (loaded with ``edgeaccel.load(path, executor=executor,
    task="detect")``, no fallback, no background calibration) or a loaded Model (its executor as it is).
    ``labels``: the model's class names when it carries none; ``class_map``: {dataset class: model class}
    (ids or names) instead of matching by name or id. ``evaluator="pycocotools"`` also computes the library's
    figures (``result.library``). ``progress``: a bar on stderr (None: when it is a terminal)."""
    if evaluator not in EVALUATORS:
        raise InputError(f"unknown evaluator {evaluator!r}", hint=f"choose one of {', '.join(EVALUATORS)}")
    if evaluator == "pycocotools":
        from .pycoco import require

        require()
    for name, value in (("conf", conf), ("iou", iou)):
        if not 0 <= value <= 1:
            raise InputError(f"{name} must lie in 0..1, not {value}")
    data = dataset if isinstance(dataset, Dataset) else read_dataset(dataset, images_dir)
    data = data.limit(max_images)
    if not data.images:
        raise InputError(f"the dataset {data.source} holds no images")
    options = {"conf": conf, "iou": iou, "max_det": max_det}
    if isinstance(model_or_path, (str, os.PathLike)):
        from ..loader import load
        from ..options import RuntimeOptions, SelectionOptions, TaskOptions

        model = load(model_or_path, executor=executor, task="detect",
                     selection=SelectionOptions(strict=True, calibrate=False),
                     runtime=RuntimeOptions(cache_dir=cache_dir, cache=cache),
                     task_options=TaskOptions.from_dict(options, labels=labels))
        with model:
            return _evaluate(model, model.task, data, labels, class_map, evaluator, progress)
    from ..vision.task import make_task

    task = make_task(model_or_path, "detect", labels, **options)
    return _evaluate(model_or_path, task, data, labels, class_map, evaluator, progress)


def model_class_names(task) -> dict[int, str]:
    """The model's class index -> name, as its boxes are labelled (an SSD label file's background line skipped)."""
    names = task.labels.for_ssd() if task.kind.startswith("ssd") and task.background else task.labels
    return {k - names.offset: v for k, v in names.names.items() if k - names.offset >= 0}


def _evaluate(model, task, data: Dataset, labels, class_map, evaluator: str, progress) -> ValResult:
    from .progress import Progress

    mapping: ClassMapping = map_classes(data.names, data.class_ids, model_class_names(task), class_map)
    detections, times, dropped = [], [], 0
    executor = model.executor.name
    bar = Progress(len(data.images), f"{Path(str(model.info.path)).name} on {executor}",
                   enabled=progress if progress is not None else None)
    try:
        for entry in data.images:
            start = time.perf_counter()
            result = task.predict(model, entry.path)
            times.append(time.perf_counter() - start)
            for box in result.boxes:
                class_id = mapping.model_to_dataset.get(box.class_id)
                if class_id is None:
                    dropped += 1
                    continue
                detections.append(Detection(entry.id, class_id, box.xywh, box.score))
            bar.step()
    finally:
        bar.close()
    image_ids = [i.id for i in data.images]
    classes = mapping.dataset_classes
    ours = coco_map(data.annotations, detections, image_ids, classes, MAX_DETS)
    library = None
    if evaluator == "pycocotools":
        from .pycoco import pycocotools_map

        library = pycocotools_map(data.annotations, detections, image_ids, classes, MAX_DETS)
    timed = times[1:] if len(times) > 1 else times
    return ValResult(
        model=str(model.info.path), executor=executor, dataset=str(data.source), images=len(data.images),
        instances=sum(ap.instances for ap in ours.per_class.values()), map50_95=ours.map50_95, map50=ours.map50,
        per_class={data.name(c): ap for c, ap in ours.per_class.items()}, classes=mapping.describe(data.names),
        ms_per_image=1e3 * sum(timed) / len(timed), predictions=len(detections), dropped=dropped, library=library,
        notes=list(data.notes))
