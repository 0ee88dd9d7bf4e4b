"""The guard: no executor answers a model's requests before it answered the same inputs as the reference.

Every route by which a request can reach an executor other than the one ``load`` measured or chose (the
executors of a scheduled model, an adaptive executor's two twins, the next candidate a failing model fails over
to) goes through ``Reference.check``: the executor runs the reference's sample inputs (the caller's calibration
inputs, or ``calibration.sample_inputs``) and its answers are judged against the reference's (a built-in
runtime on the CPU at the model's own precision, the one calibration trusts). One that fails is not routed to;
the caller sees why (``model.executors`` / ``model.fallbacks``) and the log says so. A candidate calibration
already compared with the same reference (``Measurement.accuracy``) is not run again: ``from_measurement``.

The verdict itself is ``edgeaccel.agreement.guard.judge``, the one the calibration uses: a vision model whose
task is known is judged on its decoded results (boxes, masks, keypoints, classes), on inputs made by the task's
own preprocessing; any other model on its raw outputs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AccuracyGuardError, EdgeAccelError
from ..modelinfo import TensorSpec

log = logging.getLogger("edgeaccel")

SAMPLES = 8  # calibration's own number of samples (CalibrationPlan.samples)
SEED = 0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str
    metrics: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{'passed' if self.ok else 'failed'} the accuracy guard: {self.why}"


def judge(reference: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]],
          ref_specs: Sequence[TensorSpec], got_specs: Sequence[TensorSpec], tolerance: float,
          task: Any = None) -> Verdict:
    """Whether ``got`` (per sample, per output) agrees with ``reference`` within ``tolerance``, judged on the
    vision ``task``'s results when there is one: the one call into the agreement module."""
    from ..agreement.guard import Thresholds
    from ..agreement.guard import judge as agreement_judge

    result = agreement_judge(reference, got, ref_specs, got_specs, task=task, thresholds=Thresholds(tolerance))
    return Verdict(result.ok, result.why, result.metrics)


def from_measurement(measurement: Any) -> Verdict | None:
    """What calibration already found for a candidate (a ``selector.Measurement``): a verdict when it compared
    the candidate with its reference, or when the candidate was that reference; None when it did not check."""
    if measurement is None:
        return None
    accuracy = measurement.accuracy or {}
    reference = accuracy.get("reference")
    if not reference:
        return None
    if not measurement.eligible:
        return Verdict(False, f"calibration: {measurement.reason.split('; p10-p90')[0]}", accuracy)
    if "max_error_fraction" not in accuracy and "exact_agreement" not in accuracy \
            and (measurement.reason or "").startswith("the reference"):  # it is the reference
        return Verdict(True, f"the reference itself ({reference}), per calibration", accuracy)
    return Verdict(bool(measurement.eligible), f"calibration: {measurement.reason.split('; p10-p90')[0]}", accuracy)


def twins(executor: Any) -> list[tuple[str, Any]]:
    """The runtime objects behind an executor that may answer a request: an adaptive executor's latency and
    throughput twins (built with different thread and stream settings, which change reduction orders), or
    the executor itself."""
    from ..executors.adaptive import AdaptiveExecutor

    if isinstance(executor, AdaptiveExecutor):
        return [("latency twin", executor.latency), ("throughput twin", executor.throughput)]
    return [("", executor)]


def agreeing_twins(executor: Any, name: str, tolerance: float, given: Sequence | None = None,
                   candidate: Any = None, task_request: tuple | None = None) -> tuple[Any, Verdict | None]:
    """An adaptive executor's two configurations are two routes of one model: (the executor, None) when its
    throughput twin answers the latency twin's sample inputs within ``tolerance`` (judged on the task of
    ``task_request`` for ``candidate``, as ModelGuard does), else (its latency twin alone, the verdict), the
    throughput twin closed. Any other executor comes back as it is."""
    if len(twins(executor)) < 2:
        return executor, None
    try:
        task = _task(candidate, executor, task_request)
        reference = Reference.compute(executor.latency, f"{name} (latency twin)", tolerance, given, task)
        verdict = reference.check(executor.throughput, f"{name} (throughput twin)")
    except EdgeAccelError as exc:
        verdict = Verdict(False, f"its two configurations could not be compared: {exc.message}")
    if verdict.ok:
        return executor, None
    executor.throughput.close()
    log.warning("%s serves from its latency configuration alone: the throughput one %s", name, verdict)
    return executor.latency, verdict


