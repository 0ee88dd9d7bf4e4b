"""Where frames go besides the caller: an annotated video file, image files, JSON lines, a callback.

Annotated means drawn by the task layer (``Result.render``) where the model has a task; without one, frames
are written as they came."""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Callable

from ..errors import InputError
from .sink import Sink, rendered


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
    from .video_sink import VIDEO_SUFFIXES, VideoSink

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


__all__ = ["CallbackSink", "ImageSink", "JsonLinesSink", "Sink", "as_sinks", "rendered"]


def __getattr__(name: str):
    if name in ("VideoSink", "VIDEO_SUFFIXES"):  # in video_sink.py, which subclasses Sink
        from . import video_sink

        return getattr(video_sink, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
