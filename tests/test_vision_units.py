"""The vision layer's numpy parts on their own: NMS against a plain greedy reference, layouts from shapes,
label files of every kind, letterbox geometry, and bad images."""

from __future__ import annotations

import numpy as np
import pytest

from edgeaccel.errors import InputError
from edgeaccel.vision.detect import yolo_layout
from edgeaccel.modelfiles.labels import parse_names, read_label_file
from edgeaccel.vision.nms import iou_matrix, nms
from edgeaccel.vision.preprocess import as_rgb, fit


def reference_nms(boxes, scores, classes, iou):
    """Greedy NMS written the slow, obvious way: one box at a time, per class."""
    keep = []
    for i in sorted(range(len(boxes)), key=lambda k: -scores[k]):
        if all(classes[i] != classes[j] or _iou(boxes[i], boxes[j]) <= iou for j in keep):
            keep.append(i)
    return keep


def _iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.mark.parametrize("seed", range(5))
def test_class_aware_nms_matches_the_greedy_reference(seed):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 100, (300, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (300, 2))], axis=1)
    scores = rng.uniform(0, 1, 300)
    classes = rng.integers(0, 4, 300)
    assert list(nms(boxes, scores, classes, 0.45, max_det=1000)) == reference_nms(boxes, scores, classes, 0.45)


def loop_nms(boxes, scores, classes, iou, max_det):
    """The box-at-a-time greedy loop nms() replaced (all classes in one pass, shifted apart): the blocked,
    per-class nms must answer exactly this, ties at the threshold and NaN boxes included."""
    boxes = boxes.astype(np.float64)
    if classes is not None:
        boxes = boxes + (classes.astype(np.float64) * 2 * (float(np.abs(boxes).max()) + 1.0))[:, None]
    x1, y1, x2, y2 = boxes.T
    areas = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    order, keep = np.argsort(-scores, kind="stable"), []
    while order.size and len(keep) < max_det:
        i, rest = order[0], order[1:]
        keep.append(i)
        w = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
        h = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
        inter = w * h
        order = rest[inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9) <= iou]
    return keep


@pytest.mark.parametrize("seed", range(24))
def test_blocked_per_class_nms_answers_exactly_what_the_box_at_a_time_loop_did(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 1500))  # beyond one block of 256 most of the time
    xy = rng.uniform(0, 100, (n, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(0, 40, (n, 2))], axis=1)
    if seed % 4 == 0:
        boxes[rng.integers(0, n, 2), int(rng.integers(0, 4))] = np.nan
    if seed % 4 == 1:  # exact duplicates: IoU 1, and ties in score
        boxes[n // 2:] = boxes[: n - n // 2]
    scores = np.round(rng.uniform(0, 1, n), 2)  # ties
    classes = rng.integers(0, int(rng.integers(1, 12)), n) if seed % 3 else None
    for iou in (0.0, 0.3, 0.5, 1.0):
        for max_det in (1, 7, 300, 5000):
            got = nms(boxes, scores, classes, iou, max_det)
            assert got.tolist() == loop_nms(boxes, scores, classes, iou, max_det), (iou, max_det)


def test_nms_keeps_overlapping_boxes_of_other_classes_and_stops_at_max_det():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [1, 1, 10, 10], [50, 50, 60, 60]], float)
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    assert list(nms(boxes, scores, np.array([0, 1, 0, 0]), 0.5)) == [0, 1, 3]
    assert list(nms(boxes, scores, None, 0.5)) == [0, 3]  # class-agnostic
    assert list(nms(boxes, scores, np.array([0, 1, 0, 0]), 0.5, max_det=2)) == [0, 1]
    assert iou_matrix(boxes[:1], boxes[2:3])[0, 0] == pytest.approx(81 / 100)


@pytest.mark.parametrize("shape, classes, layout", [
    ((1, 84, 8400), None, "yolov8"), ((1, 84, None), None, "yolov8"),   # v8/v11, dynamic input size
    ((1, 25200, 85), None, "yolov5"), ((1, None, 85), None, "yolov5"),  # v5 with objectness
    ((1, 8400, 84), 80, "yolov8"), ((1, 8400, 85), 80, "yolov5"),       # row-major: the class count decides
    ((1, 300, 6), None, "nms-in-graph"), ((1, 100, 7), None, "nms-in-graph"),
])
def test_yolo_layouts_from_shapes(shape, classes, layout):
    assert yolo_layout(shape, classes) == layout


