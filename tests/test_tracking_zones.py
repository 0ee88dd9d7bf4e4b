"""Lines and zones: counts equal to the truth of known paths (edgeaccel.testing.scenes; target: on every
draw of the parametrized ones, and on at least 54 of 60 random draws), crossing times and
dwell times within a frame of it, directions, the segment's ends, jitter on a line, the YAML file and the
command line's specs and their errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from edgeaccel.errors import ConfigError, InputError
from edgeaccel.testing.scenes import scene
from edgeaccel.tracking import Line, TrackerOptions, Zone, Zones, load_zones, parse_spec
from edgeaccel.tracking.live import SourceTracking
from test_tracking import LABELS, MOVERS, boxes_of

LINE = Line("middle", [(0, 240), (640, 240)])  # drawn left to right: "in" is downward
SIDE = Line("side", [(600, 0), (600, 480)])  # drawn top to bottom: "in" is leftward
ZONE = Zone("centre", [(250, 150), (450, 150), (450, 350), (250, 350)])


def truth_counts(seconds: float, fps: float = 30.0):
    """Crossings and zone visits of the movers' centres, sampled every millisecond while in view (a mover's
    box at least 30% inside the frame, as the scene's detector sees it), not from any tracker."""
    lines = {name: {"in": {}, "out": {}} for name in ("middle", "side")}
    visits = []
    for m in MOVERS:
        times = np.arange(0, seconds, 0.001)
        boxes = np.stack([m.box(t) for t in times])
        inside = np.clip(boxes, 0, [640, 480, 640, 480])
        shown = np.prod(inside[:, 2:] - inside[:, :2], axis=1) / np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)
        seen = shown >= 0.3
        # the tracker confirms a track on its second sighting: the first frame of a mover in view is not counted
        first = times[seen][0] + 1.5 / fps if seen.any() else seconds
        seen &= times >= first
        cx, cy = (inside[:, 0] + inside[:, 2]) / 2, (inside[:, 1] + inside[:, 3]) / 2
        label = LABELS[m.class_id]
        for name, value in (("middle", cy - 240), ("side", 600 - cx)):  # > 0: the "in" side
            side = value > 0
            for k in np.nonzero(seen[1:] & seen[:-1] & (side[1:] != side[:-1]))[0]:
                direction = "in" if side[k + 1] else "out"
                lines[name][direction][label] = lines[name][direction].get(label, 0) + 1
        zone_in = seen & (cx >= 250) & (cx <= 450) & (cy >= 150) & (cy <= 350)
        edges = np.diff(zone_in.astype(int))
        # strict=False: a mover still inside the zone when the scene ends has an entry and no exit
        for start, end in zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0], strict=False):
            visits.append((label, times[start + 1], times[end + 1]))
    return lines, visits


def track_scene(frames, zones: Zones):
    tracking = SourceTracking(TrackerOptions(), zones)
    events = []
    for f in frames:
        frame = SimpleNamespace(result=SimpleNamespace(boxes=boxes_of(f)), timestamp=f.timestamp, captured=0.0)
        tracking.apply(frame)
        events += frame.events
    return tracking, events, frame


@pytest.mark.parametrize("drop,seed", [(0.0, 1), (0.2, 2), (0.3, 3), (0.4, 4)])
def test_line_and_zone_counts_equal_the_truth(drop, seed):
    frames = scene(MOVERS, drop=drop, seed=seed)
    tracking, events, last = track_scene(frames, Zones([LINE, SIDE], [ZONE]))
    lines, visits = truth_counts(6.0)
    assert last.zones["lines"] == lines
    assert sum(sum(c.values()) for c in lines["middle"].values()) >= 3  # the scene does cross it
    zone = last.zones["zones"]["centre"]
    entered: dict[str, int] = {}
    for label, _, _ in visits:
        entered[label] = entered.get(label, 0) + 1
    assert zone["in"] == entered and zone["out"] == entered and zone["inside"] == 0
    # each exit's dwell within a frame gap or two of the truth's (frames are up to ~0.2 s apart at 40% drop)
    exits = sorted((e.label, e.dwell_s) for e in events if e.type == "exit")
    truth = sorted((label, end - start) for label, start, end in visits)
    assert [a for a, _ in exits] == [a for a, _ in truth]
    assert all(abs(a - b) < 0.25 for (_, a), (_, b) in zip(exits, truth, strict=True)), (exits, truth)
    for label, dwell in zone["dwell_s"].items():
        assert abs(dwell - sum(d for lab, d in truth if lab == label)) < 0.5
    # crossing times: interpolated between the frames around the crossing, so near the truth's
    crossings = [e for e in events if e.type == "cross" and e.where == "middle"]
    expected = sorted(_crossing_time(mv, 240) for mv in MOVERS if _crossing_time(mv, 240) is not None)
    assert len(crossings) == len(expected)
    assert all(abs(a - b) < 0.1 for a, b in zip(sorted(e.timestamp for e in crossings), expected, strict=True))


