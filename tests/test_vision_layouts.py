"""Landmark models, one-channel and two-class masks and heatmaps: real MediaPipe models (tests/data/mediapipe) on
real photos, and ONNX models with constant outputs (tests/vision_models.py) for the layouts and refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import IMAGES
from vision_models import INPUT, constant_outputs

import edgeaccel
from edgeaccel.vision import TaskError
from edgeaccel.vision.preprocess import as_rgb

DATA = Path(__file__).parent / "data" / "mediapipe"


def test_selfie_segmenter_one_channel_mask_matches_a_raw_reference():
    from ai_edge_litert.interpreter import Interpreter
    from PIL import Image

    image = as_rgb(IMAGES / "squat.png")
    with edgeaccel.load(DATA / "selfie_segmentation.tflite", executor="litert") as model:
        assert model.task.name == "segment" and model.task.kind == "mask"
        result = model.predict(image)
        strict = edgeaccel.load(DATA / "selfie_segmentation.tflite", executor="litert",
                                task_options={"threshold": 0.9}).predict(image)
    # the reference: stretched to 256 x 256, 0..1, the raw interpreter, >= 0.5, nearest back to the photo
    tensor = np.asarray(Image.fromarray(image).resize((256, 256), Image.BILINEAR), np.float32)[None] / 255
    interpreter = Interpreter(model_path=str(DATA / "selfie_segmentation.tflite"))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], tensor)
    interpreter.invoke()
    probability = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])[0, ..., 0]
    h, w = image.shape[:2]
    rows = ((np.arange(h) + 0.5) * 256 / h).astype(int)
    cols = ((np.arange(w) + 0.5) * 256 / w).astype(int)
    expected = probability[rows[:, None], cols[None, :]] >= 0.5
    assert result.mask.shape == (h, w)
    assert ((result.mask == 1) == expected).mean() > 0.995
    person = {c["label"]: c["fraction"] for c in result.classes}
    assert set(person) == {"background", "selfie"}  # the model's one label names the foreground
    assert 0.08 < person["selfie"] < 0.4
    assert result.mask[5, 5] == 0  # a corner is background
    # MoveNet's reference hips (shared README) are on the person
    assert result.mask[int(0.62 * h), int(0.42 * w)] == 1 or result.mask[int(0.61 * h), int(0.35 * w)] == 1
    assert (strict.mask == 1).sum() < (result.mask == 1).sum()  # a higher threshold keeps fewer pixels


def test_face_mesh_on_the_face_blazeface_finds():
    image = as_rgb(IMAGES / "grace_hopper.png")
    with edgeaccel.load(DATA / "face_detection_short_range.tflite", executor="litert") as detector:
        face = detector.predict(image).boxes[0]
    x1, y1, x2, y2 = face.xyxy
    cx, cy, side = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * 1.5
    left, top = int(cx - side / 2), int(cy - side / 2)
    crop = image[top:top + int(side), left:left + int(side)]
    with edgeaccel.load(DATA / "face_landmark.tflite", executor="litert") as model:
        task = model.task
        assert task.name == "pose" and task.kind == "landmarks" and "face-mesh-468" in task.reason
        result = model.predict(crop)
        nothing = model.predict(IMAGES / "bird.png")
    assert result.layout == "face-mesh-468" and len(result.poses) == 1
    mesh = result.poses[0]
    assert mesh.score > 0.9 and len(mesh.keypoints) == 468
    xy = np.array([(k.x, k.y) for k in mesh.keypoints])
    assert (xy >= 0).all() and (xy <= crop.shape[1]).all()
    nose = next(k for k in face.keypoints if k.name == "nose_tip")
    # mesh point 1 is the tip of the nose: the detector's nose, in the crop's pixels, within 25 px
    assert np.hypot(xy[1, 0] + left - nose.x, xy[1, 1] + top - nose.y) < 25
    assert nothing.poses == []  # no face: the presence flag is low, so no points are claimed


def _hand_points() -> np.ndarray:
    points = np.zeros((21, 3), np.float32)
    points[:, 0] = np.linspace(10, 50, 21)
    points[:, 1] = np.linspace(50, 12, 21)
    return points


def test_hand_landmarks_are_keypoints_with_names_and_skeleton(tmp_path):
    world = _hand_points() / 1000  # metres, the second [1, 63] output of MediaPipe's hand model
    path = constant_outputs(tmp_path / "hand.onnx", {"screen": _hand_points().reshape(1, 63),
                                                     "flag": np.full((1, 1), 0.97, np.float32),
                                                     "handedness": np.full((1, 1), 0.2, np.float32),
                                                     "world": world.reshape(1, 63)}, dynamic=False, nchw=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.kind == "landmarks"
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert result.layout == "hand-21" and len(result.edges) == 21
    hand = result.poses[0]
    assert hand.score == pytest.approx(0.97)
    assert hand.keypoints[0].name == "wrist" and hand.keypoints[20].name == "pinky_tip"
    assert (hand.keypoints[0].x, hand.keypoints[0].y) == pytest.approx((10, 50))
    assert (hand.keypoints[20].x, hand.keypoints[20].y) == pytest.approx((50, 12))
    assert result.to_dict()["layout"] == "hand-21"


def test_a_lone_flat_output_of_63_is_class_scores_unless_pose_is_asked(tmp_path):
    path = constant_outputs(tmp_path / "flat.onnx", {"scores": _hand_points().reshape(1, 63)}, dynamic=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.name == "classify"  # no presence flag: not clearly landmarks
    with edgeaccel.load(path, executor="onnxruntime", task="pose") as model:
        assert model.task.kind == "landmarks"
        assert len(model.predict(np.zeros((INPUT, INPUT, 3), np.uint8)).poses[0].keypoints) == 21


def test_probabilities_shaped_like_landmarks_are_refused(tmp_path):
    softmax = np.full((1, 63), 1 / 63, np.float32)
    path = constant_outputs(tmp_path / "softmax.onnx", {"p": softmax, "flag": np.ones((1, 1), np.float32)},
                            dynamic=False)
    with edgeaccel.load(path, executor="onnxruntime", task="pose") as model, \
            pytest.raises(TaskError, match="class probabilities") as info:
        model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert "classify" in info.value.hint


def test_blazepose_landmarks_take_visibility_logits(tmp_path):
    values = np.zeros((39, 5), np.float32)
    values[:, 0], values[:, 1] = np.linspace(5, 60, 39), 32
    values[:, 3] = np.linspace(-4, 4, 39)  # visibility logits
    path = constant_outputs(tmp_path / "blazepose.onnx", {"landmarks": values.reshape(1, 195),
                                                          "flag": np.full((1, 1), 0.99, np.float32)}, dynamic=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert result.layout == "blazepose-39"
    points = result.poses[0].keypoints
    assert points[0].name == "nose" and points[32].name == "right_foot_index" and len(points) == 39
    assert points[0].score == pytest.approx(1 / (1 + np.exp(4)), abs=1e-4)
    assert points[38].score == pytest.approx(1 / (1 + np.exp(-4)), abs=1e-4)


def test_two_class_mask_with_logits(tmp_path):
    scores = np.zeros((1, 16, 16, 2), np.float32)
    scores[0, :, :, 0] = 2.0
    scores[0, 4:12, 4:12, 1] = 5.0  # the middle: foreground
    scores[0, 0, 0, 1] = 2.5  # softmax 0.62: foreground at 0.5, background at 0.7
    path = constant_outputs(tmp_path / "two.onnx", {"mask": scores}, dynamic=False, nchw=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.kind == "two-class"
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    with edgeaccel.load(path, executor="onnxruntime", task_options={"threshold": 0.7}) as model:
        strict = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert (result.mask == 1).sum() == 32 * 32 + 16 and result.mask[0, 0] == 1
    assert (strict.mask == 1).sum() == 32 * 32 and strict.mask[0, 0] == 0
    assert [c["label"] for c in result.classes] == ["background", "foreground"]


def test_heatmaps_alone_are_ambiguous_until_a_task_is_given(tmp_path):
    heat = np.zeros((1, 32, 32, 17), np.float32)  # half the input's resolution
    for k in range(17):
        heat[0, k % 32, (3 * k) % 32, k] = 0.9
    path = constant_outputs(tmp_path / "heat.onnx", {"heatmaps": heat}, dynamic=False, nchw=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task is None
        with pytest.raises(TaskError, match="17 keypoint heatmaps or a 17-class segmentation"):
            model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    with edgeaccel.load(path, executor="onnxruntime", task="pose") as model:
        assert model.task.kind == "heatmaps-only"
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    points = result.poses[0].keypoints
    assert points[0].name == "nose" and len(result.edges) == 18
    assert (points[5].x, points[5].y) == pytest.approx(((15 + 0.5) * 2, (5 + 0.5) * 2))
    with edgeaccel.load(path, executor="onnxruntime", task="segment") as model:
        assert model.task.kind == "scores"


def test_movenet_shaped_keypoints_in_pixels_are_refused(tmp_path):
    points = np.zeros((1, 1, 17, 3), np.float32)
    points[..., :2] = 40.0  # pixels, not MoveNet's normalized (y, x)
    path = constant_outputs(tmp_path / "pixels.onnx", {"kp": points}, dynamic=False)
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.kind == "keypoints"
        with pytest.raises(TaskError, match="not MoveNet"):
            model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
