"""Opening what was chosen: one candidate as an executor (its device checked, in a worker process when
isolated, as adaptive twins on a CPU), and the best of a ranking that loads as a Model that fails over down
the ranking; the errors that say why nothing could."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from .errors import DeviceUnavailableError, EdgeAccelError, ModelError, NoExecutorError, UnsupportedModelError
from .executors import registry
from .executors.base import Executor, ExecutorOptions
from .executors.registry import runtimes
from .isolation.limits import IsolationLimits
from .model import FallbackEvent, Model
from .ranked_model import RankedModel
from .modelinfo import Format
from .options import RuntimeOptions
from .selection.selector import Candidate, Ranking, Rejection

log = logging.getLogger("edgeaccel")


def isolation_of(runtime: RuntimeOptions) -> IsolationLimits | None:
    """The worker process's limits ``runtime.isolate`` asks for, or None when the model runs in this process."""
    if runtime.isolate is True:
        return IsolationLimits()
    return runtime.isolate or None


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
    return RankedModel(open_candidate(candidate, options), candidate, Ranking([candidate]), [], strict=True)


def open_ranked(ranking: Ranking, options: ExecutorOptions, strict: bool = False,
                isolation: IsolationLimits | None = None, guard=None) -> Model:
    """The best candidate that loads, as a Model that fails over down the ranking at run time. ``guard`` (an
    ``edgeaccel.guard.ModelGuard``): a failover target or a reselected candidate serves only after agreeing
    with the reference; one that does not is recorded and passed over like one that failed to load."""

    def open_one(c: Candidate) -> Executor:
        return open_candidate(c, options, isolation)

    open_next = guard.opener(open_one) if guard is not None else open_one

    if not ranking.candidates:
        raise nothing_can_run(ranking)
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
        return RankedModel(executor, candidate, ranking, fallbacks, open_next=open_next, strict=strict,
                           failed=failed)
    raise all_failed(errors)


def nothing_can_run(ranking: Ranking) -> EdgeAccelError:
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


def all_failed(errors: list[tuple[Candidate, EdgeAccelError]]) -> EdgeAccelError:
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
