"""``profile_model``: the model on the executor ``edgeaccel.load`` would choose (or a pinned one, or every
candidate side by side), each profiled in turn: loaded with its runtime's profiling on, warmed up, timed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import EdgeAccelError, InputError
from .collect import UtilizationSampler, profile_candidate
from .matching import match_ops
from .schema import ModelProfile

Inputs = Sequence[np.ndarray] | Callable[[object], Sequence[np.ndarray]] | None


def profile_model(model, *, executor: str | None = None, device: str | None = None, every: bool = False,
                  runs: int = 20, warmup: int = 5, inputs: Inputs = None, threads: int | None = None,
                  precision: str | None = None, cache_dir=None, cache: bool = True, seed: int = 0,
                  sampler: Callable[[], UtilizationSampler] | None = None) -> ModelProfile:
    """Profile ``model`` (a path, several artifacts of one model, a folder or a bundle).

    executor/device/precision/threads: as ``edgeaccel.load`` takes them. every: each candidate executor in turn
    (``--all``), with the operators matched by name across them. inputs: arrays in input order, a function of
    the candidate's ModelInfo giving them (artifacts of one model may lay inputs out differently), or None for
    seeded random data. sampler: a context-manager factory entered around each executor's timed runs (the
    utilization sampler); its ``summary()`` and ``lines()`` are kept on the executor's profile.
    """
    from ..loader import select
    from ..opening import nothing_can_run
    from ..options import RuntimeOptions, SelectionOptions

    if runs < 1 or warmup < 0:
        raise InputError(f"runs must be at least 1 and warmup at least 0 (got runs={runs}, warmup={warmup})")
    selection = select(model, executor=executor, device=device, selection=SelectionOptions(precision=precision),
                       runtime=RuntimeOptions(threads=threads, cache_dir=cache_dir, cache=cache))
    ranking = selection.ranking
    notes = []
    # side by side means every executor that runs here, also those an earlier calibration ruled out for load
    # (accuracy, speed): said per executor
    if every and selection.measurements and selection.rerank is not None:
        ranking = selection.rerank({})
        profiled = {c.name for c in ranking.candidates}
        for rejection in selection.ranking.rejected:
            if rejection.reason.startswith("calibration") and rejection.name in profiled:
                notes.append(f"{rejection.name}: profiled although edgeaccel.load passes it over ({rejection.reason})")
    candidates = ranking.candidates if every else ranking.candidates[:1]
    if not candidates:
        raise nothing_can_run(ranking)
    result = ModelProfile(", ".join(str(a.path) for a in selection.artifacts.artifacts), notes=notes)
    for candidate in candidates:
        arrays = _inputs_for(candidate.artifact, inputs, seed)
        try:
            result.executors.append(profile_candidate(candidate, selection.options, arrays, runs, warmup,
                                                      sampler=sampler))
        except EdgeAccelError as exc:
            if not every:
                raise
            result.failed[candidate.name] = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    if not result.executors:
        reasons = "; ".join(f"{name}: {why}" for name, why in result.failed.items())
        raise EdgeAccelError(f"no executor could be profiled: {reasons}",
                             hint="`edgeaccel explain MODEL` shows the candidates and why each was chosen")
    if every and len(result.executors) > 1:
        result.matching = match_ops(result.executors).to_dict()
    return result


def _inputs_for(info, inputs: Inputs, seed: int) -> list[np.ndarray]:
    if callable(inputs):
        return list(inputs(info))
    if inputs is not None:
        return list(inputs)
    from ..tensors import random_array

    rng = np.random.default_rng(seed)
    return [random_array(spec, rng) for spec in info.inputs]
