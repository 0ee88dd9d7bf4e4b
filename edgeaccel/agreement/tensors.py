"""Tensor-level agreement: how far one candidate's raw outputs are from the reference's, every output, over
every sample. Each figure is computed here once; calibration, ``check`` and ``profile --compare`` read them.

Per output (``output_metrics``):
- max error as a share of the range the output spans in the reference over all samples (a classifier's
  scores over several photos span most of 0..1; a range taken per sample would make a flat, uncertain
  prediction look wildly wrong), and in quantization steps for quantized outputs;
- relative L2 ||got - ref|| / ||ref|| and SQNR 10 log10(||ref||^2 / ||got - ref||^2), over all samples pooled
  (``ErrorSums``, which streaming callers such as ``profile --compare`` feed one sample at a time);
- for class-score outputs (one score per class, a row per batch item): top-1 agreement over the clear-cut
  rows (the reference's winner leads by more than the tolerated error) and top-5 agreement (the reference's
  top-1 is among the candidate's five best) over all rows.

The verdict (``agreement``): two runtimes that requantize differently land one or two steps apart, which is
agreement (``STEP_FLOOR``); beyond that the share of range decides, and class-score outputs must also keep
their top-1 on every clear-cut row. Integer outputs that are not quantized (class ids, masks) must agree
element by element. A changed shape or NaN/Inf where the reference is finite is always a refusal
(``TensorComparison.broken``), whatever judges the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..modelinfo import TensorSpec
from ..tensors import dequantize_array

# The default: no output may move by more than 5% of its range. A user reading "accuracy_tolerance=0.05"
# expects exactly that, on every output; it refuses what runtime facts measured as wrong answers (OpenVINO bf16
# changing top-1 on a resnet, OpenVINO int8 moving MoveNet keypoints by 0.2-0.4) while keeping runtimes that
# only round differently (1-2 quantization steps, float differences around 1e-5).
DEFAULT_TOLERANCE = 0.05
STEP_FLOOR = 2  # quantization steps that are always agreement (rounding differences between runtimes)
TOP_K = 5


@dataclass
class Agreement:
    ok: bool
    why: str
    metrics: dict = field(default_factory=dict)


# -- pooled L2 figures -------------------------------------------------------------------------------------
def relative_l2(err2: float, ref2: float) -> float:
    """||error|| / ||reference|| from their squared norms; an all-zero reference makes any error infinite,
    none zero."""
    if ref2 > 0:
        return math.sqrt(err2 / ref2)
    return 0.0 if err2 == 0 else math.inf


def sqnr_db(err2: float, ref2: float) -> float | None:
    """10 log10(||reference||^2 / ||error||^2); None where the values are identical (infinite SQNR)."""
    if err2 == 0:
        return None
    return 10 * math.log10(ref2 / err2) if ref2 > 0 else -math.inf


@dataclass
class ErrorSums:
    """Squared error, squared reference, absolute error and the worst absolute error of one output, summed in
    float64 over the samples added (sums of many squares)."""

    err2: float = 0.0
    ref2: float = 0.0
    abs_sum: float = 0.0
    max_abs: float = 0.0
    count: int = 0

    def add(self, reference: np.ndarray, got: np.ndarray) -> None:
        """One sample: the two arrays hold the same number of values (compared flat)."""
        f = np.asarray(reference, np.float64).reshape(-1)
        diff = np.asarray(got, np.float64).reshape(-1) - f
        self.err2 += float(np.square(diff).sum())
        self.ref2 += float(np.square(f).sum())
        if diff.size:
            magnitude = np.abs(diff)
            self.abs_sum += float(magnitude.sum())
            self.max_abs = max(self.max_abs, float(magnitude.max()))
        self.count += diff.size

    @property
    def rel_l2(self) -> float:
        return relative_l2(self.err2, self.ref2)

    @property
    def sqnr_db(self) -> float | None:
        return sqnr_db(self.err2, self.ref2)

    @property
    def mean_abs(self) -> float:
        return self.abs_sum / max(self.count, 1)


# -- class-score outputs ----------------------------------------------------------------------------------
def class_rows(a: np.ndarray) -> np.ndarray | None:
    """One score per class per batch item, after dropping singleton dimensions (1x1001, 1x1000x1x1); None for
    other outputs (keypoints, boxes, maps)."""
    if a.ndim == 0:
        return None
    batch = a.shape[0] if a.ndim > 1 else 1
    rest = [d for d in (a.shape[1:] if a.ndim > 1 else a.shape) if d != 1]
    if len(rest) != 1 or rest[0] < 2:
        return None
    return a.reshape(batch, rest[0])


def top_k_agreement(reference: Sequence[np.ndarray], got: Sequence[np.ndarray], k: int = 1,
                    margin: float | None = None) -> tuple[int, int] | None:
    """(rows where the reference's top-1 is among the candidate's k best, rows counted) for a class-score
    output over the samples; None when the output holds no class scores. With ``margin``, only rows whose
    reference winner leads its runner-up by more than it count (a near tie may flip on rounding alone)."""
    kept = total = 0
    for a, b in zip(reference, got, strict=True):
        rows_a, rows_b = class_rows(np.asarray(a, np.float64)), class_rows(np.asarray(b, np.float64))
        if rows_a is None or rows_b is None or rows_a.shape != rows_b.shape:
            return None
        for row_a, row_b in zip(rows_a, rows_b, strict=True):
            if margin is not None:
                top = np.sort(row_a)[-2:]
                if not top[1] - top[0] > margin:
                    continue
            total += 1
            best = np.argsort(-row_b, kind="stable")[:k]
            kept += int(np.argmax(row_a) in best)
    return kept, total


# -- one output ------------------------------------------------------------------------------------------
def real_values(values: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """float64 values; a quantized integer output dequantized with its spec's scale and zero point."""
    if spec.quantization is not None and values.dtype.kind in "iu":
        return dequantize_array(values, spec.quantization).astype(np.float64)
    return values.astype(np.float64)


