"""Live sources: video files, cameras and network streams through one pipeline that never falls behind.

    with edgeaccel.load("traffic_model.tflite") as model:
        for frame in model.watch("rtsp://cam.local/stream", drop="oldest", max_fps=15):
            print(frame.index, frame.timestamp, frame.latency_ms, frame.outputs)

Video, cameras and streams need PyAV (``pip install 'edgeaccel[video]'``), imported only when one is opened.
See docs/sources.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pipeline import Pipeline

# Resolved on first use: `edgeaccel run IMAGE` asks only whether an --input is a live source (readers'
# constants) and must not pay for the pipeline's imports in peak memory (tests/test_run_lean.py).
_LAZY = {"SourceError": "errors", "SourceLostError": "errors", "Frame": "frame", "Pipeline": "pipeline",
         "DROP_POLICIES": "queues", "IterableSource": "readers", "Source": "readers", "open_source": "readers",
         "CallbackSink": "sinks", "ImageSink": "sinks", "JsonLinesSink": "sinks", "Sink": "sinks",
         "VideoSink": "video_sink"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["CallbackSink", "DROP_POLICIES", "Frame", "ImageSink", "IterableSource", "JsonLinesSink", "Pipeline",
           "Sink", "Source", "SourceError", "SourceLostError", "VideoSink", "open_source", "watch"]


def watch(model, source, *more, **options) -> Pipeline:
    """Frames of ``source`` (and ``more`` sources, served in turn: fairly) through ``model``: a Pipeline to
    iterate for Frames, or to ``run()`` for its sinks. It does not close the model.

    source: a video file, an image folder or glob, ``/dev/videoN``, an ``rtsp://`` / ``http(s)://`` URL, an
        iterable of (H, W, 3) uint8 arrays, or a list of these (several sources).
    drop: "none" (every frame; the decoder waits), "oldest" (a full queue drops its oldest frame) or "latest"
        (only the latest frame waits). Default: "none" for files, folders and iterables, "latest" for cameras
        and streams.
    max_fps: at most this many frames per second per source (a live source skips frames, a file is paced).
    state: recurrent state carried per source: {"output name": "input name", ...}; None recognizes it by names
        and shapes; False carries none.
    sinks: a path (video .mp4/.mkv/.mov/.avi, .jsonl, or a folder of images), a callable, a Sink, or a list.
    queue_size: frames each source queue holds (default 4); max_in_flight: requests in the model at once.
    preprocess: image -> list of input arrays, instead of the task layer or the default resize.
    reconnect_timeout, open_timeout, read_timeout: for network sources (seconds; see network.py); loop: replay a
        video file forever; fps: the timestamps of iterables and image folders; names: one name per source.
    track: True, an ``edgeaccel.tracking.TrackerOptions`` or a dict of its fields: track the boxes of a detect
        model per source (boxes get ``track_id``; frames get ``tracks`` and ``events``). Needs SciPy.
    zones: lines and zones to count on (implies track): a YAML path, or a list of ``edgeaccel.tracking.Line``
        and ``Zone`` (pixels of the frame); frames get ``zones``, the counts so far. docs/sources.md, Tracking.
    """
    if isinstance(source, (list, tuple)) and not any(hasattr(s, "shape") for s in source):
        sources = [*source, *more]
    else:
        sources = [source, *more]
    from .pipeline import Pipeline

    return Pipeline(model, sources, **options)
