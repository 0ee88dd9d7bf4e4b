"""TensorRT engine files without TensorRT: recognized by their bytes, described from their header, refused with
what is missing, and passed over for their ONNX twin, visibly. Nothing here deserializes an engine (no TensorRT,
no GPU on this machine: the README lists what is unverified).

The engines below are TEST DATA built byte by byte in the layout NVIDIA's trtexec reads
(NVIDIA/TensorRT samples/common/sampleEngines.cpp, printPlanVersion): uint32 LE plan tag 0x74727466 ("ftrt"),
uint32 LE serialization version at 4 (0), TensorRT major/minor/patch/build at bytes 24-27. The body after the
header is filler, not a real engine. Ultralytics' files put a uint32 LE length and JSON metadata before it
(ultralytics/engine/exporter.py).
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import ModelError, ModelValidationError, UnsupportedModelError
from edgeaccel.formats import detect_format
from edgeaccel.modelinfo import Format
from edgeaccel.executors.tensorrt import TensorRTExecutor


def engine_bytes(version=(10, 3, 0, 26), serialization: int = 0, body: int = 64) -> bytes:
    """Test data: an engine header as trtexec lays it out, then filler."""
    header = b"ftrt" + struct.pack("<I", serialization) + bytes(16) + bytes(version)
    assert len(header) == 28
    return header + bytes(range(256))[:body]


def ultralytics(engine: bytes, metadata: dict) -> bytes:
    """Test data: Ultralytics' prefix (uint32 LE length, JSON) before an engine."""
    meta = json.dumps(metadata).encode()
    return struct.pack("<I", len(meta)) + meta + engine


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_an_engine_is_recognized_by_its_header_with_its_tensorrt_version(tmp_path):
    path = write(tmp_path, "yolo.bin", engine_bytes((8, 6, 1, 6)))  # the name does not matter: the bytes do
    assert detect_format(path) is Format.TENSORRT_ENGINE
    info = edgeaccel.describe(path)
    assert info.format is Format.TENSORRT_ENGINE and (info.inputs, info.outputs) == ((), ())
    assert info.details["tensorrt_version"] == "8.6.1.6" and info.details["serialization_version"] == 0
    assert info.details["gpu"].startswith("unknown: the engine header names no GPU")  # never guessed
    assert info.details["engine_offset"] == 0 and "wrapper" not in info.details


def test_another_serialization_layout_says_its_version_is_unknown(tmp_path):
    info = edgeaccel.describe(write(tmp_path, "m.plan", engine_bytes((10, 3, 0, 26), serialization=7)))
    assert info.details["tensorrt_version"] == "unknown" and info.details["serialization_version"] == 7


def test_an_ultralytics_engine_keeps_its_metadata(tmp_path):
    meta = {"task": "detect", "imgsz": [640, 640], "names": {"0": "person"}, "dla": None}
    path = write(tmp_path, "yolov8n.engine", ultralytics(engine_bytes((10, 3, 0, 26)), meta))
    info = edgeaccel.describe(path)
    assert info.format is Format.TENSORRT_ENGINE and info.details["wrapper"] == "ultralytics"
    assert info.details["metadata"] == meta and info.details["tensorrt_version"] == "10.3.0.26"
    assert info.details["engine_offset"] == 4 + len(json.dumps(meta).encode())


@pytest.mark.parametrize("name, data, seen", [
    ("m.engine", b"\x89PNG\r\n\x1a\n" + bytes(40), "89 50 4e 47"),
    ("m.plan", b"hello, this is a text file\n" * 3, "68 65 6c 6c"),
    ("m.trt", struct.pack("<I", 6) + b'{"a":1' + b"ftrt" + bytes(40), "06 00 00 00"),  # broken JSON: no engine
    ("m.engine", b"trtf" + bytes(40), "74 72 74 66"),  # the tag's bytes in the wrong order
])
def test_a_file_named_like_an_engine_that_is_not_one_is_a_clear_model_error(tmp_path, name, data, seen):
    with pytest.raises(ModelValidationError) as info:
        edgeaccel.describe(write(tmp_path, name, data))
    assert f"{name} is named like a TensorRT engine but is not one" in info.value.message
    assert seen in info.value.message and "'ftrt'" in info.value.message
    assert "trtexec --onnx" in info.value.hint


def test_a_truncated_engine_says_so(tmp_path):
    with pytest.raises(ModelValidationError, match=r"truncated TensorRT engine: 12 bytes after the plan tag"):
        edgeaccel.describe(write(tmp_path, "m.engine", engine_bytes()[:12]))


def test_an_onnx_model_named_engine_is_read_as_onnx(tmp_path):
    from onnx_models import small_conv

    onnx_path = small_conv(tmp_path / "conv.onnx")
    renamed = write(tmp_path, "conv.engine", onnx_path.read_bytes())
    assert edgeaccel.describe(renamed).format is Format.ONNX  # content, not the name


