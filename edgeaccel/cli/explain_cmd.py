"""Show how edgeaccel would choose an executor for a model here: the ranked candidates with the reason for
each place and any measurements, and every rejected candidate with its reason."""

from __future__ import annotations

import argparse
import json
import sys

from .names import executor_arg
from .options import add_cache_arguments, cache_kwargs

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
    add_cache_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.explain/1)")


def main(args: argparse.Namespace) -> int:
    show(args)
    return 0


def show(args: argparse.Namespace, calibrate: bool | None = None, calibration_inputs=None):
    """Select (measuring first when ``calibrate``) and print the selection; returns it."""
    from ..loader import select
    from . import quiet_native_stderr
    from .ranking_view import print_selection, selection_dict

    source = args.model[0] if len(args.model) == 1 else args.model
    with quiet_native_stderr():
        selection = select(source, executor=args.executor, device=args.device, precision=args.precision,
                           threads=args.threads, goal=args.goal, profile=args.profile,
                           calibrate=args.calibrate if calibrate is None else calibrate,
                           calibration_inputs=calibration_inputs, **cache_kwargs(args))
    report = selection_dict(selection)
    add_availability(selection, report)
    report["warnings"] = custom_op_warnings(selection)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_selection(report)
        for line in report["warnings"]:
            print(f"warning     {line}", file=sys.stderr)
    return selection


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
    for entry, cand in zip(report["ranked"], selection.ranking.candidates):
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
