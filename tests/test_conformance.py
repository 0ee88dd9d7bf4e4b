"""Every built-in executor, the isolated one and the emulated accelerators pass the conformance suite that plug-in
authors run (edgeaccel.testing.conformance), on real runtimes and real models."""

from __future__ import annotations

import pytest

from conftest import MODELS, SAMPLES
from edgeaccel.executors import registry
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.isolation.executor import IsolatedExecutor
from edgeaccel.isolation.limits import IsolationLimits
from edgeaccel.testing.conformance import ExecutorConformance
from edgeaccel.testing.emulated import Faults, emulated_accelerator

pytestmark = pytest.mark.shared
MOBILENET_V1 = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"  # bundled: 1 uint8 input, 1 output


def builtin(name: str):
    return registry.get(name)  # imports the executor's module, not its runtime


class TestLiteRTCPU(ExecutorConformance):
    executor_class = builtin("litert")
    model_path = MOBILENET_V1


class TestLiteRTCPUManyInputsAndOutputs(ExecutorConformance):
    executor_class = builtin("litert")
    model_path = MODELS / "split_concat.tflite"  # three inputs, five outputs


class TestOnnxRuntimeCPU(ExecutorConformance):
    executor_class = builtin("onnxruntime")
    model_path = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
    calls_per_thread = 20  # a 224x224 MobileNetV2: 160 concurrent calls show a crossed answer as well


class TestOpenVINOCPU(ExecutorConformance):
    executor_class = builtin("openvino")
    model_path = MOBILENET_V1  # OpenVINO reading .tflite itself


class TestOpenVINOCPUOnIR(ExecutorConformance):
    executor_class = builtin("openvino")
    model_path = MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml"
    calls_per_thread = 20


class TestTensorFlowCPU(ExecutorConformance):
    executor_class = builtin("tensorflow")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_model(cls, tmp_path_factory):
        tf = pytest.importorskip("tensorflow", reason="the tensorflow extra is not installed (it is in dev)")
        from edgeaccel.formats import describe

        keras = tf.keras
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((6,), name="features"), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        folder = tmp_path_factory.mktemp("conformance-sm") / "classifier"
        model.export(str(folder))
        return describe(folder)


class TestIsolatedLiteRT(ExecutorConformance):
    """The isolated executor serves LiteRT from a worker process; info names the runtime inside."""

    executor_class = IsolatedExecutor
    model_path = MOBILENET_V1
    runtime_name = "litert"
    calls_per_thread = 25

    def make_executor(self, model):
        return IsolatedExecutor("litert", model, self.device, ExecutorOptions(), IsolationLimits())



_TENSORRT_HERE = builtin("tensorrt").availability("TensorRT")


@pytest.mark.skipif(not _TENSORRT_HERE, reason=f"the TensorRT executor cannot run here: {_TENSORRT_HERE.reason}")
class TestTensorRTGPU(ExecutorConformance):
    """The native TensorRT executor, building an engine from ONNX: runs where TensorRT and an NVIDIA GPU are
    (never verified in this project's CI, which has no GPU); elsewhere it skips, saying what is missing."""
    executor_class = builtin("tensorrt")
    device = "TensorRT"
    model_path = MODELS / "mobilenet_v2_1.0_224_quant.onnx"


# Emulated accelerators (edgeaccel.testing.emulated) are executors like any other: the suite holds for them over
# each CPU runtime they wrap, with reduced-precision numerics and partial offload.
class TestEmulatedOverLiteRT(ExecutorConformance):
    executor_class = emulated_accelerator("conformance-gpu", "EmuGPU", "gpu", wraps="litert", speedup=10,
                                          numerics="f16")
    model_path = MOBILENET_V1
    device = "EmuGPU"


class TestEmulatedOverOnnxRuntime(ExecutorConformance):
    executor_class = emulated_accelerator("conformance-npu", "EmuNPU", "npu", wraps="onnxruntime",
                                          fixed_latency_ms=1, numerics="int8", faults=Faults(offload_share=0.5))
    model_path = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
    device = "EmuNPU"
    calls_per_thread = 20


class TestEmulatedOverOpenVINO(ExecutorConformance):
    executor_class = emulated_accelerator("conformance-tpu", "EmuTPU", "tpu", wraps="openvino", speedup=4,
                                          numerics="bf16")
    model_path = MOBILENET_V1
    device = "EmuTPU"
