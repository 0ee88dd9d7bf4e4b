"""A new user's first hour: the command line on real models and models the tests build. Every error
names its cause first, in a few lines, with the documented exit code; no answer is shown as what it is not;
the cache can be seen, bypassed and cleared."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import IMAGES, MODELS, without

pytestmark = pytest.mark.shared
pytest.importorskip("onnx", reason="the tests build ONNX models")


def _onnx(path: Path, nodes, inputs, outputs, initializers=None) -> Path:
    from onnx_models import save

    return save(nodes, inputs, outputs, initializers or {}, path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Small float ONNX models: a conv on 16x16 images (two weight seeds), the same conv with a dynamic H and W,
    a 63-coordinate "landmark" vector, and a 10-class classifier whose scores come out as 1x10x1x1."""
    from onnx import TensorProto, helper
    from onnx_models import small_conv

    folder = tmp_path_factory.mktemp("built")
    rng = np.random.default_rng(0)
    landmarks = _onnx(folder / "landmarks.onnx", [helper.make_node("Mul", ["x", "k"], ["y"])],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 63])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 63])],
                      {"k": np.full((1, 63), 100.0, np.float32)})
    classifier = _onnx(folder / "classifier.onnx",
                       [helper.make_node("Conv", ["x", "W"], ["c"], kernel_shape=[3, 3]),
                        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
                        helper.make_node("Softmax", ["p"], ["y"], axis=1)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 1, 1])],
                       {"W": rng.standard_normal((10, 3, 3, 3)).astype(np.float32)})
    labels = folder / "labels.txt"
    labels.write_text("".join(f"thing {i}\n" for i in range(10)))
    return {"conv": small_conv(folder / "conv.onnx", seed=0), "conv_other": small_conv(folder / "other.onnx", seed=1),
            "dynamic": small_conv(folder / "dynamic.onnx", dynamic=True), "landmarks": landmarks,
            "classifier": classifier, "labels": labels, "folder": folder}


def _assert_clear_error(out: subprocess.CompletedProcess, code: int, *needles: str, max_lines: int = 8) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= max_lines, out.stderr
    for needle in needles:
        assert needle in out.stderr, (needle, out.stderr)


# -- item 9: executor names -------------------------------------------------------------------------------

