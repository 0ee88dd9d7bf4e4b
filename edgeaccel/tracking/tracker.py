"""A ByteTrack-style multi-object tracker: detections become tracks with stable ids, in source time.

Each frame: (1) confident boxes are matched to the confirmed tracks (seen or lost) by IoU with where each
track is predicted to be now, then those left over again with boxes grown by ``buffer`` (C-BIoU's cascade);
(2) the less confident boxes are matched to the tracks still unmatched that were seen on the previous frame
(ByteTrack's idea: an occluded object's score drops, its box still continues its track); (3) confident boxes
left over continue tentative tracks (buffered IoU: a new track has no speed yet), or start new ones. A
tentative track is confirmed (gets its id) after ``min_hits`` matches, a confirmed one unmatched is lost and
ends after ``max_lost_s`` seconds without a match.

Motion is constant velocity in *time*: a track's box moves by its velocity (pixels per second) times the
seconds since it was last seen, so dropped frames, a lower frame rate or uneven timestamps change nothing but
how far a box is predicted to have moved.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .assignment import assign, iou_matrix
from .events import Event


@dataclass
class TrackerOptions:
    """Thresholds of the tracker (defaults: those of Ultralytics' ByteTrack configuration, in seconds)."""

    high_threshold: float = 0.25  # boxes at or above it: first association, and may start tracks
    low_threshold: float = 0.1  # boxes from here to high_threshold: only continue tracks (the task's conf= must
    # be this low for the detector to give them: by default it keeps boxes from 0.25 (YOLO) or 0.3)
    new_track_threshold: float = 0.25  # a box left unmatched starts a track from this score
    match_iou: float = 0.2  # the least IoU of a confident box with a track's predicted box
    low_match_iou: float = 0.5  # the least IoU for a low-score box
    min_hits: int = 2  # matches before a track is confirmed and its id given out
    max_lost_s: float = 1.0  # seconds a lost track waits to be found again before it ends
    class_aware: bool = False  # match only boxes of the track's class (a detector's class may flicker)
    buffer: float = 0.5  # for a second look at what is left unmatched (and for tentative tracks, which have no
    # speed yet), boxes grow by this share of their size on every side
    velocity_window_s: float = 0.5  # a track's velocity: the line fitted to its boxes of this many seconds

    def __post_init__(self) -> None:
        for name in ("high_threshold", "low_threshold", "new_track_threshold", "match_iou", "low_match_iou"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"TrackerOptions.{name}={value} is not between 0 and 1")
        if self.low_threshold > self.high_threshold:
            raise InputError(f"TrackerOptions.low_threshold={self.low_threshold} is above high_threshold="
                             f"{self.high_threshold}", hint="low_threshold <= high_threshold")
        if self.min_hits < 1 or self.max_lost_s < 0 or self.buffer < 0 or self.velocity_window_s < 0:
            raise InputError(f"TrackerOptions: min_hits must be >= 1 (not {self.min_hits}); max_lost_s, buffer "
                             f"and velocity_window_s >= 0")

    @classmethod
    def from_value(cls, value) -> TrackerOptions:
        """From True, a TrackerOptions, or a dict of its fields (a YAML ``tracker:`` section)."""
        if isinstance(value, TrackerOptions):
            return value
        if value is True or value is None:
            return cls()
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise InputError(f"unknown tracker options {sorted(unknown)}",
                                 hint=f"known: {', '.join(cls.__dataclass_fields__)}")
            return cls(**value)
        raise InputError(f"track={value!r} is not a tracker setting", hint="track=True, a TrackerOptions or a dict")


@dataclass
class Track:
    """One object over time. ``box`` is where it was last seen (x1, y1, x2, y2), ``velocity`` how fast its
    centre moves (pixels per second; its size is not extrapolated: a box cut by the frame's edge grows while
    the object comes in, and would grow on forever)."""

    box: np.ndarray
    first_seen: float
    last_seen: float
    score: float
    id: int | None = None  # given when confirmed
    hits: int = 1
    state: str = "tentative"  # tentative, tracked, lost
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(2))
    history: deque = field(default_factory=deque, repr=False)  # (timestamp, cx, cy, w, h) of the velocity window
    size: tuple = (0.0, 0.0)  # the median width and height over the window
    classes: Counter = field(default_factory=Counter)
    labels: dict = field(default_factory=dict)

    @property
    def class_id(self) -> int:
        return self.classes.most_common(1)[0][0]  # the class most often given: one flicker does not change it

    @property
    def label(self) -> str:
        return self.labels.get(self.class_id, str(self.class_id))

    @property
    def age_s(self) -> float:
        return self.last_seen - self.first_seen

    def predicted(self, timestamp: float, horizon: float) -> np.ndarray:
        """Where the box is expected at ``timestamp``: its last centre moved on by the velocity, at the median
        size of the velocity window (one sliver of a box, half hidden for a frame, does not shrink it)."""
        dt = min(max(0.0, timestamp - self.last_seen), horizon)
        x1, y1, x2, y2 = self.box
        cx, cy = (x1 + x2) / 2 + self.velocity[0] * dt, (y1 + y2) / 2 + self.velocity[1] * dt
        w, h = self.size[0] / 2, self.size[1] / 2
        return np.array([cx - w, cy - h, cx + w, cy + h])

    def anchor(self) -> tuple[float, float]:
        x1, y1, x2, y2 = self.box
        return (x1 + x2) / 2, (y1 + y2) / 2

    def to_dict(self) -> dict:
        return {"id": self.id, "class_id": self.class_id, "label": self.label, "state": self.state,
                "age_s": round(self.age_s, 4), "hits": self.hits, "xyxy": [round(float(v), 2) for v in self.box]}


