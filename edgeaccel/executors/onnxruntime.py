"""ONNX Runtime with explicit execution providers.

One InferenceSession is safe to share between threads (runtime facts), so concurrent runs share it; only streams of
several threads each (the adaptive executor's on 8 cores or more) are a session each, since concurrent runs of one
session share its intra-op pool (runtime facts). The model is loaded from its path, never from bytes: from bytes
ORT resolves external data against the working directory.
A session that did not get the provider it was asked for is an error, not ORT's silent CPU fallback.

Devices: CPU; CUDA and TensorRT (onnxruntime-gpu: TensorRT, then CUDA, then CPU for the nodes TensorRT
does not take; ``CUDA:1`` / ``TensorRT:1`` pick the GPU); NPU (onnxruntime-openvino's OpenVINO provider
with device_type NPU); QNN (onnxruntime-qnn, the Hexagon NPU through the HTP backend); CANN (onnxruntime-cann,
a Huawei Ascend NPU; ``CANN:1`` picks NPU 1); DirectML; CoreML.
Provider options are built by ``provider_options`` (a pure function); the caller's
``RuntimeOptions(native={"provider_options": {provider: {...}}})`` override them key by key.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import (
    MEMORY_HINT,
    DeviceUnavailableError,
    InferenceError,
    InputShapeError,
    ModelLoadError,
    UnsupportedModelError,
    looks_out_of_memory,
    runtime_message,
)
from ..modelinfo import Format, ModelInfo
from .. import packages
from ..packages import installed, installed_version
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions
from .device import DeviceRef, base_of
from .facts import DeviceSpec, RuntimeSurvey
from .gpu_memory import ORT_LIMIT_RULE, note as gpu_memory_note, ort_provider_options
from .pool import Pool
from .translate import ErrorRule, Failure, translate

log = logging.getLogger("edgeaccel.onnxruntime")

# device name -> the providers to ask for, best first; CPU always last so that ORT can place
# the nodes a GPU provider does not take (that partial placement is reported in info.details).
PROVIDERS = {
    "CPU": ("CPUExecutionProvider",),
    "CUDA": ("CUDAExecutionProvider", "CPUExecutionProvider"),
    "TensorRT": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
    "NPU": ("OpenVINOExecutionProvider", "CPUExecutionProvider"),
    "QNN": ("QNNExecutionProvider", "CPUExecutionProvider"),
    "DirectML": ("DmlExecutionProvider", "CPUExecutionProvider"),
    "CoreML": ("CoreMLExecutionProvider", "CPUExecutionProvider"),
    "CANN": ("CANNExecutionProvider", "CPUExecutionProvider"),
}
# What installs the build that has a device's provider: each replaces the CPU-only onnxruntime (they all
# install the same `onnxruntime` module, runtime facts).
INSTALL_FOR = {"CUDA": "pip install 'edgeaccel[gpu]'", "TensorRT": "pip install 'edgeaccel[gpu]' and TensorRT "
               "(pip install tensorrt, matching the onnxruntime-gpu build)",
               "NPU": "pip install onnxruntime-openvino", "QNN": "pip install onnxruntime-qnn",
               "DirectML": "pip install onnxruntime-directml",
               "CANN": "pip install onnxruntime-cann (matching the CANN toolkit; source its set_env.sh)"}
# The libraries a GPU build dlopens for a device's provider when a session asks for it. Runtime facts: ORT lists
# a provider in get_available_providers() whenever the build has it, loadable or not; a session then falls back
# with an "EP Error" banner printed to stdout (docs/runtime-facts.md).
PROVIDER_LIBRARIES = {"CUDA": ("libonnxruntime_providers_cuda.so",),
                      "TensorRT": ("libonnxruntime_providers_tensorrt.so", "libonnxruntime_providers_cuda.so")}
NEEDS_FROM = {"CUDA": "the CUDA runtime, cuBLAS and cuDNN this onnxruntime-gpu build was made for",
              "TensorRT": "TensorRT (pip install tensorrt, matching the onnxruntime-gpu build) and the CUDA libraries"}
# ORT's own fallback, off: a provider that fails while the session is made, or later in run() (EPFail), makes
# ORT print "EP Error ... Falling back" to stdout and carry on with the other providers, in run() silently
# re-creating the session on them (docs/runtime-facts.md). edgeaccel's failover is the visible one: the error
# reaches it. Versions without the keyword ignore it.
NO_ORT_FALLBACK = {"enable_fallback": 0}
# The hardware the probe must find for a device (its present_devices() names), and what to say without it.
HARDWARE = {"CUDA": ("CUDA", "no NVIDIA GPU with its driver on this machine (no PCI display device of vendor "
                             "0x10de bound to nvidia, no /proc/driver/nvidia/gpus)"),
            "TensorRT": ("CUDA", "no NVIDIA GPU with its driver on this machine (no PCI display device of vendor "
                                 "0x10de bound to nvidia, no /proc/driver/nvidia/gpus)"),
            "NPU": ("NPU", "no Intel NPU on this machine (no /dev/accel/accel* of the intel_vpu driver, no PCI "
                           "NPU of vendor 0x8086)"),
            "QNN": ("QNN", "no Qualcomm Hexagon NPU on this machine (no FastRPC compute-DSP node /dev/fastrpc-cdsp "
                           "or /dev/adsprpc-smd)"),
            "CANN": ("CANN", "no Huawei Ascend NPU on this machine (no /dev/davinciN of the Ascend driver, no PCI "
                             "device of vendor 0x19e5 class 0x1200)")}
# CANN's precision_mode (ONNX Runtime's CANN provider options; the values of Ascend's ATC --precision_mode) for the
# precision asked: the Ascend inference NPUs compute in f16 unless told to keep f32
CANN_PRECISION_MODE = {None: "force_fp16", "f16": "force_fp16", "f32": "force_fp32"}


@functools.lru_cache(maxsize=1)
def _ort():
    first = "onnxruntime" not in sys.modules
    import onnxruntime

    if first:  # edgeaccel brought ONNX Runtime into this process: its process-wide logger prints errors only
        quiet_default_logger(onnxruntime)
    return onnxruntime


def quiet_default_logger(ort) -> None:
    """ORT's default logger (not a session's, which session_options sets) prints warnings to stderr from outside
    any session: "No registered plugin EP device found for 'CUDAExecutionProvider'" during calibration on a GPU
    host (docs/runtime-facts.md). Errors still print: every one edgeaccel meets is raised as its own error too.
    An application that imported onnxruntime before edgeaccel keeps whatever it set."""
    try:
        ort.set_default_logger_severity(3)
    except Exception:  # an old or odd build without it: its warnings print, nothing else changes
        pass


def ort_version() -> str | None:
    return installed_version(packages.ONNXRUNTIME)


_device_kind = base_of


def _load_hint(f: Failure) -> str:
    message = f.message
    if looks_out_of_memory(message):
        return MEMORY_HINT
    if "Unsupported model IR version" in message:
        return "the model was saved with a newer ONNX IR than this onnxruntime reads; upgrade onnxruntime " \
               "or re-save with an older ir_version"
    if "opset" in message.lower():
        return "the model's opset is newer than this onnxruntime supports; upgrade onnxruntime"
    return "check the model with onnx.checker.check_model(path, full_check=True); it may be corrupted"


ERROR_RULES = (
    ORT_LIMIT_RULE,
    # an input of a dynamic dimension that the graph cannot take (a spatial size below a kernel's): the caller's
    # input, which every other executor would refuse alike or, as OpenVINO did on a 2x2 conv input, answer with
    # zeros; an InputShapeError is not failed over (model.fails_over) and is a 400 from `edgeaccel serve`
    ErrorRule(InputShapeError, contains=("Invalid input shape", "Got invalid dimensions for input",
                                         "Invalid rank for input"), stages=("run",),
              message="ONNX Runtime cannot run {name} on inputs of this shape: {message}",
              hint="give the input a shape the model takes: its fixed dimensions, and spatial sizes at least "
                   "its kernels'"),  # an allocation failure under gpu_mem_limit_mb names the limit
    ErrorRule(UnsupportedModelError, contains=("NOT_IMPLEMENTED", "Could not find an implementation"),
              message="ONNX Runtime failed to load {name}: {message}", hint=_load_hint),
    ErrorRule(ModelLoadError, message="ONNX Runtime failed to load {name}: {message}", hint=_load_hint),
)
_GPU_BUILD = "the NVIDIA driver and the CUDA/cuDNN libraries that the onnxruntime-gpu build names"


class OnnxRuntimeExecutor(Executor):
    """ONNX Runtime with one explicit execution provider per device, never its silent CPU fallback."""

    runtime = "onnxruntime"
    # what the runtime reads in an isolated worker (edgeaccel.isolation.environment)
    worker_environment = ("CUDA_*", "NVIDIA_*", "ORT_*", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
    label = "ONNX Runtime"
    formats = frozenset({Format.ONNX})
    device_specs = (
        DeviceSpec("CPU", "cpu", provider="CPUExecutionProvider"),
        # CUDA:N / TensorRT:N pick GPU N (provider option device_id). CUDA runs the model's own precision: the
        # CUDA provider has no f16 switch, so f16 is offered through TensorRT only.
        DeviceSpec("CUDA", "gpu", provider="CUDAExecutionProvider", extra="gpu", packages=("onnxruntime-gpu",),
                     requires=_GPU_BUILD, via="CUDAExecutionProvider (device_id), then CPU for unplaced nodes"),
        DeviceSpec("TensorRT", "gpu", provider="TensorrtExecutionProvider", extra="gpu",
                     packages=("onnxruntime-gpu",), requires="TensorRT libraries matching the onnxruntime-gpu build",
                     precisions=("f16", "int8"),
                     via="TensorrtExecutionProvider, then CUDA, then CPU for unplaced nodes; engine and timing caches "
                     "in <edgeaccel cache>/onnxruntime/tensorrt; f16 -> trt_fp16_enable, int8 -> trt_int8_enable"),
        DeviceSpec("NPU", "npu", provider="OpenVINOExecutionProvider", packages=("onnxruntime-openvino",),
                     requires="an Intel NPU with the intel_vpu driver and Intel's user-space NPU driver",
                     via="OpenVINOExecutionProvider with device_type NPU (its default is CPU)"),
        DeviceSpec("QNN", "npu", provider="QNNExecutionProvider", packages=("onnxruntime-qnn",),
                     requires="a Qualcomm SoC with the FastRPC compute DSP (/dev/fastrpc-cdsp)",
                     via="Qualcomm Hexagon NPU through QNN's HTP backend (libQnnHtp.so / QnnHtp.dll)"),
        # Ascend NPUs (Atlas 200/300/500, 310-class) through Huawei's CANN provider; CANN:N picks NPU N (device_id).
        # They compute in f16 by default (precision_mode force_fp16); f32 (force_fp32) is the opt-in.
        DeviceSpec("CANN", "npu", provider="CANNExecutionProvider", extra="ascend", packages=("onnxruntime-cann",),
                     requires="a Huawei Ascend NPU with its driver and the CANN toolkit (source set_env.sh)",
                     default_precision="f16", precisions=("f16", "f32"),
                     via="CANNExecutionProvider (device_id, precision_mode), then CPU for unplaced nodes"),
        DeviceSpec("DirectML", "gpu", provider="DmlExecutionProvider", packages=("onnxruntime-directml",),
                     planned=True, via="DmlExecutionProvider (Windows); not verified"),
        DeviceSpec("CoreML", "npu", provider="CoreMLExecutionProvider", planned=True,
                     via="CoreMLExecutionProvider (macOS); not verified"),
    )
    distributions = packages.ONNXRUNTIME
    extra = "onnx"
    preference = 10
    presence = "probe"
    precisions = (None, "f32")
    error_rules = ERROR_RULES
    gpu_mem_limit_devices = frozenset({"CUDA", "TensorRT"})  # the CUDA provider's arena cap

    @classmethod
    def survey(cls) -> RuntimeSurvey:
        import time

        dist, version = installed(packages.ONNXRUNTIME)
        if dist is None:
            return RuntimeSurvey(cls.runtime, False, None, None, False, (), "onnxruntime is not installed",
                                 cls.install_hint())
        start = time.perf_counter()
        try:
            providers = list(_ort().get_available_providers())
        except Exception as exc:
            return RuntimeSurvey(cls.runtime, True, version, dist, False, (), f"onnxruntime failed to import: "
                                 f"{runtime_message(exc)}", f"pip install --force-reinstall {dist}",
                                 round((time.perf_counter() - start) * 1000, 1))
        took = round((time.perf_counter() - start) * 1000, 1)
        by_provider = {names[0]: device for device, names in PROVIDERS.items()}
        listed = [by_provider[p] for p in providers if p in by_provider]
        cannot = {device: problem for device in listed if (problem := _provider_libraries_problem(device))}
        reaches = tuple(device for device in listed if device not in cannot)  # the build lists what it cannot load
        reason = "; ".join([f"providers: {', '.join(providers)}", *(why for why, _ in cannot.values())])
        return RuntimeSurvey(cls.runtime, True, version, dist, True, reaches, reason,
                             next((fix for _, fix in cannot.values()), None), took, {"providers": providers})

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        kind = _device_kind(device)
        if options.precision == "int8" and kind != "TensorRT" or \
                options.precision == "f16" and kind not in ("TensorRT", "CANN"):  # CUDA's provider has no such switch
            return (f"ONNX Runtime offers {options.precision} through TensorRT only"
                    f"{' (and through CANN on an Ascend NPU)' if options.precision == 'f16' else ''}, not {device}")
        why = super().rejects(model, device, options)
        if why:
            return why
        trt = options.runtime_options.get("provider_options", {}).get("TensorrtExecutionProvider", {})
        if options.precision == "int8" and not model.quantized and "trt_int8_calibration_table_name" not in trt:
            return ("TensorRT int8 needs a QDQ-quantized model (edgeaccel convert --to onnx-int8) or a calibration "
                    "table (provider_options TensorrtExecutionProvider.trt_int8_calibration_table_name)")
        return None

    @classmethod
    def availability(cls, device: str | None = None, *, root: str | Path = Path("/"),
                     identity=None) -> Availability:
        """``root``/``identity``: where the hardware is looked for (tests: fake device trees)."""
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
        reasons, fixes = [], []
        try:
            hardware = _hardware_problem(kind, device, root, identity)
        except ValueError as exc:
            return Availability(False, str(exc), version=version)
        if hardware:
            reasons.append(hardware[0])
            fixes.append(hardware[1])
        lacks = _build_lacks(kind, available)
        if lacks:
            reasons.append(lacks[0])
            fixes.append(lacks[1])
        if not reasons and Path(root) == Path("/"):
            unloadable = _provider_libraries_problem(kind)
            if unloadable:
                reasons.append(unloadable[0])
                fixes.append(unloadable[1])
        if reasons:
            return Availability(False, "; and ".join(reasons), fix="; ".join(f for f in fixes if f) or None,
                                version=version)
        return Availability(True, f"{wanted} available", version=version)

    @classmethod
    def unloadable(cls, device: str) -> tuple[str, str | None] | None:
        """A GPU or NPU the probe found that this build cannot open: the provider is not in the build (the
        CPU-only onnxruntime beside an NVIDIA GPU), or its library's dependencies are not on the loader path."""
        kind = _device_kind(device)
        if kind not in PROVIDERS or kind == "CPU":
            return None
        try:
            available = _ort().get_available_providers()
        except Exception as exc:
            return f"onnxruntime failed to import: {runtime_message(exc)}", None
        return _build_lacks(kind, available) or _provider_libraries_problem(kind)

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        ort = _ort()
        self._threads = options.stream_threads()
        so = session_options(self._threads, options)
        kind = _device_kind(device)
        if kind not in PROVIDERS:
            raise DeviceUnavailableError(f"unknown ONNX Runtime device {device!r}; known: {', '.join(PROVIDERS)}")
        # runtime facts: at ORT_ENABLE_ALL a valid model with a dynamic spatial dimension smaller than a kernel
        # kills the process with SIGFPE; ORT_ENABLE_EXTENDED reports InvalidArgument instead. ORT's default,
        # ALL, is what a plain InferenceSession runs, and the levels' answers differ in the last bits (2e-5 on
        # a small conv stack). So: ALL where validation found every window operator's spatial input static (a
        # dynamic batch only); on the CPU, ALL for the input shapes a WindowGuard proves safe, with an EXTENDED
        # session, made when first needed, for the others; EXTENDED where neither is possible.
        self._guard = None
        safe = not model.is_dynamic or model.details.get("static_windows", False)
        if not safe and kind == "CPU":
            try:
                from ..formats.onnx_checks import WindowGuard

                self._guard = WindowGuard(model.path, [t.name for t in model.inputs])
                safe = True
            except ImportError:  # no onnx package: nothing to prove it with
                pass
        self._extended = None
        self._extended_lock = threading.Lock()
        so.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if safe else ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        )
        self._optimization = str(so.graph_optimization_level).split(".")[-1]
        if kind != "CPU":  # which nodes the accelerator took (ORT >= 1.24 records it when asked)
            so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        providers = [(p, provider_options(p, device, options)) for p in PROVIDERS[kind]]
        self._providers_asked = providers
        source, cached, pending = str(model.path), False, None
        if options.cache_dir and kind == "CPU" and not model.extra_files and optimized_graph_cacheable(model):
            cached_path = self._cached_path(options.cache_dir, so)
            if cached_path.is_file():
                source, cached = str(cached_path), True
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done already
            else:
                pending = cached_path.with_suffix(f".tmp{os.getpid()}")
                so.optimized_model_filepath = str(pending)
        try:
            self._session = ort.InferenceSession(
                source, sess_options=so, providers=[p for p, _ in providers],
                provider_options=[o for _, o in providers], **NO_ORT_FALLBACK,
            )
        except Exception as exc:
            raise translate(type(self), exc, "load", model, device, options) from exc
        finally:
            if pending is not None and pending.is_file():
                os.replace(pending, pending.with_suffix(".onnx"))
        self._from_cache = cached
        try:  # names are decoded here: a tensor name that is not UTF-8 raises UnicodeDecodeError
            self._describe_session(model, kind, providers)
        except (DeviceUnavailableError, ModelLoadError):
            self._session = None
            raise
        except Exception as exc:
            self._session = None
            raise translate(type(self), exc, "describe", model, device, options) from exc
        self._run = self._session.run
        # Concurrent runs of one session share its intra-op pool: throughput streams of several threads each
        # (executor_options.throughput_stream_threads) are sessions of their own, made as requests overlap
        self._sessions: Pool | None = None
        if kind == "CPU" and self._threads > 1 and options.streams() > 1:
            self._stream_source = (source, so.graph_optimization_level)  # the first's: the same graph, the same answers
            self._stream_mtime, self._stream_warned = Path(source).stat().st_mtime_ns, False
            self._sessions = Pool(self._stream_session, limit=options.streams())
            self._sessions.prime(self._session)

    def _describe_session(self, model: ModelInfo, kind: str, providers: list) -> None:
        got = self._session.get_providers()
        if PROVIDERS[kind][0] not in got:
            raise DeviceUnavailableError(
                f"ONNX Runtime did not give this session {PROVIDERS[kind][0]}: it fell back to {got}",
                hint="the provider's libraries (CUDA, cuDNN, TensorRT) were not found or failed to load; "
                "`edgeaccel probe` shows which are on the loader path",
            )
        self._providers = got
        self._placement = placement(self._session, PROVIDERS[kind][0]) if kind != "CPU" else None
        self._provider_options = {p: o for p, o in providers if p in got and o}
        names_in = [i.name for i in self._session.get_inputs()]
        self._input_names = [spec.name if spec.name in names_in else names_in[k] for k, spec in enumerate(model.inputs)] \
            if len(names_in) == len(model.inputs) else names_in
        self._output_names = [o.name for o in self._session.get_outputs()]

    def _cached_path(self, cache_root: str, so) -> Path:
        """The optimized model ORT saved on an earlier load: keyed by content, ORT version, optimization
        level and this machine (ORT_ENABLE_ALL layouts are specific to the CPU they were made on)."""
        from ..cachedir import compiled_dir, hardware_fingerprint
        from ..digest import short

        level = str(so.graph_optimization_level).split(".")[-1]
        machine = short(hardware_fingerprint(), 12)
        return compiled_dir(cache_root, "onnxruntime") / f"{self.model.digest[:24]}-{ort_version()}-{level}-{machine}.onnx"

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo(
            runtime=self.runtime,
            version=ort_version() or "?",
            device=self.device,
            precision="int8 (QDQ)" if self.model.quantized else (self.options.precision or "f32"),
            threads=self._threads,
            details={"providers": list(self._providers), "provider_options": dict(self._provider_options),
                     "graph_optimization": self._optimization, "window_guard": self._guard is not None,
                     "optimized_model_from_cache": self._from_cache, **(self._placement or {}), **self._gpu_limit()},
        )

    def _gpu_limit(self) -> dict:
        """gpu_mem_limit_mb as applied (the provider options hold the bytes), or the note that it does not apply."""
        limit = self.options.gpu_mem_limit_mb
        if limit is None:
            return {}
        return {"gpu_mem_limit_mb": limit if _device_kind(self.device) in self.gpu_mem_limit_devices
                else gpu_memory_note(type(self), self.device, self.options)}
    @property
    def session(self):
        """The InferenceSession (``edgeaccel profile`` ends its profiling and reads the trace)."""
        return self._session

    def _extended_run(self):
        """The run of an ORT_ENABLE_EXTENDED session of the same model, for input shapes the WindowGuard could
        not prove safe at ORT_ENABLE_ALL."""
        with self._extended_lock:
            if self._session is None:
                raise RuntimeError("session closed")
            if self._extended is None:
                ort = _ort()
                so = session_options(self._threads, self.options)
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
                self._extended = ort.InferenceSession(
                    str(self.model.path), sess_options=so, providers=[p for p, _ in self._providers_asked],
                    provider_options=[o for _, o in self._providers_asked], **NO_ORT_FALLBACK)
            return self._extended.run

    def _stream_session(self):
        """One more session like the first, for a throughput stream of its own threads; the first session itself
        (shared, as ORT allows) where another cannot be opened now: its file was evicted from the cache or
        replaced, memory ran out. Said once in the log; the answers are the same, the stream has fewer threads."""
        first = self._session
        if first is None:
            raise RuntimeError("session closed")
        source, level = self._stream_source
        so = session_options(self._threads, self.options)
        so.graph_optimization_level = level
        try:
            if Path(source).stat().st_mtime_ns != self._stream_mtime:
                raise OSError(f"{source} changed since the first session read it")
            return _ort().InferenceSession(source, sess_options=so, providers=[p for p, _ in self._providers_asked],
                                           provider_options=[o for _, o in self._providers_asked], **NO_ORT_FALLBACK)
        except Exception as exc:
            if not self._stream_warned:
                self._stream_warned = True
                log.warning("%s: no session of its own for a throughput stream (%s); its streams share the first "
                            "session's %d threads", self.model.path.name, runtime_message(exc), self._threads)
            return first

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        try:
            run = self._run
            if self._guard is not None and not self._guard.safe(tuple(a.shape for a in inputs)):
                run = self._extended_run()
            elif (sessions := self._sessions) is not None:  # close() may set it to None meanwhile
                session = sessions.take()
                try:
                    return session.run(self._output_names, dict(zip(self._input_names, inputs, strict=True)))
                finally:
                    sessions.give(session)
            return run(self._output_names, dict(zip(self._input_names, inputs, strict=True)))
        except Exception as exc:
            if self._session is None:
                raise InferenceError("ONNX Runtime session is closed", runtime=self.runtime) from exc
            raise translate(type(self), exc, "run", self.model, self.device, self.options) from exc

    def close(self) -> None:
        self.stop_workers()
        self._session = None
        self._extended = None
        self._run = _closed
        if self._sessions is not None:
            self._sessions.drain()
            self._sessions = None


