"""What calibration's guard decided for each candidate of a model, and on what: the task's figures (boxes,
masks, keypoints, classes) beside the raw-tensor figures the old guard judged on (share of the output range).

    python tools/guard_report.py MODEL [MODEL ...] [--task detect|segment|pose|classify|none] [--budget 1.0]

Each model is calibrated in a fresh temporary cache (nothing is kept). Columns: candidate, admitted, judged
on, max error as a share of the range, and the task figures the guard gated on.
"""

from __future__ import annotations

import argparse
import tempfile

from edgeaccel.loader import select
from edgeaccel.options import RuntimeOptions, SelectionOptions

SHOWN = ("precision", "recall", "mean_score_error", "miou", "keypoint_distance", "keypoint_distance_image",
         "pose_recall", "top1_clear_cut", "clear_cut_samples", "reference_boxes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--task", choices=("classify", "detect", "segment", "pose", "none"))
    parser.add_argument("--budget", type=float, default=1.0, help="calibration budget per model (s)")
    args = parser.parse_args()
    for path in args.models:
        with tempfile.TemporaryDirectory() as cache:
            sel = select(path, task=args.task,
                         selection=SelectionOptions(calibrate=True, calibration_budget_s=args.budget),
                         runtime=RuntimeOptions(cache_dir=cache))
        print(f"== {path}")
        for key, m in sel.measurements.items():
            acc = m.accuracy
            figures = acc.get("task_metrics") or {}
            shown = ", ".join(f"{k} {figures[k]:.4g}" if isinstance(figures[k], float) else f"{k} {figures[k]}"
                              for k in SHOWN if k in figures)
            share = acc.get("max_error_fraction")
            print(f"  {key.split('/')[-1]:<24} {'admitted' if m.eligible else 'refused':<9}"
                  f"{acc.get('judged_on') or 'reference':<10} range share {share if share is not None else '-'}"
                  f"  {shown}")
            if not m.eligible:
                print(f"      {m.reason}")


if __name__ == "__main__":
    main()
