"""``edgeaccel.load``: describe the model's artifacts, rank the executors that could run it here (from a
profile and rules, or from measurements), open the best one that loads, and record every candidate that
failed on the way (``model.fallbacks``)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .modelfiles import bundle
from .errors import (ConfigError, DeviceUnavailableError, EdgeAccelError, ModelError, NoExecutorError,
                     UnsupportedModelError)
from .executors import registry
from .executors.base import Executor, ExecutorOptions
from .executors.registry import runtimes
from .isolation.limits import IsolationLimits
from .model import FallbackEvent, Model
from .modelinfo import Format
from .profiles import DeviceFacts, Profile, get_profile, load_profiles, match_profile
from .profiles.facts import facts_from_probe
from .selection.selector import Candidate, MachineFacts, Measurement, Ranking, Rejection, rank

if TYPE_CHECKING:
    from .scheduling.model import ScheduledModel

log = logging.getLogger("edgeaccel")

ModelSource = str | os.PathLike | Sequence[str | os.PathLike]


def load(
    model: ModelSource,
    *,
    executor: str | None = None,
    device: str | None = None,
    precision: str | None = None,
    threads: int | None = None,
    goal: str = "latency",
    profile: Profile | str | None = None,
    calibrate: bool | str | None = None,
    calibration_inputs: Sequence[Sequence] | None = None,
    accuracy_tolerance: float | None = None,
    performance_hint: str = "latency",
    cache_dir: str | os.PathLike | None = None,
    cache: bool = True,
    runtime_options: dict | None = None,
    strict: bool = False,
    isolate: bool | IsolationLimits = False,
    policy: str | None = None,
    power_budget_w: float | None = None,
    telemetry_root: str | os.PathLike = "/",
    task: str | None = None,
    labels: str | os.PathLike | Sequence[str] | dict | None = None,
    task_options: dict | None = None,
    gpu_mem_limit_mb: float | None = None,
) -> Model | ScheduledModel:
    """Load ``model`` on the best executor this machine has for it.

    model: a model file, a folder of artifacts of one model, an ``edgeaccel-bundle.yaml``, or a list of
        files (e.g. ``m.tflite`` and its Edge TPU twin ``m_edgetpu.tflite``).
    executor, device: pin a runtime ("litert", "onnxruntime", "openvino") and/or a device ("CPU", "GPU",
        "NPU", "CUDA", "AUTO", ...). Without them, edgeaccel chooses and says why in ``model.executor``.
    precision: None runs the model at its own precision (f32 math for float layers); "bf16" or "f16" are
        opt-ins because they change answers. "auto": calibration (now, in the background, or ``tune``'s cache)
        may admit a reduced precision after checking accuracy. Left at None, that happens only when neither
        ``executor`` nor ``device`` is pinned: a pinned executor keeps its device's own precision for the
        whole session unless ``precision="auto"`` says otherwise.
    goal: "latency" or "efficiency" (energy per inference).
    profile: a device profile (a shipped name such as "rpi5-coral-usb", a .yaml path or a Profile); by default
        the one matching this machine (`edgeaccel profiles list`).
    calibrate: None (the default) or "background": serve at once with the rules' choice, then measure the other
        feasible candidates in a background thread (accuracy against the CPU reference, latency) and switch
        when one is conclusively better (``model.calibration`` says what it did; $EDGEACCEL_CALIBRATE=off turns
        the default off). True: measure every feasible candidate now, before returning. False: never measure.
        Measurements are kept in the cache, and later loads choose from them without measuring again.
    calibration_inputs: real samples (each a list in input order, or a dict by name) to check accuracy and time
        on; by default variants of the bundled photo for image models and valid synthetic data otherwise.
        Measurements made with them are found again only with the same samples.
    accuracy_tolerance: the worst error calibration allows on any output and sample, as a fraction of that
        output's range over the samples (default 0.05); quantized outputs within 2 steps always agree, and
        class-score outputs must also keep their top-1. When the vision task is known (``task``, the model's
        metadata, or an unmistakable YOLO/SSD/MoveNet layout) calibration judges the decoded results instead
        (box precision/recall, mIoU, keypoint distance, top-1; docs/agreement.md), where this tolerance
        bounds the detections' mean score error.
    performance_hint: "latency" (one request as fast as possible) or "throughput" (several at once, for
        submit() and stream()), or "adaptive" (both held on a CPU: a lone request on every core, concurrent
        ones a core each; executors/adaptive.py; what ``edgeaccel serve`` loads). The two configurations are
        compared on the sample inputs at load; a throughput one that disagrees is closed, never answering.
    cache_dir, cache: edgeaccel keeps compiled models (OpenVINO's cache, ONNX Runtime's optimized model),
        validation results and calibration measurements in ``cache_dir`` (default $EDGEACCEL_CACHE_DIR or
        ~/.cache/edgeaccel, bounded by $EDGEACCEL_CACHE_MAX_MB, 1024 by default); ``cache=False`` keeps nothing.
    strict: a candidate that fails to load or run raises instead of falling back to the next one.
    isolate: load and run the model in a worker process (True, or IsolationLimits for memory and time limits):
        a runtime crash or hang becomes WorkerCrashedError / InferenceTimeoutError and the caller lives on.
        For models from untrusted sources; it costs a process start per load and a copy per run (README).
    policy: schedule the model over every candidate that loads (up to three) instead of one: "latency",
        "efficiency", "thermal", or "power" with ``power_budget_w``; returns a ScheduledModel (the same run API,
        plus ``submit``, ``stats`` and ``trace``). ``telemetry_root`` is where its sensors are read (tests).
    task: the vision task ``model.predict`` performs: "classify", "detect", "segment" or "pose" (checked against
        the outputs now: TaskError when it does not fit); by default it is recognized from the outputs on first
        use. labels: a label file (.txt, .pbtxt), a list or a dict of names; by default the model's metadata.
        task_options: conf, iou, max_det, top_k, letterbox, normalize, imgsz (``edgeaccel.vision.Task``);
        imgsz, letterbox and normalize also lay over ``model.pipeline`` (edgeaccel.modelfiles.pipeline), which feeds
        images to every API (``image_input``, ``watch``, ``predict``).
    gpu_mem_limit_mb: the GPU memory (MB of 2**20 bytes) the runtime may take: ONNX Runtime's CUDA arena limit
        (``gpu_mem_limit``). A GPU whose runtime cannot be capped (OpenVINO's GPU plugin) is refused rather than
        run uncapped; on a CPU or NPU the limit does not apply, which is logged. A model that does not fit
        raises GpuMemoryLimitError (or falls back to the next candidate, without ``strict``).
    """
    isolation = (IsolationLimits() if isolate is True else isolate) or None
    chosen = select(model, executor=executor, device=device, precision=precision, threads=threads, goal=goal,
                    profile=profile, calibrate=calibrate, calibration_inputs=calibration_inputs,
                    performance_hint=performance_hint, cache_dir=cache_dir, cache=cache,
                    runtime_options=runtime_options, isolation=isolation, accuracy_tolerance=accuracy_tolerance,
                    gpu_mem_limit_mb=gpu_mem_limit_mb, task=task, labels=labels, task_options=task_options)
    if policy is not None:
        from .scheduling.open import open_scheduled, scheduled_options

        if not chosen.ranking.candidates:
            raise _nothing_can_run(chosen.ranking)
        adapted: set[str] = set()  # devices whose first executor holds the adaptive twins

        def open_beside_others(c: Candidate) -> Executor:
            options = scheduled_options(chosen.options, executor_class(c.runtime))
            if options.performance_hint == "adaptive" and c.device in adapted:
                # the device's work goes to one executor (scheduling/core.py): the later ones are its fallbacks,
                # not worth a second copy of their runtime's objects
                options = replace(options, performance_hint="latency")
            executor = open_candidate(c, options, isolation)
            adapted.add(c.device)
            return executor

        scheduled = open_scheduled(chosen.ranking, open_beside_others, policy, power_budget_w, telemetry_root,
                                   strict=strict, all_failed=_all_failed,
                                   limits=profile_limits(chosen.profile, chosen.ranking), guard=chosen.guard(),
                                   pinned=bool(executor or device or precision not in (None, "auto")))
        _record_left_out(scheduled, chosen.left_out)
        return _with_task(scheduled, task, labels, task_options, chosen.artifacts)
    guard = chosen.guard()  # one per model: failover, reselect and background switches share its reference
    loaded = open_ranked(chosen.ranking, chosen.options, strict, isolation, guard=guard)
    _record_left_out(loaded, chosen.left_out)
    if chosen.options.cache_dir:
        from .cachedir import trim

        trim(chosen.options.cache_dir)
    if _measures_in_background(calibrate, chosen, loaded, isolation):
        from .selection.background import BackgroundCalibration

        loaded._background = BackgroundCalibration(
            loaded, chosen.measure, chosen.rerank, chosen.keep,
            lambda c: open_candidate(c, chosen.options, isolation), guard=guard).start()
    return _with_task(loaded, task, labels, task_options, chosen.artifacts)


def _record_left_out(model: Model, left_out: Sequence[Rejection]) -> None:
    """Artifacts left out because their recorded check failed, in ``model.fallbacks`` and the log."""
    events = [FallbackEvent(time.time(), "select", f"[{r.artifact.path.name}]", r.reason, model.executor.name)
              for r in left_out]
    model._fallbacks[:0] = events
    for event in events:
        log.warning("fallback: %s", event)


def _with_task(model: Model, task: str | None, labels, options: dict | None, artifacts=None) -> Model:
    """Remember the vision task asked for; a task that was named is bound (and checked) now, so that one which
    does not fit the model fails the load instead of the first predict."""
    model._task_request = (task, labels, dict(options or {}))
    model._bundle = artifacts  # its manifest's pipeline and labels feed model.pipeline
    if task is not None or labels is not None or options:
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
    # () -> edgeaccel.selection.guard.ModelGuard: what every executor other than the first chosen is checked against
    # before it answers a request (a scheduled model's others, a failover target, a reselect)
    guard: Callable | None = field(default=None, repr=False)


def select(model: ModelSource, *, executor: str | None = None, device: str | None = None,
           precision: str | None = None, threads: int | None = None, goal: str = "latency",
           profile: Profile | str | None = None, calibrate: bool | str | None = False, calibration_inputs=None,
           performance_hint: str = "latency", cache_dir=None, cache: bool = True,
           runtime_options: dict | None = None, calibration_budget_s: float | None = None,
           isolation: IsolationLimits | None = None, accuracy_tolerance: float | None = None,
           gpu_mem_limit_mb: float | None = None, task: str | None = None, labels=None,
           task_options: dict | None = None) -> Selection:
    """What ``load`` chooses from. ``task``, ``labels``, ``task_options``: the vision task calibration's
    guard judges candidates on (``agreement.guard``; by default the one the model's metadata declares or its
    outputs show unmistakably; "none" judges raw outputs only)."""
    from .cachedir import cache_root, hardware_fingerprint, inputs_digest
    from .selection.cache import CalibrationCache, ValidationMemo, calibration_key
    from .executors.gpu_memory import check_limit

    precision, reduced = precision_choice(precision, executor, device)
    if performance_hint not in ("latency", "throughput", "adaptive"):
        raise ValueError(f"performance_hint must be 'latency', 'throughput' or 'adaptive', not {performance_hint!r}")
    root = cache_root(cache_dir) if cache else None
    options = ExecutorOptions(
        threads=threads,
        precision=precision,
        performance_hint=performance_hint,
        cache_dir=os.fspath(root) if root else None,
        runtime_options=dict(runtime_options or {}),
        gpu_mem_limit_mb=check_limit(gpu_mem_limit_mb),
    )
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
    profile, profile_reason = resolve_profile(profile, device_facts)
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
    measure_now = calibrate is True
    measurements = {} if measure_now or store is None else (store.get(key) or {})
    ranking = _rank(found.artifacts, facts, options, executor, device, profile, goal, measurements, reduced,
                    left_out)
    selection = Selection(found, ranking, options, facts, profile, profile_reason, measurements,
                          cache_file=store.path(key) if store else None, left_out=left_out)

    def default_plan():
        from .selection.calibration import CalibrationPlan

        return CalibrationPlan(**{k: v for k, v in (("budget_s", calibration_budget_s),
                                                    ("tolerance", accuracy_tolerance)) if v is not None})

    def measure(plan) -> dict[str, Measurement]:
        from .selection.calibration import TaskRequest
        from .selection.calibration import calibrate as run_calibration

        # every plan (background calibration makes its own) judges with this load's tolerance and task
        plan = replace(plan, tolerance=tolerance, task=TaskRequest(task, labels, dict(task_options or {})))
        reference = _reference_candidate(found.artifacts, facts, options, goal)
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
        return _rank(found.artifacts, facts, options, executor, device, profile, goal, measured, reduced, left_out)

    selection.measure = lambda budget_plan=None: measure(budget_plan or default_plan())
    selection.keep, selection.rerank = keep, rerank

    def guard():
        from .selection.guard import ModelGuard

        return ModelGuard(_reference_candidate(found.artifacts, facts, options, goal),
                          lambda c: open_candidate(c, options, isolation), tolerance, selection.measurements,
                          calibration_inputs, (task, labels, dict(task_options or {})))

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
    """An artifact that only an absent device can run (an Edge TPU-compiled model without an Edge TPU) gets
    its executor's own explanation of what is missing, instead of "no EdgeTPU device found"."""
    ranked = {c.artifact.path for c in ranking.candidates}
    classes = runtimes()
    for i, r in enumerate(ranking.rejected):
        cls = classes.get(r.runtime)
        if r.artifact.path in ranked or cls is None or cls.kind_of(r.device) in (None, "cpu", "auto"):
            continue
        if not cls.reads(r.artifact.format, r.device) or facts.present(cls, r.device):
            continue
        explained = cls.explain_absence(r.artifact, r.device)
        if explained:
            ranking.rejected[i] = replace(r, reason=explained[0], fix=explained[1])
    return ranking


def passed_over(ranking: Ranking, chosen: Candidate) -> list[Rejection]:
    """Accelerator candidates of another artifact that could not run here (an Edge TPU-compiled twin without
    an Edge TPU): the reason the chosen artifact runs instead, which the caller must be able to see.
    An artifact that has a candidate here (an ONNX file onnxruntime:CPU runs) was not passed over for want of a
    device: its GPU/NPU rows are devices this machine never had, not news on every load."""
    classes = runtimes()
    runnable = {c.artifact.path for c in ranking.candidates}
    found = []
    for r in ranking.rejected:
        cls = classes.get(r.runtime)
        if (r.artifact.path == chosen.artifact.path or r.artifact.path in runnable or cls is None
                or cls.kind_of(r.device) in (None, "cpu", "auto")
                or not cls.reads(r.artifact.format, r.device) or r.reason.startswith("not the ")):
            continue
        found.append(r)
    return found


def machine_facts() -> tuple[MachineFacts, DeviceFacts]:
    """Installed runtimes (from package metadata, no import), the devices present and the CPU's flags;
    and the same facts in the form profile matching takes. A plug-in's devices are present when its
    ``availability(device)`` says so (the probe does not know its hardware)."""
    device = facts_from_probe(_probe_here())
    classes = runtimes()
    installed = {name: registry.installed_version(name) for name in classes}
    plugin_devices, absent = _plugin_presence(classes)
    facts = MachineFacts(installed=installed, devices_present=device.devices, cpu_flags=device.cpu_flags,
                         plugin_devices=plugin_devices, absent_reasons=absent)
    return facts, device


def _plugin_presence(classes: dict[str, type[Executor]]) -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    present: dict[str, frozenset[str]] = {}
    absent: dict[str, str] = {}
    for name, cls in classes.items():
        if cls.presence == "probe":
            continue
        found = set()
        for dev, kind in cls.device_kinds.items():
            if kind == "cpu":
                continue
            try:
                available = cls.availability(dev)
            except Exception as exc:  # a plug-in's bug: its device is absent, with the reason
                log.warning("executor plug-in %s: availability(%r) raised %s: %s", name, dev, type(exc).__name__, exc)
                absent[f"{name}:{dev}"] = f"{name}.availability({dev!r}) raised {type(exc).__name__}: {exc}"
                continue
            if available:
                found.add(dev)
            else:
                absent[f"{name}:{dev}"] = f"{dev} is not available: {available.reason}"
        present[name] = frozenset(found)
    return present, absent


_PROBE_TTL_S = 30.0
_probe_cache: list = []  # [(time, report)]


def _probe_here():
    """The hardware survey without importing runtimes or reading sensors (a few ms of file reads), reused for
    30 s so that an app loading several models surveys once, yet a Coral plugged in later is seen."""
    from .hardware import survey_device as probe

    now = time.monotonic()
    if _probe_cache and now - _probe_cache[0][0] < _PROBE_TTL_S:
        return _probe_cache[0][1]
    report = probe(runtimes=False, telemetry=False)
    _probe_cache[:] = [(now, report)]
    return report


def resolve_profile(profile: Profile | str | None, facts: DeviceFacts) -> tuple[Profile | None, str]:
    """The caller's profile (an object, a shipped name or a .yaml path), else the one matching this machine."""
    if isinstance(profile, Profile):
        return profile, "given by the caller"
    if isinstance(profile, str):
        return get_profile(profile), "named by the caller"
    return match_profile(facts, load_profiles())


def executor_class(name: str) -> type[Executor]:
    return registry.get(name)


def open_candidate(candidate: Candidate, options: ExecutorOptions,
                   isolation: IsolationLimits | None = None) -> Executor:
    cls = executor_class(candidate.runtime)
    if candidate.kind != "cpu":
        available = cls.availability(candidate.device)
        if not available:
            raise DeviceUnavailableError(f"{candidate.name}: {available.reason}", hint=available.fix)
    if candidate.precision != options.precision:
        options = replace(options, precision=candidate.precision)
    if options.gpu_mem_limit_mb is not None:
        from .executors.gpu_memory import log_note, note

        log_note(note(cls, candidate.device, options))  # a limit on a CPU or NPU: said, not ignored
    if isolation is not None:  # the same executor, in a worker process
        from .isolation.executor import IsolatedExecutor

        return IsolatedExecutor(candidate.runtime, candidate.artifact, candidate.device, options, isolation)
    if options.performance_hint == "adaptive" and candidate.kind == "cpu":
        from .executors.adaptive import open_adaptive

        return open_adaptive(lambda opts: cls(candidate.artifact, candidate.device, opts), options)
    return cls(candidate.artifact, candidate.device, options)


def refuse_partial_placement(executor: Executor, candidate: Candidate) -> None:
    """strict=True: an accelerator that runs only part of the model (the runtime put the rest on the CPU) is
    refused with its share, instead of being reported as the accelerator."""
    share = executor.info.details.get("accelerated_share")
    if candidate.kind in ("cpu", "auto") or share is None or share >= 1.0:
        return
    executor.close()
    raise DeviceUnavailableError(
        f"{candidate.name} runs only {share:.0%} of the model on {candidate.device}; the runtime placed the rest "
        "on the CPU, and strict=True refuses partial placement",
        hint="load without strict=True to accept it (model.executor.details shows the placement), or convert the "
        "model so that the accelerator takes all of it")


def load_candidate(candidate: Candidate, options: ExecutorOptions) -> Model:
    """A Model on exactly this candidate, no fallback: for side-by-side measurements."""
    return Model(open_candidate(candidate, options), candidate, Ranking([candidate]), [], strict=True)


def open_ranked(ranking: Ranking, options: ExecutorOptions, strict: bool = False,
                isolation: IsolationLimits | None = None, guard=None) -> Model:
    """The best candidate that loads, as a Model that fails over down the ranking at run time. ``guard`` (an
    ``edgeaccel.selection.guard.ModelGuard``): a failover target or a reselected candidate serves only after agreeing
    with the reference; one that does not is recorded and passed over like one that failed to load."""

    def open_one(c: Candidate) -> Executor:
        return open_candidate(c, options, isolation)

    open_next = guard.opener(open_one) if guard is not None else open_one

    if not ranking.candidates:
        raise _nothing_can_run(ranking)
    fallbacks: list[FallbackEvent] = []
    failed: list[Candidate] = []
    errors: list[tuple[Candidate, EdgeAccelError]] = []
    for candidate in ranking.candidates:
        try:
            executor = open_candidate(candidate, options, isolation)
            if strict:
                refuse_partial_placement(executor, candidate)
        except EdgeAccelError as exc:
            if strict:
                raise
            errors.append((candidate, exc))
            failed.append(candidate)
            continue
        if guard is not None and options.performance_hint == "adaptive":
            from .selection.guard import agreeing_twins

            executor, refused = agreeing_twins(executor, candidate.name, guard.tolerance, guard.given, candidate,
                                               guard.task_request)
            if refused is not None:
                fallbacks.append(FallbackEvent(time.time(), "guard", f"{candidate.name} (throughput configuration)",
                                               str(refused), candidate.name))
        for bad in passed_over(ranking, candidate):
            event = FallbackEvent(time.time(), "select", f"{bad.name} [{bad.artifact.path.name}]", bad.reason,
                                  candidate.name)
            fallbacks.append(event)
            log.warning("fallback: %s", event)
            candidate = replace(candidate, reason=f"{candidate.reason}; chosen because {bad.name} "
                                f"[{bad.artifact.path.name}] was passed over: {bad.reason}")
        for bad, exc in errors:
            event = FallbackEvent(time.time(), "load", bad.name, str(exc), candidate.name)
            fallbacks.append(event)
            log.warning("fallback: %s", event)
        return Model(executor, candidate, ranking, fallbacks, open_next=open_next, strict=strict, failed=failed)
    raise _all_failed(errors)


def _nothing_can_run(ranking: Ranking) -> EdgeAccelError:
    artifacts = {r.artifact.path: r.artifact for r in ranking.rejected}
    if artifacts and all(a.format is Format.EDGETPU_TFLITE for a in artifacts.values()):
        name = next(iter(artifacts)).name
        explained = next((r for r in ranking.rejected if r.reason.startswith("the Edge TPU cannot run")), None)
        if explained is not None:  # the executor's own account: each missing piece, and the CPU twin
            return UnsupportedModelError(explained.reason, hint=explained.fix)
        return UnsupportedModelError(
            f"{name} is compiled for the Edge TPU (its body is one edgetpu-custom-op) and no Edge TPU is usable here",
            hint="connect an Edge TPU with libedgetpu installed, or load the CPU twin (the same model before "
            "edgetpu_compiler), or hand both as a set so the CPU twin takes over",
        )
    if artifacts and all(a.format is Format.TENSORRT_ENGINE for a in artifacts.values()):
        # only TensorRT reads an engine: its own account (what is missing, the version, the ONNX twin) is the error
        own = next((r for r in ranking.rejected if r.runtime == "tensorrt" and not r.reason.startswith("not the ")),
                   None)
        if own is not None:
            return UnsupportedModelError(own.reason, hint=own.fix or
                                         "load the ONNX model the engine was built from, or build the engine here")
    return NoExecutorError("no executor can run this model here:", rejections=ranking.rejection_reasons(),
                           hint="install the runtime named in a fix above, or pass another model format")


def _all_failed(errors: list[tuple[Candidate, EdgeAccelError]]) -> EdgeAccelError:
    if len(errors) == 1:
        return errors[0][1]
    reasons = {str(c): str(e).splitlines()[0] for c, e in errors}
    if all(isinstance(e, ModelError) for _, e in errors):
        return UnsupportedModelError(
            "no executor could load this model:" + "".join(f"\n  - {k}: {v}" for k, v in reasons.items()),
            hint=errors[0][1].hint,
        )
    return NoExecutorError("every executor that could run this model failed to load it:", rejections=reasons,
                           hint=errors[0][1].hint)
