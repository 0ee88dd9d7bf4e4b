"""`edgeaccel run --task/--save` from a real subprocess: results in image pixels, an annotated image, JSON, and
one clear error line with exit code 4 for an image that cannot be decoded or a task that does not fit."""

from __future__ import annotations

import json

import pytest

from conftest import IMAGES, MODELS

pytestmark = pytest.mark.shared


def test_detect_with_save_and_pbtxt_labels(cli, tmp_path):
    pytest.importorskip("PIL")
    out_png = tmp_path / "annotated.png"
    out = cli("run", str(MODELS / "traffic_model.tflite"), "--input", str(IMAGES / "traffic_0001.png"),
              "--task", "detect", "--labels", str(MODELS / "traffic_label_map.pbtxt"), "--save", str(out_png),
              "--runs", "2")
    assert out.returncode == 0, out.stderr
    assert "TFLite_Detection_PostProcess" in out.stdout
    boxes = [line.split() for line in out.stdout.splitlines() if "pickup_suv_van" in line or "sedan" in line]
    assert boxes[0][:2] == ["0.414", "pickup_suv_van"] and float(boxes[0][2]) > 780  # image pixels, not 0..1
    assert "postprocess" in out.stdout and out_png.stat().st_size > 1000
    from PIL import Image

    assert Image.open(out_png).size == (960, 540)


def test_auto_task_json_for_segmentation(cli):
    out = cli("run", str(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite"), "--input",
              str(IMAGES / "dog_segmentation.png"), "--task", "auto", "--labels",
              str(MODELS / "pascal_voc_segmentation_labels.txt"), "--runs", "1", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    vision = report["vision"]
    assert report["schema"] == "edgeaccel.run/1" and vision["schema"] == "edgeaccel.vision/1"
    assert vision["task"] == "segment" and vision["classes"][0]["label"] == "dog"
    assert set(vision["timing_ms"]) == {"preprocess", "inference", "postprocess"}


def test_detect_on_a_classifier_exits_4_with_what_fits(cli):
    out = cli("run", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", str(IMAGES / "bird.png"),
              "--task", "detect")
    assert out.returncode == 4
    assert "error: --task detect does not fit" in out.stderr and "hint:" in out.stderr
    assert "Traceback" not in out.stderr


def test_an_undecodable_image_exits_4(cli, tmp_path):
    bad = tmp_path / "photo.png"
    bad.write_bytes(b"this is not an image")
    out = cli("run", str(MODELS / "movenet_single_pose_lightning_ptq.tflite"), "--input", str(bad), "--task", "pose")
    assert out.returncode == 4 and "photo.png" in out.stderr and "Traceback" not in out.stderr


def test_short_label_file_is_a_visible_warning(cli, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("\n".join(f"class{i}" for i in range(10)))
    out = cli("run", str(MODELS / "mobilenet_v1_0.25_128_quant.tflite"), "--input", str(IMAGES / "bird.png"),
              "--task", "classify", "--labels", str(short), "--runs", "1")
    assert out.returncode == 0, out.stderr
    assert "warning   labels from short.txt name 10 of the 1001 classes" in out.stdout


def test_bench_times_the_stages_of_a_task_separately(cli):
    out = cli("bench", str(MODELS / "traffic_model.tflite"), "--mode", "latency", "--runs", "3", "--warmup", "1",
              "--input", str(IMAGES / "traffic_0001.png"), "--task", "detect", "--json")
    assert out.returncode == 0, out.stderr
    staged = [r for r in json.loads(out.stdout)["results"] if r["mode"] == "stages"]
    assert len(staged) == 1 and staged[0]["task"] == "detect" and staged[0]["count"] == 3
    for stage in ("preprocess_ms", "inference_ms", "postprocess_ms"):
        assert staged[0][stage]["p50"] > 0
    assert staged[0]["postprocess_share_of_inference"] > 0


def test_check_compares_decoded_results_and_gates_on_them(cli, tmp_path):
    import shutil

    data = tmp_path / "images"
    data.mkdir()
    shutil.copy(IMAGES / "dog_segmentation.png", data)
    model = str(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite")
    out = cli("check", model, "--reference", model, "--data", str(data), "--task", "segment", "--runs", "1",
              "--min-miou", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["task"] == "segment"
    rows = {r["executor"].split(":")[0]: r["task_metrics"] for r in report["rows"]}
    own = rows["litert"]  # the reference against itself, pooled over every pixel of the samples
    assert (own["miou"], own["fwiou"], own["pixel_agreement"], own["samples"]) == (1.0, 1.0, 1.0, 1)
    for metrics in rows.values():
        assert metrics["fwiou"] > 0.9  # and any other executor that runs it agrees on the dog
    strict = cli("check", model, "--reference", model, "--data", str(data), "--task", "segment", "--runs", "1",
                 "--min-miou", "1.01")
    assert strict.returncode == 1 and "miou 1 against the reference is below 1.01" in strict.stderr


def test_task_gates_need_a_task(cli):
    """The task is on by default (--task auto); a task gate with the task turned off is refused."""
    model = str(MODELS / "mobilenet_v1_0.25_128_quant.tflite")
    out = cli("check", model, "--reference", model, "--data", str(IMAGES), "--min-precision", "0.9",
              "--task", "none")
    assert out.returncode == 4 and "--task none turns it off" in out.stderr


def test_default_segment_gate_ignores_specks(cli, tmp_path):
    """The same quantized DeepLab on LiteRT and OpenVINO agrees on 99% of the pixels; a class covering 0.07% of
    them (IoU 0.4) drags the plain mIoU under 0.9. The default gate reads mIoU over the classes covering at
    least 0.5% of the pixels on one side, and passes it; a class id map that differs everywhere still fails."""
    import shutil

    pytest.importorskip("openvino")
    data = tmp_path / "images"
    data.mkdir()
    for name in ("dog_segmentation.png", "cat.png", "bird.png", "grace_hopper.png"):
        shutil.copy(IMAGES / name, data)
    model = str(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite")
    out = cli("check", model, "--reference", model, "--data", str(data), "--runs", "0", "--executor", "litert",
              "--executor", "openvino", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["task"] == "segment"  # recognized: no --task given
    ov = next(r["task_metrics"] for r in report["rows"] if r["executor"].startswith("openvino"))
    assert ov["miou"] < ov["miou_major"] and ov["miou_major"] >= 0.9 and ov["pixel_agreement"] > 0.98
