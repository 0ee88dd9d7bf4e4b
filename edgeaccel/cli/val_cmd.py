"""mAP50-95 and mAP50 of a detector on a labelled dataset (COCO JSON, or YOLO txt labels: images/ beside
labels/, a data.yaml or classes.txt for names), for every artifact of a bundle (or one model) on every executor
that reads it, side by side, with each artifact's drop against the bundle's float reference in points. Model
classes are matched to the dataset's by name when both name them, else by id (the output says which); --class-map
maps them by hand. Exit 1 when no row could be evaluated."""

from __future__ import annotations

import argparse
import sys

from .names import executor_arg
from .options import add_cache_arguments, cache_kwargs

HELP = "mAP50-95 / mAP50 of each artifact and executor on a labelled dataset (COCO JSON or YOLO labels)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..evaluation.evaluate import DEFAULT_CONF, DEFAULT_IOU, DEFAULT_MAX_DET

    p.add_argument("path", metavar="MODEL_OR_BUNDLE",
                   help="a model file, a bundle folder (edgeaccel-bundle.yaml) or manifest, or a folder of artifacts")
    p.add_argument("--data", required=True, metavar="DATASET",
                   help="a COCO JSON file, a YOLO data.yaml, or a folder with images/ and labels/")
    p.add_argument("--images", metavar="DIR", help="COCO: the folder the JSON's file names are relative to "
                   "(default: the JSON's folder, or images/ beside it)")
    p.add_argument("--executor", action="append", default=[], type=executor_arg,
                   help="only these runtimes (repeatable; default every installed one that reads the artifact)")
    p.add_argument("--reference", help="the float model the drop is measured against (default: the manifest's)")
    p.add_argument("--task", choices=("detect",), default="detect",
                   help="what the labels are: detect (boxes; the only task evaluated so far)")
    p.add_argument("--conf", type=float, default=DEFAULT_CONF,
                   help=f"lowest box score kept (default {DEFAULT_CONF}, as Ultralytics' val: mAP needs the whole "
                        "precision-recall curve)")
    p.add_argument("--iou", type=float, default=DEFAULT_IOU, help=f"NMS overlap threshold (default {DEFAULT_IOU})")
    p.add_argument("--max-det", type=int, default=DEFAULT_MAX_DET,
                   help=f"boxes kept per image by the decoder (default {DEFAULT_MAX_DET}; COCO scores the best 100 "
                        "of each class)")
    p.add_argument("--labels", help="the model's class names (.txt, .pbtxt) when it carries none")
    p.add_argument("--class-map", action="append", default=[], metavar="DATASET=MODEL",
                   help="map a dataset class to a model class by hand (ids or names; repeatable); classes not "
                        "mapped are left out")
    p.add_argument("--evaluator", choices=("ours", "pycocotools"), default="ours",
                   help="ours (default), or pycocotools too (the `val` extra): both figures side by side")
    p.add_argument("--max-images", type=int, metavar="N", help="evaluate only the first N images")
    p.add_argument("--per-class", action="store_true", help="also print AP per class for each row")
    add_cache_arguments(p, measurements=False)
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.val/1)")


def main(args: argparse.Namespace) -> int:
    import json

    from ..errors import InputError
    from ..evaluation.bundle_val import validate_bundle
    from . import quiet_native_stderr

    if args.max_images is not None and args.max_images < 1:
        raise InputError("--max-images must be at least 1")
    if args.max_det < 1:
        raise InputError("--max-det must be at least 1")
    class_map = {}
    for pair in args.class_map:
        dataset_class, sep, model_class = pair.partition("=")
        if not sep or not dataset_class.strip() or not model_class.strip():
            raise InputError(f"--class-map {pair!r} is not DATASET_CLASS=MODEL_CLASS",
                             hint="e.g. --class-map car=sedan")
        class_map[dataset_class.strip()] = model_class.strip()
    with quiet_native_stderr():
        report = validate_bundle(args.path, args.data, reference=args.reference, executors=args.executor or None,
                                 progress=None, conf=args.conf, iou=args.iou, max_det=args.max_det,
                                 labels=args.labels, class_map=class_map or None, evaluator=args.evaluator,
                                 images_dir=args.images, max_images=args.max_images, **cache_kwargs(args))
    ok = [r for r in report.rows if r.result is not None]
    if args.json:
        json.dump(report.as_dict(), sys.stdout, indent=2)
        print()
    else:
        data = report.dataset
        print(f"dataset    {data.source} ({data.format}): {len(data.images)} images, {len(data.annotations)} objects, "
              f"{len(data.class_ids)} classes")
        for note in data.notes:
            print(f"note       {note}")
        if ok:
            print(f"classes    {ok[0].result.classes}")
        if report.reference is not None:
            print(f"reference  {report.reference}")
        print(f"settings   conf {args.conf:g}, NMS iou {args.iou:g}; mAP: COCO's (IoU 0.50:0.95, 101 recall points, "
              f"100 detections), evaluator {args.evaluator}")
        print()
        print(report.table(library=args.evaluator == "pycocotools"))
        if any(r.drop_against for r in report.rows):
            print("\ndrop: points of mAP50-95 / mAP50 below the reference on the same executor (or its first result)")
        if args.per_class:
            for row in ok:
                print(f"\n{row.artifact.name} on {row.executor}:")
                for name, ap in row.result.per_class.items():
                    ap_text = "-" if ap.ap50_95 is None else f"{100 * ap.ap50_95:.1f} / {100 * ap.ap50:.1f}"
                    print(f"  {name:<24} AP50-95 / AP50 {ap_text:<14} objects {ap.instances:<6} boxes {ap.detections}")
    mismatch = [r for r in ok
                if r.result.library is not None and not _same(r.result.map50_95, r.result.library.map50_95)]
    for row in mismatch:
        print(f"warning: {row.artifact.name} on {row.executor}: our mAP50-95 {row.result.map50_95} differs from "
              f"pycocotools' {row.result.library.map50_95}", file=sys.stderr)
    for row in report.rows:
        if row.error:
            print(f"error: {row.artifact.name} on {row.executor}: {row.error.splitlines()[0]}", file=sys.stderr)
    return 0 if ok else 1


def _same(a, b) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)