def optimized_graph_cacheable(model: ModelInfo) -> bool:
    """Whether ORT's saved optimized graph may stand in for the model on a later load.

    Not below ONNX IR version 4, where every initializer is also a graph input (ONNX model-zoo classics):
    ORT's ConstantSharing merges equal small initializers but keeps their names in the saved graph's inputs,
    so the cached graph asks for them as inputs ("Required inputs ([...]) are missing from input feed") and a
    second run would differ from the first. Such models are optimized again on each load instead."""
    ir_version = model.details.get("ir_version")
    return not (isinstance(ir_version, int) and ir_version < 4)


def session_options(threads: int, options: ExecutorOptions):
    """SessionOptions of every session an executor makes: its threads, the caller's session_config entries, and
    ORT's own log kept off fd 2 (red on a terminal): its errors come back as the exception translate() reports,
    its warnings are about graph internals. Fatal only, unless runtime_options["log_severity_level"] asks more.

    The intra-op workers spin while a run lasts and stop when it returns (``session.force_spinning_stop``,
    unless the caller's session_config says otherwise): ORT's default spins on for ~40 ms of a core after each
    run, which kept a core busy for an app calling at 30 fps and slowed whatever ran next on the same cores 2x
    (a scheduler's other executor, a second session); stopping costs a back-to-back loop nothing (runtime facts)."""
    so = _ort().SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = int(options.runtime_options.get("log_severity_level", 4))
    if options.runtime_options.get("profile_file_prefix"):  # edgeaccel profile: ORT's per-node trace
        so.enable_profiling = True
        so.profile_file_prefix = str(options.runtime_options["profile_file_prefix"])
    config = {"session.force_spinning_stop": "1", **options.runtime_options.get("session_config", {})}
    for key, value in config.items():
        so.add_session_config_entry(key, str(value))
    return so


