"""TensorRT itself: NVIDIA's ``tensorrt`` package with a CUDA binding (``cuda-python``), imported lazily.

Two ways in:
- a serialized engine (``.engine`` / ``.plan``, Ultralytics' metadata-prefixed ones too), run as it is. Its
  header says which TensorRT built it; an engine from another TensorRT version is refused with that reason
  before it is deserialized, and one built for another GPU with TensorRT's own account of the two compute
  capabilities. Either way the ONNX twin handed in with it takes over, visibly (``model.fallbacks``);
- an ONNX model, built into an engine at f32 (the model's own), f16 or int8 (a QDQ model, or calibration
  samples in ``RuntimeOptions(native={"tensorrt": {"int8_calibration": [...]}})``). The engine is kept in
  ``<cache>/tensorrt`` under a key of the model's content, the GPU's name and compute capability, the TensorRT
  version and the build options (``tensorrt_build.engine_cache_key``); ``info.details`` says how long the build
  took and whether the engine came from the cache.

``TensorRT:N`` runs on GPU N. One execution context, stream and set of device buffers per concurrent caller
(``Pool``). ONNX Runtime's TensorRT provider reaches the same GPU; for an ONNX model the profile's runtime order
and the selector's rules decide between the two (ONNX Runtime reads ONNX natively and ranks first).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import packages
from ..errors import DeviceUnavailableError, InferenceError, ModelLoadError, RuntimeNotInstalledError
from ..modelinfo import Format, ModelInfo, TensorSpec
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions, Pool
from .device import base_of
from .facts import DeviceSpec, RuntimeSurvey
from .tensorrt_build import (
    BuildOptions,
    cached_engine_paths,
    cuda_binding,
    engine_cache_key,
    gpu_refusal,
    int8_refusal,
    tensorrt_version,
    twin_fix,
    version_refusal,
)
from .translate import ErrorRule, translate

INSTALL = "pip install 'edgeaccel[tensorrt]' (tensorrt and cuda-python; on a Jetson, TensorRT comes with JetPack)"
ERROR_RULES = (
    ErrorRule(ModelLoadError, contains=("Version tag does not match", "magicTagRead", "Magic tag does not match"),
              message="TensorRT refused {name}: {message}",
              hint="the engine was serialized by another TensorRT version: rebuild it here from its ONNX model"),
)


@functools.lru_cache(maxsize=1)
def _trt():
    try:
        import tensorrt  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"TensorRT is not importable: {exc}", hint=INSTALL) from exc
    return tensorrt


class TensorRTExecutor(Executor):
    """TensorRT engines on an NVIDIA GPU: an engine file as it is, or one built from ONNX and cached."""

    runtime = "tensorrt"
    # what the runtime reads in an isolated worker (edgeaccel.isolation.environment)
    worker_environment = ("CUDA_*", "NVIDIA_*")
    label = "TensorRT"
    formats = frozenset({Format.TENSORRT_ENGINE, Format.ONNX})
    native_formats = frozenset({Format.TENSORRT_ENGINE})
    device_specs = (
        DeviceSpec("TensorRT", "gpu", extra="tensorrt", packages=("tensorrt", "cuda-python"),
                     requires="an NVIDIA GPU with its driver", precisions=("f16", "int8"),
                     via="TensorRT's own runtime (tensorrt + cuda-python): engines as they are, ONNX built into "
                     "engines kept in <edgeaccel cache>/tensorrt; TensorRT:N picks GPU N"),
    )
    distributions = packages.TENSORRT
    extra = "tensorrt"
    # Before ONNX Runtime (10) among runtimes reading a format natively: an engine handed in was built for this
    # GPU, and runs before ONNX Runtime's provider on its ONNX twin. For an ONNX model ONNX Runtime still ranks
    # first (it reads ONNX natively; here ONNX is converted), its TensorRT provider being the verified path.
    preference = 5
    presence = "probe"
    precisions = (None, "f32")
    error_rules = ERROR_RULES
    load_hint = "run the ONNX model through ONNX Runtime (CUDA or TensorRT provider) instead"

    # -- facts ----------------------------------------------------------------------------------------------
    @classmethod
    def installed(cls) -> str | None:
        return tensorrt_version()

    @classmethod
    def survey(cls) -> RuntimeSurvey:
        version = tensorrt_version()
        if version is None:
            return RuntimeSurvey(cls.runtime, False, None, None, False, (), "TensorRT is not installed", INSTALL)
        dist = packages.installed(packages.TENSORRT)[0] or "tensorrt (system package)"
        found = cls.availability("TensorRT")
        reaches = ("TensorRT",) if found else ()
        return RuntimeSurvey(cls.runtime, True, version, dist, bool(found), reaches,
                             "reaches TensorRT" if found else f"TensorRT: {found.reason}", found.fix,
                             details={"cuda_binding": cuda_binding()})

    @classmethod
    def availability(cls, device: str | None = None, *, root: str | Path = Path("/"),
                     identity=None) -> Availability:
        """``root``/``identity``: where the GPU is looked for (tests: fake device trees)."""
        version = tensorrt_version()
        reasons, fixes = [], []
        if version is None:
            reasons.append("TensorRT is not installed (no tensorrt module)")
            fixes.append(INSTALL)
        elif cuda_binding() is None:
            reasons.append("no CUDA binding for TensorRT's buffers (neither cuda-bindings nor cuda-python is "
                           "installed)")
            fixes.append("pip install cuda-python")
        if device is not None:
            if base_of(device) != "TensorRT":
                return Availability(False, f"unknown TensorRT device {device!r}; known: TensorRT, TensorRT:N",
                                    version=version)
            from .onnxruntime import hardware_problem

            try:
                hardware = hardware_problem("TensorRT", device, root, identity)
            except ValueError as exc:
                return Availability(False, str(exc), version=version)
            if hardware:
                reasons.insert(0, hardware[0])
                fixes.insert(0, hardware[1] or "")
        if reasons:
            return Availability(False, "; and ".join(reasons), fix="; ".join(f for f in fixes if f) or None,
                                version=version)
        return Availability(True, "TensorRT and an NVIDIA GPU are here", version=version)

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        why = super().rejects(model, device, options)
        if why:
            return why
        try:
            build = BuildOptions.from_runtime_options(options.runtime_options, options.precision)
        except Exception as exc:
            return str(getattr(exc, "message", exc))
        if model.format is Format.TENSORRT_ENGINE:
            if options.precision not in (None, "f32"):
                return (f"a TensorRT engine's precision was fixed when it was built; {options.precision} needs a build "
                        "from the ONNX model")
            return version_refusal(model.path.name, model.details.get("tensorrt_version"), cls.installed(),
                                   build.version_compatible)
        if options.precision == "int8":
            return int8_refusal(model.quantized, build)
        return None

    @classmethod
    def explain_absence(cls, model: ModelInfo, device: str) -> tuple[str, str | None] | None:
        """An engine with no TensorRT or no GPU here: each missing piece, and the ONNX twin beside it."""
        if base_of(device) != "TensorRT" or model.format is not Format.TENSORRT_ENGINE:
            return None
        found = cls.availability(device)
        missing = found.reason if not found else "TensorRT cannot run it here"
        version = model.details.get("tensorrt_version", "unknown")
        reason = (f"{model.path.name} is a TensorRT engine (built by TensorRT {version}; GPU unknown from its header), "
                  f"which needs TensorRT and an NVIDIA GPU: {missing}")
        fix = "; ".join(f for f in (found.fix, "or " + twin_fix(model.path)) if f)
        return reason, fix

    # -- a loaded engine --------------------------------------------------------------------------------------
    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions) -> None:
        super().__init__(model, device, options)
        from . import tensorrt_gpu as gpu
        from .onnxruntime import device_index
        from .tensorrt_build import cuda_runtime

        try:
            trt = _trt()
            cudart = cuda_runtime()
        except ImportError as exc:
            raise DeviceUnavailableError(f"TensorRT cannot run here: {exc}", hint=INSTALL) from exc
        self._build = BuildOptions.from_runtime_options(options.runtime_options, options.precision)
        self._index = device_index(device)
        gpu.check(cudart.cudaSetDevice(self._index), f"cudaSetDevice({self._index})")
        self._gpu, self._compute = gpu.gpu_facts(self._index)
        self._logger = gpu.collecting_logger(trt)
        self._details: dict = {"gpu": self._gpu, "compute_capability": self._compute, "tensorrt": trt.__version__}
        if model.format is Format.TENSORRT_ENGINE:
            plan = self._engine_file(trt)
        else:
            plan = self._built_or_cached(trt, gpu)
        self._runtime = trt.Runtime(self._logger)
        dla = self._build.dla_core if self._build.dla_core is not None else \
            (model.details.get("metadata") or {}).get("dla")
        if dla is not None:
            self._runtime.DLA_core = int(dla)
        self._engine = self._runtime.deserialize_cuda_engine(plan)
        if self._engine is None:
            refused = gpu_refusal(model.path.name, self._logger.errors, self._gpu)
            if refused:
                raise DeviceUnavailableError(refused, hint=twin_fix(model.path))
            raise translate(type(self), RuntimeError("; ".join(self._logger.errors) or "deserialization failed"),
                            "load", model, device)
        self._io_specs(trt)
        self._slots = Pool(lambda: gpu.Slot(self._engine, self._in, self._out, self._index), limit=options.streams(),
                           close=lambda slot: slot.close())
        self._slots.prime(gpu.Slot(self._engine, self._in, self._out, self._index))  # fail now, not on the first run

    def _engine_file(self, trt) -> bytes:
        """The engine's bytes (after Ultralytics' metadata), refused before deserializing when its header names
        another TensorRT version than the one imported."""
        data = Path(self.model.path).read_bytes()[int(self.model.details.get("engine_offset", 0)):]
        refused = version_refusal(self.model.path.name, self.model.details.get("tensorrt_version"), trt.__version__,
                                  self._build.version_compatible)
        if refused:
            raise DeviceUnavailableError(refused, hint=twin_fix(self.model.path))
        self._details.update(engine_from="file", built_by=self.model.details.get("tensorrt_version"))
        return data

    def _built_or_cached(self, trt, gpu) -> bytes:
        """The engine of the ONNX model: from the cache when one was built here for the same model, GPU, TensorRT
        and options, else built now (and kept when there is a cache folder)."""
        from ..cachedir import compiled_dir

        key = engine_cache_key(self.model.digest, self._gpu, self._compute, trt.__version__, self._build)
        self._details["cache_key"] = key
        paths = cached_engine_paths(compiled_dir(self.options.cache_dir, "tensorrt"), key) \
            if self.options.cache_dir else None
        if paths is not None and paths[0].is_file():
            facts = json.loads(paths[1].read_text()) if paths[1].is_file() else {}
            self._details.update(engine_from="cache", engine_file=str(paths[0]), build_s=facts.get("build_s"))
            return paths[0].read_bytes()
        plan, seconds = gpu.build_engine(trt, self._logger, Path(self.model.path), self._build)
        self._details.update(engine_from="built", build_s=round(seconds, 3))
        if paths is not None:
            pending = paths[0].with_suffix(f".tmp{os.getpid()}")
            pending.write_bytes(plan)
            os.replace(pending, paths[0])
            paths[1].write_text(json.dumps({"model": self.model.digest, "gpu": self._gpu,
                                            "compute_capability": self._compute, "tensorrt": trt.__version__,
                                            "options": self._build.key_parts(), "build_s": round(seconds, 3),
                                            "built_at": time.time()}, indent=1))
            self._details["engine_file"] = str(paths[0])
        return plan

    def _io_specs(self, trt) -> None:
        engine = self._engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        ins, outs, self._in, self._out = [], [], [], []
        for name in names:
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            shape = tuple(None if d < 0 else int(d) for d in engine.get_tensor_shape(name))
            spec = TensorSpec(name, shape, dtype)
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                ins.append(spec)
                self._in.append((name, dtype))
            else:
                outs.append(spec)
                self._out.append((name, dtype))
        declared = [t.name for t in self.model.inputs]
        if declared and sorted(declared) == sorted(t.name for t in ins):  # keep the ONNX model's input order
            ins.sort(key=lambda t: declared.index(t.name))
            self._in.sort(key=lambda p: declared.index(p[0]))
        self._inputs, self._outputs = tuple(ins), tuple(outs)
        self._details["io_tensors"] = len(names)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def info(self) -> ExecutorInfo:
        precision = self.options.precision or ("int8 (QDQ)" if self.model.quantized else "as built"
                                               if self.model.format is Format.TENSORRT_ENGINE else "f32")
        return ExecutorInfo(self.runtime, self._details.get("tensorrt", "?"), self.device, precision,
                            details=dict(self._details))

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        slots = getattr(self, "_slots", None)
        if slots is None:
            raise InferenceError("the TensorRT engine is closed", runtime=self.runtime)
        slot = slots.take()
        try:
            return slot.run(inputs)
        except Exception as exc:
            raise translate(type(self), exc, "run", self.model, self.device) from exc
        finally:
            slots.give(slot)

    def close(self) -> None:
        self.stop_workers()
        slots, self._slots = getattr(self, "_slots", None), None
        if slots is not None:
            slots.drain()
        self._engine = None
