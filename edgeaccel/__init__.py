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
    "describe_pipeline": ("model_pipeline", "describe_pipeline"),
    "ModelPipeline": ("model_pipeline", "ModelPipeline"),
    "Model": ("model", "Model"),
    "ScheduledModel": ("scheduling.model", "ScheduledModel"),
    "Outputs": ("tensors", "Outputs"),
    "ModelInfo": ("modelinfo", "ModelInfo"),
    "TensorSpec": ("modelinfo", "TensorSpec"),
    "Format": ("modelinfo", "Format"),
    # the package, callable (edgeaccel/probe/__init__.py), with the runtime survey registered by inventory
    "probe": ("inventory", "probe_package"),
    "ProbeReport": ("probe", "ProbeReport"),
    "IsolationLimits": ("isolation.limits", "IsolationLimits"),
    "Cascade": ("cascade.core", "Cascade"),
}

__all__ = [
    *_LAZY,
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


if TYPE_CHECKING:
    from .formats import describe
    from .imageio import image_input
    from .model_pipeline import ModelPipeline, describe_pipeline
    from .isolation.limits import IsolationLimits
    from .choice import select
    from .loader import load, schedule
    from .options import RuntimeOptions, ScheduleOptions, SelectionOptions, TaskOptions
    from .cascade.core import Cascade
    from .model import Model
    from .scheduling.model import ScheduledModel
    from .modelinfo import Format, ModelInfo, TensorSpec
    from .probe import ProbeReport, probe
    from .tensors import Outputs