def placement(session, provider: str) -> dict | None:
    """Nodes per execution provider and the share the accelerator's provider took: ORT places what it cannot
    run on the CPU without a word, so a "CUDA" session may run most of the model on the CPU. None where this
    onnxruntime cannot say (get_provider_graph_assignment_info arrived in 1.24)."""
    try:
        subgraphs = session.get_provider_graph_assignment_info()
    except Exception:
        return None
    nodes: dict[str, int] = {}
    for sub in subgraphs:
        nodes[sub.ep_name] = nodes.get(sub.ep_name, 0) + len(sub.get_nodes())
    total = sum(nodes.values())
    if not total:
        return None
    return {"nodes_per_provider": nodes, "accelerated_share": round(nodes.get(provider, 0) / total, 4)}


def device_index(device: str) -> int:
    """N of "CUDA:N" / "TensorRT:N" (0 without one); ValueError for anything else after the colon."""
    try:
        ref = DeviceRef.parse(device)
    except ValueError:
        ref = None
    if ref is None or ref.bus is not None:
        raise ValueError(f"{device!r}: the part after ':' must be a GPU index such as {base_of(device)}:0")
    return ref.index or 0


def provider_options(provider: str, device: str, options: ExecutorOptions) -> dict[str, str]:
    """The provider options for one provider of a session on ``device``: what edgeaccel sets, then the
    caller's ``runtime_options["provider_options"][provider]`` on top. Values are strings, as ORT's
    provider-option parser reads them (booleans as "True"/"False")."""
    cache = options.cache_dir
    opts: dict = {}
    if provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        opts["device_id"] = device_index(device)
    if provider == "TensorrtExecutionProvider":
        if cache:  # engines take minutes to build on a Jetson: keep them, keyed by TensorRT itself
            from ..cachedir import compiled_dir

            folder = compiled_dir(cache, "onnxruntime") / "tensorrt"
            folder.mkdir(parents=True, exist_ok=True)
            opts.update({"trt_engine_cache_enable": True, "trt_engine_cache_path": str(folder),
                         "trt_timing_cache_enable": True, "trt_timing_cache_path": str(folder)})
        if options.precision == "f16":
            opts["trt_fp16_enable"] = True
        if options.precision == "int8":
            opts["trt_int8_enable"] = True
    if provider == "CANNExecutionProvider":  # CANN:N is NPU N; the precision asked, as CANN's precision_mode
        opts["device_id"] = device_index(device)
        if options.precision in CANN_PRECISION_MODE:
            opts["precision_mode"] = CANN_PRECISION_MODE[options.precision]
    if provider == "OpenVINOExecutionProvider":
        opts["device_type"] = "NPU"  # the EP's default is CPU; this device is the NPU
        if cache:
            from ..cachedir import compiled_dir

            folder = compiled_dir(cache, "onnxruntime") / "openvino-ep"
            folder.mkdir(parents=True, exist_ok=True)
            opts["cache_dir"] = str(folder)
    opts.update(ort_provider_options(provider, options.gpu_mem_limit_mb))
    user: Mapping = options.runtime_options.get("provider_options", {}).get(provider, {})
    if provider == "QNNExecutionProvider" and not {"backend_path", "backend_type"} & set(user):
        # the HTP (Hexagon tensor processor) backend is the NPU; ORT docs name its library per OS
        opts["backend_path"] = "QnnHtp.dll" if sys.platform == "win32" else "libQnnHtp.so"
    opts.update(user)
    return {k: str(v) for k, v in opts.items()}


