"""How far one candidate's answers are from the reference's: every output, matched by name, over every sample.

The figure is the worst absolute error of an output, on any sample, as a fraction of the range that output
spans in the reference over all samples (a classifier's scores over several photos span most of 0..1; a range
taken per sample would make a flat, uncertain prediction look wildly wrong). Quantized outputs are also counted
in quantization steps: two runtimes that requantize differently land one or two steps apart, which is
agreement (``STEP_FLOOR``); beyond that the fraction of range decides. Class-score outputs must also keep their
top-1 on every sample where the reference's winner leads by more than the tolerated error. Integer outputs
that are not quantized (class ids, masks) must agree element by element.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .modelinfo import TensorSpec
from .tensors import dequantize_array

# The default: no output may move by more than 5% of its range. A user reading "accuracy_tolerance=0.05"
# expects exactly that, on every output; it refuses what FINDINGS measured as wrong answers (OpenVINO bf16
# changing top-1 on a resnet, OpenVINO int8 moving MoveNet keypoints by 0.2-0.4) while keeping runtimes that
# only round differently (1-2 quantization steps, float differences around 1e-5).
DEFAULT_TOLERANCE = 0.05
STEP_FLOOR = 2  # quantization steps that are always agreement (rounding differences between runtimes)


@dataclass
class Agreement:
    ok: bool
    why: str
    metrics: dict = field(default_factory=dict)


def agreement(reference: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]],
              ref_specs: Sequence[TensorSpec], got_specs: Sequence[TensorSpec],
              tolerance: float = DEFAULT_TOLERANCE) -> Agreement:
    """``reference[i][j]``: output j of sample i. Outputs are matched by name; by position only where the
    candidate's names are not the reference's (a converted twin), and the metrics say so."""
    pairs, matched_by = _match(ref_specs, got_specs)
    if isinstance(pairs, str):
        return Agreement(False, pairs, {"samples": len(reference)})
    per_output: dict[str, dict] = {}
    failures: list[str] = []
    for i, j in pairs:
        rs, gs = ref_specs[i], got_specs[j]
        want = [sample[i] for sample in reference]
        have = [sample[j] for sample in got]
        result, failure = _one_output(want, have, rs, gs, tolerance)
        per_output[rs.name or f"#{i}"] = result
        if failure:
            failures.append(f"output {rs.name!r}: {failure}")
    metrics = _summary(per_output, len(reference), matched_by)
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return Agreement(False, failures[0] + more, metrics)
    worst = metrics["max_error_fraction"]
    steps = metrics.get("max_error_steps")
    in_steps = f", {steps} quantization steps" if steps is not None else ""
    return Agreement(True, f"accurate: max error {worst:.2%} of the output range{in_steps} on "
                           f"{len(per_output)} outputs x {len(reference)} samples (tolerance {tolerance:.0%})",
                     metrics)


def _match(ref_specs, got_specs) -> tuple[list[tuple[int, int]] | str, str]:
    names = {s.name: j for j, s in enumerate(got_specs)}
    if all(s.name in names for s in ref_specs) and len({s.name for s in ref_specs}) == len(ref_specs):
        return [(i, names[s.name]) for i, s in enumerate(ref_specs)], "name"
    if len(ref_specs) == len(got_specs):
        return [(i, i) for i in range(len(ref_specs))], "position (the output names differ)"
    return (f"the outputs differ: the reference has {[s.name for s in ref_specs]}, "
            f"this candidate {[s.name for s in got_specs]}"), ""


def _one_output(want: list[np.ndarray], have: list[np.ndarray], rs: TensorSpec, gs: TensorSpec,
                tolerance: float) -> tuple[dict, str | None]:
    for k, (a, b) in enumerate(zip(want, have)):
        if not isinstance(b, np.ndarray) or np.shape(a) != np.shape(b):
            return {}, f"shape {np.shape(b)} where the reference has {np.shape(a)} (sample {k + 1})"
    if want[0].dtype.kind in "iub" and rs.quantization is None:  # class ids, masks: exactly
        agree = min(float(np.mean(a == b)) if a.size else 1.0 for a, b in zip(want, have))
        result = {"exact_agreement": round(agree, 6)}
        if agree < 1 - tolerance / 5:
            return result, f"only {agree:.1%} of its values agree with the reference"
        return result, None
    real_a = [_real(a, rs) for a in want]
    real_b = [_real(b, gs) for b in have]
    flat = np.concatenate([a.ravel() for a in real_a]) if real_a else np.zeros(0)
    spread = float(flat.max() - flat.min()) if flat.size else 0.0
    errors = [float(np.max(np.abs(a - b))) if a.size else 0.0 for a, b in zip(real_a, real_b)]
    worst_k = int(np.argmax(errors)) if errors else 0
    error = errors[worst_k] if errors else 0.0
    if not np.isfinite(error):
        return {"max_error_fraction": None}, f"NaN or Inf where the reference is finite (sample {worst_k + 1})"
    scale = _step(rs, want[0])
    steps = int(round(error / scale)) if scale else None
    if spread > 0:
        fraction = error / spread
    else:  # a constant output: relative to its size
        fraction = error / max(float(np.max(np.abs(flat))) if flat.size else 0.0, 1e-12) if error else 0.0
    result = {"max_error_fraction": round(fraction, 6), "max_error_steps": steps, "worst_sample": worst_k + 1,
              "range": round(spread, 6)}
    tolerated = steps is not None and steps <= STEP_FLOOR
    if fraction > tolerance and not tolerated:
        in_steps = f" ({steps} quantization steps)" if steps is not None else ""
        return result, (f"max error {fraction:.1%} of the output range{in_steps} on sample {worst_k + 1} "
                        f"(tolerance {tolerance:.0%})")
    top1 = _top1(real_a, real_b, max(tolerance * spread, STEP_FLOOR * (scale or 0.0)))
    if top1 is not None:
        result["top1_agreement"] = round(top1[0] / top1[1], 6) if top1[1] else None
        if top1[0] < top1[1]:
            return result, f"top-1 changed on {top1[1] - top1[0]} of {top1[1]} clear-cut samples"
    return result, None


def _real(values: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if spec.quantization is not None and values.dtype.kind in "iu":
        return dequantize_array(values, spec.quantization).astype(np.float64)
    return values.astype(np.float64)


def _step(spec: TensorSpec, values: np.ndarray) -> float | None:
    if spec.quantization is None or values.dtype.kind not in "iu":
        return None
    return float(max(spec.quantization.scale))


def _top1(real_a, real_b, margin: float) -> tuple[int, int] | None:
    """(kept, clear-cut rows) for a class-score output: one score per class after dropping singleton
    dimensions (1x1001, 1x1000x1x1), a row per batch item; None for other outputs (keypoints, boxes)."""
    ok = total = 0
    for a, b in zip(real_a, real_b):
        rows_a, rows_b = _class_rows(a), _class_rows(b)
        if rows_a is None:
            return None
        for row_a, row_b in zip(rows_a, rows_b):
            top = np.sort(row_a)[-2:]
            if top[1] - top[0] > margin:  # only a clear winner must win again
                total += 1
                ok += int(np.argmax(row_a) == np.argmax(row_b))
    return ok, total


def _class_rows(a: np.ndarray) -> np.ndarray | None:
    if a.ndim == 0:
        return None
    batch = a.shape[0] if a.ndim > 1 else 1
    rest = [d for d in (a.shape[1:] if a.ndim > 1 else a.shape) if d != 1]
    if len(rest) != 1 or rest[0] < 2:
        return None
    return a.reshape(batch, rest[0])


def _summary(per_output: dict[str, dict], samples: int, matched_by: str) -> dict:
    fractions = [r["max_error_fraction"] for r in per_output.values() if r.get("max_error_fraction") is not None]
    steps = [r["max_error_steps"] for r in per_output.values() if r.get("max_error_steps") is not None]
    top1 = [r["top1_agreement"] for r in per_output.values() if r.get("top1_agreement") is not None]
    exact = [r["exact_agreement"] for r in per_output.values() if "exact_agreement" in r]
    worst_name = max(per_output, key=lambda n: per_output[n].get("max_error_fraction") or 0.0, default=None)
    return {"max_error_fraction": max(fractions, default=0.0), "max_error_steps": max(steps) if steps else None,
            "worst_output": worst_name, "top1_agreement": min(top1) if top1 else None,
            "exact_agreement": min(exact) if exact else 1.0, "samples": samples, "outputs_matched_by": matched_by,
            "outputs": per_output}
