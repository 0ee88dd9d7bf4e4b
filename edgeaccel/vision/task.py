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
from . import anchors as ssd_anchors
from . import blaze, classify, detect, landmarks, pose, segment, yolo_heads
from .errors import LayoutRefused, TaskError
from ..modelfiles.labels import Labels, onnx_metadata, parse_names, read_labels
from .preprocess import LETTERBOX_FILL, Frame, as_rgb, fit, image_layout, is_image_input, to_tensor, zeros_for
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
    ``background=False``; or, for MediaPipe-style detectors, a preset name ("face_short_range",
    "face_full_range", "palm", "pose") or a mapping of SSD anchor options (MediaPipe's SsdAnchorsCalculator
    names); ssd: MediaPipe decode options over the preset's (num_keypoints, reverse_output_order, x_scale..,
    sigmoid_score, score_clipping_thresh, min_suppression_threshold, nms "weighted"/"plain"); layout: force a
    YOLO decoder ("yolov8", "yolov5", "nms-in-graph") past the candidate-count check (values are still
    checked)."""

    def __init__(self, recognized: Recognized, info, inputs, outputs, labels: Labels, metadata: dict, *,
                 conf: float | None = None, iou: float = 0.45, max_det: int = 100, top_k: int = 5,
                 letterbox: bool | None = None, normalize: str | None = None,
                 imgsz: int | tuple[int, int] | None = None, anchors=None, background: bool = True,
                 ssd: dict | None = None, layout: str | None = None, threshold: float = 0.5,
                 color: str | None = None) -> None:
        self.name = recognized.task
        self.kind = recognized.kind
        self.which = recognized.which
        self.reason = recognized.reason
        self.declared = recognized.declared  # by the model's metadata: trusted to judge accuracy on
        self.labels = labels
        self.metadata = metadata
        self.ssd = None  # ssd-mediapipe: its DecodeOptions and Preset (label, normalization)
        preset = None
        if self.kind == "ssd-mediapipe":
            preset, self.anchors, self.ssd = _mediapipe_anchors(recognized.variant, anchors, ssd)
            if conf is None:
                conf = self.ssd.min_score_thresh
            if letterbox is None:
                letterbox = True  # MediaPipe keeps the aspect ratio (zero border) for its detectors
        else:
            self.anchors = None if anchors is None else detect.load_anchors(anchors)
        self.preset = preset
        self.threshold = float(threshold)  # one-channel and two-class masks, YOLO -seg instance masks
        self.landmarks = landmarks.LAYOUTS_BY_NAME.get(recognized.variant) if self.kind == "landmarks" else None
        if self.kind == "landmarks":
            conf = 0.5 if conf is None else conf  # the presence MediaPipe's graphs require
            letterbox = True if letterbox is None else letterbox  # MediaPipe keeps the crop's aspect (black bars)
        # MediaPipe pads with black
        self.letterbox_fill = 0 if self.kind in ("ssd-mediapipe", "landmarks") else LETTERBOX_FILL
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
        self.letterbox = self.kind in ("yolov8", "yolov5", "nms-in-graph", "yolo-seg", "yolo-pose") \
            if letterbox is None else letterbox
        self.normalize = normalize
        if normalize is None and self._inputs[self.image_index].dtype.kind == "f" and info.format is Format.TFLITE:
            from ..modelfiles.metadata import tflite_normalization

            found = tflite_normalization(info.path, self.image_index)
            if found:
                self.normalize = found
                self.reason += f"; pixels normalized with the metadata's mean {found[0]} and std {found[1]}"
        if self.normalize is None and preset is not None and self._inputs[self.image_index].dtype.kind == "f":
            self.normalize = preset.normalize
            self.reason += f"; pixels normalized to {preset.normalize} as MediaPipe feeds this detector"
        if self.normalize is None and self._inputs[self.image_index].dtype.kind == "f":
            self.reason += "; float input fed pixels scaled to 0..1 (normalize= '-1,1', 'imagenet', 'raw' to change)"
        size = _size({"imgsz": imgsz}) if imgsz is not None else _imgsz(metadata)
        spec = self._inputs[self.image_index]
        self.layout, self.height, self.width = image_layout(spec, tuple(size) if size else (DEFAULT_IMGSZ,) * 2)
        self.color = color

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
        fitted, frame = fit(rgb, self.height, self.width, self.letterbox, self.letterbox_fill)
        arrays = [zeros_for(s) if i != self.image_index else None for i, s in enumerate(self._inputs)]
        if self.color == "BGR":
            fitted = fitted[..., ::-1]
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
            elif self.kind == "ssd-mediapipe":
                boxes, scores = blaze.outputs([a.shape for a in arrays], len(self.anchors))
                label = self.preset.label if self.preset else "object"
                result = blaze.decode(arrays[boxes], arrays[scores], self.anchors, self.ssd, meta, self.labels,
                                      self.conf, self.max_det, label)
            elif self.kind == "ssd-anchors":
                boxes, scores = detect.raw_ssd_outputs([a.shape for a in arrays], len(self.anchors))
                labels = self.labels.for_ssd() if self.background else self.labels
                result = detect.decode_ssd_anchors(arrays[boxes], arrays[scores], self.anchors, meta, labels,
                                                   self.conf, self.iou, self.max_det, self.background)
            else:
                result = detect.decode_yolo(arrays[self.which], meta, self.labels, self.kind, self.conf, self.iou,
                                            self.max_det, self.classes)
        elif self.name == "segment":
            if self.kind == "yolo-seg":
                protos = next(a for a in arrays if a.ndim == 4)
                result = yolo_heads.decode_segment(arrays[self.which], protos, meta, self.labels, self.conf,
                                                   self.iou, self.max_det, self.classes, self.threshold)
            else:
                result = segment.decode(arrays[self.which], meta, self.labels, self.kind, self.threshold)
        elif self.kind == "landmarks":
            result = landmarks.decode(arrays, self.which, self.landmarks, meta, self.conf)
        elif self.kind == "yolo-pose":
            result = yolo_heads.decode_pose(arrays[self.which], meta, self.conf, self.iou, self.max_det,
                                            _kpt_shape(self.metadata))
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
            for out, array in zip(self._outputs, arrays, strict=True):
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
        for array, spec in zip(arrays, self._outputs, strict=True):
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


def _mediapipe_anchors(preset_name: str | None, anchors, ssd: dict | None):
    """(preset or None, anchors N x 4, DecodeOptions) from a matched preset and the task options: ``anchors`` a
    preset name, a mapping of anchor options (over the preset's, if any) or an N x 4 array; ``ssd`` decode
    options over the preset's."""
    preset = ssd_anchors.preset(preset_name) if preset_name else None
    if isinstance(anchors, str) and not Path(anchors).suffix:
        preset = ssd_anchors.preset(anchors)
        anchors = None
    if isinstance(anchors, dict):
        options = ssd_anchors.anchor_options(anchors, preset.anchors if preset else None)
        grid = ssd_anchors.generate(options)
    elif anchors is not None:
        grid = detect.load_anchors(anchors)
    elif preset is not None:
        grid = ssd_anchors.generate(preset.anchors)
    else:
        raise TaskError("a MediaPipe-style SSD detector needs its anchors",
                        hint=f"TaskOptions(decoder={{'anchors': <a preset: {', '.join(ssd_anchors.PRESETS)}; or SSD "
                             f"anchor options; or an N x 4 array>}})")
    decode = ssd_anchors.decode_options(ssd or {}, preset.decode if preset else ssd_anchors.DecodeOptions())
    return preset, grid, decode


def _kpt_shape(metadata: dict) -> tuple[int, int] | None:
    """Ultralytics writes ``kpt_shape`` as "[17, 3]" (keypoints, values each)."""
    import ast

    try:
        parsed = ast.literal_eval(metadata.get("kpt_shape") or "None")
    except (ValueError, SyntaxError):
        return None
    return (int(parsed[0]), int(parsed[1])) if isinstance(parsed, (list, tuple)) and len(parsed) == 2 else None


def _size(options: dict) -> tuple[int, int] | None:
    """(height, width) of task_options imgsz: 640, "640", "480x640", (480, 640); ConfigError otherwise."""
    from ..modelfiles.pipeline import parse_imgsz

    size = options.get("imgsz")
    return None if size is None else parse_imgsz(size, "task_options")


def metadata_of(info) -> dict[str, str]:
    if info.format is Format.ONNX:
        return onnx_metadata(info.path)
    return {}


def make_task(model, task: str | None = None, labels=None, **options) -> Task | None:
    """The Task for ``model`` (a loaded Model): ``task`` checked against its outputs (TaskError when it does
    not fit), or recognized from them (None when nothing fits; the reason is logged)."""
    info = model.info
    metadata = metadata_of(info)
    pipe = _pipeline(model)
    declared = pipe.decoder_options.get("classes")
    if not metadata.get("names") and isinstance(declared, int) and declared > 0:
        # an IR or int8 artifact of a YOLO model whose bundle (or edgeaccel.pipeline key) declares the class
        # count: columns after it are mask or keypoint coefficients, as with Ultralytics' names
        names = pipe.label_list() or []
        metadata = {**metadata, "names": repr([names[i] if i < len(names) else str(i) for i in range(declared)])}
    label_set = read_labels(labels, info.path if info.format in (Format.TFLITE,) else None, metadata)
    if labels is None and pipe.labels:  # also a bundle's, a sidecar's or a label file beside the model
        label_set = pipe.label_set()
    for key in ("imgsz", "letterbox", "normalize"):  # the model's declared pipeline, unless options say
        if options.get(key) is None and getattr(pipe, key) is not None \
                and pipe.sources.get(key) != "TFLite metadata":  # Task reads that itself, and says so
            options = {**options, key: getattr(pipe, key)}
    if options.get("color") is None and pipe.color:
        options = {**options, "color": pipe.color}
    if task is None and pipe.task in TASKS and pipe.sources.get("task") != "metadata_props (Ultralytics)":
        task = pipe.task  # declared by the user, a sidecar or a bundle (Ultralytics' is checked by recognition)
    names = parse_names(metadata["names"]) if metadata.get("names") else {}
    classes = len(names) or len(label_set) or None
    shapes = [tuple(t.shape) for t in model.outputs]
    if (options.get("anchors") is not None or options.get("ssd")) and task in (None, "detect"):
        given = options.get("anchors")
        if given is None or isinstance(given, dict) or (isinstance(given, str) and not Path(given).suffix):
            if given is None:  # decode options only: over the preset the shapes match
                given = _preset_for(model, shapes)
                options = {**options, "anchors": given}
            preset, grid, _ = _mediapipe_anchors(None, given, options.get("ssd"))
            pair = blaze.outputs(shapes, len(grid))
            if pair is None:
                raise TaskError(f"the SSD anchor options make {len(grid)} anchors, but no outputs of "
                                f"{info.path.name} are regressors [1, {len(grid)}, 4+2K] beside scores "
                                f"[1, {len(grid)}, C]: {[list(s) for s in shapes]}",
                                hint="check input_size, strides and the other anchor options against the "
                                     "model's graph")
            what = f"the {preset.name} preset's" if preset and not isinstance(given, dict) else "the given options'"
            found = Recognized("detect", "ssd-mediapipe", pair[0], f"MediaPipe-style SSD outputs decoded against "
                                                                    f"{what} {len(grid)} anchors")
            return Task(found, info, model.inputs, model.outputs, label_set, metadata, **options)
        anchors = detect.load_anchors(given)
        # TensorFlow's raw SSD outputs ([1, N, 4] box encodings beside [1, N, C] class scores, C often wider
        # than 4) come first: only without an exactly 4-wide output are the wider ones MediaPipe's regressors
        raw = detect.raw_ssd_outputs(shapes, len(anchors))
        tf_style = raw is not None and shapes[raw[0]][-1] == 4
        if not tf_style and raw_width(shapes, len(anchors)) not in (None, 4):
            found = Recognized("detect", "ssd-mediapipe", blaze.outputs(shapes, len(anchors))[0],
                               f"MediaPipe-style SSD outputs decoded against {len(anchors)} given anchors")
            return Task(found, info, model.inputs, model.outputs, label_set, metadata, **options)
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
        found = _forced_layout(options.get("layout"), shapes) if task == "detect" else None
        found = found or fits(task, info, model.inputs, model.outputs, classes, _size(options) or _imgsz(metadata))
        if not any(is_image_input(s) for s in model.inputs):
            raise TaskError(f"--task {task} needs an image input; {info.path.name} takes "
                            f"{[str(s) for s in model.inputs]}")
    else:
        try:
            found, why = recognize(info, model.inputs, model.outputs, metadata, classes,
                                   _size(options) or _imgsz(metadata))
        except LayoutRefused as exc:  # predict() raises it (no_task_error); a raw stream can still run
            log.warning("no vision task for %s: %s", info.path.name, exc.message)
            return None
        if found is None:
            log.info("no vision task recognized for %s: %s", info.path.name, why)
            return None
        log.info("recognized task %s for %s: %s", found.task, info.path.name, why)
    return Task(found, info, model.inputs, model.outputs, label_set, metadata, **options)


def _preset_for(model, shapes: list[tuple]) -> str:
    """The preset to build on when only decode options (``ssd``) were given: the one the shapes match."""
    from .recognize import _image_size

    for s in shapes:
        pair = blaze.outputs(shapes, s[1]) if len(s) == 3 else None
        if pair:
            found = ssd_anchors.matching_preset(s[1], shapes[pair[0]][2], _image_size(model.inputs))
            if found:
                return found.name
    raise TaskError("decode options (ssd=) were given without anchors, and no preset matches the outputs "
                    f"{[list(s) for s in shapes]}", hint="give TaskOptions(decoder={'anchors': ...}) too")


def raw_width(shapes: list[tuple], anchors: int) -> int | None:
    """Values per anchor of the regressors beside scores for ``anchors`` anchors (None: no such pair)."""
    pair = blaze.outputs(shapes, anchors)
    return None if pair is None else shapes[pair[0]][2]


def _forced_layout(layout: str | None, shapes: list[tuple]) -> Recognized | None:
    if layout is None:
        return None
    if layout not in ("yolov8", "yolov5", "nms-in-graph"):
        raise TaskError(f"unknown layout {layout!r}", hint="task_options layout is one of yolov8, yolov5, nms-in-graph")
    which = next((i for i, s in enumerate(shapes) if len(s) == 3), None)
    if which is None:
        raise TaskError(f"layout {layout} needs a 3-D output [1, a, b]; the outputs are {[list(s) for s in shapes]}")
    return Recognized("detect", layout, which, f"output {which} {list(shapes[which])} decoded as {layout} "
                                               f"(task_options layout=, past the candidate-count check)")


def _pipeline(model):
    from ..modelfiles.pipeline import ModelPipeline
    from ..modelfiles.describe import describe_pipeline

    found = getattr(model, "pipeline", None)
    return found if isinstance(found, ModelPipeline) else describe_pipeline(model.info)


def no_task_error(model) -> TaskError:
    _, why = recognize(model.info, model.inputs, model.outputs, metadata_of(model.info), None,
                       _imgsz(metadata_of(model.info)))
    return TaskError(f"no vision task was set or recognized for {Path(model.info.path).name}: {why}",
                     hint="load it with task='classify', 'detect', 'segment' or 'pose' (--task on the command line)")


def predict(model, image, inputs: dict | None = None) -> Result:
    task = model.task
    if task is None:
        raise no_task_error(model)
    return task.predict(model, image, inputs)
