"""Tracking and zones on a live pipeline: one tracker and one set of zone counts per source, run on the
finish stage (in frame order per source) on the boxes of the task's result."""

from __future__ import annotations

import logging
import os
import threading

from ..errors import InputError
from .metrics import Dwell
from .tracker import Tracker, TrackerOptions
from .zones import Zones

log = logging.getLogger("edgeaccel")


class SourceTracking:
    def __init__(self, options: TrackerOptions, zones: Zones | None) -> None:
        self.tracker = Tracker(options)
        self.zones = zones.copy() if zones is not None else None
        self._lock = threading.Lock()  # summary() is read by the live line's thread meanwhile
        self._checked = zones is None
        self.dwell = Dwell()  # every exit's time in its zone, for the metrics' histogram

    def summary(self) -> dict:
        """Ids given out so far, and the counts of the lines and zones."""
        with self._lock:
            return self.summary_unlocked()

    def snapshot(self) -> tuple[dict, dict]:
        """The summary and the dwell histogram, read together (the metrics' scrape)."""
        with self._lock:
            return self.summary_unlocked(), self.dwell.cumulative()

    def summary_unlocked(self) -> dict:
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
            for event in events:
                if event.type == "exit" and event.dwell_s is not None and event.where is not None:
                    self.dwell.observe(event.where, event.label, event.dwell_s)
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


def tracking_options(task, track, zones):
    """(TrackerOptions, Zones or None) for ``track=`` and ``zones=`` (zones track too), or None."""
    if not track and zones is None:
        return None
    from . import TrackerOptions, as_zones
    from .assignment import _solver

    if not tracks_boxes(task):
        what = f"a {task.name} model" if task is not None else "a model without a task"
        raise InputError(f"tracking needs boxes, and {what} gives none",
                         hint="track a detect (or instance segmentation) model: load it with task='detect'")
    _solver()  # SciPy missing is said now, not on the first frame
    from_file = None
    if isinstance(zones, (str, os.PathLike)):  # a zones file may hold tracker options too
        from . import load_zones

        zones, from_file = load_zones(zones)
    if track in (None, False, True) and from_file:
        track = from_file  # track=TrackerOptions(...) or a dict given in Python wins over the file's
    options = TrackerOptions.from_value(True if track in (None, False) else track)
    return options, as_zones(zones) if zones is not None else None