def test_label_files_of_every_kind(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("background\nperson\n\n")
    assert read_label_file(plain).name(1) == "person"
    coral = tmp_path / "coco.txt"
    coral.write_text("0  person\n2  car\n")
    assert read_label_file(coral).name(2) == "car" and read_label_file(coral).name(1) == "1"
    pbtxt = tmp_path / "map.pbtxt"
    pbtxt.write_text('item {\n  name: "sedan"\n  id: 1\n}\nitem { id: 2 display_name: "van" name: "x" }\n')
    labels = read_label_file(pbtxt)
    assert (labels.offset, labels.name(0), labels.name(1)) == (1, "sedan", "van")  # ids minus one
    tf_style = tmp_path / "labelmap.txt"
    tf_style.write_text("???\nperson\nbicycle\n")
    assert read_label_file(tf_style).for_ssd().name(0) == "person"  # SSD class 0 is the first real class
    assert read_label_file(tf_style).name(0) == "???"  # for other decoders the file is read as it is
    assert read_label_file(coral).for_ssd().name(0) == "person"
    assert parse_names("{0: 'person', 1: 'bicycle'}") == {0: "person", 1: "bicycle"}
    with pytest.raises(InputError, match="cannot read labels"):
        read_label_file(tmp_path / "missing.txt")
    empty = tmp_path / "empty.pbtxt"
    empty.write_text("item { }")
    with pytest.raises(InputError, match="holds no"):
        read_label_file(empty)


def test_letterbox_keeps_the_aspect_ratio_and_maps_back():
    image = np.full((100, 200, 3), 200, np.uint8)
    fitted, frame = fit(image, 64, 64, letterbox=True)
    assert fitted.shape == (64, 64, 3)
    assert (frame.scale_x, frame.pad_y) == (0.32, 16.0)
    assert fitted[0, 0, 0] == 114 and fitted[32, 32, 0] == 200
    back = frame.to_image(np.array([[0, 16, 64, 48]], np.float32))
    assert back[0].tolist() == pytest.approx([0, 0, 200, 100])


def test_bad_images_are_input_errors(tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(InputError, match="broken.png"):
        as_rgb(broken)
    with pytest.raises(InputError, match="H x W x 3"):
        as_rgb(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(InputError, match="cannot use a"):
        as_rgb(42)
    assert as_rgb(np.zeros((4, 4), np.float32)).shape == (4, 4, 3)


def identity_frame(size: int = 64):
    from edgeaccel.vision.preprocess import Frame

    return Frame(size * 2, size, size, size, 0.5, 1.0)  # an image twice as wide as the input (stretched)


def test_ssd_outputs_in_another_order_are_told_apart_by_shape_and_values():
    from edgeaccel.vision.detect import decode_ssd
    from edgeaccel.modelfiles.labels import Labels

    boxes = np.zeros((1, 10, 4), np.float32)
    boxes[0, 0] = [0.25, 0.5, 0.75, 1.0]  # ymin xmin ymax xmax
    classes = np.zeros((1, 10), np.float32)
    classes[0, 0] = 2
    scores = np.zeros((1, 10), np.float32)
    scores[0, :2] = [0.8, 0.1]
    count = np.array([2], np.float32)
    labels = Labels({0: "a", 1: "b", 2: "c"})
    for arrays in ([boxes, classes, scores, count], [scores, boxes, count, classes]):  # TF1 SSD, EfficientDet-Lite
        result = decode_ssd(arrays, identity_frame(), labels, conf=0.3, max_det=10)
        assert [(b.label, b.score) for b in result.boxes] == [("c", pytest.approx(0.8))]
        assert result.boxes[0].xyxy == pytest.approx((64, 16, 128, 48))  # x back through the 0.5 scale


def test_segmentation_scores_in_either_layout_and_mapped_to_every_pixel():
    from edgeaccel.modelfiles.labels import Labels
    from edgeaccel.vision.segment import decode

    scores = np.zeros((1, 16, 16, 4), np.float32)
    scores[0, :, :8, 1] = 1.0  # left half class 1
    scores[0, :, 8:, 3] = 1.0  # right half class 3
    for array in (scores, scores.transpose(0, 3, 1, 2)):  # NHWC and NCHW
        result = decode(array, identity_frame(16), Labels({0: "zero", 1: "one", 2: "two", 3: "three"}))
        assert result.mask.shape == (16, 32)
        assert (result.mask[:, :16] == 1).all() and (result.mask[:, 16:] == 3).all()
        assert [(c["label"], c["fraction"]) for c in result.classes] == [("one", 0.5), ("three", 0.5)]


def test_pose_heatmaps_with_offsets_and_multipose():
    from edgeaccel.vision.pose import decode, layout

    heat = np.full((1, 9, 9, 17), -5.0, np.float32)
    heat[0, 4, 2, :] = 5.0  # every keypoint at row 4, column 2 of the 9 x 9 grid
    offsets = np.zeros((1, 9, 9, 34), np.float32)
    offsets[0, 4, 2, 17:] = 3.0  # x offset of 3 input pixels
    assert layout([heat.shape, offsets.shape]) == "heatmaps"
    result = decode([heat, offsets], identity_frame(65), "heatmaps")
    nose = result.keypoints[0]
    assert nose.name == "nose" and nose.score > 0.99  # a sigmoid of the logit
    assert (nose.x, nose.y) == pytest.approx(((2 * 8 + 3) / 0.5, 4 * 8))  # stride (65 - 1) / (9 - 1) = 8
    rows = np.zeros((1, 6, 56), np.float32)
    rows[0, 0, :51] = np.tile([0.5, 0.25, 0.9], 17)
    rows[0, 0, 55] = 0.8
    rows[0, 1, 55] = 0.1  # below the threshold: not a person
    assert layout([rows.shape]) == "multipose"
    poses = decode([rows], identity_frame(64), "multipose", min_pose_score=0.2).poses
    assert len(poses) == 1 and poses[0].score == pytest.approx(0.8)
    assert (poses[0].keypoints[0].x, poses[0].keypoints[0].y) == pytest.approx((32, 32))
