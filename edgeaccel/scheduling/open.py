"""Open several ranked candidates of one model as a ScheduledModel (``edgeaccel.load(..., policy=...)``).

Every candidate that loads joins, up to ``max_executors``: a scheduler can only move work between executors it
holds. A candidate that fails to load is recorded in ``fallbacks`` (never silently dropped); candidates whose
inputs differ from the first one's (an artifact twin with other dtypes) cannot take the same requests and are
left out with that reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import EdgeAccelError
from ..executors.base import Executor, ExecutorOptions
from ..model import FallbackEvent
from ..profiles import Profile, get_profile
from ..selector import Candidate, Ranking
from .model import ScheduledModel
from .policies import Policy, make_policy

log = logging.getLogger("edgeaccel")


def open_scheduled(ranking: Ranking, open_candidate: Callable[[Candidate], Executor], policy: str | Policy,
                   power_budget_w: float | None = None, telemetry_root: str | Path = "/", max_executors: int = 3,
                   strict: bool = False, all_failed: Callable[[list], EdgeAccelError] | None = None,
                   profile: Profile | None = None, **options) -> ScheduledModel:
    if not isinstance(policy, Policy):
        policy = make_policy(policy, power_budget_w)  # a wrong name fails before any runtime loads
    executors: list[Executor] = []
    reasons: dict[str, str] = {}
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
        reasons[executor.info.name] = candidate.reason
    if not executors:
        if all_failed is not None and errors:
            raise all_failed(errors)
        raise errors[0][1] if errors else ValueError("no candidate to schedule")
    try:
        return ScheduledModel(executors, policy, power_budget_w=power_budget_w, root=telemetry_root,
                              fallbacks=fallbacks, reasons=reasons, ranking=ranking,
                              profile=profile or _profile_named(ranking.profile), **options)
    except BaseException:
        for executor in executors:
            executor.close()
        raise


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
