"""Tracking and zones on a live pipeline: one tracker and one set of zone counts per source, run on the
finish stage (in frame order per source) on the boxes of the task's result."""

from __future__ import annotations

import logging
import threading

from .tracker import Tracker, TrackerOptions
from .zones import Zones

log = logging.getLogger("edgeaccel")


class SourceTracking:
    def __init__(self, options: TrackerOptions, zones: Zones | None) -> None:
        self.tracker = Tracker(options)
        self.zones = zones.copy() if zones is not None else None
        self._lock = threading.Lock()  # summary() is read by the live line's thread meanwhile
        self._checked = zones is None

    def summary(self) -> dict:
        """Ids given out so far, and the counts of the lines and zones."""
        with self._lock:
            out = {"tracks": self.tracker.confirmed}
            if self.zones is not None:
                out.update(self.zones.summary())
            return out

    def apply(self, frame) -> None:
        """Track ``frame.result``'s boxes at the frame's time; the frame gets its tracks, events and counts."""
        boxes = boxes_of(frame.result)
        if boxes is None:
            return
        timestamp = frame.timestamp if frame.timestamp is not None else frame.captured
        if not self._checked and self.zones is not None and getattr(frame, "image", None) is not None:
            self._checked = True
            for warning in self.zones.outside(*frame.image.shape[:2]):
                log.warning("%s: %s", getattr(frame, "source", "source"), warning)
        with self._lock:
            self._apply(frame, boxes, timestamp)

    def _apply(self, frame, boxes: list, timestamp: float) -> None:
        before = {t.id: t for t in self.tracker.tracks}
        events = self.tracker.update(boxes, timestamp)
        if self.zones is not None:
            for event in events:
                if event.type == "ended" and event.track_id in before:
                    events += self.zones.ended(before[event.track_id])
            events += self.zones.update(self.tracker.tracks, timestamp)
            frame.zones = self.zones.summary()
            frame.zone_shapes = self.zones
        frame.tracks = [t for t in self.tracker.tracks if t.state == "tracked"]
        frame.events = sorted(events, key=lambda e: e.timestamp)


def boxes_of(result) -> list | None:
    """The boxes a task result holds (detections, or instance segmentation's instances), else None."""
    boxes = getattr(result, "boxes", None)
    if boxes is None:
        boxes = getattr(result, "instances", None)
    return boxes


def tracks_boxes(task) -> bool:
    """Whether a task's results have boxes to track."""
    return getattr(task, "name", None) in ("detect", "segment")
