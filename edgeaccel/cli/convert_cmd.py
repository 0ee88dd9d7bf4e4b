"""Convert a float model (TensorFlow SavedModel folder, .keras/.h5, .onnx, .tflite) into the artifacts each
accelerator needs, and write them with an edgeaccel-bundle.yaml that `edgeaccel.load(OUT)` and
`edgeaccel check OUT` read. Full-integer targets need --calibration (a folder of images, a folder of .npy
samples, one .npy of N stacked samples, or an .npz keyed by input name)."""

from __future__ import annotations

import argparse
import contextlib
import sys

from .inputs import NORMALIZE_HELP, add_pipeline_arguments, normalize_arg
from .progress import add_progress_argument

HELP = "convert and quantize a float model into deployable artifacts plus a bundle manifest"

TARGET_HELP = ("comma-separated: tflite-float, tflite-dynamic, tflite-int8 (from TensorFlow/Keras); "
               "onnx-float, onnx-int8, openvino, openvino-int8 (from TensorFlow/Keras, ONNX or TFLite)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="SavedModel folder, .keras/.h5, .onnx or .tflite")
    p.add_argument("--to", required=True, metavar="TARGETS", help=TARGET_HELP)
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the bundle to")
    p.add_argument("--calibration", metavar="DIR_OR_NPY",
                   help="representative inputs: images folder, .npy folder, .npy of N samples, or .npz by input")
    p.add_argument("--normalize", type=normalize_arg, metavar="MODE", help=NORMALIZE_HELP)
    p.add_argument("--max-samples", type=int, default=200, help="calibration samples to use at most (default 200)")
    p.add_argument("--holdout-every", type=int, default=5, metavar="N",
                   help="hold every N-th calibration sample back from calibration, for checking the artifacts on "
                        "inputs they never saw (default 5; at least one is held out; 0: none). The manifest names "
                        "which samples calibrated and which were held out (holdout.npy)")
    p.add_argument("--no-check", action="store_true",
                   help="do not check the artifacts after converting (by default each is checked against the "
                        "reference on the held-out samples with `edgeaccel check`'s default gates; a failed one "
                        "is marked failed in the manifest and never picked by load/run)")
    p.add_argument("--io", choices=("int8", "uint8", "float"), default="int8",
                   help="input/output type of tflite-int8 (default int8; uint8 for older Edge TPU pipelines)")
    p.add_argument("--onnx-activations", choices=("uint8", "int8"), default="uint8",
                   help="activation type of onnx-int8 (default uint8: ONNX Runtime's fast x86 path; "
                        "int8 for TensorRT)")
    p.add_argument("--keep-float", nargs="+", action="extend", default=[], metavar="NAME",
                   help="node or tensor names of the float ONNX model that the int8 ONNX targets (onnx-int8, "
                        "openvino-int8, tensorrt-int8) keep in float, on top of what convert keeps float itself "
                        "(the detection head, joins of very different ranges, layers a sensitivity pass finds lossy)")
    p.add_argument("--sensitivity-seconds", type=float, default=30.0, metavar="S",
                   help="time the int8 ONNX sensitivity pass may spend finding layers too lossy for int8 "
                        "(default 30; 0 skips it)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=1x224x224x3",
                   help="static shape for a TensorFlow input with dynamic dimensions (repeatable); for an ONNX "
                        "model, the image size its dynamic input is fed at (the artifacts stay dynamic, and carry it)")
    add_pipeline_arguments(p)
    p.add_argument("--labels", help="labels file to copy into the bundle")
    p.add_argument("--name", help="base name of the artifacts (default: the model's)")
    p.add_argument("--force", action="store_true", help="write into a folder that is not empty")
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.convert/1)")
    add_progress_argument(p)


