"""Vision tasks on the real models in ../shared, against the answers the raw runtimes give on them, and the same
result on every executor that runs a model (tolerances in ``TOLERANCE``: quantized kernels differ by a step
between runtimes)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import edgeaccel
from conftest import IMAGES, MODELS
from edgeaccel.errors import NoExecutorError, UnsupportedModelError
from edgeaccel.vision import ClassifyResult, DetectResult, PoseResult, SegmentResult, TaskError
from edgeaccel.agreement.tasks import task_metrics

pytestmark = pytest.mark.shared

# detections raw LiteRT finds per frame of traffic_frames.mp4 scoring above 0.3 (256x256 bilinear, LSTM state carried)
TRAFFIC_COUNTS = [3, 3, 2, 3, 3, 3, 4, 4, 4, 4, 4, 3, 2, 3, 2, 3, 2, 2, 2, 2]
# what "the same result" means between executors of one quantized model
TOLERANCE = {"classify": {"top1": 1.0}, "detect": {"precision": 1.0, "recall": 1.0},
             "segment": {"fwiou": 0.95, "pixel_agreement": 0.97}, "pose": {"keypoint_distance_image": 0.02}}


def test_classifier_is_recognized_and_finds_the_chickadee():
    with edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", labels=MODELS / "imagenet_labels.txt") as m:
        assert m.task.name == "classify" and "one score per class" in m.task.reason
        result = m.predict(IMAGES / "bird.png")
    assert isinstance(result, ClassifyResult) and result.probabilities
    assert result.top.label == "chickadee" and result.top.score > 0.3
    assert set(result.timing_ms) == {"preprocess", "inference", "postprocess"}


def test_traffic_detector_on_a_full_size_frame():
    with edgeaccel.load(MODELS / "traffic_model.tflite", labels=MODELS / "traffic_label_map.pbtxt") as model:
        assert model.task.kind == "ssd-postprocess"
        result = model.predict(IMAGES / "traffic_0001.png")
    assert isinstance(result, DetectResult)
    top = result.boxes[0]
    assert (top.label, round(top.score, 2)) == ("pickup_suv_van", 0.41)
    x1, y1, x2, y2 = top.xyxy  # the pickup at the right edge of the 960 x 540 frame, in its pixels
    assert 780 < x1 < x2 <= 960 and 250 < y1 < y2 < 450
    assert all(b.score >= 0.3 for b in result.boxes)


def test_traffic_video_with_the_lstm_state_carried_between_frames():
    av = pytest.importorskip("av")
    with av.open(str(MODELS.parent / "video" / "traffic_frames.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    with edgeaccel.load(MODELS / "traffic_model.tflite", task="detect",
                        labels=MODELS / "traffic_label_map.pbtxt") as model:
        task, state, counts, first = model.task, {}, [], None
        for image in frames:
            arrays, frame = task.preprocess(image, state)  # zeros for the state on the first frame
            outputs = model.run(arrays)
            result = task.postprocess(outputs, frame)
            state = task.state_inputs(outputs)
            first = first or result
            counts.append(len(result.boxes))
    assert set(state) == {"raw_inputs/init_lstm_c", "raw_inputs/init_lstm_h"}
    assert counts == TRAFFIC_COUNTS
    assert (first.boxes[0].label, round(first.boxes[0].score, 2)) == ("pickup_suv_van", 0.41)


def test_deeplab_finds_the_dog_region():
    with edgeaccel.load(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite",
                        labels=MODELS / "pascal_voc_segmentation_labels.txt") as model:
        result = model.predict(IMAGES / "dog_segmentation.png")
    assert isinstance(result, SegmentResult)
    assert result.mask.shape == (result.frame.height, result.frame.width)
    dog = next(c for c in result.classes if c["class_id"] == 12)
    assert dog["label"] == "dog" and dog["fraction"] > 0.3
    assert result.classes[0]["class_id"] == 12  # the largest region
    assert int(np.count_nonzero(result.mask == 12)) == dog["pixels"]


def test_movenet_matches_the_reference_keypoints():
    with edgeaccel.load(MODELS / "movenet_single_pose_lightning_ptq.tflite") as model:
        result = model.predict(IMAGES / "squat.png")
    assert isinstance(result, PoseResult) and len(result.keypoints) == 17 and len(result.edges) == 18
    rows = list(csv.DictReader(open(MODELS / "movenet_single_pose_lightning_ptq_reference.csv")))
    w, h = result.frame.width, result.frame.height
    for row, k in zip(rows, result.keypoints, strict=True):
        assert abs(k.x / w - float(row["keypoint_x"])) < 0.04 and abs(k.y / h - float(row["keypoint_y"])) < 0.04


CASES = [("mobilenet_v2_1.0_224_quant.onnx", "bird.png", "classify"),
         ("deeplabv3_mnv2_dm05_pascal_quant.tflite", "dog_segmentation.png", "segment"),
         ("movenet_single_pose_lightning_ptq.tflite", "squat.png", "pose"),
         ("traffic_model.tflite", "traffic_0001.png", "detect")]


@pytest.mark.parametrize("model_file, image, task", CASES)
def test_same_result_on_every_executor_that_runs_the_model(model_file, image, task):
    results = {}
    for executor in ("litert", "onnxruntime", "openvino"):
        try:
            with edgeaccel.load(MODELS / model_file, executor=executor, strict=True, task=task) as model:
                results[executor] = model.predict(IMAGES / image)
        except (NoExecutorError, UnsupportedModelError):
            continue  # this runtime cannot run this model here (README: which runs what)
    assert results, f"no executor ran {model_file}"
    names = list(results)
    reference = results[names[0]]
    for name in names[1:]:
        measured = task_metrics(task, [reference], [results[name]])
        for key, bound in TOLERANCE[task].items():
            ok = measured[key] <= bound if "distance" in key else measured[key] >= bound
            assert ok, f"{name} vs {names[0]} on {model_file}: {key} {measured[key]:.4f}, bound {bound}"


def test_detect_on_a_classifier_is_a_clear_error():
    with pytest.raises(TaskError, match="--task detect does not fit mobilenet_v1_0.25_128_quant.tflite") as info:
        edgeaccel.load(MODELS / "mobilenet_v1_0.25_128_quant.tflite", task="detect")
    assert "YOLO" in info.value.hint


def test_a_model_without_an_image_input_has_no_task():
    with edgeaccel.load(MODELS / "split_concat.tflite") as model:
        assert model.task is None
        with pytest.raises(TaskError, match="no vision task"):
            model.predict(np.zeros((8, 8, 3), np.uint8))


def test_json_and_overlay(tmp_path):
    pytest.importorskip("PIL")
    import json

    with edgeaccel.load(MODELS / "traffic_model.tflite", labels=MODELS / "traffic_label_map.pbtxt") as model:
        result = model.predict(IMAGES / "traffic_0001.png")
    doc = json.loads(result.to_json())
    assert doc["schema"] == "edgeaccel.vision/1" and doc["task"] == "detect"
    assert doc["image"] == {"width": 960, "height": 540} and doc["boxes"][0]["label"] == "pickup_suv_van"
    drawn = result.render()
    assert drawn.shape == (540, 960, 3) and not np.array_equal(drawn, result.image)
    x1, y1, x2, y2 = (int(v) for v in result.boxes[0].xyxy)
    assert not np.array_equal(drawn[y1 + 5, x1], result.image[y1 + 5, x1])  # the box's left edge is drawn
    saved = result.save(tmp_path / "annotated.png")
    assert saved.stat().st_size > 1000


def test_pil_image_input_and_render_on_another_frame():
    Image = pytest.importorskip("PIL.Image")
    with edgeaccel.load(MODELS / "movenet_single_pose_lightning_ptq.tflite") as model:
        from_pil = model.predict(Image.open(IMAGES / "squat.png"))
        from_path = model.predict(IMAGES / "squat.png")
    assert from_pil.to_dict()["poses"] == from_path.to_dict()["poses"]
    blank = np.zeros((from_pil.frame.height, from_pil.frame.width, 3), np.uint8)
    drawn = from_pil.render(blank)  # a live source draws each result on its own frame
    assert drawn.shape == blank.shape and drawn.any() and not blank.any()
