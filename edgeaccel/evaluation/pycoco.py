"""The same mAP through pycocotools (the `val` extra): the reference our own computation is checked against,
and a second opinion `edgeaccel val --evaluator pycocotools` prints beside ours."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from ..errors import RuntimeNotInstalledError
from .cocomap import MAX_DETS, ClassAP, Detection, GroundTruth, MapResult


def require() -> None:
    """RuntimeNotInstalledError naming the extra when pycocotools is missing: said before any model runs."""
    try:
        import pycocotools.cocoeval  # noqa: F401
    except ImportError as exc:
        raise RuntimeNotInstalledError("the pycocotools evaluator is not installed",
                                       hint="pip install 'edgeaccel[val]' (or use --evaluator ours)") from exc


def pycocotools_map(ground_truth: list[GroundTruth], detections: list[Detection], image_ids, class_ids,
                    max_dets: int = MAX_DETS) -> MapResult:
    """COCOeval's bbox mAP50-95 (stats[0]) and mAP50 (stats[1]) with per-class AP from its precision array."""
    require()
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images, classes = sorted(set(int(i) for i in image_ids)), sorted(set(int(c) for c in class_ids))
    categories = [{"id": c, "name": str(c)} for c in classes]
    # annotation ids from 1: COCOeval takes a matched id of 0 for "unmatched"
    gt = _coco(COCO, images, categories, [
        {"id": n, "image_id": int(g.image_id), "category_id": int(g.class_id), "bbox": [float(v) for v in g.xywh],
         "area": g.box_area if g.area is None else float(g.area), "iscrowd": int(bool(g.iscrowd))}
        for n, g in enumerate(ground_truth, 1)])
    wanted = set(images)
    kept = [d for d in detections if d.image_id in wanted]
    # loadRes fails on an empty list (it reads the first entry), so the results are indexed as loadRes would
    # have written them: box area, id from 1, not crowd
    dt = _coco(COCO, images, categories, [
        {"id": n, "image_id": int(d.image_id), "category_id": int(d.class_id), "bbox": [float(v) for v in d.xywh],
         "score": float(d.score), "area": float(d.xywh[2]) * float(d.xywh[3]), "iscrowd": 0}
        for n, d in enumerate(kept, 1)])
    evaluator = COCOeval(gt, dt, "bbox")
    evaluator.params.imgIds, evaluator.params.catIds = images, classes
    evaluator.params.maxDets = [1, 10, max_dets]
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its progress and the summary table
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    precision = evaluator.eval["precision"][:, :, :, 0, -1]  # area "all", the largest maxDets
    per_class = {}
    for k, c in enumerate(classes):
        curve = precision[:, :, k]
        counted = curve[curve > -1]
        instances = sum(1 for g in ground_truth if g.class_id == c and g.image_id in wanted and not g.iscrowd)
        found = sum(1 for d in kept if d.class_id == c)
        per_class[c] = ClassAP(float(np.mean(counted)) if counted.size else None,
                               float(np.mean(curve[0][curve[0] > -1])) if counted.size else None, instances, found)
    stats = evaluator.stats
    return MapResult(None if stats[0] == -1 else float(stats[0]), None if stats[1] == -1 else float(stats[1]),
                     per_class, precision)


def _coco(COCO, images: list[int], categories: list[dict], annotations: list[dict]):
    coco = COCO()
    coco.dataset = {"images": [{"id": i} for i in images], "categories": categories, "annotations": annotations}
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco
