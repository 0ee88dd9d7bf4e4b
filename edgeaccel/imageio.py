"""Images in, model-shaped arrays out: decoding, resizing, channel order and layout for ``edgeaccel run``.

Decoding uses Pillow when it is installed (the ``images`` extra) and otherwise a small PNG decoder, so the
base install can classify a PNG. Resizing is always edgeaccel's own (antialiased, like Pillow's BILINEAR
reduce), so results do not depend on whether Pillow is present.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from .errors import InputError
from .modelinfo import TensorSpec

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_image(path: str | Path) -> np.ndarray:
    """Decode to uint8 (H, W, C) with C = 1 (gray) or 3 (RGB); alpha is dropped. 16-bit samples become 8-bit
    (their high byte), palette images RGB, 1-bit images 0/255; floating-point and 32-bit images, whose range
    is unknown, are refused with an InputError."""
    path = Path(path)
    try:
        from PIL import Image  # noqa: F401
    except ImportError:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from exc
        return _without_pillow(data, path.name)
    # Opened by path, so that Pillow imports only the plugin for its extension (from bytes it imports every
    # common one, and subprocess with JPEG's: 1 MB of `edgeaccel run`'s peak memory); the content decides
    # the format all the same.
    try:
        return _pillow_decode(path, path.name)
    except OSError as exc:
        if exc.errno is not None:  # the file system's error (missing, a folder, not readable), not the image's
            raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from exc
        raise InputError(f"cannot decode image {path.name}: {exc}") from exc


def decode_image(data: bytes, name: str = "image") -> np.ndarray:
    """``read_image`` for bytes already in memory (an upload); ``name`` is what errors call them."""
    try:
        from PIL import Image  # noqa: F401
    except ImportError:
        return _without_pillow(data, name)
    import io

    try:
        return _pillow_decode(io.BytesIO(data), name)
    except OSError as exc:
        raise InputError(f"cannot decode image {name}: {exc}") from exc


def _pillow_decode(source, name: str) -> np.ndarray:
    from PIL import Image

    try:
        with Image.open(source) as img:
            img.load()
            return _from_pillow(img, name)
    except OSError:
        raise  # the caller tells a file system error from an image's
    except InputError:
        raise
    except Exception as exc:  # Pillow raises UnidentifiedImageError, DecompressionBombError ...
        raise InputError(f"cannot decode image {name}: {exc}") from exc


def _from_pillow(img, name: str) -> np.ndarray:
    """A decoded Pillow image as uint8 (H, W, 1) or (H, W, 3). Pillow's own ``convert("L")`` clips 16-bit
    values to 255 (a 16-bit PNG became an all-white image), and a "1" image is bool: every mode is brought to
    8 bits here, or refused."""
    mode = img.mode
    if mode in ("L", "RGB"):
        pixels = np.asarray(img)  # no copy of a photo already in RGB
    elif mode == "1" or mode in ("LA", "La"):
        pixels = np.asarray(img.convert("L"))
    elif mode.startswith("I;16") or mode == "I":
        # Pillow holds 16-bit grey as I;16 (PNG, TIFF) or I (PGM, scaled to 0..65535 by Pillow)
        values = np.asarray(img)
        if mode == "I" and values.size and (int(values.min()) < 0 or int(values.max()) > 65535):
            raise InputError(f"{name} is a 32-bit integer image (values {int(values.min())}..{int(values.max())})"
                             ": its range is unknown", hint="convert it to an 8- or 16-bit PNG first")
        pixels = to_8bit(values)
    elif mode in ("F", "I;32", "I;32B", "I;32L"):
        raise InputError(f"{name} is a {mode} image ({'floating point' if mode == 'F' else '32-bit'} pixels): "
                         "its range is unknown", hint="convert it to an 8- or 16-bit PNG first")
    elif mode in ("P", "PA"):
        # through RGBA: Pillow warns about a palette's transparency when going to RGB; alpha is dropped after
        pixels = np.asarray(img.convert("RGBA"))[..., :3]
    else:  # RGBA, CMYK, YCbCr, LAB, HSV, RGBX ...: Pillow's own conversion to RGB
        pixels = np.asarray(img.convert("RGB"))
    if pixels.dtype != np.uint8:  # a mode this function does not know gave wider pixels: never clip them
        raise InputError(f"{name} is a {mode} image, which edgeaccel cannot bring to 8 bits",
                         hint="convert it to an 8-bit RGB PNG or JPEG first")
    return np.ascontiguousarray(pixels).reshape(img.height, img.width, 1 if pixels.ndim == 2 else 3)


def to_8bit(values: np.ndarray) -> np.ndarray:
    """16-bit samples to 8 bits: the high byte (0 -> 0, 65535 -> 255), as libpng's strip and Pillow's own
    16-bit RGB reading do, so that both decoding paths give the same pixels."""
    return (values.astype(np.uint32) >> 8).astype(np.uint8)


def _without_pillow(data: bytes, name: str) -> np.ndarray:
    if not data.startswith(_PNG_SIGNATURE):
        raise InputError(f"{name} is not a PNG, and decoding other image formats needs Pillow",
                         hint="pip install 'edgeaccel[images]', or convert the image to PNG") from None
    return decode_png(data, name)


def decode_png(data: bytes, name: str = "image") -> np.ndarray:
    """A complete decoder for non-interlaced PNGs (all color types, 8 and 16 bit)."""
    if not data.startswith(_PNG_SIGNATURE):
        raise InputError(f"{name} is not a PNG")
    pos, header, palette, idat = 8, None, None, []
    try:
        while pos + 8 <= len(data):
            length, kind = struct.unpack(">I4s", data[pos : pos + 8])
            chunk = data[pos + 8 : pos + 8 + length]
            pos += 12 + length
            if kind == b"IHDR":
                header = struct.unpack(">IIBBBBB", chunk)
            elif kind == b"PLTE":
                palette = np.frombuffer(chunk, np.uint8).reshape(-1, 3)
            elif kind == b"IDAT":
                idat.append(chunk)
            elif kind == b"IEND":
                break
        if header is None:
            raise ValueError("no IHDR chunk")
        width, height, depth, color, _, _, interlace = header
        if interlace:
            raise InputError(f"{name} is an interlaced PNG", hint="pip install 'edgeaccel[images]' (Pillow reads it)")
        channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
        if (depth not in (8, 16) and not (color in (0, 3) and depth in (1, 2, 4))) or (color == 3 and depth == 16):
            raise ValueError(f"bit depth {depth} with color type {color}")
        raw = zlib.decompress(b"".join(idat))
    except InputError:
        raise
    except (ValueError, KeyError, struct.error, zlib.error) as exc:
        raise InputError(f"{name} is a corrupted PNG: {exc}") from exc
    bits = depth * channels
    stride = (width * bits + 7) // 8
    bpp = max(1, bits // 8)
    if len(raw) < height * (stride + 1):
        raise InputError(f"{name} is a truncated PNG")
    pixels = _unfilter(raw, height, stride, bpp)
    if depth == 16:
        image = to_8bit(pixels.view(">u2").reshape(height, width, channels))
    elif depth == 8:
        image = pixels.reshape(height, width, channels)
    else:
        image = np.unpackbits(pixels, axis=1, bitorder="big").reshape(height, -1, depth)
        image = (image * (1 << np.arange(depth - 1, -1, -1))).sum(-1)[:, :width].astype(np.uint8)
        image = image[..., None] if color == 3 else (image * (255 // ((1 << depth) - 1))).astype(np.uint8)[..., None]
    if color == 3:
        if palette is None:
            raise InputError(f"{name} is a palette PNG without a palette")
        if int(image.max(initial=0)) >= len(palette):  # the PNG spec calls this an error: never guess a colour
            raise InputError(f"{name} is a corrupted PNG: palette index {int(image.max())} past its "
                             f"{len(palette)} colours")
        return palette[image[..., 0]]
    if color in (4, 6):  # drop alpha
        image = image[..., :-1]
    return np.ascontiguousarray(image)


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, np.uint8, stride, start + 1)
        if kind == 0:
            row = line.copy()
        elif kind == 2:  # Up
            row = line + prev
        elif kind == 1:  # Sub: a running sum per channel, vectorised
            row = np.cumsum(line.reshape(-1, bpp).astype(np.uint64), axis=0).astype(np.uint8).reshape(-1) \
                if stride % bpp == 0 else _sequential(line, prev, bpp, 1)
        else:  # Average and Paeth depend on the byte just decoded: sequential
            row = _sequential(line, prev, bpp, kind)
        out[y] = row
        prev = row
    return out


def _sequential(line: np.ndarray, prev: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    cur = bytearray(line.tobytes())
    up = prev.tobytes()
    for i in range(len(cur)):
        a = cur[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 1:
            pred = a
        elif kind == 3:
            pred = (a + b) >> 1
        else:
            c = up[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
        cur[i] = (cur[i] + pred) & 0xFF
    return np.frombuffer(bytes(cur), np.uint8)


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Antialiased bilinear resize of (H, W, C) uint8, the way reference pipelines do it: Pillow's
    ``Image.resize(BILINEAR)`` when Pillow is installed, else the same algorithm here (a triangle filter
    widened by the reduction factor, 22-bit fixed-point weights, horizontal pass then vertical, each rounded
    to uint8: bit-exact with Pillow up to 12; Pillow 13 sometimes runs the vertical pass first).
    Quantized models are sensitive to one-LSB differences (movenet keypoints moved by 0.025 with a
    float-only resize), so the reference pipeline is matched rather than approximated."""
    if image.shape[:2] == (height, width):
        return image
    try:
        from PIL import Image
    except ImportError:
        out = _horizontal(image, width) if image.shape[1] != width else image
        return np.ascontiguousarray(_vertical(out, height) if image.shape[0] != height else out)
    h, w, c = image.shape
    resized = Image.fromarray(image[..., 0] if c == 1 else image).resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(resized).reshape(height, width, c)


