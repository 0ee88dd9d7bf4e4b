"""`edgeaccel check` gates on by default, on samples the quantizer never saw, and `convert` marks an artifact that
fails them so that `load` never picks it silently. Real runtimes on models the tests build: the numpy-trained MLP
classifier (convert_helpers.py) converted to int8, its weights scrambled, its class ids permuted; YOLO-layout
detectors whose outputs the tests set (vision_models.py), one with every class label wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra is part of dev; without it these tests cannot run")
pytest.importorskip("openvino", reason="the openvino extra is part of dev")

import edgeaccel  # noqa: E402
from convert_helpers import dataset, mlp_onnx, train_mlp  # noqa: E402
from edgeaccel.convert import convert  # noqa: E402
from vision_models import INPUT, candidates, constant_output  # noqa: E402


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """(folder, float ONNX, params, calibration .npy of 100 samples, held-out .npy)."""
    folder = tmp_path_factory.mktemp("gates")
    x, y = dataset(500, seed=1)
    params = train_mlp(x, y)
    np.save(folder / "calib.npy", x[:100])
    np.save(folder / "held.npy", dataset(120, seed=2)[0])
    return folder, mlp_onnx(params, folder / "mlp.onnx"), params, folder / "calib.npy", folder / "held.npy"


@pytest.fixture(scope="module")
def good_bundle(mlp, tmp_path_factory):
    folder, path, _, calib, _ = mlp
    return convert(path, "onnx-int8", tmp_path_factory.mktemp("good"), calibration=calib, force=True)


def _variant(params: dict, path, change) -> object:
    changed = {k: v.copy() for k, v in params.items()}
    change(changed)
    return mlp_onnx(changed, path)


# -- the default gates, through the CLI --------------------------------------------------------------------

def test_a_working_int8_artifact_passes_with_default_flags(cli, good_bundle):
    done = cli("check", good_bundle.out, "--runs", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["task"] == "classify" and report["data_kind"] == "held-out" and report["samples"] == 20
    row = next(r for r in report["rows"] if r["artifact"].endswith("mlp_int8.onnx"))
    assert row["task_metrics"]["top1"] >= 0.9 and row["rel_error"] < 0.25 and not report["failures"]


def test_scrambled_weights_fail_with_default_flags(cli, mlp, tmp_path):
    folder, path, params, _, held = mlp
    rng = np.random.default_rng(7)
    scrambled = _variant(params, tmp_path / "scrambled.onnx",
                         lambda p: p.update(w1=rng.permutation(p["w1"].reshape(-1)).reshape(p["w1"].shape)))
    done = cli("check", scrambled, "--reference", path, "--data", held, "--runs", "0")
    assert done.returncode == 1, done.stdout
    assert "error: scrambled.onnx on onnxruntime:CPU: relative error" in done.stderr
    assert "top-1 agreement over" in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr


def test_permuted_class_ids_fail_with_default_flags(cli, mlp, tmp_path):
    """Every label wrong: the class columns of the last layer rotated by one."""
    folder, path, params, _, held = mlp
    shifted = _variant(params, tmp_path / "shifted.onnx",
                       lambda p: p.update(w2=np.roll(p["w2"], 1, axis=1), b2=np.roll(p["b2"], 1)))
    done = cli("check", shifted, "--reference", path, "--data", held, "--runs", "0", "--json")
    assert done.returncode == 1
    failures = json.loads(done.stdout)["failures"]
    assert any("shifted.onnx on onnxruntime:CPU: top-1 agreement over" in line and "below 0.9" in line
               for line in failures), failures
    # --task none turns the task gate off: only the raw relative error is left to judge
    raw = cli("check", shifted, "--reference", path, "--data", held, "--runs", "0", "--task", "none", "--json")
    assert json.loads(raw.stdout)["task"] is None


NAMES = "{0: 'person', 1: 'car', 2: 'dog'}"
ROWS = [(20, 20, 16, 16, 0, 0.9), (44, 40, 12, 20, 1, 0.8), (10, 52, 8, 8, 2, 0.7)]


def _detector(path, rows):
    values = candidates(rows, classes=3).T[None]  # [1, 7, 24], Ultralytics' v8 layout
    return constant_output(path, values, metadata={"names": NAMES, "imgsz": f"[{INPUT}, {INPUT}]"})


def test_a_detector_with_every_label_wrong_fails_though_its_tensors_are_close(cli, tmp_path):
    reference = _detector(tmp_path / "ref.onnx", ROWS)
    wrong = _detector(tmp_path / "wrong.onnx", [(*r[:4], (r[4] + 1) % 3, r[5]) for r in ROWS])
    close = _detector(tmp_path / "close.onnx", [(*r[:5], r[5] - 0.03) for r in ROWS])  # int8-like score noise
    np.save(tmp_path / "images.npy", np.random.default_rng(0).random((3, 1, 3, INPUT, INPUT), np.float32))
    done = cli("check", wrong, "--reference", reference, "--data", tmp_path / "images.npy", "--runs", "0", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    row = next(r for r in report["rows"] if r["artifact"].endswith("wrong.onnx"))
    assert report["task"] == "detect" and row["rel_error"] < 0.25  # the raw tensor gate alone passed it
    assert row["task_metrics"]["precision"] == 0 and row["task_metrics"]["recall"] == 0
    assert any("wrong.onnx on onnxruntime:CPU: precision 0 against the reference is below 0.9" in line
               for line in report["failures"])
    done = cli("check", close, "--reference", reference, "--data", tmp_path / "images.npy", "--runs", "0")
    assert done.returncode == 0, done.stderr


# -- held-out samples ----------------------------------------------------------------------------------------

def test_convert_holds_samples_back_and_check_uses_them(mlp, good_bundle):
    from edgeaccel.modelfiles import bundle as bundle_mod
    from edgeaccel.schema import load_yaml

    calib = np.load(mlp[3])
    manifest = load_yaml(good_bundle.manifest)
    split = manifest["calibration_split"]
    assert split["held_out"] == [f"calib.npy[{i}]" for i in range(4, 100, 5)]
    assert len(split["calibrated"]) == 80 and not set(split["calibrated"]) & set(split["held_out"])
    found = bundle_mod.read_manifest(good_bundle.manifest)
    np.testing.assert_array_equal(np.load(found.holdout), calib[4::5])
    entry = manifest["artifacts"][0]["check"]
    assert entry["passed"] is True and entry["data"] == "held-out" and entry["samples"] == 20
    assert entry["task"] == "classify" and entry["top1"] >= 0.9


def test_a_bundle_without_held_out_samples_says_so(cli, good_bundle, tmp_path):
    import shutil

    import yaml

    old = tmp_path / "old"
    shutil.copytree(good_bundle.out, old)
    manifest = yaml.safe_load((old / "edgeaccel-bundle.yaml").read_text())
    for key in ("holdout", "calibration_split"):
        manifest.pop(key)
    for entry in manifest["artifacts"]:
        entry.pop("check")
    (old / "edgeaccel-bundle.yaml").write_text(yaml.safe_dump(manifest))
    done = cli("check", old, "--runs", "0", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["data_kind"] == "calibration" and report["samples"] == 80
    assert "no held-out samples" in report["notes"][0] and "warning: no held-out samples" in done.stderr


def test_one_calibration_sample_holds_nothing_back(mlp, tmp_path):
    from edgeaccel.convert.calibration import load, split_holdout

    one = tmp_path / "one.npy"
    np.save(one, np.load(mlp[3])[:1])
    with edgeaccel.load(mlp[1]) as model:
        calib, held = split_holdout(load(one, model.inputs))
        assert len(calib) == 1 and held is None
        calib, held = split_holdout(load(mlp[3], model.inputs).head(3))
        assert len(calib) == 2 and held.sample_names() == ["calib.npy[2]"]  # fewer than 5: the last one


# -- a failed artifact is marked and never picked silently ---------------------------------------------------

@pytest.fixture(scope="module")
def failing_bundle(mlp, tmp_path_factory):
    """Calibrated on unrepresentative data: the samples the quantizer sees are 50 times darker than the held-out
    ones (every 5th), so the int8 artifact clips what it will be fed; the float IR beside it is fine."""
    folder, path, _, calib, _ = mlp
    x = np.load(calib)
    dark = x * 0.02
    dark[4::5] = x[4::5]
    np.save(folder / "dark.npy", dark)
    return convert(path, "onnx-int8,openvino", tmp_path_factory.mktemp("failing"), calibration=folder / "dark.npy",
                   force=True)


def test_convert_marks_the_failing_artifact_failed(failing_bundle):
    int8 = next(a for a in failing_bundle.artifacts if a.target == "onnx-int8")
    ir = next(a for a in failing_bundle.artifacts if a.target == "openvino")
    bad, good = failing_bundle.check_of(int8.path), failing_bundle.check_of(ir.path)
    assert bad["passed"] is False and "relative error" in bad["reason"] and bad["rel_error"] > 0.25
    assert good["passed"] is True and good["reason"] == ""
    from edgeaccel.modelfiles import bundle as bundle_mod

    found = bundle_mod.read_manifest(failing_bundle.manifest)
    assert found.failed_check(int8.path) == bad["reason"] and found.failed_check(ir.path) is None


def test_load_leaves_a_failed_artifact_out_with_the_reason(cli, failing_bundle):
    with edgeaccel.load(failing_bundle.out) as model:
        assert model.info.path.name == "mlp_float.xml"
        left_out = [f for f in model.fallbacks if f.failed == "[mlp_int8.onnx]"]
        assert left_out and "failed its check against the float reference" in str(left_out[0])
        rejected = [r for r in model.ranking.rejected if r.artifact.path.name == "mlp_int8.onnx"]
        assert rejected and rejected[0].reason.startswith("left out: it failed its check")
    done = cli("explain", failing_bundle.out)
    assert done.returncode == 0, done.stderr
    assert "- every executor [mlp_int8.onnx]: left out: it failed its check" in done.stdout


def test_a_pinned_failed_artifact_warns_but_runs(failing_bundle, mlp):
    held = np.load(mlp[4])[:1]
    with pytest.warns(UserWarning, match="mlp_int8.onnx FAILED its check.*loaded alone"):
        with edgeaccel.load(failing_bundle.out / "mlp_int8.onnx") as model:
            assert model.run(held, quantize=True)[0].shape == (1, 10)
    # executor= naming the only runtime that reads it: onnxruntime reads no other artifact of this bundle
    with pytest.warns(UserWarning, match="executor='onnxruntime' reads no other artifact"):
        with edgeaccel.load(failing_bundle.out, executor="onnxruntime") as model:
            assert model.info.path.name == "mlp_int8.onnx"


def test_no_check_skips_the_check(mlp, tmp_path):
    folder, path, _, calib, _ = mlp
    result = convert(path, "onnx-int8", tmp_path / "unchecked", calibration=calib, check=False)
    assert result.check_note.startswith("not checked") and result.checks == {}
    from edgeaccel.schema import load_yaml

    assert "check" not in load_yaml(result.manifest)["artifacts"][0]


def test_when_every_artifact_failed_the_float_reference_runs_or_loading_says_what_to_do(mlp, tmp_path):
    import yaml

    x = np.load(mlp[3])
    dark = x * 0.02  # as failing_bundle: calibrated on dark samples, checked on the held-out normal ones
    dark[4::5] = x[4::5]
    np.save(tmp_path / "dark.npy", dark)
    result = convert(mlp[1], "onnx-int8", tmp_path / "all_failed", calibration=tmp_path / "dark.npy")
    assert result.check_of(result.artifacts[0].path)["passed"] is False
    with pytest.warns(UserWarning, match="every artifact of mlp failed its check.*mlp_float.onnx runs instead"):
        with edgeaccel.load(result.out) as model:
            assert model.info.path.name == "mlp_float.onnx"
            assert [f.failed for f in model.fallbacks] == ["[mlp_int8.onnx]"]
    manifest = yaml.safe_load(result.manifest.read_text())
    del manifest["reference"]
    result.manifest.write_text(yaml.safe_dump(manifest))
    with pytest.raises(edgeaccel.ModelError, match="every artifact of mlp failed its check") as caught:
        edgeaccel.load(result.out)
    assert "pin it" in caught.value.hint


# -- the detector: a YOLOv8-style float model (yolo_like.py) through convert and check ---------------

def test_yolo_like_int8_passes_and_its_whole_graph_int8_fails_with_default_flags(cli, tmp_path):
    """convert keeps the detection head in float: its int8 artifact passes the check convert runs and
    `check` with default flags. The same graph quantized whole (box pixels and class scores under one scale,
    what convert did before) has a small relative error, which passed check then, and now fails it."""
    import yolo_like
    from onnxruntime import quantization as q

    from edgeaccel.convert import calibration as calib_mod

    detector = yolo_like.build(tmp_path / "squares.onnx")
    images = yolo_like.write_images(tmp_path / "calib", range(0, 20))
    held = yolo_like.write_images(tmp_path / "held", range(7000, 7012))
    result = convert(detector, "onnx-int8", tmp_path / "bundle", calibration=images)
    verdict = result.check_of(result.artifacts[0].path)
    assert verdict["passed"] is True and verdict["task"] == "detect" and verdict["precision"] >= 0.9
    done = cli("check", result.out, "--runs", "0", "--data", held)
    assert done.returncode == 0, done.stderr

    feeds = calib_mod.load(images, edgeaccel.describe(detector).inputs).feeds()

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.left = iter(feeds)

        def get_next(self):
            return next(self.left, None)

    whole = tmp_path / "whole_int8.onnx"
    q.quantize_static(str(detector), str(whole), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    done = cli("check", whole, "--reference", detector, "--data", held, "--runs", "0", "--executor", "onnxruntime",
               "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    row = next(r for r in report["rows"] if r["artifact"].endswith("whole_int8.onnx"))
    assert report["task"] == "detect" and (row["error"] or row["rel_error"] < 0.25)
    failures = report["failures"]
    assert any(line.startswith("whole_int8.onnx on onnxruntime:CPU: ") for line in failures), failures


def test_the_reference_runs_on_the_cpu_even_where_an_accelerator_ranks_first(mlp, good_bundle, tmp_path):
    """On a GPU machine whose TensorRT provider could not load, `check` died loading the reference strictly on
    the first-ranked executor. The reference is the exact one: the CPU, whatever ranks first here."""
    from edgeaccel.convert.verify import check
    from edgeaccel.testing.emulated import Faults, emulated_accelerator
    from edgeaccel.testing.plugins import installed_plugins

    _, path, _, _, held = mlp
    broken = emulated_accelerator("refgpu", "RefGPU", "gpu", wraps="onnxruntime",
                                  faults=Faults(load_error="its delegate did not load"))
    with installed_plugins(tmp_path, broken, distribution="emulated-refgpu"):
        assert edgeaccel.select(path).ranking.candidates[0].runtime == "refgpu"  # the accelerator ranks first
        report = check(good_bundle.out, reference=path, data=held, runs=1, cache=False)
    assert report.reference_executor.endswith(":CPU")
