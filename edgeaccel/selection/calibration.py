"""Calibration: check every feasible candidate's answers against a trusted reference, then time them.

The reference comes first: a built-in runtime (never a plug-in) on the CPU at the model's own precision,
preferring the runtime that reads the format natively (``reference``, which the loader builds even when the
caller pinned another device). Every candidate, whatever its place in the rules' order and whichever artifact
it runs (an Edge TPU twin, a converted file), is then compared with it on the same inputs by the guard
(``agreement.guard.judge``): a candidate whose answers stray beyond its thresholds is not eligible. When the
model's vision task is known (named with ``load(task=)``, declared by the model's metadata, or recognized from
a distinctive output layout: ``guard.judged_on_task``), both sides' outputs are decoded by the task and the
decoded results are judged (boxes, masks, keypoints, classes), not the raw tensors' range. Where no reference
can run, every measurement says so and no reduced precision is admitted.

Inputs: the caller's ``calibration_inputs`` when given, else samples edgeaccel makes (``sample_inputs``: the
bundled photo in several variants for image inputs, valid synthetic data otherwise; with a task, the photo
variants go through the task's own preprocessing, letterbox for YOLO, so that detections are meaningful). A
candidate that fails on edgeaccel's own inputs is reported as such and not condemned (its measurement stays
eligible, untimed): a size or an id edgeaccel invented says nothing about the caller's real inputs. Timing:
``timing.measure``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..agreement import DEFAULT_TOLERANCE, agreement
from ..agreement.guard import Thresholds, judge, judged_on_task
from ..errors import EdgeAccelError
from ..executors.base import Executor
from ..executors.registry import is_builtin
from ..modelinfo import TensorSpec
from .selector import Candidate, Measurement, Ranking
from ..tensors import concrete_shape, random_array
from .timing import PAUSE_S, head_to_head, measure, within_noise

log = logging.getLogger("edgeaccel.calibration")

SYNTHETIC_FAILURE = "failed on synthetic inputs"
NO_TASK = "none"  # TaskRequest name that keeps the guard on raw outputs even for a recognizable vision model
PASS_INPUTS = "pass calibration_inputs= with real inputs to measure it"


@dataclass(frozen=True)
class TaskRequest:
    """The vision task the caller asked for (``load(task=, task_options=TaskOptions(labels=, ...))``): ``name``
    None lets the model's metadata or outputs say (``guard.judged_on_task``), ``NO_TASK`` judges raw outputs only."""

    name: str | None = None
    labels: object = field(default=None, compare=False)
    options: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class CalibrationPlan:
    budget_s: float = 7.0  # the whole calibration: loading, accuracy runs and timing (timing gets >= 1 s)
    min_runs: int = 30
    block_s: float = 0.1  # one block of calls per candidate per round (at least timing.MIN_BLOCK_CALLS)
    max_rounds: int = 24
    samples: int = 8  # inputs made when the caller gives none
    seed: int = 0
    tolerance: float = DEFAULT_TOLERANCE  # see agreement/guard.py; SelectionOptions(accuracy_tolerance=) sets it
    task: TaskRequest = field(default_factory=TaskRequest, compare=False)  # what the guard judges on
    warmup_s: float = 0.1  # untimed calls per candidate before timing
    head_to_head_s: float = 1.5  # re-measuring the two leaders when they are within the noise
    # Sleep before each timed block. Background calibration raises it so that measuring takes a bounded share of
    # one core beside the requests being served: the share is block_s / (block_s + pause_s).
    pause_s: float = PAUSE_S
    # set from another thread to end the calibration early (background calibration at close or interpreter
    # exit): no new candidate is opened and timing stops after the block under way
    stop: threading.Event | None = field(default=None, compare=False)
    # called before each candidate is opened and before each timed block: background calibration waits there
    # while the model serves (edgeaccel/background.py), with a clock that leaves the waits out of the budget
    before_block: Callable[[], None] | None = field(default=None, compare=False)
    clock: Callable[[], float] | None = field(default=None, compare=False)


