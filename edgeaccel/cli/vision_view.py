"""``edgeaccel run --task/--save``: an image through a vision task (edgeaccel.vision), shown as classes,
boxes, mask areas or keypoints, saved as an annotated image, or as JSON (schema edgeaccel.vision/1 inside
edgeaccel.run/1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options import TaskOptions

TASK_CHOICES = ("classify", "detect", "segment", "pose", "auto")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", choices=TASK_CHOICES,
                   help="decode the outputs as a vision task (auto: recognize it) and show boxes, classes, a mask "
                        "or keypoints in the image's pixels")
    p.add_argument("--save", metavar="OUT", help="write the input with the task's result drawn on it: an image "
                   "(FILE.png) for one picture; a video (.mp4/.mkv/.avi) or a folder for a live source")
    p.add_argument("--conf", type=float, help="lowest score a box keeps (default 0.25 YOLO, 0.3 SSD)")
    p.add_argument("--iou", type=float, default=0.45, help="NMS overlap threshold for YOLO outputs (default 0.45)")
    p.add_argument("--max-det", type=int, default=100, help="most boxes kept (default 100)")
    p.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE", type=task_option,
                   help="a task option (load's task_options; repeatable), the value JSON or text: "
                        "anchors=face_short_range (a MediaPipe SSD preset, a .npy/.csv or JSON anchor options), "
                        "ssd='{\"num_keypoints\": 6}', threshold=0.7 (masks), layout=yolov8 (docs/vision.md)")


def task_option(text: str) -> tuple[str, object]:
    import json

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--task-option {text!r}: give KEY=VALUE, e.g. threshold=0.7")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value  # plain text: a preset name, a file


def wanted(args) -> bool:
    return bool(getattr(args, "task", None) or getattr(args, "save", None))


def load_kwargs(args) -> dict:
    if not wanted(args):
        return {}
    options = {"iou": args.iou, "max_det": args.max_det, "top_k": args.top_k}
    if args.conf is not None:
        options["conf"] = args.conf
    if args.normalize:
        options["normalize"] = args.normalize
    options.update(dict(getattr(args, "task_option", None) or []))
    for key in ("imgsz", "letterbox"):  # over the model's declared pipeline
        if getattr(args, key, None) is not None:
            options[key] = getattr(args, key)
    task = None if args.task in (None, "auto") else args.task
    return {"task": task, "task_options": TaskOptions.from_dict(options, labels=args.labels)}


def image_source(model, args) -> str:
    """The --input that is the image (the image input's, by name or position)."""
    from ..errors import InputError
    from ..vision.task import no_task_error

    task = model.task
    if task is None:
        raise no_task_error(model)
    names = [s.name for s in model.inputs]
    for source in args.input:
        name, sep, value = source.partition("=")
        if sep and name in names:
            if names.index(name) == task.image_index:
                return value
            continue
        if Path(source).suffix.lower() not in (".npy",) and source != "random":
            return source
    raise InputError(f"--task {task.name} needs an image: give --input IMAGE" if args.input else
                     "--task and --save need an image: give --input IMAGE",
                     hint=f"e.g. edgeaccel run {Path(str(model.info.path)).name} --input photo.png --task {task.name}")


def run(model, args, times: list[float]) -> dict:
    """Predict on the image --runs times (after --warmup); the result as a dict, saved when --save."""
    import time
    import warnings

    from ..vision.preprocess import as_rgb

    task = model.task
    image = as_rgb(image_source(model, args))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(args.warmup):
            model.predict(image)
        for _ in range(args.runs):
            start = time.perf_counter()
            result = model.predict(image)
            times.append(time.perf_counter() - start)
    if args.save:
        result.save(args.save)
    out = result.to_dict()
    out["recognized"] = task.reason
    out["saved"] = args.save
    out["warnings"] = sorted({str(w.message) for w in caught})
    return out


def _name(item: dict) -> str:
    return item["label"] if item["label"] == str(item["class_id"]) else f"{item['label']} ({item['class_id']})"


def print_result(vision: dict) -> None:
    print(f"task      {vision['task']}: {vision['recognized']}")
    for warning in vision.get("warnings", []):
        print(f"warning   {warning}")
    if vision["task"] == "classify":
        for c in vision["classes"]:
            print(f"          {c['score']:.4f}  {_name(c)}")
    elif vision["task"] == "detect":
        from ..wording import counted

        where = ", in image pixels x1 y1 x2 y2:" if vision["boxes"] else ""
        print(f"          {counted(len(vision['boxes']), 'box')} ({vision['decoder']}){where}")
        for b in vision["boxes"]:
            x1, y1, x2, y2 = b["xyxy"]
            points = "  " + ", ".join(f"{k['name']} {k['x']:.0f},{k['y']:.0f}" for k in b["keypoints"]) \
                if b.get("keypoints") else ""
            print(f"          {b['score']:.3f}  {b['label']:<20} {x1:7.1f} {y1:7.1f} {x2:7.1f} {y2:7.1f}{points}")
    elif vision["task"] == "segment":
        for c in vision["classes"][:10]:
            print(f"          {c['fraction']:7.2%}  {_name(c)}")
        for b in vision.get("instances", []):
            x1, y1, x2, y2 = b["xyxy"]
            print(f"          instance {b['score']:.3f}  {b['label']:<20} {x1:7.1f} {y1:7.1f} {x2:7.1f} {y2:7.1f}")
    else:
        if not vision["poses"]:
            print(f"          no pose ({vision.get('layout') or 'keypoints'}: the model's presence is below --conf)")
        for i, pose in enumerate(vision["poses"]):
            layout = f" {vision['layout']}" if vision.get("layout") else ""
            print(f"          pose {i}: score {pose['score']:.3f},{layout} keypoints (x, y, score):")
            shown = pose["keypoints"][:40]
            for k in shown:
                print(f"            {k['name']:<16} {k['x']:7.1f} {k['y']:7.1f}  {k['score']:.3f}")
            if len(pose["keypoints"]) > len(shown):
                print(f"            ... {len(pose['keypoints']) - len(shown)} more (--json gives them all)")
    t = vision.get("timing_ms", {})
    if t:
        print(f"stages    preprocess {t['preprocess']:.2f} ms, inference {t['inference']:.2f} ms, "
              f"postprocess {t['postprocess']:.2f} ms (last run)")
    if vision.get("saved"):
        print(f"saved     {vision['saved']}")
