"""The edgeaccel executor contract, run against this plug-in: pytest collects ExecutorConformance's tests here."""

import os

from edgeaccel.testing.conformance import ExecutorConformance

from edgeaccel_example_plugin import ExampleNPUExecutor


class TestExampleNPU(ExecutorConformance):
    executor_class = ExampleNPUExecutor
    model_path = os.environ.get("EXAMPLE_MODEL", "tests/model.onnx")  # any ONNX model the plug-in runs
    device = "ExampleNPU"
