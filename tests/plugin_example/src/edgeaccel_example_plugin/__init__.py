"""An example edgeaccel executor plug-in: one device, "ExampleNPU", of kind npu.

A real plug-in drives its vendor's runtime (HailoRT, RKNN-Toolkit-Lite2, ...) and asks its driver whether the
device is here. So that this example runs anywhere, its "NPU" is ONNX Runtime on the CPU; everything else is
what edgeaccel asks of any plug-in.
"""

from __future__ import annotations

import importlib.util

from edgeaccel import ModelClosedError
from edgeaccel.executors import Availability, DeviceSpec, Executor, ExecutorInfo, Format, translate


class ExampleNPUExecutor(Executor):
    runtime = "example-npu"  # the name users pin: edgeaccel.load(path, executor="example-npu")
    formats = frozenset({Format.ONNX})  # what it reads
    device_specs = (DeviceSpec("ExampleNPU", "npu"),)  # each device and its kind: cpu, gpu, npu, tpu, edgetpu, dsp
    # (module, distribution): edgeaccel reads the installed version from here, without importing anything
    distributions = (("edgeaccel_example_plugin", "edgeaccel-example-plugin"),)

    @classmethod
    def availability(cls, device=None):
        """Is the device here and usable? Cheap, and never raises: a reason (and a fix) instead."""
        if importlib.util.find_spec("onnxruntime") is None:
            return Availability(False, "onnxruntime is not installed", fix="pip install onnxruntime")
        if device is not None and device != "ExampleNPU":
            return Availability(False, f"example-npu drives ExampleNPU only, not {device!r}")
        return Availability(True, "ExampleNPU present (ONNX Runtime on the CPU stands in for an NPU driver)",
                            version=cls.installed())

    def __init__(self, model, device, options):
        super().__init__(model, device, options)
        import onnxruntime  # the runtime is imported when a model is loaded, never when edgeaccel starts

        try:
            self._session = onnxruntime.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
        except Exception as exc:  # every runtime error leaves as an edgeaccel error
            raise translate(type(self), exc, "load", model, device) from exc
        self._names = [i.name for i in self._session.get_inputs()]

    @property
    def info(self):
        precision = "int8 (QDQ)" if self.model.quantized else "f32"
        return ExecutorInfo(self.runtime, self.installed() or "unknown", self.device, precision,
                            details={"stands_in_for": "an NPU driver; runs ONNX Runtime on the CPU"})

    def run(self, inputs):
        """Called from many threads at once (an InferenceSession may be shared between threads)."""
        session = self._session
        if session is None:
            raise ModelClosedError(f"{self.model.path.name} was closed", hint="load it again")
        try:
            return session.run(None, dict(zip(self._names, inputs, strict=True)))
        except Exception as exc:
            raise translate(type(self), exc, "run", self.model, self.device) from exc

    def close(self):
        self.stop_workers()  # the threads of the default submit()
        self._session = None
