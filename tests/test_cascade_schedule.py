"""Scheduling across a cascade's stages and sources (issue 33 item 4): the order in which a thermal policy sheds
(later stages' crops on the limited device, then the frame rate), with a fake sensor tree and simulated time;
the same accounted for on a live run of real models; sources taken in turn so that a busy source cannot
starve another; two stages on one device never running at once; tracking carried through the stages."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest
from conftest import ROOT, SHARED
from PIL import Image

import edgeaccel
from edgeaccel.cascade.governor import Governor, shed_plan
from edgeaccel.sim.fakesys import FakeSysfs
from edgeaccel.telemetry.sensors import SensorSpec
from edgeaccel.tracking import Line, Zone

MEDIAPIPE = ROOT / "tests" / "data" / "mediapipe"
FACE_STAGES = [{"name": "face", "model": str(MEDIAPIPE / "face_detection_short_range.tflite")},
               {"name": "mesh", "model": str(MEDIAPIPE / "face_landmark.tflite"),
                "crop": {"scale": 1.5, "rotate": [0, 1, 0]}}]
HOPPER = SHARED / "images" / "grace_hopper.png"
TRAFFIC = SHARED / "models" / "traffic_model.tflite"
VIDEO = SHARED / "video" / "traffic_frames.mp4"
SENSOR = SensorSpec(temperature="thermal:x86_pkg_temp")


@pytest.fixture(scope="module")
def image():
    return np.asarray(Image.open(HOPPER).convert("RGB"))


def _hot_tree(path, temp_c: float) -> FakeSysfs:
    fs = FakeSysfs(path)
    fs.thermal_zone(0, "x86_pkg_temp", temp_c, trips=(("passive", 85.0), ("critical", 100.0)))
    return fs


# -- the plan: what is shed, in which order -----------------------------------------------------------------------
@pytest.mark.parametrize(("duty", "keep", "max_fps"), [
    (1.0, 1.0, None),  # within its duty: nothing shed
    (0.75, 0.5, None),  # half the mesh's crops go, every frame stays
    (0.5, 0.0, 50.0),  # the mesh all gone: the face detector alone fills the allowance, frames held at it
    (0.3, 0.0, 30.0),  # then the frame rate falls
    (0.0, 0.0, 0.0),  # backed off: nothing starts on it
])
def test_one_device_sheds_the_later_stage_before_frames(duty, keep, max_fps):
    plan = shed_plan({"tpu": duty}, [("face", "tpu"), ("mesh", "tpu")], {"face": 0.01, "mesh": 0.01}, rate=50.0)
    assert plan.keep["mesh"] == pytest.approx(keep)
    assert plan.max_fps == (None if max_fps is None else pytest.approx(max_fps))


def test_each_device_is_relieved_of_its_own_work_last_stage_first():
    stages = [("face", "npu"), ("mesh", "gpu"), ("iris", "gpu")]
    costs = {"face": 0.01, "mesh": 0.01, "iris": 0.01}
    # the gpu (mesh and iris) may be busy a quarter of the time at 50 frames/s: 5 ms a frame of its 20
    plan = shed_plan({"npu": 1.0, "gpu": 0.25}, stages, costs, rate=50.0)
    assert plan.keep == {"mesh": pytest.approx(0.5), "iris": 0.0} and plan.max_fps is None
    # the npu runs the first stage only: shedding crops elsewhere would not cool it; the frame rate falls
    plan = shed_plan({"npu": 0.25, "gpu": 1.0}, stages, costs, rate=50.0)
    assert plan.keep == {"mesh": 1.0, "iris": 1.0} and plan.max_fps == pytest.approx(25.0)


def test_a_hot_device_sheds_crops_first_then_lowers_the_frame_rate_and_recovers(tmp_path):
    """The thermal policy on a device held at 90 C (passive trip 85) with simulated time: its duty falls tick by
    tick; the mesh's share falls to 0 before the frame rate is touched, and all comes back once it cools."""
    fs = _hot_tree(tmp_path, 90.0)
    governor = Governor("thermal", [("face", "EdgeTPU"), ("mesh", "EdgeTPU")], sensors={"EdgeTPU": SENSOR},
                        telemetry_root=tmp_path, interval_s=0.5)
    now, rate, plans = 0.0, 40.0, []
    for _ in range(40):
        plan = governor.tick(now, {"EdgeTPU": 0.5 * 0.9}, {"face": 0.01, "mesh": 0.01}, rate)
        plans.append(plan)
        rate = min(40.0, plan.max_fps) if plan.max_fps is not None else 40.0
        now += 0.5
    keeps = [p.keep["mesh"] for p in plans]
    capped = [i for i, p in enumerate(plans) if p.max_fps is not None]
    assert 0 < min(k for k in keeps if k > 0) < 1  # a share of the crops went first
    assert capped and keeps.index(0.0) <= capped[0]  # the frame rate only once the crops are all shed
    assert all(plans[i].keep["mesh"] == 0.0 for i in capped)
    assert plans[-1].max_fps < plans[capped[0]].max_fps  # still hot: the rate keeps falling
    assert "thermal" in plans[-1].reason and "frames at most" in plans[-1].reason
    fs.zone_temp(0, 60.0)  # cooled down: the policy returns and ramps up, crops come back last
    for _ in range(40):
        plan = governor.tick(now, {"EdgeTPU": 0.2}, {"face": 0.01, "mesh": 0.01}, 40.0)
        now += 0.5
    assert plan.max_fps is None and plan.keep["mesh"] == 1.0