def _build_lacks(kind: str, available: Sequence[str]) -> tuple[str, str | None] | None:
    """(why, fix) when this onnxruntime build has no provider for ``kind``."""
    wanted = PROVIDERS[kind][0]
    if wanted in available:
        return None
    fix = f"{INSTALL_FOR[kind]} after pip uninstall onnxruntime (one build per environment)" if kind in INSTALL_FOR \
        else None
    return (f"this onnxruntime build ({installed(packages.ONNXRUNTIME)[0] or 'onnxruntime'}) has no {wanted} (it has "
            f"{', '.join(available)})", fix)


def _provider_libraries_problem(kind: str) -> tuple[str, str] | None:
    """(why, fix) when a provider library of ``kind`` needs a library the loader would not find here; None when
    all resolve (or the build has no such file: nothing to check)."""
    capi = Path(_ort().__file__).parent / "capi"
    for name in PROVIDER_LIBRARIES.get(kind, ()):
        library = capi / name
        if not library.is_file():
            continue
        try:
            missing = _unresolved(str(library))
        except Exception:  # an unreadable or odd file: no verdict against it (the session still reports)
            continue
        if missing:
            return (f"{PROVIDERS[kind][0]} cannot load here: {name} needs {', '.join(missing)}, which the dynamic "
                    "loader does not find", f"install {NEEDS_FROM[kind]} and put the folder holding "
                    f"{missing[0]} on LD_LIBRARY_PATH (or load them first, e.g. onnxruntime.preload_dlls())")
    return None


