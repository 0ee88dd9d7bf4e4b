"""Task-level agreement (edgeaccel/agreement/tasks.py) on hand-made results whose right answers are known:
pooled detection matching, images where both sides find nothing, wrong labels, mask mIoU from a pooled
confusion matrix, keypoints normalized by the person's size, top-1 and top-5."""

from __future__ import annotations

import numpy as np
import pytest

from edgeaccel.agreement.tasks import task_metrics
from edgeaccel.errors import InputError
from edgeaccel.vision.preprocess import Frame
from edgeaccel.vision.results import (Box, Classification, ClassifyResult, DetectResult, Keypoint, Pose, PoseResult,
                                      SegmentResult)

FRAME = Frame(640, 480, 640, 480, 1.0, 1.0)


def boxes(*rows) -> DetectResult:
    """rows: (x1, y1, x2, y2, class_id, score)."""
    return DetectResult("detect", FRAME, boxes=[Box((x1, y1, x2, y2), s, c, f"c{c}") for x1, y1, x2, y2, c, s in rows])


def test_detections_are_pooled_over_samples_not_averaged_per_image():
    # image 1: 1 of 2 reference boxes found; image 2: 3 of 3 found plus one extra box
    refs = [boxes((0, 0, 100, 100, 0, 0.9), (200, 200, 300, 300, 1, 0.8)),
            boxes((0, 0, 50, 50, 0, 0.9), (100, 100, 150, 150, 0, 0.7), (300, 300, 400, 400, 2, 0.6))]
    got = [boxes((2, 2, 100, 100, 0, 0.85)),
           boxes((0, 0, 50, 50, 0, 0.9), (100, 100, 150, 152, 0, 0.6), (300, 300, 400, 400, 2, 0.65),
                 (500, 10, 600, 90, 1, 0.3))]
    m = task_metrics("detect", refs, got)
    assert m["matched"] == 4 and m["boxes"] == 5 and m["reference_boxes"] == 5
    assert m["precision"] == pytest.approx(4 / 5) and m["recall"] == pytest.approx(4 / 5)
    # averaged per image it would have been (1/1 + 3/4) / 2 = 0.875 precision: pooling counts every box once
    assert m["mean_score_error"] == pytest.approx(np.mean([0.05, 0.0, 0.1, 0.05]))
    assert 0.9 < m["mean_iou"] < 1.0


def test_an_image_where_both_find_nothing_adds_nothing():
    refs = [boxes((0, 0, 100, 100, 0, 0.9)), boxes(), boxes(), boxes()]
    got = [boxes(), boxes(), boxes(), boxes()]
    m = task_metrics("detect", refs, got)
    # per-image averaging scored this 0.75 recall (three empty images at 1.0); pooled it is what it is: 0
    assert m["recall"] == 0.0 and m["precision"] is None
    assert m["images_with_boxes"] == 1 and m["measured"]


def test_no_box_on_either_side_anywhere_is_not_reported_as_agreement():
    m = task_metrics("detect", [boxes(), boxes()], [boxes(), boxes()])
    assert m["measured"] is False
    assert m["precision"] is None and m["recall"] is None and m["mean_iou"] is None


def test_every_label_wrong_gives_precision_zero():
    refs = [boxes((0, 0, 100, 100, 0, 0.9), (200, 200, 300, 300, 1, 0.8))]
    got = [boxes((0, 0, 100, 100, 3, 0.9), (200, 200, 300, 300, 4, 0.8))]
    m = task_metrics("detect", refs, got)
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["matched"] == 0


def test_matching_is_one_to_one():
    refs = [boxes((0, 0, 100, 100, 0, 0.9))]
    got = [boxes((0, 0, 100, 100, 0, 0.9), (1, 1, 100, 100, 0, 0.8))]  # a duplicate NMS should have removed
    m = task_metrics("detect", refs, got)
    assert m["matched"] == 1 and m["precision"] == 0.5 and m["recall"] == 1.0


def mask(values) -> SegmentResult:
    a = np.array(values, np.int32)
    return SegmentResult("segment", Frame(a.shape[1], a.shape[0], a.shape[1], a.shape[0], 1.0, 1.0), mask=a)


def test_mask_miou_comes_from_one_confusion_matrix_over_every_sample():
    refs = [mask([[0, 0, 1, 1]]), mask([[2, 2, 0, 0]])]
    got = [mask([[0, 0, 1, 0]]), mask([[2, 2, 0, 0]])]
    m = task_metrics("segment", refs, got)
    # pooled: class 0 inter 4 union 5, class 1 inter 1 union 2, class 2 inter 2 union 2
    assert m["miou"] == pytest.approx((4 / 5 + 1 / 2 + 1) / 3)
    assert m["pixel_agreement"] == pytest.approx(7 / 8)
    assert m["fwiou"] == pytest.approx((4 * 4 / 5 + 2 * 1 / 2 + 2 * 1) / 8)
    assert m["class_iou"] == {0: 0.8, 1: 0.5, 2: 1.0}