# -- live: the policy's shedding accounted for, sources in turn, one device at a time -------------------------------
def test_a_live_run_under_a_hot_device_counts_what_the_policy_shed(tmp_path, image):
    _hot_tree(tmp_path, 95.0)  # the thermal policy allows about a quarter, less each tick
    with edgeaccel.Cascade(FACE_STAGES, placement="as-loaded") as cascade:
        device = cascade.stages[0].device
        assert cascade.stages[1].device == device  # both on the CPU: one device, both stages to relieve
        run = cascade.watch([image] * 60, policy="thermal", sensors={device: SENSOR}, telemetry_root=tmp_path,
                            policy_interval_s=0.05)
        frames = list(run)
        report = run.report()
    mesh = report["stages"][1]
    assert report["frames"]["read"] == report["frames"]["delivered"] == len(frames) == 60  # a file loses no frame
    assert mesh["shed"]["policy"] > 0 and mesh["frames"] + mesh["shed"]["policy"] + mesh["shed"]["overload"] == 60
    for frame in frames:
        looked = "mesh" in frame.result.boxes[0].stages
        assert looked != (frame.shed.get("mesh") == "policy"), frame.shed
    assert report["policy"]["policy"] == "thermal" and report["policy"]["decisions"] > 0
    assert "later stages' crops" in report["policy"]["order"]


def test_a_busy_source_cannot_starve_another(image):
    """Two sources ready at once, one with 60 frames and one with 10: they are taken in turn, so the short one is
    done within its share (about 2 x 10 deliveries), not after the long one."""
    small = np.asarray(Image.fromarray(image).rotate(10))
    with edgeaccel.Cascade(FACE_STAGES, placement="as-loaded") as cascade:
        run = cascade.watch([image] * 60, [small] * 10, names=["busy", "quiet"], queue_size=2)
        order = [frame.source for frame in run]
        report = run.report()
    assert order.count("busy") == 60 and order.count("quiet") == 10
    last_quiet = max(i for i, name in enumerate(order) if name == "quiet")
    assert last_quiet < 2 * 10 + run.in_flight, order
    assert [s["delivered"] for s in report["sources"]] == [60, 10]
    quiet = [f for f in order if f == "quiet"]
    assert len(quiet) == 10


def test_two_stages_on_one_device_never_run_at_once(image):
    """Both stages on the CPU (as an Edge TPU holds one model at a time): their model calls, timed from the
    outside, never overlap, while the CPU work of other frames goes on meanwhile."""
    intervals: list[tuple[float, float]] = []
    lock = threading.Lock()

    def timed(run):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return run(*args, **kwargs)
            finally:
                with lock:
                    intervals.append((start, time.perf_counter()))
        return call

    with edgeaccel.Cascade(FACE_STAGES, placement="as-loaded") as cascade:
        for stage in cascade.stages:
            stage.model.run = timed(stage.model.run)
        run = cascade.watch([image] * 20)
        frames = list(run)
        report = run.report()
    assert len(frames) == 20 and all("mesh" in f.result.boxes[0].stages for f in frames)
    assert len(intervals) == 40
    intervals.sort()
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(intervals)), "two model calls overlapped on one device"
    (lane,) = report["devices"]
    assert lane["stages"] == ["face", "mesh"] and lane["runs"] == 40 and lane["most_at_once"] == 1
    assert lane["switches"] > 0


