"""Our COCO mAP (edgeaccel.evaluation.cocomap) against pycocotools' COCOeval on the same predictions: random sets
with crowd regions, tied scores and duplicates, and the edge cases one by one; plus values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from edgeaccel.evaluation.cocomap import Detection, GroundTruth, coco_map

pycoco = pytest.importorskip("pycocotools.cocoeval", reason="the val extra (pycocotools) is not installed")
from edgeaccel.evaluation.pycoco import pycocotools_map  # noqa: E402


def assert_same(gts, dts, images, classes):
    ours = coco_map(gts, dts, images, classes)
    theirs = pycocotools_map(gts, dts, images, classes)
    assert ours.map50_95 == pytest.approx(theirs.map50_95, abs=1e-12) if theirs.map50_95 is not None \
        else ours.map50_95 is None
    assert ours.map50 == pytest.approx(theirs.map50, abs=1e-12) if theirs.map50 is not None else ours.map50 is None
    np.testing.assert_allclose(ours.precision, theirs.precision, atol=1e-12)
    for c in classes:
        assert ours.per_class[c].ap50_95 == (pytest.approx(theirs.per_class[c].ap50_95, abs=1e-12)
                                             if theirs.per_class[c].ap50_95 is not None else None)
    return ours


def random_set(seed: int, crowd: float = 0.1, images: int = 8, classes: int = 3):
    rng = np.random.default_rng(seed)
    gts, dts = [], []
    for img in range(1, images + 1):
        own = []
        for _ in range(rng.integers(0, 6)):
            x, y = rng.uniform(0, 300, 2)
            w, h = rng.uniform(4, 90, 2)
            own.append(GroundTruth(img, int(rng.integers(1, classes + 1)), (x, y, w, h), bool(rng.random() < crowd)))
        gts += own
        for g in own:  # near misses, wrong classes and duplicates around each object
            for _ in range(rng.integers(0, 4)):
                jitter = rng.normal(0, 5, 4) * [1, 1, .5, .5]
                cls = g.class_id if rng.random() < .8 else int(rng.integers(1, classes + 1))
                dts.append(Detection(img, cls, tuple(np.array(g.xywh) + jitter), float(np.round(rng.random(), 1))))
        for _ in range(rng.integers(0, 5)):  # background false positives
            dts.append(Detection(img, int(rng.integers(1, classes + 1)), tuple(rng.uniform(1, 120, 4)),
                                 float(rng.random())))
    return gts, dts


@pytest.mark.parametrize("seed", range(12))
def test_random_predictions_equal_pycocotools(seed):
    gts, dts = random_set(seed)
    result = assert_same(gts, dts, range(1, 10), [1, 2, 3, 4])  # image 9 and class 4 have nothing at all
    assert result.per_class[4].ap50_95 is None


def test_class_without_predictions_scores_zero_and_counts():
    gts = [GroundTruth(1, 1, (10, 10, 20, 20)), GroundTruth(1, 2, (50, 50, 20, 20))]
    dts = [Detection(1, 1, (10, 10, 20, 20), 0.9)]
    result = assert_same(gts, dts, [1], [1, 2])
    assert result.per_class[1].ap50_95 == pytest.approx(1.0)
    assert result.per_class[2].ap50_95 == 0.0
    assert result.map50_95 == pytest.approx(0.5)


def test_duplicates_are_false_positives():
    gts = [GroundTruth(1, 1, (10, 10, 40, 40))]
    dts = [Detection(1, 1, (10, 10, 40, 40), 0.6), Detection(1, 1, (10, 10, 40, 40), 0.9),
           Detection(1, 1, (11, 10, 40, 40), 0.8)]
    result = assert_same(gts, dts, [1], [1])
    assert result.map50 == pytest.approx(1.0)  # the best-scoring duplicate is found first: precision 1 at recall 1


def test_crowd_regions_are_neither_hits_nor_misses():
    gts = [GroundTruth(1, 1, (0, 0, 100, 100), iscrowd=True), GroundTruth(1, 1, (200, 200, 30, 30))]
    dts = [Detection(1, 1, (10, 10, 30, 30), 0.95), Detection(1, 1, (50, 50, 30, 30), 0.9),  # inside the crowd
           Detection(1, 1, (200, 200, 30, 30), 0.5)]
    result = assert_same(gts, dts, [1], [1])
    assert result.map50_95 == pytest.approx(1.0)  # the two on the crowd are ignored, not false positives
    assert result.per_class[1].instances == 1


def test_only_crowd_objects_leave_the_class_out():
    gts = [GroundTruth(1, 1, (0, 0, 100, 100), iscrowd=True), GroundTruth(1, 2, (0, 0, 10, 10))]
    dts = [Detection(1, 1, (0, 0, 50, 50), 0.9), Detection(1, 2, (0, 0, 10, 10), 0.9)]
    result = assert_same(gts, dts, [1], [1, 2])
    assert result.per_class[1].ap50_95 is None and result.map50_95 == pytest.approx(1.0)


def test_empty_images_and_no_predictions_at_all():
    gts = [GroundTruth(2, 1, (5, 5, 10, 10))]
    result = assert_same(gts, [], [1, 2, 3], [1])
    assert result.map50_95 == 0.0
    nothing = assert_same([], [Detection(1, 1, (0, 0, 5, 5), .5)], [1, 2], [1])
    assert nothing.map50_95 is None  # no object anywhere: nothing to score (COCO's -1)


def test_more_than_100_detections_per_image_keeps_the_best_100():
    rng = np.random.default_rng(3)
    gts = [GroundTruth(1, 1, (float(x), 10, 8, 8)) for x in range(0, 400, 10)]
    dts = [Detection(1, 1, (float(x) + rng.normal(0, 1), 10, 8, 8), float(rng.random())) for x in range(0, 1500, 10)]
    assert_same(gts, dts, [1], [1])


def test_detections_of_other_classes_or_images_are_not_counted():
    gts = [GroundTruth(1, 1, (0, 0, 10, 10))]
    dts = [Detection(1, 1, (0, 0, 10, 10), 0.5), Detection(1, 7, (30, 30, 10, 10), 0.9),
           Detection(5, 1, (30, 30, 10, 10), 0.9)]
    assert coco_map(gts, dts, [1], [1]).map50_95 == pytest.approx(1.0)


def test_hand_worked_precision_envelope():
    """Box A (0.9) and box B (0.8) on three images; B alone is labelled on image 1, both on image 2, none on
    image 3. Ranked: A1 fp, A2 tp, A3 fp, B1 tp, B2 tp, B3 fp -> precision 0, .5, .33, .5, .6, .5 at recall
    0, 1/3, 1/3, 2/3, 1, 1: the envelope is 0.6 everywhere, so AP = 0.6 at every IoU (the boxes are exact)."""
    a, b = (10, 10, 20, 20), (40, 40, 10, 10)
    gts = [GroundTruth(1, 1, b), GroundTruth(2, 1, a), GroundTruth(2, 1, b)]
    dts = [Detection(i, 1, box, s) for i in (1, 2, 3) for box, s in ((a, .9), (b, .8))]
    assert assert_same(gts, dts, [1, 2, 3], [1]).map50_95 == pytest.approx(0.6)
    assert coco_map(gts, dts, [1, 2], [1]).map50_95 == pytest.approx(0.75)  # without the empty image


def test_iou_thresholds_grade_a_loose_box():
    gt = [GroundTruth(1, 1, (0, 0, 100, 100))]
    loose = [Detection(1, 1, (0, 0, 100, 70), 0.9)]  # IoU 0.7: a hit at 0.50..0.70, a miss above
    result = assert_same(gt, loose, [1], [1])
    assert result.map50 == pytest.approx(1.0)
    assert result.map50_95 == pytest.approx(5 / 10)
