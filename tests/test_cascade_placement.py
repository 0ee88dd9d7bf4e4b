"""Placement of a cascade's stages over two emulated accelerators (edgeaccel/testing/emulated.py, installed as
real plug-ins; answers by LiteRT on the CPU, latency simulated) and the CPU: load() puts both stages on the
same best-ranked accelerator, where they would take turns; placement moves one onto the other accelerator, and
the live run reports each stage on its own device with every frame accounted for. No speed is asserted."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, SHARED
from PIL import Image

import edgeaccel
from edgeaccel.testing.emulated import emulated_accelerator
from edgeaccel.testing.plugins import installed_plugins

MEDIAPIPE = ROOT / "tests" / "data" / "mediapipe"
STAGES = [{"name": "face", "model": str(MEDIAPIPE / "face_detection_short_range.tflite")},
          {"name": "mesh", "model": str(MEDIAPIPE / "face_landmark.tflite"),
           "crop": {"scale": 1.5, "rotate": [0, 1, 0]}}]


@pytest.fixture()
def two_accelerators(tmp_path):
    # equally fast, one request at a time each (as an Edge TPU): two stages on one of them take turns
    first = emulated_accelerator("cascade-npu", "CascadeNPU", "npu", fixed_latency_ms=8, speedup=1000, memo=256)
    second = emulated_accelerator("cascade-gpu", "CascadeGPU", "gpu", fixed_latency_ms=8, speedup=1000, memo=256)
    with installed_plugins(tmp_path, first, second) as plugin:
        yield plugin


def test_stages_that_loaded_on_one_accelerator_are_spread_over_both(two_accelerators):
    with edgeaccel.Cascade(STAGES, placement="as-loaded") as together:
        loaded_on = [s.device for s in together.stages]
    ours = {"CascadeNPU", "CascadeGPU"}
    assert loaded_on[0] == loaded_on[1] and loaded_on[0] in ours, loaded_on  # load() alone: the same best one
    with edgeaccel.Cascade(STAGES) as cascade:
        devices = [s.device for s in cascade.stages]
        assert set(devices) == ours, (devices, cascade.placement)
        assert any("moved from" in note for note in cascade.placement), cascade.placement
        image = np.asarray(Image.open(SHARED / "images" / "grace_hopper.png").convert("RGB"))
        result = cascade.predict(image)
        assert len(result.boxes[0].stages["mesh"].keypoints) == 468  # the moved stage still answers
        run = cascade.watch([image] * 12)
        delivered = sum(1 for _ in run)
        report = run.report()
    assert delivered == 12 and report["frames"]["read"] == 12 and report["frames"]["abandoned"] == 0
    assert {s["device"] for s in report["stages"]} == ours


def test_a_pinned_stage_is_not_moved(two_accelerators):
    pinned = [STAGES[0], {**STAGES[1], "executor": "litert", "device": "CPU"}]
    with edgeaccel.Cascade(pinned) as cascade:
        assert cascade.stages[1].device == "CPU"
        assert not any("moved" in note for note in cascade.placement), cascade.placement


def _camera(image, count: int, fps: float):
    """``count`` frames at ``fps``, as a camera gives them (a list would be read all at once)."""
    import time

    for _ in range(count):
        time.sleep(1.0 / fps)
        yield image


def test_under_overload_a_later_stage_sheds_its_work_before_frames_are_dropped(tmp_path):
    """The mesh pinned to an emulated device 10x slower than the detector, frames offered as fast as they come
    at 100 a second, as a camera gives them, with drop="oldest": the mesh passes frames on unlooked (``shed``) instead of holding the detector up; every
    frame read is delivered or dropped, and each delivered one has the face and either its mesh or says why not."""
    slow = emulated_accelerator("cascade-slow", "SlowNPU", "npu", fixed_latency_ms=40, speedup=1000, memo=64)
    with installed_plugins(tmp_path, slow):
        stages = [{**STAGES[0], "executor": "litert", "device": "CPU"},
                  {**STAGES[1], "executor": "cascade-slow", "device": "SlowNPU"}]
        with edgeaccel.Cascade(stages) as cascade:
            image = np.asarray(Image.open(SHARED / "images" / "grace_hopper.png").convert("RGB"))
            run = cascade.watch(_camera(image, 40, fps=100), drop="oldest", queue_size=3)
            frames = list(run)
            report = run.report()
    counts = report["frames"]
    assert counts["read"] == 40 and counts["delivered"] == len(frames)
    assert counts["read"] == counts["delivered"] + sum(counts["dropped"].values()) + counts["abandoned"]
    mesh = report["stages"][1]
    assert mesh["shed"]["overload"] > 0 and mesh["shed"]["policy"] == 0, report
    assert mesh["frames"] + mesh["shed"]["overload"] == len(frames), report
    for frame in frames:
        face = frame.result.boxes[0]
        assert ("mesh" in face.stages) != ("mesh" in frame.shed)
        assert frame.shed.get("mesh", "overload") == "overload"
        assert ("shed" in frame.to_dict()) == bool(frame.shed)
