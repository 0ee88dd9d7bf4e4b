"""``edgeaccel.load`` and ``edgeaccel.schedule``: a pipeline. Validate the options (``edgeaccel.options``),
choose (``choice.select``: describe the artifacts, rank the executors that could run them here, from a profile
and rules or from measurements), open (``opening``: the best candidate that loads, every failure on the way
recorded in ``model.fallbacks``; or several under a policy for ``schedule``), then bind the vision task and,
when worth it, start background calibration."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .choice import ModelSource, Selection, profile_limits, select
from .errors import ConfigError
from .executors.base import Executor
from .load_keywords import Options, gather
from .machine import machine_facts, resolve_profile  # noqa: F401  (their earlier home, still imported from here)
from .model import FallbackEvent, Model
from .opening import (all_failed, executor_class, isolation_of, load_candidate,  # noqa: F401  (as above)
                      nothing_can_run, open_candidate, open_ranked)
from .options import RuntimeOptions, ScheduleOptions, SelectionOptions, TaskOptions
from .selection.selector import Candidate, Rejection

if TYPE_CHECKING:
    from .scheduling.model import ScheduledModel

log = logging.getLogger("edgeaccel")

_nothing_can_run, _all_failed = nothing_can_run, all_failed  # the names tests and plug-ins knew


def load(model: ModelSource, *, executor: str | None = None, device: str | None = None, task: str | None = None,
         selection: SelectionOptions | None = None, runtime: RuntimeOptions | None = None,
         task_options: TaskOptions | None = None, **moved) -> Model:
    """Load ``model`` on the best executor this machine has for it.

    model: a model file, a folder of artifacts of one model, an ``edgeaccel-bundle.yaml``, or a list of
        files (e.g. ``m.tflite`` and its Edge TPU twin ``m_edgetpu.tflite``).
    executor, device: pin a runtime ("litert", "onnxruntime", "openvino", or an alias such as "ort") and/or a
        device ("CPU", "GPU", "NPU", "CUDA", "AUTO", ...). Without them, edgeaccel chooses and says why in
        ``model.executor``.
    task: the vision task ``model.predict`` performs: "classify", "detect", "segment" or "pose" (checked against
        the outputs now: TaskError when it does not fit); by default it is recognized from the outputs on first
        use.
    selection: ``SelectionOptions``: precision, goal, profile, calibration (now, in the background, never) and
        its samples and accuracy tolerance, strict. Left at None, a reduced precision is admitted by calibration
        only when neither ``executor`` nor ``device`` is pinned.
    runtime: ``RuntimeOptions``: threads, performance hint, GPU memory cap, cache, isolation in a worker
        process, the runtime's own options.
    task_options: ``TaskOptions``: labels and decoding (conf, iou, max_det, top_k, letterbox, normalize, imgsz).

    Every option is documented on its object (``edgeaccel.options``) and in README's Python API section. The
    keywords ``load`` took before (``precision=``, ``threads=``, ``gpu_mem_limit_mb=``, ``labels=``, ...) still
    work for one release, with a DeprecationWarning that names the new spelling; ``policy=`` returns a
    ScheduledModel as ``edgeaccel.schedule`` does.
    """
    asked = gather("load", moved, selection, runtime, task_options)
    if asked.schedule is not None:  # the older load(policy=...): what schedule() does
        return _schedule(model, asked, executor, device, task)
    chosen = select(model, executor=executor, device=device, task=task, selection=asked.selection,
                    runtime=asked.runtime, task_options=asked.task)
    isolation = isolation_of(asked.runtime)
    guard = chosen.guard()  # one per model: failover, reselect and background switches share its reference
    loaded = open_ranked(chosen.ranking, chosen.options, asked.selection.strict, isolation, guard=guard)
    _record_left_out(loaded, chosen.left_out)
    if chosen.options.cache_dir:
        from .cachedir import trim

        trim(chosen.options.cache_dir)
    if _measures_in_background(asked.selection.calibrate, chosen, loaded, isolation):
        from .selection.background import BackgroundCalibration

        loaded._background = BackgroundCalibration(
            loaded, chosen.measure, chosen.rerank, chosen.keep,
            lambda c: open_candidate(c, chosen.options, isolation), guard=guard).start()
    return _with_task(loaded, task, asked.task, chosen.artifacts)


def schedule(model: ModelSource, policy: str | ScheduleOptions = "latency", *, power_budget_w: float | None = None,
             executor: str | None = None, device: str | None = None, task: str | None = None,
             selection: SelectionOptions | None = None, runtime: RuntimeOptions | None = None,
             task_options: TaskOptions | None = None) -> ScheduledModel:
    """Load ``model`` on every candidate that loads (up to ``max_executors``, three by default) and schedule
    requests over them under ``policy``: a ScheduledModel (the same run API as a Model, plus ``submit``,
    ``stats`` and ``trace``).

    policy: "latency", "efficiency", "thermal", "power" (with ``power_budget_w``, watts) or "fastest", a Policy
        object, or a ``ScheduleOptions`` (also ``telemetry_root``, where the sensors are read, and
        ``max_executors``).
    The other arguments are ``load``'s.
    """
    if not isinstance(policy, ScheduleOptions):
        if not isinstance(policy, str) and not hasattr(policy, "decide"):
            raise ConfigError(f"schedule(policy=...) takes a policy name or a ScheduleOptions, not "
                              f"{type(policy).__name__}", key="policy",
                              hint="write edgeaccel.schedule(model, 'thermal') or "
                                   "edgeaccel.schedule(model, ScheduleOptions('power', power_budget_w=5))")
        policy = ScheduleOptions(policy)  # a name or a Policy object
    if power_budget_w is not None:
        policy = replace(policy, power_budget_w=power_budget_w)
    asked = gather("schedule", {}, selection, runtime, task_options)
    return _schedule(model, replace(asked, schedule=policy), executor, device, task)


def _schedule(model: ModelSource, asked: Options, executor: str | None, device: str | None,
              task: str | None) -> ScheduledModel:
    from .scheduling.open import open_scheduled, scheduled_options
    from .scheduling.policies import make_policy

    plan = asked.schedule
    assert plan is not None
    try:  # a policy that does not exist, or a power policy without its budget, fails before anything loads
        policy = plan.policy if not isinstance(plan.policy, str) else make_policy(plan.policy, plan.power_budget_w)
    except ValueError as exc:
        raise ConfigError(str(exc), key="policy", hint="e.g. edgeaccel.schedule(model, 'thermal') or "
                          "edgeaccel.schedule(model, 'power', power_budget_w=5)") from None
    chosen = select(model, executor=executor, device=device, task=task, selection=asked.selection,
                    runtime=asked.runtime, task_options=asked.task)
    isolation = isolation_of(asked.runtime)
    if not chosen.ranking.candidates:
        raise nothing_can_run(chosen.ranking)
    adapted: set[str] = set()  # devices whose first executor holds the adaptive twins

    def open_beside_others(c: Candidate) -> Executor:
        options = scheduled_options(chosen.options, executor_class(c.runtime))
        if options.performance_hint == "adaptive" and c.device in adapted:
            # the device's work goes to one executor (scheduling/core.py): the later ones are its fallbacks,
            # not worth a second copy of their runtime's objects
            options = options.with_runtime(performance_hint="latency")
        opened = open_candidate(c, options, isolation)
        adapted.add(c.device)
        return opened

    scheduled = open_scheduled(chosen.ranking, open_beside_others, policy, plan.power_budget_w,
                               plan.telemetry_root, max_executors=plan.max_executors,
                               strict=asked.selection.strict, all_failed=all_failed,
                               limits=profile_limits(chosen.profile, chosen.ranking), guard=chosen.guard(),
                               pinned=bool(executor or device or asked.selection.pins_precision))
    _record_left_out(scheduled, chosen.left_out)
    return _with_task(scheduled, task, asked.task, chosen.artifacts)


def _record_left_out(model: Model, left_out: Sequence[Rejection]) -> None:
    """Artifacts left out because their recorded check failed, in ``model.fallbacks`` and the log."""
    events = [FallbackEvent(time.time(), "select", f"[{r.artifact.path.name}]", r.reason, model.executor.name)
              for r in left_out]
    model._fallbacks[:0] = events
    for event in events:
        log.warning("fallback: %s", event)


def _with_task(model: Model, task: str | None, options: TaskOptions, artifacts=None) -> Model:
    """Remember the vision task asked for; a task that was named is bound (and checked) now, so that one which
    does not fit the model fails the load instead of the first predict."""
    model._task_request = (task, options.labels, options.decoding())
    model._bundle = artifacts  # its manifest's pipeline and labels feed model.pipeline
    if task is not None or options.given:
        try:
            model.task  # noqa: B018 (binds it)
        except BaseException:
            model.close()
            raise
    return model


def _measures_in_background(calibrate, chosen: Selection, loaded: Model, isolation) -> bool:
    """Background calibration is worth starting when nothing measured this model here yet and another
    candidate could serve it; not for isolated models (every candidate would be a worker process)."""
    if calibrate is False or chosen.measurements or isolation is not None:  # background is not imported
        return False
    from .selection.background import enabled

    if not enabled(calibrate):
        return False
    others = [c for c in (*chosen.ranking.candidates, *chosen.ranking.untested)
              if c.key != loaded._candidate.key and loaded._takes_same_inputs(c)]
    return bool(others)
