"""TensorFlow/Keras -> TFLite (float, dynamic, full int8), ONNX int8 and OpenVINO IR, on a Keras classifier the
test trains: each quantized artifact keeps top-1 agreement >= 98% with the float model on held-out samples and
is at least 3x smaller than the float file.

These need TensorFlow (the `tensorflow` extra, part of `dev`). Without it they are skipped with the reason in
pytest's -ra summary; CI installs `dev`, so there they run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="needs the tensorflow extra (pip install -e '.[dev]' has it)")
pytest.importorskip("tf2onnx", reason="needs the tensorflow extra (tf2onnx)")

import edgeaccel  # noqa: E402
from convert_helpers import dataset, top1, train_keras_cnn  # noqa: E402
from edgeaccel.convert import check, convert  # noqa: E402
from edgeaccel.convert.edgetpu import readiness  # noqa: E402

# Keras 3 passes copy=False to numpy 2 inside its own predict(); not ours to fix
pytestmark = [pytest.mark.slow,  # slow tier: TensorFlow conversions
              pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy:DeprecationWarning")]

ALL_TARGETS = "tflite-float,tflite-dynamic,tflite-int8,onnx-int8,openvino-int8,openvino"


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """(.keras path, Keras model, held-out images, Keras scores on them, calibration .npy)."""
    folder = tmp_path_factory.mktemp("keras")
    x, y = dataset(500, seed=1)
    model = train_keras_cnn(x, y)
    held, held_labels = dataset(300, seed=2)
    scores = model.predict(held, verbose=0)
    accuracy = (top1(scores) == held_labels).mean()
    assert 0.6 < accuracy < 0.99, f"the task must not be saturated for agreement to mean anything ({accuracy})"
    model.save(folder / "cnn.keras")
    np.save(folder / "calib.npy", x[:200])
    return folder / "cnn.keras", model, held, scores, folder / "calib.npy"


@pytest.fixture(scope="module")
def bundle(keras_model, tmp_path_factory):
    path, _, _, _, calib = keras_model
    return convert(path, ALL_TARGETS, tmp_path_factory.mktemp("bundle"), calibration=calib, force=True)


def _scores(model_path, images, **load) -> np.ndarray:
    with edgeaccel.load(model_path, **load) as model:
        return np.concatenate([model.run(img[None], quantize=True, dequantize=True)[0] for img in images])


def _artifact(bundle, target):
    return next(a for a in bundle.artifacts if a.target == target)


def test_float_tflite_is_the_keras_model(keras_model, bundle):
    _, _, held, scores, _ = keras_model
    got = _scores(_artifact(bundle, "tflite-float").path, held)
    np.testing.assert_allclose(got, scores, atol=1e-4)
    info = edgeaccel.describe(bundle.reference)
    assert info.inputs[0].shape == (1, 16, 16, 3) and not info.is_dynamic  # batch fixed to 1, static


@pytest.mark.parametrize("target", ["tflite-int8", "tflite-dynamic", "onnx-int8", "openvino-int8"])
def test_quantized_artifacts_agree_with_the_float_model(keras_model, bundle, target):
    _, _, held, scores, _ = keras_model
    artifact = _artifact(bundle, target)
    got = _scores(artifact.path, held)
    agreement = (top1(got) == top1(scores)).mean()
    assert agreement >= 0.98, f"{target}: top-1 agreement {agreement:.3f} on {len(held)} held-out samples"
    ratio = bundle.reference.stat().st_size / artifact.size_bytes
    assert ratio >= 3.0, f"{target}: {ratio:.2f}x smaller than the float .tflite"


def test_full_int8_tflite_is_integer_end_to_end(bundle):
    info = edgeaccel.describe(_artifact(bundle, "tflite-int8").path)
    assert info.inputs[0].dtype == np.int8 and info.outputs[0].dtype == np.int8
    assert info.inputs[0].quantization is not None
    report = bundle.edgetpu[0]
    assert report.fully_integer and report.ready, "\n".join(report.lines())
    assert "edgetpu_compiler -s -o" in report.command


def test_float_ir_matches_the_float_model(keras_model, bundle):
    _, _, held, scores, _ = keras_model
    np.testing.assert_allclose(_scores(_artifact(bundle, "openvino").path, held[:20]), scores[:20], atol=1e-4)


def test_bundle_loads_and_check_agrees(keras_model, bundle, tmp_path):
    held = keras_model[2]
    with edgeaccel.load(bundle.out) as model:
        assert model.info.path.name in {a.path.name for a in bundle.artifacts}
    np.save(tmp_path / "held.npy", held)
    report = check(bundle.out, data=tmp_path / "held.npy", runs=2, executors=["litert", "onnxruntime"])
    row = report.row("cnn_int8.tflite", "litert")
    got = _scores(_artifact(bundle, "tflite-int8").path, held, executor="litert")
    reference = _scores(bundle.reference, held, executor="litert")
    assert row.top1_agreement == pytest.approx((top1(got) == top1(reference)).mean())
    assert row.top1_agreement >= 0.98 and row.size_ratio >= 3.0
    assert report.edgetpu and report.edgetpu[0].model.name in ("cnn_int8.tflite", "cnn_dynamic.tflite")


def test_uint8_io_and_a_savedmodel_source(keras_model, tmp_path):
    _, model, held, scores, calib = keras_model
    model.export(str(tmp_path / "saved"), verbose=False)
    result = convert(tmp_path / "saved", "tflite-int8", tmp_path / "out", calibration=calib, io_type="uint8")
    artifact = result.artifacts[0]
    info = edgeaccel.describe(artifact.path)
    assert info.inputs[0].dtype == np.uint8 and info.outputs[0].dtype == np.uint8
    agreement = (top1(_scores(artifact.path, held)) == top1(scores)).mean()
    assert agreement >= 0.98


def test_cli_convert_prints_edgetpu_readiness(cli, keras_model, tmp_path):
    path, _, _, _, calib = keras_model
    done = cli("convert", str(path), "--to", "tflite-int8", "--calibration", str(calib), "--max-samples", "50",
               "--out", str(tmp_path / "b"), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Edge TPU readiness of cnn_int8.tflite" in done.stdout and "edgetpu_compiler -s -o" in done.stdout
    assert "calibrated on 40 samples from calib.npy (10 more held out for checking)" in done.stdout  # every 5th
    assert "check: passed" in done.stdout  # the int8 artifact checked on the 10 held-out samples as it was written
    assert "I0000" not in done.stderr and "deprecated" not in done.stderr  # TensorFlow's chatter is filtered
    manifest = (tmp_path / "b" / "edgeaccel-bundle.yaml").read_text()
    assert "reference: cnn_float.tflite" in manifest
    done = cli("check", str(tmp_path / "b"), "--json", "--runs", "2", "--executor", "litert", timeout=300)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert {r["artifact"].split("/")[-1] for r in rows} == {"cnn_float.tflite", "cnn_int8.tflite"}


def test_a_float_tflite_source_becomes_int8_onnx(keras_model, bundle, tmp_path):
    _, _, held, scores, calib = keras_model
    result = convert(bundle.reference, "onnx-int8,onnx-float", tmp_path / "from_tflite", calibration=calib)
    assert [a.path.name for a in result.artifacts] == ["cnn_int8.onnx", "cnn_float.onnx"]
    np.testing.assert_allclose(_scores(result.artifacts[1].path, held[:20]), scores[:20], atol=1e-4)
    agreement = (top1(_scores(result.artifacts[0].path, held)) == top1(scores)).mean()
    assert agreement >= 0.98


# -- what cannot be converted ---------------------------------------------------------------------------

def _save_module(path, fn, spec):
    module = tf.Module()
    module.f = tf.function(fn, input_signature=[spec])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.f.get_concrete_function()})
    return path


def test_dynamic_image_size_names_the_input_and_the_fix(tmp_path):
    spec = tf.TensorSpec([None, None, None, 3], tf.float32, name="frame")
    saved = _save_module(tmp_path / "dyn", lambda x: {"mean": tf.reduce_mean(x, axis=[1, 2])}, spec)
    with pytest.raises(edgeaccel.ConversionError, match=r"input 'frame' has dynamic dimensions \?x\?x\?x3") as info:
        convert(saved, "tflite-float", tmp_path / "out")
    assert "--input-shape frame=1x224x224x3" in info.value.hint
    result = convert(saved, "tflite-float", tmp_path / "out2", input_shapes={"frame": (1, 8, 8, 3)})
    assert edgeaccel.describe(result.reference).inputs[0].shape == (1, 8, 8, 3)


def test_unsupported_op_is_named(tmp_path):
    spec = tf.TensorSpec([1, 4, 4], tf.float32, name="m")
    saved = _save_module(tmp_path / "det", lambda x: {"det": tf.linalg.det(x)}, spec)
    with pytest.raises(edgeaccel.ConversionError, match="tf.MatrixDeterminant"):
        convert(saved, "tflite-float", tmp_path / "out")


def test_calibration_of_the_wrong_shape_names_file_and_input(keras_model, tmp_path):
    np.save(tmp_path / "wrong.npy", np.zeros((8, 32, 32, 3), np.float32))
    with pytest.raises(edgeaccel.ConversionError, match=r"wrong\.npy has shape \[8, 32, 32, 3\]; input "):
        convert(keras_model[0], "tflite-int8", tmp_path / "out", calibration=tmp_path / "wrong.npy")


def test_readiness_of_a_float_tflite(bundle):
    report = readiness(bundle.reference)
    assert not report.fully_integer and not report.ready
    assert any("float32, constant" in t for t in report.wide_tensors)
