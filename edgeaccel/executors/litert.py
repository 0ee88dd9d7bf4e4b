"""LiteRT (TensorFlow Lite) on the CPU with XNNPACK, and on a Coral Edge TPU through Coral's delegate.

The interpreter comes from ``ai_edge_litert`` (the base install); ``tflite_runtime`` and ``tensorflow.lite``
are fallback imports only. One Interpreter is not safe to share between threads (runtime facts: 75% misleading
errors, some silently wrong results), so each concurrent caller takes its own from a pool.

On the Edge TPU (device strings in ``edgetpu.py``) each interpreter gets its own delegate from LiteRT's
``load_delegate(libedgetpu, {"device": ...})``, and the pool holds one interpreter: an Edge TPU runs one
inference at a time, and more interpreters would only queue on it. A delegate that cannot be created is
explained by ``edgetpu_diagnosis`` instead of LiteRT's bare "Failed to load delegate".
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    MEMORY_HINT,
    DeviceUnavailableError,
    ModelClosedError,
    ModelLoadError,
    UnsupportedModelError,
    looks_out_of_memory,
    runtime_message,
)
from ..modelinfo import Format, ModelInfo
from .. import packages
from ..packages import installed_version
from . import edgetpu
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions, Pool
from .device import base_of
from .facts import DeviceSpec, RuntimeSurvey
from .translate import ErrorRule, Failure, translate

log = logging.getLogger("edgeaccel.litert")

# The module holding Interpreter in each package of packages.LITERT
_INTERPRETER = {"ai_edge_litert": "ai_edge_litert.interpreter", "tflite_runtime": "tflite_runtime.interpreter",
                "tensorflow": "tensorflow.lite.python.interpreter"}


@functools.lru_cache(maxsize=1)
def interpreter_module() -> tuple[Any, str, str] | str:
    """(module, distribution, version) of the first usable interpreter, or the reason none is usable."""
    reasons = []
    for top, dist in packages.LITERT:
        module_name = _INTERPRETER[top]
        version = installed_version([(top, dist)])
        if version is None:
            reasons.append(f"{dist} not installed")
            continue
        if dist == "tflite-runtime" and int(np.__version__.split(".")[0]) >= 2 and version < "2.15":
            reasons.append(f"tflite-runtime {version} does not work with numpy {np.__version__}")
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a broken install raises anything from ImportError to AttributeError
            reasons.append(f"{dist} {version} failed to import: {runtime_message(exc)}")
            continue
        return module, dist, version
    return "; ".join(reasons)


def is_unresolved_custom_op(message: str) -> bool:
    return "unresolved custom op" in message or "failed to prepare" in message and "custom" in message


def _on_edgetpu(f: Failure) -> bool:
    return base_of(f.device) == "EdgeTPU"


def _flex_ops(f: Failure) -> list[str]:
    return [op for op in (f.model.custom_ops if f.model else ()) if op.startswith("Flex")]


def _too_new_for_libedgetpu(f: Failure) -> str:
    needed = edgetpu.required_runtime_versions(f.message)
    return (f"{f.name} was compiled for Edge TPU runtime version {needed[0]}; this libedgetpu is version "
            f"{needed[1]}: {f.message}")


def _custom_op_hint(f: Failure) -> str:
    if f.model is not None and f.model.needs_edgetpu:
        return ("it is compiled for the Edge TPU: run it with device='EdgeTPU' (needs a Coral Edge TPU and "
                "libedgetpu), or load its CPU twin (the same model before edgetpu_compiler)")
    ops = list(f.model.custom_ops) if f.model else []
    return f"the model uses custom ops {ops} that this LiteRT build does not register; use a runtime or build " \
           "that provides them"


def _silent_failure_hint(f: Failure) -> str:
    hint = "the model may be corrupted or need a newer LiteRT (pip install -U ai-edge-litert)"
    if f.message.endswith("with no message"):  # measured: LiteRT says nothing when an allocation fails
        return f"LiteRT gave no reason; it does so when memory runs out ({MEMORY_HINT}), else {hint}"
    return hint


ERROR_RULES = (
    ErrorRule(DeviceUnavailableError, when=lambda f: _on_edgetpu(f) and edgetpu.required_runtime_versions(f.message),
              message=_too_new_for_libedgetpu,
              hint="recompile it with edgetpu_compiler -m <this runtime's version>, or install a newer libedgetpu"),
    ErrorRule(DeviceUnavailableError, when=lambda f: _on_edgetpu(f) and is_unresolved_custom_op(f.message)
              and "edgetpu-custom-op" in f.message,
              message="the delegate loaded but did not take the edgetpu-custom-op of {name}: {message}",
              hint=f"it is not Coral's libedgetpu; unset ${edgetpu.LIBRARY_ENV} or point it at libedgetpu"),
    ErrorRule(UnsupportedModelError, when=lambda f: bool(_flex_ops(f)) or "Select TensorFlow op" in f.message,
              message=lambda f: f"LiteRT cannot run {f.name}: it holds TensorFlow operators "
                                f"({', '.join(_flex_ops(f)) or 'Flex'}) that need the Flex delegate, which "
                                "ai-edge-litert does not have",
              hint="the model was converted with SELECT_TF_OPS: convert it again with TFLITE_BUILTINS only, or run "
              "it with TensorFlow's own tf.lite.Interpreter (pip install tensorflow), which links the Flex delegate"),
    ErrorRule(UnsupportedModelError, when=lambda f: is_unresolved_custom_op(f.message),
              message="LiteRT cannot run {name}: {message}", hint=_custom_op_hint),
    ErrorRule(ModelLoadError, when=lambda f: not looks_out_of_memory(f.exc), message="LiteRT failed to load {name}: "
              "{message}", hint=_silent_failure_hint),
    ErrorRule(ModelLoadError, stages=("describe",), message="LiteRT loaded {name} but cannot describe its tensors: "
              "{message}", hint="the model's tensor names or metadata are corrupted; export it again"),
)


class LiteRTExecutor(Executor):
    """LiteRT's Interpreter on the CPU (XNNPACK) or on a Coral Edge TPU through libedgetpu."""

    runtime = "litert"
    # what the runtime reads in an isolated worker (edgeaccel.isolation.environment)
    worker_environment = ("EDGEACCEL_EDGETPU_LIBRARY",)
    label = "LiteRT"
    formats = frozenset({Format.TFLITE, Format.EDGETPU_TFLITE})
    device_specs = (
        DeviceSpec("CPU", "cpu", delegate="XNNPACK", via="Interpreter with the XNNPACK delegate (num_threads = "
                     "usable cores)"),
        # The compiled model is one edgetpu-custom-op; the CPU twin stays on the CPU. Device strings in edgetpu.py.
        DeviceSpec("EdgeTPU", "edgetpu", delegate="libedgetpu.so.1", formats=frozenset({Format.EDGETPU_TFLITE}),
                     requires="libedgetpu.so.1 from Coral's apt repository (libedgetpu1-std, or libedgetpu1-max for "
                     "the faster clock); not on PyPI, and the PyPI name `pycoral` is an unrelated project",
                     via='Interpreter(experimental_delegates=[load_delegate(libedgetpu, {"device": "usb:0"})]), one '
                     "interpreter per Edge TPU; USB (1a6e:089a / 18d1:9302) or PCIe (/dev/apex_N)"),
        # Not driven yet: see litert_npu.py for what it takes (ai-edge-litert 2.3.0's Intel OpenVINO dispatch
        # links OpenVINO 2026.3 exactly, and with no compiler plugin NPU|CPU runs silently on the CPU).
        DeviceSpec("NPU", "npu", planned=True, via="CompiledModel.from_file(path, options=Options("
                     "hardware_accelerators=NPU|CPU, ...)), checking is_fully_accelerated()",
                     requires="a vendor dispatch library that loads and the NPU's driver"),
    )
    distributions = packages.LITERT
    preference = 10  # fastest CPU path for quantized .tflite here (runtime facts: mobilenet_v2 quant 3.8 vs 5.0 ms)
    presence = "probe"
    error_rules = ERROR_RULES

    @classmethod
    def availability(cls, device: str | None = None, *, root: str | Path = Path("/"),
                     identity=None) -> Availability:
        """``root``/``identity`` survey another tree or account (tests: fake device trees)."""
        found = interpreter_module()
        if isinstance(found, str):
            return Availability(False, f"no TFLite interpreter: {found}", fix="pip install ai-edge-litert")
        _, dist, version = found
        base = base_of(device or "CPU")
        if base == "CPU":
            return Availability(True, f"{dist} installed", version=version)
        if base == "EdgeTPU":
            from .edgetpu_diagnosis import diagnose

            try:
                diagnosis = diagnose(device, root=root, identity=identity, litert=(dist, version))
            except ValueError as exc:
                return Availability(False, str(exc), version=version)
            return Availability(diagnosis.ok, diagnosis.reason, fix=diagnosis.fix, version=version)
        if base == "NPU":
            from .litert_npu import npu_availability

            return npu_availability(version)
        return Availability(False, f"LiteRT drives CPU and EdgeTPU, not {device!r}", version=version)

    @classmethod
    def survey(cls) -> RuntimeSurvey:
        """The interpreter found, and whether the Edge TPU delegate library is findable and loads."""
        import time

        from ..hardware.libraries import find_edgetpu_library

        library = find_edgetpu_library()
        details: dict[str, Any] = {"edgetpu_delegate": library.path, "edgetpu_delegate_loads": None}
        dist, version = packages.installed(cls.distributions)
        if dist is None:
            return RuntimeSurvey(cls.runtime, False, None, None, False, (), "no TFLite interpreter is installed",
                                 "pip install ai-edge-litert", details=details)
        start = time.perf_counter()
        found = interpreter_module()
        took = round((time.perf_counter() - start) * 1000, 1)
        if isinstance(found, str):
            return RuntimeSurvey(cls.runtime, True, version, dist, False, (), f"no usable TFLite interpreter: "
                                 f"{found}", "pip install -U ai-edge-litert", took, details)
        _, used_dist, used_version = found
        reaches, reason, fix = ["CPU"], f"{used_dist} interpreter with XNNPACK", None
        if library.found:
            check = edgetpu.check_library(library.path)
            details["edgetpu_delegate_loads"] = check.loaded
            if check.loaded:
                reaches.append("EdgeTPU")
                reason += f"; Edge TPU delegate {library.path}"
            else:
                details["edgetpu_delegate_error"] = check.error
                reason += f"; Edge TPU delegate {library.path} does not load: {check.error}"
                fix = "reinstall libedgetpu1-std and its dependency libusb-1.0-0 (sudo apt-get install --reinstall " \
                      "libedgetpu1-std libusb-1.0-0)"
        else:
            reason += f"; no Edge TPU delegate ({library.filename} not found)"
        return RuntimeSurvey(cls.runtime, True, used_version, used_dist, True, tuple(reaches), reason, fix, took,
                             details)

    @classmethod
    def explain_absence(cls, model: ModelInfo, device: str) -> tuple[str, str | None] | None:
        """An Edge TPU-compiled model with no usable Edge TPU: the device, libedgetpu and the node permission,
        each with its fix, and the CPU twin beside the model that would run it."""
        if base_of(device) != "EdgeTPU" or model.format is not Format.EDGETPU_TFLITE:
            return None
        from .edgetpu_explanation import explain_edgetpu_model

        try:
            explained = explain_edgetpu_model(model.path, device)
        except ValueError:
            return None
        return explained.reason, explained.fix

    @classmethod
    def rejects(cls, model: ModelInfo, device: str, options: ExecutorOptions) -> str | None:
        on_edgetpu = base_of(device) == "EdgeTPU"
        if model.format is Format.EDGETPU_TFLITE and not on_edgetpu:
            return ("compiled for the Edge TPU: its body is one edgetpu-custom-op that only the Edge TPU delegate "
                    f"runs, not LiteRT on {device}; load its CPU twin (the model before edgetpu_compiler)")
        if on_edgetpu and model.format is Format.TFLITE:
            return ("a plain .tflite gains nothing on the Edge TPU: its delegate takes only the edgetpu-custom-op "
                    "that edgetpu_compiler makes (compile it with edgetpu_compiler)")
        return super().rejects(model, device, options)

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions, delegates: Sequence = ()) -> None:
        super().__init__(model, device, options)
        found = interpreter_module()
        if isinstance(found, str):
            raise ModelLoadError(f"LiteRT is not usable: {found}", runtime=self.runtime, hint="pip install ai-edge-litert")
        self._module, self._dist, self._version = found
        self._delegates = list(delegates)
        self._closed = False
        self._threads = options.stream_threads()
        self._edgetpu: _EdgeTpu | None = None
        if base_of(device) == "EdgeTPU":
            try:
                spec = edgetpu.parse_device(device)
                delegate_options = edgetpu.delegate_options(spec, options.runtime_options.get("edgetpu_options"))
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            self._edgetpu = _EdgeTpu(spec, edgetpu.library_name(), delegate_options)
        elif base_of(device) != "CPU":
            raise DeviceUnavailableError(f"LiteRT drives CPU and EdgeTPU, not {device!r}")
        first = self._new_slot()  # load once now so that a bad model fails here, not at the first run()
        try:
            # LiteRT decodes every tensor name here: a name that is not UTF-8 raises UnicodeDecodeError
            self._in_index = [d["index"] for d in first.interpreter.get_input_details()]
            self._out_index = [d["index"] for d in first.interpreter.get_output_details()]
        except Exception as exc:
            raise translate(type(self), exc, "describe", model, device) from exc
        self._dynamic = model.is_dynamic
        self._stateful = _has_variable_tensors(model.path)
        # One Edge TPU runs one inference at a time: one interpreter per device (concurrent callers queue).
        # Otherwise up to 8 one-thread interpreters for callers of run() beyond the streams; streams of several
        # threads each (the adaptive twin on 8+ cores) stop at their count, or more would oversubscribe the cores.
        default = options.streams() if options.throughput and self._threads > 1 else 8
        limit = 1 if self._edgetpu else max(options.runtime_options.get("max_interpreters", default), options.streams())
        self._pool: Pool[_Slot] = Pool(self._new_slot, limit=limit, close=_Slot.release)
        self._pool.prime(first)
        if self._edgetpu:
            self._edgetpu.warnings = self._edgetpu_warnings()

    def _new_slot(self) -> _Slot:
        delegates = list(self._delegates)
        if self._edgetpu:
            delegates.append(self._load_edgetpu_delegate())
        kwargs: dict[str, Any] = {"model_path": str(self.model.path), "num_threads": self._threads}
        if delegates:
            kwargs["experimental_delegates"] = delegates
        try:
            with _first_interpreter_quietly():
                interpreter = self._module.Interpreter(**kwargs)
                interpreter.allocate_tensors()
        except Exception as exc:
            raise translate(type(self), exc, "load", self.model, self.device) from exc
        return _Slot(interpreter, delegates)

    def _load_edgetpu_delegate(self):
        """One delegate from LiteRT's own loader; checked first with dlopen so that a missing library or a
        library that is no delegate gets a diagnosis (LiteRT's loader then raises from a half-built object)."""
        tpu = self._edgetpu
        check = edgetpu.check_library(tpu.library)
        if not check.loaded:
            raise self._unavailable(f"the Edge TPU delegate {tpu.library} does not load: {check.error}")
        if not check.is_delegate:
            raise self._unavailable(f"{tpu.library} is not a TFLite delegate plugin: {check.error}")
        tpu.runtime_version = check.runtime_version
        try:
            return self._module.load_delegate(tpu.library, tpu.options)
        except Exception as exc:
            # LiteRT raises ValueError("Failed to load delegate from LIB\n" + what the delegate reported)
            text = str(exc)
            native = text.split("\n", 1)[1].strip() if "\n" in text else ""
            said = f": {native}" if native else " and gave no reason"
            raise self._unavailable(f"{tpu.library} could not open {tpu.spec.label} ({self.device}){said}",
                                    nothing_found="libedgetpu gives no reason when it opens no device; another "
                                                  "process may hold the Edge TPU, or a USB one may need replugging"
                                    ) from exc

    def _unavailable(self, first_line: str, nothing_found: str | None = None) -> DeviceUnavailableError:
        from .edgetpu_diagnosis import diagnose

        diagnosis = diagnose(self.device, litert=(self._dist, self._version), library=self._edgetpu.library)
        report = diagnosis.report()
        if diagnosis.ok and nothing_found:
            report = (report + "\n" if report else "") + f"  [?] every check passed; {nothing_found}"
        return DeviceUnavailableError(f"{first_line}\n{report}" if report else first_line,
                                      hint=diagnosis.fix or "run `edgeaccel probe` for the Edge TPU and its library")

    def _edgetpu_warnings(self) -> list[str]:
        """Non-blocking findings (a USB 2 link, a libedgetpu built for an old TensorFlow), logged and kept in
        info.details: the model runs, but the user should know."""
        from .edgetpu_diagnosis import diagnose

        try:
            diagnosis = diagnose(self.device, litert=(self._dist, self._version), library=self._edgetpu.library)
        except Exception as exc:  # a diagnosis bug must not fail a delegate that loaded
            return [f"diagnosis failed: {exc}"]
        texts = [f.text for f in diagnosis.warnings if f.topic in ("usb-speed", "version") and f.fix]
        for text in texts:
            log.warning("%s: %s", self.device, text)
        return texts

    @property
    def info(self) -> ExecutorInfo:
        precision = _quantized_label(self.model) if self.model.quantized else "f32"
        details: dict[str, Any] = {"package": self._dist, "xnnpack": True, "delegates": len(self._delegates)}
        if self._edgetpu:
            tpu = self._edgetpu
            precision = "int8 (Edge TPU)" if self.model.needs_edgetpu else precision
            details.update(edgetpu_placement(self.model.path))
            details.update({"delegates": len(self._delegates) + 1, "edgetpu_library": tpu.library,
                            "edgetpu_options": dict(tpu.options), "edgetpu_runtime": tpu.runtime_version,
                            "interpreters": 1, "warnings": list(tpu.warnings)})
        return ExecutorInfo(
            runtime=self.runtime,
            version=self._version,
            device=self.device,
            precision=precision,
            threads=self._threads,
            details=details,
        )

    @property
    def concurrency(self) -> int:
        return 1 if self._edgetpu else super().concurrency

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self._closed:  # the pool would build a fresh interpreter: a closed executor must not run
            raise self._closed_error()
        try:
            slot = self._pool.take()
        except RuntimeError:  # closed while this caller waited for an interpreter
            raise self._closed_error() from None
        try:
            interpreter = slot.interpreter
            if self._dynamic:
                slot.fit(self._in_index, inputs)
            for index, array in zip(self._in_index, inputs, strict=True):
                interpreter.set_tensor(index, array)
            if self._stateful:  # each run starts from the model's initial state, as every other runtime's does
                interpreter.reset_all_variables()
            interpreter.invoke()
            return [interpreter.get_tensor(index) for index in self._out_index]
        except Exception as exc:
            raise translate(type(self), exc, "run", self.model, self.device) from exc
        finally:
            self._pool.give(slot)

    def _closed_error(self) -> ModelClosedError:
        return ModelClosedError(f"{self.model.path.name} was closed (LiteRT on {self.device})",
                                hint="load it again with edgeaccel.load")

    @contextlib.contextmanager
    def borrowed_interpreter(self):
        """One of the pool's interpreters, held while the caller reads it (``edgeaccel profile`` lists its
        operators and delegated partitions)."""
        slot = self._pool.take()
        try:
            yield slot.interpreter
        finally:
            self._pool.give(slot)

    def close(self) -> None:
        self._closed = True
        self.stop_workers()
        self._pool.drain()


