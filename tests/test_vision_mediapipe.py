"""MediaPipe-style SSD detectors on a real MediaPipe model (tests/data/mediapipe) against a reference written
here, independently, from MediaPipe's calculators (SsdAnchorsCalculator, TensorsToDetectionsCalculator,
NonMaxSuppressionCalculator WEIGHTED) as scalar loops over the raw LiteRT outputs; and the refusal of
anchor-based layouts that match no preset."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import IMAGES
from vision_models import constant_outputs

import edgeaccel
from edgeaccel.vision import TaskError
from edgeaccel.vision import anchors as ssd_anchors

DATA = Path(__file__).parent / "data" / "mediapipe"
FACE = DATA / "face_detection_short_range.tflite"
# face_detection_short_range.pbtxt's options
FACE_ANCHORS = {"num_layers": 4, "min_scale": 0.1484375, "max_scale": 0.75, "input_size_height": 128,
                "input_size_width": 128, "anchor_offset_x": 0.5, "anchor_offset_y": 0.5, "strides": [8, 16, 16, 16],
                "aspect_ratios": [1.0], "fixed_anchor_size": True, "interpolated_scale_aspect_ratio": 1.0}


def reference_anchors(o: dict) -> list[tuple[float, float, float, float]]:
    """(x_center, y_center, w, h) per anchor, the calculator's loops transcribed."""
    anchors, layer, strides = [], 0, o["strides"]
    while layer < o["num_layers"]:
        heights, widths, ratios, scales = [], [], [], []
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            n = len(strides)
            scale = (o["min_scale"] + o["max_scale"]) / 2 if n == 1 else \
                o["min_scale"] + (o["max_scale"] - o["min_scale"]) * last / (n - 1)
            for r in o["aspect_ratios"]:
                ratios.append(r)
                scales.append(scale)
            if o["interpolated_scale_aspect_ratio"] > 0:
                nxt = 1.0 if last == n - 1 else \
                    o["min_scale"] + (o["max_scale"] - o["min_scale"]) * (last + 1) / (n - 1)
                scales.append(math.sqrt(scale * nxt))
                ratios.append(o["interpolated_scale_aspect_ratio"])
            last += 1
        for s, r in zip(scales, ratios, strict=True):
            heights.append(s / math.sqrt(r))
            widths.append(s * math.sqrt(r))
        fh = math.ceil(o["input_size_height"] / strides[layer])
        fw = math.ceil(o["input_size_width"] / strides[layer])
        for y in range(fh):
            for x in range(fw):
                for a in range(len(heights)):
                    w, h = (1.0, 1.0) if o["fixed_anchor_size"] else (widths[a], heights[a])
                    anchors.append(((x + o["anchor_offset_x"]) / fw, (y + o["anchor_offset_y"]) / fh, w, h))
        layer = last
    return anchors


