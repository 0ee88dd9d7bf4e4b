"""Format detection from bytes, and model descriptions that agree with the raw runtimes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import MODELS
from edgeaccel import formats
from edgeaccel.errors import ModelValidationError, UnsupportedFormatError
from edgeaccel.modelinfo import Format

pytestmark = pytest.mark.shared

TFLITE_MODELS = sorted(p.name for p in MODELS.glob("*.tflite")) if MODELS.is_dir() else []


@pytest.mark.parametrize("name", TFLITE_MODELS)
def test_tflite_description_matches_litert(name):
    from ai_edge_litert.interpreter import Interpreter

    info = formats.describe(MODELS / name)
    expected = Format.EDGETPU_TFLITE if name.endswith("_edgetpu.tflite") else Format.TFLITE
    assert info.format is expected
    interpreter = Interpreter(model_path=str(MODELS / name))
    for spec, detail in zip(info.inputs, interpreter.get_input_details(), strict=True):
        assert spec.name == detail["name"]
        assert list(spec.shape) == list(detail["shape"])
        assert spec.dtype == np.dtype(detail["dtype"])
        scale, zero = detail["quantization"]
        if scale:
            assert spec.quantization.scale[0] == pytest.approx(scale)
            assert spec.quantization.zero_point[0] == zero
        else:
            assert spec.quantization is None
    assert [s.name for s in info.outputs] == [d["name"] for d in interpreter.get_output_details()]
    assert len(info.digest) == 64


def test_edgetpu_model_reports_its_custom_op():
    info = formats.describe(MODELS / "mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    assert info.custom_ops == ("edgetpu-custom-op",)
    assert info.needs_edgetpu


def test_onnx_described_without_runtime_with_qdq_quantization():
    info = formats.describe(MODELS / "mobilenet_v2_1.0_224_quant.onnx")
    assert info.format is Format.ONNX
    (inp,) = info.inputs
    assert (inp.name, inp.shape, inp.dtype) == ("input", (1, 224, 224, 3), np.dtype(np.uint8))
    # the scale and zero point come from the DequantizeLinear past tf2onnx's Transpose
    assert inp.quantization.scale == (0.0078125,) and inp.quantization.zero_point == (128,)
    assert info.outputs[0].shape == (1, 1001)


def test_openvino_ir_described_with_weights_checked():
    info = formats.describe(MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml")
    assert info.format is Format.OPENVINO_IR
    assert info.inputs[0].shape == (1, 224, 224, 3)
    assert info.outputs[0].name == "MobilenetV2/Predictions/Softmax"
    assert info.extra_files[0].suffix == ".bin"


def test_ir_without_its_bin_is_refused(tmp_path):
    shutil.copy(MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml", tmp_path / "m.xml")
    with pytest.raises(ModelValidationError, match="m.bin"):
        formats.describe(tmp_path / "m.xml")


def test_ir_with_a_short_bin_is_refused(tmp_path):
    shutil.copy(MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml", tmp_path / "m.xml")
    data = (MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.bin").read_bytes()
    (tmp_path / "m.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelValidationError, match="truncated|does not belong"):
        formats.describe(tmp_path / "m.xml")


def test_xml_with_entities_is_refused(tmp_path):
    bomb = b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaa">]><net name="x" version="11"><layers/></net>'
    (tmp_path / "bomb.xml").write_bytes(bomb)
    with pytest.raises(ModelValidationError, match="DTD|entities"):
        formats.describe(tmp_path / "bomb.xml")


def test_format_comes_from_content_not_name(tmp_path):
    onnx_named_tflite = tmp_path / "really_onnx.tflite"
    shutil.copy(MODELS / "mobilenet_v2_1.0_224_quant.onnx", onnx_named_tflite)
    assert formats.detect_format(onnx_named_tflite) is Format.ONNX
    tflite_named_onnx = tmp_path / "really_tflite.onnx"
    shutil.copy(MODELS / "split_concat.tflite", tflite_named_onnx)
    assert formats.detect_format(tflite_named_onnx) is Format.TFLITE


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "empty"),
        (b"hello, this is a text file\n", "text"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "image"),
        (bytes(range(256)) * 4, "not a TFLite"),
    ],
)
def test_non_models_are_refused_with_what_they_look_like(tmp_path, content, match):
    path = tmp_path / "model.tflite"
    path.write_bytes(content)
    with pytest.raises(UnsupportedFormatError, match=match):
        formats.describe(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(UnsupportedFormatError, match="not found"):
        formats.describe(tmp_path / "nope.tflite")


def test_truncated_tflite_is_refused(tmp_path):
    data = (MODELS / "mobilenet_v1_0.25_128_quant.tflite").read_bytes()
    path = tmp_path / "cut.tflite"
    path.write_bytes(data[:5000])
    with pytest.raises(ModelValidationError):
        formats.describe(path)
