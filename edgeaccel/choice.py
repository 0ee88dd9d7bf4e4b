"""``edgeaccel.select``: what ``load()`` chooses from. The model's artifacts (a bundle's failed ones left out),
this machine's facts and profile, the executors ranked from rules or from measurements kept in the cache, and the
calibration and accuracy guard that may measure and re-rank them (now, or later in the background)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .modelfiles import bundle
from .errors import ConfigError
from .executors.base import ExecutorOptions
from .executors.registry import runtimes
from .load_keywords import Options, gather
from .machine import machine_facts, resolve_profile
from .opening import isolation_of, open_candidate
from .options import RuntimeOptions, SelectionOptions, TaskOptions
from .profiles import Profile
from .selection.selector import Candidate, MachineFacts, Measurement, Ranking, Rejection, rank

log = logging.getLogger("edgeaccel")

ModelSource = str | os.PathLike | Sequence[str | os.PathLike]


@dataclass
class Selection:
    """Everything the choice was made from: what ``edgeaccel explain`` prints."""

    artifacts: bundle.ArtifactSet
    ranking: Ranking
    options: ExecutorOptions
    facts: MachineFacts
    profile: Profile | None
    profile_reason: str = ""
    measurements: dict[str, Measurement] = field(default_factory=dict)
    measured_now: bool = False
    # measure(plan) -> measurements, keep(measurements) into the cache, rerank(measurements): what calibration,
    # now or in the background, does with this selection
    measure: Callable | None = field(default=None, repr=False)
    keep: Callable | None = field(default=None, repr=False)
    rerank: Callable | None = field(default=None, repr=False)
    cache_file: Path | None = None
    left_out: list[Rejection] = field(default_factory=list)  # artifacts whose recorded check failed
    # () -> edgeaccel.guard.ModelGuard: what every executor other than the first chosen is checked against
    # before it answers a request (a scheduled model's others, a failover target, a reselect)
    guard: Callable | None = field(default=None, repr=False)
    asked: Options | None = field(default=None, repr=False)  # the caller's options, every part validated


def select(model: ModelSource, *, executor: str | None = None, device: str | None = None, task: str | None = None,
           selection: SelectionOptions | None = None, runtime: RuntimeOptions | None = None,
           task_options: TaskOptions | None = None, **moved) -> Selection:
    """What ``load`` chooses from (``edgeaccel explain`` prints it); the same arguments as ``load``, with
    ``selection.calibrate=True`` measuring now and anything else measuring nothing. ``task`` and
    ``task_options``: the vision task calibration's guard judges candidates on (``agreement.guard``; by default
    the one the model's metadata declares or its outputs show unmistakably; "none" judges raw outputs only)."""
    from .cachedir import cache_root, hardware_fingerprint, inputs_digest
    from .selection.cache import CalibrationCache, ValidationMemo, calibration_key

    asked = gather("select", moved, selection, runtime, task_options)
    chosen_by, run_with, task_options = asked.selection, asked.runtime, asked.task
    isolation = isolation_of(run_with)
    task_request = (task, task_options.labels, task_options.decoding())
    calibration_inputs, accuracy_tolerance = chosen_by.calibration_inputs, chosen_by.accuracy_tolerance
    precision, reduced = precision_choice(chosen_by.precision, executor, device)
    root = cache_root(run_with.cache_dir) if run_with.cache else None
    options = ExecutorOptions(replace(run_with, cache_dir=os.fspath(root) if root else None), precision)
    if executor:
        from .executors.names import resolve_executor

        try:  # "ORT", "ov", "tflite", "LiteRT": what --executor takes, load() takes
            executor = resolve_executor(executor, list(runtimes()))
        except ValueError as exc:
            raise ConfigError(str(exc), key="executor",
                              hint=f"use one of {', '.join(runtimes())} or an alias such as ort, ov, tflite") from None
    if device:
        from .executors.device import DeviceRef

        DeviceRef.parse(device)  # a malformed device string is the caller's error, said before anything loads
    found = bundle.resolve(model, ValidationMemo(root) if root else None)
    for path, exc in found.invalid:
        log.warning("artifact %s is unusable: %s", path, exc.message)
    left_out: list[Rejection] = []
    if found.checks:  # a bundle whose convert checked its artifacts: a failed one is never picked silently
        from .selection.failed_artifacts import announce, leave_out_failed

        checked = leave_out_failed(found, executor)
        announce(checked)
        found, left_out = checked.artifacts, checked.rejected
    facts, device_facts = machine_facts()
    profile, profile_reason = resolve_profile(chosen_by.profile, device_facts)
    from .agreement.guard import GUARD_VERSION, Thresholds  # calibration is imported only when something measures

    tolerance = Thresholds(tolerance=accuracy_tolerance).tolerance if accuracy_tolerance is not None \
        else Thresholds().tolerance  # a tolerance that is no share of a range is the caller's ConfigError now
    # measurements made under the guard's earlier rules (raw tensors only for a detector) are not reused; the
    # task is not keyed, like the samples: `tune --task detect` must serve the plain loads after it, and each
    # measurement records what it was judged on (accuracy["judged_on"], ["task"])
    judged = GUARD_VERSION
    key = calibration_key([a.digest for a in found.artifacts], hardware_fingerprint(facts.devices_present),
                          facts.installed, options.resolved_threads(), judged, options=options, executor=executor,
                          device=device, tolerance=tolerance)
    store = CalibrationCache(root) if root else None
    measure_now = chosen_by.calibrate is True
    measurements = {} if measure_now or store is None else (store.get(key) or {})
    ranking = _rank(found.artifacts, facts, options, executor, device, profile, chosen_by.goal, measurements, reduced,
                    left_out)
    selection = Selection(found, ranking, options, facts, profile, profile_reason, measurements,
                          cache_file=store.path(key) if store else None, left_out=left_out, asked=asked)

    def default_plan():
        from .selection.calibration import CalibrationPlan

        return CalibrationPlan(**{k: v for k, v in (("budget_s", chosen_by.calibration_budget_s),
                                                    ("tolerance", accuracy_tolerance)) if v is not None})

    def measure(plan) -> dict[str, Measurement]:
        from .selection.calibration import TaskRequest
        from .selection.calibration import calibrate as run_calibration

        # every plan (background calibration makes its own) judges with this load's tolerance and task
        plan = replace(plan, tolerance=tolerance, task=TaskRequest(*task_request))
        reference = _reference_candidate(found.artifacts, facts, options, chosen_by.goal)
        return run_calibration(ranking, lambda c: open_candidate(c, options, isolation), plan,
                               calibration_inputs, reference=reference)

    def keep(measured: dict[str, Measurement]) -> None:
        if store is not None:
            store.put(key, measured, {"artifacts": [str(a.path) for a in found.artifacts],
                                      "hardware": hardware_fingerprint(facts.devices_present),
                                      "runtimes": dict(facts.installed), "measured_at": time.time(),
                                      "calibration_inputs": inputs_digest(calibration_inputs) or
                                      "edgeaccel samples"})

    def rerank(measured: dict[str, Measurement]) -> Ranking:
        return _rank(found.artifacts, facts, options, executor, device, profile, chosen_by.goal, measured, reduced,
                     left_out)

    selection.measure = lambda budget_plan=None: measure(budget_plan or default_plan())
    selection.keep, selection.rerank = keep, rerank

    def guard():
        from .selection.guard import ModelGuard

        return ModelGuard(_reference_candidate(found.artifacts, facts, options, chosen_by.goal),
                          lambda c: open_candidate(c, options, isolation), tolerance, selection.measurements,
                          calibration_inputs, task_request)

    selection.guard = guard
    if measure_now:
        measurements = measure(default_plan())
        keep(measurements)
        selection.ranking = rerank(measurements)
        selection.measurements = measurements
        selection.measured_now = True
    return selection


