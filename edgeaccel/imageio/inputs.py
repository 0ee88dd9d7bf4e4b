"""Model-shaped inputs from images: channel order, size (the model's pipeline for a dynamic one), layout and
type, as ``edgeaccel run --input`` and ``edgeaccel.image_input`` make them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from ..modelinfo import TensorSpec
from .decode import read_image
from .resizing import fit, resize


NORMALIZATIONS = ("0,1", "-1,1", "imagenet", "raw")
_IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
_IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def layout_of(spec: TensorSpec, size: tuple[int, int] | None = None) -> tuple[str, int, int, int]:
    """('NHWC' or 'NCHW' or 'HW', height, width, channels) for an image input, or InputError if it is not one.
    A dynamic height or width takes ``size`` (height, width): the model's declared image size."""
    shape = spec.shape
    h_size, w_size = size if size else (None, None)
    if len(shape) == 4:
        if shape[3] in (1, 3):
            return "NHWC", _fixed(shape[1], spec, h_size), _fixed(shape[2], spec, w_size), shape[3]
        if shape[1] in (1, 3):
            return "NCHW", _fixed(shape[2], spec, h_size), _fixed(shape[3], spec, w_size), shape[1]
    if len(shape) == 3 and shape[0] in (1, None):  # (1, H, W): a grayscale image without channels (MNIST)
        return "NHW", _fixed(shape[1], spec, h_size), _fixed(shape[2], spec, w_size), 1
    raise InputError(f"input {spec.name!r} of shape {list(spec.shape)} is not an image tensor",
                     hint="pass the input as a .npy file instead")


DYNAMIC_SIZE_HINT = ("pass the size it was trained at: --imgsz 640 or --imgsz HEIGHTxWIDTH on the command line, "
                     "imgsz= in task_options (or `imgsz: [h, w]` in <model>.edgeaccel.yaml); YOLO-style models also "
                     "want --letterbox (keep the aspect ratio, pad); or pass a .npy of the exact size")


def _fixed(dim: int | None, spec: TensorSpec, declared: int | None = None) -> int:
    if dim is None:
        if declared is not None:
            return int(declared)
        raise InputError(f"input {spec.name!r} has a dynamic image size {list(spec.shape)} and nothing declares "
                         "which size to feed", hint=DYNAMIC_SIZE_HINT)
    return dim


