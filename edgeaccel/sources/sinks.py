"""Where frames go besides the caller: an annotated video file, image files, JSON lines, a callback.

Annotated means drawn by the task layer (``Result.render``) where the model has a task; without one, frames
are written as they came."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from .errors import import_av

VIDEO_SUFFIXES = {".mp4": "libx264", ".mkv": "libx264", ".mov": "libx264", ".avi": "mjpeg"}


class Sink:
    def write(self, frame, source: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def rendered(frame):
    """The frame drawn by its task result, or the frame itself."""
    render = getattr(frame.result, "render", None)
    return render(frame.image) if render is not None and frame.image is not None else frame.image


class VideoSink(Sink):
    """An annotated video per source (``out.mp4``; with several sources ``out-1.mp4``, ``out-2.mp4`` ...), at
    the size of the source's first frame (later sizes are resized to it) and ``fps`` (default 30)."""

    def __init__(self, path: str | os.PathLike, fps: float = 30.0, sources: int = 1) -> None:
        self.path = Path(path)
        codec = VIDEO_SUFFIXES.get(self.path.suffix.lower())
        if codec is None:
            raise InputError(f"cannot write video {self.path.name}: unknown suffix",
                             hint=f"use one of {sorted(VIDEO_SUFFIXES)}")
        if not self.path.parent.is_dir():
            raise InputError(f"cannot write {self.path}: no folder {self.path.parent}")
        self.codec, self.fps, self.sources = codec, fps, sources
        self._open: dict[int, tuple[Any, Any, tuple[int, int]]] = {}
        self.paths: list[Path] = []

    def _target(self, source: int) -> Path:
        if self.sources == 1:
            return self.path
        return self.path.with_name(f"{self.path.stem}-{source + 1}{self.path.suffix}")

    def write(self, frame, source: int) -> None:
        image = rendered(frame)
        if image is None:
            return
        av = import_av()
        if source not in self._open:
            path = self._target(source)
            container = av.open(str(path), "w")
            stream = container.add_stream(self.codec, rate=round(self.fps))
            stream.height, stream.width = image.shape[0] - image.shape[0] % 2, image.shape[1] - image.shape[1] % 2
            stream.pix_fmt = "yuv420p" if self.codec != "mjpeg" else "yuvj420p"
            self._open[source] = (container, stream, (stream.height, stream.width))
            self.paths.append(path)
        container, stream, (height, width) = self._open[source]
        if image.shape[:2] != (height, width):
            from ..imageio import resize

            image = resize(image, height, width)
        video_frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        for packet in stream.encode(video_frame):
            container.mux(packet)

    def close(self) -> None:
        for container, stream, _ in self._open.values():
            for packet in stream.encode():
                container.mux(packet)
            container.close()
        self._open.clear()


class ImageSink(Sink):
    """One image file per frame in ``folder``: ``<source>-<index>.png`` (annotated where there is a task)."""

    def __init__(self, folder: str | os.PathLike, suffix: str = ".png") -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.suffix = suffix

    def write(self, frame, source: int) -> None:
        image = rendered(frame)
        if image is None:
            return
        try:
            from PIL import Image
        except ImportError as exc:
            raise InputError("writing image files needs Pillow", hint="pip install 'edgeaccel[images]'") from exc
        Image.fromarray(image).save(self.folder / f"{source + 1:02d}-{frame.index:06d}{self.suffix}")


class JsonLinesSink(Sink):
    """One JSON object per frame (``Frame.to_dict()``): to a file path, or to an open text stream."""

    def __init__(self, target) -> None:
        if isinstance(target, (str, os.PathLike)):
            self._file = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self._owned = True
        else:
            self._file, self._owned = target, False

    def write(self, frame, source: int) -> None:
        self._file.write(json.dumps(frame.to_dict(), default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._owned:
            self._file.close()


class CallbackSink(Sink):
    """Calls ``fn(frame)`` for each frame, on the pipeline's sink thread."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def write(self, frame, source: int) -> None:
        self.fn(frame)


def as_sinks(sinks, sources: int) -> list[Sink]:
    """Sinks from what the caller gave: Sink objects, callables, or paths (a video suffix: VideoSink; .jsonl:
    JsonLinesSink; anything else: a folder for ImageSink)."""
    if sinks is None:
        return []
    if isinstance(sinks, (str, os.PathLike, Sink)) or callable(sinks):
        sinks = [sinks]
    out: list[Sink] = []
    for sink in sinks:
        if isinstance(sink, Sink):
            out.append(sink)
        elif callable(sink):
            out.append(CallbackSink(sink))
        elif isinstance(sink, (str, os.PathLike)):
            suffix = Path(sink).suffix.lower()
            if suffix in VIDEO_SUFFIXES:
                out.append(VideoSink(sink, sources=sources))
            elif suffix in (".jsonl", ".ndjson"):
                out.append(JsonLinesSink(sink))
            else:
                out.append(ImageSink(sink))
        else:
            raise InputError(f"{sink!r} is not a sink", hint="give a path, a callable or an edgeaccel.sources Sink")
    return out
