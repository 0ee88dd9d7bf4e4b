"""YOLO decoding on ONNX models whose outputs the tests set (tests/vision_models.py): v8 [1, 4+C, N] with a
dynamic input size, v5 [1, N, 5+C] with objectness, NMS already in the graph [1, N, 6]; class-aware NMS;
boxes mapped back through the letterbox; the same boxes on ONNX Runtime and OpenVINO."""

from __future__ import annotations

import numpy as np
import pytest
from vision_models import INPUT, candidates, cells, constant_output

import edgeaccel
from edgeaccel.vision import TaskError

NAMES = "{0: 'person', 1: 'car', 2: 'dog'}"
# (cx, cy, w, h, class, score) in the 64 x 64 input
ROWS = [(32, 32, 20, 20, 0, 0.9),   # kept
        (33, 33, 20, 20, 0, 0.8),   # same class, IoU ~0.9 with the first: suppressed
        (32, 32, 20, 20, 1, 0.7),   # same place, another class: kept (class-aware)
        (10, 50, 8, 8, 2, 0.6),     # elsewhere: kept
        (50, 10, 6, 6, 2, 0.2)]     # below the 0.25 threshold


@pytest.fixture(scope="module")
def v8_dynamic(tmp_path_factory):
    values = candidates(ROWS, classes=3).T[None]  # [1, 7, 84]: channel-major, as Ultralytics exports v8/v11
    return constant_output(tmp_path_factory.mktemp("yolo") / "v8.onnx", values,
                           metadata={"names": NAMES, "imgsz": f"[{INPUT}, {INPUT}]", "task": "detect"})


def test_v8_dynamic_input_is_recognized_letterboxed_and_mapped_back(v8_dynamic):
    image = np.zeros((64, 128, 3), np.uint8)  # twice as wide as high: letterboxed into 64x64 with 16 px bars
    with edgeaccel.load(v8_dynamic, executor="onnxruntime") as model:
        task = model.task
        assert task.name == "detect" and task.kind == "yolov8" and task.letterbox
        assert (task.height, task.width) == (INPUT, INPUT)  # from the imgsz metadata, the input being dynamic
        assert "metadata" in task.reason
        arrays, frame = task.preprocess(image)
        assert arrays[0].shape == (1, 3, INPUT, INPUT) and arrays[0].dtype == np.float32
        assert (frame.pad_x, frame.pad_y, frame.scale_x) == (0.0, 16.0, 0.5)
        assert float(arrays[0][0, 0, 0, 0]) == pytest.approx(114 / 255)  # the letterbox grey, scaled 0..1
        result = model.predict(image)
    got = [(b.label, round(b.score, 3), tuple(round(v, 1) for v in b.xyxy)) for b in result.boxes]
    # input (22, 22, 42, 42) -> image x (22-0)/0.5, y (22-16)/0.5
    assert got == [("person", 0.9, (44.0, 12.0, 84.0, 52.0)),
                   ("car", 0.7, (44.0, 12.0, 84.0, 52.0)),
                   ("dog", 0.6, (12.0, 60.0, 28.0, 64.0))]  # y2 (54 - 16) / 0.5 = 76, clipped to the image


def test_v8_dynamic_input_takes_imgsz_option(tmp_path):
    values = candidates(ROWS, classes=3, n=cells(128)).T[None]  # the count a head has on a 128 x 128 input
    path = constant_output(tmp_path / "plain.onnx", values)  # no metadata at all
    with edgeaccel.load(path, executor="onnxruntime", task="detect", task_options={"imgsz": 128}) as model:
        assert model.task.kind == "yolov8"
        result = model.predict(np.zeros((128, 128, 3), np.uint8))
    # no names: class ids as labels; the 128 input maps 1:1 ... but boxes were given for a 64 input: unchanged
    assert [b.label for b in result.boxes] == ["0", "1", "2"]
    assert result.boxes[0].xyxy == pytest.approx((22, 22, 42, 42))


def test_v5_layout_multiplies_objectness(tmp_path):
    values = candidates(ROWS, classes=3, objectness=True)
    values[0, 4] = 0.5  # objectness halves the first box: 0.45, so the second (0.8) wins and suppresses it
    path = constant_output(tmp_path / "v5.onnx", values[None], dynamic=False, metadata={"names": NAMES})
    with edgeaccel.load(path, executor="onnxruntime") as model:
        assert model.task.kind == "yolov5"
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [(b.label, round(b.score, 3)) for b in result.boxes] == [("person", 0.8), ("car", 0.7), ("dog", 0.6)]
    assert result.boxes[0].xyxy == pytest.approx((23, 23, 43, 43))