class Tracker:
    """Tracks of one source. ``update(boxes, timestamp)`` sets ``track_id`` on the boxes it matched to a
    confirmed track and returns the frame's events; ``tracks`` are the confirmed tracks, seen or lost."""

    def __init__(self, options: TrackerOptions | None = None) -> None:
        self.options = options or TrackerOptions()
        self._tracks: list[Track] = []
        self._next_id = 1
        self._clock: float | None = None

    @property
    def confirmed(self) -> int:
        """How many tracks were confirmed (ids given out) so far."""
        return self._next_id - 1

    @property
    def tracks(self) -> list[Track]:
        return [t for t in self._tracks if t.state != "tentative"]

    def update(self, boxes: list, timestamp: float) -> list[Event]:
        o = self.options
        events: list[Event] = []
        if self._clock is not None and timestamp < self._clock:  # a looped file or a new stream segment
            events += self.reset()
        self._clock = timestamp
        boxes = [b for b in boxes if b.score >= o.low_threshold]
        high = [b for b in boxes if b.score >= o.high_threshold]
        low = [b for b in boxes if b.score < o.high_threshold]
        confirmed = [t for t in self._tracks if t.state != "tentative"]
        tentative = [t for t in self._tracks if t.state == "tentative"]
        matched: set[int] = set()

        pairs, _, left_high = self._match(confirmed, high, timestamp, o.match_iou)
        for ti, bi in pairs:
            events += self._continue(confirmed[ti], high[bi], timestamp)
            matched.add(id(confirmed[ti]))
        # what is left, again with buffered boxes (the cascade of C-BIoU): a track whose motion changed, or
        # whose speed is known from a few jittery boxes only, is still near its object
        unmatched = [t for t in confirmed if id(t) not in matched]
        rest = [high[i] for i in left_high]
        pairs, _, left_high = self._match(unmatched, rest, timestamp, o.match_iou, buffer=o.buffer)
        for ti, bi in pairs:
            events += self._continue(unmatched[ti], rest[bi], timestamp)
            matched.add(id(unmatched[ti]))
        high = rest
        # seen on the previous frame, unmatched now: a low-score box may continue it
        waiting = [t for t in confirmed if id(t) not in matched and t.state == "tracked"]
        pairs, _, _ = self._match(waiting, low, timestamp, o.low_match_iou)
        for ti, bi in pairs:
            events += self._continue(waiting[ti], low[bi], timestamp)
            matched.add(id(waiting[ti]))
        rest = [high[i] for i in left_high]
        pairs, _, left = self._match(tentative, rest, timestamp, o.match_iou, buffer=o.buffer)
        for ti, bi in pairs:
            events += self._continue(tentative[ti], rest[bi], timestamp)
            matched.add(id(tentative[ti]))
        kept = []
        for track in self._tracks:
            if id(track) in matched:
                kept.append(track)
            elif track.state == "tentative":
                continue  # a box seen once and not again: noise, never given an id
            elif track.state == "tracked":
                track.state = "lost"
                events.append(self._event("lost", track, track.last_seen))
                kept.append(track)
            elif timestamp - track.last_seen > o.max_lost_s:
                events.append(self._event("ended", track, track.last_seen))
            else:
                kept.append(track)
        for bi in left:
            box = rest[bi]
            if box.score >= o.new_track_threshold:
                track = Track(np.asarray(box.xyxy, np.float64), timestamp, timestamp, box.score)
                track.velocity, track.size = _motion(track.history, timestamp, track.box, o.velocity_window_s)
                track.classes[box.class_id] += 1
                track.labels[box.class_id] = box.label
                kept.append(track)
                if o.min_hits <= 1:
                    events += self._confirm(track, box)
        self._tracks = kept
        return events

    def reset(self) -> list[Event]:
        """End every track (the source's clock went back: a looped file, a stream that came back)."""
        events = [self._event("ended", t, t.last_seen) for t in self._tracks if t.state != "tentative"]
        self._tracks = []
        self._clock = None
        return events

    # -- helpers ------------------------------------------------------------------------------------------------
    def _match(self, tracks: list[Track], boxes: list, timestamp: float, minimum: float, buffer: float = 0.0):
        if not tracks or not boxes:
            return [], list(range(len(tracks))), list(range(len(boxes)))
        horizon = max(self.options.max_lost_s, 1e-3)
        predicted = _grow(np.stack([t.predicted(timestamp, horizon) for t in tracks]), buffer)
        found = _grow(np.asarray([b.xyxy for b in boxes], np.float64), buffer)
        similarity = iou_matrix(predicted, found)
        if self.options.class_aware:
            same = np.asarray([[t.class_id == b.class_id for b in boxes] for t in tracks])
            similarity = np.where(same, similarity, 0.0)
        return assign(similarity, minimum)

    def _continue(self, track: Track, box, timestamp: float) -> list[Event]:
        new = np.asarray(box.xyxy, np.float64)
        track.velocity, track.size = _motion(track.history, timestamp, new, self.options.velocity_window_s)
        track.box, track.last_seen, track.score = new, timestamp, box.score
        track.hits += 1
        track.classes[box.class_id] += 1
        track.labels[box.class_id] = box.label
        events = []
        if track.state == "tentative":
            if track.hits >= self.options.min_hits:
                events += self._confirm(track, box)
            return events
        if track.state == "lost":
            events.append(self._event("found", track, timestamp))
        track.state = "tracked"
        box.track_id = track.id
        return events

    def _confirm(self, track: Track, box) -> list[Event]:
        track.id = self._next_id
        self._next_id += 1
        track.state = "tracked"
        box.track_id = track.id
        return [self._event("new", track, track.first_seen)]

    @staticmethod
    def _event(kind: str, track: Track, timestamp: float) -> Event:
        assert track.id is not None, "events are about confirmed tracks, and confirming gives the id"
        return Event(kind, track.id, timestamp, track.class_id, track.label)


