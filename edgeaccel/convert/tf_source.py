"""A TensorFlow model (SavedModel folder or Keras file) prepared for the TFLite converter: one serving signature
with static input shapes (batch 1), saved as a SavedModel in a scratch folder.

Why the detour through a fresh SavedModel: ``TFLiteConverter.from_concrete_functions`` on a Keras 3 model keeps
the weights as resource variables (VAR_HANDLE / READ_VARIABLE ops that no accelerator maps and tf2onnx cannot
read), and ``from_keras_model`` leaves the batch dimension dynamic (shape_signature -1). Re-saving the
signature with static shapes and converting with ``from_saved_model`` gives frozen constants and static shapes.

TensorFlow is imported here only, inside functions: it is the ``tensorflow`` extra.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConversionError, RuntimeNotInstalledError
from ..modelinfo import TensorSpec
from .sources import Source, SourceKind

log = logging.getLogger("edgeaccel.convert")

SIGNATURE = "serving_default"


@contextlib.contextmanager
def no_interpreter_deprecation():
    """TF's own calibrator and tf2onnx build tf.lite.Interpreter objects, which warn on every use that the
    class is deprecated; the warning is about their code, not the user's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*tf\.lite\.Interpreter is deprecated")
        yield


def import_tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's import banner tells a user nothing
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise RuntimeNotInstalledError(
            f"converting a TensorFlow/Keras model needs TensorFlow, which is not installed ({exc})",
            hint="pip install 'edgeaccel[tensorflow]'",
        ) from exc
    return tf


@dataclass
class StaticModel:
    """A SavedModel with one static-shaped serving signature, ready for ``TFLiteConverter.from_saved_model``."""

    saved_model: Path
    inputs: tuple[TensorSpec, ...]  # in the order the converted model takes them


def prepare(source: Source, scratch: Path, input_shapes: dict[str, tuple[int, ...]] | None = None) -> StaticModel:
    """Load ``source`` and write a static-shaped copy of its serving signature under ``scratch``."""
    tf = import_tensorflow()
    input_shapes = dict(input_shapes or {})
    if source.kind is SourceKind.KERAS:
        exported = scratch / "keras_export"
        _export_keras(tf, source.path, exported)
        saved = exported
    elif source.kind is SourceKind.SAVEDMODEL:
        saved = source.path
    else:
        raise ConversionError(f"{source.path.name} is {source.kind.value}, not a TensorFlow model")
    try:
        loaded = tf.saved_model.load(str(saved))
    except Exception as exc:  # TF raises OSError, ValueError, its own errors.* for broken folders
        raise ConversionError(f"TensorFlow cannot load the SavedModel {saved}: {exc}") from exc
    signatures = dict(getattr(loaded, "signatures", {}) or {})
    if not signatures:
        raise ConversionError(f"the SavedModel {source.path} has no serving signature",
                              hint="save it with tf.saved_model.save(obj, path, signatures=...) or model.export(path)")
    if SIGNATURE not in signatures:
        if len(signatures) > 1:
            raise ConversionError(f"the SavedModel {source.path} has several signatures ({', '.join(signatures)}) "
                                  f"and none named {SIGNATURE!r}", hint="export the one to deploy as serving_default")
    name, signature = (SIGNATURE, signatures[SIGNATURE]) if SIGNATURE in signatures else next(iter(signatures.items()))
    _, kwargs = signature.structured_input_signature
    names = sorted(kwargs)
    specs = []
    for n in names:
        spec = kwargs[n]
        shape = _static_shape(n, spec.shape.as_list(), input_shapes.pop(n, None))
        specs.append(tf.TensorSpec(shape, spec.dtype, name=n))
    if input_shapes:
        raise ConversionError(f"--input-shape names {sorted(input_shapes)}, but the model's inputs are {names}")
    module = tf.Module()
    module.loaded = loaded  # keeps the variables tracked so that they are saved (and then frozen) with it
    module.serve = tf.function(lambda *xs: signature(**dict(zip(names, xs, strict=True))), input_signature=specs)
    static = scratch / "static_savedmodel"
    try:
        tf.saved_model.save(module, str(static), signatures={SIGNATURE: module.serve.get_concrete_function()})
    except Exception as exc:
        raise ConversionError(f"TensorFlow cannot trace {source.path.name} with static shapes: {exc}",
                              hint="check --input-shape against what the model accepts") from exc
    log.debug("static signature %s of %s saved to %s", name, source.path, static)
    inputs = tuple(TensorSpec(s.name, tuple(s.shape.as_list()), np.dtype(s.dtype.as_numpy_dtype)) for s in specs)
    return StaticModel(static, inputs)


def _export_keras(tf, path: Path, out: Path) -> None:
    try:
        model = tf.keras.models.load_model(str(path), compile=False)
    except Exception as exc:  # Keras raises ValueError/TypeError/OSError on bad or custom-layer files
        raise ConversionError(f"Keras cannot load {path.name}: {exc}",
                              hint="a model with custom layers must be exported as a SavedModel "
                                   "(model.export(path)) where those layers are importable") from exc
    if hasattr(model, "export"):  # Keras 3
        model.export(str(out), verbose=False) if _accepts_verbose(model.export) else model.export(str(out))
    else:  # tf.keras 2 (tf_keras)
        tf.saved_model.save(model, str(out))


def _accepts_verbose(fn) -> bool:
    import inspect

    try:
        return "verbose" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _static_shape(name: str, shape: list[int | None] | None, override: tuple[int, ...] | None) -> list[int]:
    if override is not None:
        if shape is not None and (len(override) != len(shape) or any(
                d is not None and d != o for d, o in zip(shape, override, strict=True))):
            raise ConversionError(f"--input-shape {name}={'x'.join(map(str, override))} does not fit the "
                                  f"model's input {name!r} of shape {_dims(shape)}")
        return list(override)
    if shape is None:
        raise ConversionError(f"input {name!r} has an unknown rank", hint=f"pass --input-shape {name}=1x...")
    fixed = [1 if (i == 0 and d is None) else d for i, d in enumerate(shape)]  # batch 1: what edge devices run
    if any(d is None for d in fixed):
        raise ConversionError(
            f"input {name!r} has dynamic dimensions {_dims(shape)}; TFLite and the Edge TPU need static ones",
            hint=f"pass --input-shape {name}={'x'.join(str(d or 224) for d in fixed)} (the size you deploy)")
    return [d for d in fixed if d is not None]  # all of them, checked just above


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape)
