"""Show how edgeaccel would choose an executor for a model here: the ranked candidates with the reason for
each place and any measurements, and every rejected candidate with its reason."""

from __future__ import annotations

import argparse
import json
import sys

from .names import executor_arg
from .options import add_cache_arguments, runtime_options, selection_options
from .progress import add_progress_argument

HELP = "show the ranked executors for a model and why each was kept or rejected"


def add_arguments(p: argparse.ArgumentParser, calibrate_flag: bool = True) -> None:
    p.add_argument("model", nargs="+", help="a model file, several artifacts of one model, a folder or a bundle")
    p.add_argument("--goal", choices=("latency", "efficiency"), default="latency")
    p.add_argument("--profile", help="a profile name or .yaml path (default: the one matching this machine)")
    p.add_argument("--executor", type=executor_arg,
                   help="pin the runtime: litert (tflite), onnxruntime (ort), openvino (ov), tensorflow")
    p.add_argument("--device", help="pin the device")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8", "auto"),
                   help="auto: calibration may admit bf16/f16 where accurate (the default only when no "
                        "--executor/--device is pinned)")
    p.add_argument("--threads", type=int)
    if calibrate_flag:
        p.add_argument("--calibrate", action="store_true", help="measure the candidates now (see `tune`)")
    from .inputs import add_pipeline_arguments

    add_pipeline_arguments(p)  # the size a dynamic-size model is measured at (default: the one it declares)
    p.add_argument("--task", choices=("classify", "detect", "segment", "pose", "none"),
                   help="the vision task calibration judges candidates on (their decoded boxes, masks, keypoints "
                        "or classes against the reference's); by default the one the model's metadata declares "
                        "or its outputs show unmistakably (a YOLO or SSD layout); none: raw outputs only")
    p.add_argument("--labels", help="labels for --task (.txt or .pbtxt)")
    add_cache_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.explain/1)")
    add_progress_argument(p)


def main(args: argparse.Namespace) -> int:
    show(args)
    return 0


def show(args: argparse.Namespace, calibrate: bool | None = None, calibration_inputs=None):
    """Select (measuring first when ``calibrate``) and print the selection; returns it."""
    from ..loader import select
    from ..options import TaskOptions
    from . import quiet_native_stderr
    from .progress import Status, wanted
    from .ranking_view import print_selection, selection_dict

    source = args.model[0] if len(args.model) == 1 else args.model
    calibrating = args.calibrate if calibrate is None else calibrate
    if calibrating and calibration_inputs is None:
        calibration_inputs = declared_samples(source, args)
    # only measuring takes long: a plain explain reads rules and the cache
    with Status("tune" if calibrate else "explain", bool(calibrating) and wanted(args)) as status, \
            quiet_native_stderr():
        status.step("measuring every candidate executor (loading, checking answers, timing)")
        selection = select(source, executor=args.executor, device=args.device, task=getattr(args, "task", None),
                           selection=selection_options(args, calibrate=calibrating,
                                                       calibration_inputs=calibration_inputs),
                           runtime=runtime_options(args),
                           task_options=TaskOptions(labels=getattr(args, "labels", None)))
    report = selection_dict(selection)
    add_availability(selection, report)
    report["warnings"] = custom_op_warnings(selection)
    report["pipeline"] = _pipeline(selection, args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_selection(report)
        if report["pipeline"]:
            print(f"pipeline    {pipeline_line(report['pipeline'])}")
        for line in report["warnings"]:
            print(f"warning     {line}", file=sys.stderr)
    return selection


def declared_samples(source, args) -> list[list] | None:
    """A dynamic-size image model is measured at the size its pipeline declares (or --imgsz), on the
    bundled sample photo, rather than at an invented one; None when nothing is dynamic or nothing declares."""
    from types import SimpleNamespace

    from ..modelfiles.bundle import resolve
    from ..modelfiles.pipeline import declared_shape
    from ..modelfiles.describe import describe_pipeline, pipeline_of
    from .inputs import prepare_inputs

    found = resolve(source)
    if not found.artifacts or not found.artifacts[0].is_dynamic:
        return None
    info = found.artifacts[0]
    pipeline = pipeline_of(SimpleNamespace(pipeline=describe_pipeline(info, bundle=found)),
                           {"imgsz": getattr(args, "imgsz", None), "letterbox": getattr(args, "letterbox", None)})
    if any(declared_shape(spec, pipeline) is None for spec in info.inputs):
        return None
    from .._data import samples_dir

    image = str(samples_dir() / "bird.png")
    specs = info.inputs
    inputs = [f"{s.name}={image}" if len(s.shape) == 4 else f"{s.name}=random" for s in specs]
    fake = SimpleNamespace(inputs=specs, pipeline=pipeline)
    arrays, _ = prepare_inputs(fake, SimpleNamespace(input=inputs, normalize=getattr(args, "normalize", None),
                                                     seed=0, imgsz=None, letterbox=None))
    return [arrays]


def _pipeline(selection, args) -> dict:
    """What the model declares about its inputs and outputs, with where each field came from."""
    from ..modelfiles.describe import describe_pipeline

    if not selection.artifacts.artifacts:
        return {}
    user = {"imgsz": getattr(args, "imgsz", None), "letterbox": getattr(args, "letterbox", None)}
    return describe_pipeline(selection.artifacts.artifacts[0], user=user, bundle=selection.artifacts).described()


def pipeline_line(described: dict) -> str:
    shown = []
    for key, value in described.items():
        if key == "sources":
            continue
        if key == "imgsz":
            value = "x".join(map(str, value))
        shown.append(f"{key} {value} ({described['sources'].get(key, '?')})")
    return "; ".join(shown) or "nothing declared"


def custom_op_warnings(selection) -> list[str]:
    """Ranking reads formats and devices, not operators: a model with custom ops is ranked like any other, and
    only loading shows whether a runtime registers them. Say so before the user runs it."""
    out = []
    for artifact in selection.artifacts.artifacts:
        custom = [op for op in artifact.custom_ops if op != "edgetpu-custom-op"]
        if custom:
            out.append(f"{artifact.path.name} uses custom ops {custom}: a runtime loads it only if it registers "
                       f"them (stock LiteRT, ONNX Runtime and OpenVINO do not); `edgeaccel tune` tries each one")
    return out


def add_availability(selection, report: dict) -> None:
    """Each ranked accelerator candidate's availability answer (library, device node, driver...): the
    ranking only knows the device is present, and loading is where a missing libedgetpu or an unreadable
    node would otherwise first show."""
    from ..loader import executor_class

    answers: dict[tuple[str, str], dict] = {}
    for entry, cand in zip(report["ranked"], selection.ranking.candidates, strict=True):
        if cand.kind == "cpu":
            continue
        key = (cand.runtime, cand.device)
        if key not in answers:
            try:
                found = executor_class(cand.runtime).availability(cand.device)
                answers[key] = {"ok": found.ok, "reason": found.reason, "fix": found.fix}
            except Exception as exc:  # a plug-in's broken availability must not break explain
                answers[key] = {"ok": False, "reason": f"availability failed: {exc}", "fix": None}
        entry["availability"] = answers[key]