def quantization_step(spec: TensorSpec, values: np.ndarray) -> float | None:
    if spec.quantization is None or values.dtype.kind not in "iu":
        return None
    return float(max(spec.quantization.scale))


def output_metrics(want: Sequence[np.ndarray], have: Sequence[np.ndarray], rs: TensorSpec, gs: TensorSpec,
                   tolerance: float = DEFAULT_TOLERANCE) -> tuple[dict, str | None]:
    """Every figure of one output over the samples, and what breaks it outright (a changed shape, NaN or
    Inf where the reference is finite) or None. ``tolerance`` only sets the top-1 margin."""
    for k, (a, b) in enumerate(zip(want, have, strict=True)):
        if not isinstance(b, np.ndarray) or np.shape(a) != np.shape(b):
            return {}, f"shape {np.shape(b)} where the reference has {np.shape(a)} (sample {k + 1})"
    if want and want[0].dtype.kind in "iub" and rs.quantization is None:  # class ids, masks: exactly
        agree = min(float(np.mean(a == b)) if a.size else 1.0 for a, b in zip(want, have, strict=True))
        return {"exact_agreement": round(agree, 6)}, None
    real_a = [real_values(a, rs) for a in want]
    real_b = [real_values(b, gs) for b in have]
    for k, (a, b) in enumerate(zip(real_a, real_b, strict=True)):
        if not np.all(np.isfinite(b[np.isfinite(a)])):
            return {"max_error_fraction": None}, f"NaN or Inf where the reference is finite (sample {k + 1})"
    flat = np.concatenate([a.ravel() for a in real_a]) if real_a else np.zeros(0)
    spread = float(flat.max() - flat.min()) if flat.size else 0.0
    sums = ErrorSums()
    errors = []
    for a, b in zip(real_a, real_b, strict=True):
        sums.add(a, b)
        errors.append(float(np.max(np.abs(a - b))) if a.size else 0.0)
    worst_k = int(np.argmax(errors)) if errors else 0
    error = errors[worst_k] if errors else 0.0
    scale = quantization_step(rs, want[0]) if want else None
    steps = int(round(error / scale)) if scale else None
    if spread > 0:
        fraction = error / spread
    else:  # a constant output: relative to its size
        fraction = error / max(float(np.max(np.abs(flat))) if flat.size else 0.0, 1e-12) if error else 0.0
    result = {"max_error_fraction": round(fraction, 6), "max_error_steps": steps, "worst_sample": worst_k + 1,
              "range": round(spread, 6), "max_abs_error": error, "rel_l2": _finite(sums.rel_l2),
              "sqnr_db": _finite(sums.sqnr_db)}
    margin = max(tolerance * spread, STEP_FLOOR * (scale or 0.0))
    top1 = top_k_agreement(real_a, real_b, 1, margin)
    if top1 is not None:
        result["top1_agreement"] = round(top1[0] / top1[1], 6) if top1[1] else None
        result["top1_clear_cut"] = top1[1]
        top5 = top_k_agreement(real_a, real_b, TOP_K)
        result["top5_agreement"] = round(top5[0] / top5[1], 6) if top5 and top5[1] else None
    return result, None


def _finite(value: float | None) -> float | None:
    """JSON has no Inf: an infinite figure (an all-zero reference) is reported as None beside the rest."""
    return None if value is None or not math.isfinite(value) else round(value, 6)


def output_failure(result: dict, tolerance: float) -> str | None:
    """Why one output's figures fail the tensor verdict, or None."""
    if "exact_agreement" in result:
        agree = result["exact_agreement"]
        return f"only {agree:.1%} of its values agree with the reference" if agree < 1 - tolerance / 5 else None
    fraction, steps = result["max_error_fraction"], result.get("max_error_steps")
    tolerated = steps is not None and steps <= STEP_FLOOR
    if fraction > tolerance and not tolerated:
        in_steps = f" ({steps} quantization steps)" if steps is not None else ""
        return (f"max error {fraction:.1%} of the output range{in_steps} on sample {result['worst_sample']} "
                f"(tolerance {tolerance:.0%})")
    if result.get("top1_agreement") is not None and result["top1_agreement"] < 1:
        clear = result["top1_clear_cut"]
        changed = clear - round(result["top1_agreement"] * clear)
        return f"top-1 changed on {changed} of {clear} clear-cut samples"
    return None


