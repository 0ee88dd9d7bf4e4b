"""Executors: one class per runtime, built-in or plug-in, each owning every fact about its runtime.

What a plug-in author needs is exported here::

    from edgeaccel.executors import Availability, DeviceSpec, Executor, ExecutorInfo, ExecutorOptions, Pool

    class HailoExecutor(Executor):
        runtime = "hailort"
        formats = frozenset({Format.ONNX})
        device_specs = (DeviceSpec("Hailo8", "npu"),)
        ...

and registered under the ``edgeaccel.executors`` entry-point group (README: Write an executor plug-in).
``edgeaccel.testing.conformance`` holds the tests every executor must pass. Importing this package imports
no runtime.
"""

from ..modelinfo import Format, ModelInfo, TensorSpec
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions, Pool, default_threads
from .device import DeviceRef
from ..options import RuntimeOptions
from .facts import DEVICE_KINDS, DeviceSpec, DeviceTarget, RuntimeSurvey
from .translate import ErrorRule, translate

__all__ = ["Availability", "DEVICE_KINDS", "DeviceRef", "DeviceSpec", "DeviceTarget", "ErrorRule", "Executor",
           "ExecutorInfo", "ExecutorOptions", "Format", "ModelInfo", "Pool", "RuntimeOptions", "RuntimeSurvey",
           "TensorSpec", "default_threads", "translate"]
