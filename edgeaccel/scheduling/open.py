"""Open several ranked candidates of one model as a ScheduledModel (``edgeaccel.load(..., policy=...)``).

Every candidate that loads joins, up to ``max_executors``: a scheduler can only move work between executors it
holds. A candidate that fails to load is recorded in ``fallbacks`` (never silently dropped); candidates whose
inputs differ from the first one's (an artifact twin with other dtypes) cannot take the same requests and are
left out with that reason. With a ``guard`` (``edgeaccel.guard.ModelGuard``, what ``load`` passes), every
executor must agree with the model's reference before it joins: one that does not is closed and recorded in
``fallbacks`` (stage "guard") with its figures; where no reference can run, only the first executor (the one a
load without ``policy`` would serve) is kept, since the others could not be checked against it; the same
where none agrees and the caller pinned the executor or device (their choice, with the difference stated).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AccuracyGuardError, EdgeAccelError
from ..executors.base import Executor, ExecutorOptions
from ..model import FallbackEvent
from ..profiles import Profile, get_profile
from ..selector import Candidate, Ranking
from .assembly import unique_names
from .model import ScheduledModel
from .policies import Policy, make_policy

if TYPE_CHECKING:
    from ..guard import ModelGuard

log = logging.getLogger("edgeaccel")


def open_scheduled(ranking: Ranking, open_candidate: Callable[[Candidate], Executor], policy: str | Policy,
                   power_budget_w: float | None = None, telemetry_root: str | Path = "/", max_executors: int = 3,
                   strict: bool = False, all_failed: Callable[[list], EdgeAccelError] | None = None,
                   profile: Profile | None = None, guard: ModelGuard | None = None, pinned: bool = False,
                   **options) -> ScheduledModel:
    if not isinstance(policy, Policy):
        policy = make_policy(policy, power_budget_w)  # a wrong name fails before any runtime loads
    executors: list[Executor] = []
    opened: list[Candidate] = []
    reasons: dict[int, str] = {}  # id(executor) -> why it is there (two of one runtime share an info.name)
    fallbacks: list[FallbackEvent] = []
    errors = []
    for candidate in ranking.candidates:
        if len(executors) >= max_executors:
            break
        if executors and _inputs(candidate) != tuple((t.dtype, tuple(t.shape)) for t in executors[0].inputs):
            log.info("scheduling leaves out %s: its inputs differ from %s", candidate, executors[0].info.name)
            continue
        try:
            executor = open_candidate(candidate)
        except EdgeAccelError as exc:
            if strict:
                for opened in executors:
                    opened.close()
                raise
            errors.append((candidate, exc))
            event = FallbackEvent(time.time(), "load", candidate.name, str(exc), None)
            fallbacks.append(event)
            log.warning("scheduling without %s: %s", candidate.name, exc.message)
            continue
        executors.append(executor)
        opened.append(candidate)
        reasons[id(executor)] = candidate.reason
    if not executors:
        if all_failed is not None and errors:
            raise all_failed(errors)
        raise errors[0][1] if errors else ValueError("no candidate to schedule")
    if guard is not None:
        try:
            executors = _guarded(guard, opened, executors, reasons, fallbacks, pinned)
        except BaseException:
            for executor in executors:
                executor.close()
            raise
    try:
        return ScheduledModel(executors, policy, power_budget_w=power_budget_w, root=telemetry_root,
                              fallbacks=fallbacks, ranking=ranking,
                              reasons={name: reasons[id(e)] for name, e in zip(unique_names(executors), executors)},
                              probe_inputs=guard.samples if guard is not None else None,
                              profile=profile or _profile_named(ranking.profile), **options)
    except BaseException:
        for executor in executors:
            executor.close()
        raise


def _guarded(guard: ModelGuard, candidates: list[Candidate], executors: list[Executor], reasons: dict[int, str],
             fallbacks: list[FallbackEvent], pinned: bool = False) -> list[Executor]:
    """The executors that passed the guard (each one's verdict appended to its reason); the others closed and
    recorded. When none passed: the first alone where the caller pinned the executor or device (what a load
    without policy= would serve them, the difference said in its reason and the log), else AccuracyGuardError."""
    opened = {c.key: e for c, e in zip(candidates, executors)}
    kept, refused = [], []
    for i, (candidate, executor) in enumerate(zip(candidates, executors)):
        verdict = guard.verdict(candidate, executor, opened)
        if not verdict.ok and guard.problem and i == 0:
            # nothing to check against: the first executor serves as a load without policy= would, alone
            verdict = replace(verdict, ok=True, why=f"served unchecked, as a single executor would be: "
                                                    f"no reference could run ({guard.problem})")
        if verdict.ok:
            kept.append(executor)
            reasons[id(executor)] = f"{reasons.get(id(executor), '')}; {verdict}".lstrip("; ")
            log.info("scheduling with %s: %s", candidate.name, verdict)
        else:
            refused.append((candidate, executor, verdict))
    if not kept and pinned:
        candidate, executor, verdict = refused.pop(0)
        kept.append(executor)
        reasons[id(executor)] = (f"{reasons.get(id(executor), '')}; pinned by the caller and served alone "
                                 f"although it {verdict}").lstrip("; ")
        log.warning("%s serves alone, pinned by the caller, although it %s", candidate.name, verdict)
    for candidate, executor, verdict in refused:
        if kept:  # closing the refused ones is deferred while none passed: the error below names them all
            executor.close()
        fallbacks.append(FallbackEvent(time.time(), "guard", candidate.name, str(verdict), None))
        log.warning("scheduling without %s: it %s", candidate.name, verdict)
    if not kept:
        raise AccuracyGuardError(
            "no executor of this model agrees with its reference:" +
            "".join(f"\n  - {c.name}: {v.why}" for c, _, v in refused),
            hint="load without policy= (one executor), pass real calibration_inputs=, or raise "
                 "accuracy_tolerance= if these differences are acceptable for this model")
    return kept


def scheduled_options(options: ExecutorOptions, runtime: type[Executor]) -> ExecutorOptions:
    """Options for an executor that shares the machine with others under a scheduler: what its class says
    it needs beside other runtimes (``Executor.options_beside_others``)."""
    return runtime.options_beside_others(options)


def _profile_named(name: str | None) -> Profile | None:
    """The profile the ranking was made with, for its power figures (None where it cannot be read again)."""
    if not name:
        return None
    try:
        return get_profile(name)
    except EdgeAccelError as exc:
        log.info("scheduling without profile %s's power figures: %s", name, exc.message)
        return None


def _inputs(candidate: Candidate) -> tuple:
    return tuple((t.dtype, tuple(t.shape)) for t in candidate.artifact.inputs)
