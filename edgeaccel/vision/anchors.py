"""SSD anchors generated from anchor options exactly as MediaPipe's SsdAnchorsCalculator does, and the options
of the MediaPipe detectors people deploy (BlazeFace short/full range, palm, BlazePose detector) as presets: their
TFLite files carry no anchors, so without these options their outputs cannot be decoded."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .errors import TaskError


@dataclass(frozen=True)
class AnchorOptions:
    """MediaPipe's SsdAnchorsCalculatorOptions (same names and defaults)."""
    input_size_height: int
    input_size_width: int
    min_scale: float
    max_scale: float
    strides: tuple[int, ...]
    num_layers: int = 0  # 0: one per stride
    anchor_offset_x: float = 0.5
    anchor_offset_y: float = 0.5
    aspect_ratios: tuple[float, ...] = (1.0,)
    interpolated_scale_aspect_ratio: float = 1.0
    fixed_anchor_size: bool = False
    reduce_boxes_in_lowest_layer: bool = False
    feature_map_height: tuple[int, ...] = ()
    feature_map_width: tuple[int, ...] = ()


@dataclass(frozen=True)
class DecodeOptions:
    """MediaPipe's TensorsToDetectionsCalculatorOptions that matter for decoding; x_scale..h_scale default to
    the input size, as every MediaPipe detector graph sets them."""
    num_keypoints: int = 0
    num_values_per_keypoint: int = 2
    box_coord_offset: int = 0
    keypoint_coord_offset: int = 4
    reverse_output_order: bool = True  # x, y, w, h (MediaPipe's models); False: y, x, h, w
    x_scale: float = 0.0
    y_scale: float = 0.0
    w_scale: float = 0.0
    h_scale: float = 0.0
    apply_exponential_on_box_size: bool = False
    sigmoid_score: bool = True
    score_clipping_thresh: float = 100.0
    min_score_thresh: float = 0.5
    min_suppression_threshold: float = 0.3
    nms: str = "weighted"  # MediaPipe's WEIGHTED (boxes averaged by score), or "plain" (greedy)
    keypoint_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preset:
    name: str
    what: str
    anchors: AnchorOptions
    decode: DecodeOptions
    normalize: str = "-1,1"
    label: str = "object"
    count: int = 0  # anchors it makes (checked by the tests against the real models)
    aliases: tuple[str, ...] = field(default=())


_FACE_POINTS = ("right_eye", "left_eye", "nose_tip", "mouth_center", "right_ear_tragion", "left_ear_tragion")
_PALM_POINTS = ("wrist", "index_mcp", "middle_mcp", "ring_mcp", "pinky_mcp", "thumb_cmc", "thumb_mcp")
_POSE_POINTS = ("hip_center", "full_body_size", "shoulder_center", "upper_body_size")
# AnchorOptions keywords the BlazeFace-family presets share
_BLAZE: dict[str, Any] = {"min_scale": 0.1484375, "max_scale": 0.75, "fixed_anchor_size": True}

# the options of MediaPipe's face_detection_short_range.pbtxt, face_detection_full_range.pbtxt,
# palm_detection_cpu.pbtxt and pose_detection_cpu.pbtxt
PRESETS = {p.name: p for p in (
    Preset("face_short_range", "BlazeFace short range (128x128)",
           AnchorOptions(128, 128, strides=(8, 16, 16, 16), **_BLAZE),
           DecodeOptions(num_keypoints=6, min_score_thresh=0.5, keypoint_names=_FACE_POINTS),
           label="face", count=896, aliases=("face", "blazeface")),
    Preset("face_full_range", "BlazeFace full range (192x192)",
           AnchorOptions(192, 192, strides=(4,), interpolated_scale_aspect_ratio=0.0, **_BLAZE),
           DecodeOptions(num_keypoints=6, min_score_thresh=0.6, keypoint_names=_FACE_POINTS),
           label="face", count=2304),
    Preset("palm", "MediaPipe palm detector (192x192)",
           AnchorOptions(192, 192, strides=(8, 16, 16, 16), **_BLAZE),
           DecodeOptions(num_keypoints=7, min_score_thresh=0.5, keypoint_names=_PALM_POINTS),
           normalize="0,1", label="palm", count=2016),
    Preset("pose", "BlazePose detector (224x224)",
           AnchorOptions(224, 224, strides=(8, 16, 32, 32, 32), **_BLAZE),
           DecodeOptions(num_keypoints=4, min_score_thresh=0.5, keypoint_names=_POSE_POINTS),
           label="person", count=2254),
    # earlier MediaPipe releases' models, still deployed: the back-camera BlazeFace, the 256x256 palm detector
    # and the 128x128 BlazePose detector
    Preset("face_back", "BlazeFace back camera (256x256)",
           AnchorOptions(256, 256, strides=(16, 32, 32, 32), min_scale=0.15625, max_scale=0.75,
                         fixed_anchor_size=True),
           DecodeOptions(num_keypoints=6, min_score_thresh=0.65, keypoint_names=_FACE_POINTS),
           label="face", count=896),
    Preset("palm_256", "MediaPipe palm detector, 256x256 (before 0.8.6)",
           AnchorOptions(256, 256, strides=(8, 16, 32, 32, 32), min_scale=0.1171875, max_scale=0.75,
                         fixed_anchor_size=True),
           DecodeOptions(num_keypoints=7, min_score_thresh=0.5, keypoint_names=_PALM_POINTS),
           label="palm", count=2944),
    Preset("pose_128", "BlazePose detector, 128x128 (before 0.8.4)",
           AnchorOptions(128, 128, strides=(8, 16, 16, 16), **_BLAZE),
           DecodeOptions(num_keypoints=4, min_score_thresh=0.5, keypoint_names=_POSE_POINTS),
           label="person", count=896),
)}
_ALIASES = {a: p for p in PRESETS.values() for a in p.aliases}