@pytest.mark.parametrize("typed, runtime", [("LiteRT", "litert"), ("tflite", "litert"), ("OV", "openvino")])
def test_executor_names_are_case_insensitive_with_aliases(cli, typed, runtime):
    out = cli("run", MODELS / "split_concat.tflite", "--executor", typed, "--runs", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["executor"]["runtime"] == runtime


def test_unknown_executor_is_a_usage_error_listing_the_valid_ones(cli):
    out = cli("run", MODELS / "split_concat.tflite", "--executor", "tensorrtx")
    _assert_clear_error(out, 2, "unknown executor 'tensorrtx'", "litert, onnxruntime, openvino", max_lines=2)


def test_load_names_a_wrong_executor_clearly():
    """load() takes the names --executor takes ("tflite" is LiteRT); a name nothing knows is a ConfigError
    that lists the valid ones."""
    import edgeaccel

    with edgeaccel.load(MODELS / "split_concat.tflite", executor="tflite", calibrate=False) as model:
        assert model.executor.name.startswith("litert")
    with pytest.raises(edgeaccel.ConfigError, match="unknown executor 'tfl1te'") as caught:
        edgeaccel.load(MODELS / "split_concat.tflite", executor="tfl1te")
    assert isinstance(caught.value, ValueError) and "litert" in caught.value.hint


# -- item 11: --version; item 10: errors name the cause first with the documented code ----------------------

def test_version(cli):
    import edgeaccel

    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"edgeaccel {edgeaccel.__version__}"


def test_wrong_input_name_says_so(cli, built):
    out = cli("run", built["conv"], "--input", f"foo={IMAGES / 'bird.png'}")
    _assert_clear_error(out, 4, "no input named 'foo'", "['x']")


def test_truncated_onnx_says_truncated(cli, tmp_path):
    data = (MODELS / "mobilenet_v2_1.0_224_quant.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    _assert_clear_error(cli("run", tmp_path / "cut.onnx"), 3, "truncated ONNX model")


def test_missing_model_file_is_a_file_not_found_error(tmp_path):
    import edgeaccel

    with pytest.raises(FileNotFoundError, match="not found"):
        edgeaccel.load(tmp_path / "nothere.onnx")


@without("CUDA")
def test_absent_device_names_the_device_in_a_few_lines(cli):
    out = cli("run", MODELS / "mobilenet_v2_1.0_224_quant.onnx", "--device", "CUDA")
    _assert_clear_error(out, 6, "onnxruntime:CUDA", "no CUDA device", "--device CUDA", max_lines=5)
    assert "not the device asked for" not in out.stderr


def test_a_custom_op_model_exits_6_from_run_and_bench_and_explain_warns(cli):
    model = MODELS / "model_invoking_error.tflite"
    _assert_clear_error(cli("run", model), 6, "fake-op-double")
    _assert_clear_error(cli("bench", model, "--runs", "1", "--requests", "1"), 6, "fake-op-double")
    explained = cli("explain", model)
    assert explained.returncode == 0 and "custom ops ['fake-op-double']" in explained.stderr


def test_a_missing_optional_package_has_its_own_exit_code():
    """matplotlib hidden from a real run of `bench --plot`: exit 8, before anything is measured."""
    code = ("import sys; sys.modules['matplotlib'] = None; from edgeaccel.cli import main; "
            f"sys.exit(main(['bench', {str(MODELS / 'split_concat.tflite')!r}, '--plot', 'x.png']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    _assert_clear_error(out, 8, "--plot needs matplotlib", "pip install 'edgeaccel[plot]'")


def test_long_log_lines_are_cut_to_one_line():
    import logging

    from edgeaccel.cli import _one_short_line

    record = logging.LogRecord("edgeaccel", logging.WARNING, __file__, 1, "fallback: %s", ("x" * 20000,), None)
    _one_short_line(record)
    assert len(record.getMessage()) <= 300 and "20010 chars" in record.getMessage()


# -- item 8: --normalize as people type it ------------------------------------------------------------------

def test_normalize_minus_one_one_as_typed(cli, built):
    out = cli("run", built["conv"], "--input", IMAGES / "bird.png", "--normalize", "-1,1", "--runs", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert "scaled to -1,1" in json.loads(out.stdout)["inputs"][0]["source"]


# -- item 4: what run shows per kind of output ----------------------------------------------------------------

def test_landmarks_are_not_shown_as_class_scores(cli, built, tmp_path):
    saved = tmp_path / "out.npz"
    out = cli("run", built["landmarks"], "--runs", "1", "--json", "--save-outputs", saved)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["top_k"] == [] and report["kind"] == "a vector of 63 values"
    values = np.asarray(report["outputs"][0]["values"], np.float32)
    assert values.shape == (1, 63)
    np.testing.assert_array_equal(np.load(saved)["y"], values)
    text = cli("run", built["landmarks"], "--runs", "1")
    assert "top-" not in text.stdout and "class 1" not in text.stdout and "values" in text.stdout


def test_a_1x10x1x1_classifier_gets_a_top_k_of_probabilities(cli, built):
    out = cli("run", built["classifier"], "--input", IMAGES / "bird.png", "--labels", built["labels"], "--runs", "1",
              "--top-k", "3", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["kind"] == "classifier" and report["top_k_of"] == "probabilities"
    scores = np.asarray(report["outputs"][0]["values"]).reshape(-1)
    assert [t["index"] for t in report["top_k"]] == list(np.argsort(-scores, kind="stable")[:3])
    assert report["top_k"][0]["label"] == f"thing {report['top_k'][0]['index']}"


def test_pose_model_output_is_keypoints_with_values(cli):
    out = cli("run", MODELS / "movenet_single_pose_lightning_ptq.tflite", "--input", IMAGES / "squat.png",
              "--runs", "1", "--json")
    report = json.loads(out.stdout)
    assert report["top_k"] == [] and report["kind"].startswith("points (17 x 3)")
    assert np.asarray(report["outputs"][0]["values"]).shape == (1, 1, 17, 3)


def test_openvino_ir_scores_are_labelled_raw_and_the_tflite_ones_probabilities(cli):
    args = ("--input", IMAGES / "bird.png", "--labels", MODELS / "imagenet_labels.txt", "--runs", "1", "--json")
    ir = json.loads(cli("run", MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml", *args).stdout)
    tfl = json.loads(cli("run", MODELS / "mobilenet_v2_1.0_224_quant.tflite", *args).stdout)
    assert ir["top_k"][0]["label"] == tfl["top_k"][0]["label"] == "chickadee"
    assert ir["top_k_of"].startswith("raw uint8") and tfl["top_k_of"] == "probabilities"
    assert 0 < tfl["top_k"][0]["score"] <= 1 < ir["top_k"][0]["score"]


# -- item 6: a folder or list is one model -------------------------------------------------------------------

def test_a_folder_of_unrelated_models_is_refused_with_their_signatures(cli, tmp_path):
    for name in ("movenet_single_pose_lightning_ptq.tflite", "mobilenet_v1_0.25_128_quant.tflite"):
        shutil.copy(MODELS / name, tmp_path / name)
    _assert_clear_error(cli("run", tmp_path), 3, "2 different models", "movenet_single_pose_lightning_ptq.tflite",
                        "inputs 1x192x192x3", "inputs 1x128x128x3")
    _assert_clear_error(cli("run", tmp_path / "movenet_single_pose_lightning_ptq.tflite",
                            tmp_path / "mobilenet_v1_0.25_128_quant.tflite"), 3, "2 different models")


def test_a_folder_holding_one_model_and_its_twin_runs(cli, tmp_path):
    for name in ("mobilenet_v1_0.25_128_quant.tflite", "mobilenet_v1_0.25_128_quant_edgetpu.tflite"):
        shutil.copy(MODELS / name, tmp_path / name)
    out = cli("run", tmp_path, "--runs", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["model"]["path"].endswith("mobilenet_v1_0.25_128_quant.tflite")


# -- item 5: check gates every output kind --------------------------------------------------------------------

def test_check_fails_an_artifact_that_strays_from_the_reference(cli, built, tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).random((4, 1, 3, 16, 16), np.float32))
    same = cli("check", built["conv"], "--reference", built["conv"], "--data", data, "--runs", "1",
               "--executor", "onnxruntime")
    assert same.returncode == 0, same.stderr
    other = cli("check", built["conv_other"], "--reference", built["conv"], "--data", data, "--runs", "1",
                "--executor", "onnxruntime", "--json")
    assert other.returncode == 1, other.stderr
    assert "other.onnx on onnxruntime:CPU: relative error" in other.stderr
    row = next(r for r in json.loads(other.stdout)["rows"] if r["artifact"].endswith("other.onnx"))
    assert row["rel_error"] > 0.25


def test_size_column_says_larger_for_a_larger_file():
    from edgeaccel.convert.verify import size_vs_reference

    assert size_vs_reference(0.4) == "2.50x larger"
    assert size_vs_reference(4.0) == "4.00x smaller"
    assert size_vs_reference(1.0) == "same"


# -- item 2: tune, the cache, --no-cache ------------------------------------------------------------------------

def test_tune_that_runs_nothing_fails_and_keeps_nothing(cli, built, tmp_path):
    cache = tmp_path / "cache"
    tuned = cli("tune", MODELS / "model_invoking_error.tflite", "--cache-dir", cache)
    assert tuned.returncode == 6 and "Traceback" not in tuned.stderr
    assert "no measurement was kept" in tuned.stderr and "fake-op-double" in tuned.stderr
    assert not list((cache / "calibration").glob("*.json"))
    # a dynamic model is measured on valid synthetic inputs (no longer invented 1x1 images), and a run after it works
    tuned = cli("tune", built["dynamic"], "--cache-dir", cache)
    assert tuned.returncode == 0, tuned.stderr
    assert "[E:onnxruntime" not in tuned.stderr  # ONNX Runtime's own red log stays out
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(0).random((1, 3, 24, 24), np.float32))
    ran = cli("run", built["dynamic"], "--cache-dir", cache, "--input", sample, "--runs", "1")
    assert ran.returncode == 0, ran.stderr


def test_tune_on_real_inputs_then_inspect_bypass_and_clear_the_cache(cli, built, tmp_path):
    cache = tmp_path / "cache"
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(0).random((1, 3, 24, 24), np.float32))
    tuned = cli("tune", built["dynamic"], "--cache-dir", cache, "--input", f"x={sample}")
    assert tuned.returncode == 0, tuned.stderr
    info = json.loads(cli("cache", "info", "--cache-dir", cache, "--json").stdout)
    assert info["folder"] == str(cache) and info["parts"]["calibration"]["files"] == 1
    assert info["calibrations"][0]["artifacts"][0].endswith("dynamic.onnx") and info["calibrations"][0]["eligible"]
    measured = json.loads(cli("run", built["dynamic"], "--cache-dir", cache, "--input", sample, "--runs", "1",
                              "--json").stdout)
    assert measured["executor"]["measured"] is True
    bypassed = json.loads(cli("run", built["dynamic"], "--cache-dir", cache, "--no-cache", "--input", sample,
                              "--runs", "1", "--json").stdout)
    assert bypassed["executor"]["measured"] is False
    cleared = cli("cache", "clear", "--calibration", "--cache-dir", cache)
    assert cleared.returncode == 0 and "cleared calibration" in cleared.stdout
    assert json.loads(cli("cache", "info", "--cache-dir", cache, "--json").stdout)["calibrations"] == []


# -- the README's Python example: a public path -> input helper --------------------------------------------------

def test_image_input_is_what_run_feeds_the_model(cli, labels):
    import edgeaccel

    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.tflite") as model:
        image = edgeaccel.image_input(IMAGES / "bird.png", model)
        assert image.shape == (1, 224, 224, 3) and image.dtype == np.uint8
        scores = model.run(image, dequantize=True)[0].reshape(-1)
        assert labels[int(scores.argmax())] == "chickadee"
        with pytest.raises(edgeaccel.InputError, match="no input named 'nope'"):
            edgeaccel.image_input(IMAGES / "bird.png", model, which="nope")
    out = cli("run", MODELS / "mobilenet_v2_1.0_224_quant.tflite", "--input", IMAGES / "bird.png", "--runs", "1",
              "--json")
    assert json.loads(out.stdout)["top_k"][0]["index"] == int(scores.argmax())