_first_made = threading.Event()
_first_lock = threading.Lock()


@contextlib.contextmanager
def _first_interpreter_quietly():
    """LiteRT logs "Created TensorFlow Lite XNNPACK delegate" from C++ on a process's first interpreter, with no
    switch to stop it: that one interpreter is made with fd 2 filtered (native_log); later ones cost nothing."""
    if _first_made.is_set():
        yield
        return
    from ..native_log import filtered_native_stderr

    with _first_lock, filtered_native_stderr():
        yield
        _first_made.set()


def _quantized_label(model: ModelInfo) -> str:
    """uint8 I/O models are labelled so: "int8" for a uint8 model misleads (issue: first-hour walk)."""
    kinds = {t.dtype.name for t in model.inputs if t.quantization is not None}
    return "uint8 (quantized)" if kinds == {"uint8"} else "int8 (quantized)"


def _has_variable_tensors(path) -> bool:
    """Whether the model keeps state in variable tensors (a Keras LSTM converted to UNIDIRECTIONAL_SEQUENCE_LSTM).
    LiteRT carries them from one invoke to the next: without a reset before each run, an answer depends on the
    inputs run before it and on which interpreter of the pool ran them (two apps sharing the model through
    ``edgeaccel serve`` would change each other's answers)."""
    from ..formats import tflite

    try:
        parsed = tflite.parse(Path(path).read_bytes())
    except Exception:  # described before it loaded: a reread that fails leaves the runs as they were
        return False
    return any(t.is_variable for sg in parsed.subgraphs for t in sg.tensors)


