"""Check every artifact of a bundle against its float reference and gate on it, on by default: the outputs
decoded as the model's vision task (boxes, masks, keypoints, classes compared pooled over the samples) and the
relative error of every output; plus max and mean absolute error, size against the reference, and latency on
each executor that runs it. Compares on the bundle's held-out samples (never used to calibrate) by default;
--reference and --data override the manifest's (and let a single model or a plain folder be checked)."""

from __future__ import annotations

import argparse
import sys

from .inputs import NORMALIZE_HELP, add_pipeline_arguments, normalize_arg
from .names import executor_arg
from .options import add_cache_arguments, cache_kwargs
from .progress import add_progress_argument

HELP = "gate each artifact of a bundle against its float reference: task results, error, size, latency"

GATES_HELP = ("gates, on by default: every output's relative error <= 0.25; with a vision task (--task auto, "
              "the default: the bundle's or model's metadata, else recognized from the outputs) detect "
              "precision and recall (boxes matched by IoU >= 0.5 and class, pooled over all samples) >= 0.9, "
              "segment mIoU >= 0.9 (over the classes covering >= 0.5% of the pixels on one side), pose mean "
              "keypoint distance <= 0.1 of the person's size, classify top-1 agreement >= 0.9 over clear-cut "
              "samples (the reference's top-1 leads its runner-up by more than 10% of its score). A figure that "
              "cannot be measured (no box on either side in any sample) fails. Exit 1 when any artifact fails on "
              "any executor")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = GATES_HELP
    p.add_argument("path", help="a bundle folder (edgeaccel-bundle.yaml), a manifest, a folder or a model file")
    p.add_argument("--reference", help="the float model to compare against (default: the manifest's)")
    p.add_argument("--data", help="inputs to compare on: images folder, .npy, .npz (default: the bundle's held-out "
                                  "samples; a bundle without them is checked on its calibration samples, "
                                  "and the report says so)")
    p.add_argument("--normalize", type=normalize_arg, metavar="MODE", help=NORMALIZE_HELP)
    add_pipeline_arguments(p)
    p.add_argument("--executor", action="append", default=[], type=executor_arg,
                   help="only these runtimes (repeatable): litert, onnxruntime, openvino")
    p.add_argument("--runs", type=int, default=20, help="timed runs per artifact and executor (default 20; 0: no "
                                                       "latency)")
    p.add_argument("--max-samples", type=int, help="compare on at most this many samples")
    p.add_argument("--task", choices=("auto", "classify", "detect", "segment", "pose", "none"), default="auto",
                   help="decode the outputs as this vision task and gate on the results (default auto: the "
                        "bundle's or model's metadata, else recognized from the outputs; none: raw tensors only)")
    p.add_argument("--labels", help="labels for --task (.txt or .pbtxt)")
    p.add_argument("--max-rel-error", type=float, metavar="R",
                   help="fail when an artifact's outputs differ from the reference's by more than this relative "
                        "(L2) error, any kind of output (default 0.25; a working int8 artifact is typically below "
                        "0.1)")
    p.add_argument("--min-top1", type=float, metavar="FRACTION",
                   help="classify: fail below this top-1 agreement over clear-cut samples (default 0.9; with "
                        "--task none it gates a classifier's raw top-1 over all samples)")
    p.add_argument("--min-precision", type=float, metavar="P",
                   help="detect: fail below this box precision, pooled over the samples (default 0.9)")
    p.add_argument("--min-recall", type=float, metavar="R",
                   help="detect: fail below this box recall, pooled over the samples (default 0.9)")
    p.add_argument("--min-miou", type=float, metavar="M",
                   help="segment: fail below this mIoU over the classes covering at least 0.5%% of the pixels on "
                        "one side (default 0.9)")
    p.add_argument("--max-keypoint-distance", type=float, metavar="D",
                   help="pose: fail above this mean keypoint distance (in units of the reference person's "
                        "size, OKS-style; default 0.1)")
    p.add_argument("--max-map-drop", type=float, metavar="POINTS",
                   help="with --data a labelled dataset (COCO JSON, YOLO labels): fail when an artifact's mAP50-95 "
                        "is more than POINTS below the reference's (as `edgeaccel val` measures it)")
    add_cache_arguments(p, measurements=False)
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.check/1)")
    add_progress_argument(p)


