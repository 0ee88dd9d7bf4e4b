"""What the TensorRT executor does on the GPU: CUDA calls through cuda-python, building an engine from ONNX,
an int8 calibrator fed from samples, and one execution context with its stream and device buffers.

Imported only by a TensorRT executor that is being made, so only where TensorRT and a CUDA binding are
installed. The API calls follow NVIDIA's TensorRT Python samples (samples/python/common_runtime.py):
cudaMalloc / cudaMemcpyAsync / cudaStreamCreate through cuda-python, ``execute_async_v3(stream)`` after
``set_input_shape`` and ``set_tensor_address`` for every I/O tensor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DeviceUnavailableError, InferenceError, ModelLoadError, UnsupportedModelError
from .tensorrt_build import BuildOptions, cuda_runtime


def check(result, what: str):
    """The value of a cuda-python call ((err, value...) tuples); DeviceUnavailableError naming the call otherwise."""
    cudart = cuda_runtime()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cudart.cudaError_t.cudaSuccess:
        name = cudart.cudaGetErrorName(err)[1]
        raise DeviceUnavailableError(f"CUDA {what} failed: {name.decode() if isinstance(name, bytes) else name}",
                                     hint="`nvidia-smi` shows whether the GPU and its driver answer")
    return rest[0] if len(rest) == 1 else (tuple(rest) or None)


def gpu_facts(index: int) -> tuple[str, str]:
    """(name, compute capability "8.7") of GPU ``index``."""
    cudart = cuda_runtime()
    props = check(cudart.cudaGetDeviceProperties(index), f"cudaGetDeviceProperties({index})")
    name = props.name.decode(errors="replace").rstrip("\x00") if isinstance(props.name, bytes) else str(props.name)
    return name, f"{props.major}.{props.minor}"


def collecting_logger(trt):
    """A TensorRT logger that keeps the errors (TensorRT returns None where it fails; its reason is logged)."""

    class Collecting(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity, msg) -> None:
            if int(severity) <= int(trt.ILogger.Severity.ERROR):
                self.errors.append(str(msg))

    return Collecting()


def build_engine(trt, logger, onnx_path: Path, options: BuildOptions) -> tuple[bytes, float]:
    """(serialized engine, build seconds) for the ONNX model at ``onnx_path``."""
    started = time.perf_counter()
    builder = trt.Builder(logger)
    explicit_batch = 0 if int(trt.__version__.split(".")[0]) >= 10 else \
        1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(explicit_batch)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):  # from the path: external data is found beside it
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)) or "; ".join(logger.errors)
        raise UnsupportedModelError(f"TensorRT's ONNX parser cannot read {onnx_path.name}: {errors}",
                                    hint="run it through ONNX Runtime instead (device CUDA or TensorRT, or the CPU)")
    config = builder.create_builder_config()
    if options.workspace_bytes:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(options.workspace_bytes))
    if options.builder_optimization_level is not None:
        config.builder_optimization_level = int(options.builder_optimization_level)
    if options.precision == "f16":
        config.set_flag(trt.BuilderFlag.FP16)
    elif options.precision == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
        if options.int8_calibration:
            config.int8_calibrator = make_calibrator(trt, network, options.int8_calibration)
    if options.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = int(options.dla_core)
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    profile = optimization_profile(builder, network, options.shapes)
    if profile is not None:
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ModelLoadError(f"TensorRT could not build an engine from {onnx_path.name}: "
                             f"{'; '.join(logger.errors) or 'no reason logged'}", runtime="tensorrt",
                             hint="try another precision, or run the model through ONNX Runtime")
    return bytes(plan), time.perf_counter() - started


def optimization_profile(builder, network, shapes: dict):
    """One profile for the dynamic inputs: the caller's (min, opt, max), else every dynamic dimension 1 (a
    dynamic batch runs at 1; other sizes need runtime_options["tensorrt"]["shapes"]). None when all are static."""
    dynamic = [network.get_input(i) for i in range(network.num_inputs) if -1 in tuple(network.get_input(i).shape)]
    if not dynamic:
        return None
    profile = builder.create_optimization_profile()
    for tensor in dynamic:
        given = shapes.get(tensor.name)
        if given is None:
            fixed = tuple(1 if d == -1 else d for d in tuple(tensor.shape))
            given = (fixed, fixed, fixed)
        profile.set_shape(tensor.name, *given)
    return profile


def make_calibrator(trt, network, samples):
    """An entropy calibrator (TensorRT's IInt8EntropyCalibrator2) fed one sample at a time from ``samples``."""
    names = [network.get_input(i).name for i in range(network.num_inputs)]

    class Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self._left = iter(samples)
            self._buffers = DeviceBuffers()

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, wanted):
            try:
                sample = next(self._left)
            except StopIteration:
                return None
            by_name = dict(zip(names, sample, strict=True))
            return [self._buffers.upload(n, np.ascontiguousarray(by_name[n]), None) for n in wanted]

        def read_calibration_cache(self):
            return None

        def write_calibration_cache(self, cache) -> None:
            return None

    return Calibrator()