def _reference_candidate(artifacts, facts: MachineFacts, options: ExecutorOptions, goal: str) -> list[Candidate]:
    """What calibration's accuracy reference runs on, best first: a built-in runtime (never a plug-in) on the
    CPU at the model's own precision, whatever device or executor the caller pinned, the runtime reading the
    format natively first (the rules' order)."""
    from .executors.registry import is_builtin

    builtins = {name: cls for name, cls in runtimes().items() if is_builtin(name)}
    ranking = rank(artifacts, builtins, facts, None, replace(options, precision=None), device="CPU", goal=goal)
    return [c for c in ranking.candidates if c.kind == "cpu" and c.precision is None]


def profile_limits(profile: Profile | None, ranking: Ranking) -> dict | None:
    """The profile's trip points for every device kind the scheduler may hold: what it assumes where the
    sensors give none (a CPU thermal zone without trips, a board whose sensors are not exposed)."""
    if profile is None or (profile.thermal.passive_c is None and profile.thermal.critical_c is None):
        return None
    from .scheduling.devices import device_of_name
    from .telemetry.sampler import DeviceLimits

    limits = DeviceLimits(profile.thermal.passive_c, profile.thermal.critical_c)
    return {device_of_name(c.device): limits for c in ranking.candidates}


def precision_choice(precision: str | None, executor: str | None, device: str | None) -> tuple[str | None, bool]:
    """(the precision to run at, whether calibration may admit a reduced one). "auto" runs at the model's own
    precision and lets calibration admit bf16/f16 where it measures them accurate; None does the same only
    when nothing is pinned: with ``executor=``/``device=`` the caller chose what runs, and a precision change
    behind their back (background calibration switching OpenVINO to bf16 mid-session) is not theirs."""
    if precision == "auto":
        return None, True
    return precision, precision is None and not (executor or device)


def _rank(artifacts, facts, options, executor, device, profile, goal, measurements, reduced=True,
          left_out: Sequence[Rejection] = ()) -> Ranking:
    ranking = rank(artifacts, runtimes(), facts, None, options, executor, device, profile, goal, measurements,
                   reduced=reduced)
    ranking.rejected[:0] = left_out  # first: the artifact the caller may have expected to run
    return _explain_absences(ranking, facts)


def _explain_absences(ranking: Ranking, facts: MachineFacts) -> Ranking:
    """An artifact that only an absent device or runtime can run (an Edge TPU-compiled model without an Edge
    TPU, a TensorRT engine on a GPU without TensorRT) gets its executor's own explanation of what is missing
    and how to run the model anyway, instead of "no EdgeTPU device found" or "tensorrt is not installed"."""
    ranked = {c.artifact.path for c in ranking.candidates}
    classes = runtimes()
    for i, r in enumerate(ranking.rejected):
        cls = classes.get(r.runtime)
        if r.artifact.path in ranked or cls is None or cls.kind_of(r.device) in (None, "cpu", "auto"):
            continue
        if not cls.reads(r.artifact.format, r.device):
            continue
        # the device is here: explained only where the runtime is what is missing (not another reason)
        if facts.present(cls, r.device) and not (facts.installed.get(cls.runtime) is None
                                                 and r.reason == f"{cls.runtime} is not installed"):
            continue
        explained = cls.explain_absence(r.artifact, r.device)
        if explained:
            ranking.rejected[i] = replace(r, reason=explained[0], fix=explained[1])
    return ranking
