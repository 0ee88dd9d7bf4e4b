"""ONNX -> int8 QDQ ONNX and OpenVINO IR on a classifier the test trains (numpy, no TensorFlow): agreement with
the float model on held-out samples, size, the bundle that `edgeaccel.load` reads, `edgeaccel check`, and the
errors for what cannot be converted."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra is part of dev; without it these tests cannot run")
pytest.importorskip("openvino", reason="the openvino extra is part of dev")

import edgeaccel  # noqa: E402
from convert_helpers import dataset, mlp_onnx, mlp_predict, top1, train_mlp  # noqa: E402
from edgeaccel.convert import check, convert  # noqa: E402


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """(float ONNX path, held-out images, float scores, calibration .npy, params)."""
    folder = tmp_path_factory.mktemp("mlp")
    x, y = dataset(500, seed=1)
    params = train_mlp(x, y)
    held, held_labels = dataset(300, seed=2)
    scores = mlp_predict(params, held)
    accuracy = (top1(scores) == held_labels).mean()
    assert 0.6 < accuracy < 0.99, f"the task must not be saturated for agreement to mean anything ({accuracy})"
    np.save(folder / "calib.npy", x[:200])
    np.save(folder / "held.npy", held)
    return mlp_onnx(params, folder / "mlp.onnx"), held, scores, folder / "calib.npy", folder / "held.npy"


@pytest.fixture(scope="module")
def bundle(mlp, tmp_path_factory):
    path, _, _, calib, _ = mlp
    out = tmp_path_factory.mktemp("bundle")
    return convert(path, "onnx-int8,openvino-int8,openvino", out, calibration=calib, force=True)


def _scores(model_path, images, **load) -> np.ndarray:
    with edgeaccel.load(model_path, **load) as model:
        return np.concatenate([model.run(img[None], quantize=True, dequantize=True)[0] for img in images])


@pytest.mark.slow
def test_float_onnx_matches_the_numpy_model(mlp):
    path, held, scores, _, _ = mlp
    got = _scores(path, held)
    np.testing.assert_allclose(got, scores, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["onnx-int8", "openvino-int8"])
def test_int8_artifacts_agree_and_are_smaller(mlp, bundle, target):
    path, held, scores, _, _ = mlp
    artifact = next(a for a in bundle.artifacts if a.target == target)
    got = _scores(artifact.path, held)
    agreement = (top1(got) == top1(scores)).mean()
    assert agreement >= 0.98, f"{target}: top-1 agreement {agreement:.3f}"
    ratio = path.stat().st_size / artifact.size_bytes
    assert ratio >= 3.0, f"{target}: only {ratio:.2f}x smaller"
    assert edgeaccel.describe(artifact.path).quantized


def test_float_ir_keeps_f32_weights(mlp, bundle):
    path, held, scores, _, _ = mlp
    ir = next(a for a in bundle.artifacts if a.target == "openvino")
    np.testing.assert_allclose(_scores(ir.path, held[:20]), scores[:20], atol=1e-5)  # no f16 compression
    assert ir.size_bytes > 0.9 * path.stat().st_size


@pytest.mark.slow
def test_quantized_onnx_loads_in_the_installed_onnxruntime(tmp_path, mlp):
    """The writer's IR version is lowered to what ORT reads (runtime facts: onnx writes 14, ORT 1.31 reads 13)."""
    from edgeaccel.convert.onnx_util import max_ir_version

    import onnx

    calib = mlp[3]
    model = onnx.load(str(mlp[0]))
    model.ir_version = onnx.IR_VERSION
    onnx.save(model, str(tmp_path / "new_ir.onnx"))
    result = convert(tmp_path / "new_ir.onnx", "onnx-int8", tmp_path / "out", calibration=calib)
    written = onnx.load(str(result.artifacts[0].path))
    assert written.ir_version <= max_ir_version()
    with edgeaccel.load(result.artifacts[0].path, executor="onnxruntime") as m:
        assert m.executor.runtime == "onnxruntime"


def test_bundle_loads_and_names_its_reference(mlp, bundle):
    from edgeaccel.modelfiles import bundle as bundle_mod

    found = bundle_mod.read_manifest(bundle.manifest)
    assert {a.path.name for a in found.artifacts} == {a.path.name for a in bundle.artifacts}
    assert found.reference.name == "mlp_float.onnx" and found.reference.is_file()
    # every 5th of the 200 calibration samples is held back: the quantizer saw 160, check compares on 40
    calib = np.load(mlp[3])
    assert found.calibration.name == "calibration.npy" and np.load(found.calibration).shape == (160, 16, 16, 3)
    np.testing.assert_array_equal(np.load(found.holdout), calib[4::5])
    np.testing.assert_array_equal(np.load(found.calibration), np.delete(calib, np.s_[4::5], axis=0))
    assert all(found.notes[a.path] for a in found.artifacts)
    with edgeaccel.load(bundle.out) as model:
        assert model.info.path.name in {a.path.name for a in bundle.artifacts}
        assert model.run(mlp[1][:1], quantize=True)[0].shape == (1, 10)


