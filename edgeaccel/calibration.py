"""Calibration: run each feasible candidate briefly, check its outputs against a reference, time it.

The reference is the model's own precision on the CPU through the runtime that reads the format natively
(the first rule-ranked CPU candidate at default precision). A candidate whose outputs stray from it beyond
the tolerance is not eligible: that is where OpenVINO bf16 is accepted or refused. Timing interleaves the
candidates in short blocks with a pause between blocks (FINDINGS: ONNX Runtime's threads spin after a run
and bill whoever runs next), and the p50 of all blocks is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .errors import EdgeAccelError
from .executors.base import Executor
from .modelinfo import ModelInfo, TensorSpec
from .selector import Candidate, Measurement, Ranking
from .tensors import dequantize_array, random_array

log = logging.getLogger("edgeaccel.calibration")

DEFAULT_TOLERANCE = 0.05  # max |error| as a fraction of the reference output's range
PAUSE_S = 0.05


@dataclass(frozen=True)
class CalibrationPlan:
    budget_s: float = 7.0  # the whole calibration: loading, accuracy runs and timing (timing gets >= 1 s)
    min_runs: int = 20
    block_s: float = 0.05  # one block of calls per candidate per round
    max_rounds: int = 12
    samples: int = 4  # random inputs when the caller gives none
    seed: int = 0
    tolerance: float = DEFAULT_TOLERANCE


def sample_inputs(specs: Sequence[TensorSpec], count: int, seed: int) -> list[list[np.ndarray]]:
    """Realistic inputs where the model takes one image: the bundled sample photo, flipped, cropped and
    dimmed (random noise makes models with argmax-like decoding, pose or segmentation, jump between
    answers on rounding noise alone); seeded random data otherwise."""
    from .errors import InputError
    from .imageio import image_to_input, layout_of, read_image

    if len(specs) == 1:
        try:
            layout_of(specs[0])
            photo = read_image(_sample_image())
        except (InputError, OSError):
            photo = None
        if photo is not None:
            h, w = photo.shape[:2]
            variants = [photo, photo[:, ::-1], photo[h // 8 : h - h // 8, w // 8 : w - w // 8],
                        (photo.astype(np.float32) * 0.6).astype(np.uint8)]
            return [[image_to_input(np.ascontiguousarray(v), specs[0])[0]] for v in variants[:count]]
    return random_inputs(specs, count, seed)


def _sample_image():
    from ._data import samples_dir

    return samples_dir() / "bird.png"


def random_inputs(specs: Sequence[TensorSpec], count: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[random_array(spec, rng) for spec in specs] for _ in range(count)]


def compare(reference: Sequence[np.ndarray], got: Sequence[np.ndarray], ref_specs: Sequence[TensorSpec],
            got_specs: Sequence[TensorSpec], tolerance: float) -> tuple[bool, dict, str]:
    """Agreement of one run with the reference, output by output, on real (dequantized) values."""
    worst, top1_ok, top1_total, agree_min = 0.0, 0, 0, 1.0
    for ref, out, rs, gs in zip(reference, got, ref_specs, got_specs):
        if ref.shape != out.shape:
            return False, {}, f"output {rs.name!r} has shape {out.shape}, the reference {ref.shape}"
        if ref.dtype.kind in "iub" and rs.quantization is None:  # class ids, masks: compare exactly
            agree = float(np.mean(ref == out)) if ref.size else 1.0
            agree_min = min(agree_min, agree)
            continue
        a, b = _real(ref, rs), _real(out, gs)
        spread = float(np.max(a) - np.min(a)) if a.size else 0.0
        error = float(np.max(np.abs(a - b))) if a.size else 0.0
        # Two runtimes rounding one quantized value differently is one step apart: that much is agreement.
        step = max(rs.quantization.scale) if rs.quantization is not None and ref.dtype.kind in "iu" else 0.0
        if error <= 2 * step:
            error = 0.0
        worst = max(worst, error / spread if spread > 0 else error)
        if a.ndim >= 1 and a.shape[-1] >= 2 and a.size == a.shape[-1] * (a.size // a.shape[-1]):
            for row_a, row_b in zip(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])):
                top = np.sort(row_a)[-2:]
                if top[1] - top[0] > 2 * error:  # only a clear winner must win again
                    top1_total += 1
                    top1_ok += int(np.argmax(row_a) == np.argmax(row_b))
    metrics = {"max_error_fraction": round(worst, 6), "top1_agreement": (top1_ok / top1_total) if top1_total else None,
               "exact_agreement": round(agree_min, 6)}
    if worst > tolerance:
        return False, metrics, f"max error {worst:.1%} of the output range (tolerance {tolerance:.0%})"
    if top1_total and top1_ok < top1_total:
        return False, metrics, f"top-1 changed on {top1_total - top1_ok} of {top1_total} clear-cut rows"
    if agree_min < 1 - tolerance / 5:
        return False, metrics, f"only {agree_min:.1%} of integer outputs agree"
    return True, metrics, f"accurate: max error {worst:.2%} of range"


def _real(values: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if spec.quantization is not None and values.dtype.kind in "iu":
        return dequantize_array(values, spec.quantization).astype(np.float64)
    return values.astype(np.float64)


def calibrate(
    ranking: Ranking,
    open_candidate: Callable[[Candidate], Executor],
    plan: CalibrationPlan = CalibrationPlan(),
    inputs: Sequence[Sequence[np.ndarray]] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Measurement]:
    """Measure every candidate of ``ranking`` (and the reduced-precision ones only calibration can admit)."""
    todo = [*ranking.candidates, *ranking.untested]
    if not todo:
        return {}
    started = clock()
    results: dict[str, Measurement] = {}
    opened: list[tuple[Candidate, Executor, list[list[np.ndarray]]]] = []
    references: dict[str, tuple[Candidate, list[list[np.ndarray]]]] = {}
    try:
        for cand in todo:
            try:
                executor = open_candidate(cand)
            except EdgeAccelError as exc:
                results[cand.key] = Measurement(cand.key, None, eligible=False, reason=f"failed to load: {exc.message}")
                continue
            samples = _inputs_for(cand.artifact, executor, inputs, plan)
            try:
                outputs = [executor.run(x) for x in samples]
            except EdgeAccelError as exc:
                executor.close()
                results[cand.key] = Measurement(cand.key, None, eligible=False, reason=f"failed to run: {exc.message}")
                continue
            signature = _signature(executor.inputs)
            ref = references.get(signature)
            if ref is None and cand.precision is None and cand.kind == "cpu":
                references[signature] = (cand, outputs)
                accuracy = (True, {}, "the reference")
            elif ref is None:
                accuracy = (True, {}, "no CPU reference for these inputs; accuracy not checked")
            else:
                accuracy = _check_all(ref, outputs, executor, plan.tolerance)
            if not accuracy[0]:
                executor.close()
                results[cand.key] = Measurement(cand.key, None, eligible=False, reason=accuracy[2],
                                                accuracy=accuracy[1])
                continue
            results[cand.key] = Measurement(cand.key, None, reason=accuracy[2], accuracy=accuracy[1])
            opened.append((cand, executor, samples))
        remaining = max(plan.budget_s - (clock() - started), 1.0)
        _time_all(opened, results, replace(plan, budget_s=remaining), clock)
    finally:
        for _, executor, _ in opened:
            executor.close()
    return results


def _check_all(ref: tuple[Candidate, list], outputs: list, executor: Executor, tolerance: float):
    ref_cand, ref_outputs = ref
    ref_specs = ref_cand.artifact.outputs
    metrics: dict = {}
    for want, got in zip(ref_outputs, outputs):
        ok, metrics, why = compare(want, got, ref_specs, executor.outputs, tolerance)
        if not ok:
            return False, metrics, f"{why} against {ref_cand.name}"
    return True, metrics, f"{why} against {ref_cand.name}"


def _signature(specs: Sequence[TensorSpec]) -> str:
    return ";".join(f"{s.dtype}{list(s.shape)}" for s in specs)


def _inputs_for(artifact: ModelInfo, executor: Executor, given, plan: CalibrationPlan) -> list[list[np.ndarray]]:
    if given:
        return [list(x) for x in given]
    return sample_inputs(executor.inputs, plan.samples, plan.seed)


def _time_all(opened, results: dict[str, Measurement], plan: CalibrationPlan, clock) -> None:
    times = time_interleaved([(cand.key, executor, samples) for cand, executor, samples in opened], plan, clock)
    for key, t in times.items():
        ms = np.asarray(t) * 1e3
        results[key] = replace(results[key], p50_ms=float(np.median(ms)), p90_ms=float(np.percentile(ms, 90)),
                               runs=len(ms))


def time_interleaved(runners, plan: CalibrationPlan, clock=time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call for each (key, executor, inputs), timed in alternating blocks of about
    ``plan.block_s`` with a pause before each block, until the budget or ``plan.max_rounds`` is spent."""
    times: dict[str, list[float]] = {key: [] for key, _, _ in runners}
    if not runners:
        return times
    per_call: dict[str, float] = {}
    for key, executor, samples in runners:  # a first estimate to size the blocks
        start = clock()
        executor.run(samples[0])
        per_call[key] = max(clock() - start, 1e-6)
    deadline = clock() + plan.budget_s
    for _ in range(plan.max_rounds):
        for key, executor, samples in runners:
            time.sleep(PAUSE_S)
            n = max(3, min(200, int(plan.block_s / per_call[key])))
            for i in range(n):
                x = samples[i % len(samples)]
                start = clock()
                executor.run(x)
                times[key].append(clock() - start)
        if clock() > deadline and all(len(t) >= plan.min_runs for t in times.values()):
            break
    return times
