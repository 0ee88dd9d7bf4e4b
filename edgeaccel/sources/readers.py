"""Sources: where frames come from. Each gives decoded RGB frames (H, W, 3) uint8 with a source timestamp.

Video files, cameras (V4L2 ``/dev/videoN``) and network streams (RTSP, HTTP(S) including MJPEG, RTMP, ...)
are read with PyAV, which bundles FFmpeg (the ``video`` extra); image folders and globs with edgeaccel's own
image reader; any Python iterable of arrays as it is.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import SourceError
from .source import RawFrame, Source

NETWORK_SCHEMES = ("rtsp://", "rtsps://", "http://", "https://", "rtmp://", "rtmps://", "udp://", "tcp://", "srt://")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
_CAMERA = re.compile(r"^/dev/video\d+$")


class IterableSource(Source):
    """Any iterable of images: (H, W, 3) RGB or (H, W) / (H, W, 1) gray arrays, uint8."""

    kind = "iterable"

    def __init__(self, items: Iterable, name: str = "iterable", fps: float | None = None) -> None:
        super().__init__(name)
        self.items = items
        self.fps = fps
        self.clock, self.frame_rate = fps is not None, fps

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        start = time.monotonic()
        for n, item in enumerate(self.items):
            if stop.is_set():
                return
            now = time.monotonic()
            yield RawFrame(as_rgb(item, f"{self.name} item {n}"), n / self.fps if self.fps else now - start, now)


class ImageFilesSource(Source):
    """Image files, in name order: a folder's images or a glob's matches."""

    kind = "images"

    def __init__(self, paths: list[Path], name: str, fps: float | None = None) -> None:
        super().__init__(name)
        self.paths = paths
        self.fps = fps
        self.clock, self.frame_rate = fps is not None, fps

    def open(self) -> None:
        if not self.paths:
            raise SourceError(f"{self.name} holds no images", hint=f"image files end in {sorted(IMAGE_SUFFIXES)}")

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        from ..imageio import read_image

        for n, path in enumerate(self.paths):
            if stop.is_set():
                return
            image = as_rgb(read_image(path), str(path))
            yield RawFrame(image, n / self.fps if self.fps else float(n), time.monotonic())


def as_rgb(item: Any, what: str):
    import numpy as np

    array = np.asarray(item)
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (1, 3, 4)) or array.dtype != np.uint8:
        raise SourceError(f"{what} is {array.dtype}{list(array.shape)}, not an image",
                          hint="give (H, W, 3) RGB or (H, W) gray uint8 arrays")
    if array.ndim == 2:
        array = array[..., None]
    if array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    elif array.shape[2] == 4:
        array = array[..., :3]
    return array


def open_source(spec: Any, *, name: str | None = None, **options: Any) -> Source:
    """The Source for ``spec``: a Source as is; a path or URL by what it names; any other iterable of arrays."""
    if isinstance(spec, Source):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        label = name or text
        if text.lower().startswith(NETWORK_SCHEMES):
            from .network import NetworkSource

            return NetworkSource(text, label, **options)
        if _CAMERA.match(text):
            from .video import CameraSource

            return CameraSource(text, label, **_only(options, "open_timeout", "read_timeout"))
        if any(c in text for c in "*?["):
            paths = sorted(Path(p) for p in glob.glob(text) if Path(p).suffix.lower() in IMAGE_SUFFIXES)
            return ImageFilesSource(paths, label, options.get("fps"))
        path = Path(text)
        if path.is_dir():
            paths = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            return ImageFilesSource(paths, label, options.get("fps"))
        if not path.exists():
            raise SourceError(f"no such file or folder: {text}",
                              hint="give a video file, an image folder or glob, /dev/videoN, or an rtsp:// or "
                                   "http(s):// URL")
        if path.suffix.lower() in IMAGE_SUFFIXES:
            return ImageFilesSource([path], label, options.get("fps"))
        from .video import FileSource

        return FileSource(text, label, loop=options.get("loop", False))
    if isinstance(spec, Iterable):
        return IterableSource(spec, name or f"iterable-{id(spec):x}", options.get("fps"))
    raise SourceError(f"{type(spec).__name__} is not a source",
                      hint="give a path, URL, /dev/videoN, or an iterable of (H, W, 3) uint8 arrays")


def _only(options: dict, *keys: str) -> dict:
    return {k: v for k, v in options.items() if k in keys}
