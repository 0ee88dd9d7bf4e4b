"""Cascades (edgeaccel/cascade) on real models: MediaPipe's face detector then its face mesh on crops (upright
and on a rotated photo: the rotation from the eyes must bring the same landmarks back), the traffic SSD then an
ImageNet classifier on each vehicle, a live run where every frame is accounted for, the pipeline YAML file and
`run --cascade`, and placement over two emulated accelerators installed as plug-ins."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import ROOT, SHARED
from PIL import Image

import edgeaccel
from edgeaccel.cascade.geometry import CropOptions, crop_for, sample
from edgeaccel.errors import ConfigError, InputError
from edgeaccel.vision.results import Box, ClassifyResult, Keypoint, PoseResult

MEDIAPIPE = ROOT / "tests" / "data" / "mediapipe"
FACE = MEDIAPIPE / "face_detection_short_range.tflite"
MESH = MEDIAPIPE / "face_landmark.tflite"
HOPPER = SHARED / "images" / "grace_hopper.png"
TRAFFIC = SHARED / "models" / "traffic_model.tflite"
MOBILENET = SHARED / "models" / "mobilenet_v2_1.0_224_quant.tflite"
VIDEO = SHARED / "video" / "traffic_frames.mp4"
FACE_STAGES = [{"name": "face", "model": str(FACE)},
               {"name": "mesh", "model": str(MESH), "crop": {"scale": 1.5, "rotate": [0, 1, 0]}}]
MESH_NOSE_TIP, DETECTOR_NOSE = 1, 2  # face-mesh-468 index 1 is the nose tip; the detector's third point the nose
MESH_EYES = ((33, 133), (362, 263))  # corners of the subject's right and left eye in the mesh
VEHICLES = ("car", "cab", "van", "minivan", "jeep", "pickup", "limousine", "wagon", "convertible", "truck",
            "bus", "racer", "trailer", "ambulance", "police")


@pytest.fixture(scope="module")
def faces():
    with edgeaccel.Cascade(FACE_STAGES, placement="as-loaded") as cascade:
        yield cascade


def _mesh_xy(result) -> np.ndarray:
    return np.array([[k.x, k.y] for k in result.keypoints])


# -- geometry --------------------------------------------------------------------------------------------------
def test_a_rotated_crop_samples_and_maps_back_the_same_pixel():
    image = np.zeros((200, 300, 3), np.uint8)
    image[118:123, 208:213] = 255  # a dot centred at (210, 120)
    box = Box((150.0, 80.0, 250.0, 140.0), 0.9, 0, "thing",
              keypoints=[Keypoint("a", 160, 130, 1), Keypoint("b", 240, 90, 1)])
    crop = crop_for(box, CropOptions(scale=1.5, rotate=(0, 1, 0)), (64, 64))
    assert crop.width == crop.height == pytest.approx(150)  # square on the longer side, times the scale
    assert math.degrees(crop.angle) == pytest.approx(math.degrees(math.atan2(-40, 80)))  # along a -> b
    pixels = sample(image, crop)
    assert pixels.shape == (64, 64, 3)
    ys, xs = np.nonzero(pixels[..., 0] > 64)
    found = crop.points_to_frame(np.array([[xs.mean() + 0.5, ys.mean() + 0.5]]))[0]
    assert np.hypot(*(found - (210.5, 120.5))) < 2.5, found


def test_shift_follows_the_crops_own_axes_and_keypoints_can_be_the_region():
    # a palm-like box: wrist at the bottom, middle finger to its right, so the crop turns by -90 degrees
    box = Box((100.0, 100.0, 140.0, 140.0), 0.9, 0, "palm",
              keypoints=[Keypoint("wrist", 120, 120, 1), Keypoint("x", 0, 0, 1), Keypoint("mcp", 140, 120, 1)])
    crop = crop_for(box, CropOptions(scale=2.0, shift=(0.0, -0.5), rotate=(0, 2, 90)), (32, 32))
    assert math.degrees(crop.angle) == pytest.approx(90)  # the wrist -> finger vector turned to point up
    # "up" in the crop (-y) is +x in the frame: the shift of half the crop (80 px) moves the centre right
    assert (crop.cx, crop.cy) == pytest.approx((120 + 40, 120))
    top_middle = crop.points_to_frame(np.array([[16, 0]]))[0]
    assert top_middle == pytest.approx((crop.cx + 40, crop.cy))
    region = crop_for(box, CropOptions(keypoints=(0, 2), square=False), None)  # the wrist-to-mcp segment
    assert region is None  # a flat region (zero height) has no pixels
    region = crop_for(box, CropOptions(keypoints=(0, 2), square=True), None)
    assert (region.cx, region.cy, region.width) == pytest.approx((130, 120, 20))


def test_crop_options_refuse_what_they_cannot_mean():
    with pytest.raises(ConfigError, match="scale"):
        CropOptions(scale=0)
    with pytest.raises(ConfigError, match="rotate"):
        CropOptions(rotate=(1, 1, 0))
    with pytest.raises(ConfigError, match="unknown crop keys"):
        CropOptions.from_dict({"margin": 0.2}, "stage 'x'")
    box = Box((0.0, 0.0, 10.0, 10.0), 1.0, 0, "x")  # rotation asks for keypoints this box does not have
    assert crop_for(box, CropOptions(rotate=(0, 1, 0)), None) is None


# -- face detector -> face mesh --------------------------------------------------------------------------------
def test_face_mesh_lands_on_the_face_the_detector_found(faces):
    result = faces.predict(HOPPER)
    assert result.frame.width == 512 and result.frame.height == 600  # the original image's pixels
    assert len(result.boxes) == 1
    face = result.boxes[0]
    mesh = face.stages["mesh"]
    assert isinstance(mesh, PoseResult) and mesh.layout == "face-mesh-468" and len(mesh.keypoints) == 468
    xy = _mesh_xy(mesh)
    x1, y1, x2, y2 = face.xyxy
    size = x2 - x1
    inside = (xy[:, 0] > x1 - 0.1 * size) & (xy[:, 0] < x2 + 0.1 * size) & (xy[:, 1] > y1 - 0.1 * size) \
        & (xy[:, 1] < y2 + 0.1 * size)
    assert inside.mean() > 0.95
    nose = face.keypoints[DETECTOR_NOSE]
    assert np.hypot(*(xy[MESH_NOSE_TIP] - (nose.x, nose.y))) < 0.12 * size  # the detector places it coarsely
    for (a, b), eye in zip(MESH_EYES, face.keypoints[:2], strict=True):
        assert np.hypot(*((xy[a] + xy[b]) / 2 - (eye.x, eye.y))) < 0.12 * size, (a, b)
    as_json = json.loads(result.to_json())
    stage = as_json["boxes"][0]["stages"]["mesh"]
    assert len(stage["poses"][0]["keypoints"]) == 468 and len(stage["crop"]["corners"]) == 4
    assert "mesh" in result.timing_ms


def test_the_rotation_from_the_eyes_brings_back_the_same_landmarks_on_a_turned_photo(faces):
    upright = faces.predict(HOPPER)
    degrees = 30
    turned_image = np.asarray(Image.open(HOPPER).convert("RGB").rotate(degrees, resample=Image.BILINEAR,
                                                                        expand=True))
    turned = faces.predict(turned_image)
    assert len(turned.boxes) == 1
    crop = turned.boxes[0].stages["mesh"].crop
    assert math.degrees(crop.angle) == pytest.approx(-degrees, abs=6)  # the crop turned with the face
    # where each upright landmark goes under the same rotation (PIL turns counter-clockwise about the centre)
    h, w = upright.frame.height, upright.frame.width
    th, tw = turned_image.shape[:2]
    t = math.radians(degrees)
    centred = _mesh_xy(upright.boxes[0].stages["mesh"]) - (w / 2, h / 2)
    expected = np.stack([centred[:, 0] * math.cos(t) + centred[:, 1] * math.sin(t),
                         -centred[:, 0] * math.sin(t) + centred[:, 1] * math.cos(t)], axis=1) + (tw / 2, th / 2)
    size = upright.boxes[0].xyxy[2] - upright.boxes[0].xyxy[0]
    gap = np.hypot(*(_mesh_xy(turned.boxes[0].stages["mesh"]) - expected).T)
    assert np.median(gap) < 0.04 * size and gap.max() < 0.15 * size, (np.median(gap), gap.max())


def test_without_the_rotation_the_mesh_model_does_not_see_a_face_at_45_degrees():
    """The same photo turned 45 degrees: cropped upright, the mesh model's face presence falls (MediaPipe
    trains it on upright faces); cropped along the eyes, it finds the face as on the upright photo."""
    turned_image = np.asarray(Image.open(HOPPER).convert("RGB").rotate(45, resample=Image.BILINEAR, expand=True))
    presence = []
    for rotate in ([0, 1, 0], None):
        stages = [FACE_STAGES[0], {**FACE_STAGES[1], "crop": {"scale": 1.5, "rotate": rotate}}]
        with edgeaccel.Cascade(stages, placement="as-loaded") as cascade:
            mesh = cascade.predict(turned_image).boxes[0].stages["mesh"]
        presence.append(mesh.poses[0].score if mesh.poses else 0.0)
    assert presence[0] > 0.9 and presence[1] < presence[0] - 0.2, presence


# -- traffic detector -> ImageNet classifier -------------------------------------------------------------------
def test_each_vehicle_crop_is_classified_and_the_best_one_as_a_vehicle():
    stages = [{"name": "vehicle", "model": str(TRAFFIC), "min_score": 0.3, "labels": ["sedan", "pickup_suv_van", "large_veh_bus"]},
              {"name": "kind", "model": str(MOBILENET), "min_score": 0.3, "max_crops": 2, "crop": {"scale": 1.1}}]
    with edgeaccel.Cascade(stages, placement="as-loaded") as cascade:
        result = cascade.predict(SHARED / "images" / "traffic_0001.png")
    kept = [b for b in result.boxes if b.score >= 0.3]
    assert len(kept) >= 3
    classified = [b for b in result.boxes if "kind" in b.stages]
    assert len(classified) == 2  # max_crops: the two best scoring boxes, the rest not looked at
    assert all(b.score >= max(x.score for x in result.boxes if "kind" not in x.stages) for b in classified)
    for box in classified:
        kind = box.stages["kind"]
        assert isinstance(kind, ClassifyResult) and len(kind.classes) == 5
    best = max(classified, key=lambda b: b.score)
    labels = " ".join(c.label for c in best.stages["kind"].classes)
    assert any(v in labels.replace(",", " ").split() for v in VEHICLES), labels


# -- live -----------------------------------------------------------------------------------------------------
def test_watch_delivers_every_frame_of_a_video_in_order_with_per_stage_devices():
    stages = [{"name": "vehicle", "model": str(TRAFFIC), "min_score": 0.3},
              {"name": "kind", "model": str(SHARED / "models" / "mobilenet_v1_0.25_128_quant.tflite"),
               "min_score": 0.3}]
    with edgeaccel.Cascade(stages, placement="as-loaded") as cascade:
        run = cascade.watch(str(VIDEO))
        frames = list(run)
        report = run.report()
    assert [f.index for f in frames] == list(range(20))
    assert report["frames"] == {"read": 20, "delivered": 20, "dropped": {"overload": 0, "policy": 0}, "abandoned": 0}
    assert all(set(f.stage_ms) == {"vehicle", "kind"} for f in frames)
    crops = sum(1 for f in frames for b in f.result.boxes if "kind" in b.stages)
    by_name = {s["name"]: s for s in report["stages"]}
    assert by_name["vehicle"]["frames"] == 20 and by_name["kind"]["calls"] == crops > 0
    assert all(s["device"] and s["executor"] and s["p50_ms"] > 0 for s in report["stages"])
    assert json.loads(json.dumps(frames[0].to_dict()))["index"] == 0


def test_a_dropping_run_accounts_for_every_frame(faces):
    image = np.asarray(Image.open(HOPPER).convert("RGB"))
    run = faces.watch([image] * 30, drop="oldest", queue_size=1)
    delivered = sum(1 for _ in run)
    frames = run.report()["frames"]
    assert frames["read"] == 30 and frames["abandoned"] == 0
    assert frames["delivered"] == delivered == 30 - sum(frames["dropped"].values())


def test_bad_watch_options_and_stages_are_refused_with_a_hint(faces):
    with pytest.raises(InputError, match="drop"):
        faces.watch([np.zeros((8, 8, 3), np.uint8)], drop="newest")
    with pytest.raises(ConfigError, match="at least two stages"):
        edgeaccel.Cascade([FACE_STAGES[0]])
    with pytest.raises(ConfigError, match="must detect"):  # the mesh gives points, not boxes to crop
        edgeaccel.Cascade([FACE_STAGES[1], FACE_STAGES[0]])
    with pytest.raises(ConfigError, match="unknown keys"):
        edgeaccel.Cascade([FACE_STAGES[0], {**FACE_STAGES[1], "margin": 0.2}])


# -- the pipeline file and the CLI -----------------------------------------------------------------------------
def _pipeline_file(tmp_path, stages, **more) -> str:
    import yaml

    path = tmp_path / "faces.yaml"
    path.write_text(yaml.safe_dump({"stages": stages, **more}), encoding="utf-8")
    return str(path)


def test_run_cascade_prints_each_box_with_its_later_stages(cli, tmp_path):
    (tmp_path / "models").mkdir()
    for model in (FACE, MESH):  # relative paths are the file's folder's
        (tmp_path / "models" / model.name).write_bytes(model.read_bytes())
    stages = [{"name": "face", "model": f"models/{FACE.name}"},
              {"name": "mesh", "model": f"models/{MESH.name}", "crop": {"scale": 1.5, "rotate": [0, 1, 0]}}]
    path = _pipeline_file(tmp_path, stages, placement="as-loaded")
    done = cli("run", "--cascade", path, "-i", str(HOPPER), "--json", "--save", str(tmp_path / "out.png"), timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [s["name"] for s in document["stages"]] == ["face", "mesh"]
    assert document["boxes"][0]["stages"]["mesh"]["layout"] == "face-mesh-468"
    assert Image.open(tmp_path / "out.png").size == (512, 600)


def test_a_wrong_pipeline_file_is_a_clear_error(tmp_path):
    from edgeaccel.cascade import load_cascade

    with pytest.raises(ConfigError, match="unknown keys"):
        load_cascade(_pipeline_file(tmp_path, FACE_STAGES, stage=[]))
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_cascade(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_cascade(tmp_path / "missing.yaml")


def test_run_cascade_on_a_video_writes_a_line_a_frame_and_the_report(cli, tmp_path):
    stages = [{"name": "vehicle", "model": str(TRAFFIC), "min_score": 0.3},
              {"name": "kind", "model": str(SHARED / "models" / "mobilenet_v1_0.25_128_quant.tflite")}]
    path = _pipeline_file(tmp_path, stages, placement="as-loaded", live={"queue_size": 2})
    done = cli("run", "--cascade", path, "-i", str(VIDEO), "--json", "--jsonl", str(tmp_path / "frames.jsonl"),
               timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema"] == "edgeaccel.cascade-run/2" and report["queue_size"] == 2
    assert report["frames"]["read"] == report["frames"]["delivered"] == 20
    lines = (tmp_path / "frames.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(20))


def test_run_without_a_model_or_a_cascade_says_what_to_give(cli):
    done = cli("run", "-i", str(HOPPER), timeout=120)
    assert done.returncode != 0 and "--cascade" in done.stderr and "Traceback" not in done.stderr


def test_a_stage_that_fails_mid_run_stops_the_run_and_reaches_the_caller():
    mesh = edgeaccel.load(MESH, calibrate=False)
    with edgeaccel.Cascade([FACE_STAGES[0], {"name": "mesh", "model": mesh, "crop": {"scale": 1.5}}],
                           placement="as-loaded") as cascade:
        mesh.close()  # the caller closed the model it lent the cascade
        image = np.asarray(Image.open(HOPPER).convert("RGB"))
        run = cascade.watch([image] * 5)
        with pytest.raises(edgeaccel.ModelClosedError):
            list(run)
        assert run.report()["frames"]["delivered"] == 0
