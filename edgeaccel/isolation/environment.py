"""The environment an isolated worker starts with: what Python and the runtimes need, never the app's secrets.

A worker used to inherit the caller's whole environment, so a model that took over its runtime could read the
app's API keys and database URLs and return them in its outputs (which ``serve`` sends to clients). Now only the
names below pass, with those the executor class names in ``worker_environment`` (CUDA's for the GPU runtimes)
and those the caller names in ``IsolationLimits(environment=...)``. A name ending in "*" passes every variable
that starts with what comes before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# Python's own settings, locale and time zone, where shared libraries are, thread counts of the math libraries
WORKER_ENVIRONMENT = (
    "PATH", "LANG", "LANGUAGE", "LC_*", "TZ",
    "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
    "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONMALLOC", "PYTHONFAULTHANDLER", "PYTHONWARNINGS", "PYTHONUSERBASE",
    "LD_LIBRARY_PATH", "OMP_*", "KMP_*", "GOMP_*", "MKL_*", "OPENBLAS_*", "TBB_*", "NUMEXPR_*",
)


def worker_environment(source: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``source`` (the caller's environment) a worker may see: WORKER_ENVIRONMENT and ``extra``."""
    patterns = [*WORKER_ENVIRONMENT, *extra]
    exact = {p for p in patterns if not p.endswith("*")}
    prefixes = tuple(p[:-1] for p in patterns if p.endswith("*"))
    return {k: v for k, v in source.items() if k in exact or (prefixes and k.startswith(prefixes))}

