"""Show how edgeaccel would choose an executor for a model here: the ranked candidates with the reason for
each place and any measurements, and every rejected candidate with its reason."""

from __future__ import annotations

import argparse
import json

HELP = "show the ranked executors for a model and why each was kept or rejected"


def add_arguments(p: argparse.ArgumentParser, calibrate_flag: bool = True) -> None:
    p.add_argument("model", nargs="+", help="a model file, several artifacts of one model, a folder or a bundle")
    p.add_argument("--goal", choices=("latency", "efficiency"), default="latency")
    p.add_argument("--profile", help="a profile name or .yaml path (default: the one matching this machine)")
    p.add_argument("--executor", help="pin the runtime")
    p.add_argument("--device", help="pin the device")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8"))
    p.add_argument("--threads", type=int)
    if calibrate_flag:
        p.add_argument("--calibrate", action="store_true", help="measure the candidates now (see `tune`)")
    p.add_argument("--cache-dir", help="where measurements are kept (default ~/.cache/edgeaccel)")
    p.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.explain/1)")


def main(args: argparse.Namespace, calibrate: bool | None = None) -> int:
    from ..loader import select
    from . import quiet_native_stderr
    from .ranking_view import print_selection, selection_dict

    source = args.model[0] if len(args.model) == 1 else args.model
    with quiet_native_stderr():
        selection = select(source, executor=args.executor, device=args.device, precision=args.precision,
                           threads=args.threads, goal=args.goal, profile=args.profile,
                           calibrate=args.calibrate if calibrate is None else calibrate, cache_dir=args.cache_dir)
    report = selection_dict(selection)
    add_availability(selection, report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_selection(report)
    return 0


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
