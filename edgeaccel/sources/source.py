"""What every source is: ``Source`` (the base its readers extend: ``readers``, ``video``, ``network``) and the
``RawFrame`` it yields. Apart from ``readers.py`` because ``readers.open_source`` imports those readers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class RawFrame:
    image: Any  # np.ndarray (H, W, 3) uint8 RGB
    timestamp: float | None
    captured: float  # time.monotonic() when it arrived (its packet was read; an iterable's item was taken)
    segment: int = 0  # counts reconnects: a new segment starts a new stream (its state starts from zeros)
    decode_s: float = 0.0  # seconds the source took to give it (set by the pipeline's reader)


class Source:
    """Base: ``frames(stop)`` yields RawFrames until the source ends or ``stop`` is set."""

    live = False  # a live source (camera, stream) is never waited for: its frames are dropped when late
    kind = "source"
    # Timing, for sinks that keep it (a video): ``clock`` is whether frame timestamps are the source's own
    # presentation times (a video's PTS, or ``fps=`` given for an iterable or image folder) rather than
    # arrival times or frame numbers; ``frame_rate`` its nominal frames per second (None when unknown).
    clock = False
    frame_rate = None

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[str] = []  # what happened that the caller should know (size changes, reconnects)
        self.reconnects = 0
        self.outage_s = 0.0  # time without frames while reconnecting

    def open(self) -> None:
        """Check the source can be read (a file source raises SourceError here, before any thread starts)."""

    def frames(self, stop: threading.Event) -> Iterator[RawFrame]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def event(self, text: str) -> None:
        self.events.append(text)
        import logging

        logging.getLogger("edgeaccel").warning("source %s: %s", self.name, text)
