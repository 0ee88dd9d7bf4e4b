"""ONNX Runtime with explicit execution providers.

One InferenceSession is safe to share between threads (FINDINGS), so there is no pool. The model is loaded
from its path, never from bytes: from bytes ORT resolves external data against the working directory.
A session that did not get the provider it was asked for is an error, not ORT's silent CPU fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ..errors import (
    MEMORY_HINT,
    DeviceUnavailableError,
    InferenceError,
    ModelLoadError,
    UnsupportedModelError,
    looks_out_of_memory,
    looks_out_of_range,
    out_of_range_error,
    runtime_message,
)
from ..modelinfo import Format, ModelInfo
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions, installed_version

# device name -> the providers to ask for, best first; CPU always last so that ORT can place
# the nodes a GPU provider does not take (that partial placement is reported in info.details).
PROVIDERS = {
    "CPU": ("CPUExecutionProvider",),
    "CUDA": ("CUDAExecutionProvider", "CPUExecutionProvider"),
    "TensorRT": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
    "OpenVINO": ("OpenVINOExecutionProvider", "CPUExecutionProvider"),
    "QNN": ("QNNExecutionProvider", "CPUExecutionProvider"),
    "DirectML": ("DmlExecutionProvider", "CPUExecutionProvider"),
    "CoreML": ("CoreMLExecutionProvider", "CPUExecutionProvider"),
}
EXTRA_FOR = {"CUDA": "gpu", "TensorRT": "gpu"}


@functools.lru_cache(maxsize=1)
def _ort():
    import onnxruntime

    return onnxruntime


DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-qnn", "onnxruntime-directml")


def ort_version() -> str | None:
    return installed_version(DISTRIBUTIONS)


def _device_kind(device: str) -> str:
    return device.split(":")[0]


class OnnxRuntimeExecutor(Executor):
    runtime = "onnxruntime"
    formats = frozenset({Format.ONNX})
    devices = tuple(PROVIDERS)
    distributions = DISTRIBUTIONS
    precisions = (None, "f32", "f16", "int8")  # f16/int8 only through TensorRT

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        why = super().rejects(model, device, options)
        if why:
            return why
        if options.precision in ("f16", "int8") and _device_kind(device) != "TensorRT":
            return f"ONNX Runtime offers {options.precision} through TensorRT only, not {device}"
        return None

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        version = ort_version()
        if version is None:
            return Availability(False, "onnxruntime is not installed", fix="pip install 'edgeaccel[onnx]'")
        try:
            available = _ort().get_available_providers()
        except Exception as exc:
            return Availability(False, f"onnxruntime failed to import: {runtime_message(exc)}", version=version)
        if device is None:
            return Availability(True, f"providers: {', '.join(available)}", version=version)
        kind = _device_kind(device)
        if kind not in PROVIDERS:
            return Availability(False, f"unknown ONNX Runtime device {device!r}; known: {', '.join(PROVIDERS)}")
        wanted = PROVIDERS[kind][0]
        if wanted not in available:
            extra = EXTRA_FOR.get(kind)
            fix = f"pip install 'edgeaccel[{extra}]' (and uninstall the CPU-only onnxruntime)" if extra else None
            return Availability(False, f"this onnxruntime build has no {wanted} (it has {', '.join(available)})",
                                fix=fix, version=version)
        return Availability(True, f"{wanted} available", version=version)

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        ort = _ort()
        self._threads = options.resolved_threads()
        so = ort.SessionOptions()
        so.intra_op_num_threads = self._threads
        so.inter_op_num_threads = 1
        # FINDINGS: at ORT_ENABLE_ALL a valid model with a dynamic spatial dimension smaller than a kernel
        # kills the process with SIGFPE; ORT_ENABLE_EXTENDED reports InvalidArgument instead.
        so.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED if model.is_dynamic else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        self._optimization = str(so.graph_optimization_level).split(".")[-1]
        for key, value in options.runtime_options.get("session_config", {}).items():
            so.add_session_config_entry(key, str(value))
        kind = _device_kind(device)
        device_id = int(device.split(":")[1]) if ":" in device else 0
        providers = [(p, self._provider_options(p, device_id)) for p in PROVIDERS[kind]]
        try:
            self._session = ort.InferenceSession(
                str(model.path), sess_options=so, providers=[p for p, _ in providers],
                provider_options=[o for _, o in providers],
            )
        except Exception as exc:
            message = runtime_message(exc)
            cls = UnsupportedModelError if "NOT_IMPLEMENTED" in message or "Could not find an implementation" in message else ModelLoadError
            kwargs = {} if cls is UnsupportedModelError else {"runtime": self.runtime}
            raise cls(
                f"ONNX Runtime failed to load {model.path.name}: {message}",
                hint=_load_hint(message),
                **kwargs,
            ) from exc
        try:  # names are decoded here: a tensor name that is not UTF-8 raises UnicodeDecodeError
            self._describe_session(model, kind)
        except (DeviceUnavailableError, ModelLoadError):
            self._session = None
            raise
        except Exception as exc:
            self._session = None
            raise ModelLoadError(
                f"ONNX Runtime loaded {model.path.name} but cannot describe its tensors: {runtime_message(exc)}",
                runtime=self.runtime, hint="the model's tensor names are corrupted; export it again",
            ) from exc
        self._run = self._session.run

    def _describe_session(self, model: ModelInfo, kind: str) -> None:
        got = self._session.get_providers()
        if PROVIDERS[kind][0] not in got:
            raise DeviceUnavailableError(
                f"ONNX Runtime did not give this session {PROVIDERS[kind][0]}: it fell back to {got}",
                hint="the provider's libraries (CUDA, cuDNN, TensorRT) were not found or failed to load; "
                "`edgeaccel probe` shows which are on the loader path",
            )
        self._providers = got
        names_in = [i.name for i in self._session.get_inputs()]
        self._input_names = [spec.name if spec.name in names_in else names_in[k] for k, spec in enumerate(model.inputs)] \
            if len(names_in) == len(model.inputs) else names_in
        self._output_names = [o.name for o in self._session.get_outputs()]

    def _provider_options(self, provider: str, device_id: int) -> dict:
        opts = dict(self.options.runtime_options.get("provider_options", {}).get(provider, {}))
        if provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
            opts.setdefault("device_id", device_id)
        if provider == "TensorrtExecutionProvider":
            if self.options.cache_dir:
                opts.setdefault("trt_engine_cache_enable", True)
                opts.setdefault("trt_engine_cache_path", self.options.cache_dir)
            if self.options.precision == "f16":
                opts.setdefault("trt_fp16_enable", True)
            if self.options.precision == "int8":
                opts.setdefault("trt_int8_enable", True)
        return {k: str(v) if isinstance(v, bool) else v for k, v in opts.items()}

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo(
            runtime=self.runtime,
            version=ort_version() or "?",
            device=self.device,
            precision="int8 (QDQ)" if self.model.quantized else (self.options.precision or "f32"),
            threads=self._threads,
            details={"providers": list(self._providers), "graph_optimization": self._optimization},
        )

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        try:
            return self._run(self._output_names, dict(zip(self._input_names, inputs)))
        except Exception as exc:
            if self._session is None:
                raise InferenceError("ONNX Runtime session is closed", runtime=self.runtime) from exc
            message = runtime_message(exc)
            if looks_out_of_range(message):
                raise out_of_range_error("ONNX Runtime", self.model.path.name, message) from exc
            raise InferenceError(
                f"ONNX Runtime failed to run {self.model.path.name}: {message}", runtime=self.runtime,
                hint=MEMORY_HINT if looks_out_of_memory(exc) else None,
            ) from exc

    def close(self) -> None:
        self._session = None
        self._run = _closed


def _closed(*_args, **_kwargs):
    raise RuntimeError("session closed")


def _load_hint(message: str) -> str:
    if looks_out_of_memory(message):
        return MEMORY_HINT
    if "Unsupported model IR version" in message:
        return "the model was saved with a newer ONNX IR than this onnxruntime reads; upgrade onnxruntime " \
               "or re-save with an older ir_version"
    if "opset" in message.lower():
        return "the model's opset is newer than this onnxruntime supports; upgrade onnxruntime"
    return "check the model with onnx.checker.check_model(path, full_check=True); it may be corrupted"
