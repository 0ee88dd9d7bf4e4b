"""Image files to pixels: Pillow when it is installed (the ``images`` extra), otherwise a small PNG decoder, so
the base install can classify a PNG; both give the same pixels (8 bits, RGB or grey)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_image(path: str | Path) -> np.ndarray:
    """Decode to uint8 (H, W, C) with C = 1 (gray) or 3 (RGB); alpha is dropped. 16-bit samples become 8-bit
    (their high byte), palette images RGB, 1-bit images 0/255; floating-point and 32-bit images, whose range
    is unknown, are refused with an InputError. A photo's EXIF orientation is applied (the pixels come upright,
    as a viewer shows them and as ``edgeaccel serve`` decodes an upload); an animation gives its first frame."""
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
            return _from_pillow(upright(img), name)
    except OSError:
        raise  # the caller tells a file system error from an image's
    except InputError:
        raise
    except Exception as exc:  # Pillow raises UnidentifiedImageError, DecompressionBombError ...
        raise InputError(f"cannot decode image {name}: {exc}") from exc


def upright(img):
    """The image turned as its EXIF orientation tag says (a phone stores a portrait photo sideways and tags
    it); the image itself when it has no tag or an upright one, so that most images are not copied."""
    from PIL import ImageOps

    try:
        if img.getexif().get(0x0112, 1) in (None, 1):
            return img
        return ImageOps.exif_transpose(img)
    except Exception:  # an EXIF block Pillow cannot parse: the pixels are still the image's, unturned
        return img


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
