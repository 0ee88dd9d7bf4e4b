"""edgeaccel: run one model on the best executor a device has, through one small API.

    import edgeaccel
    with edgeaccel.load("model.tflite") as model:
        print(model.executor)
        outputs = model.run(image)

    # the rarer choices are option objects: SelectionOptions, RuntimeOptions, TaskOptions, ScheduleOptions
    model = edgeaccel.load("model.onnx", runtime=edgeaccel.RuntimeOptions(threads=2))
    scheduled = edgeaccel.schedule("model.onnx", "thermal")  # several executors under a policy

Importing edgeaccel is cheap and imports no runtime (nor numpy): the public names below are resolved on
first use.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .errors import (
    AccuracyGuardError,
    ConfigError,
    ConversionError,
    DeadlineExceededError,
    DeviceUnavailableError,
    EdgeAccelError,
    ExecutorError,
    GpuMemoryLimitError,
    InferenceError,
    InferenceTimeoutError,
    InputError,
    ModelClosedError,
    ModelError,
    ModelLoadError,
    ModelValidationError,
    NoExecutorError,
    OverloadedError,
    RuntimeNotInstalledError,
    UnsupportedFormatError,
    UnsupportedModelError,
    WorkerCrashedError,
)

from ._version import __version__
from ._moved import install as _serve_moved_module_paths
from .upcalls import provide_watch as _provide_watch

_serve_moved_module_paths()


def _watch(model, source, *more, **options):
    """What ``Model.watch`` calls: the live sources sit above Model, so the facade hands this down."""
    from .sources import watch

    return watch(model, source, *more, **options)


_provide_watch(_watch)

_LAZY = {
    "load": ("loader", "load"),
    "schedule": ("loader", "schedule"),
    "select": ("choice", "select"),
    "SelectionOptions": ("options", "SelectionOptions"),
    "RuntimeOptions": ("options", "RuntimeOptions"),
    "ScheduleOptions": ("options", "ScheduleOptions"),
    "TaskOptions": ("options", "TaskOptions"),
    "describe": ("formats", "describe"),
    "image_input": ("imageio", "image_input"),
    "describe_pipeline": ("modelfiles.describe", "describe_pipeline"),
    "ModelPipeline": ("modelfiles.pipeline", "ModelPipeline"),
    "Model": ("model", "Model"),
    "ScheduledModel": ("scheduling.model", "ScheduledModel"),
    "Outputs": ("tensors", "Outputs"),
    "ModelInfo": ("modelinfo", "ModelInfo"),
    "TensorSpec": ("modelinfo", "TensorSpec"),
    "Format": ("modelinfo", "Format"),
    "ProbeReport": ("hardware", "ProbeReport"),
    "IsolationLimits": ("isolation.limits", "IsolationLimits"),
    "Cascade": ("cascade.core", "Cascade"),
}

__all__ = [
    *_LAZY,
    "probe",
    "ConfigError",
    "ConversionError",
    "DeadlineExceededError",
    "DeviceUnavailableError",
    "EdgeAccelError",
    "ExecutorError",
    "GpuMemoryLimitError",
    "InferenceError",
    "InferenceTimeoutError",
    "InputError",
    "ModelClosedError",
    "ModelError",
    "AccuracyGuardError",
    "ModelLoadError",
    "ModelValidationError",
    "NoExecutorError",
    "OverloadedError",
    "RuntimeNotInstalledError",
    "UnsupportedFormatError",
    "UnsupportedModelError",
    "WorkerCrashedError",
    "__version__",
]


def __getattr__(name: str):
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'edgeaccel' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f".{module_name}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Probe:
    """``edgeaccel.probe``: calling it surveys a device; its attributes are the survey's public names
    (``edgeaccel.probe.Identity``, ``.ProbeReport``, ``.schema``), found in ``edgeaccel.hardware`` on first use.

    An object rather than a function because the name also keeps its older meaning, the package of the survey:
    this object stands in ``sys.modules`` for the path ``edgeaccel.probe``, so ``from edgeaccel.probe import
    ProbeReport`` works and importing an old submodule path (``edgeaccel.probe.fs``, served by ``_moved``) cannot
    replace ``edgeaccel.probe`` with a module.
    """

    __path__: list[str] = []  # a package to the import system; its old submodule paths come from _moved
    __spec__ = None

    def __init__(self) -> None:
        self.__name__ = f"{__name__}.probe"
        self.__doc__ = self.__call__.__doc__

    def __call__(self, root: str | os.PathLike = "/", *, runtimes: bool | None = None, telemetry: bool = True,
                 identity: Identity | None = None) -> ProbeReport:
        """Survey the device below ``root`` (default: this machine): machine, accelerators, the runtimes and what
        each reaches, telemetry sources, problems. Never raises: what cannot be read is reported with a reason.

        ``runtimes``: False skips the runtime survey (it is never done for a root other than "/", whose Python
        environment is not this one). ``telemetry``: False skips the sensors. ``identity``
        (``edgeaccel.probe.Identity(uid, gids)``): whose access to device nodes to judge (default: this process).
        """
        from .hardware import survey_device
        from .selection.inventory import RUNTIME_SURVEY

        return survey_device(root, runtimes=runtimes, telemetry=telemetry, identity=identity,
                             runtime_survey=RUNTIME_SURVEY)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "probe":  # `from edgeaccel.probe import probe`, from when the package held the function
            return self
        import importlib

        hardware = importlib.import_module(".hardware", __name__)
        if hasattr(hardware, name):
            return getattr(hardware, name)
        try:  # a module of the survey: edgeaccel.probe.schema.validate(report)
            return importlib.import_module(f".hardware.{name}", __name__)
        except ModuleNotFoundError:
            raise AttributeError(f"edgeaccel.probe has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:
        from .hardware import __all__ as names

        return sorted(names)

    def __repr__(self) -> str:
        return "<edgeaccel.probe: call it to survey a device>"


probe = _Probe()
sys.modules.setdefault(f"{__name__}.probe", probe)


if TYPE_CHECKING:
    from .formats import describe
    from .imageio import image_input
    from .modelfiles.pipeline import ModelPipeline
    from .modelfiles.describe import describe_pipeline
    from .isolation.limits import IsolationLimits
    from .choice import select
    from .loader import load, schedule
    from .options import RuntimeOptions, ScheduleOptions, SelectionOptions, TaskOptions
    from .cascade.core import Cascade
    from .model import Model
    from .scheduling.model import ScheduledModel
    from .modelinfo import Format, ModelInfo, TensorSpec
    from .hardware import Identity, ProbeReport
    from .tensors import Outputs
