"""Check every artifact of a bundle against its float reference: top-1 agreement (classifiers), max and mean
absolute error after dequantizing, size against the reference, and latency on each executor that runs it.
Reads the reference and the calibration samples from the bundle's manifest; --reference and --data override
them (and let a single model or a plain folder be checked)."""

from __future__ import annotations

import argparse
import sys

from .inputs import NORMALIZE_HELP, add_pipeline_arguments, normalize_arg
from .names import executor_arg
from .options import add_cache_arguments, cache_kwargs

HELP = "compare each artifact of a bundle with its float reference: agreement, error, size, latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a bundle folder (edgeaccel-bundle.yaml), a manifest, a folder or a model file")
    p.add_argument("--reference", help="the float model to compare against (default: the manifest's)")
    p.add_argument("--data", help="inputs to compare on: images folder, .npy, .npz (default: the manifest's)")
    p.add_argument("--normalize", type=normalize_arg, metavar="MODE", help=NORMALIZE_HELP)
    add_pipeline_arguments(p)
    p.add_argument("--executor", action="append", default=[], type=executor_arg,
                   help="only these runtimes (repeatable): litert, onnxruntime, openvino")
    p.add_argument("--runs", type=int, default=20, help="timed runs per artifact and executor (default 20)")
    p.add_argument("--max-samples", type=int, help="compare on at most this many samples")
    p.add_argument("--min-top1", type=float, metavar="FRACTION",
                   help="fail when an artifact agrees with the reference on fewer than this fraction of top-1 "
                        "answers (e.g. 0.98; classifiers only)")
    p.add_argument("--max-rel-error", type=float, metavar="R",
                   help="fail when an artifact's outputs differ from the reference's by more than this relative "
                        "(L2) error, any kind of output (default 0.25, edgeaccel.convert.verify.DEFAULT_MAX_REL_ERROR;"
                        " a working int8 artifact is typically below 0.1)")
    p.add_argument("--task", choices=("classify", "detect", "segment", "pose", "auto"),
                   help="also decode the outputs as a vision task and compare results: precision/recall of "
                        "IoU-matched boxes, mIoU, mean keypoint distance (fractions of the image)")
    p.add_argument("--labels", help="labels for --task (.txt or .pbtxt)")
    p.add_argument("--min-precision", type=float, metavar="P", help="--task detect: fail below this box precision")
    p.add_argument("--min-recall", type=float, metavar="R", help="--task detect: fail below this box recall")
    p.add_argument("--min-miou", type=float, metavar="M", help="--task segment: fail below this mIoU")
    p.add_argument("--max-keypoint-distance", type=float, metavar="D",
                   help="--task pose: fail above this mean keypoint distance (fraction of the image, e.g. 0.02)")
    p.add_argument("--max-map-drop", type=float, metavar="POINTS",
                   help="with --data a labelled dataset (COCO JSON, YOLO labels): fail when an artifact's mAP50-95 "
                        "is more than POINTS below the reference's (as `edgeaccel val` measures it)")
    add_cache_arguments(p, measurements=False)
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.check/1)")


def main(args: argparse.Namespace) -> int:
    """Exit 0 when every artifact passes the gates, 1 when one fails them (each failure on stderr)."""
    import json

    from ..convert.verify import DEFAULT_MAX_REL_ERROR, check, failures
    from ..errors import InputError
    from . import quiet_native_stderr

    if args.runs < 1 or (args.max_samples is not None and args.max_samples < 1):
        raise InputError("--runs and --max-samples must be at least 1")
    task_gates = {"min_precision": args.min_precision, "min_recall": args.min_recall, "min_miou": args.min_miou,
                  "max_keypoint_distance": args.max_keypoint_distance}
    if any(v is not None for v in task_gates.values()) and not args.task:
        raise InputError("--min-precision, --min-recall, --min-miou and --max-keypoint-distance need --task",
                         hint="add --task detect (or segment, pose, auto)")
    data = args.data
    if args.max_map_drop is not None:  # the tensor comparisons read the dataset's images, the gate its labels
        from ..evaluation.bundle_val import labelled_images

        data = labelled_images(args.data)
    with quiet_native_stderr():
        report = check(args.path, reference=args.reference, data=data, normalize=args.normalize,
                       executors=args.executor or None, runs=args.runs, max_samples=args.max_samples,
                       task=args.task, labels=args.labels, imgsz=args.imgsz, letterbox=args.letterbox,
                       **cache_kwargs(args))
    gate = DEFAULT_MAX_REL_ERROR if args.max_rel_error is None else args.max_rel_error
    failed = failures(report, gate, args.min_top1, task_gates)
    if args.max_map_drop is not None:
        from ..evaluation.bundle_val import map_drop

        with quiet_native_stderr():
            failed += map_drop(args.path, args.data, args.max_map_drop, reference=args.reference,
                               executors=args.executor or None, labels=args.labels, **cache_kwargs(args))[1]
    if args.json:
        json.dump({**report.as_dict(), "failures": failed}, sys.stdout, indent=2)
        print()
    else:
        print(f"reference  {report.reference} on {report.reference_executor}")
        print(f"data       {report.data}: {report.samples} samples"
              + (" (classifier: top-1 agreement)" if report.classifier else ""))
        print()
        print(report.table())
        for edgetpu in report.edgetpu:
            print()
            print("\n".join(edgetpu.lines()))
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    if failed:
        print("hint: an artifact that fails the gate gives other answers than the float model; check the "
              "calibration data (representative inputs, --normalize as the model expects) or keep the float "
              "artifact", file=sys.stderr)
    return 1 if failed else 0
