"""Video files and V4L2 cameras through PyAV (FFmpeg): decoding, and FFmpeg's errors as SourceErrors."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator

from .errors import SourceError, import_av
from .source import RawFrame, Source

DEFAULT_OPEN_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 5.0  # a stalled read ends after this (so that close() never waits longer)


def open_container(url: str, name: str, *, format: str | None = None, options: dict | None = None,
                   open_timeout: float = DEFAULT_OPEN_TIMEOUT_S, read_timeout: float = DEFAULT_READ_TIMEOUT_S):
    """``av.open`` for reading, FFmpeg's errors turned into SourceErrors that say what to do."""
    av = import_av()
    try:
        container = av.open(url, format=format, options=options or {}, timeout=(open_timeout, read_timeout))
    except av.error.FFmpegError as exc:
        raise _source_error(exc, name) from exc
    if not container.streams.video:
        container.close()
        raise SourceError(f"{name} has no video stream", hint="give a video file, a camera or a video stream")
    return container


def _source_error(exc: BaseException, name: str) -> SourceError:
    code = getattr(exc, "errno", None)
    text = getattr(exc, "strerror", None) or str(exc)
    if code == errno.EBUSY:
        return SourceError(f"{name} is busy: {text}", hint="another program is using the camera; close it first")
    if code in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
        return SourceError(f"{name} does not exist: {text}", hint="check the path (ls /dev/video*) or the URL")
    if code in (errno.EACCES, errno.EPERM):
        return SourceError(f"{name} cannot be opened: {text}", hint="add your user to the 'video' group")
    if code == errno.ECONNREFUSED:
        return SourceError(f"{name} refused the connection: {text}", hint="is the stream server running?")
    if "Invalid data" in text:
        return SourceError(f"{name} is not a video FFmpeg can read: {text}",
                           hint="give a video file (mp4, mkv, avi, ...), an image folder or a stream URL")
    return SourceError(f"cannot read {name}: {text}")


def decode(container, source: Source, stop: threading.Event, *, time_offset: float = 0.0,
           segment: int = 0) -> Iterator[RawFrame]:
    """Decode the first video stream into RGB frames until it ends or ``stop`` is set. A frame's ``captured``
    time is when its packet arrived (was read from the source), so that its latency includes the decoder's."""
    av = import_av()
    stream = container.streams.video[0]
    if not stream.codec_context.is_open:  # a looped file decodes again with its open decoder
        # FFmpeg's own decoding threads, outside the GIL. Frame threads hold back one frame per thread (2 more
        # frames on 2 cores: 67 ms at 30 fps): a live source decodes with slice threads, which hold none back.
        stream.thread_type = "SLICE" if source.live else "AUTO"
    if stream.codec_context is None:
        raise SourceError(f"{source.name}: FFmpeg has no decoder for its {stream.codec_tag or 'video'} codec",
                          hint="re-encode it (H.264, VP9, MJPEG are read everywhere)")
    # the stream's timing, which a video sink keeps: its nominal rate, and frame times from its PTS
    source.frame_rate = stream.average_rate or stream.guessed_rate or source.frame_rate
    source.clock = True
    start = time.monotonic()
    arrived: dict[int, float] = {}  # packet pts -> when it was read; bounded (a frame without a packet's pts)
    try:
        for packet in container.demux(stream):
            if packet.pts is not None:
                if len(arrived) >= 64:
                    arrived.clear()
                arrived[packet.pts] = time.monotonic()
            for frame in packet.decode():
                image = frame.to_ndarray(format="rgb24")
                now = time.monotonic()
                stamp = frame.time
                captured = arrived.pop(frame.pts, now) if frame.pts is not None else now
                yield RawFrame(image, (stamp + time_offset) if stamp is not None else now - start, captured, segment)
                if stop.is_set():
                    return
    except av.error.FFmpegError as exc:
        raise _source_error(exc, source.name) from exc


class FileSource(Source):
    """A video file (any container and codec the bundled FFmpeg reads); ``loop`` replays it forever."""

    kind = "file"

    def __init__(self, path: str, name: str, loop: bool = False) -> None:
        super().__init__(name)
        self.path = path
        self.loop = loop
        self._container = None

    def open(self) -> None:
        self._container = open_container(self.path, self.name)

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        if self._container is None:
            self.open()
        offset = 0.0
        while True:
            last = None
            for raw in decode(self._container, self, stop, time_offset=offset):
                last = raw
                yield raw
            if not self.loop or stop.is_set() or last is None:
                return
            # the replay starts one frame interval after the last frame, as the next frame would have
            step = 1 / float(self.frame_rate) if self.frame_rate else 1e-3
            offset = (last.timestamp or 0.0) + step
            self._container.seek(0)

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None


class CameraSource(Source):
    """A V4L2 camera, ``/dev/videoN``: live (late frames are dropped, never queued)."""

    kind = "camera"
    live = True

    def __init__(self, path: str, name: str, open_timeout: float = DEFAULT_OPEN_TIMEOUT_S,
                 read_timeout: float = DEFAULT_READ_TIMEOUT_S) -> None:
        super().__init__(name)
        self.path = path
        self.timeouts = (open_timeout, read_timeout)
        self._container = None

    def open(self) -> None:
        if not os.path.exists(self.path):
            raise SourceError(f"no camera at {self.path}",
                              hint="list the cameras with `ls /dev/video*`; is it plugged in?")
        self._container = open_container(self.path, self.name, format="v4l2", open_timeout=self.timeouts[0],
                                          read_timeout=self.timeouts[1])

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        if self._container is None:
            self.open()
        yield from decode(self._container, self, stop)

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None
