"""What tracking and zones report: events with the source's timestamps, JSON-ready."""

from __future__ import annotations

from dataclasses import dataclass

# new: a track is confirmed (its id is given out); lost: not seen on this frame; found: seen again after lost;
# ended: lost longer than max_lost_s (or the source's clock went back); enter/exit: a zone; cross: a line
EVENT_TYPES = ("new", "lost", "found", "ended", "enter", "exit", "cross")


@dataclass
class Event:
    type: str
    track_id: int
    timestamp: float  # the source's time, seconds (a crossing: interpolated between the two frames around it)
    class_id: int
    label: str
    where: str | None = None  # the zone or line's name
    direction: str | None = None  # a crossing: "in" or "out"
    dwell_s: float | None = None  # an exit: how long the track was in the zone

    def to_dict(self) -> dict:
        out = {"type": self.type, "track_id": self.track_id, "timestamp": round(self.timestamp, 4),
               "class_id": self.class_id, "label": self.label}
        for key in ("where", "direction"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.dwell_s is not None:
            out["dwell_s"] = round(self.dwell_s, 4)
        return out