@pytest.mark.slow
def test_check_reports_agreement_size_and_latency(mlp, bundle):
    _, held, scores, _, held_npy = mlp
    report = check(bundle.out, data=held_npy, runs=3)
    assert report.classifier and report.samples == len(held)
    int8_ort = report.row("mlp_int8.onnx", "onnxruntime")
    # the check's own number matches an independent computation through edgeaccel.load
    got = _scores(bundle.out / "mlp_int8.onnx", held, executor="onnxruntime")
    assert int8_ort.top1_agreement == pytest.approx((top1(got) == top1(scores)).mean())
    assert int8_ort.size_ratio >= 3.0 and int8_ort.latency_ms["runs"] == 3
    assert 0 < int8_ort.mean_abs_error <= int8_ort.max_abs_error < 0.5
    reference = report.row("mlp_float.onnx", "onnxruntime")
    assert reference.is_reference and reference.max_abs_error == 0
    assert {r.executor.split(":")[0] for r in report.rows if r.artifact.name == "mlp_int8.onnx"} == \
        {"onnxruntime", "openvino"}
    assert all(r.error is None for r in report.rows)
    assert "mlp_int8.xml" in report.table()


def test_cli_convert_then_check_json(cli, mlp, tmp_path):
    path, _, _, calib, held_npy = mlp
    out = tmp_path / "cli"
    done = cli("convert", str(path), "--to", "onnx-int8", "--calibration", str(calib), "--out", str(out), "--json",
               timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["schema"] == "edgeaccel.convert/1" and result["artifacts"][0]["target"] == "onnx-int8"
    # 40 of the 200 samples held back, and the artifact checked on them when it was written
    assert (result["calibration_samples"], result["holdout_samples"]) == (160, 40)
    verdict = result["artifacts"][0]["check"]
    assert verdict["passed"] is True and verdict["data"] == "held-out" and verdict["samples"] == 40
    done = cli("check", str(out), "--data", str(held_npy), "--runs", "2", "--executor", "onnxruntime", "--json",
               timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    row = next(r for r in report["rows"] if r["artifact"].endswith("mlp_int8.onnx"))
    assert row["top1_agreement"] >= 0.98 and row["executor"] == "onnxruntime:CPU"
    # --min-top1 gates a pipeline: an impossible bar fails with a line naming the artifact
    done = cli("check", str(out), "--data", str(held_npy), "--runs", "1", "--executor", "onnxruntime", "--min-top1",
               "1.01", timeout=300)
    assert done.returncode == 1 and "mlp_int8.onnx on onnxruntime:CPU: top-1 agreement" in done.stderr


def test_cli_errors_are_one_line_with_an_exit_code(cli, mlp, tmp_path):
    path = mlp[0]
    done = cli("convert", str(path), "--to", "onnx-int8", "--out", str(tmp_path / "x"), timeout=120)
    assert done.returncode == 1
    assert "onnx-int8 needs calibration data" in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr


# -- what cannot be converted gets an error naming the op, input or file -----------------------------------

def test_tflite_targets_need_a_tensorflow_model(mlp, tmp_path):
    with pytest.raises(edgeaccel.ConversionError, match="tflite-int8 is made from a TensorFlow model"):
        convert(mlp[0], "tflite-int8", tmp_path, calibration=mlp[3])


def test_unknown_target_lists_the_known_ones(mlp, tmp_path):
    with pytest.raises(edgeaccel.ConversionError, match="unknown target 'tensorrt'") as info:
        convert(mlp[0], "onnx-int8,tensorrt", tmp_path)
    assert "onnx-int8" in info.value.hint and "openvino" in info.value.hint


def test_custom_op_is_named(tmp_path, mlp):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Warp", ["x"], ["y"], domain="com.example")], "custom",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                              ir_version=9)
    onnx.save(model, str(tmp_path / "custom.onnx"))
    with pytest.raises(edgeaccel.ConversionError, match=r"custom ops \(com\.example\.Warp\)"):
        convert(tmp_path / "custom.onnx", "onnx-int8", tmp_path / "out", calibration=mlp[3])
    with pytest.raises(edgeaccel.ConversionError, match="Warp"):
        convert(tmp_path / "custom.onnx", "openvino", tmp_path / "out2")


def test_output_folder_is_not_overwritten_by_accident(mlp, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(edgeaccel.ConversionError, match="not empty") as info:
        convert(mlp[0], "openvino", tmp_path)
    assert "--force" in info.value.hint


def test_failed_conversion_leaves_no_half_written_bundle(mlp, tmp_path):
    np.save(tmp_path / "wrong.npy", np.zeros((4, 16, 16), np.float32))
    out = tmp_path / "out"
    with pytest.raises(edgeaccel.ConversionError, match=r"wrong\.npy has shape \[4, 16, 16\]; input 'image'"):
        convert(mlp[0], "onnx-int8", out, calibration=tmp_path / "wrong.npy")
    assert not out.exists()  # the folder it made, and the reference copied into it before the error, are gone
    out.mkdir()
    with pytest.raises(edgeaccel.ConversionError):
        convert(mlp[0], "onnx-int8", out, calibration=tmp_path / "wrong.npy")
    assert out.is_dir() and not any(out.iterdir())  # a folder the caller made stays, emptied of what we wrote


@pytest.mark.slow
@pytest.mark.shared
def test_a_quantized_tflite_is_not_quantized_again(tmp_path):
    from conftest import IMAGES, MODELS

    source = MODELS / "mobilenet_v2_1.0_224_quant.tflite"
    with pytest.raises(edgeaccel.ConversionError, match="already quantized; onnx-int8 is made from a float model"):
        convert(source, "onnx-int8", tmp_path / "a", calibration=IMAGES)
    result = convert(source, "openvino", tmp_path / "b")  # read as it is: an IR of the quantized original
    assert result.artifacts[0].path.name == "mobilenet_v2_1.0_224_quant_original.xml"
    assert result.reference.name == "mobilenet_v2_1.0_224_quant_original.tflite"