def main(args: argparse.Namespace) -> int:
    """Exit 0 when every artifact passes the gates, 1 when one fails them (each failure on stderr)."""
    import json

    from ..convert.verify import DEFAULT_MAX_REL_ERROR, check, failures
    from ..errors import InputError
    from . import quiet_native_stderr
    from .progress import Status, wanted

    if args.runs < 0 or (args.max_samples is not None and args.max_samples < 1):
        raise InputError("--runs must be at least 0 and --max-samples at least 1")
    task_gates = {"min_precision": args.min_precision, "min_recall": args.min_recall, "min_miou": args.min_miou,
                  "max_keypoint_distance": args.max_keypoint_distance}
    if any(v is not None for v in task_gates.values()) and args.task == "none":
        raise InputError("--min-precision, --min-recall, --min-miou and --max-keypoint-distance gate a vision "
                         "task; --task none turns it off", hint="drop --task none (or name the task: --task detect)")
    data = args.data
    if args.max_map_drop is not None:  # the tensor comparisons read the dataset's images, the gate its labels
        from ..evaluation.bundle_val import labelled_images

        data = labelled_images(args.data)
    with Status("check", wanted(args)) as status:
        status.step("running every artifact on the samples and comparing with the reference")
        with quiet_native_stderr():
            report = check(args.path, reference=args.reference, data=data, normalize=args.normalize,
                           executors=args.executor or None, runs=args.runs, max_samples=args.max_samples,
                           task=args.task, labels=args.labels, imgsz=args.imgsz, letterbox=args.letterbox,
                           **cache_kwargs(args))
        gate = DEFAULT_MAX_REL_ERROR if args.max_rel_error is None else args.max_rel_error
        failed = failures(report, gate, args.min_top1, task_gates)
        if args.max_map_drop is not None:
            from ..evaluation.bundle_val import map_drop

            status.step("measuring each artifact's mAP on the dataset")
            with quiet_native_stderr():
                failed += map_drop(args.path, args.data, args.max_map_drop, reference=args.reference,
                                   executors=args.executor or None, labels=args.labels, **cache_kwargs(args))[1]
    if args.json:
        json.dump({**report.as_dict(), "failures": failed}, sys.stdout, indent=2)
        print()
    else:
        print(f"reference  {report.reference} on {report.reference_executor}")
        print(f"data       {report.data}: {report.samples} {report.data_kind} samples"
              + (f" (task {report.task}, pooled over the samples)" if report.task else ""))
        for note in report.notes:
            print(f"note       {note}")
        print()
        print(report.table())
        for edgetpu in report.edgetpu:
            print()
            print("\n".join(edgetpu.lines()))
    for note in report.notes:
        print(f"warning: {note}", file=sys.stderr)
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    if failed:
        print(f"hint: {_what_to_do(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _what_to_do(failed: list[str]) -> str:
    """One hint for the failures seen: what the user can change."""
    if all(" failed: " in line for line in failed):
        return "the artifact does not run on that executor: see the error; --executor limits the check to others"
    hint = ("these artifacts give other answers than the float model. Calibrate again on representative inputs "
            "(--normalize as the model expects), keep the float artifact, or find the layer that breaks with "
            "`edgeaccel profile --compare ARTIFACT --reference FLOAT`")
    if any("precision" in line or "top-1" in line for line in failed):
        hint += "; boxes or classes that differ while the error is small point at class ids (a label order or " \
                "a broken class head)"
    return hint