def test_loading_an_engine_here_names_what_is_missing_and_what_installs_it(tmp_path):
    path = write(tmp_path, "m.engine", engine_bytes((10, 3, 0, 26)))
    with pytest.raises(UnsupportedModelError) as info:
        edgeaccel.load(path)
    message = info.value.message
    assert message.startswith("m.engine is a TensorRT engine (built by TensorRT 10.3.0.26; GPU unknown from its "
                              "header), which needs TensorRT and an NVIDIA GPU: ")
    assert "TensorRT is not installed" in message
    if not TensorRTExecutor.availability("TensorRT").reason.startswith("TensorRT"):  # no GPU here either
        assert "no NVIDIA GPU with its driver on this machine" in message
    assert "pip install 'edgeaccel[tensorrt]'" in info.value.hint
    assert "pass the ONNX model itself" in info.value.hint  # no twin beside it


def test_an_engine_on_a_gpu_without_tensorrt_still_says_what_it_is_and_how_to_run_it(tmp_path):
    """Seen on a GPU machine without TensorRT: the engine's rejection was the bare "tensorrt is not installed",
    since its device was present. What is missing is the runtime, and the twin is still the way out."""
    from dataclasses import replace

    from edgeaccel.choice import _explain_absences
    from edgeaccel.selection.selector import MachineFacts, Ranking, Rejection

    path = write(tmp_path, "m.engine", engine_bytes((10, 3, 0, 26)))
    generic = Rejection(edgeaccel.describe(path), "tensorrt", "TensorRT", "tensorrt is not installed", "pip install x")
    gpu_here = MachineFacts({"tensorrt": None}, frozenset({"CPU", "CUDA", "TensorRT"}))  # as the probe says
    explained = _explain_absences(Ranking(rejected=[generic]), gpu_here).rejected[0]
    assert explained.reason.startswith("m.engine is a TensorRT engine (built by TensorRT 10.3.0.26")
    assert "TensorRT is not installed" in explained.reason and "pass the ONNX model itself" in explained.fix
    other = replace(generic, reason="not the executor asked for (litert)", fix=None)  # a reason of its own stays
    assert _explain_absences(Ranking(rejected=[other]), gpu_here).rejected[0] == other


def test_the_onnx_twin_runs_instead_and_the_engine_passed_over_is_a_fallback_event(tmp_path):
    from onnx_models import small_conv

    twin = small_conv(tmp_path / "conv.onnx")
    write(tmp_path, "conv.engine", engine_bytes((10, 3, 0, 26)))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    with edgeaccel.load(tmp_path, calibrate=False) as model:  # the folder: engine and twin
        assert model.executor.runtime == "onnxruntime"  # on the CPU, or a GPU where its provider loads
        with edgeaccel.load(twin, executor="onnxruntime", device=model.executor.device) as alone:
            exact = model.executor.device == "CPU"  # two GPU sessions may pick different cuDNN algorithms
            np.testing.assert_allclose(model.run(x)[0], alone.run(x)[0], rtol=0 if exact else 1e-4,
                                       atol=0 if exact else 1e-5)
        (event,) = [f for f in model.fallbacks if f.failed == "tensorrt:TensorRT [conv.engine]"]
        assert event.stage == "select" and event.replaced_by == model.executor.name
    assert "conv.engine is a TensorRT engine" in event.error and "needs TensorRT and an NVIDIA GPU" in event.error
    assert "conv.engine" in model.executor.reason and "passed over" in model.executor.reason


def test_explain_names_the_twin_in_the_fix(tmp_path):
    from edgeaccel.executors.tensorrt import TensorRTExecutor
    from onnx_models import small_conv

    small_conv(tmp_path / "det_float.onnx")
    engine = edgeaccel.describe(write(tmp_path, "det_f16.engine", engine_bytes()))
    why, fix = TensorRTExecutor.explain_absence(engine, "TensorRT")
    assert "det_f16.engine is a TensorRT engine" in why
    assert "load its ONNX twin det_float.onnx with it" in fix and "model.fallbacks" in fix
    assert TensorRTExecutor.explain_absence(engine, "CUDA") is None  # not its device


def test_check_reports_the_engine_row_with_the_reason_it_cannot_run(tmp_path):
    from edgeaccel.convert.verify import check
    from onnx_models import small_conv

    reference = small_conv(tmp_path / "conv.onnx")
    write(tmp_path, "conv.engine", engine_bytes())
    data = tmp_path / "samples.npy"
    np.save(data, np.random.default_rng(1).standard_normal((2, 1, 3, 16, 16)).astype(np.float32))
    report = check(tmp_path, reference=reference, data=data, executors=["tensorrt", "onnxruntime"], runs=1,
                   cache=False)
    (row,) = [r for r in report.rows if r.artifact.name == "conv.engine"]
    assert row.format == "tensorrt-engine" and "needs TensorRT and an NVIDIA GPU" in row.error


def test_a_bundle_with_a_broken_engine_keeps_the_error_and_runs_the_rest(tmp_path):
    from onnx_models import small_conv

    small_conv(tmp_path / "conv.onnx")
    write(tmp_path, "conv.engine", b"not an engine at all, just bytes" * 2)
    from edgeaccel.modelfiles import bundle

    found = bundle.resolve(tmp_path)
    assert [a.path.name for a in found.artifacts] == ["conv.onnx"]
    (path, error), = found.invalid
    assert path.name == "conv.engine" and isinstance(error, ModelError) and "not one" in error.message