def _task(candidate: Any, executor: Any, task_request: tuple | None) -> Any:
    """The vision Task answers are judged on, as calibration chooses it; None: raw outputs."""
    if candidate is None or task_request is None:
        return None
    from .calibration import TaskRequest, _task_for

    return _task_for(candidate, executor, TaskRequest(*task_request))[0]


class Reference:
    """The reference's answers on the guard's samples: what every other executor of the model is held to."""

    def __init__(self, name: str, samples: list, outputs: list, specs: Sequence[TensorSpec], tolerance: float,
                 task: Any = None):
        self.name = name
        self.samples = samples
        self.outputs = outputs
        self.specs = tuple(specs)
        self.tolerance = tolerance
        self.task = task  # the vision Task answers are judged on, or None (raw outputs)
        self.synthetic = False  # the samples are edgeaccel's own, not the caller's

    @classmethod
    def compute(cls, executor: Any, name: str, tolerance: float, given: Sequence | None = None,
                task: Any = None) -> Reference:
        """Run ``executor`` (the reference) on the caller's samples ``given``, else on images made by the
        ``task``'s preprocessing, else on calibration's own; an error of the runtime propagates (the caller
        decides what an unguardable model does)."""
        from .calibration import _bind, sample_inputs, task_inputs

        run = twins(executor)[0][1]  # an adaptive reference answers through its latency twin when alone
        samples = _bind(given, executor.inputs) if given else \
            (task_inputs(task, SAMPLES) if task is not None else None) or sample_inputs(executor.inputs, SAMPLES, SEED)
        outputs = [list(run.run(x)) for x in samples]
        reference = cls(name, samples, outputs, executor.outputs, tolerance, task)
        reference.synthetic = not given
        return reference

    def check(self, executor: Any, name: str) -> Verdict:
        """Run ``executor`` (each twin of an adaptive one) on the samples and judge it against the reference."""
        passed: list[Verdict] = []
        for part, runner in twins(executor):
            label = f"{name} ({part})" if part else name
            try:
                got = [list(runner.run(x)) for x in self.samples]
            except EdgeAccelError as exc:
                if self.synthetic:  # as in calibration: a size or an id edgeaccel invented condemns nothing
                    log.warning("%s was not checked: it failed on edgeaccel's own sample inputs (%s); pass "
                                "calibration_inputs= with real inputs to check it", label, exc.message)
                    return Verdict(True, f"not checked: {label} failed on edgeaccel's own sample inputs "
                                         f"({exc.message}); pass calibration_inputs= to check it", {"checked": False})
                return Verdict(False, f"{label} failed on the guard's inputs: {exc.message}")
            except Exception as exc:  # an executor that breaks the contract (a plug-in): refused, not a crash
                return Verdict(False, f"{label} raised {type(exc).__name__} on the guard's inputs: {exc}")
            verdict = judge(self.outputs, got, self.specs, executor.outputs, self.tolerance, self.task)
            if not verdict.ok:
                return Verdict(False, f"{verdict.why} against {self.name}" + (f" ({part})" if part else ""),
                               {**verdict.metrics, "reference": self.name, "tolerance": self.tolerance})
            passed.append(verdict)
        worst = max(passed, key=lambda v: v.metrics.get("max_error_fraction") or 0.0)  # the twin further off
        return Verdict(True, f"{worst.why} against {self.name}",
                       {**worst.metrics, "reference": self.name, "tolerance": self.tolerance})