def edgetpu_placement(path) -> dict:
    """The operators edgetpu_compiler left outside the edgetpu-custom-op run on the CPU beside the Edge TPU: a
    partly compiled model is partly accelerated, which the caller must be able to see."""
    from ..formats import tflite

    try:
        parsed = tflite.parse(Path(path).read_bytes())
    except Exception:  # described before it loaded: a reread that fails says nothing about placement
        return {}
    ops = [parsed.opcodes[op.opcode_index] for op in parsed.primary.operators]
    on_cpu = [name for name in ops if name != "edgetpu-custom-op"]
    share = round((len(ops) - len(on_cpu)) / len(ops), 4) if ops else None
    return {"operators_on_cpu": on_cpu, "accelerated_share": share,
            "placement_note": "share of the model's operators; the edgetpu-custom-op holds every operator the "
                              "compiler mapped to the Edge TPU"}


class _EdgeTpu:
    """What the executor keeps about its Edge TPU: the parsed device, the library and options handed to
    load_delegate, and what it learnt on the way."""

    def __init__(self, spec: edgetpu.EdgeTpuDevice, library: str, options: dict[str, str]) -> None:
        self.spec = spec
        self.library = library
        self.options = options
        self.runtime_version: str | None = None
        self.warnings: list[str] = []


class _Slot:
    """One interpreter, the delegates it was built with, and the input shapes it is currently allocated for
    (models with dynamic dims)."""

    __slots__ = ("interpreter", "delegates", "shapes")

    def __init__(self, interpreter, delegates: Sequence = ()) -> None:
        self.interpreter = interpreter
        self.delegates = list(delegates)
        self.shapes: tuple = ()

    def release(self) -> None:
        """The interpreter first, then its delegates: a delegate must outlive the interpreter using it
        (LiteRT's Delegate destroys the native delegate when the last reference goes)."""
        self.interpreter = None
        self.delegates = []

    def fit(self, indices: list[int], inputs: Sequence[np.ndarray]) -> None:
        shapes = tuple(a.shape for a in inputs)
        if shapes == self.shapes:
            return
        # Not strict: LiteRT forgets a string input's dynamic dimensions (its shape signature) once the tensor
        # has been set, and a strict resize then refuses the next size (measured: a [-1] string input set at 3
        # cannot take 5). run() checked already that only the model's dynamic dimensions differ.
        for index, shape in zip(indices, shapes, strict=True):
            self.interpreter.resize_tensor_input(index, list(shape))
        self.interpreter.allocate_tensors()
        self.shapes = shapes
