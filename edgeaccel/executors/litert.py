"""LiteRT (TensorFlow Lite) on the CPU with XNNPACK.

The interpreter comes from ``ai_edge_litert`` (the base install); ``tflite_runtime`` and ``tensorflow.lite``
are fallback imports only. One Interpreter is not safe to share between threads (FINDINGS: 75% misleading
errors, some silently wrong results), so each concurrent caller takes its own from a pool.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import (
    MEMORY_HINT,
    InferenceError,
    ModelLoadError,
    UnsupportedModelError,
    looks_out_of_memory,
    looks_out_of_range,
    out_of_range_error,
    runtime_message,
)
from ..modelinfo import Format, ModelInfo
from .base import Availability, Executor, ExecutorInfo, ExecutorOptions, Pool

# (module holding Interpreter, distribution name for its version)
_INTERPRETER_MODULES = (
    ("ai_edge_litert.interpreter", "ai-edge-litert"),
    ("tflite_runtime.interpreter", "tflite-runtime"),
    ("tensorflow.lite.python.interpreter", "tensorflow"),
)


@functools.lru_cache(maxsize=1)
def interpreter_module() -> tuple[Any, str, str] | str:
    """(module, distribution, version) of the first usable interpreter, or the reason none is usable."""
    reasons = []
    for module_name, dist in _INTERPRETER_MODULES:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
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


class LiteRTExecutor(Executor):
    runtime = "litert"
    formats = frozenset({Format.TFLITE})
    devices = ("CPU",)
    distributions = tuple(dist for _, dist in _INTERPRETER_MODULES)

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        found = interpreter_module()
        if isinstance(found, str):
            return Availability(False, f"no TFLite interpreter: {found}", fix="pip install ai-edge-litert")
        if device not in (None, "CPU"):
            return Availability(False, f"LiteRT's CPU executor has no device {device!r}")
        _, dist, version = found
        return Availability(True, f"{dist} installed", version=version)

    def __init__(self, model: ModelInfo, device: str, options: ExecutorOptions, delegates: Sequence = ()) -> None:
        super().__init__(model, device, options)
        found = interpreter_module()
        if isinstance(found, str):
            raise ModelLoadError(f"LiteRT is not usable: {found}", runtime=self.runtime, hint="pip install ai-edge-litert")
        self._module, self._dist, self._version = found
        self._delegates = list(delegates)
        self._threads = options.resolved_threads()
        first = self._new_slot()  # load once now so that a bad model fails here, not at the first run()
        try:
            # LiteRT decodes every tensor name here: a name that is not UTF-8 raises UnicodeDecodeError
            self._in_index = [d["index"] for d in first.interpreter.get_input_details()]
            self._out_index = [d["index"] for d in first.interpreter.get_output_details()]
        except Exception as exc:
            raise ModelLoadError(
                f"LiteRT loaded {self.model.path.name} but cannot describe its tensors: {runtime_message(exc)}",
                runtime=self.runtime, hint="the model's tensor names or metadata are corrupted; export it again",
            ) from exc
        self._dynamic = model.is_dynamic
        self._pool: Pool[_Slot] = Pool(self._new_slot, limit=options.runtime_options.get("max_interpreters", 8))
        self._pool.prime(first)

    def _interpreter_kwargs(self) -> dict:
        kwargs: dict[str, Any] = {"model_path": str(self.model.path), "num_threads": self._threads}
        if self._delegates:
            kwargs["experimental_delegates"] = self._delegates
        return kwargs

    def _new_slot(self) -> _Slot:
        try:
            interpreter = self._module.Interpreter(**self._interpreter_kwargs())
            interpreter.allocate_tensors()
        except Exception as exc:
            message = runtime_message(exc)
            if is_unresolved_custom_op(message):
                raise UnsupportedModelError(
                    f"LiteRT cannot run {self.model.path.name}: {message}",
                    hint=f"the model uses custom ops {list(self.model.custom_ops)} that this LiteRT build does "
                    "not register; use a runtime or build that provides them",
                ) from exc
            hint = "the model may be corrupted or need a newer LiteRT (pip install -U ai-edge-litert)"
            if looks_out_of_memory(exc):
                hint = MEMORY_HINT
            elif not str(exc).strip():  # measured: LiteRT says nothing when an allocation fails
                hint = f"LiteRT gave no reason; it does so when memory runs out ({MEMORY_HINT}), else {hint}"
            raise ModelLoadError(
                f"LiteRT failed to load {self.model.path.name}: {message}", runtime=self.runtime, hint=hint,
            ) from exc
        return _Slot(interpreter)

    @property
    def info(self) -> ExecutorInfo:
        precision = "int8 (quantized)" if self.model.quantized else "f32"
        return ExecutorInfo(
            runtime=self.runtime,
            version=self._version,
            device=self.device,
            precision=precision,
            threads=self._threads,
            details={"package": self._dist, "xnnpack": True, "delegates": len(self._delegates)},
        )

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        slot = self._pool.take()
        try:
            interpreter = slot.interpreter
            if self._dynamic:
                slot.fit(self._in_index, inputs)
            for index, array in zip(self._in_index, inputs):
                interpreter.set_tensor(index, array)
            interpreter.invoke()
            return [interpreter.get_tensor(index) for index in self._out_index]
        except Exception as exc:
            message = runtime_message(exc)
            if looks_out_of_range(message):
                raise out_of_range_error("LiteRT", self.model.path.name, message) from exc
            raise InferenceError(f"LiteRT failed to run {self.model.path.name}: {message}", runtime=self.runtime) from exc
        finally:
            self._pool.give(slot)

    def close(self) -> None:
        self._pool.drain()


class _Slot:
    """One interpreter and the input shapes it is currently allocated for (models with dynamic dims)."""

    __slots__ = ("interpreter", "shapes")

    def __init__(self, interpreter) -> None:
        self.interpreter = interpreter
        self.shapes: tuple = ()

    def fit(self, indices: list[int], inputs: Sequence[np.ndarray]) -> None:
        shapes = tuple(a.shape for a in inputs)
        if shapes == self.shapes:
            return
        for index, shape in zip(indices, shapes):
            self.interpreter.resize_input_tensor(index, list(shape), strict=True)
        self.interpreter.allocate_tensors()
        self.shapes = shapes