def test_masks_of_different_sizes_are_a_clear_error():
    with pytest.raises(InputError, match="mask is"):
        task_metrics("segment", [mask([[0, 1]])], [mask([[0, 1, 1]])])


def person(x0: float, y0: float, size: float, shift: float = 0.0, score: float = 0.9) -> Pose:
    """A 4-keypoint 'person': a square of side ``size`` at (x0, y0), every keypoint moved right by ``shift``."""
    corners = [(0, 0), (1, 0), (0, 1), (1, 1)]
    return Pose([Keypoint(f"k{i}", x0 + cx * size + shift, y0 + cy * size, score) for i, (cx, cy) in
                 enumerate(corners)], score)


def poses(*items) -> PoseResult:
    return PoseResult("pose", FRAME, poses=list(items))


def test_keypoint_distance_is_normalized_by_the_persons_size():
    # the same 8-pixel shift is a tenth of a small (80 px) person and a hundredth of a large (800 px) one
    small = task_metrics("pose", [poses(person(10, 10, 80))], [poses(person(10, 10, 80, shift=8))])
    large = task_metrics("pose", [poses(person(0, 0, 400))], [poses(person(0, 0, 400, shift=8))])
    assert small["keypoint_distance"] == pytest.approx(0.1)
    assert large["keypoint_distance"] == pytest.approx(8 / 400)
    # the fraction-of-image figure is the same for both: it does not know how big the person is
    assert small["keypoint_distance_image"] == pytest.approx(large["keypoint_distance_image"]) == pytest.approx(8 / 640)


def test_poses_are_matched_one_to_one_and_a_missed_person_lowers_pose_recall():
    refs = [poses(person(0, 0, 100), person(300, 100, 100))]
    got = [poses(person(300, 100, 100, shift=2))]  # only the second person found
    m = task_metrics("pose", refs, got)
    assert m["pose_recall"] == 0.5 and m["pose_precision"] == 1.0
    assert m["keypoint_distance"] == pytest.approx(0.02)


def test_low_score_keypoints_are_not_measured():
    ref = poses(person(0, 0, 100, score=0.1))
    m = task_metrics("pose", [ref], [poses(person(0, 0, 100, shift=50, score=0.1))])
    assert m["measured"] is False and m["keypoint_distance"] is None


def classes(*pairs) -> ClassifyResult:
    return ClassifyResult("classify", FRAME, classes=[Classification(c, f"c{c}", s) for c, s in pairs])


def test_top1_and_top5_agreement():
    refs = [classes((1, 0.9), (2, 0.05)), classes((3, 0.5), (4, 0.48)), classes((5, 0.7), (6, 0.1))]
    got = [classes((1, 0.88), (2, 0.06)),
           classes((4, 0.5), (3, 0.49)),  # a near tie flipped: top-1 lost, top-5 kept
           classes((7, 0.4), (8, 0.3), (9, 0.1), (10, 0.1), (11, 0.05), (5, 0.04))]  # 6th: outside the top 5
    m = task_metrics("classify", refs, got)
    assert m["top1"] == pytest.approx(1 / 3)
    assert m["top5"] == pytest.approx(2 / 3)
    assert m["clear_cut_samples"] == 2 and m["top1_clear_cut"] == pytest.approx(1 / 2)


def test_mismatched_inputs_are_clear_errors():
    with pytest.raises(InputError, match="2 reference results but 1"):
        task_metrics("detect", [boxes(), boxes()], [boxes()])
    with pytest.raises(InputError, match="not a DetectResult"):
        task_metrics("detect", [boxes()], [classes((1, 0.5))])
    with pytest.raises(InputError, match="no task metrics"):
        task_metrics("track", [], [])


def test_a_box_just_over_the_threshold_on_one_side_matches_its_twin_just_under_on_the_other():
    """Both sides decoded below the threshold (agreement.tasks.lenient): 0.26 against 0.24 at conf 0.25 is one
    detection seen by both, not a lost box and a false one. A box only the candidate finds is still false."""
    reference = [boxes((10, 10, 50, 50, 0, 0.26), (60, 60, 90, 90, 1, 0.9))]
    near = [boxes((10, 10, 50, 50, 0, 0.24), (60, 60, 90, 90, 1, 0.88))]
    strict = task_metrics("detect", reference, near)  # every decoded box counts: the 0.24 one is a false box
    assert strict["precision"] == 1.0 and strict["recall"] == 1.0
    at_threshold = task_metrics("detect", reference, near, conf=0.25)
    assert at_threshold["recall"] == 1.0 and at_threshold["precision"] == 1.0
    assert at_threshold["reference_boxes"] == 2 and at_threshold["boxes"] == 1
    extra = [boxes((10, 10, 50, 50, 0, 0.24), (60, 60, 90, 90, 1, 0.88), (100, 10, 140, 40, 0, 0.7))]
    assert task_metrics("detect", reference, extra, conf=0.25)["precision"] == 0.5
    lost = [boxes((60, 60, 90, 90, 1, 0.88))]  # the 0.26 box is gone on the candidate's side, even below conf
    assert task_metrics("detect", reference, lost, conf=0.25)["recall"] == 0.5