def test_nms_in_graph_rows_are_taken_as_they_are(tmp_path):
    final = np.array([[[10, 10, 30, 30, 0.9, 1], [12, 12, 30, 30, 0.85, 1], [0, 0, 5, 5, 0.1, 0],
                       [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]], np.float32)  # [1, 5, 6], padded with zeros
    path = constant_output(tmp_path / "end2end.onnx", final, dynamic=False)
    with edgeaccel.load(path, executor="onnxruntime", task="detect") as model:
        assert model.task.kind == "nms-in-graph"
        result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [round(b.score, 2) for b in result.boxes] == [0.9, 0.85]  # no second NMS: the graph did it


@pytest.mark.parametrize("executor", ["onnxruntime", "openvino"])
def test_same_boxes_on_every_executor(v8_dynamic, executor):
    image = np.random.default_rng(0).integers(0, 255, (48, 80, 3), np.uint8)
    with edgeaccel.load(v8_dynamic, executor=executor, strict=True) as model:
        result = model.predict(image)
    assert [(b.class_id, round(b.score, 4)) for b in result.boxes] == [(0, 0.9), (1, 0.7), (2, 0.6)]
    # 80 x 48 -> scale 0.8, 64 x 38 (y scale 38/48) with 13 px bars: x 22 / 0.8, y (22 - 13) * 48 / 38
    assert result.boxes[0].xyxy == pytest.approx((27.5, 9 * 48 / 38, 52.5, 29 * 48 / 38), abs=1e-3)


def test_label_file_shorter_than_the_classes_warns(v8_dynamic, tmp_path):
    short = tmp_path / "two.txt"
    short.write_text("person\ncar\n")
    with edgeaccel.load(v8_dynamic, executor="onnxruntime", labels=short) as model:
        with pytest.warns(UserWarning, match="name 2 of the 3 classes"):
            result = model.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [b.label for b in result.boxes] == ["person", "car", "2"]  # the unnamed class by its index, not shifted


def test_pose_on_a_detector_is_refused_with_what_it_has(v8_dynamic):
    with pytest.raises(TaskError, match="--task pose does not fit v8.onnx") as info:
        edgeaccel.load(v8_dynamic, executor="onnxruntime", task="pose")
    assert "keypoints" in info.value.hint


def _seg_model(path, protos: np.ndarray, metadata: dict | None = None):
    """Ultralytics -seg: [1, 4+C+32, N] candidates (with mask coefficients) and [1, 32, h, w] prototypes; the
    person's mask is prototype 0 (everywhere), the dog's prototype 1 (rows above y = 50 of the input)."""
    from vision_models import constant_outputs

    rows = candidates(ROWS, classes=3 + 32).T[None]  # 32 coefficient rows after the 3 classes
    rows[0, 7:] = 0.0
    rows[0, 7, :3] = 1.0  # person, its suppressed twin and the car: prototype 0
    rows[0, 8, 3] = 1.0  # the dog: prototype 1
    return constant_outputs(path, {"output0": rows, "output1": protos}, dynamic=False, metadata=metadata)


def _protos(nhwc: bool = False) -> np.ndarray:
    protos = np.full((1, 32, 16, 16), -10.0, np.float32)  # 16 x 16 cells of 4 input pixels
    protos[0, 0] = 10.0
    protos[0, 1, :12] = 10.0  # rows 0..11: input y < 48
    return protos.transpose(0, 2, 3, 1) if nhwc else protos


@pytest.mark.parametrize("nhwc", [False, True])
def test_yolo_seg_export_gives_instance_masks_cropped_to_their_boxes(tmp_path, nhwc):
    path = _seg_model(tmp_path / "seg.onnx", _protos(nhwc), {"task": "segment", "names": NAMES})
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task.name == "segment" and loaded.task.kind == "yolo-seg"
        result = loaded.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [(b.label, round(b.score, 2)) for b in result.instances] == [("person", 0.9), ("car", 0.7), ("dog", 0.6)]
    assert result.instances[2].xyxy == pytest.approx((6, 46, 14, 54))
    mask = result.mask
    assert mask.shape == (INPUT, INPUT) and result.background == -1
    # the person (box 22..42) is painted over the car in the same place; the dog's mask is its box above y 48
    assert (mask == 0).sum() == 20 * 20 and (mask[22:42, 22:42] == 0).all()
    assert (mask == 1).sum() == 0
    assert (mask == 2).sum() == 8 * 2 and (mask[46:48, 6:14] == 2).all()
    assert (mask == -1).sum() == INPUT * INPUT - 400 - 16
    as_json = result.to_dict()
    assert [c["label"] for c in as_json["classes"]] == ["person", "dog"]
    assert [i["label"] for i in as_json["instances"]] == ["person", "car", "dog"]


def test_yolo_seg_is_recognized_as_segment_and_its_boxes_still_serve_detect(tmp_path):
    path = _seg_model(tmp_path / "seg.onnx", _protos(), {"names": NAMES})  # no task in the metadata
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task.kind == "yolo-seg"  # the masks, not only the boxes
    with edgeaccel.load(path, executor="onnxruntime", task="detect") as loaded:
        assert loaded.task.kind == "yolov8"  # the 32 coefficient rows are not read as classes (names says 3)
        result = loaded.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [(b.label, round(b.score, 2)) for b in result.boxes] == [("person", 0.9), ("car", 0.7), ("dog", 0.6)]


def test_yolo_pose_head_gives_a_box_and_17_keypoints_per_person(tmp_path):
    rows = np.zeros((cells(), 56), np.float32)
    rows[:, :4] = [5, 5, 4, 4]
    rows[:, 4] = 0.01
    rows[0, :5] = [32, 32, 20, 40, 0.9]
    rows[1, :5] = [33, 32, 20, 40, 0.8]  # the same person again: suppressed
    rows[2, :5] = [10, 20, 8, 16, 0.5]
    points = np.stack([np.linspace(24, 40, 17), np.linspace(14, 50, 17), np.linspace(0.1, 0.9, 17)], axis=1)
    rows[0, 5:] = points.reshape(-1)
    rows[2, 5:] = (points * [0.25, 0.25, 1] + [0, 5, 0]).reshape(-1)
    path = constant_output(tmp_path / "pose.onnx", rows.T[None], dynamic=False,
                           metadata={"task": "pose", "kpt_shape": "[17, 3]", "names": "{0: 'person'}"})
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task.kind == "yolo-pose"
        result = loaded.predict(np.zeros((INPUT, 2 * INPUT, 3), np.uint8))  # letterboxed: x2 and 16 px bars
    assert [round(p.score, 2) for p in result.poses] == [0.9, 0.5]
    first = result.poses[0]
    # input box (22, 12, 42, 52) -> image x / 0.5, (y - 16) / 0.5, clipped to the 128 x 64 image
    assert first.box == pytest.approx((44, 0, 84, 64), abs=1e-3)
    assert first.keypoints[0].name == "nose" and len(first.keypoints) == 17
    assert (first.keypoints[0].x, first.keypoints[0].y) == pytest.approx((48, 2 * (14 - 16)))
    assert first.keypoints[16].score == pytest.approx(0.9)
    assert result.layout == "coco-17" and len(result.edges) == 18
    assert result.to_dict()["poses"][0]["box"] == [44.0, 0.0, 84.0, 64.0]


def test_a_56_row_output_without_metadata_is_ambiguous(tmp_path):
    rows = np.zeros((56, cells(128)), np.float32)  # [1, 56, 336]: a 128 x 128 input's head
    rows[4] = 0.01
    path = constant_output(tmp_path / "pose_or_detect.onnx", rows[None], metadata={"imgsz": "[128, 128]"})
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task is None
        with pytest.raises(TaskError, match="YOLO pose head") as info:
            loaded.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert "task='pose'" in info.value.hint
    with edgeaccel.load(path, executor="onnxruntime", task="pose") as loaded:
        assert loaded.task.kind == "yolo-pose"


def test_a_candidate_count_that_no_yolo_head_gives_is_refused(tmp_path):
    values = candidates(ROWS, classes=3, n=100).T[None]  # 100 candidates: a 64 x 64 input gives 84 (or 252)
    path = constant_output(tmp_path / "odd.onnx", values, dynamic=False, metadata={"names": NAMES})
    with pytest.raises(TaskError, match="100 candidates.*84") as info:
        edgeaccel.load(path, executor="onnxruntime", task="detect")
    assert "layout" in info.value.hint
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task is None
    with edgeaccel.load(path, executor="onnxruntime", task="detect", task_options={"layout": "yolov8"}) as loaded:
        result = loaded.predict(np.zeros((INPUT, INPUT, 3), np.uint8))
    assert [b.label for b in result.boxes] == ["person", "car", "dog"]


def test_scores_outside_0_1_are_refused_at_decode_not_drawn(tmp_path):
    values = candidates(ROWS, classes=3).T[None]
    values[0, 4, 0] = 1649.0  # a "score" no YOLO head's sigmoid gives
    path = constant_output(tmp_path / "logits.onnx", values, dynamic=False, metadata={"names": NAMES})
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        assert loaded.task.kind == "yolov8"  # the shapes fit
        with pytest.raises(TaskError, match="range 0.01..1649"):
            loaded.predict(np.zeros((INPUT, INPUT, 3), np.uint8))


@pytest.mark.parametrize("classes, objectness, expected", [(80, False, "yolov8"), (80, True, "yolov5"),
                                                        (3, False, None)])
def test_a_row_major_head_with_one_candidate_a_cell(tmp_path, classes, objectness, expected):
    """[1, 336, V] on a 128 x 128 input: a transposed v8 export (4 + C) or a YOLOX-style head (5 + C): told by
    the 80 COCO classes, by the declared class count, else refused."""
    rows = candidates(ROWS, classes=classes, n=cells(128), objectness=objectness)
    path = constant_output(tmp_path / "rows.onnx", rows[None], metadata={"imgsz": "[128, 128]"})
    with edgeaccel.load(path, executor="onnxruntime") as loaded:
        if expected is None:
            assert loaded.task is None
        else:
            assert loaded.task.kind == expected
            result = loaded.predict(np.zeros((128, 128, 3), np.uint8))
            assert [b.class_id for b in result.boxes] == [0, 1, 2]
    if expected is None:
        with pytest.raises(TaskError, match="transposed YOLOv8 export"):
            edgeaccel.load(path, executor="onnxruntime", task="detect")
        with edgeaccel.load(path, executor="onnxruntime", labels=["a", "b", "c"]) as loaded:
            assert loaded.task.kind == "yolov8"  # 4 + 3 values: the class count decides


def _painted_whole_image(coefficients, protos, image_boxes, score, class_id, frame, threshold):
    """The plain way: every instance's mask over the whole image, then cropped to its box (what paint_instances
    must equal; it took 105 s and 4.1 GB for 8,400 instances on a 1080p image)."""
    from edgeaccel.vision.segment import to_image

    m, ph, pw = protos.shape
    masks = 1 / (1 + np.exp(-(coefficients @ protos.reshape(m, -1)).reshape(-1, ph, pw).astype(np.float64)))
    ids = np.full((frame.height, frame.width), -1, np.int32)
    rows, cols = np.arange(frame.height) + 0.5, np.arange(frame.width) + 0.5
    for k in np.argsort(score, kind="stable"):
        x1, y1, x2, y2 = image_boxes[k]
        inside = (rows[:, None] >= y1) & (rows[:, None] <= y2) & (cols[None, :] >= x1) & (cols[None, :] <= x2)
        ids[to_image(masks[k] >= threshold, frame) & inside] = class_id[k]
    return ids


@pytest.mark.parametrize("seed", range(6))
def test_instance_masks_painted_box_by_box_equal_whole_image_masks_cropped(seed):
    from edgeaccel.imageio.resizing import Frame
    from edgeaccel.vision.yolo_heads import paint_instances

    rng = np.random.default_rng(seed)
    w, h = int(rng.integers(40, 700)), int(rng.integers(40, 700))
    scale = min(320 / w, 320 / h)
    new_w, new_h = max(1, round(w * scale)), max(1, round(h * scale))
    frame = Frame(w, h, 320, 320, new_w / w, new_h / h, float((320 - new_w) // 2), float((320 - new_h) // 2)) \
        if seed % 2 else Frame(w, h, 320, 256, 320 / w, 256 / h)  # letterboxed, or stretched
    k = int(rng.integers(1, 150))  # more than one chunk of 64
    protos = rng.normal(size=(8, 80, 80)).astype(np.float32)
    coefficients = rng.normal(size=(k, 8)).astype(np.float32)
    corner = rng.uniform(-30, 340, (k, 2))
    boxes = frame.to_image(np.concatenate([corner, corner + rng.uniform(0, 200, (k, 2))], 1).astype(np.float32))
    boxes[1::4] = np.floor(boxes[1::4]) + 0.5  # edges on pixel centres: those pixels are inside
    boxes[0, 1] = np.nan  # a broken edge paints nothing, whichever it is
    if k > 2:
        boxes[1, 2], boxes[2, 3] = np.nan, np.nan
    score = rng.uniform(0, 1, k).astype(np.float32)
    score[: k // 3] = 0.5  # ties keep their order
    class_id = rng.integers(0, 80, k)
    painted = paint_instances(coefficients, protos, boxes, score, class_id, frame, 0.5)
    expected = _painted_whole_image(coefficients, protos, boxes, score, class_id, frame, 0.5)
    assert painted.dtype == expected.dtype and np.array_equal(painted, expected)
    assert (painted >= 0).any()  # something was painted: the comparison is not of two empty images
