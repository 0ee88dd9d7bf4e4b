"""One description of how images become a model's inputs and its outputs become answers: task, input size,
layout, colour order, normalization, letterbox or stretch, labels, decoder and its options, output names, and
where each of these came from.

It is read from what the model and its folder carry, the first source that sets a field winning:

1. what the user gives (``imgsz=``, ``task_options=``, ``labels=``; ``--imgsz``, ``--letterbox``, ``--labels``);
2. a YAML beside the model, ``<model stem>.edgeaccel.yaml`` (the same keys as the bundle's ``pipeline:``);
3. the bundle manifest's ``pipeline:`` mapping and its ``labels:`` file;
4. the ``edgeaccel.pipeline`` ONNX metadata_props entry (JSON) that ``edgeaccel convert`` writes;
5. Ultralytics' ONNX metadata_props (``imgsz``, ``names``, ``task``, ``stride``, ``kpt_shape``), or the
   ``metadata.yaml`` of its OpenVINO/TFLite export folders: YOLO detect, segment and pose models are
   letterboxed, as Ultralytics trains and predicts them;
6. TFLite metadata: the input's normalization (mean, std) and the label file packed in the model;
7. a label file beside the model: ``<stem>.labels``, ``<stem>.labels.txt``, ``<stem>_labels.txt``,
   ``<stem>.pbtxt``, ``<stem>_label_map.pbtxt``, then the folder's ``labels.txt``, ``classes.txt``,
   ``label_map.pbtxt``, ``labelmap.txt``, ``labelmap.pbtxt`` or ``coco.names``, in that order. A file named
   after another model (``imagenet_labels.txt``) is never taken for this one.

Reading it needs no runtime: ``edgeaccel.describe_pipeline(path)`` or ``model.pipeline`` on a loaded model.
This module is what a pipeline is (``ModelPipeline``, and the validation every source goes through, a bundle
manifest's included); ``describe.py`` reads the sources above.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

PIPELINE_KEY = "edgeaccel.pipeline"  # the ONNX metadata_props key edgeaccel writes
TASKS = ("classify", "detect", "segment", "pose")
NORMALIZE_MODES = ("0,1", "-1,1", "imagenet", "raw")
LABEL_FILES_NAMED = ("{stem}.labels", "{stem}.labels.txt", "{stem}_labels.txt", "{stem}.pbtxt",
                     "{stem}_label_map.pbtxt")
LABEL_FILES_SHARED = ("labels.txt", "classes.txt", "label_map.pbtxt", "labelmap.txt", "labelmap.pbtxt", "coco.names")
KEYS = ("task", "imgsz", "layout", "color", "normalize", "letterbox", "labels", "decoder", "decoder_options",
        "outputs")
ULTRALYTICS_LETTERBOXED = ("detect", "segment", "pose", "obb")


@dataclass(frozen=True)
class ModelPipeline:
    """How the model is fed and read. ``None`` means nothing said it (the code's default applies); ``sources``
    maps each set field to where it came from ("user", "metadata_props (Ultralytics)", "labels.txt", ...)."""

    task: str | None = None
    imgsz: tuple[int, int] | None = None  # (height, width)
    layout: str | None = None  # "NCHW" or "NHWC"
    color: str | None = None  # "RGB" or "BGR"
    normalize: str | tuple | None = None  # a mode of NORMALIZE_MODES, or ((mean...), (std...)) on 0..255 pixels
    letterbox: bool | None = None
    labels: dict[int, str] | None = None
    labels_offset: int = 0  # model class c is labels[c + offset] (a .pbtxt map numbers from 1)
    decoder: str | None = None
    decoder_options: dict = field(default_factory=dict)
    outputs: tuple[str, ...] | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self, with_labels: bool = True) -> dict:
        """JSON/YAML-ready, only the fields something set (what the bundle and the ONNX key store)."""
        out: dict[str, Any] = {}
        for key in KEYS:
            value = getattr(self, key)
            if value is None or value == {} or (key == "labels" and not with_labels):
                continue
            if key == "imgsz":
                value = list(value)
            elif key == "normalize" and isinstance(value, tuple):
                value = {"mean": list(value[0]), "std": list(value[1])}
            elif key == "labels":
                value = {int(k) - self.labels_offset: v for k, v in sorted(value.items())}
            elif key == "outputs":
                value = list(value)
            out[key] = value
        return out

    def described(self) -> dict:
        """to_dict with where each field came from (``edgeaccel describe``-style output, reports)."""
        out = self.to_dict()
        if "labels" in out:
            out["labels"] = f"{len(out['labels'])} names"
        out["sources"] = dict(self.sources)
        return out

    def label_set(self):
        """The labels as an ``edgeaccel.modelfiles.labels.Labels`` (class ids when none)."""
        from .labels import Labels

        if not self.labels:
            return Labels()
        return Labels(dict(self.labels), self.labels_offset, self.sources.get("labels", "the pipeline"))

    def label_list(self) -> list[str] | None:
        """Labels as a list indexed by class (``run``'s top-k), or None."""
        if not self.labels:
            return None
        top = max(k - self.labels_offset for k in self.labels) + 1
        return [self.labels.get(i + self.labels_offset, str(i)) for i in range(max(top, 0))]


# -- validation: every source goes through here -----------------------------------------------------------
def validate(data: dict, where: str) -> dict:
    """A mapping of pipeline keys checked and normalized (imgsz to (h, w), labels to {int: str}...);
    ConfigError naming the field otherwise."""
    if not isinstance(data, dict):
        raise ConfigError(f"a pipeline description is a mapping of {', '.join(KEYS)}; this is "
                          f"{type(data).__name__}", path=where)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in KEYS and key != "labels_offset":
            raise ConfigError(f"unknown pipeline field {key!r}", path=where, key=str(key),
                              hint=f"the fields are {', '.join(KEYS)}")
        if value is None:
            continue
        out[key] = _field(key, value, where)
    return out


def _field(key: str, value: Any, where: str) -> Any:
    def bad(what: str, hint: str | None = None):
        return ConfigError(f"pipeline field {key!r} {what}; got {value!r}"[:300], path=where, key=key, hint=hint)

    if key == "task":
        if value not in TASKS:
            raise bad(f"must be one of {', '.join(TASKS)}")
        return value
    if key == "imgsz":
        return parse_imgsz(value, where, key)
    if key == "layout":
        if str(value).upper() not in ("NCHW", "NHWC"):
            raise bad("must be NCHW or NHWC")
        return str(value).upper()
    if key == "color":
        if str(value).upper() not in ("RGB", "BGR"):
            raise bad("must be RGB or BGR")
        return str(value).upper()
    if key == "normalize":
        if isinstance(value, str):
            if value not in NORMALIZE_MODES:
                raise bad(f"must be one of {', '.join(NORMALIZE_MODES)} or {{mean: [...], std: [...]}}")
            return value
        if isinstance(value, dict) and set(value) == {"mean", "std"}:
            value = (value["mean"], value["std"])
        if isinstance(value, (list, tuple)) and len(value) == 2:
            try:
                mean = tuple(float(v) for v in (value[0] if isinstance(value[0], (list, tuple)) else [value[0]]))
                std = tuple(float(v) for v in (value[1] if isinstance(value[1], (list, tuple)) else [value[1]]))
            except (TypeError, ValueError):
                raise bad("mean and std must be numbers") from None
            if len(mean) not in (1, 3) or len(std) not in (1, 3) or any(s == 0 for s in std):
                raise bad("needs 1 or 3 means and 1 or 3 non-zero stds (on 0..255 pixels)")
            return mean, std
        raise bad(f"must be one of {', '.join(NORMALIZE_MODES)} or {{mean: [...], std: [...]}}")
    if key == "letterbox":
        if not isinstance(value, bool):
            raise bad("must be true (keep the aspect ratio, pad) or false (stretch)")
        return value
    if key == "labels":
        from .labels import parse_names

        if isinstance(value, str):
            value = parse_names(value)
        if isinstance(value, (list, tuple)):
            return {i: str(v) for i, v in enumerate(value)}
        if isinstance(value, dict):
            try:
                return {int(k): str(v) for k, v in value.items()}
            except (TypeError, ValueError):
                raise bad("must map class ids (integers) to names") from None
        raise bad("must be a list of names or a mapping {id: name}")
    if key == "labels_offset":
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad("must be an integer")
        return value
    if key == "decoder":
        if not isinstance(value, str) or not value:
            raise bad("must be a decoder name (yolov8, yolov5, ssd-anchors, ...)")
        return value
    if key == "decoder_options":
        if not isinstance(value, dict):
            raise bad("must be a mapping (e.g. {stride: 32, classes: 80})")
        return dict(value)
    if key == "outputs":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise bad("must be a list of output names")
        return tuple(value)
    raise bad("is not a pipeline field")


def parse_imgsz(value: Any, where: str = "imgsz", key: str = "imgsz") -> tuple[int, int]:
    """640, "640", "480x640" / "480,640" / "[480, 640]" or (480, 640) -> (height, width)."""
    import ast

    parsed = value
    if isinstance(value, str):
        text = value.strip().lower().replace("x", ",")
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            parsed = None
    if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
        parsed = (parsed, parsed)
    if (isinstance(parsed, (list, tuple)) and len(parsed) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and 8 <= v <= 16384 for v in parsed)):
        return int(parsed[0]), int(parsed[1])
    raise ConfigError(f"image size {value!r} is not one size or HEIGHTxWIDTH (each 8 to 16384)", path=where,
                      key=key, hint="e.g. --imgsz 640 or --imgsz 480x640 (height x width)")




def overlay(base: ModelPipeline, data: dict, source: str) -> ModelPipeline:
    """``base`` with the fields of ``data`` (validated) taking precedence, marked as coming from ``source``."""
    from dataclasses import replace

    changes = {k: v for k, v in data.items() if k != "labels_offset"}
    if "labels" in changes:
        changes["labels_offset"] = data.get("labels_offset", 0)
    sources = {**base.sources, **{k: source for k in changes if k != "labels_offset"}}
    return replace(base, **changes, sources=sources)


def check_given_size(spec: Any, pipeline: ModelPipeline | None) -> None:
    """A size the user gave for an input whose height and width are fixed is refused, not ignored."""
    if pipeline is None or not pipeline.imgsz or pipeline.sources.get("imgsz") != "user" or len(spec.shape) != 4:
        return
    shape = spec.shape
    axes = (1, 2) if shape[3] in (1, 3) else (2, 3) if shape[1] in (1, 3) else None
    if axes is None:
        return
    fixed = tuple(shape[a] for a in axes)
    if None not in fixed and fixed != tuple(pipeline.imgsz):
        from ..errors import InputError

        raise InputError(f"input {spec.name!r} is fixed at {fixed[0]}x{fixed[1]}; the image size "
                         f"{pipeline.imgsz[0]}x{pipeline.imgsz[1]} given cannot change it",
                         hint="--imgsz / imgsz= set the size of a dynamic-size input; drop it for this model")


def declared_shape(spec: Any, pipeline: ModelPipeline | None) -> list[int] | None:
    """``spec``'s shape with a dynamic batch as 1 and a dynamic image height and width from the pipeline's
    imgsz; None when a dimension stays unknown."""
    shape = [1 if (d is None and i == 0 and len(spec.shape) > 1) else d for i, d in enumerate(spec.shape)]
    if None in shape and pipeline is not None and pipeline.imgsz and len(shape) == 4:
        axes = (1, 2) if shape[3] in (1, 3) else (2, 3) if shape[1] in (1, 3) else None
        if axes:
            for axis, size in zip(axes, pipeline.imgsz, strict=True):
                shape[axis] = size if shape[axis] is None else shape[axis]
    return None if spec.unranked or None in shape else shape