@dataclass
class DeviceBuffers:
    """Device memory by tensor name, grown when a larger input or output arrives, freed on close."""

    held: dict = field(default_factory=dict)  # name -> (pointer, bytes)

    def ensure(self, name: str, nbytes: int) -> int:
        cudart = cuda_runtime()
        pointer, size = self.held.get(name, (None, 0))
        if pointer is None or size < nbytes:
            if pointer is not None:
                check(cudart.cudaFree(pointer), "cudaFree")
            pointer = check(cudart.cudaMalloc(max(nbytes, 1)), f"cudaMalloc({nbytes}) for {name}")
            self.held[name] = (pointer, max(nbytes, 1))
        return int(pointer)

    def upload(self, name: str, array: np.ndarray, stream) -> int:
        cudart = cuda_runtime()
        pointer = self.ensure(name, array.nbytes)
        kind = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        if stream is None:
            check(cudart.cudaMemcpy(pointer, array.ctypes.data, array.nbytes, kind), "cudaMemcpy")
        else:
            check(cudart.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, kind, stream), "cudaMemcpyAsync")
        return pointer

    def free(self) -> None:
        cudart = cuda_runtime()
        for pointer, _ in self.held.values():
            cudart.cudaFree(pointer)
        self.held.clear()


class Slot:
    """One execution context with its own stream and buffers: what one thread runs the engine with."""

    def __init__(self, engine, inputs, outputs, device_index: int = 0) -> None:
        self.device_index = device_index  # CUDA's current device is per thread: set in every thread that runs
        check(cuda_runtime().cudaSetDevice(device_index), f"cudaSetDevice({device_index})")
        self.context = engine.create_execution_context()
        if self.context is None:
            raise ModelLoadError("TensorRT could not make an execution context (GPU memory?)", runtime="tensorrt",
                                 hint="load fewer models on this GPU")
        self.stream = check(cuda_runtime().cudaStreamCreate(), "cudaStreamCreate")
        self.buffers = DeviceBuffers()
        self.inputs, self.outputs = inputs, outputs  # [(name, numpy dtype)]

    def run(self, arrays) -> list[np.ndarray]:
        cudart = cuda_runtime()
        check(cudart.cudaSetDevice(self.device_index), f"cudaSetDevice({self.device_index})")
        for (name, dtype), array in zip(self.inputs, arrays, strict=True):
            a = np.ascontiguousarray(array, dtype=dtype)
            if not self.context.set_input_shape(name, a.shape):
                raise InferenceError(f"TensorRT refused input {name} of shape {a.shape} (outside the engine's "
                                     "optimization profile)", runtime="tensorrt",
                                     hint="build the engine with that shape in its profile")
            self.context.set_tensor_address(name, self.buffers.upload(name, a, self.stream))
        results = []
        for name, dtype in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise InferenceError(f"output {name} has a data-dependent shape {shape}, which needs an output "
                                     "allocator that edgeaccel does not provide", runtime="tensorrt")
            out = np.empty(shape, dtype)
            self.context.set_tensor_address(name, self.buffers.ensure(name, out.nbytes))
            results.append(out)
        if not self.context.execute_async_v3(int(self.stream)):
            raise InferenceError("TensorRT's execute_async_v3 returned False", runtime="tensorrt")
        kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        for (name, _), out in zip(self.outputs, results, strict=True):
            pointer = self.buffers.held[name][0]
            check(cudart.cudaMemcpyAsync(out.ctypes.data, pointer, out.nbytes, kind, self.stream), "cudaMemcpyAsync")
        check(cudart.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")
        return results

    def close(self) -> None:
        self.buffers.free()
        cuda_runtime().cudaStreamDestroy(self.stream)
        self.context = None
