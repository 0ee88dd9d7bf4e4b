"""From any image to a model's inputs, and back: resize (stretch) or letterbox (keep the aspect ratio, pad) to
the input size, channel order, layout (NHWC/NCHW) and type, reusing ``edgeaccel.imageio``. ``Frame`` (defined
with ``fit`` in ``edgeaccel.imageio.resizing``, named here for the decoders) keeps what the decoders need to map
their results to the original image's pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from ..imageio.decode import read_image
from ..imageio.inputs import DYNAMIC_SIZE_HINT, _to_dtype, layout_of
from ..imageio.resizing import LETTERBOX_FILL, Frame, fit
from ..modelinfo import TensorSpec

__all__ = ["LETTERBOX_FILL", "Frame", "as_rgb", "fit", "image_layout", "is_image_input", "to_tensor", "zeros_for"]

def as_rgb(image) -> np.ndarray:
    """A path, a PIL image or an array (H x W x 3 / H x W x 4 / H x W) -> uint8 H x W x 3 RGB."""
    if isinstance(image, (str, Path)):
        image = read_image(image)
    elif not isinstance(image, np.ndarray) and hasattr(image, "convert") and hasattr(image, "size"):
        from ..imageio.decode import _from_pillow, upright

        # 16-bit and palette modes to 8 bits, not clipped. Turned upright by its EXIF tag as its file would be
        # only as opened from a file (Image.open sets .format): rotate(), convert() and resize() keep the tag
        # on images a caller may have turned already, and exif_transpose drops it
        opened = getattr(image, "format", None) is not None
        image = _from_pillow(upright(image) if opened else image, "the PIL image")
    if not isinstance(image, np.ndarray):
        raise InputError(f"cannot use a {type(image).__name__} as an image",
                         hint="pass a file path, a PIL image or an H x W x 3 uint8 numpy array (RGB)")
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[2] not in (1, 3, 4) or min(image.shape[:2]) < 1:
        raise InputError(f"an image array must be H x W x 3 (RGB), H x W x 4 or H x W; this one is {image.shape}",
                         hint="pass an RGB uint8 array; convert BGR (OpenCV) with image[..., ::-1]")
    if image.dtype != np.uint8 and image.dtype.kind in "iu" and image.size:
        low, high = int(image.min()), int(image.max())
        if low < 0 or high > 255:  # clipping would give a white image (a 16-bit one) and no warning
            raise InputError(f"an image array of {image.dtype} has values {low}..{high}, past 8 bits",
                             hint="scale it to uint8 first (a 16-bit image: image >> 8), or pass the file's path: "
                                  "16-bit files are scaled when decoded")
    if image.dtype != np.uint8:
        if image.dtype.kind == "f" and image.size and float(np.nanmax(image)) <= 1.0:
            image = image * 255.0
        image = np.clip(np.nan_to_num(image), 0, 255).astype(np.uint8)
    if image.shape[2] == 1:
        image = np.repeat(image, 3, axis=2)
    return np.ascontiguousarray(image[..., :3])


def to_tensor(image: np.ndarray, spec: TensorSpec, layout: str, normalize) -> np.ndarray:
    """A fitted RGB image as the input's channels, type (uint8/int8 pixels, floats by ``normalize``: a mode of
    ``edgeaccel.imageio`` or (mean, std) per channel) and layout."""
    channels = {"NHWC": spec.shape[-1], "NCHW": spec.shape[1]}.get(layout, 1)
    if channels == 1:
        image = np.rint(image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]
        image = image.astype(np.uint8)
    if isinstance(normalize, tuple) and spec.dtype.kind == "f":  # (mean, std) per channel from model metadata
        mean, std = (np.asarray(v, np.float32) for v in normalize)
        values = ((image.astype(np.float32) - mean) / std).astype(spec.dtype)
    else:
        values, _ = _to_dtype(image, spec, None if isinstance(normalize, tuple) else normalize)
    if layout == "NCHW":
        values = values.transpose(2, 0, 1)
    elif layout == "NHW":
        values = values[..., 0]
    return np.ascontiguousarray(values[None])


def image_layout(spec: TensorSpec, size: tuple[int, int] | None) -> tuple[str, int, int]:
    """(layout, height, width) of an image input; a dynamic size takes ``size`` (height, width)."""
    shape = spec.shape
    if len(shape) == 4 and (shape[1] in (1, 3) or shape[3] in (1, 3)):
        nchw = shape[1] in (1, 3) and shape[3] not in (1, 3)
        h, w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
        if h is None or w is None:
            if size is None:
                raise InputError(f"input {spec.name!r} has a dynamic image size {list(shape)} and nothing says which",
                                 hint=DYNAMIC_SIZE_HINT)
            h, w = size
        return ("NCHW" if nchw else "NHWC"), int(h), int(w)
    layout, h, w, _ = layout_of(spec)  # raises a clear InputError for anything that is not an image
    return layout, h, w


def is_image_input(spec: TensorSpec) -> bool:
    shape = spec.shape
    if len(shape) == 4:
        return shape[3] in (1, 3) or shape[1] in (1, 3)
    return len(shape) == 3 and shape[0] in (1, None) and (spec.dtype.kind == "u" or spec.dtype.kind == "f") \
        and all(d is None or d >= 8 for d in shape[1:])


def zeros_for(spec: TensorSpec) -> np.ndarray:
    """A non-image input's start value: real zero (the zero point of a quantized input), batch of one."""
    shape = [1 if d is None else d for d in spec.shape]
    fill = spec.quantization.zero_point[0] if spec.quantization and spec.dtype.kind in "iu" else 0
    return np.full(shape, fill, spec.dtype)
