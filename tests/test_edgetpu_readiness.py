"""Edge TPU readiness from the file alone, on the real models in ../shared (their _edgetpu twins show what the
compiler actually did with them)."""

from __future__ import annotations

import shutil

import pytest

from conftest import MODELS
from edgeaccel.convert.edgetpu import readiness
from edgeaccel.convert.edgetpu_ops import DOC_URL, SUPPORTED

pytestmark = pytest.mark.shared


def test_fully_quantized_mobilenet_is_ready():
    report = readiness(MODELS / "mobilenet_v2_1.0_224_quant.tflite")
    assert report.ready and report.fully_integer and not report.unmapped and report.ops_on_cpu == 0
    assert report.op_count > 60


def test_deeplab_argmax_stays_on_the_cpu():
    """Its compiled twin keeps ARG_MAX outside the edgetpu-custom-op: the report names that op."""
    report = readiness(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite")
    assert [i.op for i in report.unmapped] == ["ARG_MAX"]
    assert report.ops_on_cpu == 1 and not report.ready
    assert any("RESIZE_BILINEAR" in n for n in report.notes)  # documented: may not map, depending on size


def test_float_parts_are_found():
    report = readiness(MODELS / "keras_lstm_mnist_ptq.tflite")
    assert not report.fully_integer and report.wide_tensors


def test_already_compiled_and_custom_ops():
    compiled = readiness(MODELS / "mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    assert not compiled.ready and "already compiled" in str(compiled.model_issues[0])
    custom = readiness(MODELS / "model_invoking_error.tflite")
    assert [i.op for i in custom.unmapped] == ["fake-op-double"]


def test_compiler_command_is_printed_never_run(tmp_path):
    report = readiness(MODELS / "split_concat.tflite", out_dir=tmp_path)
    assert report.command.startswith("edgetpu_compiler -s -o ") and str(tmp_path) in report.command
    assert report.compiler == shutil.which("edgetpu_compiler")
    text = "\n".join(report.lines())
    assert DOC_URL in text and report.command in text
    assert not list(tmp_path.iterdir())  # nothing was compiled


def test_supported_list_uses_tflite_builtin_names():
    from edgeaccel.formats.tflite_ops import BUILTIN_OPS

    assert set(SUPPORTED) <= set(BUILTIN_OPS)