def sample_inputs(specs: Sequence[TensorSpec], count: int, seed: int) -> list[list[np.ndarray]]:
    """``count`` input sets. Image inputs get the bundled sample photo in variants (mirrored, cropped, dimmed,
    turned, colour-swapped, ...): random noise makes models with argmax-like decoding (pose, segmentation)
    jump between answers on rounding noise alone. Other inputs get valid seeded data (``random_array``).
    Dynamic dimensions get ``tensors.concrete_shape``."""
    rng = np.random.default_rng(seed)
    photos = _photo_variants(count)
    samples = []
    for k in range(count):
        sample = []
        for spec in specs:
            image = _image_input(photos[k % len(photos)], spec) if photos else None
            sample.append(image if image is not None else random_array(spec, rng))
        samples.append(sample)
    return samples


def task_inputs(task, count: int) -> list[list[np.ndarray]] | None:
    """``count`` input sets made by the task's own preprocessing from the bundled photo's variants: what the
    model sees in use (letterboxed for YOLO, normalized as the task feeds it). None without the photo."""
    photos = _photo_variants(count)
    if not photos:
        return None
    return [task.preprocess(photos[k % len(photos)])[0] for k in range(count)]


def _photo_variants(count: int) -> list[np.ndarray]:
    from ..errors import InputError
    from ..imageio import read_image

    try:
        photo = read_image(_sample_image())
    except (InputError, OSError):
        return []
    h, w = photo.shape[:2]
    variants = [photo, photo[:, ::-1], photo[h // 8: h - h // 8, w // 8: w - w // 8],
                (photo.astype(np.float32) * 0.6).astype(np.uint8), np.ascontiguousarray(photo.transpose(1, 0, 2)),
                photo[..., ::-1], np.clip((photo.astype(np.float32) - 128) * 1.5 + 128, 0, 255).astype(np.uint8),
                photo[: h // 2, w // 2:]]
    return [np.ascontiguousarray(v) for v in variants[:max(count, 1)]]


def _image_input(photo: np.ndarray, spec: TensorSpec) -> np.ndarray | None:
    from ..errors import InputError
    from ..imageio import image_to_input, layout_of

    if spec.dtype.kind not in "uif" or (spec.dtype.kind == "i" and spec.dtype.itemsize > 1):
        return None
    fixed = replace(spec, shape=tuple(concrete_shape(spec)), unranked=False)
    try:
        layout_of(fixed)
        return image_to_input(photo, fixed)[0]
    except InputError:
        return None


def _sample_image():
    from .._data import samples_dir

    return samples_dir() / "bird.png"


def compare(reference: Sequence[np.ndarray], got: Sequence[np.ndarray], ref_specs: Sequence[TensorSpec],
            got_specs: Sequence[TensorSpec], tolerance: float) -> tuple[bool, dict, str]:
    """One run against the reference (every output, by name); ``agreement`` compares several samples."""
    result = agreement([reference], [got], ref_specs, got_specs, tolerance)
    return result.ok, result.metrics, result.why


def reference_candidates(ranking: Ranking) -> list[Candidate]:
    """Without a reference from the loader: the built-in CPU candidates at the model's own precision in the
    ranking, those reading the format natively first."""
    from ..executors.registry import get

    found = [c for c in (*ranking.candidates, *ranking.untested)
             if is_builtin(c.runtime) and c.kind == "cpu" and c.precision is None]
    return sorted(found, key=lambda c: 0 if get(c.runtime).is_native(c.artifact.format) else 1)


@dataclass
class _Reference:
    candidate: Candidate | None
    inputs: tuple[TensorSpec, ...] = ()  # the reference's input specs
    samples: list = field(default_factory=list)  # the inputs it ran
    outputs: list = field(default_factory=list)  # per sample, its outputs
    specs: tuple[TensorSpec, ...] = ()  # its output specs
    problem: str = ""  # why there is none
    task: object = None  # the vision Task the guard judges on (bound to the reference's outputs), or None
    task_note: str = ""  # why the guard judges raw outputs for a model that has a task

    def takes(self, specs: Sequence[TensorSpec]) -> bool:
        return self.candidate is not None and _signature(specs) == _signature(self.inputs)


def calibrate(
    ranking: Ranking,
    open_candidate: Callable[[Candidate], Executor],
    plan: CalibrationPlan = CalibrationPlan(),
    inputs: Sequence[Sequence[np.ndarray]] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    reference: Sequence[Candidate] | None = None,
) -> dict[str, Measurement]:
    """Measure every candidate of ``ranking`` (and the reduced-precision ones only calibration can admit).

    ``reference``: the trusted candidates to compute the reference with, best first (the loader's
    ``_reference_candidate``); by default the built-in CPU ones in ``ranking``."""
    todo = [*ranking.candidates, *ranking.untested]
    if not todo:
        return {}
    clock = plan.clock or clock
    started = clock()
    choices = list(reference) if reference is not None else reference_candidates(ranking)
    given = _bind(inputs, (choices[0] if choices else todo[0]).artifact.inputs) if inputs else None
    results: dict[str, Measurement] = {}
    opened: dict[str, tuple[Candidate, Executor, list]] = {}
    try:
        if plan.before_block is not None:  # the reference's runs too wait while the model serves
            plan.before_block()
        ref = _compute_reference(choices, open_candidate, given, plan, opened, {c.key for c in todo})
        for cand in todo:
            if cand.key in results or (plan.stop is not None and plan.stop.is_set()):
                continue
            if plan.before_block is not None:
                plan.before_block()
            results[cand.key] = _check(cand, ref, open_candidate, given, plan, opened)
        remaining = max(plan.budget_s - (clock() - started), 1.0)
        if plan.stop is None or not plan.stop.is_set():
            _time(opened, results, plan, remaining, clock)
    finally:
        for _, executor, _ in opened.values():
            executor.close()
    return results


def _bind(inputs: Sequence, specs: Sequence[TensorSpec]) -> list[list[np.ndarray]]:
    """The caller's samples checked like run()'s inputs (a list in input order or a dict by name each): a
    wrong dtype or shape is the caller's InputError now, not every candidate failing to run."""
    from ..errors import InputError
    from ..tensors import InputBinder

    binder = InputBinder(specs)
    if isinstance(inputs, np.ndarray) or isinstance(inputs, Mapping):
        inputs = [inputs]  # one sample
    bound = []
    for i, sample in enumerate(inputs):
        try:
            bound.append(binder.bind(sample))
        except InputError as exc:
            raise type(exc)(f"calibration_inputs sample {i + 1}: {exc.message}",
                            hint=exc.hint or "pass a list of samples, each a list of arrays in the order of "
                            "model.inputs or a dict by input name") from exc
    return bound


def _compute_reference(choices: list[Candidate], open_candidate, given, plan: CalibrationPlan,
                       opened: dict, wanted: set[str]) -> _Reference:
    problems = []
    for cand in choices:
        try:
            executor = open_candidate(cand)
        except EdgeAccelError as exc:
            problems.append(f"{cand.name} failed to load: {exc.message}")
            continue
        try:
            task, note = _task_for(cand, executor, plan.task)
            samples = given or (task_inputs(task, plan.samples) if task is not None else None) \
                or sample_inputs(executor.inputs, plan.samples, plan.seed)
            outputs = [executor.run(x) for x in samples]
        except BaseException as exc:
            executor.close()  # not yet in ``opened``: nobody else would close it
            if not isinstance(exc, EdgeAccelError):
                raise
            what = SYNTHETIC_FAILURE if given is None else "failed on the calibration inputs"
            problems.append(f"{cand.name} {what}: {exc.message}")
            continue
        if cand.key in wanted:
            opened[cand.key] = (cand, executor, samples)
        else:
            executor.close()  # not a candidate here (another device was asked for): only the reference
        return _Reference(cand, tuple(executor.inputs), samples, outputs, tuple(executor.outputs), task=task,
                          task_note=note)
    if not choices:
        problems.append("no built-in runtime can run this model on the CPU")
    return _Reference(None, problem="; ".join(problems))


def _task_for(cand: Candidate, executor: Executor, request: TaskRequest):
    """(the Task to judge on, or None; a note when the model has a task the guard does not judge on)."""
    if request.name == NO_TASK:
        return None, ""
    from types import SimpleNamespace

    from ..vision.errors import TaskError
    from ..vision.task import make_task

    bound = SimpleNamespace(info=cand.artifact, inputs=executor.inputs, outputs=executor.outputs)
    try:
        task = make_task(bound, request.name, request.labels, **request.options)
    except (TaskError, EdgeAccelError) as exc:  # load() reports a task that does not fit; judge raw outputs
        return None, f"task {request.name} does not fit: {exc.message}"
    except Exception as exc:  # a task option the Task refuses (a bad imgsz, anchors file): same
        return None, f"the task could not be set up ({type(exc).__name__}: {exc})"
    if task is None:
        return None, ""
    if not judged_on_task(task, named=request.name is not None):
        return None, f"recognized {task.name} ({task.kind}) only from output shapes: judged on raw outputs"
    log.info("calibration judges %s on its %s results (%s)", cand.artifact.path.name, task.name, task.reason)
    return task, ""


def _check(cand: Candidate, ref: _Reference, open_candidate, given, plan: CalibrationPlan,
           opened: dict) -> Measurement:
    """Load ``cand``, run it on the reference's inputs and compare; keep it open for timing if eligible."""
    if ref.candidate is not None and cand.key == ref.candidate.key and cand.key in opened:
        return Measurement(cand.key, None, reason=f"the reference ({cand.name} on the CPU)",
                           accuracy={"reference": cand.name})
    try:
        executor = open_candidate(cand)
    except EdgeAccelError as exc:
        return Measurement(cand.key, None, eligible=False, reason=f"failed to load: {exc.message}")
    comparable = ref.candidate is not None and (given is not None or ref.takes(executor.inputs))
    samples = given or (ref.samples if comparable else sample_inputs(executor.inputs, plan.samples, plan.seed))
    try:
        outputs = [executor.run(x) for x in samples]
    except EdgeAccelError as exc:
        executor.close()
        return _failed(cand, "run", exc, synthetic=given is None)
    if comparable:
        result = judge(ref.outputs, outputs, ref.specs, executor.outputs, ref.task, Thresholds(plan.tolerance))
        verdict, why = result.ok, f"{result.why} against {ref.candidate.name}"
        metrics = {**result.metrics, "reference": ref.candidate.name, "tolerance": plan.tolerance}
        if ref.task_note:
            metrics["task_note"] = ref.task_note
    else:
        verdict, metrics = None, {}
        why = f"no reference could run ({ref.problem})" if ref.candidate is None else \
            f"its inputs differ from the reference's ({ref.candidate.name})"
    if verdict is None and cand.precision is not None:
        executor.close()
        return Measurement(cand.key, None, eligible=False,
                           reason=f"{why}: {cand.precision} changes answers and is not admitted unchecked")
    if verdict is False:
        executor.close()
        return Measurement(cand.key, None, eligible=False, reason=why, accuracy=metrics)
    opened[cand.key] = (cand, executor, samples)
    return Measurement(cand.key, None, reason=why if verdict else f"accuracy not checked: {why}", accuracy=metrics)


def _signature(specs: Sequence[TensorSpec]) -> str:
    return ";".join(f"{s.dtype}{list(s.shape)}" for s in specs)


def _failed(cand: Candidate, stage: str, exc: EdgeAccelError, synthetic: bool) -> Measurement:
    """A failure on the caller's inputs condemns the candidate; one on edgeaccel's own inputs while checking
    accuracy does not (a reduced precision is still never admitted unchecked). Failing while being timed, on
    inputs it had just answered, is the candidate's own failure (a device lost, a runtime giving out)."""
    if synthetic and stage == "run":
        return Measurement(cand.key, None, eligible=cand.precision is None,
                           reason=f"{SYNTHETIC_FAILURE} while {_STAGES[stage]} ({exc.message}); {PASS_INPUTS}")
    return Measurement(cand.key, None, eligible=False, reason=f"failed while {_STAGES[stage]}: {exc.message}")


_STAGES = {"run": "checking accuracy", "timing": "being timed"}


def _time(opened: dict, results: dict[str, Measurement], plan: CalibrationPlan, budget_s: float, clock) -> None:
    runners = [(key, executor, samples) for key, (_, executor, samples) in opened.items()]
    timings = measure(runners, budget_s, plan.block_s, plan.max_rounds, plan.min_runs, plan.warmup_s, clock,
                      plan.pause_s, plan.stop, plan.before_block)
    cands = {key: cand for key, (cand, _, _) in opened.items()}
    for key, timing in timings.items():
        if timing.error is not None:
            results[key] = _failed(cands[key], "timing", timing.error, synthetic=False)
    timed = {k: t for k, t in timings.items() if t.error is None and t.calls}
    p50 = {k: float(np.median(t.calls)) * 1e3 for k, t in timed.items()}
    notes = _settle_leaders(opened, cands, timed, p50, results, plan, clock)
    for key, timing in timed.items():
        stats = {**timing.summary_ms(), **notes.get(key, {})}
        m = results[key]
        reason = f"{m.reason}; p10-p90 {stats['p10_ms']:.3f}-{stats['p90_ms']:.3f} ms"
        if "head_to_head" in stats:
            reason += f"; {stats['head_to_head']}"
        results[key] = replace(m, p50_ms=round(p50[key], 4), p90_ms=stats["p90_ms"], runs=stats["runs"],
                               reason=reason, accuracy={**m.accuracy, "timing": stats})


def _settle_leaders(opened, cands, timed, p50, results, plan: CalibrationPlan, clock) -> dict[str, dict]:
    """When the two fastest are within the noise, time them again head to head and let the median ratio of
    adjacent blocks order them: their p50s keep the common scale of the round-robin (their geometric mean)
    and take the head-to-head ratio, so a third candidate is still compared on the same footing."""
    leaders = sorted(timed, key=p50.get)[:2]
    if len(leaders) < 2 or not within_noise(timed[leaders[0]], timed[leaders[1]]):
        return {}
    a, b = leaders
    ta, tb, ratio = head_to_head((a, opened[a][1], opened[a][2]), (b, opened[b][1], opened[b][2]),
                                 plan.head_to_head_s, plan.block_s, clock=clock, pause_s=plan.pause_s,
                                 stop=plan.stop, before_block=plan.before_block)
    for key, timing in ((a, ta), (b, tb)):
        if timing.error is not None:  # failed now: out, the other keeps its round-robin figures
            results[key] = _failed(cands[key], "timing", timing.error, synthetic=False)
            del timed[key]
    if ratio is None:
        return {}
    scale = float(np.sqrt(p50[a] * p50[b]))
    p50[a], p50[b] = scale * np.sqrt(ratio), scale / np.sqrt(ratio)
    pairs = len(ta.blocks)
    return {a: {"head_to_head": f"re-measured head to head with {cands[b].name}: {ratio:.3f}x its time "
                                f"({pairs} pairs of blocks)", "head_to_head_p50_ms": ta.summary_ms()["p50_ms"]},
            b: {"head_to_head": f"re-measured head to head with {cands[a].name}: {1 / ratio:.3f}x its time "
                                f"({pairs} pairs of blocks)", "head_to_head_p50_ms": tb.summary_ms()["p50_ms"]}}


def time_interleaved(runners, plan: CalibrationPlan, clock=time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call for each (key, executor, inputs), timed as calibration times (``timing.measure``)."""
    timings = measure(runners, plan.budget_s, plan.block_s, plan.max_rounds, plan.min_runs, plan.warmup_s, clock,
                      plan.pause_s)
    return {key: t.calls for key, t in timings.items()}
