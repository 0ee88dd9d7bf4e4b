"""Calibrate a model here: run every feasible executor briefly, check its answers against the CPU
reference, time it, and keep the results so that later loads choose from measurements. A vision model whose
task is known (--task, or its metadata, or an unmistakable YOLO/SSD/MoveNet layout) is judged on its decoded
results (docs/agreement.md); --task none judges raw outputs only.

A model with dynamic dimensions is measured at the image size it declares (its pipeline, or --imgsz) on the
bundled sample photo, else on inputs of an invented size unless --input gives real ones (e.g. --input
x=sample.npy); when no executor runs the model during calibration, nothing is kept and the
command fails (exit 6), so that a failed measurement cannot stop later `run`s."""

from __future__ import annotations

import argparse
import sys

from . import explain_cmd
from .inputs import NORMALIZE_HELP, normalize_arg

HELP = "measure every feasible executor for a model (accuracy and latency) and cache the results"


def add_arguments(p: argparse.ArgumentParser) -> None:
    explain_cmd.add_arguments(p, calibrate_flag=False)
    p.add_argument("--input", "-i", action="append", default=[], metavar="SOURCE",
                   help="measure on this input instead of invented ones: an image, a .npy, or NAME=SOURCE; "
                        "repeat per model input (needed for dynamic shapes)")
    p.add_argument("--normalize", type=normalize_arg, metavar="MODE", help=NORMALIZE_HELP)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    from ..errors import NoExecutorError
    samples = _given_inputs(args) if args.input else None
    selection = explain_cmd.show(args, calibrate=True, calibration_inputs=samples)
    failed = {c: m.reason for c, m in selection.measurements.items() if not m.eligible and m.p50_ms is None
              and m.reason.startswith("failed to")}
    if selection.ranking.candidates:
        if failed:
            print(f"warning: {len(failed)} candidate(s) failed while measuring (see `rejected` above); "
                  "they are not chosen until the cache is cleared (`edgeaccel cache clear --calibration`)",
                  file=sys.stderr)
        return 0
    # Nothing ran: keep no measurement, or every later `run` of this model would be refused by it.
    if selection.cache_file is not None:
        selection.cache_file.unlink(missing_ok=True)
    dynamic = any(a.is_dynamic for a in selection.artifacts.artifacts)
    hint = ("the model has dynamic dimensions and calibration invented an input size; pass the size it takes "
            "with --imgsz (an image input) or real inputs with --input NAME=sample.npy"
            if dynamic and not args.input else
            "`edgeaccel run MODEL --no-cache` shows the first failure in full; nothing was kept in the cache")
    raise NoExecutorError("no executor ran this model while measuring; no measurement was kept:",
                          rejections={k.split("/", 1)[-1]: v for k, v in failed.items()}, hint=hint)


def _given_inputs(args: argparse.Namespace) -> list[list]:
    """One calibration sample from --input, fitted to the model's first artifact (all share inputs)."""
    from ..modelfiles.bundle import resolve
    from .inputs import prepare_inputs

    source = args.model[0] if len(args.model) == 1 else args.model
    found = resolve(source)
    if not found.artifacts:
        raise found.invalid[0][1]
    arrays, _ = prepare_inputs(found.artifacts[0], args)  # images fed at the size the model declares
    return [arrays]