class ModelGuard:
    """The guard of one loaded model: its reference (computed once, when first needed) and the calibration
    measurements that already count.

    references: the candidates the reference may run on, best first (``choice._reference_candidate``);
    open_reference(candidate) -> Executor opens one; measurements: key -> Measurement from calibration or the
    cache; given: the caller's calibration inputs; task_request: the load's (task, labels, task_options), the
    task answers are judged on as calibration judges them (``calibration.TaskRequest``, made only when the
    reference runs: a plain load does not import calibration)."""

    def __init__(self, references: Sequence[Any], open_reference: Any, tolerance: float,
                 measurements: dict | None = None, given: Sequence | None = None, task_request: Any = None) -> None:
        self.task_request = task_request
        self._references = list(references)
        self._open = open_reference
        self.tolerance = tolerance
        self._measurements = dict(measurements or {})
        self.given = given
        self._reference: Reference | None = None
        self.problem = ""  # why no reference could run, once tried
        self._synthetic_failure = False  # a reference failed on edgeaccel's own inputs, not the caller's

    def know(self, measurements: dict) -> None:
        """Measurements made since (background calibration): they count as checks from now on."""
        self._measurements.update(measurements)

    @property
    def samples(self) -> list | None:
        """The inputs the reference ran (None before it ran): what a scheduler re-measures executors on."""
        return self._reference.samples if self._reference is not None else None

    def is_reference(self, candidate: Any) -> bool:
        return bool(self._references) and candidate.key == self._references[0].key

    def reference(self, opened: dict | None = None) -> Reference | None:
        """The reference's answers: from an executor already ``opened`` (key -> Executor) where one of them is a
        reference candidate, else from one opened for this and closed again. None (``problem`` says why)."""
        if self._reference is not None or self.problem:
            return self._reference
        problems = []
        for cand in self._references:
            mine = (opened or {}).get(cand.key)
            try:
                executor = mine if mine is not None else self._open(cand)
            except EdgeAccelError as exc:
                problems.append(f"{cand.name} failed to load: {exc.message}")
                continue
            try:
                task = _task(cand, executor, self.task_request)
                self._reference = Reference.compute(executor, cand.name, self.tolerance, self.given, task)
                return self._reference
            except EdgeAccelError as exc:
                problems.append(f"{cand.name} failed on the guard's inputs: {exc.message}")
                self._synthetic_failure = self._synthetic_failure or not self.given
            finally:
                if mine is None:
                    executor.close()
        self.problem = "; ".join(problems) or "no built-in runtime can run this model on the CPU"
        return None

    def verdict(self, candidate: Any, executor: Any, opened: dict | None = None) -> Verdict:
        """Whether ``executor`` (loaded for ``candidate``) may answer this model's requests."""
        adaptive = len(twins(executor)) > 1
        if not adaptive:  # calibration compared this very configuration already: not measured twice
            if self.is_reference(candidate):
                return Verdict(True, f"the reference ({candidate.name} on the CPU at the model's own precision)")
            known = from_measurement(self._measurements.get(candidate.key))
            if known is not None:
                return known
        reference = self.reference(opened)
        if reference is None:
            if self._synthetic_failure and getattr(candidate, "precision", None) is None:
                # as calibration: inputs edgeaccel invented say nothing about the caller's; the model's own
                # precision is served unchecked (and says so), a reduced precision is never admitted unchecked
                return Verdict(True, f"not checked: the reference failed on edgeaccel's own sample inputs "
                                     f"({self.problem}); pass calibration_inputs= to check it", {"checked": False})
            return Verdict(False, f"could not be checked: no reference could run ({self.problem})")
        verdict = reference.check(executor, candidate.name)
        if verdict.metrics.get("checked") is False and getattr(candidate, "precision", None) is not None:
            return Verdict(False, f"{verdict.why}: {candidate.precision} changes answers and is never admitted "
                                  f"unchecked", verdict.metrics)
        return verdict

    def opener(self, open_one: Any) -> Any:
        """``open_one(candidate) -> Executor`` made to refuse (AccuracyGuardError, after closing it) an executor
        that fails the guard: what a model fails over to or reselects with."""
        def open_guarded(candidate: Any) -> Any:
            executor = open_one(candidate)
            try:
                verdict = self.verdict(candidate, executor)
            except BaseException:
                executor.close()
                raise
            if not verdict.ok:
                executor.close()
                raise AccuracyGuardError(f"{candidate.name} {verdict}", runtime=candidate.runtime,
                                         hint="it is not routed to; pass real calibration_inputs= or raise "
                                              "accuracy_tolerance= if the difference is acceptable")
            log.info("%s %s", candidate.name, verdict)
            return executor

        return open_guarded