def _vertical(image: np.ndarray, height: int) -> np.ndarray:
    h, w, c = image.shape
    return _pass(image.reshape(h, w * c), _weights(h, height)).reshape(height, w, c)


def _horizontal(image: np.ndarray, width: int) -> np.ndarray:
    h, w, c = image.shape
    out = _pass(image.transpose(1, 0, 2).reshape(w, h * c), _weights(w, width))
    return out.reshape(width, h, c).transpose(1, 0, 2)


_PRECISION_BITS = 32 - 8 - 2  # Pillow's fixed-point precision for 8-bit images


def _pass(data: np.ndarray, taps: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """One separable pass along axis 0: each output row sums a few input rows with integer weights, in
    int64 like Pillow (exact), a tap at a time so that memory stays at one output-sized accumulator."""
    index, weight = taps
    acc = np.full((index.shape[0], data.shape[1]), 1 << (_PRECISION_BITS - 1), np.int64)
    for k in range(index.shape[1]):
        acc += weight[:, k, None] * data[index[:, k]]
    return np.clip(acc >> _PRECISION_BITS, 0, 255).astype(np.uint8)


def _weights(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(input index, fixed-point weight) per output pixel and tap, Pillow's triangle filter and window."""
    scale = size_in / size_out
    support = max(scale, 1.0)
    centers = (np.arange(size_out) + 0.5) * scale
    lo = np.maximum((centers - support + 0.5).astype(np.int64), 0)  # Pillow: int(center - support + 0.5)
    hi = np.minimum((centers + support + 0.5).astype(np.int64), size_in)
    taps = int((hi - lo).max())
    index = lo[:, None] + np.arange(taps)[None, :]
    valid = index < hi[:, None]
    w = np.where(valid, np.maximum(0.0, 1.0 - np.abs(index + 0.5 - centers[:, None]) / support), 0.0)
    w /= w.sum(axis=1, keepdims=True)
    fixed = np.where(w < 0, np.trunc(-0.5 + w * (1 << _PRECISION_BITS)), np.trunc(0.5 + w * (1 << _PRECISION_BITS)))
    return np.minimum(index, size_in - 1), fixed.astype(np.int64)


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
    ``pipeline`` (an ``edgeaccel.model_pipeline.ModelPipeline``) gives a dynamic input its size, letterbox or
    stretch, colour order and, unless ``normalize`` is given, the normalization."""
    size = pipeline.imgsz if pipeline is not None else None
    if pipeline is not None:
        from .model_pipeline import check_given_size

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
        from .vision.preprocess import fit

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
    from .model_pipeline import pipeline_of

    user = {"imgsz": imgsz, "letterbox": letterbox}
    pipeline = pipeline_of(model, user) if not isinstance(model, TensorSpec) else pipeline_of(None, user)
    array, _ = image_to_input(read_image(path), spec, normalize, pipeline)
    return array
