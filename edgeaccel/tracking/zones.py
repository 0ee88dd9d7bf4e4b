"""Lines and zones (polygons) in image pixels, and what tracks do with them: crossings of a line in each
direction, entries into and exits from a zone with the time spent inside, counted per class.

A track is placed by its anchor: the centre of its box (``anchor="center"``) or the middle of its bottom edge
(``"bottom"``: where a person or a car touches the ground). A line counts a crossing when a track's anchor goes
from one side to the other through the segment itself: "in" when it moves to the right-hand side of the line
drawn from its first point to its second as seen on the image (a line drawn left to right: "in" is downward),
"out" the other way. Points nearer the line than ``margin`` pixels keep the side they had, so that a box that
jitters on the line is not counted again and again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .events import Event

ANCHORS = ("center", "bottom")


@dataclass
class Line:
    name: str
    points: list[tuple[float, float]]  # two
    margin: float = 2.0
    counts: dict = field(default_factory=lambda: {"in": Counter(), "out": Counter()}, repr=False)

    def __post_init__(self) -> None:
        self.points = _points(self.points, self.name, "line", 2)
        if len(self.points) != 2:
            raise InputError(f"line {self.name!r} has {_points_count(self.points)}", hint="a line has two: [[x1, y1], "
                             "[x2, y2]]")
        (x1, y1), (x2, y2) = self.points
        if (x1, y1) == (x2, y2):
            raise InputError(f"line {self.name!r} has both points at ({x1}, {y1})", hint="give two distinct points")
        self._length = float(np.hypot(x2 - x1, y2 - y1))

    def side(self, point) -> int:
        """+1 on the "in" side (right-hand as drawn on the image), -1 on the other, 0 within ``margin``."""
        (ax, ay), (bx, by) = self.points
        distance = ((bx - ax) * (point[1] - ay) - (by - ay) * (point[0] - ax)) / self._length
        return 0 if abs(distance) < self.margin else (1 if distance > 0 else -1)

    def crossing(self, start, end) -> float | None:
        """Where along start -> end (0..1) that move passes through the segment, or None."""
        (ax, ay), (bx, by) = self.points
        px, py = start
        rx, ry = end[0] - px, end[1] - py
        sx, sy = bx - ax, by - ay
        denominator = rx * sy - ry * sx
        if denominator == 0:
            return None
        t = ((ax - px) * sy - (ay - py) * sx) / denominator  # along the move
        u = ((ax - px) * ry - (ay - py) * rx) / denominator  # along the line
        return t if -1e-9 <= t <= 1 + 1e-9 and -1e-9 <= u <= 1 + 1e-9 else None

    def to_dict(self) -> dict:
        return {"in": dict(self.counts["in"]), "out": dict(self.counts["out"])}


@dataclass
class Zone:
    name: str
    points: list[tuple[float, float]]
    counts: dict = field(default_factory=lambda: {"in": Counter(), "out": Counter()}, repr=False)
    # per class: seconds spent inside by tracks that left
    dwell_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float), repr=False)

    def __post_init__(self) -> None:
        self.points = _points(self.points, self.name, "zone", 3)
        if len(self.points) < 3:
            raise InputError(f"zone {self.name!r} has {_points_count(self.points)}",
                             hint="a zone is a polygon of at least three points [[x, y], ...]")
        self._edges = [(*a, *b) for a, b in zip(self.points, self.points[1:] + self.points[:1], strict=True)]

    def contains(self, point) -> bool:
        """Even-odd rule (ray casting): inside a polygon, convex or not. Plain Python: a zone has a few edges,
        and numpy's per-call cost was most of tracking's time at 20 objects."""
        x, y = point
        inside = False
        for x1, y1, x2, y2 in self._edges:
            if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
                inside = not inside
        return inside

    def to_dict(self, inside: dict | None = None) -> dict:
        out = {"in": dict(self.counts["in"]), "out": dict(self.counts["out"]),
               "dwell_s": {k: round(v, 4) for k, v in self.dwell_s.items()}}
        if inside is not None:
            out["inside"] = inside
        return out


class Zones:
    """Lines and zones of one source, and each track's place relative to them. ``update(tracks, timestamp)``
    returns the frame's crossing, enter and exit events; ``summary()`` the counts so far."""

    def __init__(self, lines=(), zones=(), anchor: str = "center") -> None:
        if anchor not in ANCHORS:
            raise InputError(f"anchor={anchor!r} is not an anchor", hint=f"one of {', '.join(ANCHORS)}")
        self.lines, self.zones, self.anchor = list(lines), list(zones), anchor
        names = [x.name for x in (*self.lines, *self.zones)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InputError(f"lines and zones need distinct names; repeated: {repeated}")
        self._sides: dict[tuple[str, int], tuple[int, tuple[float, float], float]] = {}  # side, where, when
        self._entered: dict[tuple[str, int], float] = {}  # (zone, track id) -> when it entered

    def copy(self) -> Zones:
        """The same lines and zones with nothing counted (one per source)."""
        return Zones([Line(x.name, x.points, x.margin) for x in self.lines],
                     [Zone(z.name, z.points) for z in self.zones], self.anchor)

    def update(self, tracks, timestamp: float) -> list[Event]:
        events: list[Event] = []
        for track in tracks:
            if track.state != "tracked" or track.last_seen != timestamp:
                continue  # only tracks seen on this frame move
            point = self._anchor(track.box)
            for line in self.lines:
                events += self._line(line, track, point, timestamp)
            for zone in self.zones:
                events += self._zone(zone, track, point, timestamp)
        return events

    def ended(self, track) -> list[Event]:
        """A track ended: it leaves every zone it was in at its last sighting (dwell counted, no exit counted)."""
        events = []
        for zone in self.zones:
            entered = self._entered.pop((zone.name, track.id), None)
            if entered is not None:
                dwell = max(0.0, track.last_seen - entered)
                zone.dwell_s[track.label] += dwell
                events.append(Event("exit", track.id, track.last_seen, track.class_id, track.label, zone.name,
                                    dwell_s=dwell))
        for line in self.lines:
            self._sides.pop((line.name, track.id), None)
        return events

    def outside(self, height: int, width: int) -> list[str]:
        """What cannot count on a frame of this size: a line or zone wholly outside it, or given in
        coordinates from 0 to 1 (pixels are expected)."""
        out = []
        for kind, item in [("line", x) for x in self.lines] + [("zone", z) for z in self.zones]:
            xs, ys = [p[0] for p in item.points], [p[1] for p in item.points]
            if max(xs) <= 1 and max(ys) <= 1 and max(width, height) > 2:
                out.append(f"{kind} {item.name!r} has every point within 0..1: coordinates are pixels of the "
                           f"{width}x{height} frame, so it can count nothing (multiply by the frame's size)")
            elif max(xs) < 0 or min(xs) > width or max(ys) < 0 or min(ys) > height:
                out.append(f"{kind} {item.name!r} lies outside the {width}x{height} frame: it can count nothing")
        return out

    def summary(self) -> dict:
        inside: dict[str, Counter] = {z.name: Counter() for z in self.zones}
        for zone_name, _ in self._entered:
            inside[zone_name]["tracks"] += 1
        return {"lines": {x.name: x.to_dict() for x in self.lines},
                "zones": {z.name: z.to_dict(inside[z.name]["tracks"]) for z in self.zones}}

    def _anchor(self, box) -> tuple[float, float]:
        x1, y1, x2, y2 = (float(v) for v in box)
        return ((x1 + x2) / 2, y2 if self.anchor == "bottom" else (y1 + y2) / 2)

    def _line(self, line: Line, track, point, timestamp: float) -> list[Event]:
        key = (line.name, track.id)
        side = line.side(point)
        previous = self._sides.get(key)
        if side == 0:
            return []  # on the line: it keeps the side it had
        self._sides[key] = (side, point, timestamp)
        if previous is None or previous[0] == side:
            return []
        _, start, began = previous
        along = line.crossing(start, point)
        if along is None:
            return []  # it changed sides around the segment's end, not through it
        direction = "in" if side > 0 else "out"
        line.counts[direction][track.label] += 1
        when = began + along * (timestamp - began)
        return [Event("cross", track.id, when, track.class_id, track.label, line.name, direction)]

    def _zone(self, zone: Zone, track, point, timestamp: float) -> list[Event]:
        key = (zone.name, track.id)
        inside = zone.contains(point)
        entered = self._entered.get(key)
        if inside and entered is None:
            self._entered[key] = timestamp
            zone.counts["in"][track.label] += 1
            return [Event("enter", track.id, timestamp, track.class_id, track.label, zone.name)]
        if not inside and entered is not None:
            del self._entered[key]
            dwell = timestamp - entered
            zone.counts["out"][track.label] += 1
            zone.dwell_s[track.label] += dwell
            return [Event("exit", track.id, timestamp, track.class_id, track.label, zone.name, dwell_s=dwell)]
        return []


def _points_count(points: list) -> str:
    return f"{len(points)} point" + ("" if len(points) == 1 else "s")


def _points(points, name: str, kind: str, least: int) -> list[tuple[float, float]]:
    try:
        out = [(float(x), float(y)) for x, y in points]
    except (TypeError, ValueError) as exc:
        raise InputError(f"{kind} {name!r}: {points!r} are not points", hint=f"give [[x, y], ...] in image pixels, "
                         f"at least {least}") from exc
    if not all(np.isfinite(v) for p in out for v in p):
        raise InputError(f"{kind} {name!r} has a point that is not a finite number: {out}")
    return out