def reference_faces(image_path: Path) -> list[dict]:
    """BlazeFace short range the way MediaPipe's face detection graph runs it: letterbox to 128 (black border),
    pixels to -1..1, raw interpreter, decode, WEIGHTED NMS (0.3), back to the image's pixels."""
    from ai_edge_litert.interpreter import Interpreter
    from PIL import Image

    image = Image.open(image_path).convert("RGB")
    w, h = image.size
    scale = min(128 / w, 128 / h)
    nw, nh = round(w * scale), round(h * scale)
    px, py = (128 - nw) // 2, (128 - nh) // 2
    canvas = Image.new("RGB", (128, 128))
    canvas.paste(image.resize((nw, nh), Image.BILINEAR), (px, py))
    tensor = (np.asarray(canvas, np.float32) / 127.5 - 1)[None]
    interpreter = Interpreter(model_path=str(FACE))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], tensor)
    interpreter.invoke()
    out = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
    raw, logits = out["regressors"][0], out["classificators"][0]
    detections = []
    for i, (xa, ya, wa, ha) in enumerate(reference_anchors(FACE_ANCHORS)):
        score = 1 / (1 + math.exp(-max(-100.0, min(100.0, float(logits[i, 0])))))
        if score < 0.5:
            continue
        xc = raw[i, 0] / 128 * wa + xa
        yc = raw[i, 1] / 128 * ha + ya
        bw, bh = raw[i, 2] / 128 * wa, raw[i, 3] / 128 * ha
        points = [(raw[i, 4 + 2 * k] / 128 * wa + xa, raw[i, 5 + 2 * k] / 128 * ha + ya) for k in range(6)]
        detections.append({"score": score, "box": [xc - bw / 2, yc - bh / 2, xc + bw / 2, yc + bh / 2],
                           "points": points})
    detections.sort(key=lambda d: -d["score"])
    kept = []
    while detections:
        top = detections[0]
        group = [d for d in detections if _iou(d["box"], top["box"]) > 0.3]
        rest = [d for d in detections if _iou(d["box"], top["box"]) <= 0.3]
        total = sum(d["score"] for d in group)
        box = [sum(d["box"][j] * d["score"] for d in group) / total for j in range(4)]
        points = [(sum(d["points"][k][0] * d["score"] for d in group) / total,
                   sum(d["points"][k][1] * d["score"] for d in group) / total) for k in range(6)]
        kept.append({"score": top["score"], "box": box, "points": points})
        detections = rest
    for d in kept:  # normalized letterboxed input -> image pixels
        d["box"] = [(d["box"][0] * 128 - px) / scale, (d["box"][1] * 128 - py) / scale,
                    (d["box"][2] * 128 - px) / scale, (d["box"][3] * 128 - py) / scale]
        d["points"] = [((x * 128 - px) / scale, (y * 128 - py) / scale) for x, y in d["points"]]
    return kept


def _iou(a, b) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def test_presets_make_the_anchor_counts_of_the_real_models():
    # face 896 and 2304, palm 2016, pose 2254: the regressor rows of MediaPipe's own .tflite files
    for name, count in (("face_short_range", 896), ("face_full_range", 2304), ("palm", 2016), ("pose", 2254),
                        ("face_back", 896), ("palm_256", 2944), ("pose_128", 896)):
        assert len(ssd_anchors.generate(ssd_anchors.PRESETS[name].anchors)) == count == \
            ssd_anchors.PRESETS[name].count
    # the same 896 anchors, told apart by the input size and the regressors' width
    assert ssd_anchors.matching_preset(896, 16, (128, 128)).name == "face_short_range"
    assert ssd_anchors.matching_preset(896, 16, (256, 256)).name == "face_back"
    assert ssd_anchors.matching_preset(896, 12, (128, 128)).name == "pose_128"
    assert ssd_anchors.matching_preset(896, 16, (64, 64)) is None
    ours = ssd_anchors.generate(ssd_anchors.anchor_options(FACE_ANCHORS))
    theirs = np.array([(y, x, h, w) for x, y, w, h in reference_anchors(FACE_ANCHORS)], np.float32)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    varied = dict(FACE_ANCHORS, fixed_anchor_size=False, aspect_ratios=[1.0, 2.0], strides=[8, 16, 32, 32],
                  interpolated_scale_aspect_ratio=0.5)
    ours = ssd_anchors.generate(ssd_anchors.anchor_options(varied))
    theirs = np.array([(y, x, h, w) for x, y, w, h in reference_anchors(varied)], np.float32)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_blazeface_finds_grace_hoppers_face_within_2_px_of_the_reference():
    expected = reference_faces(IMAGES / "grace_hopper.png")
    assert len(expected) == 1
    with edgeaccel.load(FACE, executor="litert") as model:
        task = model.task
        assert task.kind == "ssd-mediapipe" and task.preset.name == "face_short_range"
        assert "896 anchors" in task.reason
        result = model.predict(IMAGES / "grace_hopper.png")
    assert result.decoder == "ssd-mediapipe" and len(result.boxes) == 1
    box = result.boxes[0]
    assert box.label == "face" and box.score == pytest.approx(expected[0]["score"], abs=0.01)
    np.testing.assert_allclose(box.xyxy, expected[0]["box"], atol=2.0)
    assert [k.name for k in box.keypoints][:3] == ["right_eye", "left_eye", "nose_tip"]
    np.testing.assert_allclose([(k.x, k.y) for k in box.keypoints], expected[0]["points"], atol=2.0)
    # the face is in the upper middle of the 512 x 600 photo; eyes above the mouth
    x1, y1, x2, y2 = box.xyxy
    assert 100 < x1 < x2 < 420 and 60 < y1 < y2 < 400
    assert box.keypoints[0].y < box.keypoints[3].y
    as_json = result.to_dict()["boxes"][0]
    assert set(as_json) == {"xyxy", "score", "class_id", "label", "keypoints"}
    assert set(as_json["keypoints"][0]) == {"name", "x", "y", "score"}


