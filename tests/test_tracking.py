"""Tracking against known paths (edgeaccel.testing.scenes): objects crossing, hidden behind each other and
behind obstacles, a fast small one, false detections, dropped frames. Detections are fed to the tracker
directly, with the truth of which object each came from, so that every id switch is counted.

Target (stated in docs/sources.md), on 10 random draws of the scene at 0%, 20% and 40% of frames dropped:
MOTA >= 0.9 on every draw (the misses while an object is hidden count against it), IDF1 >= 0.95 on the median
draw and >= 0.8 on the worst, at most 2
id switches in a draw and 6 in all 10 (they happen where a random false box lands next to an object that
another one half hides)."""

from __future__ import annotations

import itertools

import pytest

from edgeaccel.errors import InputError
from edgeaccel.testing.mot import mot_figures
from edgeaccel.testing.scenes import Mover, scene
from edgeaccel.tracking import Tracker, TrackerOptions
from edgeaccel.vision.results import Box

LABELS = {0: "person", 1: "car", 2: "bike"}
MOVERS = [
    Mover((-20, 120), (115, 0), (40, 40), 0),  # these two cross head-on, the farther one hidden meanwhile
    Mover((660, 125), (-115, 0), (40, 40), 0),
    Mover((50, 400), (90, -50), (50, 30), 1, hidden=(1.0, 1.6)),  # behind an obstacle for 0.6 s
    Mover((320, -20), (0, 90), (30, 60), 0),
    Mover((200, 500), (0, -80), (30, 30), 2),
    Mover((0, 300), (250, 0), (24, 24), 1),  # fast and small: 8 px a frame, more across dropped frames
    Mover((500, 400), (0, 0), (40, 40), 2),  # still
]


def boxes_of(frame) -> list[Box]:
    out = []
    for truth, box, score, cls in frame.detections:
        b = Box(tuple(float(v) for v in box), score, cls, LABELS[cls])
        b.truth = truth  # which object it came from (-1: a false detection)
        out.append(b)
    return out


def run(frames, options: TrackerOptions | None = None):
    tracker = Tracker(options)
    ids: dict[int, list[int]] = {}
    seen = []
    for frame in frames:
        boxes = boxes_of(frame)
        tracker.update(boxes, frame.timestamp)
        for b in boxes:
            if b.track_id is not None and b.truth >= 0:
                ids.setdefault(b.truth, []).append(b.track_id)
        seen.append({t.id: t.box.copy() for t in tracker.tracks if t.last_seen == frame.timestamp})
    return ids, seen, tracker


def switches(ids: dict[int, list[int]]) -> int:
    return sum(sum(1 for a, b in itertools.pairwise(seq) if a != b) for seq in ids.values())


@pytest.mark.slow
@pytest.mark.parametrize("drop", [0.0, 0.2, 0.4])
def test_ids_follow_known_paths_with_dropped_frames(drop):
    worst = []
    for seed in range(10):
        frames = scene(MOVERS, drop=drop, seed=seed)
        ids, seen, tracker = run(frames)
        figures = mot_figures([(f.truth, hyp) for f, hyp in zip(frames, seen, strict=True)])
        assert set(ids) == set(range(len(MOVERS)))  # every object got a track
        worst.append((figures["idf1"], figures["mota"], switches(ids), figures["switches"], seed))
        print(f"drop {drop} seed {seed}: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                     for k, v in figures.items()))
    assert min(w[0] for w in worst) >= 0.8 and sorted(w[0] for w in worst)[len(worst) // 2] >= 0.95, worst
    assert min(w[1] for w in worst) >= 0.9, worst
    # own count (by the detections' true objects) and the evaluator's agree on the total, within the target
    assert max(w[2] for w in worst) <= 2 and sum(w[2] for w in worst) <= 6, worst


def test_a_clean_scene_has_no_id_switch_and_no_false_track():
    frames = scene(MOVERS, drop=0.3, seed=3)
    ids, seen, tracker = run(frames)
    assert switches(ids) == 0
    assert tracker.confirmed == len(MOVERS)  # one-frame false detections never got an id
    figures = mot_figures([(f.truth, hyp) for f, hyp in zip(frames, seen, strict=True)])
    assert figures["switches"] == 0 and figures["idf1"] > 0.95


def test_motion_is_in_time_not_frames():
    # one box seen 0.1 s apart, then at 2 frames a second, moving 60 px between frames (more than its width):
    # matched only because its velocity in pixels per second predicts where it is after 0.5 s, and after a
    # 1.5 s gap as well
    tracker = Tracker(TrackerOptions(max_lost_s=2.0))
    times = [0.0, 0.1, 0.6, 1.1, 1.6, 3.1, 3.6]
    ids = []
    for t in times:
        x = 10 + 120 * t
        box = Box((x, 50, x + 40, 90), 0.9, 0, "person")
        tracker.update([box], t)
        ids.append(box.track_id)
    assert ids[1:] == [1] * (len(times) - 1)


def test_lost_found_and_ended_events_with_timestamps():
    tracker = Tracker(TrackerOptions(max_lost_s=0.5, min_hits=1))
    kinds = []
    for t, present in ((0.0, True), (0.1, True), (0.2, False), (0.3, True), (0.4, False), (1.0, False)):
        boxes = [Box((10, 10, 50, 50), 0.9, 0, "person")] if present else []
        kinds += [(e.type, e.track_id, e.timestamp) for e in tracker.update(boxes, t)]
    assert kinds == [("new", 1, 0.0), ("lost", 1, 0.1), ("found", 1, 0.3), ("lost", 1, 0.3), ("ended", 1, 0.3)]


def test_a_clock_going_back_ends_every_track():
    tracker = Tracker(TrackerOptions(min_hits=1))
    tracker.update([Box((10, 10, 50, 50), 0.9, 0, "a")], 5.0)
    events = tracker.update([Box((10, 10, 50, 50), 0.9, 0, "a")], 0.0)  # a looped file
    assert [(e.type, e.track_id) for e in events] == [("ended", 1), ("new", 2)]


def test_a_low_score_box_continues_a_track_but_never_starts_one():
    tracker = Tracker(TrackerOptions(min_hits=1))
    first = Box((10, 10, 50, 50), 0.9, 0, "a")
    tracker.update([first], 0.0)
    weak = Box((11, 10, 51, 50), 0.15, 0, "a")
    tracker.update([weak], 0.1)
    assert weak.track_id == first.track_id == 1
    alone = Box((300, 300, 340, 340), 0.15, 0, "a")
    tracker.update([alone], 0.2)
    assert alone.track_id is None and tracker.confirmed == 1


@pytest.mark.parametrize("bad", [{"high_threshold": 1.5}, {"low_threshold": 0.6, "high_threshold": 0.5},
                                 {"min_hits": 0}, {"max_lost": 1}])
def test_wrong_options_say_what_is_wrong(bad):
    with pytest.raises(InputError) as err:
        TrackerOptions.from_value(bad)
    assert next(iter(bad)) in str(err.value)