def image_to_input(image: np.ndarray, spec: TensorSpec, normalize=None, pipeline=None) -> tuple[np.ndarray, str]:
    """Fit a decoded image to an input tensor; returns the array and a line describing what was done.
    ``pipeline`` (an ``edgeaccel.modelfiles.pipeline.ModelPipeline``) gives a dynamic input its size, letterbox or
    stretch, colour order and, unless ``normalize`` is given, the normalization."""
    size = pipeline.imgsz if pipeline is not None else None
    if pipeline is not None:
        from ..modelfiles.pipeline import check_given_size

        check_given_size(spec, pipeline)
    layout, height, width, channels = layout_of(spec, size)
    if normalize is None and pipeline is not None:
        normalize = pipeline.normalize
    src = f"{image.shape[1]}x{image.shape[0]}"
    if channels == 1 and image.shape[2] == 3:
        image = np.rint(image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
        image = image.astype(np.uint8)
    elif channels == 3 and image.shape[2] == 1:
        image = np.repeat(image, 3, axis=2)
    fitting = "resized"
    if pipeline is not None and pipeline.letterbox:
        image, _ = fit(image, height, width, True)
        fitting = "letterboxed"
    else:
        image = resize(image, height, width)
    if pipeline is not None and pipeline.color == "BGR" and channels == 3:
        image = image[..., ::-1]
        fitting += ", BGR"
    values, how = _to_dtype(image, spec, normalize)
    if layout == "NCHW":
        values = values.transpose(2, 0, 1)
    elif layout == "NHW":
        values = values[..., 0]
    shown = f"{src} -> {layout} {height}x{width}x{channels}, {how}"
    return np.ascontiguousarray(values[None]), shown if fitting == "resized" else f"{shown} ({fitting})"


def _to_dtype(image: np.ndarray, spec: TensorSpec, normalize) -> tuple[np.ndarray, str]:
    """``normalize``: a mode of NORMALIZATIONS, or (mean, std) per channel on 0..255 pixels (model metadata)."""
    dtype = spec.dtype
    if dtype == np.uint8:
        return image, "uint8 pixels 0..255"
    if dtype == np.int8:
        return (image.astype(np.int16) - 128).astype(np.int8), "int8 pixels -128..127"
    if dtype.kind != "f":
        raise InputError(f"input {spec.name!r} is {dtype}; an image cannot be fed to it",
                         hint="pass the input as a .npy file")
    pixels = image.astype(np.float32)
    if isinstance(normalize, tuple):
        mean, std = (np.asarray(v, np.float32) for v in normalize)
        return ((pixels - mean) / std).astype(dtype), f"{dtype} as (pixel - {normalize[0]}) / {normalize[1]}"
    mode = normalize or "0,1"
    if mode == "0,1":
        values = pixels / 255.0
    elif mode == "-1,1":
        values = pixels / 127.5 - 1.0
    elif mode == "imagenet":
        values = (pixels / 255.0 - _IMAGENET_MEAN[: image.shape[2]]) / _IMAGENET_STD[: image.shape[2]]
    elif mode == "raw":
        values = pixels
    else:
        raise InputError(f"unknown normalization {mode!r}; choose one of {', '.join(NORMALIZATIONS)}")
    return values.astype(dtype), f"{dtype} scaled to {mode}"


def image_input(path: str | Path, model, normalize: str | None = None, which: int | str = 0,
                imgsz: int | tuple[int, int] | str | None = None, letterbox: bool | None = None) -> np.ndarray:
    """An image file as a model's input, the way `edgeaccel run --input` makes it: decoded, converted to the
    input's channels, resized (antialiased bilinear, as Pillow), laid out (NHWC/NCHW) and typed (uint8/int8
    pixels, or floats scaled by ``normalize``: "0,1" by default, "-1,1", "imagenet" or "raw").

    ``model``: a loaded Model, a ModelInfo (``edgeaccel.describe``) or a TensorSpec; ``which``: which input of
    a model, by position or name. A model's pipeline (``model.pipeline``, ``edgeaccel.describe_pipeline``)
    gives a dynamic input its size, letterbox or stretch, colour order and normalization; ``imgsz`` (640 or
    (height, width)) and ``letterbox`` override it. Returns a batch of one, ready for ``model.run``::

        with edgeaccel.load("mobilenet_v2_1.0_224_quant.tflite") as model:
            scores = model.run(edgeaccel.image_input("bird.png", model))[0]
    """
    if isinstance(model, TensorSpec):
        spec = model
    else:
        specs = list(model.inputs)
        if isinstance(which, str):
            named = [s for s in specs if s.name == which]
            if not named:
                raise InputError(f"the model has no input named {which!r}; its inputs are {[s.name for s in specs]}")
            spec = named[0]
        elif 0 <= which < len(specs):
            spec = specs[which]
        else:
            raise InputError(f"input {which} is out of range: the model has {len(specs)} input(s)")
    if normalize is not None and normalize not in NORMALIZATIONS:
        raise InputError(f"unknown normalization {normalize!r}; choose one of {', '.join(NORMALIZATIONS)}")
    from ..modelfiles.describe import pipeline_of

    user = {"imgsz": imgsz, "letterbox": letterbox}
    pipeline = pipeline_of(model, user) if not isinstance(model, TensorSpec) else pipeline_of(None, user)
    array, _ = image_to_input(read_image(path), spec, normalize, pipeline)
    return array