def _motion(history: deque, timestamp: float, box, window: float) -> tuple[np.ndarray, tuple[float, float]]:
    """The velocity of the centre (pixels per second): the slope of the line fitted to the centres of the last
    ``window`` seconds, this one included; and the median size over them. A fit over a span of time, not the
    step from the previous frame: at 30 FPS a box's jitter of a pixel or two is a speed error of 50 px/s from
    one frame to the next, which a lost track would carry along. (Plain Python: a window holds a few boxes.)"""
    x1, y1, x2, y2 = (float(v) for v in box)
    history.append((timestamp, (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1))
    while len(history) > 2 and timestamp - history[0][0] > window:
        history.popleft()
    n = len(history)
    mt = sum(h[0] for h in history) / n
    mx = sum(h[1] for h in history) / n
    my = sum(h[2] for h in history) / n
    scale = sum((h[0] - mt) ** 2 for h in history)
    if scale > 0:
        velocity = np.array([sum((h[0] - mt) * (h[1] - mx) for h in history) / scale,
                             sum((h[0] - mt) * (h[2] - my) for h in history) / scale])
    else:
        velocity = np.zeros(2)
    widths, heights = sorted(h[3] for h in history), sorted(h[4] for h in history)
    return velocity, (_median(widths), _median(heights))


def _median(ordered: list[float]) -> float:
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _grow(boxes: np.ndarray, share: float) -> np.ndarray:
    if not share:
        return boxes
    w = (boxes[:, 2] - boxes[:, 0]) * share
    h = (boxes[:, 3] - boxes[:, 1]) * share
    return boxes + np.stack([-w, -h, w, h], axis=1)
