"""Tracking on the live pipeline, end to end: a video the test draws (coloured squares on known paths,
crossing each other and a line, passing through a zone) through a YOLO-layout ONNX model whose boxes follow
the truth (colour_detector.py), decoded by the task layer, tracked per source; counts equal to the truth,
in frames, JSON lines, the overlay and the run command's summary. And a real detector on a real video."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MODELS, SHARED, run_cli

pytest.importorskip("av")
pytest.importorskip("scipy")

import edgeaccel  # noqa: E402
from colour_detector import COLOURS, colour_detector, draw_squares  # noqa: E402
from edgeaccel.errors import InputError  # noqa: E402
from edgeaccel.tracking import Line, Zone  # noqa: E402
from stream_servers import write_video  # noqa: E402

pytestmark = pytest.mark.slow  # slow tier: video pipelines

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["red", "green", "blue", "yellow", "magenta", "cyan"]
PATHS = [((-10, 60), (90, 0)), ((330, 66), (-90, 0)),  # red and green meet head-on (green drawn over red)
         ((160, -10), (0, 70)), ((100, 250), (0, -60)), ((250, 200), (-40, -30)), ((40, 200), (0, 0))]
FPS, SECONDS = 30, 4
LINE = Line("mid", [(0, 120), (320, 120)])  # left to right: "in" is downward
ZONE = Zone("box", [(120, 80), (220, 80), (220, 180), (120, 180)])
# the truth of PATHS (centres): blue crosses mid downward at 1.86 s and is in the box 1.29-2.71 s; yellow
# crosses upward at 2.17 s; magenta crosses upward at 2.67 s and is in the box 0.75-3.25 s
LINES = {"mid": {"in": {"blue": 1}, "out": {"yellow": 1, "magenta": 1}}}
DWELL = {"blue": 1.43, "magenta": 2.5}


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    folder = tmp_path_factory.mktemp("track")
    write_video(folder / "squares.mp4", draw_squares(PATHS, FPS * SECONDS, FPS), fps=FPS)
    labels = folder / "labels.txt"
    labels.write_text("\n".join(NAMES) + "\n")
    return colour_detector(folder / "colours.onnx"), folder / "squares.mp4", labels


def test_counts_ids_and_events_through_the_pipeline_equal_the_truth(detector, tmp_path):
    model_path, video, labels = detector
    assert len(NAMES) == len(COLOURS)
    with edgeaccel.load(model_path, task="detect", labels=str(labels), executor="onnxruntime") as model:
        with model.watch(video, track=True, zones=[LINE, ZONE], sinks=[tmp_path / "f.jsonl", tmp_path / "o.mp4"]) as p:
            frames = list(p)
            summary = p.summary()
    assert len(frames) == FPS * SECONDS
    ids: dict[str, set] = {}
    for frame in frames[2:]:  # a track is confirmed on its second sighting
        for box in frame.result.boxes:
            x1, y1, x2, y2 = box.xyxy
            if box.track_id is None:  # only a sliver (going out of the frame, or hidden) may go without its id
                assert (x2 - x1) * (y2 - y1) < 0.4 * 24 * 24, (frame.index, box)
            else:
                ids.setdefault(box.label, set()).add(box.track_id)
    assert all(len(found) == 1 for found in ids.values()), ids  # one id per square, through the crossings
    assert len({i for found in ids.values() for i in found}) == len(PATHS)
    last = frames[-1]
    assert last.zones["lines"] == LINES
    box = last.zones["zones"]["box"]
    assert box["in"] == box["out"] == {"blue": 1, "magenta": 1} and box["inside"] == 0
    assert all(abs(box["dwell_s"][k] - v) < 0.1 for k, v in DWELL.items()), box["dwell_s"]
    events = [e for f in frames for e in f.events]
    crossings = [(e.label, e.direction, e.timestamp) for e in events if e.type == "cross"]
    assert [(a, b) for a, b, _ in crossings] == [("blue", "in"), ("yellow", "out"), ("magenta", "out")]
    assert all(abs(t - want) < 0.05
               for (_, _, t), want in zip(crossings, (1.857, 2.167, 2.667), strict=True)), crossings
    # the JSON lines carry the same; the summary gives the counts per source
    records = [json.loads(line) for line in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert records[-1]["zones"] == last.zones
    assert {b["track_id"] for b in records[-1]["result"]["boxes"]} <= {t["id"] for t in records[-1]["tracks"]}
    assert sum(1 for r in records for e in r["events"] if e["type"] == "cross") == 3
    assert summary["sources"][0]["tracking"]["tracks"] == len(PATHS)
    assert summary["sources"][0]["tracking"]["lines"] == LINES


def test_each_source_has_its_own_tracks_and_counts(detector):
    model_path, video, labels = detector
    with edgeaccel.load(model_path, task="detect", labels=str(labels), executor="onnxruntime") as model:
        with model.watch([video, video], names=["a", "b"], track=True, zones=[LINE]) as p:
            frames = list(p)
            summary = p.summary()
    for name in ("a", "b"):
        mine = [f for f in frames if f.source == name]
        assert len(mine) == FPS * SECONDS
        assert {b.track_id for f in mine for b in f.result.boxes} - {None} == set(range(1, len(PATHS) + 1))
        assert mine[-1].zones["lines"] == LINES
    assert [s["tracking"]["lines"] for s in summary["sources"]] == [LINES, LINES]


def test_overlay_draws_ids_lines_and_zones(detector):
    import numpy as np

    from edgeaccel.sources.sinks import rendered

    model_path, video, labels = detector
    with edgeaccel.load(model_path, task="detect", labels=str(labels), executor="onnxruntime") as model:
        with model.watch(video, track=True, zones=[LINE, ZONE]) as p:
            frame = [f for f in p][60]
    plain = frame.result.render(frame.image)
    drawn = rendered(frame)
    assert drawn.shape == frame.image.shape
    line_row = drawn[120, 5:315].astype(int)
    assert (np.abs(line_row - (255, 220, 0)).sum(axis=1) < 60).mean() > 0.5  # the line, in yellow
    assert not np.array_equal(plain, drawn)


def test_run_command_tracks_and_counts(cli, detector, tmp_path):
    model_path, video, labels = detector
    zones = tmp_path / "zones.yaml"
    zones.write_text("zones:\n  - name: box\n    points: [[120, 80], [220, 80], [220, 180], [120, 180]]\n"
                     "tracker:\n  max_lost_s: 0.5\n")
    done = cli("run", str(model_path), "--input", str(video), "--task", "detect", "--labels", str(labels),
               "--executor", "onnxruntime", "--zones", str(zones), "--line", "mid=0,120,320,120", "--json",
               timeout=300)
    assert done.returncode == 0, done.stderr
    tracking = json.loads(done.stdout)["sources"][0]["tracking"]
    assert tracking["lines"] == LINES and tracking["zones"]["box"]["in"] == {"blue": 1, "magenta": 1}
    done = cli("run", str(model_path), "--input", str(video), "--task", "detect", "--executor", "onnxruntime",
               "--line", "mid=0,120", timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "line 'mid' has 1 point" in done.stderr and "a line has two" in done.stderr
    done = cli("run", str(model_path), "--track", timeout=300)  # no live input: nothing to track
    assert done.returncode != 0 and "need a live --input" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.shared
def test_a_real_detector_on_a_real_video_keeps_its_ids():
    with edgeaccel.load(MODELS / "traffic_model.tflite", task="detect", executor="litert") as model:
        with model.watch(SHARED / "video" / "traffic_frames.mp4", track=True) as p:
            frames = list(p)
    assert all(f.tracks is not None and f.events is not None for f in frames)
    given = {b.track_id for f in frames for b in f.result.boxes if b.track_id is not None}
    per_frame = max(len(f.result.boxes) for f in frames)
    # 20 frames of the same few vehicles: ids are kept, not renewed each frame
    assert 1 <= len(given) <= per_frame + 2, given
    assert sum(b.track_id is not None for f in frames[2:] for b in f.result.boxes) >= \
        0.8 * sum(len(f.result.boxes) for f in frames[2:])


@pytest.mark.shared
def test_tracking_a_model_without_boxes_is_refused_at_once():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", executor="litert", task="classify") as model:
        with pytest.raises(InputError) as err:
            model.watch(SHARED / "video" / "traffic_frames.mp4", track=True)
    assert "tracking needs boxes" in str(err.value) and "classify" in str(err.value)


def test_lines_and_zones_are_served_as_prometheus_metrics(detector, tmp_path):
    """The real endpoint, scraped over HTTP: crossings, entries, exits, occupancy and the dwell histogram equal
    the truth and the JSON summary; and the run command refuses --metrics-port with nothing tracked."""
    pytest.importorskip("prometheus_client")
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from edgeaccel.tracking.metrics import serve_metrics

    model_path, video, labels = detector
    with edgeaccel.load(model_path, task="detect", labels=str(labels), executor="onnxruntime") as model:
        with model.watch(video, track=True, zones=[LINE, ZONE], names=["door"]) as p:
            server, port = serve_metrics(0, lambda: [(s.name, t) for s, t in zip(p.sources, p.tracking, strict=True)],
                                         addr="127.0.0.1")
            try:
                for _ in p:
                    pass
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            finally:
                server.shutdown()
            summary = p.summary()["sources"][0]["tracking"]
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(name, **labels):
        return samples.get((name, tuple(sorted({"source": "door", **labels}.items()))))

    for direction, counts in LINES["mid"].items():
        for label, n in counts.items():
            assert value("edgeaccel_line_crossings_total", line="mid", direction=direction, **{"class": label}) == n
    for label in ("blue", "magenta"):
        assert value("edgeaccel_zone_entries_total", zone="box", **{"class": label}) == 1
        assert value("edgeaccel_zone_exits_total", zone="box", **{"class": label}) == 1
        assert value("edgeaccel_zone_dwell_seconds_count", zone="box", **{"class": label}) == 1
        assert abs(value("edgeaccel_zone_dwell_seconds_sum", zone="box", **{"class": label}) - DWELL[label]) < 0.1
        assert value("edgeaccel_zone_dwell_seconds_bucket", zone="box", le="5.0", **{"class": label}) == 1
        assert value("edgeaccel_zone_dwell_seconds_bucket", zone="box", le="1.0", **{"class": label}) == 0
    assert value("edgeaccel_zone_occupancy", zone="box") == summary["zones"]["box"]["inside"] == 0
    assert value("edgeaccel_tracks_total") == summary["tracks"] == len(PATHS)
    done = run_cli("run", model_path, "--input", video, "--task", "detect", "--executor", "onnxruntime",
                   "--metrics-port", "0")
    assert done.returncode != 0 and "--metrics-port" in done.stderr and "Traceback" not in done.stderr