def main(args: argparse.Namespace) -> int:
    import json

    from ..convert.pipeline import convert
    from ..convert.verify import size_vs_reference
    from ..errors import InputError
    from . import quiet_native_stderr
    from .progress import Status, wanted

    if args.max_samples < 1:
        raise InputError("--max-samples must be at least 1")
    if args.holdout_every < 0 or args.holdout_every == 1:
        raise InputError("--holdout-every must be 0 (none) or at least 2", hint="the default 5 holds back every 5th")
    if not args.sensitivity_seconds >= 0:  # also refuses nan
        raise InputError("--sensitivity-seconds must be 0 (no sensitivity pass) or more")
    with Status("convert", wanted(args)) as status, quiet_native_stderr(), _without_tensorflow_chatter(args):
        status.step(f"converting to {args.to}, then checking each artifact against the reference")
        result = convert(args.model, args.to, args.out, calibration=args.calibration, normalize=args.normalize,
                         io_type=args.io, max_samples=args.max_samples, labels=args.labels, name=args.name,
                         input_shapes=parse_shapes(args.input_shape), onnx_activations=args.onnx_activations,
                         force=args.force, imgsz=args.imgsz, letterbox=args.letterbox,
                         keep_float=args.keep_float, sensitivity_s=args.sensitivity_seconds,
                         holdout_every=args.holdout_every, check=not args.no_check)
    failed = [(a, result.check_of(a.path)) for a in result.artifacts
              if (result.check_of(a.path) or {}).get("passed") is False]
    if args.json:
        json.dump(result.as_dict(), sys.stdout, indent=2)
        print()
        _say_failed(failed)
        return 0
    ref_size = result.reference.stat().st_size
    print(f"bundle     {result.manifest}")
    print(f"reference  {result.reference.name} ({_size(ref_size)}): {result.reference_note}")
    if result.calibration:
        print(f"calibration {result.calibration.name}: {result.calibration_samples} samples the artifacts were "
              "calibrated on")
    if result.holdout:
        print(f"held out   {result.holdout.name}: {result.holdout_samples} samples never calibrated on, what "
              "`edgeaccel check` compares on")
    print(f"check      {result.check_note}")
    for a in result.artifacts:
        ratio = size_vs_reference(ref_size / a.size_bytes) if a.size_bytes and a.path != result.reference else ""
        print(f"{a.target:<15} {a.path.name}  {_size(a.size_bytes)}  {ratio}")
        print(f"{'':<15} {a.note}")
        for line in _kept_float_lines(a.kept_float):
            print(f"{'':<15} {line}")
        verdict = result.check_of(a.path)
        if verdict is not None:
            print(f"{'':<15} check: {_verdict(verdict)}")
    for report in result.edgetpu:
        print()
        print("\n".join(report.lines()))
    print()
    print(f"next: edgeaccel check {result.out}")
    _say_failed(failed)
    return 0


def _verdict(check: dict) -> str:
    if check["passed"] is None:
        return check.get("reason") or "not checked"
    measures = ", ".join(f"{k} {v:.4g}" for k, v in check.items()
                         if k in ("rel_error", "precision", "recall", "miou", "keypoint_distance", "top1")
                         and v is not None)
    return ("passed" if check["passed"] else "FAILED") + f" ({measures})"


def _say_failed(failed: list) -> None:
    """Failed artifacts are still written (their numbers are in the manifest) but never picked; convert logged
    each with its reason: what to do about them."""
    if failed:
        print("hint: calibrate on inputs like those the model will see (--normalize as it expects), keep the float "
              "artifact, or find the layer that breaks with `edgeaccel profile --compare`", file=sys.stderr)


# What TensorFlow's native code writes to fd 2 on every conversion (absl start-up, oneDNN banner, the MLIR
# quantizer's type summary): no user acts on it. Real warnings (W lines other than these) are kept.
_TF_CHATTER = (
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} .*"  # absl INFO lines
    r"|W\d{4} .*(Please consider providing the trackable_obj|Statistics for quantized inputs were expected).*"
    r"|fully_quantize: \d+, inference_type: .*"
    r"|INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.)$")


@contextlib.contextmanager
def _without_tensorflow_chatter(args):
    """Capture fd 2 during the conversion and pass on everything but TensorFlow's routine chatter."""
    import re

    from . import quiet_native_stderr

    if getattr(args, "debug", False):
        yield
        return
    chatter = re.compile(_TF_CHATTER)
    with quiet_native_stderr(lambda line: bool(chatter.match(line))):
        yield


def parse_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    from ..errors import InputError

    shapes = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d < 1 for d in shape):
            raise InputError(f"--input-shape {item!r} is not NAME=D1xD2x...", hint="e.g. --input-shape x=1x224x224x3")
        shapes[name] = shape
    return shapes


def _kept_float_lines(kept: list[dict] | None, shown: int = 6) -> list[str]:
    """The nodes an int8 artifact left in float, grouped by reason (a YOLO head is a dozen nodes, one reason)."""
    if not kept:
        return []
    by_why: dict[str, list[str]] = {}
    for k in kept:
        by_why.setdefault(k["why"], []).append(f"{k['node']} ({k['op']})")
    lines = [f"kept float: {len(kept)} nodes"]
    for why, nodes in by_why.items():
        more = f" and {len(nodes) - shown} more" if len(nodes) > shown else ""
        lines.append(f"  {', '.join(nodes[:shown])}{more}: {why}")
    return lines


def _size(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
