"""Ground truth: mAP50-95 and mAP50 of a detector on a labelled dataset (COCO JSON or YOLO txt labels), per
artifact and executor (``edgeaccel val``), and the gate ``edgeaccel check --max-map-drop`` uses. Modules:
``dataset`` (the in-memory dataset and which layout a path holds), ``coco_json`` and ``yolo_txt`` (the
readers), ``cocomap`` (our COCO mAP), ``pycoco`` (the same through pycocotools, the `val` extra),
``classmap`` (model classes to dataset classes), ``evaluate`` (one model on one executor), ``bundle_val``
(every artifact and executor side by side, the drop against the float reference). Only numpy is imported
with the package; runtimes when a model is loaded."""

from .cocomap import ClassAP, Detection, GroundTruth, MapResult, coco_map
from .dataset import Dataset, ImageEntry, is_labelled
from .reader import read_dataset
from .evaluate import DEFAULT_CONF, DEFAULT_IOU, ValResult, evaluate

__all__ = ["DEFAULT_CONF", "DEFAULT_IOU", "ClassAP", "Dataset", "Detection", "GroundTruth", "ImageEntry",
           "MapResult", "ValResult", "coco_map", "evaluate", "is_labelled", "map_drop", "read_dataset",
           "validate_bundle"]


def __getattr__(name: str):
    if name in ("map_drop", "validate_bundle"):
        from . import bundle_val

        return getattr(bundle_val, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
