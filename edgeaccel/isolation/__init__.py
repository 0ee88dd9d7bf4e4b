"""Run a model in a worker process so that a crash or hang of a runtime cannot take the caller down.

``edgeaccel.load(path, runtime=RuntimeOptions(isolate=True))`` (or ``isolate=IsolationLimits(...)``) wraps the
chosen executor in ``IsolatedExecutor``; the Model and its fallback logic are unchanged.
"""

from .limits import IsolationLimits, SandboxProbe

__all__ = ["IsolationLimits", "IsolatedExecutor", "SandboxProbe"]


def __getattr__(name: str):
    if name == "IsolatedExecutor":  # numpy and subprocess machinery only when isolation is used
        from .executor import IsolatedExecutor

        return IsolatedExecutor
    raise AttributeError(name)
