"""A vision task over a loaded Model: ``preprocess`` an image into the model's inputs, ``postprocess`` its
outputs into a Result in the original image's pixels. ``Model.predict`` is both with a run between; live
sources (video, cameras) call the two halves themselves and carry recurrent state with ``state_inputs``."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..modelinfo import Format
from ..tensors import dequantize_array
from . import classify, detect, pose, segment
from .errors import TaskError
from .labels import Labels, onnx_metadata, parse_names, read_labels
from .preprocess import Frame, as_rgb, fit, image_layout, is_image_input, to_tensor, zeros_for
from .recognize import TASKS, Recognized, fits, recognize
from .results import Result

log = logging.getLogger("edgeaccel")
DEFAULT_IMGSZ = 640  # a dynamic image input without imgsz metadata is fed at YOLO's usual size


class Task:
    """One of classify, detect, segment, pose, bound to a model's inputs and outputs.

    conf: the lowest score a box (or a multi-pose) keeps; iou: NMS overlap threshold; max_det: most boxes
    kept; top_k: classes kept by classify; letterbox: keep the aspect ratio and pad (default for YOLO
    layouts) instead of stretching; normalize: how pixels become float inputs ("0,1", "-1,1", "imagenet",
    "raw"); imgsz: (height, width) for a dynamic-size image input; anchors: N x 4 (y, x, h, w normalized; an
    array, .npy or .csv) to decode raw SSD outputs, whose class scores have a background column first unless
    ``background=False``."""

    def __init__(self, recognized: Recognized, info, inputs, outputs, labels: Labels, metadata: dict, *,
                 conf: float | None = None, iou: float = 0.45, max_det: int = 100, top_k: int = 5,
                 letterbox: bool | None = None, normalize: str | None = None,
                 imgsz: int | tuple[int, int] | None = None, anchors=None, background: bool = True) -> None:
        self.name = recognized.task
        self.kind = recognized.kind
        self.which = recognized.which
        self.reason = recognized.reason
        self.declared = recognized.declared  # by the model's metadata: trusted to judge accuracy on
        self.labels = labels
        self.metadata = metadata
        self.anchors = None if anchors is None else detect.load_anchors(anchors)
        self.background = background
        # the class count the model declares (Ultralytics' names): columns after it are mask or keypoint
        # coefficients; a label file is not trusted for it (a short one would silently drop classes)
        self.classes = len(parse_names(metadata["names"])) if metadata.get("names") else None
        self._info, self._inputs, self._outputs = info, tuple(inputs), tuple(outputs)
        images = [i for i, s in enumerate(self._inputs) if is_image_input(s)]
        if not images:
            raise TaskError(f"no input of {info.path.name} is an image: {[str(s) for s in self._inputs]}",
                            hint="vision tasks feed an image input (N x H x W x C or N x C x H x W)")
        self.image_index = images[0]
        self.conf = (0.25 if self.kind.startswith(("yolo", "nms")) else 0.3) if conf is None else float(conf)
        self.iou, self.max_det, self.top_k = float(iou), int(max_det), int(top_k)
        self.letterbox = self.kind in ("yolov8", "yolov5", "nms-in-graph") if letterbox is None else letterbox
        self.normalize = normalize
        if normalize is None and self._inputs[self.image_index].dtype.kind == "f" and info.format is Format.TFLITE:
            from .metadata import tflite_normalization

            found = tflite_normalization(info.path, self.image_index)
            if found:
                self.normalize = found
                self.reason += f"; pixels normalized with the metadata's mean {found[0]} and std {found[1]}"
        if self.normalize is None and self._inputs[self.image_index].dtype.kind == "f":
            self.reason += "; float input fed pixels scaled to 0..1 (normalize= '-1,1', 'imagenet', 'raw' to change)"
        size = imgsz if imgsz is not None else _imgsz(metadata)
        size = (size, size) if isinstance(size, int) else size
        spec = self._inputs[self.image_index]
        self.layout, self.height, self.width = image_layout(spec, tuple(size) if size else (DEFAULT_IMGSZ,) * 2)

    def __repr__(self) -> str:
        return f"<edgeaccel.vision.Task {self.name} ({self.kind}): {self.reason}>"

    def with_outputs(self, outputs) -> Task:
        """This task for another artifact of the same model whose outputs (in this task's order) have other
        specs, e.g. a quantized twin: its outputs are dequantized with their own scales before decoding."""
        import copy

        twin = copy.copy(self)
        twin._outputs = tuple(outputs)
        return twin

    @property
    def image_input(self) -> str:
        return self._inputs[self.image_index].name

    # -- the two halves ---------------------------------------------------------------------------------
    def preprocess(self, image, inputs: dict | None = None) -> tuple[list[np.ndarray], Frame]:
        """Model inputs in input order for an image (a path, PIL image or H x W x 3 uint8 RGB array), and the
        Frame that maps results back. Inputs other than the image are zeros (real zero of a quantized input)
        unless ``inputs`` gives them, by name or position: recurrent state carried between frames."""
        rgb = as_rgb(image)
        fitted, frame = fit(rgb, self.height, self.width, self.letterbox)
        arrays = [zeros_for(s) if i != self.image_index else None for i, s in enumerate(self._inputs)]
        arrays[self.image_index] = to_tensor(fitted, self._inputs[self.image_index], self.layout, self.normalize)
        names = [s.name for s in self._inputs]
        for key, value in (inputs or {}).items():
            index = key if isinstance(key, int) else names.index(key) if key in names else None
            if index is None or not 0 <= index < len(arrays):
                raise InputError(f"the model has no input {key!r}; its inputs are {names}")
            arrays[index] = np.asarray(value)
        return arrays, frame

    def postprocess(self, outputs, meta: Frame) -> Result:
        """A Result from the model's outputs (an edgeaccel.Outputs or a list in output order)."""
        arrays = self._floats(list(outputs))
        if self.name == "classify":
            result = classify.decode(arrays, meta, self.labels, self.which, self.top_k)
        elif self.name == "detect":
            if self.kind == "ssd-postprocess":
                result = detect.decode_ssd(arrays, meta, self.labels.for_ssd(), self.conf, self.max_det)
            elif self.kind == "ssd-anchors":
                boxes, scores = detect.raw_ssd_outputs([a.shape for a in arrays], len(self.anchors))
                labels = self.labels.for_ssd() if self.background else self.labels
                result = detect.decode_ssd_anchors(arrays[boxes], arrays[scores], self.anchors, meta, labels,
                                                   self.conf, self.iou, self.max_det, self.background)
            else:
                result = detect.decode_yolo(arrays[self.which], meta, self.labels, self.kind, self.conf, self.iou,
                                            self.max_det, self.classes)
        elif self.name == "segment":
            result = segment.decode(arrays[self.which], meta, self.labels)
        else:
            result = pose.decode(arrays, meta, self.kind, self.conf)
        result.model = self._info.path.name
        return result

    def state_inputs(self, outputs) -> dict[str, np.ndarray]:
        """Outputs that feed inputs of the next frame (recurrent state: traffic_model's raw_outputs/lstm_c ->
        raw_inputs/init_lstm_c), matched by name stem, shape and type; pass the dict to ``preprocess``."""
        carried = {}
        arrays = list(outputs)
        for i, spec in enumerate(self._inputs):
            if i == self.image_index:
                continue
            stem = spec.name.rsplit("/", 1)[-1].replace("init_", "")
            for out, array in zip(self._outputs, arrays):
                if out.name.rsplit("/", 1)[-1] == stem and np.shape(array) == tuple(zeros_for(spec).shape) \
                        and np.asarray(array).dtype == spec.dtype:
                    carried[spec.name] = np.asarray(array)
        return carried

    def predict(self, model, image, inputs: dict | None = None) -> Result:
        start = time.perf_counter()
        rgb = as_rgb(image)
        arrays, frame = self.preprocess(rgb, inputs)
        ran = time.perf_counter()
        outputs = model.run(arrays)
        decoded = time.perf_counter()
        result = self.postprocess(outputs, frame)
        end = time.perf_counter()
        result.image = rgb
        result.timing_ms = {"preprocess": (ran - start) * 1e3, "inference": (decoded - ran) * 1e3,
                            "postprocess": (end - decoded) * 1e3}
        return result

    def _floats(self, arrays: list) -> list[np.ndarray]:
        out = []
        for array, spec in zip(arrays, self._outputs):
            array = np.asarray(array)
            if spec.quantization and array.dtype.kind in "iu" and not (self.name == "segment" and len(spec.shape) == 3):
                array = dequantize_array(array, spec.quantization)
            out.append(array)
        return out + [np.asarray(a) for a in arrays[len(out):]]


def _imgsz(metadata: dict) -> tuple[int, int] | None:
    """Ultralytics writes ``imgsz`` as "[640, 640]" (height, width)."""
    import ast

    try:
        parsed = ast.literal_eval(metadata.get("imgsz") or "None")
    except (ValueError, SyntaxError):
        return None
    if isinstance(parsed, int):
        return parsed, parsed
    if isinstance(parsed, (list, tuple)) and len(parsed) == 2:
        return int(parsed[0]), int(parsed[1])
    return None


def metadata_of(info) -> dict[str, str]:
    if info.format is Format.ONNX:
        return onnx_metadata(info.path)
    return {}


def make_task(model, task: str | None = None, labels=None, **options) -> Task | None:
    """The Task for ``model`` (a loaded Model): ``task`` checked against its outputs (TaskError when it does
    not fit), or recognized from them (None when nothing fits; the reason is logged)."""
    info = model.info
    metadata = metadata_of(info)
    label_set = read_labels(labels, info.path if info.format in (Format.TFLITE,) else None, metadata)
    names = parse_names(metadata["names"]) if metadata.get("names") else {}
    classes = len(names) or len(label_set) or None
    if options.get("anchors") is not None and task in (None, "detect"):
        anchors = detect.load_anchors(options["anchors"])
        if detect.raw_ssd_outputs([tuple(t.shape) for t in model.outputs], len(anchors)) is None:
            raise TaskError(f"anchors were given, but no outputs of {info.path.name} are box encodings [1, "
                            f"{len(anchors)}, 4] and class scores [1, {len(anchors)}, C]: "
                            f"{[list(t.shape) for t in model.outputs]}",
                            hint="give the anchors the model was built with")
        found = Recognized("detect", "ssd-anchors", 0, f"raw SSD outputs decoded against {len(anchors)} anchors")
        options = {**options, "anchors": anchors}
        return Task(found, info, model.inputs, model.outputs, label_set, metadata, **options)
    if task is not None:
        if task not in TASKS:
            raise TaskError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
        found = fits(task, info, model.inputs, model.outputs, classes)
        if not any(is_image_input(s) for s in model.inputs):
            raise TaskError(f"--task {task} needs an image input; {info.path.name} takes "
                            f"{[str(s) for s in model.inputs]}")
    else:
        found, why = recognize(info, model.inputs, model.outputs, metadata, classes)
        if found is None:
            log.info("no vision task recognized for %s: %s", info.path.name, why)
            return None
        log.info("recognized task %s for %s: %s", found.task, info.path.name, why)
    return Task(found, info, model.inputs, model.outputs, label_set, metadata, **options)


def no_task_error(model) -> TaskError:
    _, why = recognize(model.info, model.inputs, model.outputs, metadata_of(model.info))
    return TaskError(f"no vision task was set or recognized for {Path(model.info.path).name}: {why}",
                     hint="load it with task='classify', 'detect', 'segment' or 'pose' (--task on the command line)")


def predict(model, image, inputs: dict | None = None) -> Result:
    task = model.task
    if task is None:
        raise no_task_error(model)
    return task.predict(model, image, inputs)
