"""TFLite (float) -> ONNX with tf2onnx's TFLite front end.

Why from the float .tflite and not from Keras or the SavedModel: tf2onnx 1.17's ``from_keras`` fails on Keras 3
models (KeyError on a keras_tensor name, measured with TensorFlow 2.21 / Keras 3.15), while its TFLite path reads
the static-shaped, constant-folded graph this package already produced, so the ONNX model has exactly the
float reference's inputs, outputs and shapes. tf2onnx itself imports TensorFlow, so it belongs to the
``tensorflow`` extra.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import ConversionError, RuntimeNotInstalledError, runtime_message
from . import onnx_util
from .tf_source import no_interpreter_deprecation

log = logging.getLogger("edgeaccel.convert")

DEFAULT_OPSET = 17  # carried by IR 8: every onnxruntime since 1.14 and OpenVINO read it


def convert(src: Path, out: Path, opset: int = DEFAULT_OPSET) -> Path:
    try:
        import tf2onnx
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"converting TFLite to ONNX needs tf2onnx ({exc})",
                                       hint="pip install 'edgeaccel[tensorflow]'") from exc
    _quiet(tf2onnx)
    try:
        with no_interpreter_deprecation():  # tf2onnx reads constants through tf.lite.Interpreter
            model, _ = tf2onnx.convert.from_tflite(str(src), opset=opset)
    except Exception as exc:
        raise ConversionError(f"tf2onnx could not convert {src.name}: {runtime_message(exc)}") from exc
    unsupported = sorted({n.op_type for n in model.graph.node if n.domain not in ("", "ai.onnx")}
                         | {n.op_type for n in model.graph.node if n.op_type.startswith("TFL_")})
    if unsupported:
        raise ConversionError(f"tf2onnx has no ONNX equivalent for {', '.join(unsupported)} in {src.name}",
                              hint="replace those ops in the model, or deploy the .tflite with LiteRT")
    return onnx_util.save(model, out)


def _quiet(tf2onnx) -> None:
    # tf2onnx logs every step at INFO and prints unsupported ops at ERROR; edgeaccel reports those itself.
    logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
    try:
        tf2onnx.logging.set_level(logging.CRITICAL)
    except AttributeError:
        pass