def test_tracking_ids_are_carried_to_the_later_stages(tmp_path):
    stages = [{"name": "vehicle", "model": str(TRAFFIC), "min_score": 0.3},
              {"name": "kind", "model": str(SHARED / "models" / "mobilenet_v1_0.25_128_quant.tflite"),
               "min_score": 0.3}]
    zones = [Line("middle", [(0, 300), (960, 300)]), Zone("road", [(0, 0), (960, 0), (960, 540), (0, 540)])]
    with edgeaccel.Cascade(stages, placement="as-loaded") as cascade:
        run = cascade.watch(str(VIDEO), track=True, zones=zones)
        frames = list(run)
        report = run.report()
    tracked = [b for f in frames for b in f.result.boxes if b.track_id is not None]
    assert tracked and any("kind" in b.stages for b in tracked)
    assert all(f.tracks is not None for f in frames)
    ids = {b.track_id for b in tracked}
    assert len(ids) < len(tracked)  # the same objects over frames
    summary = report["sources"][0]["tracking"]
    assert summary["tracks"] >= 1 and "road" in summary["zones"] and "middle" in summary["lines"]
    row = frames[-1].to_dict()
    assert "zones" in row and any("track_id" in b for b in row["boxes"])


def test_a_power_budget_sheds_in_the_same_order_and_holds_the_budget(tmp_path):
    """The power policy over a device whose draw (read from a fake hwmon chip) follows the work admitted:
    0.5 W idle + 5 W busy. A 2.5 W budget: the mesh's crops go first, the frame rate only after them."""
    fs = FakeSysfs(tmp_path)
    fs.hwmon(0, "npu", {"power1_input": 500_000})
    governor = Governor("power", [("face", "NPU"), ("mesh", "NPU")], power_budget_w=2.5,
                        sensors={"NPU": SensorSpec(power="hwmon:npu")}, telemetry_root=tmp_path, interval_s=0.5)
    costs, wanted = {"face": 0.01, "mesh": 0.01}, 40.0
    now, plans, watts = 0.0, [], []
    plan = None
    for _ in range(60):
        rate = wanted if plan is None or plan.max_fps is None else min(wanted, plan.max_fps)
        keep = 1.0 if plan is None else plan.keep["mesh"]
        busy = min(1.0, rate * (costs["face"] + keep * costs["mesh"]))
        watts.append(0.5 + 5.0 * busy)
        fs.write("sys/class/hwmon/hwmon0/power1_input", int(watts[-1] * 1e6))
        plan = governor.tick(now, {"NPU": busy * 0.5}, costs, wanted)  # a camera offers 40 a second
        plans.append(plan)
        now += 0.5
    shed = [i for i, p in enumerate(plans) if p.keep["mesh"] < 1.0]
    capped = [i for i, p in enumerate(plans) if p.max_fps is not None]
    assert shed and shed[0] <= (capped[0] if capped else len(plans))
    assert all(plans[i].keep["mesh"] == 0.0 for i in capped)
    assert max(watts[-10:]) <= 2.5 * 1.05, watts[-10:]  # held at the budget
    assert "power" in plans[-1].reason


def test_run_cascade_takes_several_inputs_a_policy_and_counts_lines(tmp_path, cli):
    import json

    import yaml

    path = tmp_path / "cars.yaml"
    path.write_text(yaml.safe_dump({
        "placement": "as-loaded", "live": {"queue_size": 2, "policy": "thermal", "policy_interval_s": 0.1},
        "stages": [{"name": "vehicle", "model": str(TRAFFIC), "min_score": 0.3},
                   {"name": "kind", "model": str(SHARED / "models" / "mobilenet_v1_0.25_128_quant.tflite")}]}))
    done = cli("run", "--cascade", path, "-i", VIDEO, "-i", VIDEO, "--line", "mid=0,300,960,300", "--json",
               "--jsonl", tmp_path / "f.jsonl")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [s["delivered"] for s in report["sources"]] == [20, 20]
    assert all("mid" in s["tracking"]["lines"] for s in report["sources"])
    assert report["policy"]["policy"] == "thermal" and report["policy"]["reason"]  # the machine's own sensors
    kind = report["stages"][1]
    assert kind["frames"] + sum(kind["shed"].values()) == 40  # a file loses no frame; what it sheds is counted
    lines = [json.loads(line) for line in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert len(lines) == 40 and all("zones" in line and "source" in line for line in lines)


def test_a_source_that_fails_ends_alone_and_says_why(image):
    def unplugged():
        yield from [image] * 6
        raise RuntimeError("camera unplugged")

    with edgeaccel.Cascade(FACE_STAGES, placement="as-loaded") as cascade:
        run = cascade.watch(unplugged(), [image] * 8, names=["door", "hall"])
        with pytest.raises(edgeaccel.EdgeAccelError, match="camera unplugged"):
            list(run)
        sources = run.report()["sources"]
    assert [(s["read"], s["delivered"]) for s in sources] == [(6, 6), (8, 8)]  # the other one served to its end
    assert "camera unplugged" in sources[0]["error"] and sources[1]["error"] is None
