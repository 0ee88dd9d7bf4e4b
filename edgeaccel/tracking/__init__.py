"""Tracking, lines and zones on live video: stable ids for detected objects, in/out counts per class across
lines and zones, dwell times, and events with the source's timestamps.

    with edgeaccel.load("yolov8n.onnx") as model:
        for frame in model.watch("cars.mp4", track=True, zones="zones.yaml"):
            print([b.track_id for b in frame.result.boxes], frame.events, frame.zones)

Matching needs SciPy (``pip install 'edgeaccel[track]'``), imported on the first tracked frame. See
docs/sources.md (Tracking, lines and zones).
"""

from __future__ import annotations

from .config import as_zones, load_zones, parse_spec
from .events import Event
from .tracker import Track, Tracker, TrackerOptions
from .zones import Line, Zone, Zones

__all__ = ["Event", "Line", "Track", "Tracker", "TrackerOptions", "Zone", "Zones", "as_zones", "load_zones",
           "parse_spec"]
