"""Encoded images in a request: JPEG/PNG (any format Pillow reads) bytes to an RGB array, and the file part of
a multipart/form-data body (what a browser form and ``curl -F image=@photo.jpg`` send).

Every failure is a 400 that says what the bytes were and what to send; a decompression bomb (a small file
that declares a huge image) is refused from its header, before its pixels are decoded."""

from __future__ import annotations

import io
import warnings

import numpy as np

from .errors import ServeError

_QUIET = False  # Pillow's DecompressionBombWarning filtered (_quiet_bomb_warning)
MAX_PIXELS = 50_000_000  # width x height an image may declare (an 8K frame is 33 MP)
IMAGE_SIGNATURES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"GIF8", "GIF"), (b"BM", "BMP"),
                    (b"RIFF", "WebP"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))


def decode_image(data: bytes | memoryview, where: str = "the request's image") -> np.ndarray:
    """H x W x 3 (or x 1, grey) uint8 pixels from encoded image bytes, decoded as ``edgeaccel.load(...).predict``
    decodes a file (``edgeaccel.imageio``), so that the same image gives the same answer: EXIF orientation
    applied (a phone's portrait photo comes upright), 16-bit samples scaled to 8 bits (never clipped), alpha
    dropped, palette and CMYK images to RGB, the first frame of an animation."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise ServeError(500, "the server cannot decode images: Pillow is not installed on it "
                              '(pip install "edgeaccel[serve]"); send tensors to /infer meanwhile') from None
    from ..errors import InputError
    from ..imageio.decode import _from_pillow, upright

    _quiet_bomb_warning(Image)
    data = bytes(data)
    if not data:
        raise ServeError(400, f"{where} is empty: send the bytes of a JPEG or PNG image")
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise ServeError(400, f"{where} is {width}x{height} pixels, more than the server decodes "
                                      f"({MAX_PIXELS // 1_000_000} MP); scale it down first")
            if width < 1 or height < 1:
                raise ServeError(400, f"{where} declares {width}x{height} pixels: send an image with pixels")
            image.load()
            return _from_pillow(upright(image), where)
    except ServeError:
        raise
    except InputError as exc:  # a mode with no 8-bit meaning (float, 32-bit): what to convert it to
        raise ServeError(400, f"{exc.message}; {exc.hint}" if exc.hint else exc.message) from None
    except Image.DecompressionBombError:  # Pillow's own refusal, from the header, of an even larger one
        raise ServeError(400, f"{where} declares more pixels than the server decodes "
                              f"({MAX_PIXELS // 1_000_000} MP); scale it down first") from None
    except UnidentifiedImageError:
        raise ServeError(400, f"{where} is not an image the server can decode ({_looks_like(data)}: no image "
                              f"format recognized); send JPEG or PNG bytes") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated or corrupt: Pillow's reason
        raise ServeError(400, f"{where} is not an image the server can decode ({_looks_like(data)}: "
                              f"{exc}); send a complete JPEG or PNG file") from None


def _quiet_bomb_warning(image_module) -> None:
    """Pillow warns on stderr (once a request) about an image past 89 MP before the 50 MP check here refuses it
    with a 400: a flood of such requests would fill the server's log with a warning already answered."""
    global _QUIET
    if not _QUIET:
        warnings.filterwarnings("ignore", category=image_module.DecompressionBombWarning)
        _QUIET = True


def _looks_like(data: bytes) -> str:
    for magic, name in IMAGE_SIGNATURES:
        if data.startswith(magic):
            return f"it starts like {name}, {len(data)} bytes"
    if data[:1] in (b"{", b"["):
        return "it looks like JSON: tensors go to /infer, images to /predict"
    return f"{len(data)} bytes starting {data[:8]!r}"


def multipart_file(body: bytes, content_type: bytes) -> tuple[bytes, dict[str, str]]:
    """The first file part of a multipart/form-data body (or the part named ``image``), and the other fields
    (short text values: options such as ``masks``)."""
    boundary = _boundary(content_type)
    delimiter = b"--" + boundary
    image, fields = None, {}
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break  # the closing delimiter
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        if content.endswith(b"\r\n"):
            content = content[:-2]
        disposition = _disposition(head)
        name = disposition.get("name", "")
        if "filename" in disposition or name == "image":
            if image is None or name == "image":
                image = content
        elif name and len(content) <= 256:
            fields[name] = content.decode("utf-8", "replace").strip()
    if image is None:
        raise ServeError(400, "the multipart body has no file part: send the image as a file field "
                              "(curl -F image=@photo.jpg)")
    return image, fields


def _boundary(content_type: bytes) -> bytes:
    for item in content_type.split(b";")[1:]:
        key, _, value = item.strip().partition(b"=")
        if key.lower() == b"boundary" and value:
            return value.strip(b'"')
    raise ServeError(400, "multipart/form-data without a boundary: let the client (curl -F, a browser form, "
                          "requests' files=) write the Content-Type header")


def _disposition(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.decode("utf-8", "replace").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() != "content-disposition":
            continue
        for item in value.split(";")[1:]:
            k, _, v = item.strip().partition("=")
            out[k.lower()] = v.strip('"')
    return out
