"""``edgeaccel.load``: describe the model, rank the executors that could run it here, open the best one that
loads, and record every candidate that failed on the way (``model.fallbacks``)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from . import bundle
from .errors import EdgeAccelError, ModelError, NoExecutorError, UnsupportedModelError
from .executors.base import Executor, ExecutorOptions
from .executors.registry import runtimes
from .isolation.limits import IsolationLimits
from .model import FallbackEvent, Model
from .modelinfo import Format, ModelInfo
from .selector import Candidate, MachineFacts, Ranking, rank

log = logging.getLogger("edgeaccel")


def load(
    model: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    executor: str | None = None,
    device: str | None = None,
    precision: str | None = None,
    threads: int | None = None,
    performance_hint: str = "latency",
    cache_dir: str | os.PathLike | None = None,
    runtime_options: dict | None = None,
    strict: bool = False,
    isolate: bool | IsolationLimits = False,
) -> Model:
    """Load ``model`` on the best executor this machine has for it.

    model: a model file, a folder of artifacts of one model, an ``edgeaccel-bundle.yaml``, or a list of
        files (e.g. ``m.tflite`` and its Edge TPU twin ``m_edgetpu.tflite``).

    executor, device: pin a runtime ("litert", "onnxruntime", "openvino") and/or a device ("CPU", "GPU",
        "NPU", "CUDA", "AUTO", ...). Without them, edgeaccel chooses and says why in ``model.executor``.
    precision: None runs the model at its own precision (f32 math for float layers); "bf16" or "f16" are
        opt-ins because they change answers.
    strict: a candidate that fails to load or run raises instead of falling back to the next one.
    isolate: load and run the model in a worker process (True, or IsolationLimits for memory and time limits):
        a runtime crash or hang becomes WorkerCrashedError / InferenceTimeoutError and the caller lives on.
        For models from untrusted sources; it costs a process start per load and a copy per run (README).
    """
    options = ExecutorOptions(
        threads=threads,
        precision=precision,
        performance_hint=performance_hint,
        cache_dir=os.fspath(cache_dir) if cache_dir else None,
        runtime_options=dict(runtime_options or {}),
    )
    found = bundle.resolve(model)
    for path, exc in found.invalid:
        log.warning("artifact %s is unusable: %s", path, exc.message)
    ranking = rank_here(found.artifacts, options, executor, device)
    isolation = (IsolationLimits() if isolate is True else isolate) or None
    return open_ranked(ranking, options, strict, isolation)


def machine_facts() -> MachineFacts:
    """Installed runtimes (from package metadata, no import) and the devices present."""
    installed = {name: executor_class(name).installed() for name in runtimes()}
    return MachineFacts(installed=installed)


def executor_class(name: str) -> type[Executor]:
    return runtimes()[name].load_class()


def rank_here(artifacts: list[ModelInfo], options: ExecutorOptions, executor: str | None = None,
              device: str | None = None) -> Ranking:
    if executor and executor not in runtimes():
        raise ValueError(f"unknown executor {executor!r}; known: {', '.join(runtimes())}")

    def rejects(runtime: str, artifact: ModelInfo, dev: str, opts: ExecutorOptions) -> str | None:
        return executor_class(runtime).rejects(artifact, dev, opts)

    return rank(artifacts, runtimes(), machine_facts(), rejects, options, executor, device)


def open_candidate(candidate: Candidate, options: ExecutorOptions,
                   isolation: IsolationLimits | None = None) -> Executor:
    cls = executor_class(candidate.runtime)
    if candidate.kind not in ("cpu",):
        available = cls.availability(candidate.device)
        if not available:
            from .errors import DeviceUnavailableError

            raise DeviceUnavailableError(f"{candidate.name}: {available.reason}", hint=available.fix)
    if isolation is not None:  # the same executor, in a worker process
        from .isolation.executor import IsolatedExecutor

        return IsolatedExecutor(candidate.runtime, candidate.artifact, candidate.device, options, isolation)
    return cls(candidate.artifact, candidate.device, options)


def open_ranked(ranking: Ranking, options: ExecutorOptions, strict: bool = False,
                isolation: IsolationLimits | None = None) -> Model:
    if not ranking.candidates:
        raise _nothing_can_run(ranking)
    fallbacks: list[FallbackEvent] = []
    failed: list[Candidate] = []
    errors: list[tuple[Candidate, EdgeAccelError]] = []
    for candidate in ranking.candidates:
        try:
            executor = open_candidate(candidate, options, isolation)
        except EdgeAccelError as exc:
            if strict:
                raise
            errors.append((candidate, exc))
            failed.append(candidate)
            continue
        for bad, exc in errors:
            event = FallbackEvent(time.time(), "load", bad.name, str(exc), candidate.name)
            fallbacks.append(event)
            log.warning("fallback: %s", event)
        return Model(executor, candidate, ranking, fallbacks,
                     open_next=lambda c: open_candidate(c, options, isolation), strict=strict, failed=failed)
    raise _all_failed(errors)


def _nothing_can_run(ranking: Ranking) -> EdgeAccelError:
    artifacts = {r.artifact.path: r.artifact for r in ranking.rejected}
    if artifacts and all(a.format is Format.EDGETPU_TFLITE for a in artifacts.values()):
        name = next(iter(artifacts)).name
        return UnsupportedModelError(
            f"{name} is compiled for the Edge TPU (its body is one edgetpu-custom-op) and no Edge TPU is usable here",
            hint="connect an Edge TPU with libedgetpu installed, or load the CPU twin (the same model before "
            "edgetpu_compiler), or hand both as a set so the CPU twin takes over",
        )
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