@pytest.mark.slow
def test_counts_equal_the_truth_on_nine_draws_in_ten():
    # where they differ, an id switched where one object hides another next to a false box (test_tracking.py)
    lines, visits = truth_counts(6.0)
    exact = 0
    for seed in range(20):
        for drop in (0.0, 0.2, 0.4):
            _, _, last = track_scene(scene(MOVERS, drop=drop, seed=seed), Zones([LINE, SIDE], [ZONE]))
            exact += last.zones["lines"] == lines and sum(last.zones["zones"]["centre"]["in"].values()) == len(visits)
    assert exact >= 54, f"{exact} of 60 draws counted exactly"


def _crossing_time(mover, y: float) -> float | None:
    if not mover.velocity[1]:
        return None
    t = (y - mover.start[1]) / mover.velocity[1]
    return t if 0 < t < 6.0 else None


def test_directions_ends_of_the_segment_and_jitter_on_the_line():
    line = Line("door", [(100, 200), (300, 200)], margin=3)
    zones = Zones([line])

    def walk(track_id, points):
        out = []
        for t, (x, y) in enumerate(points):
            track = SimpleNamespace(id=track_id, state="tracked", last_seen=float(t), box=(x - 5, y - 5, x + 5, y + 5),
                                    class_id=0, label="person")
            out += zones.update([track], float(t))
        return out

    down = walk(1, [(150, 150), (150, 199), (150, 201), (150, 198), (150, 202), (150, 260)])  # jitter inside margin
    assert [(e.direction, e.where) for e in down] == [("in", "door")]
    up = walk(2, [(200, 260), (200, 150)])
    assert [e.direction for e in up] == ["out"] and up[0].timestamp == pytest.approx(0 + 60 / 110)
    beside = walk(3, [(350, 150), (350, 260)])  # past the segment's end: no crossing
    assert beside == []
    assert zones.summary()["lines"]["door"] == {"in": {"person": 1}, "out": {"person": 1}}


def test_a_concave_zone_and_the_bottom_anchor():
    zone = Zone("L", [(0, 0), (100, 0), (100, 40), (40, 40), (40, 100), (0, 100)])
    assert zone.contains((20, 80)) and zone.contains((80, 20)) and not zone.contains((80, 80))
    zones = Zones(zones=[zone], anchor="bottom")
    track = SimpleNamespace(id=1, state="tracked", last_seen=0.0, box=(70, -30, 90, 10), class_id=0, label="car")
    assert [e.type for e in zones.update([track], 0.0)] == ["enter"]  # the centre (y -10) is outside, the bottom in


def test_zones_from_yaml_and_from_the_command_line(tmp_path):
    path = tmp_path / "zones.yaml"
    path.write_text("anchor: bottom\nlines:\n  - name: door\n    points: [[0, 10], [50, 10]]\n    margin: 4\n"
                    "zones:\n  - name: q\n    points: [[0, 0], [10, 0], [10, 10]]\ntracker:\n  max_lost_s: 2\n")
    zones, tracker = load_zones(path)
    assert zones.anchor == "bottom" and zones.lines[0].margin == 4 and zones.zones[0].name == "q"
    assert TrackerOptions.from_value(tracker).max_lost_s == 2
    assert parse_spec("door=0,10,50,10", "line").points == [(0, 10), (50, 10)]
    assert len(parse_spec("q=0,0,10,0,10,10", "zone").points) == 3


@pytest.mark.parametrize("text,words", [("lines:\n  - name: a\n", "needs a name and points"),
                                        ("lines:\n  - name: a\n    points: [[0, 0], [0, 0]]\n", "both points"),
                                        ("zones:\n  - name: a\n    points: [[0, 0], [1, 1]]\n", "at least three"),
                                        ("polygons: []\n", "unknown keys"), ("lines: [\n", "not valid YAML"),
                                        ("lines:\n  - name: a\n    points: [[0, x], [1, 1]]\n", "are not points")])
def test_a_wrong_zones_file_names_the_file_and_the_fault(tmp_path, text, words):
    path = tmp_path / "zones.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_zones(path)
    assert str(path) in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("spec", ["door", "door=1,2,3", "=1,2,3,4", "door=a,b,c,d"])
def test_a_wrong_command_line_spec_says_the_form(spec):
    with pytest.raises(InputError) as err:
        parse_spec(spec, "line")
    assert "NAME=x1,y1,x2,y2" in str(err.value)


def test_a_shape_outside_the_frame_or_in_fractions_is_said():
    zones = Zones([Line("far", [(900, 0), (900, 100)]), Line("ok", [(0, 50), (100, 50)])],
                  [Zone("unit", [(0.1, 0.1), (0.5, 0.1), (0.5, 0.5)])])
    said = zones.outside(480, 640)
    assert len(said) == 2 and "'far' lies outside the 640x480 frame" in said[0] and "within 0..1" in said[1]


def test_tracker_options_in_a_zones_file_apply_to_watch(tmp_path):
    from edgeaccel.tracking.live import tracking_options

    path = tmp_path / "zones.yaml"
    path.write_text("lines:\n  - name: a\n    points: [[0, 0], [10, 10]]\ntracker:\n  max_lost_s: 3\n")
    task = SimpleNamespace(name="detect")
    options, zones = tracking_options(task, True, str(path))
    assert options.max_lost_s == 3 and zones.lines[0].name == "a"
    options, _ = tracking_options(task, {"max_lost_s": 0.5}, str(path))  # given in Python: it wins
    assert options.max_lost_s == 0.5