_RESOLVED: set[str] = set()  # provider libraries whose needs all resolved: that cannot change in a process


def _unresolved(library: str) -> tuple[str, ...]:
    """Asked at every selection; a "missing" verdict is not kept, as loading the libraries later (import torch,
    onnxruntime.preload_dlls()) makes them resolvable in this process."""
    from ..hardware.libraries import unresolved_needs

    if library in _RESOLVED:
        return ()
    missing = tuple(unresolved_needs(library))
    if not missing:
        _RESOLVED.add(library)
    return missing


def _hardware_problem(kind: str, device: str, root, identity) -> tuple[str, str | None] | None:
    """(why, fix) when the probe finds no hardware for ``kind`` below ``root``; None when it is there (or
    when ORT reaches the device without hardware of ours to look for: DirectML, CoreML)."""
    if kind not in HARDWARE:
        return None
    from ..hardware import survey_device as probe

    name, absent = HARDWARE[kind]
    report = probe(root, runtimes=False, identity=identity)
    found = [a for a in report.accelerators if name in a.devices]
    usable = [a for a in found if a.usable]
    index = device_index(device) if kind in ("CUDA", "TensorRT") else 0
    if usable and index >= len(usable):
        return (f"{device} asks for GPU {index} (counting from 0) but {len(usable)} usable NVIDIA GPU"
                f"{'s are' if len(usable) != 1 else ' is'} here", f"use an index below {len(usable)}")
    if usable:
        return None
    if found:  # there, but not usable: the probe says why (driver, node permissions)
        return f"{found[0].name}: {found[0].reason}", found[0].fix
    return absent, None


hardware_problem = _hardware_problem  # for the TensorRT executor, which reaches the same GPUs


def _closed(*_args, **_kwargs):
    raise RuntimeError("session closed")