# -- every output --------------------------------------------------------------------------------------------
@dataclass
class TensorComparison:
    """Every output's figures; ``broken``: what refuses the candidate whatever else judges it (outputs that
    do not match, a changed shape, NaN/Inf); ``pairs``: (reference output, candidate output) indices."""

    per_output: dict[str, dict]
    broken: list[str]
    pairs: list[tuple[int, int]]
    matched_by: str
    samples: int


def compare_outputs(reference: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]],
                    ref_specs: Sequence[TensorSpec], got_specs: Sequence[TensorSpec],
                    tolerance: float = DEFAULT_TOLERANCE) -> TensorComparison:
    """``reference[i][j]``: output j of sample i. Outputs are matched by name; by position only where the
    candidate's names are not the reference's (a converted twin), and the comparison says so."""
    pairs, matched_by = match_outputs(ref_specs, got_specs)
    if isinstance(pairs, str):
        return TensorComparison({}, [pairs], [], "", len(reference))
    per_output: dict[str, dict] = {}
    broken: list[str] = []
    for i, j in pairs:
        rs = ref_specs[i]
        result, failure = output_metrics([s[i] for s in reference], [s[j] for s in got], rs, got_specs[j],
                                         tolerance)
        per_output[rs.name or f"#{i}"] = result
        if failure:
            broken.append(f"output {rs.name!r}: {failure}")
    return TensorComparison(per_output, broken, pairs, matched_by, len(reference))


def match_outputs(ref_specs, got_specs) -> tuple[list[tuple[int, int]] | str, str]:
    names = {s.name: j for j, s in enumerate(got_specs)}
    if all(s.name in names for s in ref_specs) and len({s.name for s in ref_specs}) == len(ref_specs):
        return [(i, names[s.name]) for i, s in enumerate(ref_specs)], "name"
    if len(ref_specs) == len(got_specs):
        return [(i, i) for i in range(len(ref_specs))], "position (the output names differ)"
    return (f"the outputs differ: the reference has {[s.name for s in ref_specs]}, "
            f"this candidate {[s.name for s in got_specs]}"), ""


def agreement(reference: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]],
              ref_specs: Sequence[TensorSpec], got_specs: Sequence[TensorSpec],
              tolerance: float = DEFAULT_TOLERANCE) -> Agreement:
    """The tensor verdict: every output within ``tolerance`` of its range (or ``STEP_FLOOR`` steps), top-1
    kept on clear-cut class-score rows, nothing broken."""
    compared = compare_outputs(reference, got, ref_specs, got_specs, tolerance)
    return tensor_verdict(compared, tolerance)


def tensor_verdict(compared: TensorComparison, tolerance: float) -> Agreement:
    if not compared.pairs:
        return Agreement(False, compared.broken[0], {"samples": compared.samples})
    failures = list(compared.broken)
    for name, result in compared.per_output.items():
        failure = output_failure(result, tolerance) if result and result.get("max_error_fraction", 0) is not None \
            else None
        if failure and not any(f.startswith(f"output {name!r}:") for f in failures):
            failures.append(f"output {name!r}: {failure}")
    metrics = summary(compared)
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return Agreement(False, failures[0] + more, metrics)
    worst = metrics["max_error_fraction"]
    steps = metrics.get("max_error_steps")
    in_steps = f", {steps} quantization steps" if steps is not None else ""
    return Agreement(True, f"accurate: max error {worst:.2%} of the output range{in_steps} on "
                           f"{len(compared.per_output)} outputs x {compared.samples} samples (tolerance "
                           f"{tolerance:.0%})", metrics)


def summary(compared: TensorComparison) -> dict:
    """The worst figure of each kind over the outputs, and every output's own."""
    outs = compared.per_output
    fractions = [r["max_error_fraction"] for r in outs.values() if r.get("max_error_fraction") is not None]
    steps = [r["max_error_steps"] for r in outs.values() if r.get("max_error_steps") is not None]
    rel = [r["rel_l2"] for r in outs.values() if r.get("rel_l2") is not None]
    sqnr = [r["sqnr_db"] for r in outs.values() if r.get("sqnr_db") is not None]
    top1 = [r["top1_agreement"] for r in outs.values() if r.get("top1_agreement") is not None]
    top5 = [r["top5_agreement"] for r in outs.values() if r.get("top5_agreement") is not None]
    exact = [r["exact_agreement"] for r in outs.values() if "exact_agreement" in r]
    worst_name = max(outs, key=lambda n: outs[n].get("max_error_fraction") or 0.0, default=None)
    return {"max_error_fraction": max(fractions, default=0.0), "max_error_steps": max(steps) if steps else None,
            "worst_output": worst_name, "rel_l2": max(rel) if rel else None, "sqnr_db": min(sqnr) if sqnr else None,
            "top1_agreement": min(top1) if top1 else None, "top5_agreement": min(top5) if top5 else None,
            "exact_agreement": min(exact) if exact else 1.0, "samples": compared.samples,
            "outputs_matched_by": compared.matched_by, "outputs": outs}
