"""The annotated video sink: one file per source, timed by the source's own clock.

A frame is written at its source timestamp (the presentation time PyAV gives), relative to the source's first
frame, so a 25 fps file gives a 25 fps video of the same duration, a variable frame rate source keeps its
spacing, and frames a live policy dropped leave their gap rather than speeding the video up. Sources without a
clock of their own (an image folder or an iterable without ``fps=``) are written one frame after another at the
sink's ``fps`` (30 unless given), as is every source when ``fps=`` is given explicitly.
"""

from __future__ import annotations

import logging
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import InputError
from .errors import import_av
from .sink import Sink, rendered

log = logging.getLogger("edgeaccel")

VIDEO_SUFFIXES = {".mp4": "libx264", ".mkv": "libx264", ".mov": "libx264", ".avi": "mjpeg"}
DEFAULT_FPS = 30
_FINE_TIME_BASE = Fraction(1, 90000)  # MPEG's clock: 25, 30, 30000/1001, 50, 60 fps all land on whole ticks


class VideoSink(Sink):
    """An annotated video per source (``out.mp4``; with several sources ``out-1.mp4``, ``out-2.mp4`` ..., each
    with its own source's timing), at the size of the source's first frame (later sizes are resized to it).

    fps: None (default) keeps each source's frame rate and timestamps; a number writes every source at that
    rate, one frame after another (gaps left by dropped frames stay gaps)."""

    def __init__(self, path: str | os.PathLike, fps: float | None = None, sources: int = 1) -> None:
        self.path = Path(path)
        codec = VIDEO_SUFFIXES.get(self.path.suffix.lower())
        if codec is None:
            raise InputError(f"cannot write video {self.path.name}: unknown suffix",
                             hint=f"use one of {sorted(VIDEO_SUFFIXES)}")
        if not self.path.parent.is_dir():
            raise InputError(f"cannot write {self.path}: no folder {self.path.parent}")
        if fps is not None and not fps > 0:
            raise InputError(f"fps={fps!r}: a video's frame rate must be positive",
                             hint="leave fps out to keep the source's rate")
        self.codec, self.fps, self.sources = codec, fps, sources
        self._sources: list[Any] = []
        self._tracks: dict[int, _Track] = {}
        self.paths: list[Path] = []

    def attach(self, sources: list) -> None:
        """The pipeline's Source objects, whose frame rate and clock time the videos."""
        self._sources = list(sources)
        self.sources = max(self.sources, len(sources))

    def _target(self, source: int) -> Path:
        if self.sources == 1:
            return self.path
        return self.path.with_name(f"{self.path.stem}-{source + 1}{self.path.suffix}")

    def write(self, frame, source: int) -> None:
        image = rendered(frame)
        if image is None:
            return
        track = self._tracks.get(source)
        if track is None:
            origin = self._sources[source] if source < len(self._sources) else None
            track = self._tracks[source] = _Track(self._target(source), self.codec, image, origin, self.fps)
            self.paths.append(track.path)
        track.write(image, frame)

    def close(self) -> None:
        tracks, self._tracks = list(self._tracks.values()), {}
        for track in tracks:
            track.close()


class _Track:
    """One output file: its encoder, its time base, and the mapping from source timestamps to its PTS."""

    def __init__(self, path: Path, codec: str, image, origin, fps: float | None) -> None:
        av = import_av()
        self.path = path
        self.name = getattr(origin, "name", path.name)
        # timed by the source's clock only when it has one and no fps was forced
        self.timed = fps is None and bool(getattr(origin, "clock", False))
        rate = _rate(fps if fps is not None else getattr(origin, "frame_rate", None))
        self.interval = 1 / rate
        # AVI stores a constant rate (one tick per frame); the others take any timestamp on a fine clock
        self.time_base = 1 / rate if codec == "mjpeg" else _FINE_TIME_BASE
        self.container = av.open(str(path), "w")
        self.stream = self.container.add_stream(codec, rate=rate)
        self.stream.height, self.stream.width = image.shape[0] - image.shape[0] % 2, image.shape[1] - image.shape[1] % 2
        self.stream.pix_fmt = "yuv420p" if codec != "mjpeg" else "yuvj420p"
        self.stream.codec_context.time_base = self.time_base
        self.size = (self.stream.height, self.stream.width)
        self.first: float | None = None
        self.shift = 0.0  # seconds added to this source's timestamps since they went back (a reconnect)
        self.last_pts: int | None = None
        self.last_captured = 0.0

    def pts(self, frame) -> int:
        if self.timed and frame.timestamp is not None:
            seconds = float(frame.timestamp)
        else:  # one frame after another; the index keeps the gap of a dropped frame
            seconds = frame.index * float(self.interval)
        if self.first is None:
            self.first = seconds
        pts = round((seconds - self.first + self.shift) / self.time_base)
        if self.last_pts is not None and pts <= self.last_pts:
            ticks_per_frame = max(1, round(self.interval / self.time_base))
            if self.last_pts - pts >= ticks_per_frame:  # gone back, not merely rounded onto one tick
                # a reconnected stream restarts its clock: continue after the last frame, by the real outage
                gap = max(float(self.interval), frame.captured - self.last_captured)
                log.warning("video %s: the timestamps of %s went back at frame %d; the video continues %.2f s "
                            "after the frame before", self.path.name, self.name, frame.index, gap)
                new = self.last_pts + max(1, round(gap / self.time_base))
            else:  # two timestamps on one tick of a constant-rate container (AVI): the next tick
                new = self.last_pts + 1
            self.shift += float((new - pts) * self.time_base)
            pts = new
        self.last_pts, self.last_captured = pts, frame.captured
        return pts

    def write(self, image, frame) -> None:
        av = import_av()
        if image.shape[:2] != self.size:
            from ..imageio import resize

            image = resize(image, *self.size)
        video_frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        video_frame.time_base = self.time_base
        video_frame.pts = self.pts(frame)
        # the last frame's duration: a frame interval (the muxer times the others by the next one's timestamp)
        video_frame.duration = max(1, round(self.interval / self.time_base))
        for packet in self.stream.encode(video_frame):
            self.container.mux(packet)

    def close(self) -> None:
        try:
            for packet in self.stream.encode():
                self.container.mux(packet)
        finally:
            self.container.close()


def _rate(value) -> Fraction:
    """A nominal frame rate as a Fraction the encoders take: the source's (30000/1001 stays exact), or 30 when
    it has none or an implausible one (some streams report their clock's 90000)."""
    if value:
        rate = Fraction(value).limit_denominator(1001)
        if 0 < rate <= 1000:
            return rate
    return Fraction(DEFAULT_FPS)