def test_anchor_options_given_as_task_options_give_the_same_faces():
    with edgeaccel.load(FACE, executor="litert") as model:
        by_preset = model.predict(IMAGES / "grace_hopper.png")
    with edgeaccel.load(FACE, executor="litert", task="detect",
                        task_options={"anchors": FACE_ANCHORS, "ssd": {"num_keypoints": 6, "nms": "plain"}}) as model:
        assert model.task.kind == "ssd-mediapipe"
        by_options = model.predict(IMAGES / "grace_hopper.png")
    assert len(by_options.boxes) == 1
    # plain NMS keeps the best box rather than the weighted mean: a few pixels apart at most
    np.testing.assert_allclose(by_options.boxes[0].xyxy, by_preset.boxes[0].xyxy, atol=8)


def test_a_detector_with_no_preset_is_refused_with_the_anchor_hint_never_decoded_as_yolo(tmp_path):
    rng = np.random.default_rng(0)
    regressors = rng.normal(0, 30, (1, 500, 16)).astype(np.float32)  # 500 anchors: no preset has them
    scores = rng.normal(0, 40, (1, 500, 1)).astype(np.float32)  # logits: "scores" up to 100s
    path = constant_outputs(tmp_path / "blaze_like.onnx", {"regressors": regressors, "classificators": scores},
                            dynamic=False, nchw=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task is None  # nothing claims it
        with pytest.raises(TaskError, match="anchor-based SSD detector") as info:
            model.predict(np.zeros((64, 64, 3), np.uint8))
    assert "anchors" in info.value.hint and "strides" in info.value.hint
    with pytest.raises(TaskError, match="anchor-based SSD detector"):
        edgeaccel.load(path, executor="onnxruntime", task="detect")
    with pytest.raises(TaskError, match="make 896 anchors"):  # options that do not fit the outputs
        edgeaccel.load(path, executor="onnxruntime", task_options={"anchors": "face_short_range"})


def test_blazeface_shapes_at_another_input_size_are_not_claimed_by_the_preset(tmp_path):
    """[1, 896, 16] + [1, 896, 1] on a 64 x 64 input: the shapes of the face preset, but not its input."""
    path = constant_outputs(tmp_path / "small.onnx", {"r": np.zeros((1, 896, 16), np.float32),
                                                      "c": np.zeros((1, 896, 1), np.float32)}, dynamic=False,
                            nchw=False)
    with pytest.raises(TaskError, match="no preset"):
        edgeaccel.load(path, executor="onnxruntime", task="detect")


def test_cli_prints_the_faces_keypoints_and_refuses_an_unknown_anchor_layout_with_exit_4(cli, tmp_path):
    import json

    out = cli("run", str(FACE), "--input", str(IMAGES / "grace_hopper.png"), "--task", "auto", "--runs", "1",
               "--json")
    assert out.returncode == 0, out.stderr
    vision = json.loads(out.stdout)["vision"]
    assert vision["decoder"] == "ssd-mediapipe" and "face_short_range" in vision["recognized"]
    assert len(vision["boxes"]) == 1 and len(vision["boxes"][0]["keypoints"]) == 6
    path = constant_outputs(tmp_path / "blaze_like.onnx", {"r": np.zeros((1, 500, 16), np.float32),
                                                           "c": np.zeros((1, 500, 1), np.float32)},
                            dynamic=False, nchw=False)
    image = tmp_path / "gray.png"
    from PIL import Image

    Image.new("RGB", (64, 64), (90, 90, 90)).save(image)
    out = cli("run", str(path), "--input", str(image), "--task", "detect", "--runs", "1")
    assert out.returncode == 4
    assert "anchor-based SSD detector" in out.stderr and "--task-option" not in out.stdout
    options = json.dumps({"input_size_height": 64, "input_size_width": 64, "min_scale": 0.2, "max_scale": 0.8,
                          "strides": [8, 16], "fixed_anchor_size": True, "interpolated_scale_aspect_ratio": 0})
    out = cli("run", str(path), "--input", str(image), "--task", "detect", "--runs", "1",
               "--task-option", f"anchors={options}", "--task-option", 'ssd={"num_keypoints": 6}')
    assert out.returncode == 4 and "make 80 anchors" in out.stderr  # 8x8 + 4x4: the options are checked


def test_palm_preset_decodes_box_keypoints_and_merges_overlaps_by_weight(tmp_path):
    """[1, 2016, 18] + [1, 2016, 1] on a 192 x 192 input: the palm preset. Two neighbouring anchors predict
    boxes that overlap; weighted NMS returns their score-weighted mean with the best score."""
    grid = ssd_anchors.generate(ssd_anchors.PRESETS["palm"].anchors)  # y, x, h, w (1.0: fixed size)
    regressors = np.zeros((1, 2016, 18), np.float32)
    logits = np.full((1, 2016, 1), -50.0, np.float32)
    a, b = 300, 301  # the two anchors of one cell (the cell's second anchor is the interpolated one)
    assert np.allclose(grid[a, :2], grid[b, :2])
    regressors[0, a, :4] = [19.2, 0, 96, 48]  # centre +0.1 x, 0.5 wide, 0.25 high (x_scale..h_scale 192)
    regressors[0, b, :4] = [19.2, 9.6, 96, 48]  # the same box 0.05 lower: IoU 0.67
    for k in range(7):
        regressors[0, a, 4 + 2 * k:6 + 2 * k] = [k * 1.92, -k * 1.92]
        regressors[0, b, 4 + 2 * k:6 + 2 * k] = [k * 1.92, -k * 1.92 + 9.6]
    logits[0, a, 0], logits[0, b, 0] = 3.0, 1.0
    path = constant_outputs(tmp_path / "palm.onnx", {"boxes": regressors, "scores": logits}, dynamic=False,
                            nchw=False, size=192)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.kind == "ssd-mediapipe" and model.task.preset.name == "palm"
        assert model.task.letterbox and model.task.normalize == "0,1"
        result = model.predict(np.zeros((192, 192, 3), np.uint8))
    assert len(result.boxes) == 1
    box = result.boxes[0]
    sa, sb = 1 / (1 + np.exp(-3.0)), 1 / (1 + np.exp(-1.0))
    assert box.score == pytest.approx(sa, abs=1e-5) and box.label == "palm"
    ya, xa = grid[a, :2]
    shift = 0.05 * sb / (sa + sb)  # the weighted mean moves the box down by the second box's share
    expected = np.array([xa + 0.1 - 0.25, ya - 0.125 + shift, xa + 0.1 + 0.25, ya + 0.125 + shift]) * 192
    np.testing.assert_allclose(box.xyxy, expected, atol=1e-3)
    assert [k.name for k in box.keypoints] == list(ssd_anchors.PRESETS["palm"].decode.keypoint_names)
    for k, point in enumerate(box.keypoints):
        assert (point.x, point.y) == pytest.approx(((xa + 0.01 * k) * 192, (ya - 0.01 * k + shift) * 192),
                                                   abs=1e-3)
    with edgeaccel.load(path, executor="onnxruntime", task_options={"ssd": {"nms": "plain"}}) as model:
        plain = model.predict(np.zeros((192, 192, 3), np.uint8))
    # plain NMS keeps the best box as it is
    np.testing.assert_allclose(plain.boxes[0].xyxy, (expected - [0, shift * 192, 0, shift * 192]), atol=1e-3)