def preset(name: str) -> Preset:
    found = PRESETS.get(name) or _ALIASES.get(name)
    if found is None:
        raise TaskError(f"no SSD anchor preset {name!r}; the presets are {', '.join(PRESETS)}",
                        hint="or pass the anchor options: TaskOptions(decoder={'anchors': {'input_size_height': ..., "
                             "'min_scale': ..., 'max_scale': ..., 'strides': [...]}})")
    return found


def _scale(min_scale: float, max_scale: float, index: int, count: int) -> float:
    if count == 1:
        return (min_scale + max_scale) * 0.5
    return min_scale + (max_scale - min_scale) * index / (count - 1.0)


def generate(o: AnchorOptions) -> np.ndarray:
    """N x 4 anchors (y_center, x_center, height, width; normalized), in MediaPipe's order: layer by layer
    (layers of one stride share a grid), then row, column and anchor."""
    strides = list(o.strides)
    layers = o.num_layers or len(strides)
    if layers != len(strides):
        raise TaskError(f"SSD anchor options: num_layers {layers} but {len(strides)} strides",
                        hint="give one stride per layer")
    if o.feature_map_height and (len(o.feature_map_height) != layers or len(o.feature_map_width) != layers):
        raise TaskError("SSD anchor options: feature_map_height and feature_map_width need one value per layer")
    out = []
    layer = 0
    while layer < layers:
        ratios, scales = [], []
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            scale = _scale(o.min_scale, o.max_scale, last, len(strides))
            if last == 0 and o.reduce_boxes_in_lowest_layer:
                ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                ratios += list(o.aspect_ratios)
                scales += [scale] * len(o.aspect_ratios)
                if o.interpolated_scale_aspect_ratio > 0:
                    following = 1.0 if last == len(strides) - 1 else \
                        _scale(o.min_scale, o.max_scale, last + 1, len(strides))
                    scales.append(math.sqrt(scale * following))
                    ratios.append(o.interpolated_scale_aspect_ratio)
            last += 1
        heights = [s / math.sqrt(r) for s, r in zip(scales, ratios, strict=True)]
        widths = [s * math.sqrt(r) for s, r in zip(scales, ratios, strict=True)]
        if o.feature_map_height:
            fh, fw = o.feature_map_height[layer], o.feature_map_width[layer]
        else:
            fh = math.ceil(o.input_size_height / strides[layer])
            fw = math.ceil(o.input_size_width / strides[layer])
        ys, xs = np.meshgrid((np.arange(fh) + o.anchor_offset_y) / fh, (np.arange(fw) + o.anchor_offset_x) / fw,
                             indexing="ij")
        k = len(ratios)
        grid = np.empty((fh, fw, k, 4), np.float32)
        grid[..., 0] = ys[..., None]
        grid[..., 1] = xs[..., None]
        grid[..., 2] = 1.0 if o.fixed_anchor_size else np.asarray(heights, np.float32)
        grid[..., 3] = 1.0 if o.fixed_anchor_size else np.asarray(widths, np.float32)
        out.append(grid.reshape(-1, 4))
        layer = last
    return np.concatenate(out)


def _typed(cls, given: dict, what: str) -> dict:
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TaskError(f"unknown {what} option(s) {unknown}; known: {', '.join(known)}",
                        hint="the names are MediaPipe's (SsdAnchorsCalculatorOptions, "
                             "TensorsToDetectionsCalculatorOptions)")
    out = {}
    for key, value in given.items():
        default = getattr(cls, key, None)
        try:
            if isinstance(default, tuple) or key in ("strides",):
                value = tuple(value if isinstance(value, (list, tuple)) else [value])
            elif isinstance(default, bool):
                value = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
            elif isinstance(default, int) or key in ("input_size_height", "input_size_width"):
                value = int(value)
            elif isinstance(default, float) or key in ("min_scale", "max_scale"):
                value = float(value)
        except (TypeError, ValueError) as exc:
            raise TaskError(f"{what} option {key}={value!r} is not a valid value: {exc}") from exc
        out[key] = value
    return out


def anchor_options(given: dict, base: AnchorOptions | None = None) -> AnchorOptions:
    """AnchorOptions from a mapping (MediaPipe's field names), over ``base`` (a preset's) when given."""
    values = _typed(AnchorOptions, dict(given), "SSD anchor")
    if base is not None:
        from dataclasses import replace

        return replace(base, **values)
    missing = [k for k in ("input_size_height", "input_size_width", "min_scale", "max_scale", "strides")
               if k not in values]
    if missing:
        raise TaskError(f"SSD anchor options lack {missing}",
                        hint="give input_size_height/width, min_scale, max_scale and strides (MediaPipe's "
                             f"SsdAnchorsCalculatorOptions), or a preset name: {', '.join(PRESETS)}")
    return AnchorOptions(**values)


def decode_options(given: dict, base: DecodeOptions) -> DecodeOptions:
    from dataclasses import replace

    values = _typed(DecodeOptions, dict(given), "SSD decode")
    if values.get("nms", "weighted") not in ("weighted", "plain"):
        raise TaskError(f"SSD decode option nms={values['nms']!r}: choose 'weighted' or 'plain'")
    return replace(base, **values)


def matching_preset(anchors: int, values: int, image_size: tuple[int | None, int | None]) -> Preset | None:
    """The preset whose anchor count and 4 + 2K regressors match (and input size, when known)."""
    for p in PRESETS.values():
        size_ok = image_size == (None, None) or image_size == (p.anchors.input_size_height,
                                                               p.anchors.input_size_width)
        if p.count == anchors and values == 4 + 2 * p.decode.num_keypoints and size_ok:
            return p
    return None
